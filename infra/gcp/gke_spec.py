"""Plain builders for the GKE cluster and node pool arguments (no Pulumi here).

Each function returns the keyword arguments of the pulumi-gcp resource, with
values computed elsewhere (service account emails, network ids) passed in.
"""

from __future__ import annotations

from typing import Any

from core.settings import Settings

CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
MASTER_CIDR = "172.16.0.32/28"
SUBNET_CIDR = "192.168.0.0/18"
PODS_CIDR = "10.4.0.0/14"
SERVICES_CIDR = "10.0.32.0/20"
TPU_TAINT = {"key": "google.com/tpu", "value": "present", "effect": "NO_SCHEDULE"}
RESERVATION_KEY = "compute.googleapis.com/reservation-name"


def cluster_args(settings: Settings, network: Any, subnet: Any, system_sa_email: Any) -> dict[str, Any]:
    """A regional, private, Workload-Identity cluster with nodes pinned to the zone."""
    return {
        "name": settings.cluster_name,
        "project": settings.project,
        "location": settings.region,
        "node_locations": [settings.zone],
        "network": network,
        "subnetwork": subnet,
        "networking_mode": "VPC_NATIVE",
        "ip_allocation_policy": {
            "cluster_secondary_range_name": "pods",
            "services_secondary_range_name": "services",
        },
        "remove_default_node_pool": True,
        "initial_node_count": 1,
        "node_config": {
            "service_account": system_sa_email,
            "oauth_scopes": [CLOUD_PLATFORM_SCOPE],
            "shielded_instance_config": {"enable_secure_boot": True, "enable_integrity_monitoring": True},
        },
        "release_channel": {"channel": "REGULAR"},
        "workload_identity_config": {"workload_pool": f"{settings.project}.svc.id.goog"},
        "private_cluster_config": {
            "enable_private_nodes": True,
            "enable_private_endpoint": False,
            "master_ipv4_cidr_block": MASTER_CIDR,
        },
        "master_authorized_networks_config": {
            "cidr_blocks": [
                {"cidr_block": cidr, "display_name": f"authorized-{i}"}
                for i, cidr in enumerate(settings.authorized_networks)
            ],
            "gcp_public_cidrs_access_enabled": False,
        },
        "master_auth": {"client_certificate_config": {"issue_client_certificate": False}},
        "enable_shielded_nodes": True,
        "datapath_provider": "ADVANCED_DATAPATH",
        "addons_config": {"gcs_fuse_csi_driver_config": {"enabled": True}},
        "logging_config": {"enable_components": ["SYSTEM_COMPONENTS", "WORKLOADS"]},
        "deletion_protection": settings.protect,
        "resource_labels": settings.labels,
    }


def _node_config(settings: Settings, sa_email: Any, machine_type: str, disk_gb: int, **extra: Any) -> dict[str, Any]:
    return {
        "machine_type": machine_type,
        "disk_size_gb": disk_gb,
        "service_account": sa_email,
        "oauth_scopes": [CLOUD_PLATFORM_SCOPE],
        "workload_metadata_config": {"mode": "GKE_METADATA"},
        "shielded_instance_config": {"enable_secure_boot": True, "enable_integrity_monitoring": True},
        "metadata": {"disable-legacy-endpoints": "true"},
        "resource_labels": settings.labels,
        **extra,
    }


def system_pool_args(settings: Settings, cluster: Any, sa_email: Any) -> dict[str, Any]:
    """The system pool (cluster add-ons, the JobSet controller)."""
    pool = settings.system_pool
    return {
        "name": "system",
        "project": settings.project,
        "cluster": cluster,
        "location": settings.region,
        "node_locations": [settings.zone],
        "autoscaling": {"min_node_count": pool.min_nodes, "max_node_count": pool.max_nodes},
        "management": {"auto_repair": True, "auto_upgrade": True},
        "node_config": _node_config(settings, sa_email, pool.machine_type, pool.disk_size_gb),
    }


def cpu_pool_args(settings: Settings, cluster: Any, sa_email: Any) -> dict[str, Any]:
    """``cpu-np``: the Pathways head and the CPU-only conversion and export; scales from 0."""
    pool = settings.cpu_pool
    return {
        "name": "cpu-np",
        "project": settings.project,
        "cluster": cluster,
        "location": settings.region,
        "node_locations": [settings.zone],
        "autoscaling": {"min_node_count": pool.min_nodes, "max_node_count": pool.max_nodes},
        "management": {"auto_repair": True, "auto_upgrade": True},
        "node_config": _node_config(settings, sa_email, pool.machine_type, pool.disk_size_gb, disk_type="pd-balanced"),
    }


def tpu_pool_args(settings: Settings, name: str, cluster: Any, sa_email: Any) -> dict[str, Any]:
    """One TPU slice pool: static on a reservation, otherwise autoscaled between 0 and one slice."""
    shape, tpu = settings.slice, settings.tpu
    extra: dict[str, Any] = {
        "labels": {
            "cloud.google.com/gke-tpu-accelerator": shape.gke_accelerator,
            "cloud.google.com/gke-tpu-topology": shape.topology,
        },
        "taints": [TPU_TAINT],
        "disk_type": shape.boot_disk_type,
    }
    args: dict[str, Any] = {
        "name": name,
        "project": settings.project,
        "cluster": cluster,
        "location": settings.region,
        "node_locations": [settings.zone],
        "management": {"auto_repair": tpu.capacity != "flex-start", "auto_upgrade": True},
    }
    if shape.pool_topology:
        args["placement_policy"] = {"type": "COMPACT", "tpu_topology": shape.pool_topology}
    if tpu.capacity == "reservation":
        args["node_count"] = shape.hosts
        extra["reservation_affinity"] = {
            "consume_reservation_type": "SPECIFIC_RESERVATION",
            "key": RESERVATION_KEY,
            "values": [tpu.reservation],
        }
    else:
        args["autoscaling"] = {"min_node_count": 0, "max_node_count": shape.hosts}
        extra["reservation_affinity"] = {"consume_reservation_type": "NO_RESERVATION"}
        if tpu.capacity == "spot":
            extra["spot"] = True
        elif tpu.capacity == "flex-start":
            extra["flex_start"] = True
            args["autoscaling"]["location_policy"] = "ANY"
    args["node_config"] = _node_config(settings, sa_email, shape.machine_type, 100, **extra)
    return args
