"""The validated stack configuration every builder takes (plain frozen dataclasses).

``core.config`` is the only producer: it parses and checks the raw stack config and returns
a ``Settings``. Everything downstream (GCP builders, manifests, commands, estimate) reads these
values and never raw config.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.knobs import KnobValue
from core.layout import hub_cache
from core.models import Model
from core.steps import StepName
from core.tpu import Capacity, SliceShape, TpuVersionName


@dataclass(frozen=True)
class TpuSettings:
    version: TpuVersionName
    """A key of ``core.tpu.CATALOGUE``."""
    machine_type: str
    topology: str
    slices: int
    capacity: Capacity
    """A member of ``core.tpu.Capacity`` (reservation | spot | flex-start | on-demand)."""
    reservation: str | None
    """``projects/P/reservations/R`` with capacity reservation, else None."""

    @property
    def autoscaled(self) -> bool:
        return self.capacity != Capacity.RESERVATION


@dataclass(frozen=True)
class PoolSettings:
    machine_type: str
    min_nodes: int
    max_nodes: int
    disk_size_gb: int
    disk_type: str
    """Boot disk type of the machine family (pd-balanced or hyperdisk-balanced)."""
    boot_disk_image: str = ""
    """A disk image of the project, preloaded with the steps' images, each node's secondary boot disk (cpu-np's
    ``tpu-rl:cpuPool.bootDiskImage``; "" = none)."""


@dataclass(frozen=True)
class GkeSettings:
    release_channel: str
    version_prefix: str | None
    """Pin the control plane to the channel's newest version with this prefix (e.g. ``1.35.``)."""
    maintenance_exclusion: str | None
    """Scope of the standing exclusion until end of support (``NO_MINOR_OR_NODE_UPGRADES`` keeps every node
    upgrade away from a running training; ``NO_MINOR_UPGRADES`` lets node patches in), None: no standing exclusion."""
    maintenance_window: str
    """Daily maintenance window start, ``HH:MM`` UTC."""
    hold_upgrades: tuple[str, str] | None = None
    """A ``NO_UPGRADES`` exclusion between two UTC dates (``YYYY-MM-DD``), None: no hold."""
    secrets_key: str | None = None
    """``create`` (the stack creates the key) or a Cloud KMS key name; None: no application-layer encryption."""


@dataclass(frozen=True)
class ModelSettings:
    spec: Model
    revision: str
    hub_cache: str = ""
    """``tpu-rl:model.hubCache``: a ``gs://`` folder shared by several stacks, "" = the stack's own
    (``Settings.hub_cache``)."""
    hub_cache_writer: str = ""
    """``tpu-rl:model.hubCacheWriter``: the stack whose conversion writes the shared cache ("" without one)."""


@dataclass(frozen=True)
class ImageSettings:
    maxtext: str
    pathways_server: str
    pathways_proxy: str
    registries: tuple[str, ...] = ()
    """Where images may come from (``tpu-rl:images.registries``)."""
    upstream: ImageSettings | None = None
    """With ``tpu-rl:images.mirror``, the images as configured (upstream), which these name through the stack's
    mirrors (``core.images.mirrored``); None: these are the images as configured."""
    maxtext_check: str = "refuse"
    """What a MaxText step does when its image's MaxText is not the adopted release's files
    (``tpu-rl:images.maxtextCheck``, ``workloads/container/maxtext_check.py``): ``refuse`` (stop, exit 3) or ``warn``
    (one line, then run it)."""


@dataclass(frozen=True)
class TrainingSettings:
    knobs: dict[str, KnobValue]
    """MaxText key -> value, for every knob in ``core.knobs.TRAINING_KNOBS``."""
    optimizer: str
    dataset: str
    extra_args: dict[str, str]
    """More MaxText ``key=value`` pairs, checked against MaxText 0.2.5's keys, rendered as argv text."""
    dataset_revision: str = "main"
    """The branch, tag or commit of the dataset's Hub repository that training stages
    (``tpu-rl:training.datasetRevision``)."""

    def extra_number(self, key: str, default: float) -> float:
        """An ``extraArgs`` value the program interprets (validated as a number at load time)."""
        return float(self.extra_args.get(key, default))

    @property
    def final_step(self) -> int:
        """Steps MaxText trains: num_batches x rl.num_iterations x train_fraction x num_epoch (types.py)."""
        return int(
            int(self.knobs["num_batches"])
            * self.extra_number("rl.num_iterations", 1)
            * self.extra_number("train_fraction", 1.0)
            * self.extra_number("num_epoch", 1)
        )


@dataclass(frozen=True)
class WorkflowSettings:
    enabled: bool
    preflight: bool
    capacity_check: bool
    """Check the reservation, quotas and APIs before creating anything (``infra.gcp.capacity``)."""
    max_restarts: int
    """JobSet restarts of the training run (default by capacity mode)."""
    timeouts: dict[str, int]
    """Step -> deadline in seconds (each attempt's activeDeadlineSeconds)."""
    jobset_version: str
    unschedulable_timeout: int = 900
    """Seconds a step's pod may stay unschedulable before `pulumi up` fails (``workloads.observe.waiting``)."""
    step_memory_gib: int = 168
    """Memory request and limit of the conversion and the export (``core.models.step_memory_gib``)."""
    verify_export: bool = True
    """Compare the exported model with the base model before `up` succeeds (``core.hf_model.compare``)."""
    stall_timeout: int = 7200
    """Seconds a training attempt may go without a new log line before it is ended as stalled."""
    restart_drill: bool = False
    """A fresh training attempt ends once after its first committed checkpoint, and the JobSet restarts it on the
    same nodes (``workloads/container/restart_drill.py``): the first run measures a warm restart's start-up."""
    steps: tuple[StepName, ...] = ()
    """The steps of the catalogue this stack runs, in order (``core.steps``: every required one and each optional
    one whose switch is on; none while the workflow is off)."""


@dataclass(frozen=True)
class AccessSettings:
    """Who the stack's configuration names as its own (``tpu-rl:access``), read by `make` and never by the program:
    `make state-bucket` grants them the state, the access audit counts them as the stack's own (``tools.audit``)."""

    members: tuple[str, ...] = ()
    """Who runs the stack's commands: its operators, its deploy account, the CI principals that act as it."""
    readers: tuple[str, ...] = ()
    """Who only previews it: its preview account and the CI principal that acts as it."""
    workload_identity_pool: str = ""
    """``projects/NUMBER/locations/global/workloadIdentityPools/ID``: the pool the CI principals come from ("" for
    none)."""


@dataclass(frozen=True)
class PublishSettings:
    """Where the verified export is published (``tpu-rl:publish``); ``repo`` None: nowhere."""

    repo: str | None = None
    """The Hub model repository ``namespace/name``."""
    private: bool = True
    """Create it private and refuse an existing public one (false: the stack said so explicitly)."""

    @property
    def namespace(self) -> str:
        return (self.repo or "").split("/", 1)[0]


@dataclass(frozen=True)
class KueueSettings:
    install: bool
    """Install Kueue and the stack's own ResourceFlavors, ClusterQueue and LocalQueue."""
    queue: str | None
    """The LocalQueue every step is labelled with (``kueue.x-k8s.io/queue-name``); None: no Kueue."""
    version: str
    """Kueue Helm chart version (when installed)."""
    pods_ready_timeout: int
    """Seconds an admitted step may take until all its pods are Ready (Kueue ``waitForPodsReady``)."""
    admission_timeout: int
    """Seconds `pulumi up` waits for a queued step to be admitted."""
    recovery_timeout: int = 16200
    """Seconds a running step's pods may stay not Ready before Kueue stops it (``waitForPodsReady``): by default
    the pods-ready timeout plus a TPU host maintenance event (``core.config.defaults.RECOVERY_SECONDS``)."""


@dataclass(frozen=True)
class ExistingCluster:
    """``tpu-rl:existingCluster``: a cluster the stack did not create, which it runs the workflow on and never changes
    beyond the workflow's own objects."""

    kube_context: str
    """The kubeconfig context that reaches it (``gcloud container clusters get-credentials`` writes a GKE cluster's)."""
    workload_identity: bool = True
    """GKE with Workload Identity: the CPU steps get Google service accounts of their own, bound to their Kubernetes
    service accounts; false: their pods run as their nodes' identity (a cluster outside Google Cloud, a local one)."""


@dataclass(frozen=True)
class Settings:
    """Everything the program needs, validated."""

    stack: str
    project: str
    region: str
    zone: str
    cluster_name: str
    bucket_name: str
    authorized_networks: tuple[str, ...]
    tpu: TpuSettings
    slice: SliceShape
    system_pool: PoolSettings
    cpu_pool: PoolSettings
    gke: GkeSettings
    protect: bool
    force_destroy: bool
    bucket_versioning: bool
    namespace: str
    hf_token_set: bool
    model: ModelSettings
    images: ImageSettings
    training: TrainingSettings
    workflow: WorkflowSettings
    kueue: KueueSettings
    labels: dict[str, str]
    """Cost-attribution labels put on every labelable GCP resource."""
    publish: PublishSettings = PublishSettings()
    """The optional publication of the export to the Hub."""
    shared_project: bool = False
    """``tpu-rl:sharedProject``: this stack accepts a ``gcp:project`` another stack file names too
    (``core.config.projects``)."""
    access: AccessSettings = AccessSettings()
    """``tpu-rl:access``: the members the stack's configuration names as its own."""
    existing: ExistingCluster | None = None
    """``tpu-rl:existingCluster``: the cluster the workflow runs on when the stack creates none (None: its own)."""

    @property
    def hub_cache(self) -> str:
        """The Hub cache's root the conversion reads first (``workloads/container/base_snapshot.py``): the shared
        folder of ``tpu-rl:model.hubCache``, or the stack's own under its bucket (``core.layout.hub_cache``)."""
        return self.model.hub_cache or hub_cache(self.bucket_name, self.model.spec.name)

    @property
    def hub_cache_writes(self) -> bool:
        """Whether this stack's conversion writes the shared cache: it is ``tpu-rl:model.hubCacheWriter``."""
        return bool(self.model.hub_cache) and self.model.hub_cache_writer == self.stack

    @property
    def hub_cache_written(self) -> str:
        """The Hub cache's root the conversion writes what it fetched into: the shared folder where this stack is
        its writer, else the stack's own (a reader never writes the shared one)."""
        own = hub_cache(self.bucket_name, self.model.spec.name)
        return self.model.hub_cache if self.hub_cache_writes else own

    @property
    def shared_hub_cache(self) -> tuple[str, str] | None:
        """The bucket and object prefix of a shared Hub cache (``tpu-rl:model.hubCache``), None for the stack's own."""
        if not self.model.hub_cache:
            return None
        bucket, _, prefix = self.model.hub_cache.removeprefix("gs://").partition("/")
        return bucket, prefix

    @property
    def total_chips(self) -> int:
        return self.slice.chips * self.tpu.slices

    @property
    def cluster_identifier(self) -> str:
        """Stable identity of the cluster (and of the Kubernetes provider): project/region/name."""
        return f"{self.project}/{self.region}/{self.cluster_name}"

    @property
    def kube_context(self) -> str:
        """The kubeconfig context of the cluster: an existing cluster's as configured, else the stack's own named as
        ``gcloud container clusters get-credentials`` names it (``gke_<project>_<region>_<cluster>``)."""
        if self.existing is not None:
            return self.existing.kube_context
        return "gke_" + self.cluster_identifier.replace("/", "_")

    @property
    def gke_cluster(self) -> tuple[str, str, str] | None:
        """The GKE cluster the steps run on, as project, location and name (Cloud Logging's labels): the stack's own,
        or an existing one whose context is named as ``gcloud container clusters get-credentials`` names it; None for
        another context."""
        if self.existing is None:
            return self.project, self.region, self.cluster_name
        parts = self.existing.kube_context.split("_", 3)
        if len(parts) == 4 and parts[0] == "gke" and all(parts[1:]):
            return parts[1], parts[2], parts[3]
        return None

    @property
    def get_credentials_command(self) -> str:
        """The command that writes that context to ``~/.kube/config`` ("" for an existing cluster that is not a GKE
        cluster ``gke_cluster`` can name: its owner gives the context)."""
        if self.gke_cluster is None:
            return ""
        project, location, name = self.gke_cluster
        return f"gcloud container clusters get-credentials {name} --location {location} --project {project}"
