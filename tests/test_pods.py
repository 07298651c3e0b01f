"""What a step's pods say (``workloads.run.pods``): unschedulable with the scheduler's and the autoscaler's words,
OOMKilled with the key to raise; on pods and events in the shapes the API server returns them
(``tests.fake_kube``: kube-scheduler's FitError text, GKE cluster-autoscaler's pod events). Pure."""

from __future__ import annotations

import pytest

from tests.fake_kube import AUTOSCALER_MESSAGES, SCHEDULER_MESSAGE, T0, T1, pod_event, step_pod
from tests.lifecycle_walk import settings
from workloads.build.steps import plan_workflow
from workloads.run import pods
from workloads.run.failures import failure_detail

pytestmark = pytest.mark.pure

PLAN = plan_workflow(settings("prod", []))


def test_an_unschedulable_pod_names_its_pool_and_the_schedulers_reason():
    head = step_pod(PLAN.train.manifest, "pathways-head", "unschedulable")
    worker = step_pod(PLAN.train.manifest, "worker", "unschedulable")
    running = step_pod(PLAN.convert.manifest, "convert", "running")
    stuck = pods.unschedulable([worker, running, head])
    assert [(s.pod, s.pool) for s in stuck] == [
        (head["metadata"]["name"], "cpu-np"),
        (worker["metadata"]["name"], "the TPU slice pool"),
    ]
    assert stuck[0].message == SCHEDULER_MESSAGE


def test_a_pod_that_is_scheduled_or_failed_is_not_stuck():
    scheduled = step_pod(PLAN.convert.manifest, "convert", "unschedulable")
    scheduled["status"]["conditions"][0].update(status="True", reason="")
    gated = step_pod(PLAN.convert.manifest, "convert", "unschedulable")
    gated["status"]["conditions"][0]["reason"] = "SchedulingGated"  # not the scheduler's verdict
    oom = step_pod(PLAN.convert.manifest, "convert", "oomkilled", container="convert")
    assert pods.unschedulable([scheduled, gated, oom, {"status": "junk"}, {}]) == []


def test_the_newest_event_of_each_reason_on_that_pod_counts():
    pod = step_pod(PLAN.convert.manifest, "convert", "unschedulable")
    other = step_pod(PLAN.export.manifest, "export", "unschedulable")
    old = pod_event(pod, "FailedScaleUp", at=T0)
    old["message"] = "an older failure"
    events = [
        old,
        pod_event(pod, "FailedScaleUp", at=T1),
        pod_event(pod, "FailedScheduling"),
        pod_event(other, "NotTriggerScaleUp"),
    ]
    assert pods.newest_reasons(events, pod["metadata"]["name"]) == {
        "FailedScaleUp": AUTOSCALER_MESSAGES["FailedScaleUp"],
        "FailedScheduling": SCHEDULER_MESSAGE,
    }
    assert pods.newest_reasons([{"reason": "Pulled", "involvedObject": {"kind": "Pod", "name": "x"}}], "x") == {}


def test_the_explanation_has_the_scheduler_the_autoscaler_and_the_fix():
    pod = step_pod(PLAN.convert.manifest, "convert", "unschedulable")
    (stuck,) = pods.unschedulable([pod])
    reasons = pods.newest_reasons([pod_event(pod, "NotTriggerScaleUp"), pod_event(pod, "FailedScheduling")], stuck.pod)
    fix = pods.pool_fix("cpu-np", capacity="reservation", cpu_machine="n4-standard-64")
    assert pods.explain_unschedulable(stuck, reasons, fix) == (
        f"pod {stuck.pod} (pool cpu-np): scheduler: {SCHEDULER_MESSAGE.rstrip('.')}; autoscaler NotTriggerScaleUp: "
        f"{AUTOSCALER_MESSAGES['NotTriggerScaleUp']}. cpu-np cannot add another n4-standard-64 node: raise "
        "tpu-rl:cpuPool.maxNodes, request more N4_CPUS quota in the region, or choose another "
        "tpu-rl:cpuPool.machineType if the zone is out of it"
    )
    assert "scheduler: " + SCHEDULER_MESSAGE.rstrip(".") in pods.explain_unschedulable(stuck, {}, fix)


@pytest.mark.parametrize(
    ("capacity", "words"),
    [("reservation", "tpu-rl:tpu.reservation"), ("spot", "cannot get spot TPU v6e capacity")],
)
def test_the_fix_for_the_slice_pool_follows_the_capacity(capacity, words):
    assert words in pods.pool_fix("the TPU slice pool", capacity=capacity, cpu_machine="n4-standard-64")


def test_an_oom_killed_container_is_found_now_or_in_its_last_restart():
    oom = step_pod(PLAN.convert.manifest, "convert", "oomkilled", container="convert")
    restarted = step_pod(PLAN.train.manifest, "worker", "oomkilled", container="pathways-worker")
    status = restarted["status"]["containerStatuses"][0]
    status["lastState"], status["state"] = status["state"], {"running": {"startedAt": T1}}
    exited = step_pod(PLAN.export.manifest, "export", "oomkilled", container="export")
    exited["status"]["containerStatuses"][0]["state"]["terminated"]["reason"] = "Error"
    assert pods.oom_killed([exited, restarted, oom]) == sorted(
        [(oom["metadata"]["name"], "convert"), (restarted["metadata"]["name"], "pathways-worker")]
    )


def test_an_oom_kill_of_a_cpu_step_names_its_limit_and_the_key_to_raise():
    oom = step_pod(PLAN.convert.manifest, "convert", "oomkilled", container="convert")
    detail = failure_detail(PLAN.convert, pods.oom_killed([oom]))
    assert detail == (
        f"container convert of pod {oom['metadata']['name']} was OOMKilled at its 168Gi limit: raise "
        "tpu-rl:workflow.stepMemoryGib (and tpu-rl:cpuPool.machineType if the node no longer fits it)"
    )
    head = failure_detail(PLAN.train, [("p", "workload-container")])
    assert "at its 100Gi limit" in head and "HEAD_RESOURCES" in head
    assert failure_detail(PLAN.export, []) == ""
    sidecar_too = failure_detail(PLAN.train, [("a-pod", "pathways-proxy"), ("b-pod", "workload-container")])
    assert sidecar_too.startswith("container workload-container of pod b-pod"), "the step's own container first"
