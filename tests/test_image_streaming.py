"""GKE Image streaming on the pools that run the steps' images (issue 40 item 2): cpu-np and every TPU slice pool
stream, the system pool does not, the project enables the Container File System API, and an existing pool is never
switched to it in place (the gVNIC case: ``nodeConfig.gcfsConfig`` is in the pools' ignoreChanges)."""

from __future__ import annotations

import pytest

from core.names import CPU_POOL, IMAGE_STREAMING_API, SYSTEM_POOL
from tests.engine import process_ignore_changes
from tests.pure_plan import pure_plan

POOL = "gcp:container/nodePool:NodePool"
IGNORED = ["nodeConfig.labels", "nodeConfig.gvnic", "nodeConfig.gcfsConfig", "nodeConfig.secondaryBootDisks"]
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


BOOT_DISK = "tpu-rl:cpuPool.bootDiskImage=tpu-rl-images-0-2-5"


@pytest.mark.pure
def test_a_boot_disk_image_is_cpu_nps_secondary_boot_disk_and_no_other_pools():
    """``tpu-rl:cpuPool.bootDiskImage``: cpu-np's new nodes get a secondary boot disk from the project's image, as an
    image cache, beside Image streaming (which the feature needs); the TPU pools and the system pool get none."""
    pools = {
        r["inputs"]["name"]: r["inputs"]["nodeConfig"]
        for r in pure_plan("prod", BOOT_DISK).resources
        if r["type"] == POOL
    }
    assert pools[CPU_POOL]["secondaryBootDisks"] == [
        {"diskImage": "global/images/tpu-rl-images-0-2-5", "mode": "CONTAINER_IMAGE_CACHE"}
    ]
    assert pools[CPU_POOL]["gcfsConfig"] == {"enabled": True}
    assert [name for name, config in pools.items() if "secondaryBootDisks" in config] == [CPU_POOL]
    default = {r["inputs"]["name"]: r["inputs"]["nodeConfig"] for r in pure_plan("prod").resources if r["type"] == POOL}
    assert "secondaryBootDisks" not in default[CPU_POOL], "none unless set"


@pytest.mark.pure
def test_setting_a_boot_disk_image_on_an_existing_cpu_np_does_not_replace_it():
    """The provider replaces a pool whose ``secondary_boot_disks`` changes (ForceNew): with the pools' ignoreChanges the
    engine sends the existing pool's nodeConfig as it was, so a running Pathways head keeps its node."""
    (new,) = [
        r["inputs"]
        for r in pure_plan("prod", BOOT_DISK).resources
        if r["type"] == POOL and r["inputs"]["name"] == CPU_POOL
    ]
    old = {**new, "nodeConfig": {k: v for k, v in new["nodeConfig"].items() if k != "secondaryBootDisks"}}
    assert process_ignore_changes(new, old, IGNORED) == old
    assert process_ignore_changes(new, old, IGNORED[:3]) != old, "without it, the pool would be replaced"


def test_the_pools_ignore_changes_of_a_secondary_boot_disk(prod_plan):
    pools = prod_plan.find(POOL)
    assert pools and all("nodeConfig.secondaryBootDisks" in p["options"]["ignoreChanges"] for p in pools), pools
