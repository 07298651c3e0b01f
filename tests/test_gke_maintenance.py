"""A run survives maintenance and its pools have gVNIC, on the stacks' manifests: the
cluster's exclusion keeps node upgrades away in every capacity mode, Kueue's recovery timeout waits out a TPU host
maintenance event, the TPU pools set no host maintenance policy (``gke_spec.tpu_pool_args`` says
why), and gVNIC is set when a pool is created, never changed on an existing one."""

from __future__ import annotations

import inspect

import pytest

from core.config.defaults import TPU_MAINTENANCE_SECONDS
from infra.k8s import kueue
from tests.engine import process_ignore_changes
from tests.lifecycle_walk import settings
from tests.pure_plan import pure_plan

CLUSTER = "gcp:container/cluster:Cluster"
POOL = "gcp:container/nodePool:NodePool"
CAPACITIES = {
    "reservation": [],
    "on-demand": ["tpu-rl:tpu.capacity=on-demand", "tpu-rl:tpu.reservation="],
    "spot": ["tpu-rl:tpu.capacity=spot", "tpu-rl:tpu.reservation="],
    "flex-start": ["tpu-rl:tpu.capacity=flex-start", "tpu-rl:tpu.reservation="],
}


def _cluster(plan):
    (cluster,) = [r for r in plan.resources if r["type"] == CLUSTER]
    return cluster["inputs"]


@pytest.mark.pure
@pytest.mark.parametrize("capacity", list(CAPACITIES))
def test_no_node_upgrade_reaches_a_running_training_in_any_capacity_mode(capacity):
    """The slice (upgraded as a whole) and the Pathways head's cpu-np node (a surge pool in every mode) are both
    kept from node upgrades until end of support; control-plane patches still come in, inside the window."""
    policy = _cluster(pure_plan("prod", *CAPACITIES[capacity]))["maintenancePolicy"]
    assert policy == {
        "dailyMaintenanceWindow": {"startTime": "09:00"},
        "maintenanceExclusions": [
            {
                "exclusionName": "no-minor-or-node-upgrades-indefinite",
                "startTime": "2025-12-01T00:00:00Z",
                "exclusionOptions": {"scope": "NO_MINOR_OR_NODE_UPGRADES", "endTimeBehavior": "UNTIL_END_OF_SUPPORT"},
            }
        ],
    }


@pytest.mark.pure
def test_node_patches_are_let_in_only_when_the_stack_says_so():
    patched = _cluster(pure_plan("prod", "tpu-rl:gke.maintenanceExclusion=NO_MINOR_UPGRADES"))["maintenancePolicy"]
    (exclusion,) = patched["maintenanceExclusions"]
    assert exclusion["exclusionName"] == "no-minor-upgrades-indefinite"
    assert exclusion["exclusionOptions"]["scope"] == "NO_MINOR_UPGRADES"
    held = _cluster(pure_plan("prod", "tpu-rl:gke.holdUpgrades=2026-12-01/2026-12-29"))["maintenancePolicy"]
    assert [e["exclusionOptions"]["scope"] for e in held["maintenanceExclusions"]] == [
        "NO_MINOR_OR_NODE_UPGRADES",
        "NO_UPGRADES",
    ]


@pytest.mark.pure
@pytest.mark.parametrize(
    ("capacity", "ready", "recovery"),
    [
        ("reservation", "30m", "4h30m"),
        ("on-demand", "30m", "4h30m"),
        ("spot", "30m", "4h30m"),
        ("flex-start", "2h", "6h"),
    ],
)
def test_kueue_waits_out_a_tpu_maintenance_event(capacity, ready, recovery):
    """Cloud TPU: "slice unavailability of up to a few hours" (4 h here) beats a node auto-repair (1h10m); the
    re-created pods then start within the capacity mode's pods-ready timeout."""
    s = settings("prod", CAPACITIES[capacity])
    wait = kueue.manager_config(s)["waitForPodsReady"]
    assert (wait["timeout"], wait["recoveryTimeout"]) == (ready, recovery)
    assert s.kueue.recovery_timeout == s.kueue.pods_ready_timeout + TPU_MAINTENANCE_SECONDS
    assert s.kueue.recovery_timeout > s.kueue.pods_ready_timeout + 70 * 60  # the old budget: a repair only
    own = settings("prod", [*CAPACITIES[capacity], "tpu-rl:kueue.recoveryTimeout=2h"])
    assert kueue.manager_config(own)["waitForPodsReady"]["recoveryTimeout"] == "2h"


@pytest.mark.pure
@pytest.mark.parametrize("capacity", list(CAPACITIES))
def test_no_pool_sets_a_host_maintenance_policy(capacity):
    """GKE's default interval for every pool: the field is v1beta1 only, no page read says which interval a v6e
    slice pool accepts, Cluster Toolkit's gke-tpu-v6e sets none, and a change replaces the pool (ForceNew). The SDK
    has the field (so leaving it out is the decision, not a missing field)."""
    from pulumi_gcp.container import NodePoolNodeConfigArgs, NodePoolNodeConfigHostMaintenancePolicyArgs

    pools = [r for r in pure_plan("prod", *CAPACITIES[capacity]).resources if r["type"] == POOL]
    assert pools and all("hostMaintenancePolicy" not in p["inputs"]["nodeConfig"] for p in pools), pools
    assert "host_maintenance_policy" in inspect.signature(NodePoolNodeConfigArgs.__init__).parameters
    assert "maintenance_interval" in inspect.signature(NodePoolNodeConfigHostMaintenancePolicyArgs.__init__).parameters


@pytest.mark.pure
@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_pool_is_created_with_gvnic(stack):
    pools = [r for r in pure_plan(stack).resources if r["type"] == POOL]
    assert len(pools) == 3
    for pool in pools:
        assert pool["inputs"]["nodeConfig"]["gvnic"] == {"enabled": True}, pool["name"]


@pytest.mark.pure
def test_an_existing_pool_without_gvnic_is_not_updated_to_it():
    """What the engine sends for an update of a pool created before gVNIC (``process_ignore_changes``, Pulumi's
    ``processIgnoreChanges``) with the pools' ignoreChanges: its nodeConfig unchanged, so no node is re-created."""
    (tpu,) = [r for r in pure_plan("prod").resources if r["type"] == POOL and r["name"] == "tpu-pool-0"]
    new = tpu["inputs"]
    old = {**new, "nodeConfig": {k: v for k, v in new["nodeConfig"].items() if k != "gvnic"}}
    sent = process_ignore_changes(new, old, ["nodeConfig.labels", "nodeConfig.gvnic"])
    assert sent == old
    assert process_ignore_changes(new, old, ["nodeConfig.labels"]) != old, "without it, the update would enable it"


@pytest.mark.slow
def test_the_pools_ignore_changes_of_gvnic(stack):
    """The program registers every pool with ``nodeConfig.gvnic`` in ignoreChanges (and its labels, as before)."""
    stack.up()
    pools = [stack.state[stack.urn(POOL, name)] for name in ("system-pool", "cpu-pool", "tpu-pool-0")]
    assert all({"nodeConfig.gvnic", "nodeConfig.labels"} <= set(p.ignore_changes) for p in pools)
