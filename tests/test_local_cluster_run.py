"""A run's steps through the real Kueue and JobSet on the local cluster, read as `up` and `make status` read them:
prod's Kueue objects and its step JobSets, as the program renders them, applied to the cluster; each step queued to the
stack's LocalQueue, admitted by Kueue 0.17.1, run (kwok's pods) and ended, and at each point the project's own reader
(``infra.k8s.live.ClusterReader``, ``workloads.observe.live_state``) and `make status` (``tools.status``) say what the
step is. And a step the queue can
never admit: Kueue's own words for it are ones the reader knows (``live_state.NEVER_FITS``)."""

from __future__ import annotations

import copy
import functools
from typing import Any

import pytest
import yaml

from infra.k8s.kueue import kueue_objects
from infra.k8s.live import ClusterReader
from tests.lifecycle_walk import settings
from tests.local_cluster import Running, apply, end_container, local_cluster, running_pods, until
from tools import status
from workloads.observe.live_state import LiveStep, live_step
from workloads.observe.waiting import read_step
from workloads.specs.step_specs import plan_workflow

pytestmark = pytest.mark.slow

__all__ = ["local_cluster"]

SETTINGS = settings("prod", [])
PLAN = plan_workflow(SETTINGS)
NAMESPACE = SETTINGS.namespace
GROUP, VERSION, PLURAL = "jobset.x-k8s.io", "v1alpha2", "jobsets"


@pytest.fixture(scope="module")
def cluster(local_cluster: Running) -> Running:
    queues = kueue_objects(SETTINGS, {"app.kubernetes.io/name": "tpu-rl"})
    assert queues is not None
    accounts = sorted(
        {
            rjob["template"]["spec"]["template"]["spec"].get("serviceAccountName")
            for step in PLAN.steps
            for rjob in step.manifest["spec"]["replicatedJobs"]
        }
        - {None}
    )
    apply(
        local_cluster.api,
        [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
            *(
                {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": a, "namespace": NAMESPACE}}
                for a in accounts
            ),
            queues.tpu_flavor,
            queues.cpu_flavor,
            queues.cluster_queue,
            queues.local_queue,
        ],
    )
    return local_cluster


def _live(reader: ClusterReader, name: str) -> LiveStep:
    obj, workloads, _pods = read_step(reader, NAMESPACE, name, queued=True)
    return live_step(obj, workloads)


def _state(reader: ClusterReader, name: str, wanted: str) -> LiveStep | None:
    live = _live(reader, name)
    return live if live.state == wanted else None


def _pods(api: Any, name: str) -> list[Any]:
    return running_pods(api, NAMESPACE, f"jobset.sigs.k8s.io/jobset-name={name}")


def _shown(cluster: Running, gcs: Any) -> dict[str, str]:
    """Each step's STATE in `make status`'s table (``tools.status``: its reads of the cluster and the bucket)."""
    kubeconfig = yaml.safe_load(cluster.layout.kubeconfig.read_text())
    found, _ = status.read_status(SETTINGS, PLAN, kubeconfig, gcs)
    return {row.step: row.state for row in found}


def _shows(cluster: Running, gcs: Any, step: str, state: str) -> bool:
    return _shown(cluster, gcs)[step] == state


def test_each_step_is_queued_admitted_run_and_ended_as_the_reader_and_make_status_say(cluster: Running, gcs) -> None:
    from kubernetes import client as kube

    reader = ClusterReader(cluster.layout.kubeconfig.read_text())
    objects = kube.CustomObjectsApi(cluster.api)
    gcs.create_bucket(SETTINGS.bucket_name)  # the stack's bucket, empty: no step has written its output yet
    assert set(_shown(cluster, gcs).values()) == {"pending"}, "nothing created yet"
    for step in PLAN.steps:
        name = step.manifest["metadata"]["name"]
        objects.create_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, copy.deepcopy(step.manifest))
        running = until(f"{name} admitted and running", functools.partial(_state, reader, name, "running"))
        assert running.kueue is not None and running.kueue.state == "admitted"
        pods = until(f"{name}'s pods running", functools.partial(_pods, cluster.api, name))
        # `make status` calls a step running once the JobSet controller counts its pods ready (a moment later).
        until(f"make status: {name} running", functools.partial(_shows, cluster, gcs, step.step, "running"))
        for pod in pods:
            end_container(cluster.api, pod, 0)
        until(f"{name} succeeded", functools.partial(_state, reader, name, "succeeded"))
        assert _shows(cluster, gcs, step.step, "succeeded")


def test_a_step_the_queue_can_never_admit_is_said_to_be_one(cluster: Running) -> None:
    """Twice the slice's chips: Kueue's ``Pending`` message is one the reader counts as never fitting."""
    from kubernetes import client as kube

    manifest = copy.deepcopy(PLAN.train.manifest)
    manifest["metadata"]["name"] = "train-too-big"
    worker = next(r for r in manifest["spec"]["replicatedJobs"] if r["name"] == "worker")
    worker["replicas"] = 2
    kube.CustomObjectsApi(cluster.api).create_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, manifest)
    reader = ClusterReader(cluster.layout.kubeconfig.read_text())
    queued = until("train-too-big judged never fitting", functools.partial(_never, reader), seconds=60)
    assert queued.state == "queued"


def _never(reader: ClusterReader) -> LiveStep | None:
    """The step once the reader judges it never fitting (Kueue's ``QuotaReserved`` condition says why it waits)."""
    live = _live(reader, "train-too-big")
    return live if live.kueue is not None and live.kueue.state == "never" else None
