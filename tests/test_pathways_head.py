"""The Pathways head's size (``core.pathways``), called directly: what its pod requests in all, which the cpu-np
rule checks a machine against (computed once at import there, ``core.config.finish``, where no mutant is active),
and the copies of each container's resources the training JobSet carries."""

from __future__ import annotations

import pytest

from core import pathways

pytestmark = pytest.mark.pure


def test_the_head_requests_its_sidecars_limits_and_its_workloads_requests() -> None:
    """The proxy's 16 cores and 100 GiB and the resource manager's 8 and 32 GiB (native sidecars: limits as requests),
    and the workload container's requests (8 and 64 GiB), not its limits."""
    assert pathways.head_requests() == {"cpu": 32.0, "memory": 196.0 * 2**30}


def test_each_containers_resources_are_a_copy() -> None:
    proxy = pathways.resources("proxy")
    assert proxy == {"limits": {"cpu": "16", "memory": "100Gi"}}
    proxy["limits"]["cpu"] = "1"
    proxy["requests"] = {}
    assert pathways.resources("proxy") == {"limits": {"cpu": "16", "memory": "100Gi"}}
    assert pathways.resources("workload") == {
        "requests": {"cpu": "8", "memory": "64Gi"},
        "limits": {"cpu": "24", "memory": "100Gi"},
    }
