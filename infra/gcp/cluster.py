"""The GKE cluster, its node pools, Workload Identity binding and the Kubernetes provider."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from core.printed_commands import make_target
from infra.gcp.artifact_registry import ImageMirror
from infra.gcp.gke_spec import ClusterSpec, NodePoolSpec
from infra.gcp.identities import NodeIdentities, workload_bindings
from infra.gcp.kms import PROPAGATION_SECONDS, GrantPropagation, SecretsKey
from infra.k8s.kubeconfig import build_kubeconfig
from infra.options import child_options

NODE_ACCOUNTS = ("system", "cpu", "tpu")
"""The node pools' accounts: the nodes run as them, and so do the training's Pathways pods (host network)."""
CLUSTER_TIMEOUTS = pulumi.CustomTimeouts(create="60m", update="60m", delete="60m")
POOL_TIMEOUTS = pulumi.CustomTimeouts(create="45m", update="45m", delete="45m")


@dataclass(frozen=True)
class ClusterVersion:
    """The channel's newest GKE version with a prefix (``tpu-rl:gke.versionPrefix``), read once, at the cluster's
    creation (Cluster Toolkit's way): later upgrades are GKE's, inside the maintenance policy."""

    project: str
    region: str
    prefix: str
    channel: str


@dataclass(frozen=True)
class GkeClusterArgs:
    """What the cluster, its pools and its Kubernetes provider are built from, and nothing else (the cluster's and
    pools' arguments are ``infra.gcp.gke_spec``'s, filled by the program from the settings)."""

    cluster: ClusterSpec
    """The cluster's arguments (``gke_spec.cluster_args``: the network, the system account, the Secrets key)."""
    system_pool: NodePoolSpec
    """The system pool's arguments (``gke_spec.system_pool_args``), but the cluster: the component gives each pool the
    cluster it creates."""
    cpu_pool: NodePoolSpec
    """cpu-np's (``gke_spec.cpu_pool_args``), but the cluster."""
    tpu_pools: list[NodePoolSpec]
    """Each TPU slice pool's (``gke_spec.tpu_pool_args``), but the cluster, in the order of ``Names.tpu_pools``."""
    version: ClusterVersion | None
    """The version to create the cluster at (None: the channel's default)."""
    protect: bool
    """``tpu-rl:protect``: the cluster and the TPU pools are protected."""
    cluster_name: str
    """In the node accounts' grant wait's messages."""
    kube_context: str
    """The kubeconfig's context name."""
    cluster_identifier: str
    """The Kubernetes provider's cluster identifier."""
    workload_members: dict[str, str]
    """CPU step -> the Workload Identity member its Kubernetes service account is (``PROJECT.svc.id.goog[NS/KSA]``)."""
    identities: NodeIdentities
    """The pools' service accounts (their grants come first) and the workload's."""
    secrets_key: SecretsKey | None = None
    """The Cloud KMS key Secrets are encrypted with (its grant to the GKE service agent comes first)."""
    image_mirror: ImageMirror | None = None
    """The stack's image mirrors (``tpu-rl:images.mirror``): the pools wait for them and the node accounts' grants on
    them, as for the accounts' other grants, so no node pulls through a mirror it may not read yet."""


class GkeCluster(pulumi.ComponentResource):
    """Regional private cluster pinned to one zone, with system, cpu-np and TPU slice pools."""

    cluster: gcp.container.Cluster
    nodes_access: GrantPropagation
    """When the node accounts' grants were made: every pool, and so every node and the training, waits for them."""
    pools: list[gcp.container.NodePool]
    tpu_pools: list[gcp.container.NodePool]
    provider: k8s.Provider
    kubeconfig: pulumi.Output[str]
    workload_identities: dict[str, gcp.serviceaccount.IAMMember]
    """CPU step -> the binding of its Kubernetes service account to its Google account."""

    def __init__(self, name: str, args: GkeClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("tpu-rl:gcp:GkeCluster", name, None, opts)
        self.cluster = self._cluster(args, opts)
        grants = self._node_grants(args, opts)
        pool_opts = self._pool_options(args, opts, grants)
        system = gcp.container.NodePool("system-pool", cluster=self.cluster.id, **args.system_pool, opts=pool_opts)
        cpu = gcp.container.NodePool("cpu-pool", cluster=self.cluster.id, **args.cpu_pool, opts=pool_opts)
        self.tpu_pools = self._tpu_pools(args, pool_opts)
        self.pools = [system, cpu, *self.tpu_pools]
        self.workload_identities = self._workload_identities(args)
        self.kubeconfig = pulumi.Output.secret(
            pulumi.Output.all(self.cluster.endpoint, self.cluster.master_auth.cluster_ca_certificate).apply(
                lambda found: build_kubeconfig(args.kube_context, *found)
            )
        )
        self.provider = self._kubernetes_provider(args.cluster_identifier, [system, cpu])
        self.register_outputs(
            {
                "name": self.cluster.name,
                "pools": [p.name for p in self.pools],
                "tpuPools": [p.name for p in self.tpu_pools],
                "kubeconfig": self.kubeconfig,
                "workloadIdentityMembers": {step: wi.member for step, wi in self.workload_identities.items()},
            }
        )

    def _cluster(self, args: GkeClusterArgs, opts: pulumi.ResourceOptions | None) -> gcp.container.Cluster:
        """The cluster, after the Secrets key's grant has taken effect."""
        version = args.version
        extra: dict[str, Any] = {}
        if version is not None:
            # Cluster Toolkit: the channel's newest version with the prefix, read once; later upgrades
            # are GKE's (inside the maintenance policy), so the field is ignored after creation.
            versions = gcp.container.get_engine_versions_output(
                location=version.region, project=version.project, version_prefix=version.prefix
            )
            channel = version.channel
            extra["min_master_version"] = versions.apply(
                lambda v: (v.release_channel_latest_version or {}).get(channel) or v.latest_master_version
            )
        key = args.secrets_key
        return gcp.container.Cluster(
            "cluster",
            **args.cluster,
            **extra,
            opts=child_options(
                self,
                opts,
                # The grant, and the wait for it to take effect (``SecretsKey.ready``): GKE checks its access to
                # the key when it creates the cluster, and the provider does not retry that failure.
                depends_on=[key.grant, key.ready.ready()] if key else [],
                protect=args.protect,
                custom_timeouts=CLUSTER_TIMEOUTS,
                ignore_changes=["nodeConfig", "initialNodeCount", "minMasterVersion"],
            ),
        )

    def _node_grants(self, args: GkeClusterArgs, opts: pulumi.ResourceOptions | None) -> list[pulumi.Resource]:
        """The node accounts' grants, and ``nodes_access``, the wait for them to take effect; returns the grants."""
        identities = args.identities
        # The node accounts' grants (project roles, bucket prefixes) propagate while the cluster is created (minutes):
        # the pools wait for them, which costs an `up` nothing unless a grant is new when the cluster exists already.
        mirror = args.image_mirror
        node_grants = [key for role in NODE_ACCOUNTS for key in identities.grant_keys[role]]
        node_grants += mirror.grant_keys if mirror else []
        grants = [*identities.grants, *(mirror.grants if mirror else [])]
        self.nodes_access = GrantPropagation(
            "nodes-access-propagation",
            f"the node accounts of {args.cluster_name}",
            PROPAGATION_SECONDS,
            opts=child_options(self, opts, depends_on=grants),
            grants=pulumi.Output.all(*node_grants).apply(sorted),
            what=f"the new grants of the node accounts of {args.cluster_name}",
            advice=(
                "if a node or the training still fails with 403 on the bucket, run "
                f"`{make_target('up', pulumi.get_stack())}` again"
            ),
        )
        return grants

    def _pool_options(
        self, args: GkeClusterArgs, opts: pulumi.ResourceOptions | None, grants: list[pulumi.Resource]
    ) -> pulumi.ResourceOptions:
        """Every pool's options: after the node accounts' grants, the mirrors and the wait for the grants."""
        mirror = args.image_mirror
        return child_options(
            self,
            opts,
            custom_timeouts=POOL_TIMEOUTS,
            depends_on=[*grants, *(mirror.repositories if mirror else []), self.nodes_access.ready()],
            # gVNIC is set when a pool is created or replaced (``gke_spec.GVNIC``), never changed in place: enabling it
            # on an existing pool re-creates every node of it outside the maintenance policy (GKE's gVNIC page), the
            # TPU slice and a running training included, and the provider would make that change in place
            # (terraform-provider-google node_config.go, nodePoolNodeConfigUpdate: "updating GKE node pool gvnic").
            # The engine applies ignoreChanges to an update only: a create has no old inputs, and a replacement
            # re-runs Check on the program's inputs (pulumi step_generator.go: processIgnoreChanges when old != nil;
            # "recompute the default values" on a replace), so a new or replaced pool gets it and an existing one
            # keeps what it has.
            # Image streaming likewise (``gke_spec.IMAGE_STREAMING``): the provider would turn it on in place
            # (node_config.go: "updating GKE node pool gcfs_config"). A secondary boot disk
            # (``gke_spec.secondary_boot_disks``) is ForceNew in the provider (node_config.go schemaNodeConfig): without
            # this, setting tpu-rl:cpuPool.bootDiskImage would replace cpu-np under a running Pathways head.
            ignore_changes=[
                "nodeConfig.labels",
                "nodeConfig.gvnic",
                "nodeConfig.gcfsConfig",
                "nodeConfig.secondaryBootDisks",
            ],
        )

    def _tpu_pools(self, args: GkeClusterArgs, pool_opts: pulumi.ResourceOptions) -> list[gcp.container.NodePool]:
        """One pool per TPU slice."""
        # A slice is atomic and a reservation holds exactly one: replace it delete-first.
        tpu_opts = pulumi.ResourceOptions.merge(
            pool_opts, pulumi.ResourceOptions(protect=args.protect, delete_before_replace=True)
        )
        return [
            gcp.container.NodePool(f"tpu-pool-{i}", cluster=self.cluster.id, **pool, opts=tpu_opts)
            for i, pool in enumerate(args.tpu_pools)
        ]

    def _workload_identities(self, args: GkeClusterArgs) -> dict[str, gcp.serviceaccount.IAMMember]:
        """Each CPU step's Workload Identity binding, once the cluster (and so the project's identity pool) exists."""
        opts = pulumi.ResourceOptions(parent=self, depends_on=[self.cluster])
        return workload_bindings(args.identities, args.workload_members, opts)

    def _kubernetes_provider(self, cluster_identifier: str, cpu_pools: list[gcp.container.NodePool]) -> k8s.Provider:
        """The Kubernetes provider of the cluster, once the system and CPU pools exist."""
        return k8s.Provider(
            "gke",
            kubeconfig=self.kubeconfig,
            cluster_identifier=cluster_identifier,
            # No deleteUnreachable: with it a `pulumi refresh` that cannot reach the cluster (outside
            # authorizedNetworks, expired credentials) drops every Kubernetes object from the state, Helm
            # release included (pulumi-kubernetes provider.go, Read). Without it that refresh fails and the
            # state is kept; docs/destroy.md "Refresh" says how to drop a cluster that is really gone.
            #
            # After an `up` killed while a step's create was in flight the state holds a pending create,
            # which the next `up` plans as a fresh create of the same URN (pulumi journal.go keeps pending
            # creates; they are not resources); with upsertExistingObjects that create applies the manifest
            # to the object that already exists (await.go, Creation: a server-side apply) and the program
            # waits for it: a running training is adopted, not lost or duplicated. Its hazard, an object
            # adopted under a changed URN being deleted by name when the old URN is deleted at the end of
            # `up` (step_generator.go, GenerateDeletes; provider Delete), is kept out by test_lifecycle's
            # pinned URNs: a URN that changes needs an alias.
            upsert_existing_objects=True,
            # Kubernetes objects need nodes for the system and CPU work; only training waits for TPU pools.
            opts=pulumi.ResourceOptions(parent=self, depends_on=cpu_pools),
        )
