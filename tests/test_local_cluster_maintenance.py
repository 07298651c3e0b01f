"""A TPU host lost under a running training, as the real controllers play it on the local cluster: the host stops
its heartbeats (``seed.LOST_LABEL``: kwok stops them), the Kubernetes node lifecycle controller calls it lost after
its grace period and marks its pods not Ready (``pkg/controller/nodelifecycle/node_lifecycle_controller.go``
``monitorNodeHealth``: only a node whose status the controller itself turns from Ready, not one whose kubelet
reports NotReady, has its pods marked), and Kueue 0.17.1 counts the stack's recovery budget
(``waitForPodsReady.recoveryTimeout``; the session's cluster runs it at ``RECOVERY`` seconds). Back within the budget
(the host Ready again and its pods Ready, as its kubelet would report them) the training goes on; not back, Kueue
stops it, and the project's reader says so in the words `up` and `make status` act on
(``workloads.observe.waiting._why_stopped``)."""

from __future__ import annotations

import copy
import datetime
import functools
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from infra.k8s.kueue import kueue_objects
from infra.k8s.live import ClusterReader
from tests.lifecycle_walk import settings
from tests.local_cluster import NODE_GRACE, RECOVERY, Running, apply, local_cluster, running_pods, until
from tools.local_cluster.seed import LOST_LABEL
from workloads.observe.live_state import LiveStep, live_step
from workloads.observe.waiting import read_step
from workloads.specs.step_specs import plan_workflow

pytestmark = pytest.mark.slow

__all__ = ["local_cluster"]

SETTINGS = settings("prod", [])
TRAIN = plan_workflow(SETTINGS).train.manifest
NAMESPACE = SETTINGS.namespace
GROUP, VERSION, PLURAL = "jobset.x-k8s.io", "v1alpha2", "jobsets"


@pytest.fixture(scope="module")
def cluster(local_cluster: Running) -> Running:
    queues = kueue_objects(SETTINGS, {"app.kubernetes.io/name": "tpu-rl"})
    assert queues is not None
    head = next(r for r in TRAIN["spec"]["replicatedJobs"] if r["name"] == "pathways-head")
    account = head["template"]["spec"]["template"]["spec"]["serviceAccountName"]
    apply(
        local_cluster.api,
        [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account, "namespace": NAMESPACE}},
            queues.tpu_flavor,
            queues.cpu_flavor,
            queues.cluster_queue,
            queues.local_queue,
        ],
    )
    return local_cluster


def _live(reader: ClusterReader, name: str, wanted: str = "") -> LiveStep | None:
    obj, workloads, _pods = read_step(reader, NAMESPACE, name, queued=True)
    live = live_step(obj, workloads)
    return live if not wanted or live.state == wanted else None


def _ready(pod: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def _all_ready(api: Any, name: str, count: int) -> list[Any] | None:
    pods = running_pods(api, NAMESPACE, f"jobset.sigs.k8s.io/jobset-name={name}")
    return pods if len(pods) == count and all(_ready(p) for p in pods) else None


def _not_ready(api: Any, pod: Any) -> bool:
    from kubernetes import client as kube

    return not _ready(kube.CoreV1Api(api).read_namespaced_pod(pod.metadata.name, NAMESPACE))


@pytest.fixture
def training(cluster: Running) -> Iterator[str]:
    """A training's name; its JobSet deleted after the test (it holds the queue's whole slice)."""
    from kubernetes import client as kube

    name = f"train-{uuid.uuid4().hex[:6]}"
    yield name
    kube.CustomObjectsApi(cluster.api).delete_namespaced_custom_object(
        GROUP, VERSION, NAMESPACE, PLURAL, name, body={"propagationPolicy": "Foreground"}
    )
    until(
        f"{name}'s pods gone",
        lambda: not running_pods(cluster.api, NAMESPACE, f"jobset.sigs.k8s.io/jobset-name={name}"),
    )


def _start(cluster: Running, name: str) -> tuple[ClusterReader, Any]:
    """The training, admitted and with every pod Ready; one of its TPU workers."""
    from kubernetes import client as kube

    manifest = copy.deepcopy(TRAIN)
    manifest["metadata"] = {**manifest["metadata"], "name": name, "annotations": {}}
    kube.CustomObjectsApi(cluster.api).create_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, manifest)
    reader = ClusterReader(cluster.layout.kubeconfig.read_text())
    until(f"{name} admitted", functools.partial(_live, reader, name, "running"))
    count = sum(r["replicas"] * r["template"]["spec"].get("parallelism", 1) for r in manifest["spec"]["replicatedJobs"])
    pods = until(f"{name}'s {count} pods Ready", functools.partial(_all_ready, cluster.api, name, count))
    return reader, next(p for p in pods if "worker" in p.metadata.name)


def _pods_ready(api: Any, name: str) -> str:
    """The ``PodsReady`` condition of the step's Workload, as Kueue sets it: its status and reason."""
    from kubernetes import client as kube

    items = kube.CustomObjectsApi(api).list_namespaced_custom_object(
        "kueue.x-k8s.io", "v1beta2", NAMESPACE, "workloads"
    )
    for workload in items["items"]:
        if any(o.get("name") == name for o in workload["metadata"].get("ownerReferences", [])):
            for condition in workload.get("status", {}).get("conditions", []):
                if condition["type"] == "PodsReady":
                    return f"{condition['status']} {condition['reason']}"
    return ""


def _lose(cluster: Running, pod: Any, name: str) -> None:
    """The host's heartbeats stop; wait until its pod is marked not Ready and Kueue counts the budget."""
    from kubernetes import client as kube

    core = kube.CoreV1Api(cluster.api)
    core.patch_node(pod.spec.node_name, {"metadata": {"labels": {LOST_LABEL: "true"}}})
    until(
        f"{pod.metadata.name} marked not Ready",
        functools.partial(_not_ready, cluster.api, pod),
        seconds=NODE_GRACE + 30,
    )
    until(
        f"{name}'s Workload waiting for recovery",
        lambda: _pods_ready(cluster.api, name) == "False WaitForRecovery",
    )


def _restore(cluster: Running, pod: Any, *, pod_too: bool = True) -> None:
    """The host back: its kubelet's Ready condition and heartbeats (kwok again), its pod Ready again."""
    from kubernetes import client as kube

    core = kube.CoreV1Api(cluster.api)
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    ready = {"type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": now,
             "lastTransitionTime": now, "message": "kubelet is posting ready status"}  # fmt: skip
    core.patch_node_status(pod.spec.node_name, {"status": {"conditions": [ready]}})
    core.patch_node(pod.spec.node_name, {"metadata": {"labels": {LOST_LABEL: None}}})
    if pod_too:
        conditions = [{"type": t, "status": "True", "lastTransitionTime": now} for t in ("Ready", "ContainersReady")]
        core.patch_namespaced_pod_status(pod.metadata.name, NAMESPACE, {"status": {"conditions": conditions}})


def test_a_host_back_within_the_recovery_budget_leaves_the_training_running(cluster: Running, training: str) -> None:
    reader, worker = _start(cluster, training)
    _lose(cluster, worker, training)
    _restore(cluster, worker)
    time.sleep(RECOVERY + 10)  # past the budget: Kueue would have stopped it by now, had the host not come back
    live = _live(reader, training)
    assert live is not None and live.state == "running" and live.kueue is not None
    assert live.kueue.state == "admitted", live
    assert _pods_ready(cluster.api, training).startswith("True")


def test_a_host_not_back_within_the_budget_stops_the_training_as_the_reader_says(
    cluster: Running, training: str
) -> None:
    reader, worker = _start(cluster, training)
    _lose(cluster, worker, training)
    # Kueue writes the Workload twice: why and spec.active false, then its Evicted condition. The reader's first
    # "stopped", whichever write it reads, already has Kueue's reason (``live_state._deactivating``).
    stopped = until(
        f"{training} stopped by Kueue", functools.partial(_live, reader, training, "stopped"), RECOVERY + 60
    )
    assert stopped.reason == "DeactivatedDueToRequeuingLimitExceeded", stopped
    _restore(cluster, worker, pod_too=False)  # the host back for the next scenario (Kueue deleted the pods)
