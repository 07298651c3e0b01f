"""The slow tier's handle on the local cluster (``tools/local_cluster``): one cluster per test session, started in a
temporary folder and stopped at its end, and the moves a scenario makes on it (apply a step's manifest, wait for
its pods, end a container as the kubelet would report it through kwok's stage, read what the controllers did).

Without Go the scenarios skip, saying so; ``TPU_RL_LOCAL_CLUSTER_REQUIRED=1`` (``.ci/run``) makes that a failure."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tools.local_cluster import parts as local
from tools.local_cluster.seed import CONTAINER_ANNOTATION, DISRUPTED_ANNOTATION, EXIT_ANNOTATION, REASON_ANNOTATION

REQUIRED = "TPU_RL_LOCAL_CLUSTER_REQUIRED"
RECOVERY = 15
"""Kueue's ``waitForPodsReady.recoveryTimeout`` on the tests' cluster (seconds; a stack's is hours): the scenarios
that lose a host play the whole budget. Its ``timeout``, 120 s, is far above what kwok's pods take to be Ready."""
NODE_GRACE = 15
"""How long a host may miss its heartbeats before the node lifecycle controller calls it lost (Kubernetes: 50 s)."""
WAIT_SECONDS = 90


@dataclass(frozen=True)
class Running:
    api: Any
    """The Kubernetes client's ``ApiClient`` for it."""
    layout: local.Layout


@pytest.fixture(scope="session")
def local_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    if shutil.which("go") is None:
        if os.environ.get(REQUIRED):
            pytest.fail(f"{REQUIRED} is set but there is no `go` on PATH")
        pytest.skip('no Go on PATH: the local cluster cannot be built (docs/testing.md "The local cluster")')
    folder = tmp_path_factory.mktemp("local-cluster")
    layout = local.up(folder, kueue_timeouts=(120, RECOVERY), node_grace=NODE_GRACE)
    pids = local.State.load(layout).pids  # type: ignore[union-attr]
    try:
        yield Running(local.client(layout), layout)
    finally:
        local.down(folder)
    # `make local-cluster-down` leaves nothing running, and nothing behind.
    assert [part for part, pid in pids.items() if local._alive(pid)] == [] and not folder.exists()


def until(what: str, probe: Callable[[], Any], seconds: float = WAIT_SECONDS) -> Any:
    """``probe()``'s first truthy answer, polled; a failure naming ``what`` past ``seconds``."""
    deadline = time.monotonic() + seconds
    answer = None
    while time.monotonic() < deadline:
        answer = probe()
        if answer:
            return answer
        time.sleep(0.25)
    pytest.fail(f"not within {seconds} s: {what} (last: {answer!r})")


def apply(api: Any, docs: list[dict[str, Any]]) -> None:
    local._apply(api, docs)


def end_container(
    api: Any, pod: Any, exit_code: int, *, container: str = "", reason: str = "", disrupted: str = ""
) -> None:
    """What the kubelet would report of a container's exit, played by kwok's stage (``seed.pod_exit_stage``)."""
    from kubernetes import client as kube

    notes = {EXIT_ANNOTATION: str(exit_code)}
    notes |= {CONTAINER_ANNOTATION: container} if container else {}
    notes |= {REASON_ANNOTATION: reason} if reason else {}
    notes |= {DISRUPTED_ANNOTATION: disrupted} if disrupted else {}
    kube.CoreV1Api(api).patch_namespaced_pod(
        pod.metadata.name, pod.metadata.namespace, {"metadata": {"annotations": notes}}
    )


def running_pods(api: Any, namespace: str, selector: str) -> list[Any]:
    from kubernetes import client as kube

    pods = kube.CoreV1Api(api).list_namespaced_pod(namespace, label_selector=selector).items
    return [p for p in pods if p.status.phase == "Running" and not p.metadata.deletion_timestamp]
