"""A long run survives GKE: surge-free upgrades, a maintenance exclusion, a version pin, restarts that fit the
capacity, a tainted CPU pool, disks the machine family takes, ADC for the auth plugin, the APIs IAM needs."""

from __future__ import annotations

import pytest
import yaml

from core.config import ConfigError
from tests.conftest import one, plan_of, step_resources
from tests.lifecycle_walk import settings

POOL = "gcp:container/nodePool:NodePool"
CLUSTER = "gcp:container/cluster:Cluster"
STORAGE_CLASS = "kubernetes:storage.k8s.io/v1:StorageClass"


@pytest.mark.parametrize("stack", ["dev", "prod"])
@pytest.mark.slow
def test_every_pool_upgrades_one_node_at_a_time_without_a_surge_vm(stack):
    """Cluster Toolkit's gke-node-pool: an exact-size reservation has no spare VM for a surge upgrade."""
    pools = plan_of(stack).find(POOL)
    assert len(pools) == 3
    for pool in pools:
        assert pool["inputs"]["upgradeSettings"] == {"strategy": "SURGE", "maxSurge": 0, "maxUnavailable": 1}


@pytest.mark.slow
def test_no_node_upgrade_reaches_a_run_by_default(prod_plan):
    """NO_MINOR_OR_NODE_UPGRADES (Cluster Toolkit's) keeps minor versions and node upgrades away until end of
    support; control-plane patches still come in, in the window (GKE "Maintenance windows and exclusions").
    NO_MINOR_UPGRADES, the opt-in, lets node patches in (the only scope that allows them)."""
    policy = one(prod_plan, CLUSTER)["inputs"]["maintenancePolicy"]
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
    patches = plan_of("prod", "tpu-rl:gke.maintenanceExclusion=NO_MINOR_UPGRADES")
    (exclusion,) = one(patches, CLUSTER)["inputs"]["maintenancePolicy"]["maintenanceExclusions"]
    assert exclusion == {
        "exclusionName": "no-minor-upgrades-indefinite",
        "startTime": "2025-12-01T00:00:00Z",
        "exclusionOptions": {"scope": "NO_MINOR_UPGRADES", "endTimeBehavior": "UNTIL_END_OF_SUPPORT"},
    }
    off = plan_of("prod", "tpu-rl:gke.maintenanceExclusion=none", "tpu-rl:gke.maintenanceWindow=03:30")
    assert one(off, CLUSTER)["inputs"]["maintenancePolicy"] == {"dailyMaintenanceWindow": {"startTime": "03:30"}}


@pytest.mark.slow
def test_a_hold_keeps_every_upgrade_away_between_its_dates(prod_plan):
    """A long run: a NO_UPGRADES exclusion (at most 30 days) beside the standing one; removing the key lifts it.
    Only the cluster changes (in place): no step is renamed (test_lifecycle walks every key)."""
    held = plan_of("prod", "tpu-rl:gke.holdUpgrades=2026-12-01/2026-12-29")
    exclusions = one(held, CLUSTER)["inputs"]["maintenancePolicy"]["maintenanceExclusions"]
    assert exclusions[1:] == [
        {
            "exclusionName": "hold-all-upgrades",
            "startTime": "2026-12-01T00:00:00Z",
            "endTime": "2026-12-29T00:00:00Z",
            "exclusionOptions": {"scope": "NO_UPGRADES"},
        }
    ]
    assert exclusions[0]["exclusionOptions"]["scope"] == "NO_MINOR_OR_NODE_UPGRADES"
    alone = plan_of("prod", "tpu-rl:gke.holdUpgrades=2026-12-01/2026-12-29", "tpu-rl:gke.maintenanceExclusion=none")
    assert [
        e["exclusionName"] for e in one(alone, CLUSTER)["inputs"]["maintenancePolicy"]["maintenanceExclusions"]
    ] == ["hold-all-upgrades"]
    assert [s["name"] for s in step_resources(held).values()] == [s["name"] for s in step_resources(prod_plan).values()]


@pytest.mark.slow
def test_the_version_prefix_pins_the_control_plane_once(prod_plan, dev_plan):
    assert "minMasterVersion" not in one(dev_plan, CLUSTER)["inputs"], "no prefix: the channel decides"
    assert one(prod_plan, CLUSTER)["inputs"]["minMasterVersion"] == "1.35.0-gke.0", "the prod example pins 1.35."
    cluster = one(plan_of("prod", "tpu-rl:gke.versionPrefix=1.35.", "tpu-rl:gke.releaseChannel=STABLE"), CLUSTER)
    assert cluster["inputs"]["minMasterVersion"] == "1.35.0-gke.0", "the mock's newest 1.35. on STABLE"
    assert cluster["inputs"]["releaseChannel"] == {"channel": "STABLE"}
    assert "minMasterVersion" in cluster["options"]["ignoreChanges"], "later upgrades are GKE's, inside the policy"


@pytest.mark.pure
@pytest.mark.parametrize(
    ("capacity", "extra", "restarts"),
    [
        ("reservation", [], 1),
        ("on-demand", ["tpu-rl:tpu.reservation="], 1),
        ("spot", ["tpu-rl:tpu.reservation="], 3),
        ("flex-start", ["tpu-rl:tpu.reservation="], 2),
    ],
)
def test_default_restarts_fit_the_capacity_mode(capacity, extra, restarts):
    s = settings("prod", [f"tpu-rl:tpu.capacity={capacity}", *extra])
    assert s.workflow.max_restarts == restarts
    assert (
        settings(
            "prod", [f"tpu-rl:tpu.capacity={capacity}", *extra, "tpu-rl:workflow.maxRestarts=0"]
        ).workflow.max_restarts
        == 0
    ), "an explicit value wins"


@pytest.mark.pure
def test_checkpoints_bound_what_a_failure_loses():
    s = settings("prod", [])
    assert s.training.knobs["checkpoint_period"] == 10 < s.training.final_step
    assert settings("prod", ["tpu-rl:training.checkpointPeriod=5"]).training.knobs["checkpoint_period"] == 5


def test_cpu_np_is_tainted_and_exactly_our_cpu_pods_tolerate_it(prod_plan):
    taints = one(prod_plan, POOL, "cpu-pool")["inputs"]["nodeConfig"]["taints"]
    assert taints == [{"key": "tpu-rl/pool", "value": "cpu-np", "effect": "NO_SCHEDULE"}]
    assert "taints" not in one(prod_plan, POOL, "system-pool")["inputs"]["nodeConfig"], "system pods go there"
    toleration = {"key": "tpu-rl/pool", "operator": "Equal", "value": "cpu-np", "effect": "NoSchedule"}
    steps = step_resources(prod_plan)
    for step in ("convert", "export"):
        (job,) = steps[step]["inputs"]["spec"]["replicatedJobs"]
        assert job["template"]["spec"]["template"]["spec"]["tolerations"] == [toleration]
    head, worker = (
        j["template"]["spec"]["template"]["spec"] for j in steps["train"]["inputs"]["spec"]["replicatedJobs"]
    )
    assert head["tolerations"] == [toleration] and head["nodeSelector"] == {"cloud.google.com/gke-nodepool": "cpu-np"}
    assert toleration not in worker["tolerations"], "TPU workers never land on cpu-np"


@pytest.mark.parametrize(
    ("machine", "disk"),
    [
        ("n2-standard-64", "pd-balanced"),
        ("n4-standard-64", "hyperdisk-balanced"),
        ("c4-highmem-48", "hyperdisk-balanced"),
        ("n2d-highmem-64", "pd-balanced"),
    ],
)
@pytest.mark.slow
def test_disk_type_and_scratch_storage_class_follow_the_machine_family(machine, disk):
    plan = plan_of("prod", f"tpu-rl:cpuPool.machineType={machine}")
    assert one(plan, POOL, "cpu-pool")["inputs"]["nodeConfig"]["diskType"] == disk
    storage_class = one(plan, STORAGE_CLASS)["inputs"]
    assert storage_class["parameters"] == {"type": disk}
    assert storage_class["provisioner"] == "pd.csi.storage.gke.io"
    assert storage_class["volumeBindingMode"] == "WaitForFirstConsumer", "the disk is made in the node's zone"
    assert one(plan, STORAGE_CLASS)["options"]["deleteBeforeReplace"] is True, "a fixed name"


@pytest.mark.pure
def test_an_unknown_machine_family_is_refused():
    with pytest.raises(
        ConfigError, match="tpu-rl:cpuPool.machineType = \"z9-standard-64\" is invalid: unknown machine family 'z9'"
    ):
        settings("prod", ["tpu-rl:cpuPool.machineType=z9-standard-64"])


@pytest.mark.slow
def test_tpu_boot_disks(prod_plan):
    tpu = one(prod_plan, POOL, "tpu-pool-0")["inputs"]["nodeConfig"]
    assert (tpu["diskType"], tpu["diskSizeGb"]) == ("hyperdisk-balanced", 100), "Cluster Toolkit's v6e pool"
    v5e = one(plan_of("dev", "tpu-rl:tpu.version=v5e", "tpu-rl:tpu.machineType="), POOL, "tpu-pool-0")
    assert v5e["inputs"]["nodeConfig"]["diskType"] == "pd-balanced"


@pytest.mark.pure
@pytest.mark.parametrize(
    ("overrides", "key", "words"),
    [
        (["gcp:zone=us-east5-c"], "gcp:zone", "flex-start is offered in asia-northeast1-b, us-east5-a, us-east5-b"),
        (["tpu-rl:gke.versionPrefix=1.32."], "tpu-rl:gke.versionPrefix", "needs GKE 1.33.0-gke.1712000"),
    ],
)
def test_flex_start_limits(overrides, key, words):
    base = ["tpu-rl:tpu.capacity=flex-start", "tpu-rl:tpu.reservation="]
    with pytest.raises(ConfigError, match=f"^{key} = .* is invalid: .*{words}"):
        settings("prod", [*base, *overrides])
    assert settings("prod", [*base, "tpu-rl:gke.versionPrefix=1.33."]).tpu.capacity == "flex-start"
    assert settings("prod", ["gcp:zone=us-east5-c"]).zone == "us-east5-c", "other capacity modes: any zone"


def test_the_auth_plugin_uses_application_default_credentials(dev_plan):
    kubeconfig = yaml.safe_load(dev_plan.raw_inputs["gke"]["kubeconfig"])
    plugin = kubeconfig["users"][0]["user"]["exec"]
    assert plugin["command"] == "gke-gcloud-auth-plugin"
    assert plugin["args"] == ["--use_application_default_credentials"]
    assert plugin["provideClusterInfo"] is True


def test_the_apis_project_iam_needs_are_enabled(dev_plan):
    services = {s["inputs"]["service"] for s in dev_plan.find("gcp:projects/service:Service")}
    assert "cloudresourcemanager.googleapis.com" in services, "project-level IAM members"
    iam = dev_plan.find("gcp:projects/iAMMember:IAMMember")
    assert all("cloudresourcemanager" in r["options"]["dependsOn"] for r in iam)
