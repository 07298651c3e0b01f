"""Plain builders for the GKE cluster and node pool arguments (no Pulumi here).

Each function returns the keyword arguments of the pulumi-gcp resource, typed (``ClusterSpec``, ``NodePoolSpec``:
the provider's snake_case names; each nested value is the provider's own ``...ArgsDict``, so mypy checks its keys),
with values computed elsewhere (service account emails, network ids) passed in. The pool builders take what they read
of the settings (``PoolSite``, the pool's or the slice's settings), not the whole ``Settings``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from core.names import (
    CPU_POOL,
    CPU_TAINT_KEY,
    CPU_TAINT_VALUE,
    SYSTEM_POOL,
    TPU_ACCELERATOR_LABEL,
    TPU_TAINT_KEY,
    TPU_TAINT_VALUE,
    TPU_TOPOLOGY_LABEL,
)
from core.settings import GkeSettings, PoolSettings, Settings, TpuSettings
from core.tpu import Capacity, SliceShape

if TYPE_CHECKING:  # the provider's types only: this module imports no Pulumi (pyproject.toml [tool.importlinter])
    from pulumi_gcp.container import (
        ClusterAddonsConfigArgsDict,
        ClusterDatabaseEncryptionArgsDict,
        ClusterIpAllocationPolicyArgsDict,
        ClusterLoggingConfigArgsDict,
        ClusterMaintenancePolicyArgsDict,
        ClusterMaintenancePolicyMaintenanceExclusionArgsDict,
        ClusterMasterAuthArgsDict,
        ClusterMasterAuthorizedNetworksConfigArgsDict,
        ClusterNodeConfigArgsDict,
        ClusterPrivateClusterConfigArgsDict,
        ClusterReleaseChannelArgsDict,
        ClusterWorkloadIdentityConfigArgsDict,
        NodePoolAutoscalingArgsDict,
        NodePoolManagementArgsDict,
        NodePoolNodeConfigArgsDict,
        NodePoolNodeConfigGcfsConfigArgsDict,
        NodePoolNodeConfigGvnicArgsDict,
        NodePoolNodeConfigTaintArgsDict,
        NodePoolPlacementPolicyArgsDict,
        NodePoolUpgradeSettingsArgsDict,
    )

CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
MASTER_CIDR = "172.16.0.32/28"
SUBNET_CIDR = "192.168.0.0/18"
PODS_CIDR = "10.4.0.0/14"
SERVICES_CIDR = "10.0.32.0/20"
PODS_RANGE = "pods"
SERVICES_RANGE = "services"
TPU_TAINT: NodePoolNodeConfigTaintArgsDict = {"key": TPU_TAINT_KEY, "value": TPU_TAINT_VALUE, "effect": "NO_SCHEDULE"}
CPU_TAINT: NodePoolNodeConfigTaintArgsDict = {"key": CPU_TAINT_KEY, "value": CPU_TAINT_VALUE, "effect": "NO_SCHEDULE"}
RESERVATION_KEY = "compute.googleapis.com/reservation-name"
TPU_BOOT_DISK_GB = 100
"""Boot disk of a TPU VM (Cluster Toolkit's v6e pool: 100 GB)."""
# Node upgrades one VM at a time with no surge VM (Cluster Toolkit's gke-node-pool module): an
# exact-size reservation has no spare VM for a surge, and a multi-host slice is replaced as a whole.
UPGRADE_SETTINGS: NodePoolUpgradeSettingsArgsDict = {"strategy": "SURGE", "max_surge": 0, "max_unavailable": 1}
EXCLUSION_START = "2025-12-01T00:00:00Z"
"""Start of the standing exclusion (a fixed past instant: the exclusion's identity never changes)."""
EXCLUSION_NAMES = {
    "NO_MINOR_UPGRADES": "no-minor-upgrades-indefinite",
    "NO_MINOR_OR_NODE_UPGRADES": "no-minor-or-node-upgrades-indefinite",
}
HOLD_NAME = "hold-all-upgrades"
GVNIC: NodePoolNodeConfigGvnicArgsDict = {"enabled": True}
"""Google Virtual NIC on every pool, as Google's TPU tooling creates its pools: Cluster Toolkit's gke-node-pool module
(system, cpu-np and the v6e slice, ``../shared/reference/cluster-toolkit.md`` §1.6-1.8) and xpk's TPU node pools
(``--enable-gvnic``). GKE's own gVNIC page is written for GPU nodes ("Increase network traffic speed for GPU nodes",
https://cloud.google.com/kubernetes-engine/docs/how-to/using-gvnic) and names no TPU recommendation; the training's
data-center traffic (Pathways between the head on cpu-np and the workers, checkpoints to Cloud Storage) is what it
speeds up. Set at creation only: the same page says enabling it on an existing pool re-creates its nodes outside the
maintenance policy, which on the TPU pool would end a running training; ``infra.gcp.cluster`` ignores changes of the
field on an update, so a pool created or replaced after the change gets it and an existing one keeps what it has."""
IMAGE_STREAMING: NodePoolNodeConfigGcfsConfigArgsDict = {"enabled": True}
"""GKE Image streaming (``nodeConfig.gcfsConfig``) on cpu-np, the pool that runs the ~12 GB MaxText image (the
conversion, the Pathways head, the export): the node mounts an eligible image and reads its files as they are needed
instead of pulling every layer first ("Use Image streaming to pull container images",
https://cloud.google.com/kubernetes-engine/docs/how-to/image-streaming, Requirements and Limitations;
docs/images-and-caches.md "Image pulls"). Eligible: images in Artifact Registry standard or remote repositories (or
public Docker Hub images), on Container-Optimized OS with containerd (GKE's default node image, the one cpu-np uses),
with the Container File System API enabled (``core.names.IMAGE_STREAMING_API``), Private Google Access on the subnet
(``infra.gcp.network``) and, for a node service account of its own, the Service Usage Consumer role in the project
that hosts the images. An image that is not eligible is downloaded as before: streaming never stops a pull.

Not on the TPU slice pools: the Image streaming page's requirements and limitations name no
machine type either way, no GKE TPU page read says it is supported on TPU slice nodes, and Cluster Toolkit's
gke-tpu-v6e blueprint, the tutorial's, leaves it off (its gke-node-pool module's ``enable_gcfs`` defaults to false
and the blueprint does not set it: modules/compute/gke-node-pool/variables.tf, examples/gke-tpu-v6e/gke-tpu-v6e.yaml).
A setting GKE might refuse there would fail the slice's pool after the cluster exists, for little: the TPU workers
run the Pathways server, not the 12 GB image. The system pool runs none of the steps' images.

Set at creation, like gVNIC (``GVNIC``): on an existing pool the provider would change it in place
(terraform-provider-google node_config.go, nodePoolNodeConfigUpdate: "updating GKE node pool gcfs_config"), a node
configuration change that the pages read for this do not say GKE makes without re-creating the nodes;
``infra.gcp.cluster`` ignores the field on an update, so a TPU pool created with it keeps it, and
docs/images-and-caches.md "Image pulls" gives the command that turns it on or off in an existing pool between runs."""


class ClusterSpec(TypedDict):
    """``gcp.container.Cluster``'s keyword arguments that tpu-rl sets (``cluster_args``); a value computed elsewhere
    (the network, the system account, the Secrets key) is ``Any``: a plain value here, an Output in the program."""

    name: str
    project: str
    location: str
    node_locations: list[str]
    network: Any
    subnetwork: Any
    networking_mode: str
    ip_allocation_policy: ClusterIpAllocationPolicyArgsDict
    remove_default_node_pool: bool
    initial_node_count: int
    node_config: ClusterNodeConfigArgsDict
    release_channel: ClusterReleaseChannelArgsDict
    maintenance_policy: ClusterMaintenancePolicyArgsDict
    workload_identity_config: ClusterWorkloadIdentityConfigArgsDict
    private_cluster_config: ClusterPrivateClusterConfigArgsDict
    master_authorized_networks_config: ClusterMasterAuthorizedNetworksConfigArgsDict
    master_auth: ClusterMasterAuthArgsDict
    enable_shielded_nodes: bool
    datapath_provider: str
    addons_config: ClusterAddonsConfigArgsDict
    logging_config: ClusterLoggingConfigArgsDict
    deletion_protection: bool
    resource_labels: dict[str, str]
    database_encryption: ClusterDatabaseEncryptionArgsDict
    min_master_version: NotRequired[Any]
    """Only with a version to create the cluster at."""


class NodePoolSpec(TypedDict):
    """``gcp.container.NodePool``'s keyword arguments that tpu-rl sets (``system_pool_args``, ``cpu_pool_args``,
    ``tpu_pool_args``), but its ``cluster``: the cluster component gives each pool the cluster it creates."""

    name: str
    project: str
    location: str
    node_locations: list[str]
    management: NodePoolManagementArgsDict
    upgrade_settings: NodePoolUpgradeSettingsArgsDict
    node_config: NodePoolNodeConfigArgsDict
    autoscaling: NotRequired[NodePoolAutoscalingArgsDict]
    """The CPU pools, and a TPU pool without a reservation (it scales between 0 and one slice)."""
    node_count: NotRequired[int]
    """A TPU pool on a reservation: static, the slice's hosts."""
    placement_policy: NotRequired[NodePoolPlacementPolicyArgsDict]
    """A multi-host TPU slice: compact, in its topology."""


def maintenance_policy(gke: GkeSettings) -> ClusterMaintenancePolicyArgsDict:
    """The daily window, the standing exclusion until end of support and an optional hold of every upgrade.

    ``NO_MINOR_OR_NODE_UPGRADES`` (the default, Cluster Toolkit's gke-tpu-v6e blueprint's) keeps every node
    upgrade away until end of support, so no node upgrade ends a training run: not of its TPU slice, whose
    multi-host pool is upgraded as a whole, nor of the Pathways head's cpu-np node; control-plane patches still
    come in, inside the window. It is the same in every capacity mode (``core.config.defaults.DEFAULT_EXCLUSION``
    says why); node patches come in by a manual upgrade between runs (docs/when-a-step-fails.md "What happens
    when...": GKE upgrades).
    ``NO_MINOR_UPGRADES`` lets node patches in, inside the window, where one ends a running attempt.
    ``holdUpgrades`` adds a ``NO_UPGRADES`` exclusion (at most 30 days) that holds control-plane patches too.
    TPU host maintenance is not an upgrade: no exclusion holds it back, and Kueue's recovery timeout waits for it
    (``core.config.defaults.TPU_MAINTENANCE_SECONDS``).
    """
    policy: ClusterMaintenancePolicyArgsDict = {"daily_maintenance_window": {"start_time": gke.maintenance_window}}
    exclusions: list[ClusterMaintenancePolicyMaintenanceExclusionArgsDict] = []
    if gke.maintenance_exclusion:
        exclusions.append(
            {
                "exclusion_name": EXCLUSION_NAMES[gke.maintenance_exclusion],
                "start_time": EXCLUSION_START,
                "exclusion_options": {
                    "scope": gke.maintenance_exclusion,
                    "end_time_behavior": "UNTIL_END_OF_SUPPORT",
                },
            }
        )
    if gke.hold_upgrades:
        start, end = gke.hold_upgrades
        exclusions.append(
            {
                "exclusion_name": HOLD_NAME,
                "start_time": f"{start}T00:00:00Z",
                "end_time": f"{end}T00:00:00Z",
                "exclusion_options": {"scope": "NO_UPGRADES"},
            }
        )
    if exclusions:
        policy["maintenance_exclusions"] = exclusions
    return policy


def cluster_args(
    settings: Settings,
    network: Any,
    subnet: Any,
    system_sa_email: Any,
    min_master_version: Any = None,
    secrets_key: Any = None,
) -> ClusterSpec:
    """A regional, private, Workload-Identity cluster with nodes pinned to the zone."""
    # Application-layer encryption of Secrets (the Hugging Face token) with a Cloud KMS key, CIS GKE 5.3.1. Without
    # a key the state is sent as DECRYPTED: the field is optional and computed, so leaving it out after removing
    # the key would keep the cluster encrypted with a key whose grant the same `up` deletes.
    encryption: ClusterDatabaseEncryptionArgsDict = (
        {"state": "ENCRYPTED", "key_name": secrets_key} if secrets_key is not None else {"state": "DECRYPTED"}
    )
    args: ClusterSpec = {
        "name": settings.cluster_name,
        "project": settings.project,
        "location": settings.region,
        "node_locations": [settings.zone],
        "network": network,
        "subnetwork": subnet,
        "networking_mode": "VPC_NATIVE",
        "ip_allocation_policy": {
            "cluster_secondary_range_name": PODS_RANGE,
            "services_secondary_range_name": SERVICES_RANGE,
        },
        "remove_default_node_pool": True,
        "initial_node_count": 1,
        "node_config": {
            "service_account": system_sa_email,
            "oauth_scopes": [CLOUD_PLATFORM_SCOPE],
            "shielded_instance_config": {"enable_secure_boot": True, "enable_integrity_monitoring": True},
        },
        "release_channel": {"channel": settings.gke.release_channel},
        "maintenance_policy": maintenance_policy(settings.gke),
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
        "database_encryption": encryption,
    }
    if min_master_version is not None:
        args["min_master_version"] = min_master_version
    return args


@dataclass(frozen=True)
class PoolSite:
    """What every pool builder reads of the settings: where the pool is (the project, the cluster's region and its
    one zone) and its nodes' labels (``tpu-rl``'s resource labels)."""

    project: str
    region: str
    zone: str
    labels: dict[str, str]

    @classmethod
    def of(cls, settings: Settings) -> PoolSite:
        return cls(settings.project, settings.region, settings.zone, settings.labels)


def _node_config(
    site: PoolSite,
    sa_email: Any,
    machine_type: str,
    disk_gb: int,
    disk_type: str,
    extra: NodePoolNodeConfigArgsDict,
    *,
    streaming: bool = False,
) -> NodePoolNodeConfigArgsDict:
    config: NodePoolNodeConfigArgsDict = {
        "machine_type": machine_type,
        "disk_size_gb": disk_gb,
        "disk_type": disk_type,
        "service_account": sa_email,
        "oauth_scopes": [CLOUD_PLATFORM_SCOPE],
        "workload_metadata_config": {"mode": "GKE_METADATA"},
        "shielded_instance_config": {"enable_secure_boot": True, "enable_integrity_monitoring": True},
        "metadata": {"disable-legacy-endpoints": "true"},
        # CIS GKE 5.9.1: no unauthenticated kubelet port 10255 (nothing here reads it; metrics use 10250).
        "kubelet_config": {"insecure_kubelet_readonly_port_enabled": "FALSE"},
        "gvnic": GVNIC,
    }
    if streaming:
        config["gcfs_config"] = IMAGE_STREAMING
    config["resource_labels"] = site.labels
    config.update(extra)
    return config


def _cpu_machine_pool_args(
    site: PoolSite, name: str, pool: PoolSettings, node_config: NodePoolNodeConfigArgsDict
) -> NodePoolSpec:
    """What the system pool and ``cpu-np`` share: one zone, autoscaled between the pool's bounds, repaired and
    upgraded by GKE with the same surge settings."""
    return {
        "name": name,
        "project": site.project,
        "location": site.region,
        "node_locations": [site.zone],
        "autoscaling": {"min_node_count": pool.min_nodes, "max_node_count": pool.max_nodes},
        "management": {"auto_repair": True, "auto_upgrade": True},
        "upgrade_settings": UPGRADE_SETTINGS,
        "node_config": node_config,
    }


def system_pool_args(site: PoolSite, pool: PoolSettings, sa_email: Any) -> NodePoolSpec:
    """The system pool (cluster add-ons, the JobSet controller): ``pool`` is ``tpu-rl:systemPool``."""
    node_config = _node_config(site, sa_email, pool.machine_type, pool.disk_size_gb, pool.disk_type, {})
    return _cpu_machine_pool_args(site, SYSTEM_POOL, pool, node_config)


def cpu_pool_args(site: PoolSite, pool: PoolSettings, sa_email: Any) -> NodePoolSpec:
    """``cpu-np``: the Pathways head and the CPU-only conversion and export; scales from 0 (``pool`` is
    ``tpu-rl:cpuPool``).

    Tainted, so only our steps (which tolerate it) and DaemonSets land there: a stray kube-system
    pod would keep a 64-vCPU node from scaling down.
    """
    extra: NodePoolNodeConfigArgsDict = {"taints": [CPU_TAINT], **secondary_boot_disks(pool.boot_disk_image)}
    node_config = _node_config(
        site, sa_email, pool.machine_type, pool.disk_size_gb, pool.disk_type, extra, streaming=True
    )
    return _cpu_machine_pool_args(site, CPU_POOL, pool, node_config)


IMAGE_CACHE_MODE = "CONTAINER_IMAGE_CACHE"
"""A secondary boot disk used as a container image cache ("CONTAINER_IMAGE_CACHE is for using the secondary boot
disk as a container image cache", GKE API ``SecondaryBootDisk.Mode``)."""


def secondary_boot_disks(image: str) -> NodePoolNodeConfigArgsDict:
    """cpu-np's secondary boot disk (``tpu-rl:cpuPool.bootDiskImage``): GKE gives each new node its own disk made from
    the image, in parallel with the node ("Use secondary boot disks to preload data or container images",
    https://cloud.google.com/kubernetes-engine/docs/how-to/data-container-image-preloading), and containerd reads the
    image's preloaded layers from it; it needs Image streaming (``IMAGE_STREAMING``, on cpu-np) and a node image of
    Container-Optimized OS with containerd (the pools' default). The image is named as the provider documents it for
    the project's own images ("``global/images/DISK_IMAGE_NAME``", ``NodePoolNodeConfigSecondaryBootDiskArgs``).
    Not on the TPU pools: the pages read do not say GKE supports it there, and a change would replace the slice
    (terraform-provider-google marks ``secondary_boot_disks`` ForceNew)."""
    if not image:
        return {}
    return {"secondary_boot_disks": [{"disk_image": f"global/images/{image}", "mode": IMAGE_CACHE_MODE}]}


def tpu_pool_args(site: PoolSite, name: str, shape: SliceShape, tpu: TpuSettings, sa_email: Any) -> NodePoolSpec:
    """One TPU slice pool: static on a reservation, otherwise autoscaled between 0 and one slice.

    No host maintenance policy (``nodeConfig.hostMaintenancePolicy.maintenanceInterval``: ``AS_NEEDED``, or
    ``PERIODIC``, "minimizing the number of maintenance operations (live migrations or terminations) on an individual
    VM"): the field is in GKE's v1beta1 API only (HostMaintenancePolicy,
    https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1beta1/HostMaintenancePolicy), no GKE page read
    says which interval a TPU v6e slice pool accepts, Cluster Toolkit's gke-tpu-v6e blueprint sets none (gke-node-pool's
    ``host_maintenance_interval`` defaults to "" and its ``host_maintenance_policy`` block is then left out:
    modules/compute/gke-node-pool/main.tf, variables.tf), and the provider replaces a pool whose policy changes
    (terraform-provider-google node_config.go: ``host_maintenance_policy`` and ``maintenance_interval`` are
    ``ForceNew``), so a value GKE refused would fail the slice's pool after the cluster exists and a later change
    would replace the slice. GKE's default interval applies: host maintenance comes with notice and ends a running
    attempt, which Kueue's recovery timeout waits out (``core.config.defaults.TPU_MAINTENANCE_SECONDS``;
    docs/when-a-step-fails.md "What happens when...")."""
    extra: NodePoolNodeConfigArgsDict = {
        "labels": {TPU_ACCELERATOR_LABEL: shape.gke_accelerator, TPU_TOPOLOGY_LABEL: shape.topology},
        "taints": [TPU_TAINT],
    }
    if tpu.capacity == Capacity.RESERVATION:
        extra["reservation_affinity"] = {
            "consume_reservation_type": "SPECIFIC_RESERVATION",
            "key": RESERVATION_KEY,
            "values": [tpu.reservation],
        }
    else:
        extra["reservation_affinity"] = {"consume_reservation_type": "NO_RESERVATION"}
        if tpu.capacity == Capacity.SPOT:
            extra["spot"] = True
        elif tpu.capacity == Capacity.FLEX_START:
            extra["flex_start"] = True
    args: NodePoolSpec = {
        "name": name,
        "project": site.project,
        "location": site.region,
        "node_locations": [site.zone],
        # Flex-start VMs cannot be repaired in place (xpk: --no-enable-autorepair).
        "management": {"auto_repair": tpu.capacity != Capacity.FLEX_START, "auto_upgrade": True},
        "upgrade_settings": UPGRADE_SETTINGS,
        # No Image streaming here (``IMAGE_STREAMING`` says why), nor a host maintenance policy (the docstring says
        # why).
        "node_config": _node_config(site, sa_email, shape.machine_type, TPU_BOOT_DISK_GB, shape.boot_disk_type, extra),
    }
    if shape.pool_topology:
        args["placement_policy"] = {"type": "COMPACT", "tpu_topology": shape.pool_topology}
    if tpu.capacity == Capacity.RESERVATION:
        args["node_count"] = shape.hosts
    else:
        args["autoscaling"] = {"min_node_count": 0, "max_node_count": shape.hosts}
        if tpu.capacity == Capacity.FLEX_START:
            args["autoscaling"]["location_policy"] = "ANY"
    return args
