"""The training step's failure policy as the real controllers decide it, against the model the fast tier trusts
(``tests/jobset_model.py``): prod's training JobSet, as the program renders it, runs on the local cluster (the
Kubernetes Job controller of ``k8s.io/kubernetes``, JobSet 0.10.1's controller and webhooks, kwok's nodes); its
head's workload container ends with each exit the project gives meaning to (kwok's stage reports it as the kubelet
would), and what JobSet then does (fail, restart counting against ``maxRestarts``, restart without counting) must
be what the model says. Where they differ, the model is wrong."""

from __future__ import annotations

import copy
import functools
from typing import Any

import pytest

from core.names import DRILL_EXIT, SLICE_DOWN_EXIT, SLICE_WAIT_EXIT, STALLED_EXIT
from tests.jobset_model import DISRUPTED, head_exit
from tests.lifecycle_walk import settings
from tests.local_cluster import Running, apply, end_container, local_cluster, running_pods, until
from workloads.specs.step_specs import plan_workflow

pytestmark = pytest.mark.slow

__all__ = ["local_cluster"]  # the session fixture, used by name

TRAIN = plan_workflow(settings("prod", [])).train.manifest
NAMESPACE = TRAIN["metadata"]["namespace"]
GROUP, VERSION, PLURAL = "jobset.x-k8s.io", "v1alpha2", "jobsets"
HEAD = "pathways-head"
WORKLOAD = "workload-container"


def _jobset(name: str) -> dict[str, Any]:
    """The rendered JobSet under another name, without its Kueue queue (admission is another scenario's)."""
    manifest = copy.deepcopy(TRAIN)
    manifest["metadata"] = {**manifest["metadata"], "name": name, "annotations": {}}
    manifest["metadata"]["labels"].pop("kueue.x-k8s.io/queue-name", None)
    return manifest


@pytest.fixture(scope="module")
def api(local_cluster: Running) -> Any:
    accounts = {
        spec["template"]["spec"]["template"]["spec"].get("serviceAccountName")
        for spec in TRAIN["spec"]["replicatedJobs"]
    } - {None}
    apply(
        local_cluster.api,
        [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}]
        + [
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": a, "namespace": NAMESPACE}}
            for a in sorted(accounts)
        ],
    )
    return local_cluster.api


def _status(api: Any, name: str) -> dict[str, Any]:
    from kubernetes import client as kube

    got = kube.CustomObjectsApi(api).get_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, name)
    return got.get("status") or {}


def _outcome(api: Any, name: str, restarts_before: int) -> tuple[str, Any] | None:
    status = _status(api, name)
    for condition in status.get("conditions") or []:
        if condition["status"] == "True" and condition["type"] in ("Failed", "Completed"):
            return condition["type"].lower(), condition["reason"]
    if int(status.get("restarts", 0)) > restarts_before:
        return "restarted", int(status.get("restartsCountTowardsMax", 0))
    return None


def _head(api: Any, name: str, not_uid: str = "") -> Any:
    selector = f"jobset.sigs.k8s.io/jobset-name={name},jobset.sigs.k8s.io/replicatedjob-name={HEAD}"
    pods = [p for p in running_pods(api, NAMESPACE, selector) if p.metadata.uid != not_uid]
    return pods[0] if pods else None


def _play(api: Any, name: str, exits: list[tuple[int, list[dict[str, str]], str]]) -> list[tuple[str, Any]]:
    """Create the JobSet, then end its head's workload container with each exit in turn (each on the head the last
    restart made); what JobSet did after each."""
    from kubernetes import client as kube

    objects = kube.CustomObjectsApi(api)
    objects.create_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, _jobset(name))
    seen: list[tuple[str, Any]] = []
    uid = ""
    try:
        for code, conditions, reason in exits:
            head = until(f"{name}'s head running", functools.partial(_head, api, name, uid))
            uid = head.metadata.uid
            before = int(_status(api, name).get("restarts", 0))
            if code == DRAINED:
                _drain(api, head)
            else:
                disrupted = conditions[0]["type"] if conditions else ""
                end_container(api, head, code, container=WORKLOAD, reason=reason, disrupted=disrupted and "Preempted")
            answer = until(f"{name}: JobSet's answer to exit {code}", functools.partial(_outcome, api, name, before))
            seen.append(answer)
    finally:
        objects.delete_namespaced_custom_object(
            GROUP, VERSION, NAMESPACE, PLURAL, name, body={"propagationPolicy": "Foreground"}
        )
        until(
            f"{name}'s pods gone",
            lambda: (
                not kube.CoreV1Api(api)
                .list_namespaced_pod(NAMESPACE, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}")
                .items
            ),
        )
    return seen


DRAINED = -1
"""Not an exit: the head's node drained (cordoned, its pod evicted through the Eviction API, as `kubectl drain`)."""


def _drain(api: Any, pod: Any) -> None:
    from kubernetes import client as kube

    core = kube.CoreV1Api(api)
    core.patch_node(pod.spec.node_name, {"spec": {"unschedulable": True}})
    try:
        eviction = kube.V1Eviction(metadata=kube.V1ObjectMeta(name=pod.metadata.name, namespace=NAMESPACE))
        core.create_namespaced_pod_eviction(pod.metadata.name, NAMESPACE, eviction)
        until(f"{pod.metadata.name} evicted", lambda: not _exists(core, pod))
    finally:
        core.patch_node(pod.spec.node_name, {"spec": {"unschedulable": False}})


def _exists(core: Any, pod: Any) -> bool:
    from kubernetes.client.exceptions import ApiException

    try:
        core.read_namespaced_pod(pod.metadata.name, NAMESPACE)
    except ApiException as err:
        if err.status == 404:
            return False
        raise
    return True


def _model(exits: list[tuple[int, list[dict[str, str]], str]]) -> list[tuple[str, Any]]:
    """The model's answers, in the real controller's words: a FailJobSet rule's failure is JobSet's
    ``FailJobSetFailurePolicyAction``; a restart is how many counted towards ``maxRestarts``."""
    out: list[tuple[str, Any]] = []
    counted = 0
    for code, conditions, _reason in exits:
        # A drained pod is stopped with SIGTERM: a container that exits on it exits 143.
        kind, value = head_exit(TRAIN, 143 if code == DRAINED else code, counted, conditions)
        if kind == "failed" and value != "ReachedMaxRestarts":
            value = "FailJobSetFailurePolicyAction"
        if kind == "restarted":
            counted = value
        out.append((kind, value))
    return out


Exits = list[tuple[int, list[dict[str, str]], str]]
CASES: dict[str, Exits] = {
    "exception": [(1, [], "")],
    "oom": [(137, [], "OOMKilled")],
    "setup": [(3, [], "")],
    "preempted": [(143, DISRUPTED, "")],
    "slice-down-twice": [(SLICE_DOWN_EXIT, [], ""), (SLICE_DOWN_EXIT, [], "")],
    "stalled": [(STALLED_EXIT, [], "")],
    "drill-then-exception": [(DRILL_EXIT, [], ""), (1, [], "")],
    "slice-absent": [(SLICE_WAIT_EXIT, [], "")],
    "head-drained": [(DRAINED, DISRUPTED, "")],
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_real_controllers_decide_as_the_model(api: Any, case: str) -> None:
    exits = CASES[case]
    assert _play(api, f"train-{case}", exits) == _model(exits)
