"""What a step's pods say (``workloads.observe.pod_state``): unschedulable with the scheduler's and the autoscaler's
words, OOMKilled with the key to raise; on pods and events in the shapes the API server returns them
(``tests.fake_kube``: kube-scheduler's FitError text, GKE cluster-autoscaler's pod events). Pure."""

from __future__ import annotations

import pytest

from core.redact import scrub
from core.tpu import Capacity
from infra.k8s import live_objects
from tests.fake_kube import AUTOSCALER_MESSAGES, SCHEDULER_MESSAGE, T0, T1, pod_event, step_pod
from tests.lifecycle_walk import settings
from workloads.observe import pod_state as pods
from workloads.observe.failures import failure_detail
from workloads.specs.step_specs import plan_workflow

pytestmark = pytest.mark.pure

PLAN = plan_workflow(settings("prod", []))
CTX = settings("prod", []).kube_context
"""The kubeconfig context of the stack's cluster, which a fix's command names."""


def typed_pods(raw: list) -> list[live_objects.Pod]:
    """Pods as the reader's boundary hands them on (``infra.k8s.live_objects``)."""
    return live_objects.pods(raw, "test pods")


def typed_events(raw: list) -> list[live_objects.Event]:
    return live_objects.events(raw, "test events")


def test_an_unschedulable_pod_names_its_pool_and_the_schedulers_reason():
    head = step_pod(PLAN.train.manifest, "pathways-head", "unschedulable")
    worker = step_pod(PLAN.train.manifest, "worker", "unschedulable")
    running = step_pod(PLAN.convert.manifest, "convert", "running")
    stuck = pods.unschedulable(typed_pods([worker, running, head]))
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
    assert pods.unschedulable(typed_pods([scheduled, gated, oom, {}])) == []


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
    assert pods.newest_reasons(typed_events(events), pod["metadata"]["name"]) == {
        "FailedScaleUp": AUTOSCALER_MESSAGES["FailedScaleUp"],
        "FailedScheduling": SCHEDULER_MESSAGE,
    }
    assert (
        pods.newest_reasons(typed_events([{"reason": "Pulled", "involvedObject": {"kind": "Pod", "name": "x"}}]), "x")
        == {}
    )


def test_the_explanation_has_the_scheduler_the_autoscaler_and_the_fix():
    pod = step_pod(PLAN.convert.manifest, "convert", "unschedulable")
    (stuck,) = pods.unschedulable(typed_pods([pod]))
    reasons = pods.newest_reasons(
        typed_events([pod_event(pod, "NotTriggerScaleUp"), pod_event(pod, "FailedScheduling")]), stuck.pod
    )
    fix = pods.pool_fix(
        "cpu-np", capacity=Capacity.RESERVATION, cpu_machine="n4-standard-64", version="v6e", context=CTX
    )
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
    assert words in pods.pool_fix(
        "the TPU slice pool", capacity=capacity, cpu_machine="n4-standard-64", version="v6e", context=CTX
    )


def test_an_oom_killed_container_is_found_now_or_in_its_last_restart():
    oom = step_pod(PLAN.convert.manifest, "convert", "oomkilled", container="convert")
    restarted = step_pod(PLAN.train.manifest, "worker", "oomkilled", container="pathways-worker")
    status = restarted["status"]["containerStatuses"][0]
    status["lastState"], status["state"] = status["state"], {"running": {"startedAt": T1}}
    exited = step_pod(PLAN.export.manifest, "export", "oomkilled", container="export")
    exited["status"]["containerStatuses"][0]["state"]["terminated"]["reason"] = "Error"
    assert pods.oom_killed(typed_pods([exited, restarted, oom])) == sorted(
        [(oom["metadata"]["name"], "convert"), (restarted["metadata"]["name"], "pathways-worker")]
    )


def test_an_oom_kill_of_a_cpu_step_names_its_limit_and_the_key_to_raise():
    oom = step_pod(PLAN.convert.manifest, "convert", "oomkilled", container="convert")
    detail = failure_detail(PLAN.convert, pods.oom_killed(typed_pods([oom])))
    assert detail == (
        f"container convert of pod {oom['metadata']['name']} was OOMKilled at its 168Gi limit: raise "
        "tpu-rl:workflow.stepMemoryGib (and tpu-rl:cpuPool.machineType if the node no longer fits it)"
    )
    head = failure_detail(PLAN.train, [("p", "workload-container")])
    assert "at its 100Gi limit" in head and "HEAD_RESOURCES" in head
    assert failure_detail(PLAN.export, []) == ""
    sidecar_too = failure_detail(PLAN.train, [("a-pod", "pathways-proxy"), ("b-pod", "workload-container")])
    assert sidecar_too.startswith("container workload-container of pod b-pod"), "the step's own container first"


# ---------------------------------------------------------------------------------------------
# Every field each function reads, and what it falls back to


def test_events_are_ordered_by_the_time_each_kind_of_recorder_writes():
    """core/v1 events carry lastTimestamp (the legacy recorder), or only eventTime (events.k8s.io, the
    scheduler), or only firstTimestamp; an event with none sorts first; on a tie the later one counts."""
    pod = step_pod(PLAN.convert.manifest, "convert", "unschedulable")
    name = pod["metadata"]["name"]

    def event(message, **times):
        found = pod_event(pod, "FailedScaleUp")
        found.update({"message": message, "lastTimestamp": None, "eventTime": None, "firstTimestamp": None})
        found.update(times)
        return found

    assert pods.newest_reasons(
        typed_events([event("old", lastTimestamp=T0), event("new", lastTimestamp=T1)]), name
    ) == {"FailedScaleUp": "new"}
    assert (
        pods.newest_reasons(typed_events([event("new", eventTime=T1), event("old", eventTime=T0)]), name)[
            "FailedScaleUp"
        ]
        == "new"
    )
    assert pods.newest_reasons(
        typed_events([event("old", firstTimestamp=T0), event("new", firstTimestamp=T1)]), name
    ) == {"FailedScaleUp": "new"}
    assert pods.newest_reasons(
        typed_events([event("new", firstTimestamp=T1), event("old", firstTimestamp=T0)]), name
    ) == {"FailedScaleUp": "new"}
    pulled = {**event("pulled", lastTimestamp=T0), "reason": "Pulled"}
    assert pods.newest_reasons(typed_events([pulled, event("after", lastTimestamp=T1)]), name) == {
        "FailedScaleUp": "after"
    }
    assert pods.newest_reasons(typed_events([event("timed", lastTimestamp=T0), event("untimed")]), name) == {
        "FailedScaleUp": "timed"
    }
    assert pods.newest_reasons(
        typed_events([event("first", lastTimestamp=T1), event("second", lastTimestamp=T1)]), name
    ) == {"FailedScaleUp": "second"}
    assert pods.newest_reasons(typed_events([event("last", lastTimestamp=T1, eventTime=T0)]), name) == {
        "FailedScaleUp": "last"
    }
    assert pods.newest_reasons(typed_events([event("", lastTimestamp=T1)]), name) == {"FailedScaleUp": ""}
    other = step_pod(PLAN.export.manifest, "export", "unschedulable")
    mixed = [pod_event(other, "FailedScaleUp"), {"reason": "Pulled"}, event("mine", lastTimestamp=T1)]
    assert pods.newest_reasons(typed_events(mixed), name) == {"FailedScaleUp": "mine"}, (
        "other pods' and other events are skipped"
    )
    unnamed = {"involvedObject": {"kind": "Pod", "name": name}}
    assert pods.newest_reasons(typed_events([unnamed]), name) == {}, "an event without a reason is not one of these"


def test_the_explanation_cuts_the_servers_words_and_drops_their_final_dot():
    pod = step_pod(PLAN.convert.manifest, "convert", "unschedulable")
    pod["metadata"]["name"] = "p" * 150
    (stuck,) = pods.unschedulable(typed_pods([pod]))
    long = "0/6 nodes are available: " + "x" * 400
    text = pods.explain_unschedulable(stuck, {"FailedScheduling": long, "NotTriggerScaleUp": long}, "fix it")
    assert text == (
        f"pod {scrub('p' * 150, limit=100)} (pool cpu-np): scheduler: {scrub(long, limit=300)}; autoscaler "
        f"NotTriggerScaleUp: {scrub(long, limit=300)}. fix it"
    )
    reasons = {"FailedScheduling": "no node X.", "FailedScaleUp": "quota X."}
    ends = pods.explain_unschedulable(stuck, reasons, "f")
    shown = scrub("p" * 150, limit=100)
    assert ends == f"pod {shown} (pool cpu-np): scheduler: no node X; autoscaler FailedScaleUp: quota X. f"


def test_pods_and_containers_without_names_are_still_reported():
    oom = step_pod(PLAN.convert.manifest, "convert", "oomkilled", container="convert")
    del oom["metadata"]["name"]
    del oom["status"]["containerStatuses"][0]["name"]
    assert pods.oom_killed(typed_pods([oom])) == [("?", "?")]
    stuck = step_pod(PLAN.convert.manifest, "convert", "unschedulable")
    del stuck["metadata"]["name"]
    del stuck["status"]["conditions"][0]["message"]
    assert pods.unschedulable(typed_pods([stuck])) == [pods.Stuck("?", "cpu-np", "")]


def test_a_sidecar_killed_for_memory_is_found_in_the_init_container_statuses():
    head = step_pod(PLAN.train.manifest, "pathways-head", "oomkilled", container="pathways-proxy")
    head["status"]["initContainerStatuses"] = head["status"].pop("containerStatuses")
    assert pods.oom_killed(typed_pods([head])) == [(head["metadata"]["name"], "pathways-proxy")]


def test_a_pod_without_a_pool_selector_and_every_pools_fix():
    assert pods.pool_of(typed_pods([{"spec": {}}])[0]) == "any pool" == pods.pool_of(typed_pods([{}])[0])
    assert pods.pool_fix("cpu-np", capacity=Capacity.SPOT, cpu_machine="c3-highmem-88", version="v6e", context=CTX) == (
        "cpu-np cannot add another c3-highmem-88 node: raise tpu-rl:cpuPool.maxNodes, request more C3_CPUS "
        "quota in the region, or choose another tpu-rl:cpuPool.machineType if the zone is out of it"
    )
    assert pods.pool_fix(
        "the TPU slice pool", capacity=Capacity.RESERVATION, cpu_machine="n4-standard-64", version="v6e", context=CTX
    ) == (
        "the slice's nodes are not all up: check the reservation (tpu-rl:tpu.reservation) and "
        f"`kubectl --context {CTX} get nodes -l cloud.google.com/gke-tpu-accelerator`"
    )
    assert pods.pool_fix(
        "the TPU slice pool", capacity=Capacity.FLEX_START, cpu_machine="n4-standard-64", version="v6e", context=CTX
    ) == (
        "GKE cannot get flex-start TPU v6e capacity in gcp:zone now: try again later, another zone, or "
        "another tpu-rl:tpu.capacity"
    )
    assert pods.pool_fix(
        "any pool", capacity=Capacity.SPOT, cpu_machine="n4-standard-64", version="v6e", context=CTX
    ) == ("check the pod's node selector and tolerations against the node pools")


MAXTEXT = "us-docker.pkg.dev/cloud-tpu-images/maxtext-images/tpu_post_training:0.2.4"
RAN = "us-docker.pkg.dev/cloud-tpu-images/maxtext-images/tpu_post_training@sha256:" + "a" * 64


def _pod(containers, statuses, init=(), init_statuses=()):
    return {
        "spec": {"containers": containers, "initContainers": list(init)},
        "status": {"containerStatuses": statuses, "initContainerStatuses": list(init_statuses)},
    }


def test_image_digests_are_what_the_kubelet_ran_each_reference_as():
    """``status.containerStatuses[].imageID`` by container name: the digest a tag resolved to (the model card's)."""
    server = "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/server@sha256:" + "b" * 64
    pod = _pod(
        [{"name": "workload", "image": MAXTEXT}, {"name": "rm", "image": server}],
        [
            {"name": "rm", "imageID": server},
            {"name": "workload", "imageID": "docker-pullable://" + RAN},
        ],
    )
    assert pods.image_digests(typed_pods([pod])) == {MAXTEXT: RAN, server: server}


def test_a_container_that_never_started_or_a_runtime_without_a_digest_is_left_out():
    never = _pod([{"name": "workload", "image": MAXTEXT}], [{"name": "workload", "imageID": ""}])
    local = _pod([{"name": "workload", "image": MAXTEXT}], [{"name": "workload", "imageID": "sha256:" + "c" * 64}])
    other = _pod([{"name": "workload", "image": MAXTEXT}], [{"name": "sidecar", "imageID": RAN}])
    assert pods.image_digests(typed_pods([never, local, other, {}])) == {}


def test_the_first_pod_that_ran_an_image_names_its_digest_and_init_containers_count():
    init = _pod(
        [{"name": "main", "image": "busybox:1"}],
        [],
        init=[{"name": "setup", "image": MAXTEXT}],
        init_statuses=[{"name": "setup", "imageID": RAN}],
    )
    later = _pod([{"name": "workload", "image": MAXTEXT}], [{"name": "workload", "imageID": RAN.replace("a", "d")}])
    found = pods.image_digests(typed_pods([init, later]))
    assert found == {MAXTEXT: RAN} and list(found) == sorted(found)


def test_a_status_that_is_not_an_object_is_named_at_the_boundary():
    from core.boundary import BoundaryError

    pod = _pod([{"name": "workload", "image": MAXTEXT}], ["oops", {"name": "workload", "imageID": RAN}])
    with pytest.raises(BoundaryError, match=r"^test pods item 0: status.containerStatuses.0: Input should be a valid"):
        typed_pods([pod])


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"status": "junk"}, "status: Input should be a valid dictionary"),
        ({"spec": None}, "spec: Input should be a valid dictionary"),
        ({"metadata": "x"}, "metadata: Input should be a valid dictionary"),
        ({"status": {"conditions": 5}}, "status.conditions: Input should be a valid list"),
        ({"status": {"containerStatuses": [{"imageID": 7}]}}, "status.containerStatuses.0.imageID: Input should be"),
        (
            {"status": {"containerStatuses": [{"state": {"running": {"startedAt": "2026-11-30T05:00:00"}}}]}},
            "status.containerStatuses.0.state.running.startedAt: Value error, a time without a zone",
        ),
    ],
)
def test_a_pod_of_another_shape_is_one_line_naming_the_pod_and_the_field(raw, field):
    """What a cluster (or a proxy in front of it) sends that is not a pod stops at the boundary, named, instead of
    a traceback in the wait or in `make status`."""
    from core.boundary import BoundaryError

    with pytest.raises(BoundaryError) as refused:
        typed_pods([step_pod(PLAN.convert.manifest, "convert", "running"), raw])
    assert str(refused.value).startswith(f"test pods item 1: {field}") and "\n" not in str(refused.value)
