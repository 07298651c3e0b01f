"""What the stack needs of the zone, the region and the project (the slices, each pool's nodes for a run and at its
autoscaling maximum, the network's objects), and what its own cluster already holds there (its node VMs, counted as
available on a later `up`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from core import deadline
from core.machines import CpuQuota, boot_disk_type, cpu_quota, disk_quota, machine_family, machine_shape
from core.settings import Settings
from core.tpu import CATALOGUE, PREEMPTIBLE, Capacity, TpuVersion
from infra.gcp.capacity.findings import Finding
from infra.gcp.capacity.reads import Clients, ReadFailedError, ReplyError, as_count, as_text, bounded_read
from infra.gcp.gke_spec import TPU_BOOT_DISK_GB

CLUSTER_LABEL = "goog-k8s-cluster-name"
"""The label GKE puts on every node VM with its cluster's name (the stack's own VMs are counted as held)."""
MAX_PAGES = 20
"""Pages of node VMs read at most (100 a page: a cluster of this stack has a few dozen nodes)."""


REGION, PROJECT = "region", "project"
"""The two scopes of Compute Engine's quotas: a region's (``regions.get``) and the project's, across all regions
(``projects.get``)."""
ALL_REGIONS_CPUS = "CPUS_ALL_REGIONS"
"""The project's quota of vCPUs across all regions. Sources: the Compute API's quota metric list
(google-cloud-compute 1.48 ``compute_v1.Quota.Metric.CPUS_ALL_REGIONS``), which ``projects.get`` answers among the
project's quotas, not ``regions.get`` (a project's ``quotas[]`` as ``gcloud compute project-info describe`` prints
it: ``CPUS_ALL_REGIONS`` beside ``NETWORKS``, ``FIREWALLS``, ``GPUS_ALL_REGIONS``); gcpdiag's per-project quota rule
(GoogleCloudPlatform/gcpdiag ``lint/vpc/warn_2022_001_project_level_quota.py``: ``CPUS-ALL-REGIONS-per-project``);
Compute Engine's refusal of an instance over it, whatever its series ("Quota 'CPUS_ALL_REGIONS' exceeded. Limit:
32.0 globally"; projects whose regional N2 or C4 limit was higher found the global one bound first). So every CPU
VM of the stack, the e2 system nodes and the n4 cpu-np node alike, draws its vCPUs on it as well as on its regional
metric. Whether a TPU VM's vCPUs (180 for ``ct6e-standard-4t``) count against it, nothing this project could read
settles: GKE's TPU pages name the TPU chips' quota and, for other GKE resources, disks and IP addresses, never CPUs;
so the slices' vCPUs are a ``maybe`` here, a warning and never a stop (docs/first-run.md "Quota rules")."""
NETWORK_OBJECTS: dict[str, tuple[int, str, str]] = {
    "NETWORKS": (1, "networks", "the stack's VPC network"),
    "SUBNETWORKS": (1, "subnetworks", "its subnet"),
    "ROUTERS": (1, "routers", "its Cloud Router, for Cloud NAT"),
    "FIREWALLS": (4, "firewall rules", "its firewall rule and the 3 GKE creates for a private cluster"),
}
"""The project's quotas the stack's network draws on: metric -> (how many, unit, what). ``infra.gcp.network``
creates one VPC network, one subnet, one Cloud Router and one firewall rule, all global quotas of the project
(gcpdiag's per-project list: ``NETWORKS``, ``SUBNETWORKS``, ``ROUTERS``, ``FIREWALLS``), and GKE creates three
ingress rules for a private cluster: ``gke-<cluster>-<hash>-master``, ``-vms`` and ``-all`` ("Automatically created
firewall rules", https://cloud.google.com/kubernetes-engine/docs/concepts/firewall-rules). Not drawn on: ``ROUTES``
(the cluster is VPC-native, ``infra.gcp.gke_spec`` ``networking_mode``: GKE's routes-based clusters are the ones
that "use Google Cloud Routes", https://cloud.google.com/kubernetes-engine/docs/how-to/routes-based-cluster), the
project's ``IN_USE_ADDRESSES`` and ``STATIC_ADDRESSES`` (global addresses, "for global networking resources such as
load balancers", gcpdiag ``gce/WARN/2022_008``: the nodes are private and Cloud NAT allocates regional addresses),
``GPUS_ALL_REGIONS`` (no GPU)."""


def unit_of(metric: str) -> str:
    if metric in NETWORK_OBJECTS:
        return NETWORK_OBJECTS[metric][1]
    return "GB" if metric.endswith("_GB") else "vCPUs"


@dataclass(frozen=True)
class Pool:
    """One pool's draw on the region's quotas: its nodes when a run uses it, and at its autoscaling maximum."""

    key: str
    """Its configuration key (``tpu-rl:cpuPool``; ``tpu-rl:tpu`` for the slices)."""
    what: str
    """What its run nodes are, for a message (``1 cpu-np node for the CPU steps``)."""
    machine_type: str
    run_nodes: int
    max_nodes: int
    vcpus: int | None
    """vCPUs of one node that count against CPU quota; None: not counted (a TPU VM draws on TPU quota, or a machine
    of unknown size)."""
    rule: CpuQuota | None
    disk_metric: str | None
    """The quota metric its boot disks draw on (``core.machines.DISK_QUOTAS``); None: a disk type not in the table."""
    disk_gb: int
    run_keys: tuple[str, ...] = ()
    """What to lower when the run's own nodes do not fit (vCPUs): ``minNodes`` or ``machineType``."""
    secondary_gb: int = 0
    """GB of each node's secondary boot disk (cpu-np's, from ``tpu-rl:cpuPool.bootDiskImage``), of its boot disk
    type, so on ``disk_metric`` too; 0: none, or the image was not read."""
    secondary_image: str = ""
    """The image it is made from (named in a disk quota's line)."""
    size: int | None = None
    """Guest CPUs of one node as the zone answered or its predefined shape gives, what it draws on
    ``CPUS_ALL_REGIONS``: surely for a CPU VM (``vcpus``), perhaps for a TPU VM (``ALL_REGIONS_CPUS``); None: not
    counted (a machine of unknown size or family, whose warning says so)."""

    @property
    def is_slice(self) -> bool:
        return self.key == "tpu-rl:tpu"

    def vcpus_at(self, nodes: int) -> dict[str, float]:
        if self.vcpus is None or self.rule is None:
            return {}
        return {m: float(self.vcpus * nodes) for m in self.rule.metrics}

    def maybe_at(self, nodes: int) -> dict[str, float]:
        if self.vcpus is None or self.rule is None:
            return {}
        return {m: float(self.vcpus * nodes) for m in self.rule.maybe}

    def disks_at(self, nodes: int) -> dict[str, float]:
        return {self.disk_metric: float((self.disk_gb + self.secondary_gb) * nodes)} if self.disk_metric else {}

    def all_regions_at(self, nodes: int, *, maybe: bool = False) -> dict[str, float]:
        """vCPUs ``nodes`` draw on ``CPUS_ALL_REGIONS``: a CPU pool's surely, the slices' perhaps (``maybe``)."""
        if not self.size or self.is_slice != maybe:
            return {}
        return {ALL_REGIONS_CPUS: float(self.size * nodes)}

    def at(self, nodes: int, scope: str = REGION) -> dict[str, float]:
        """Quota metric -> what ``nodes`` surely draw on it, in a region's quotas or the project's."""
        return {**self.vcpus_at(nodes), **self.disks_at(nodes)} if scope == REGION else self.all_regions_at(nodes)

    def described(self, metric: str) -> str:
        """What its run nodes are, for a line about ``metric`` (a disk quota's names their secondary boot disks)."""
        if self.secondary_gb and metric == self.disk_metric:
            return (
                f"{self.what} with a {self.secondary_gb} GB secondary boot disk each (image {self.secondary_image}, "
                "tpu-rl:cpuPool.bootDiskImage)"
            )
        return self.what

    def per_node(self, metric: str) -> float:
        """What one node surely draws on ``metric`` (0: nothing)."""
        return {**self.at(1, REGION), **self.at(1, PROJECT)}.get(metric, 0.0)

    def fix_keys(self, metric: str) -> tuple[str, ...]:
        """The keys that lower what its run nodes draw on ``metric``."""
        if self.is_slice:
            return ()
        return self.run_keys if unit_of(metric) == "vCPUs" else (f"{self.key}.diskSizeGb",)


@dataclass(frozen=True)
class Need:
    """What the stack needs of the zone and region: the slices, and each pool's nodes for a run and at its
    autoscaling maximum."""

    reservation: tuple[str, str] | None
    """(project that owns it, name), with capacity ``reservation``."""
    vms: int
    """TPU VMs of every slice."""
    machine_type: str
    chips: int
    chips_per_vm: int
    preemptible: bool
    """Spot and flex-start TPU capacity draws on preemptible quota."""
    flex_start: bool
    tpu: TpuVersion
    """The slice's catalogue entry: its aggregate reservations' family and its chips' quotas."""
    pools: tuple[Pool, ...] = ()
    """The system pool, cpu-np and the slices (``Pool``)."""
    uncounted: tuple[tuple[str, str], ...] = ()
    """(config key, machine type) of pools whose vCPUs or quota rule are not known: not counted."""

    def draw(self, at: str = "run", scope: str = REGION) -> dict[str, float]:
        """Quota metric -> what the stack surely draws on it (vCPUs, GB, objects): at ``run`` or ``max`` size, in a
        region's quotas or (``PROJECT``) the project's, where the network's objects count too."""
        total: dict[str, float] = (
            {metric: float(count) for metric, (count, _, _) in NETWORK_OBJECTS.items()} if scope == PROJECT else {}
        )
        for pool in self.pools:
            for metric, amount in pool.at(pool.run_nodes if at == "run" else pool.max_nodes, scope).items():
                total[metric] = total.get(metric, 0.0) + amount
        return total

    def maybe(self, scope: str = REGION) -> dict[str, float]:
        """Quota metric -> further vCPUs a run draws on it if a rule the sources do not settle holds: a family's
        ``CpuQuota.maybe`` in a region, the slices' vCPUs on ``CPUS_ALL_REGIONS`` in the project."""
        total: dict[str, float] = {}
        for pool in self.pools:
            more = pool.maybe_at(pool.run_nodes) if scope == REGION else pool.all_regions_at(pool.run_nodes, maybe=True)
            for metric, amount in more.items():
                total[metric] = total.get(metric, 0.0) + amount
        return total

    @property
    def maybe_families(self) -> tuple[str, ...]:
        """The machine families behind ``maybe()`` (named in its warning)."""
        return tuple(
            dict.fromkeys(
                machine_family(p.machine_type).upper() for p in self.pools if p.rule and p.rule.maybe and p.vcpus
            )
        )


CPU_STEPS_NODES = 1
"""cpu-np nodes a run needs for its CPU steps: each step is one pod on cpu-np (the conversion, the Pathways head of
training, the export, the evaluation, the publication: ``workloads.specs.step_manifests``), and each starts only after
the step it reads succeeded (``workloads.workflow``), so one node at a time holds them."""


def needs(settings: Settings, vcpus: Mapping[str, int] | None = None, secondary_gb: int | None = None) -> Need:
    """What the stack's pools need, from its settings (pure). ``vcpus``: machine type -> guest CPUs as the zone
    answered (``machineTypes.get``); a type not in it is sized by its predefined shape (``core.machines``).
    ``secondary_gb``: the GB of cpu-np's secondary boot disk image as ``images.get`` answered
    (``infra.gcp.capacity.boot_disk``), one more disk of cpu-np's boot disk type per node; None: not counted."""
    reservation = None
    if settings.tpu.capacity == Capacity.RESERVATION and settings.tpu.reservation:
        parts = settings.tpu.reservation.split("/")
        reservation = (parts[1], parts[3]) if len(parts) == 4 else (settings.project, settings.tpu.reservation)
    known = dict(vcpus or {})
    uncounted: list[tuple[str, str]] = []
    pools: list[Pool] = []
    cpu_run = max(settings.cpu_pool.min_nodes, CPU_STEPS_NODES if settings.workflow.enabled else 0)
    for key, pool, run, what, run_keys in (
        (
            "tpu-rl:systemPool",
            settings.system_pool,
            settings.system_pool.min_nodes,
            f"{settings.system_pool.min_nodes} system node(s) at minNodes",
            ("tpu-rl:systemPool.minNodes", "tpu-rl:systemPool.machineType"),
        ),
        (
            "tpu-rl:cpuPool",
            settings.cpu_pool,
            cpu_run,
            f"{cpu_run} cpu-np node(s) for the CPU steps",
            ("tpu-rl:cpuPool.machineType",) + (("tpu-rl:cpuPool.minNodes",) if settings.cpu_pool.min_nodes > 1 else ()),
        ),
    ):
        shape, rule = machine_shape(pool.machine_type), cpu_quota(pool.machine_type)
        size = known.get(pool.machine_type) or (shape.vcpus if shape else None)
        if size is None or rule is None:
            uncounted.append((f"{key}.machineType", pool.machine_type))
        pools.append(
            Pool(
                key=key,
                what=what,
                machine_type=pool.machine_type,
                run_nodes=run,
                max_nodes=max(pool.max_nodes, run),
                vcpus=size if rule is not None else None,
                rule=rule,
                disk_metric=disk_quota(pool.disk_type),
                disk_gb=pool.disk_size_gb,
                run_keys=run_keys,
                secondary_gb=(secondary_gb or 0) if pool.boot_disk_image else 0,
                secondary_image=pool.boot_disk_image,
                size=size if rule is not None else None,
            )
        )
    vms = settings.slice.hosts * settings.tpu.slices
    pools.append(
        Pool(
            key="tpu-rl:tpu",
            what=f"{vms} TPU VM(s)",
            machine_type=settings.slice.machine_type,
            run_nodes=vms,
            max_nodes=vms,
            vcpus=None,
            rule=None,
            disk_metric=disk_quota(settings.slice.boot_disk_type),
            disk_gb=TPU_BOOT_DISK_GB,
            size=known.get(settings.slice.machine_type),
        )
    )
    return Need(
        reservation=reservation,
        vms=vms,
        machine_type=settings.slice.machine_type,
        chips=settings.total_chips,
        chips_per_vm=settings.slice.chips_per_vm,
        preemptible=settings.tpu.capacity in PREEMPTIBLE,
        flex_start=settings.tpu.capacity == Capacity.FLEX_START,
        tpu=CATALOGUE[settings.tpu.version],
        pools=tuple(pools),
        uncounted=tuple(uncounted),
    )


@dataclass(frozen=True)
class Held:
    """What the stack's own cluster already runs in the zone (its node VMs): counted as available."""

    tpu_vms: int = 0
    amounts: dict[str, float] = field(default_factory=dict)
    """Quota metric -> vCPUs or boot disk GB its VMs surely hold (their vCPUs on ``CPUS_ALL_REGIONS`` too)."""
    maybe: dict[str, float] = field(default_factory=dict)
    """Quota metric -> vCPUs its VMs hold if ``CpuQuota.maybe`` holds, and its TPU VMs' on ``CPUS_ALL_REGIONS``."""


def held(
    vms: Iterable[tuple[str, int]], machine_type: str, tpu_disk: str = "hyperdisk-balanced", tpu_vcpus: int = 0
) -> Held:
    """The stack's node VMs, (machine type or ``machineType`` URL as Compute lists it, boot disk GB), as TPU VMs and
    what they hold per quota metric; ``tpu_disk``: the slice's boot disk type; ``tpu_vcpus``: a TPU VM's guest CPUs
    as the zone answered (0: not known), held perhaps on ``CPUS_ALL_REGIONS`` (``ALL_REGIONS_CPUS``)."""
    tpu = 0
    amounts: dict[str, float] = {}
    maybe: dict[str, float] = {}

    def add(metric: str | None, amount: float, into: dict[str, float] = amounts) -> None:
        if metric:
            into[metric] = into.get(metric, 0.0) + amount

    for url, disk_gb in vms:
        name = url.rsplit("/", 1)[-1]
        if name == machine_type:
            tpu += 1
            add(disk_quota(tpu_disk), disk_gb)
            add(ALL_REGIONS_CPUS if tpu_vcpus else None, tpu_vcpus, maybe)
            continue
        shape, rule = machine_shape(name), cpu_quota(name)
        if shape is not None and rule is not None:
            for metric in (*rule.metrics, ALL_REGIONS_CPUS):
                add(metric, shape.vcpus)
            for metric in rule.maybe:
                add(metric, shape.vcpus, maybe)
        add(disk_quota(boot_disk_type(name) or ""), disk_gb)
    return Held(tpu, amounts, maybe)


def instance_types(pages: Iterable[Any], secondary: str = "") -> list[tuple[str, int]]:
    """The (machine type, boot disk GB) of each VM of ``instances.list`` pages (``ListPager.pages``), at most
    ``MAX_PAGES`` pages; a VM listed without a boot disk holds 0 GB. ``secondary``: cpu-np's machine type when its
    nodes' secondary boot disks are counted (``Pool.secondary_gb``): a VM of that type holds its other persistent
    disks' GB too (the secondary boot disk is of the boot disk's type, so on its quota metric)."""
    found: list[tuple[str, int]] = []
    for page_number, page in enumerate(pages):
        if page_number >= MAX_PAGES:
            raise ReplyError(f"more than {MAX_PAGES} pages of VMs")
        for n, item in enumerate(page.items):
            where = f"items[{n}].disks[].diskSizeGb"
            machine_type = as_text(item.machine_type, f"items[{n}].machineType", 300)
            boot = [d for d in item.disks if d.boot]
            disk = as_count(boot[0].disk_size_gb, where) if boot else 0
            if secondary and machine_type.rsplit("/", 1)[-1] == secondary:
                others = [d for d in item.disks if not d.boot and d.type_ != "SCRATCH"]  # absent: PERSISTENT
                disk = as_count(disk + sum(as_count(d.disk_size_gb, where) for d in others), where)
            found.append((machine_type, disk))
    return found


def read_held(
    settings: Settings, need: Need, clients: Clients, budget: deadline.Budget, findings: list[Finding]
) -> Held:
    """The stack's own node VMs in the zone (a later `up`: what they hold is not needed again)."""
    from google.api_core import exceptions as api

    try:
        types = bounded_read(
            f"listing the node VMs of cluster {settings.cluster_name}",
            "Compute Engine (instances.list)",
            lambda options: instance_types(
                clients.instances.list(
                    request={
                        "project": settings.project,
                        "zone": settings.zone,
                        "filter": f'labels.{CLUSTER_LABEL} = "{settings.cluster_name}"',
                        "max_results": 100,
                    },
                    **options,
                ).pages,
                secondary=next((p.machine_type for p in need.pools if p.secondary_gb), ""),
            ),
            clients,
            budget,
        )
    except (ReadFailedError, api.NotFound) as err:
        findings.append(Finding("unknown", f"{err}; VMs this stack already holds are not counted"))
        return Held()
    slices = next((p.size for p in need.pools if p.is_slice), None)
    return held(types, need.machine_type, need.tpu.boot_disk_type, slices or 0)
