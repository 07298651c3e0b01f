"""GKE Image streaming on the pool that runs the steps' big image: cpu-np streams; the TPU slice
pools do not, as no source read says GKE supports it there (``infra.gcp.gke_spec.IMAGE_STREAMING``),
nor does the system pool; the project enables the Container File System API, and an existing pool is never switched
in place, on or off (the gVNIC case: ``nodeConfig.gcfsConfig`` is in the pools' ignoreChanges)."""

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
def test_cpu_np_streams_the_images_and_the_tpu_pools_do_not(stack, capacity):
    pools = {
        r["inputs"]["name"]: r["inputs"] for r in pure_plan(stack, *CAPACITIES[capacity]).resources if r["type"] == POOL
    }
    streaming = {name for name, pool in pools.items() if pool["nodeConfig"].get("gcfsConfig") == {"enabled": True}}
    assert streaming == {CPU_POOL}
    tpu = set(pools) - {SYSTEM_POOL, CPU_POOL}
    assert tpu and all("gcfsConfig" not in pools[name]["nodeConfig"] for name in tpu | {SYSTEM_POOL})


@pytest.mark.pure
def test_an_existing_pool_is_not_switched_in_place_either_way():
    """What the engine sends for an update, with the pools' ignoreChanges: cpu-np created before Image streaming
    keeps its nodeConfig (no in-place update turns streaming on), and a TPU pool created with it keeps it (no
    in-place update turns it off under a running training)."""
    plan = {r["name"]: r["inputs"] for r in pure_plan("prod").resources if r["type"] == POOL}
    cpu = plan["cpu-pool"]
    before = {**cpu, "nodeConfig": {k: v for k, v in cpu["nodeConfig"].items() if k != "gcfsConfig"}}
    assert process_ignore_changes(cpu, before, IGNORED) == before
    assert process_ignore_changes(cpu, before, IGNORED[:2]) != before, "without it, the update would turn it on"
    tpu = plan["tpu-pool-0"]
    streamed = {**tpu, "nodeConfig": {**tpu["nodeConfig"], "gcfsConfig": {"enabled": True}}}
    assert process_ignore_changes(tpu, streamed, IGNORED) == streamed
    assert process_ignore_changes(tpu, streamed, IGNORED[:2]) != streamed, "without it, the update would turn it off"


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
