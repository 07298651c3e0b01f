"""Where the workflow runs, as the stack registers it: the stack's own GKE cluster with its project's APIs, network,
bucket, accounts, mirrors and Secrets key (``cloud``), or an existing cluster and only the steps' accounts
(``existing``); either is one ``Site``, which the Kubernetes platform and the workflow are built on
(``program.stack``)."""

from __future__ import annotations

import dataclasses

import pulumi
import pulumi_kubernetes as k8s

from core.config.workflow_keys import IMAGE_REGISTRIES
from core.errors import TpuRlError
from core.images import Mirror, mirrors_for
from core.names import KMS_API, REQUIRED_APIS, workload_member
from core.settings import ExistingCluster, Settings
from core.tpu import Capacity
from infra.gcp.access import IMAGE_PULLERS
from infra.gcp.apis import ProjectApis
from infra.gcp.artifact_registry import ARTIFACT_REGISTRY_API, ImageMirror, ImageMirrorArgs
from infra.gcp.cluster import ClusterVersion, GkeCluster, GkeClusterArgs
from infra.gcp.gke_spec import PoolSite, cluster_args, cpu_pool_args, system_pool_args, tpu_pool_args
from infra.gcp.identities import IdentitiesArgs, NodeIdentities, workload_bindings
from infra.gcp.kms import SecretsKey, SecretsKeyArgs
from infra.gcp.naming import Names
from infra.gcp.network import Network, NetworkArgs
from infra.gcp.storage import ArtifactBucket, BucketArgs, bucket_args
from infra.k8s.fit import Needs
from infra.k8s.kubeconfig import build_kubeconfig
from infra.k8s.kueue import kueue_objects
from infra.k8s.manifests import platform_labels
from infra.stop import stop
from program.world import World


@dataclasses.dataclass(frozen=True)
class Cloud:
    """The GCP platform (``infra/gcp``), in the order it is registered."""

    apis: ProjectApis
    network: Network
    bucket: ArtifactBucket
    identities: NodeIdentities
    mirror: ImageMirror | None
    secrets_key: SecretsKey | None
    gke: GkeCluster

    def site(self) -> Site:
        """The workflow's site: the stack's own cluster."""
        parts = [self.apis, self.network, self.bucket, self.identities, self.mirror, self.secrets_key, self.gke]
        gke, identities = self.gke, self.identities
        return Site(
            provider=gke.provider,
            cluster=gke.cluster,
            kubeconfig=gke.kubeconfig,
            tpu_pools=list(gke.tpu_pools),
            step_emails={step: identities.email(step) for step in gke.workload_identities},
            grants=[*gke.workload_identities.values(), *identities.grants],
            parts=[r for r in parts if r is not None],
            cluster_name=gke.cluster.name,
            bucket_url=self.bucket.url,
            pools=[p.name for p in gke.pools],
        )


@dataclasses.dataclass(frozen=True)
class Site:
    """Where the workflow runs: the stack's own GKE cluster (``Cloud.site``) or an existing one (``existing``)."""

    provider: k8s.Provider
    cluster: pulumi.Resource | None
    """Deleting it deletes the workflow's objects with it (None: an existing cluster: destroy deletes each itself)."""
    kubeconfig: pulumi.Output[str]
    tpu_pools: list[pulumi.Resource]
    """What the training waits for beyond the platform (none on an existing cluster: its slice is there)."""
    step_emails: dict[str, pulumi.Input[str]]
    """CPU step -> its Google account (none without Workload Identity)."""
    grants: list[pulumi.Resource]
    """The steps' Workload Identity bindings and bucket grants: their Kubernetes service accounts wait for them."""
    parts: list[pulumi.Resource]
    """What the platform's destroy guard holds (with the Kubernetes platform), in the order registered."""
    cluster_name: pulumi.Input[str]
    bucket_url: pulumi.Input[str]
    pools: list[pulumi.Input[str]]


def cloud(settings: Settings, names: Names, mirrors: dict[str, Mirror], reuse: frozenset[str]) -> Cloud:
    """The project's APIs, the network, the bucket, the node and step accounts, the image mirrors, the Secrets key
    and the cluster with its pools."""
    # The image mirrors need the Artifact Registry API (``infra.gcp.artifact_registry``).
    required = REQUIRED_APIS + ((ARTIFACT_REGISTRY_API,) if mirrors else ())
    apis = ProjectApis("apis", settings.project, required + ((KMS_API,) if settings.gke.secrets_key else ()))
    after_apis = pulumi.ResourceOptions(depends_on=apis.services)
    network_args = NetworkArgs(
        settings.project, settings.region, names.network, names.subnet, names.router, names.nat, names.firewall_internal
    )
    network = Network("network", network_args, after_apis)
    bucket = ArtifactBucket("artifacts", BucketArgs(bucket_args(settings), settings.protect), after_apis)
    identities = NodeIdentities(
        "identities", _identities_args(settings, names.service_accounts, bucket.bucket.name), after_apis
    )
    mirror = None
    if mirrors:
        pullers = {account: identities.email(account) for account in IMAGE_PULLERS}
        mirror = ImageMirror("images", ImageMirrorArgs(settings.project, mirrors, pullers, settings.labels), after_apis)
    secrets_key = None
    if settings.gke.secrets_key:
        secrets_key = SecretsKey(
            "secrets-key",
            SecretsKeyArgs(
                project=settings.project,
                region=settings.region,
                key=settings.gke.secrets_key,
                ring_name=names.key_ring,
                key_id=names.crypto_key,
                labels=settings.labels,
                adopt=reuse,
            ),
            after_apis,
        )
    gke = GkeCluster("gke", _gke_args(settings, names, network, identities, secrets_key, mirror), after_apis)
    return Cloud(apis, network, bucket, identities, mirror, secrets_key, gke)


def existing(settings: Settings, names: Names, world: World) -> Site:
    """An existing cluster (``tpu-rl:existingCluster``): its kubeconfig context's provider and, with Workload
    Identity, the CPU steps' accounts, their grants on the existing bucket and their bindings. Nothing else of the
    cloud: no API, network, bucket, cluster or pool is created or changed."""
    existing = settings.existing
    assert existing is not None  # only for an existing cluster
    try:
        text = world.kubeconfig(existing.kube_context) if world.kubeconfig else _offline_kubeconfig(existing)
    except TpuRlError as err:
        raise stop(err) from None
    kubeconfig = pulumi.Output.secret(text)
    provider = k8s.Provider(
        "existing-cluster",
        kubeconfig=kubeconfig,
        # The cluster's identity is its context's name: a refreshed credential in the kubeconfig changes no object.
        cluster_identifier=existing.kube_context,
        upsert_existing_objects=True,
    )
    parts: list[pulumi.Resource] = [provider]
    emails: dict[str, pulumi.Input[str]] = {}
    grants: list[pulumi.Resource] = []
    if existing.workload_identity:
        accounts = {step: names.service_accounts[step] for step in names.ksas}
        identities = NodeIdentities("identities", _identities_args(settings, accounts, settings.bucket_name))
        members = {step: workload_member(settings.project, settings.namespace, ksa) for step, ksa in names.ksas.items()}
        bindings = workload_bindings(identities, members, pulumi.ResourceOptions(parent=identities))
        emails = {step: identities.email(step) for step in names.ksas}
        grants = [*bindings.values(), *identities.grants]
        parts.append(identities)
    return Site(
        provider=provider,
        cluster=None,
        kubeconfig=kubeconfig,
        tpu_pools=[],
        step_emails=emails,
        grants=grants,
        parts=parts,
        cluster_name=existing.kube_context,
        bucket_url=f"gs://{settings.bucket_name}",
        pools=[],
    )


def _offline_kubeconfig(existing: ExistingCluster) -> str:
    """What the offline plan gives an existing cluster's provider: the context's name, no server (it reads
    nothing)."""
    return build_kubeconfig(existing.kube_context, "offline.invalid", "")


def _identities_args(settings: Settings, accounts: dict[str, str], bucket: pulumi.Input[str]) -> IdentitiesArgs:
    """The service accounts ``accounts`` (role -> id) and their grants on ``bucket``."""
    return IdentitiesArgs(
        project=settings.project,
        cluster_name=settings.cluster_name,
        service_accounts=accounts,
        bucket=bucket,
        bucket_name=settings.bucket_name,
        model=settings.model.spec.name,
        steps=settings.workflow.steps,
        private_registries=any(r not in IMAGE_REGISTRIES for r in settings.images.registries),
        hub_cache=settings.shared_hub_cache,
        hub_cache_writes=settings.hub_cache_writes,
    )


def _gke_args(
    settings: Settings,
    names: Names,
    network: Network,
    identities: NodeIdentities,
    secrets_key: SecretsKey | None,
    mirror: ImageMirror | None,
) -> GkeClusterArgs:
    """The cluster's and its pools' arguments (``infra.gcp.gke_spec``) and what else the cluster component takes."""
    gke = settings.gke
    key = secrets_key.name if secrets_key else None
    site = PoolSite.of(settings)
    return GkeClusterArgs(
        cluster=cluster_args(settings, network.network.id, network.subnet.id, identities.email("system"), None, key),
        system_pool=system_pool_args(site, settings.system_pool, identities.email("system")),
        cpu_pool=cpu_pool_args(site, settings.cpu_pool, identities.email("cpu")),
        tpu_pools=[
            tpu_pool_args(site, pool, settings.slice, settings.tpu, identities.email("tpu")) for pool in names.tpu_pools
        ],
        version=ClusterVersion(settings.project, settings.region, gke.version_prefix, gke.release_channel)
        if gke.version_prefix
        else None,
        protect=settings.protect,
        cluster_name=settings.cluster_name,
        kube_context=settings.kube_context,
        cluster_identifier=settings.cluster_identifier,
        workload_members={
            step: workload_member(settings.project, settings.namespace, ksa) for step, ksa in names.ksas.items()
        },
        identities=identities,
        secrets_key=secrets_key,
        image_mirror=mirror,
    )


def needs(settings: Settings) -> Needs:
    """What the steps need of an existing cluster (``infra.k8s.fit``)."""
    existing = settings.existing
    assert existing is not None  # only for an existing cluster
    return Needs(
        context=existing.kube_context,
        stack=settings.stack,
        jobset_version=settings.workflow.jobset_version,
        queued=settings.kueue.queue is not None,
        shape=settings.slice,
        slices=settings.tpu.slices,
        static_slice=settings.tpu.capacity == Capacity.RESERVATION,
        workload_identity=existing.workload_identity,
        instance=settings.cluster_name,
        claimed=(("Namespace", settings.namespace), *_kueue_names(settings)),
    )


def _kueue_names(settings: Settings) -> list[tuple[str, str]]:
    """The cluster-scoped Kueue objects the stack creates (its flavors and ClusterQueue), as (kind, name)."""
    objects = kueue_objects(settings, platform_labels(settings.cluster_name))
    if objects is None:
        return []
    made = (objects.tpu_flavor, objects.cpu_flavor, objects.cluster_queue)
    return [(obj["kind"], obj["metadata"]["name"]) for obj in made]


def mirrors(settings: Settings) -> dict[str, Mirror]:
    """With ``tpu-rl:images.mirror``, the stack's mirrors of the configured images' repositories
    (``core.images.mirrors_for``; the settings name the images through them already, ``core.config.rules``, and keep
    the configured ones as ``ImageSettings.upstream``); none without."""
    upstream = settings.images.upstream
    return {} if upstream is None else mirrors_for(upstream, settings.project, settings.region, settings.cluster_name)
