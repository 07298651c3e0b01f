"""GKE Image streaming on the pools that run the steps' images (issue 40 item 2): cpu-np and every TPU slice pool
stream, the system pool does not, the project enables the Container File System API, and an existing pool is never
switched to it in place (the gVNIC case: ``nodeConfig.gcfsConfig`` is in the pools' ignoreChanges)."""

from __future__ import annotations

import pytest

from core.names import CPU_POOL, IMAGE_STREAMING_API, SYSTEM_POOL
from tests.engine import process_ignore_changes
from tests.pure_plan import pure_plan

POOL = "gcp:container/nodePool:NodePool"
IGNORED = ["nodeConfig.labels", "nodeConfig.gvnic", "nodeConfig.gcfsConfig"]
CAPACITIES = {
    "reservation": [],
    "on-demand": ["tpu-rl:tpu.capacity=on-demand", "tpu-rl:tpu.reservation="],
    "spot": ["tpu-rl:tpu.capacity=spot", "tpu-rl:tpu.reservation="],
    "flex-start": ["tpu-rl:tpu.capacity=flex-start", "tpu-rl:tpu.reservation="],
}


@pytest.mark.pure
@pytest.mark.parametrize("stack", ["dev", "prod"])
@pytest.mark.parametrize("capacity", CAPACITIES)
def test_the_pools_that_run_the_images_stream_them(stack, capacity):
    pools = {
        r["inputs"]["name"]: r["inputs"] for r in pure_plan(stack, *CAPACITIES[capacity]).resources if r["type"] == POOL
    }
    streaming = {name for name, pool in pools.items() if pool["nodeConfig"].get("gcfsConfig") == {"enabled": True}}
    assert streaming == set(pools) - {SYSTEM_POOL}
    assert CPU_POOL in streaming and len(streaming) >= 2  # cpu-np and the slice's pool(s)
    assert "gcfsConfig" not in pools[SYSTEM_POOL]["nodeConfig"]


@pytest.mark.pure
def test_an_existing_pool_without_image_streaming_is_not_updated_to_it():
    """What the engine sends for an update of a TPU pool created before Image streaming, with the pools'
    ignoreChanges: its nodeConfig as it was, so the provider makes no in-place node pool update."""
    (tpu,) = [r for r in pure_plan("prod").resources if r["type"] == POOL and r["name"] == "tpu-pool-0"]
    new = tpu["inputs"]
    old = {**new, "nodeConfig": {k: v for k, v in new["nodeConfig"].items() if k != "gcfsConfig"}}
    assert process_ignore_changes(new, old, IGNORED) == old
    assert process_ignore_changes(new, old, IGNORED[:2]) != old, "without it, the update would turn streaming on"


def test_the_pools_ignore_changes_of_image_streaming(prod_plan):
    """The program registers every pool with ``nodeConfig.gcfsConfig`` in ignoreChanges, and enables the API."""
    pools = prod_plan.find("gcp:container/nodePool:NodePool")
    assert pools and all("nodeConfig.gcfsConfig" in p["options"]["ignoreChanges"] for p in pools), pools
    services = {s["inputs"]["service"] for s in prod_plan.find("gcp:projects/service:Service")}
    assert IMAGE_STREAMING_API in services
