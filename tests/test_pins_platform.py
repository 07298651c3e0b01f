"""Every GKE cluster and node pool argument the slice, Pathways and the workflow depend on, pinned against
the tutorial's Cluster Toolkit blueprint (../shared/reference/cluster-toolkit.md) and cross-checked with the
network, the catalogue and the config. Pure: the builders only."""

from __future__ import annotations

import pytest

from core.tpu import CATALOGUE, TpuVersionName, chips_in, resolve_slice
from infra.gcp import gke_spec
from tests.lifecycle_walk import settings

pytestmark = pytest.mark.pure

PROD = settings("prod", [])
DEV = settings("dev", [])
SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]
SHIELDED = {"enable_secure_boot": True, "enable_integrity_monitoring": True}
LABELS = {"app": "tpu-rl", "stack": "prod", "cluster": "tpu-rl-prod", "managed-by": "pulumi"}
SURGE_0_1 = {"strategy": "SURGE", "max_surge": 0, "max_unavailable": 1}
STREAMING = {"enabled": True}  # GKE Image streaming on cpu-np (the big image); none on the TPU pool, as the blueprint


def node_config(machine, disk_gb, disk_type, sa, **extra):
    return {
        "machine_type": machine,
        "disk_size_gb": disk_gb,
        "disk_type": disk_type,
        "service_account": sa,
        "oauth_scopes": SCOPES,
        "workload_metadata_config": {"mode": "GKE_METADATA"},
        "shielded_instance_config": SHIELDED,
        "metadata": {"disable-legacy-endpoints": "true"},
        # CIS GKE 5.9.1: the kubelet's unauthenticated read-only port 10255 is off on every pool.
        "kubelet_config": {"insecure_kubelet_readonly_port_enabled": "FALSE"},
        "resource_labels": LABELS,
        "gvnic": {"enabled": True},  # every pool at its creation (Cluster Toolkit's and xpk's TPU pools)
        **extra,
    }


def test_the_cluster_is_the_blueprints_private_regional_cluster_pinned_to_the_zone():
    assert gke_spec.cluster_args(PROD, "NET", "SUB", "SYS@") == {
        "name": "tpu-rl-prod",
        "project": "my-tpu-prod-project",
        "location": "us-east5",
        "node_locations": ["us-east5-b"],
        "network": "NET",
        "subnetwork": "SUB",
        "networking_mode": "VPC_NATIVE",
        "ip_allocation_policy": {"cluster_secondary_range_name": "pods", "services_secondary_range_name": "services"},
        "remove_default_node_pool": True,
        "initial_node_count": 1,
        "node_config": {"service_account": "SYS@", "oauth_scopes": SCOPES, "shielded_instance_config": SHIELDED},
        "release_channel": {"channel": "REGULAR"},
        "maintenance_policy": {
            "daily_maintenance_window": {"start_time": "09:00"},
            "maintenance_exclusions": [
                {
                    "exclusion_name": "no-minor-or-node-upgrades-indefinite",
                    "start_time": "2025-12-01T00:00:00Z",
                    "exclusion_options": {
                        "scope": "NO_MINOR_OR_NODE_UPGRADES",
                        "end_time_behavior": "UNTIL_END_OF_SUPPORT",
                    },
                }
            ],
        },
        "workload_identity_config": {"workload_pool": "my-tpu-prod-project.svc.id.goog"},
        "private_cluster_config": {
            "enable_private_nodes": True,
            "enable_private_endpoint": False,
            "master_ipv4_cidr_block": "172.16.0.32/28",
        },
        "master_authorized_networks_config": {
            "cidr_blocks": [{"cidr_block": "203.0.113.0/24", "display_name": "authorized-0"}],
            "gcp_public_cidrs_access_enabled": False,
        },
        "master_auth": {"client_certificate_config": {"issue_client_certificate": False}},
        "enable_shielded_nodes": True,
        "datapath_provider": "ADVANCED_DATAPATH",
        "addons_config": {"gcs_fuse_csi_driver_config": {"enabled": True}},
        "logging_config": {"enable_components": ["SYSTEM_COMPONENTS", "WORKLOADS"]},
        "deletion_protection": True,
        "resource_labels": LABELS,
        "database_encryption": {"state": "DECRYPTED"},
    }


def test_cluster_variants():
    many = settings("dev", ['tpu-rl:authorizedNetworks=["198.51.100.0/24", "192.0.2.7/32"]'])
    cluster = gke_spec.cluster_args(many, "N", "S", "E", "1.35.2-gke.1")
    assert cluster["master_authorized_networks_config"]["cidr_blocks"] == [
        {"cidr_block": "198.51.100.0/24", "display_name": "authorized-0"},
        {"cidr_block": "192.0.2.7/32", "display_name": "authorized-1"},
    ]
    assert cluster["min_master_version"] == "1.35.2-gke.1" and cluster["deletion_protection"] is False
    assert "min_master_version" not in gke_spec.cluster_args(DEV, "N", "S", "E")
    assert gke_spec.cluster_args(DEV, "N", "S", "E")["database_encryption"] == {"state": "DECRYPTED"}
    assert gke_spec.cluster_args(PROD, "N", "S", "E", None, "KEY")["database_encryption"] == {
        "state": "ENCRYPTED",
        "key_name": "KEY",
    }
    stable = settings("dev", ["tpu-rl:gke.releaseChannel=STABLE", "tpu-rl:gke.maintenanceExclusion=none"])
    cluster = gke_spec.cluster_args(stable, "N", "S", "E")
    assert cluster["release_channel"] == {"channel": "STABLE"}
    assert cluster["maintenance_policy"] == {"daily_maintenance_window": {"start_time": "09:00"}}


def test_a_hold_is_a_no_upgrades_exclusion_between_its_dates():
    held = settings("dev", ["tpu-rl:gke.holdUpgrades=2026-12-01/2026-12-29", "tpu-rl:gke.maintenanceExclusion=none"])
    assert gke_spec.cluster_args(held, "N", "S", "E")["maintenance_policy"] == {
        "daily_maintenance_window": {"start_time": "09:00"},
        "maintenance_exclusions": [
            {
                "exclusion_name": "hold-all-upgrades",
                "start_time": "2026-12-01T00:00:00Z",
                "end_time": "2026-12-29T00:00:00Z",
                "exclusion_options": {"scope": "NO_UPGRADES"},
            }
        ],
    }


def test_the_ranges_the_cluster_names_are_the_subnets():
    cluster = gke_spec.cluster_args(PROD, "N", "S", "E")
    ranges = cluster["ip_allocation_policy"]
    assert (ranges["cluster_secondary_range_name"], ranges["services_secondary_range_name"]) == (
        gke_spec.PODS_RANGE,
        gke_spec.SERVICES_RANGE,
    )
    assert (gke_spec.SUBNET_CIDR, gke_spec.PODS_CIDR, gke_spec.SERVICES_CIDR) == (
        "192.168.0.0/18",
        "10.4.0.0/14",
        "10.0.32.0/20",
    )


def tpu_pool(s, name):
    return gke_spec.tpu_pool_args(gke_spec.PoolSite.of(s), name, s.slice, s.tpu, "TPU@")


def test_system_and_cpu_pools():
    assert gke_spec.system_pool_args(gke_spec.PoolSite.of(PROD), PROD.system_pool, "SYS@") == {
        "name": "system",
        "project": "my-tpu-prod-project",
        "location": "us-east5",
        "node_locations": ["us-east5-b"],
        "autoscaling": {"min_node_count": 2, "max_node_count": 10},
        "management": {"auto_repair": True, "auto_upgrade": True},
        "upgrade_settings": SURGE_0_1,
        "node_config": node_config("e2-standard-8", 200, "pd-balanced", "SYS@"),
    }
    assert gke_spec.cpu_pool_args(gke_spec.PoolSite.of(PROD), PROD.cpu_pool, "CPU@") == {
        "name": "cpu-np",
        "project": "my-tpu-prod-project",
        "location": "us-east5",
        "node_locations": ["us-east5-b"],
        "autoscaling": {"min_node_count": 0, "max_node_count": 4},
        "management": {"auto_repair": True, "auto_upgrade": True},
        "upgrade_settings": SURGE_0_1,
        "node_config": node_config(
            "n4-standard-64",  # Cluster Toolkit's cpu-np (gke-cluster main.tf); N4 boots from Hyperdisk only
            500,
            "hyperdisk-balanced",
            "CPU@",
            gcfs_config=STREAMING,
            taints=[{"key": "tpu-rl/pool", "value": "cpu-np", "effect": "NO_SCHEDULE"}],
        ),
    }


TPU_LABELS = {"cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice", "cloud.google.com/gke-tpu-topology": "4x8"}
TPU_TAINTS = [{"key": "google.com/tpu", "value": "present", "effect": "NO_SCHEDULE"}]


def test_the_reserved_slice_is_the_blueprints_static_compact_pool():
    assert tpu_pool(PROD, "tpu-v6e-4x8-0") == {
        "name": "tpu-v6e-4x8-0",
        "project": "my-tpu-prod-project",
        "location": "us-east5",
        "node_locations": ["us-east5-b"],
        "management": {"auto_repair": True, "auto_upgrade": True},
        "upgrade_settings": SURGE_0_1,
        "placement_policy": {"type": "COMPACT", "tpu_topology": "4x8"},
        "node_count": 8,
        "node_config": node_config(
            "ct6e-standard-4t",
            100,
            "hyperdisk-balanced",
            "TPU@",
            labels=TPU_LABELS,
            taints=TPU_TAINTS,
            reservation_affinity={
                "consume_reservation_type": "SPECIFIC_RESERVATION",
                "key": "compute.googleapis.com/reservation-name",
                "values": ["projects/my-tpu-prod-project/reservations/my-v6e-32-reservation"],
            },
        ),
    }


@pytest.mark.parametrize(
    ("capacity", "node_extra", "policy", "repair"),
    [
        ("spot", {"spot": True}, None, True),
        ("on-demand", {}, None, True),
        ("flex-start", {"flex_start": True}, "ANY", False),
    ],
)
def test_autoscaled_slices_scale_between_zero_and_one_slice(capacity, node_extra, policy, repair):
    s = settings("prod", [f"tpu-rl:tpu.capacity={capacity}", "tpu-rl:tpu.reservation="])
    args = tpu_pool(s, "p")
    autoscaling = {"min_node_count": 0, "max_node_count": 8}
    if policy:
        autoscaling["location_policy"] = policy
    assert args["autoscaling"] == autoscaling and "node_count" not in args
    assert args["management"] == {"auto_repair": repair, "auto_upgrade": True}
    node = args["node_config"]
    assert node["reservation_affinity"] == {"consume_reservation_type": "NO_RESERVATION"}
    assert {k: node[k] for k in ("spot", "flex_start") if k in node} == node_extra


def test_a_single_host_slice_gets_no_topology():
    s = settings("dev", ["tpu-rl:tpu.machineType=ct6e-standard-8t"])
    args = tpu_pool(s, "p")
    assert "placement_policy" not in args
    assert args["autoscaling"] == {"min_node_count": 0, "max_node_count": 1}
    assert args["node_config"]["labels"] == {
        "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
        "cloud.google.com/gke-tpu-topology": "2x4",
    }


# ---------------------------------------------------------------------------------------------
# The TPU catalogue rows (GKE "Plan TPUs in GKE", xpk system_characteristics.py, pathways-job)


@pytest.mark.parametrize(
    ("version", "accelerator", "pathways", "disk", "default"),
    [
        ("v6e", "tpu-v6e-slice", "tpuv6e", "hyperdisk-balanced", "ct6e-standard-4t"),
        ("v5e", "tpu-v5-lite-podslice", "tpuv5e", "pd-balanced", "ct5lp-hightpu-4t"),
        ("v5p", "tpu-v5p-slice", "tpuv5", "pd-balanced", "ct5p-hightpu-4t"),
    ],
)
def test_catalogue_versions(version, accelerator, pathways, disk, default):
    v = CATALOGUE[version]
    assert (v.name, v.gke_accelerator, v.pathways_type, v.boot_disk_type, v.default_machine_type) == (
        version,
        accelerator,
        pathways,
        disk,
        default,
    )
    assert v.machine(default) is not None and v.machine("ct9-nope") is None


@pytest.mark.parametrize(
    ("machine", "chips_per_vm", "single", "multi"),
    [
        ("ct6e-standard-1t", 1, "1x1", ()),
        ("ct6e-standard-4t", 4, "2x2", ("2x4", "4x4", "4x8", "8x8", "8x16", "16x16")),
        ("ct6e-standard-8t", 8, "2x4", ()),
        ("ct5lp-hightpu-1t", 1, "1x1", ()),
        ("ct5lp-hightpu-4t", 4, "2x2", ("2x4", "4x4", "4x8", "8x8", "8x16", "16x16")),
        ("ct5lp-hightpu-8t", 8, "2x4", ()),
        ("ct5p-hightpu-4t", 4, "2x2x1", ("2x2x2", "2x2x4", "2x4x4", "4x4x4", "4x4x8", "4x8x8", "8x8x8", "8x8x16")),
    ],
)
def test_catalogue_machines(machine, chips_per_vm, single, multi):
    m = next(m for v in CATALOGUE.values() for m in v.machine_types if m.name == machine)
    assert (m.chips_per_vm, m.single_host_topology, m.multi_host_topologies) == (chips_per_vm, single, multi)
    assert m.topologies == (single, *multi) and m.multi_host_capable == bool(multi)


@pytest.mark.parametrize(
    ("version", "machine", "topology", "chips", "hosts", "instance", "pool_topology"),
    [
        ("v6e", "ct6e-standard-4t", "4x8", 32, 8, "tpuv6e:4x8", "4x8"),
        ("v6e", "ct6e-standard-4t", "2x2", 4, 1, "tpuv6e:2x2", None),
        ("v6e", "ct6e-standard-8t", "2x4", 8, 1, "tpuv6e:2x4", None),
        ("v5e", "ct5lp-hightpu-4t", "8x16", 128, 32, "tpuv5e:8x16", "8x16"),
        ("v5p", "ct5p-hightpu-4t", "2x2x4", 16, 4, "tpuv5:2x2x4", "2x2x4"),
        ("v5p", "ct5p-hightpu-4t", "2x2x1", 4, 1, "tpuv5:2x2x1", None),
    ],
)
def test_slices(version, machine, topology, chips, hosts, instance, pool_topology):
    shape = resolve_slice(version, machine, topology)
    assert (shape.chips, shape.hosts, shape.multi_host) == (chips, hosts, hosts > 1)
    assert shape.pathways_instance_type == instance and shape.pool_topology == pool_topology
    assert shape.gke_accelerator == CATALOGUE[version].gke_accelerator
    assert shape.boot_disk_type == CATALOGUE[version].boot_disk_type and shape.chips_per_vm == chips // hosts


def test_resolve_slice_refuses_what_a_machine_cannot_form():
    cases: tuple[tuple[TpuVersionName, str, str], ...] = (
        ("v6e", "ct6e-standard-4t", "4x5"),
        ("v6e", "nope", "2x2"),
        ("v6e", "ct6e-standard-8t", "4x8"),
    )
    for version, machine, topology in cases:
        with pytest.raises(ValueError, match=f"{machine} cannot form {topology}"):
            resolve_slice(version, machine, topology)


def test_a_topology_counts_its_chips():
    assert chips_in("4x8") == 32 and chips_in("2x2x4") == 16 and chips_in("1x1") == 1


def test_the_namespace_states_its_pod_security_levels():
    """Pod Security Admission: enforce privileged, which the Pathways head needs (privileged,
    hostNetwork, a hostPath: xpk's head), and audit baseline, so the log records every pod beyond it."""
    from infra.k8s.manifests import namespace_manifest

    labels = namespace_manifest("tpu-rl", {"app.kubernetes.io/name": "tpu-rl"})["metadata"]["labels"]
    assert labels == {
        "app.kubernetes.io/name": "tpu-rl",
        "pod-security.kubernetes.io/enforce": "privileged",
        "pod-security.kubernetes.io/enforce-version": "latest",
        "pod-security.kubernetes.io/audit": "baseline",
        "pod-security.kubernetes.io/audit-version": "latest",
    }
