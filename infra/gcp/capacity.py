"""Capacity preflight: before any resource is created, is there a slice to run on? (no Pulumi)

Cluster Toolkit fails at plan time when the reservation is missing, not specific, or in another zone
(``reservation_definitions.tf`` preconditions); without a check here the first sign would be GKE
failing to create the TPU pool, after the network, the cluster and the other pools exist. So before
registering anything the program reads, through the official clients and bounded (``core.deadline``
``compute`` budget):

- the reservation (capacity ``reservation``), ``compute_v1.ReservationsClient.get``: it exists in
  ``gcp:zone`` (a shared one in its owner project), is *specific* (GKE's ``SPECIFIC_RESERVATION``
  affinity consumes only those), is ``READY`` and has every slice free, counting what this stack's
  cluster already holds (a later ``up``): a reservation of VMs holds the slice's machine type with its
  VMs free; an *aggregate* TPU reservation (``aggregateReservation``, how TPU capacity is often reserved;
  Cluster Toolkit skips its machine-type check for that reason) is of the slice's TPU family (its catalogue
  entry's ``reservation_family``, ``VM_FAMILY_CLOUD_TPU_LITE_POD_SLICE_CT6E`` for v6e) with the slices' chips
  free;
- the permissions the stack's resources need (``infra.gcp.permissions``, docs/permissions.md), asked of Resource
  Manager (``projects.testIamPermissions``): every missing one in one line, with the role that grants it;
- the zone's offers, ``compute_v1.MachineTypesClient.get``, ``AcceleratorTypesClient.get``, ``DiskTypesClient.get``:
  each pool's machine and boot disk type, the slice's machine type and its chips' accelerator type; one line names
  every type ``gcp:zone`` does not offer;
- the region's quotas, ``compute_v1.RegionsClient.get``: what a run uses (the system pool at its minimum, one cpu-np
  node for the CPU steps, the slices, their boot disks, ``needs``) against each metric it draws on
  (``core.machines.CPU_QUOTAS`` and ``DISK_QUOTAS``, the rules as data with their sources), minus what the stack
  holds; the pools' autoscaling maximum beyond that is a warning naming the ``maxNodes`` to lower;
- for capacity that is not reserved, the TPU chips: GKE's TPU pools use Compute Engine quota, but
  ``regions.get`` does not list the TPU metrics, so their limits are read from the Cloud Quotas API
  (``cloudquotas_v1.CloudQuotasClient.get_quota_info``), the quotas the slice's catalogue entry names
  (``core.tpu.TpuQuota``; v6e: ``TPUS-PER-TPU-FAMILY-per-project-region`` with ``tpu_family=CT6E`` on demand,
  ``PREEMPTIBLE-TPU-V6E-per-project-region`` for spot and flex-start; an entry that names none is not
  checked). It reports limits, not usage: a limit below the slices is a problem; whether other TPUs use it up
  is not known here. Flex-start may fall back to on-demand quota, so a short preemptible limit is a warning
  there;
- the APIs, ``service_usage_v1.ServiceUsageClient.batch_get_services``: the stack enables the ones it
  needs itself (``infra.gcp.apis``), so a disabled one is a note; a disabled Service Usage API, which
  that needs, is a problem;
- a Secrets key the stack is given (``tpu-rl:gke.secretsEncryptionKey`` naming a key),
  ``kms_v1.KeyManagementServiceClient.get_crypto_key``: it exists, encrypts and decrypts, and has an enabled
  primary version; otherwise GKE would refuse the cluster after the network, the bucket and the
  identities exist;
- the names a destroy does not free (``SURVIVORS``): with ``gke.secretsEncryptionKey: create``, the key ring
  and key of the stack's names (``get_key_ring``, ``get_crypto_key``). Cloud KMS keeps both after a destroy
  (the provider never deletes a ring; its delete of the key schedules the key's versions for destruction and
  turns its rotation off, and leaves the key), and neither name can be created again, so a later `up` would fail
  at the KeyRing create after the network and the identities exist. A survivor the cluster can use is *reused*:
  the finding carries its id and the program imports it (``Finding.reuse``), and the update that follows the
  import sets the key's rotation again. A surviving key whose primary version is not enabled (what a destroy
  leaves) stops `up` with the one gcloud command that makes it usable (``key_version_fix``); one GKE can never
  use (another purpose) stops it with the key to set instead.

Every reply is parsed once, where it is read, into the frozen dataclasses below; a reply of another shape
(not JSON, a field of the wrong type, a number out of range) is one line naming the API and the field, and
every reply is read through a size cap (``MAX_REPLY_BYTES``, compressed and inflated alike; a requests
adapter on each client's session), so a gzip bomb costs at most the cap.

Each finding is one line: a *problem* stops `pulumi up` (and a preview) before anything is created; an
*unknown* (no permission, no answer, an unreadable reply, a quota metric this project does not list, a quota
rule the sources do not settle) is a warning, since the check cannot decide; so are the pools' maximum beyond
the quotas and a permission test that cannot be made. ``tpu-rl:workflow.capacityCheck: false`` skips it all.
"""

from __future__ import annotations

import datetime
import json
import math
import re
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from core import deadline
from core.machines import CpuQuota, boot_disk_type, cpu_quota, disk_quota, machine_family, machine_shape
from core.names import KMS_API, REQUIRED_APIS
from core.redact import scrub
from core.settings import Settings
from core.tpu import CATALOGUE, PREEMPTIBLE, TpuVersion
from infra.gcp.gke_spec import TPU_BOOT_DISK_GB
from infra.gcp.naming import crypto_key_id, key_ring_id, names_for

T = TypeVar("T")
CLUSTER_LABEL = "goog-k8s-cluster-name"
"""The label GKE puts on every node VM with its cluster's name (the stack's own VMs are counted as held)."""
SERVICE_USAGE = "serviceusage.googleapis.com"
MAX_REPLY_BYTES = 4 * 1024 * 1024
"""The largest reply read, before and after inflating (a region's quotas are ~20 KB, a page of 100 node VMs
well under 1 MB)."""
MAX_DEPTH = 64
"""The deepest JSON nesting read (the replies read here nest under 10 levels)."""
MAX_PAGES = 20
"""Pages of node VMs read at most (100 a page: a cluster of this stack has a few dozen nodes)."""
MAX_COUNT = 2**31 - 1
"""The largest count a reply may give (VMs, chips, a quota limit in chips)."""
MAX_AMOUNT = 2.0**63
"""The largest quota limit or usage a reply may give (Compute Engine writes "unlimited" as large numbers)."""
KEY = "tpu-rl:gke.secretsEncryptionKey"


@dataclass(frozen=True)
class Finding:
    level: str
    """problem (stops `up`) | unknown (a warning: the check cannot decide) | note."""
    text: str
    reuse: str = ""
    """A note's resource id that survived a destroy and that this `up` imports instead of creating."""


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

    def vcpus_at(self, nodes: int) -> dict[str, float]:
        if self.vcpus is None or self.rule is None:
            return {}
        return {m: float(self.vcpus * nodes) for m in self.rule.metrics}

    def maybe_at(self, nodes: int) -> dict[str, float]:
        if self.vcpus is None or self.rule is None:
            return {}
        return {m: float(self.vcpus * nodes) for m in self.rule.maybe}

    def disks_at(self, nodes: int) -> dict[str, float]:
        return {self.disk_metric: float(self.disk_gb * nodes)} if self.disk_metric else {}

    def per_node(self, metric: str) -> float:
        """What one node surely draws on ``metric`` (0: nothing)."""
        return {**self.vcpus_at(1), **self.disks_at(1)}.get(metric, 0.0)

    def fix_keys(self, metric: str) -> tuple[str, ...]:
        """The keys that lower what its run nodes draw on ``metric``."""
        if self.key == "tpu-rl:tpu":
            return ()
        return self.run_keys if _unit(metric) == "vCPUs" else (f"{self.key}.diskSizeGb",)


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

    def draw(self, at: str = "run") -> dict[str, float]:
        """Quota metric -> what the pools surely draw on it (vCPUs, GB): at ``run`` or ``max`` size."""
        total: dict[str, float] = {}
        for pool in self.pools:
            nodes = pool.run_nodes if at == "run" else pool.max_nodes
            for amounts in (pool.vcpus_at(nodes), pool.disks_at(nodes)):
                for metric, amount in amounts.items():
                    total[metric] = total.get(metric, 0.0) + amount
        return total

    def maybe(self) -> dict[str, float]:
        """Quota metric -> further vCPUs a run draws on it if a rule the sources do not settle holds
        (``CpuQuota.maybe``)."""
        total: dict[str, float] = {}
        for pool in self.pools:
            for metric, amount in pool.maybe_at(pool.run_nodes).items():
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
training, the export, the evaluation, the publication: ``workloads.build.manifests``), and each starts only after
the step it reads succeeded (``workloads.workflow``), so one node at a time holds them."""


def needs(settings: Settings, vcpus: Mapping[str, int] | None = None) -> Need:
    """What the stack's pools need, from its settings (pure). ``vcpus``: machine type -> guest CPUs as the zone
    answered (``machineTypes.get``); a type not in it is sized by its predefined shape (``core.machines``)."""
    reservation = None
    if settings.tpu.capacity == "reservation" and settings.tpu.reservation:
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
        )
    )
    return Need(
        reservation=reservation,
        vms=vms,
        machine_type=settings.slice.machine_type,
        chips=settings.total_chips,
        chips_per_vm=settings.slice.chips_per_vm,
        preemptible=settings.tpu.capacity in PREEMPTIBLE,
        flex_start=settings.tpu.capacity == "flex-start",
        tpu=CATALOGUE[settings.tpu.version],
        pools=tuple(pools),
        uncounted=tuple(uncounted),
    )


@dataclass(frozen=True)
class Held:
    """What the stack's own cluster already runs in the zone (its node VMs): counted as available."""

    tpu_vms: int = 0
    amounts: dict[str, float] = field(default_factory=dict)
    """Quota metric -> vCPUs or boot disk GB its VMs surely hold."""
    maybe: dict[str, float] = field(default_factory=dict)
    """Quota metric -> vCPUs its VMs hold if ``CpuQuota.maybe`` holds."""


def held(vms: Iterable[tuple[str, int]], machine_type: str, tpu_disk: str = "hyperdisk-balanced") -> Held:
    """The stack's node VMs, (machine type or ``machineType`` URL as Compute lists it, boot disk GB), as TPU VMs and
    what they hold per quota metric; ``tpu_disk``: the slice's boot disk type."""
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
            continue
        shape, rule = machine_shape(name), cpu_quota(name)
        if shape is not None and rule is not None:
            for metric in rule.metrics:
                add(metric, shape.vcpus)
            for metric in rule.maybe:
                add(metric, shape.vcpus, maybe)
        add(disk_quota(boot_disk_type(name) or ""), disk_gb)
    return Held(tpu, amounts, maybe)


@dataclass(frozen=True)
class Reservation:
    """A reservation as ``reservations.get`` answers it, the fields the check reads."""

    status: str
    """``READY``, ``CREATING``, ...; "" when the reply names none."""
    specific: bool
    """``specificReservationRequired``."""
    aggregate: bool
    """An aggregate TPU reservation (``aggregateReservation``: chips of a VM family)."""
    machine_type: str = ""
    """A reservation of VMs: their machine type."""
    vm_family: str = ""
    """An aggregate reservation: its VM family."""
    count: int = 0
    """VMs (or, aggregate, chips) reserved."""
    in_use: int = 0
    """VMs (or chips) in use."""


def reservation_findings(
    need: Need, found: Reservation | None, zone: str, ours: Held, *, key: str = "tpu-rl:tpu.reservation"
) -> list[Finding]:
    """The reservation against the slices (pure). ``found``: None when not found."""
    if need.reservation is None:
        return []
    project, name = need.reservation
    where = f"reservation {name} (project {project}, zone {zone})"
    if found is None:
        return [
            Finding(
                "problem",
                f"{key}: {where} was not found; create it, or set {key} (and gcp:zone) to the reservation "
                "the slice should use",
            )
        ]
    problems = []
    if found.status not in ("", "READY"):
        problems.append(f"{where} is {found.status}, not READY; wait for it or fix {key}")
    if not found.specific:
        problems.append(
            f"{where} is not a specific reservation (specificReservationRequired is false): GKE's "
            "SPECIFIC_RESERVATION affinity, which the TPU pool uses, consumes only specific reservations; "
            "create it with --require-specific-reservation"
        )
    if found.aggregate:
        family = need.tpu.reservation_family
        if found.vm_family != family:
            problems.append(
                f"{where} is a TPU reservation of {found.vm_family or 'no'} family, the slice needs "
                f"{family}; fix {key} or tpu-rl:tpu.version"
            )
        unit, held_by_us, needed = "chips", ours.tpu_vms * need.chips_per_vm, need.chips
    else:
        if found.machine_type != need.machine_type:
            problems.append(
                f"{where} holds {found.machine_type or 'no'} VMs, the slice needs {need.machine_type}; fix "
                f"{key} or tpu-rl:tpu.machineType"
            )
        unit, held_by_us, needed = "VMs", ours.tpu_vms, need.vms
    count, used = found.count, found.in_use
    if not problems and count - used + held_by_us < needed:
        problems.append(
            f"{where} has {count - used} of {count} {unit} free"
            + (f" (and {held_by_us} held by this stack)" if held_by_us else "")
            + f", the slices need {needed}; free them in it or lower tpu-rl:tpu.slices"
        )
    return [Finding("problem", p) for p in problems]


def _unit(metric: str) -> str:
    return "GB" if metric.endswith("_GB") else "vCPUs"


def _lower_max(need: Need, metric: str, left: float) -> str:
    """What to lower when ``left`` holds the run but not the pools at their maximum: the ``maxNodes`` of each pool
    that grows on ``metric``, with the largest value that fits when one pool does."""
    growing = [p for p in need.pools if p.max_nodes > p.run_nodes and p.per_node(metric)]
    if len(growing) != 1:
        return "lower " + " or ".join(f"{p.key}.maxNodes" for p in growing)
    pool = growing[0]
    per_node = pool.per_node(metric)
    others = need.draw("run").get(metric, 0.0) - per_node * pool.run_nodes
    fits = max(pool.run_nodes, int((left - others) // per_node)) if per_node else pool.max_nodes
    return f"lower {pool.key}.maxNodes to {fits}"


def quota_findings(need: Need, quotas: dict[str, tuple[float, float]] | None, region: str, ours: Held) -> list[Finding]:
    """The region's quotas (metric -> (limit, usage)) against what the pools draw (pure), one line per metric: what a
    run uses (the slices, the system pool at its minimum, cpu-np's node for the CPU steps, their boot disks) short
    is a problem; the pools' autoscaling maximum short is a warning naming the ``maxNodes`` to lower; a metric a
    family may draw on (``CpuQuota.maybe``) short for the run is a warning."""
    found: list[Finding] = [
        Finding("unknown", f"{key} {machine} has no size or quota rule this check knows; its vCPUs were not counted")
        for key, machine in need.uncounted
    ]
    if quotas is None:
        return [*found, Finding("unknown", f"the quotas of region {region} were not listed; they were not checked")]
    run, peak = need.draw("run"), need.draw("max")
    lined: set[str] = set()
    """Metrics with a line already: one line per metric."""
    for metric in sorted(set(run) | set(peak)):
        lined.add(metric)
        if metric not in quotas:
            found.append(Finding("unknown", f"region {region} lists no {metric} quota; it was not checked"))
            continue
        limit, usage = quotas[metric]
        left, unit = limit - usage + ours.amounts.get(metric, 0.0), _unit(metric)
        needed, most = run.get(metric, 0.0), peak.get(metric, 0.0)
        if left < needed:
            parts = [p for p in need.pools if p.run_nodes and p.per_node(metric)]
            keys = [k for p in parts for k in p.fix_keys(metric)]
            found.append(
                Finding(
                    "problem",
                    f"quota {metric} in {region}: {left:g} of {limit:g} {unit} left, the run needs {needed:g} ("
                    + ", ".join(p.what for p in parts)
                    + "); request more quota"
                    + (f" or lower {' / '.join(dict.fromkeys(keys))}" if keys else ""),
                )
            )
        elif left < most:
            found.append(
                Finding(
                    "unknown",
                    f"quota {metric} in {region}: {left:g} of {limit:g} {unit} left hold the run ({needed:g}) but not "
                    f"the pools at their autoscaling maximum ({most:g}), so GKE cannot scale them that far; "
                    f"{_lower_max(need, metric, left)} or request more quota",
                )
            )
        else:
            lined.discard(metric)
    for metric, extra in sorted(need.maybe().items()):
        if metric in lined:
            continue
        if metric not in quotas:
            found.append(Finding("unknown", f"region {region} lists no {metric} quota; it was not checked"))
            continue
        limit, usage = quotas[metric]
        left = limit - usage + ours.amounts.get(metric, 0.0) + ours.maybe.get(metric, 0.0)
        total = run.get(metric, 0.0) + extra
        if left < total:
            families = ", ".join(need.maybe_families)
            found.append(
                Finding(
                    "unknown",
                    f"quota {metric} in {region}: {left:g} of {limit:g} vCPUs left; the run needs {total:g} if "
                    f"{families} vCPUs count against {metric} as well as their own metric, which the Compute Engine "
                    "documentation this check cites does not settle (core.machines.CPU_QUOTAS); if GKE cannot add "
                    "nodes, request more quota",
                )
            )
    return found


def tpu_quota_id(need: Need) -> str | None:
    """The Cloud Quotas id of the TPU chips the slices draw on (the entry's ``TpuQuota``; None: it names none)."""
    quota = need.tpu.quota
    if quota is None:
        return None
    return quota.preemptible if need.preemptible else quota.on_demand


@dataclass(frozen=True)
class QuotaLimit:
    """One ``dimensionsInfos`` entry of a Cloud Quotas ``QuotaInfo``."""

    dimensions: dict[str, str]
    value: int
    """The limit in effect; negative when the reply gives no bound (``QuotaDetails.value``)."""
    locations: tuple[str, ...]


def tpu_quota_findings(need: Need, infos: list[QuotaLimit] | None, region: str) -> list[Finding]:
    """The TPU chip limit in ``region`` (``infos``: the quota's dimension entries; None: not found) against the
    slices (pure); nothing for a TPU version whose entry names no quota."""
    quota = tpu_quota_id(need)
    if need.tpu.quota is None:
        return []
    if infos is None:
        return [Finding("unknown", f"quota {quota} was not found; TPU quota was not checked")]
    wanted = {"region": region} if need.preemptible else {"region": region, "tpu_family": need.tpu.quota.family}

    def fits(info: QuotaLimit) -> int:
        """How well an entry names the region (and family): exact, by location, the default; -1 another."""
        dims = info.dimensions
        if any(dims.get(k) not in (None, v) for k, v in wanted.items()):
            return -1
        return 2 if all(dims.get(k) == v for k, v in wanted.items()) else int(region in info.locations)

    ranked = sorted(rank for rank in ((fits(info), n) for n, info in enumerate(infos)) if rank[0] >= 0)
    if not ranked:
        return [Finding("unknown", f"quota {quota} has no limit for {region}; TPU quota was not checked")]
    limit = infos[ranked[-1][1]].value
    if limit < 0:
        return [Finding("unknown", f"quota {quota} in {region} gives no limit ({limit}); TPU quota was not checked")]
    if limit >= need.chips:
        return [Finding("note", f"quota {quota} in {region}: limit {limit} TPU chips (usage is not checked)")]
    text = (
        f"quota {quota} in {region}: the limit is {limit} TPU chips, the slices need {need.chips}; request more "
        "quota (gcloud alpha quotas preferences create) or use a smaller slice"
    )
    if need.flex_start:
        return [Finding("unknown", text + "; flex-start may use on-demand quota instead")]
    return [Finding("problem", text)]


def api_findings(states: dict[str, str] | None, project: str, apis: tuple[str, ...] = REQUIRED_APIS) -> list[Finding]:
    """Which of the stack's APIs are not enabled yet (the stack enables them itself)."""
    if states is None:
        return [Finding("unknown", f"the APIs of project {project} could not be listed; they were not checked")]
    disabled = sorted(api for api in apis if states.get(api) != "ENABLED")
    return [Finding("note", f"this `up` enables {', '.join(disabled)} in project {project}")] if disabled else []


@dataclass(frozen=True)
class Offer:
    """A machine, accelerator or disk type the stack's pools use, and the keys that choose it."""

    kind: str
    """``machine type``, ``accelerator type`` or ``disk type`` (Compute Engine's zonal ``machineTypes``,
    ``acceleratorTypes``, ``diskTypes``)."""
    name: str
    keys: tuple[str, ...]


def offers(settings: Settings) -> list[Offer]:
    """Every type the pools and the slices need in ``gcp:zone`` (pure): each pool's machine type and boot disk type
    (a family's disk type follows its machine type, ``core.machines.boot_disk_type``), the slice's machine type,
    its chips' accelerator type (the catalogue's ``accelerator_type``) and its boot disk type."""
    wanted: dict[tuple[str, str], list[str]] = {}
    tpu = CATALOGUE[settings.tpu.version]
    for kind, name, key in (
        ("machine type", settings.system_pool.machine_type, "tpu-rl:systemPool.machineType"),
        ("machine type", settings.cpu_pool.machine_type, "tpu-rl:cpuPool.machineType"),
        ("machine type", settings.slice.machine_type, "tpu-rl:tpu.machineType"),
        ("accelerator type", tpu.accelerator_type, "tpu-rl:tpu.version"),
        ("disk type", settings.system_pool.disk_type, "tpu-rl:systemPool.machineType"),
        ("disk type", settings.cpu_pool.disk_type, "tpu-rl:cpuPool.machineType"),
        ("disk type", settings.slice.boot_disk_type, "tpu-rl:tpu.version"),
    ):
        if name:
            keys = wanted.setdefault((kind, name), [])
            if key not in keys:
                keys.append(key)
    return [Offer(kind, name, tuple(keys)) for (kind, name), keys in wanted.items()]


def offer_findings(zone: str, missing: list[Offer]) -> list[Finding]:
    """One line naming every type ``gcp:zone`` does not offer (pure): GKE would fail the pool's create after the
    network, the cluster and the identities exist."""
    if not missing:
        return []
    listed = ", ".join(f"{o.kind} {o.name} ({' / '.join(o.keys)})" for o in missing)
    return [
        Finding(
            "problem",
            f"gcp:zone {zone} does not offer {listed}; set gcp:zone (and gcp:region) to a zone that offers them "
            f"(gcloud compute machine-types list / accelerator-types list / disk-types list --filter=zone:{zone}) "
            "or change those keys",
        )
    ]


@dataclass(frozen=True)
class CryptoKey:
    """A Cloud KMS key as ``cryptoKeys.get`` answers it, the fields GKE's Secrets encryption needs."""

    purpose: str
    primary_state: str | None
    """The primary version's state; None without a primary."""
    primary_version: str = ""
    """The primary version's id (the ``N`` of ``.../cryptoKeyVersions/N``); "" without a primary."""
    destroy_time: str = ""
    """When a primary DESTROY_SCHEDULED is destroyed (``2026-12-31T09:00Z``); "" when the reply gives no time."""
    rotates: bool = True
    """The key has a rotation period (a destroy by the provider removes it: ``disableCryptoKeyRotation``)."""


def key_findings(name: str, key: CryptoKey | None) -> list[Finding]:
    """Whether GKE can encrypt Secrets with the key ``name``, one of one's own (None: not found); a surviving key of
    the stack's own name is ``surviving_key_findings``'."""
    if key is None:
        return [
            Finding(
                "problem",
                f"{KEY}: key {name} was not found; create it (gcloud kms keys create) or set the key to `create`",
            )
        ]
    found: list[Finding] = []
    if key.purpose != "ENCRYPT_DECRYPT":
        found.append(Finding("problem", f"{KEY}: key {name} is for {key.purpose}; GKE needs an ENCRYPT_DECRYPT key"))
    if key.primary_state != "ENABLED":
        state = f"{key.primary_state} as its primary version" if key.primary_state else "no primary version"
        found.append(Finding("problem", f"{KEY}: key {name} has {state}; GKE needs an enabled one"))
    return found


_KEY_NAME = re.compile(r"projects/([^/]+)/locations/([^/]+)/keyRings/([^/]+)/cryptoKeys/([^/]+)")


def key_version_fix(key_id: str, key: CryptoKey) -> str:
    """The gcloud command that gives the key ``key_id`` (a full name) an enabled primary version, from the state of its
    primary (pure; ``key.primary_state`` is not ENABLED). Cloud KMS (https://cloud.google.com/kms/docs/key-states,
    https://cloud.google.com/kms/docs/destroy-restore): a version DESTROY_SCHEDULED is restored to DISABLED
    (``cryptoKeyVersions.restore``) within the key's scheduled-destruction duration, then enabled (``patch`` of its
    state to ENABLED); a DISABLED one is enabled; a DESTROYED one never leaves that state, so a new version is created
    and made primary (``cryptoKeyVersions.create``, ``updatePrimaryVersion``: ``--primary``), as with no primary or a
    state no command turns into ENABLED."""
    match = _KEY_NAME.fullmatch(key_id)
    if match is None:
        raise ValueError(f"not a Cloud KMS key name: {key_id}")
    project, location, ring, name = match.groups()
    where = f"--key {name} --keyring {ring} --location {location} --project {project}"
    version = key.primary_version
    if version and key.primary_state == "DESTROY_SCHEDULED":
        return (
            f"gcloud kms keys versions restore {version} {where} && gcloud kms keys versions enable {version} {where}"
        )
    if version and key.primary_state == "DISABLED":
        return f"gcloud kms keys versions enable {version} {where}"
    return f"gcloud kms keys versions create {where} --primary"


_OPERATION = (
    "the provider's delete waits for the operation to finish (magic-modules mmv1/products/compute/*.yaml "
    "`async: OpAsync`; container resource_container_*.go wait on the cluster operation), and Compute Engine and "
    "GKE document no retention of a deleted name"
)
SURVIVORS: dict[str, tuple[bool, str]] = {
    "gcp:kms/keyRing:KeyRing": (
        False,
        "the provider never deletes a key ring (resourceKMSKeyRingDelete only drops it from the state), and its name "
        "is taken while it exists (https://cloud.google.com/kms/docs/delete-kms-resources): found before anything "
        "is created and imported",
    ),
    "gcp:kms/cryptoKey:CryptoKey": (
        False,
        "the provider's delete (deletion_policy DELETE) schedules its versions for destruction and turns its rotation "
        "off but leaves the key (resourceKMSCryptoKeyDelete), and 'the names of deleted CryptoKeys can't be reused' "
        "(the same page): imported when its primary version is enabled (the update after the import sets its "
        "rotation again), else `up` stops before anything is created with the gcloud command that restores or "
        "replaces that version",
    ),
    "gcp:storage/bucket:Bucket": (
        True,
        "'After a bucket is deleted, anyone can reuse the bucket's name for a new bucket' "
        "(https://cloud.google.com/storage/docs/deleting-buckets), a soft-deleted one included (which then cannot be "
        "restored until the new one is deleted); with forceDestroy false a bucket with objects is not deleted at all, "
        "and stays in the state",
    ),
    "gcp:serviceaccount/account:Account": (
        True,
        "'If you delete a service account, then create a new service account with the same name, the new service "
        "account is treated as a separate identity' (https://cloud.google.com/iam/docs/service-accounts-delete-"
        "undelete): the stack grants the new one its roles again",
    ),
    "gcp:compute/network:Network": (True, _OPERATION),
    "gcp:compute/subnetwork:Subnetwork": (True, _OPERATION),
    "gcp:compute/router:Router": (True, _OPERATION),
    "gcp:compute/routerNat:RouterNat": (True, "part of the router (a field of it, deleted with it)"),
    "gcp:compute/firewall:Firewall": (True, _OPERATION),
    "gcp:container/cluster:Cluster": (True, _OPERATION),
    "gcp:container/nodePool:NodePool": (True, _OPERATION),
    "gcp:projects/iAMMember:IAMMember": (True, "a binding, not a name: added again"),
    "gcp:serviceaccount/iAMMember:IAMMember": (True, "a binding, not a name: added again"),
    "gcp:storage/bucketIAMMember:BucketIAMMember": (True, "a binding on the new bucket"),
    "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember": (True, "a binding, added again (and waited for again)"),
    "gcp:projects/service:Service": (True, "never disabled on destroy (disable_on_destroy false): nothing to free"),
    "gcp:projects/serviceIdentity:ServiceIdentity": (
        True,
        "the project's GKE service agent: generated again, the same",
    ),
    "pulumi-python:dynamic/kms:GrantPropagation": (True, "state only (a wait)"),
    "pulumi-python:dynamic/storage:BucketIdentity": (True, "state only (the bucket's identity as last recorded)"),
    "pulumi:providers:kubernetes": (True, "state only"),
}
"""Every GCP resource type the stack registers -> (whether `pulumi destroy` frees its name for the next `up`,
why). The two that do not are handled by the check (``surviving_key_findings``); Kubernetes objects go with the
cluster (docs/operations.md "Destroy, and up again")."""


def surviving_key_findings(
    ring_id: str, ring: bool | None, key_id: str, key: CryptoKey | None, *, ring_error: str = "", key_error: str = ""
) -> list[Finding]:
    """With ``gke.secretsEncryptionKey: create``: what to do with a key ring and key of the stack's names that
    exist already (pure). ``ring``: the ring exists (None: it could not be read, ``ring_error`` says why); ``key``:
    the key as read, None when it does not exist (or, with ``key_error``, could not be read)."""
    if ring is None:
        return [
            Finding(
                "unknown",
                f"{ring_error}; if an earlier destroy left key ring {ring_id}, its create fails with 409 (already "
                f"exists): then set {KEY} to its key {key_id}",
            )
        ]
    if not ring:
        return []
    reused = [
        Finding(
            "note",
            f"key ring {ring_id} exists (Cloud KMS keeps it after a destroy): this `up` adopts it",
            reuse=ring_id,
        )
    ]
    if key_error:
        return [
            *reused,
            Finding(
                "unknown",
                f"{key_error}; if the key exists, its create fails with 409 (a key's name is never free again): "
                f"then set {KEY} to {key_id}",
            ),
        ]
    if key is None:
        return reused
    if key.purpose != "ENCRYPT_DECRYPT":
        # A purpose never changes: no version makes this key usable (one line, whatever its primary's state).
        return [
            Finding(
                "problem",
                f"{KEY}: key {key_id} is for {key.purpose}; GKE needs an ENCRYPT_DECRYPT key; Cloud KMS never frees a "
                f"key's name, so set {KEY} to another ENCRYPT_DECRYPT key in the cluster's region (gcloud kms keys "
                "create ...), or change tpu-rl:clusterName",
            )
        ]
    if key.primary_state != "ENABLED":
        # What a destroy leaves (the provider schedules every version for destruction): the key is the stack's own
        # and was last used by a cluster the destroy deleted first, so bringing its primary version back is safe.
        primary = f"its primary version {key.primary_version}".rstrip()
        if key.primary_state == "DESTROY_SCHEDULED":
            state = f"{primary} scheduled for destruction" + (
                f" on {key.destroy_time} (until then it can be restored)" if key.destroy_time else ""
            )
        elif key.primary_state == "DESTROYED":
            state = f"{primary} DESTROYED (its key material is gone for good)"
        elif key.primary_state:
            state = f"{primary} {key.primary_state}"
        else:
            state = "no primary version"
        return [
            Finding(
                "problem",
                f"{KEY}: key {key_id}, which Cloud KMS keeps after a destroy, has {state}; GKE needs an enabled one: "
                f"run `{key_version_fix(key_id, key)}`, then `pulumi up` again (it adopts the key)",
            )
        ]
    rotation = "" if key.rotates else " and turns its rotation back on (the destroy turned it off)"
    return [
        *reused,
        Finding(
            "note",
            f"key {key_id} exists (Cloud KMS keeps a key after a destroy): this `up` adopts it{rotation}",
            reuse=key_id,
        ),
    ]


# ---------------------------------------------------------------------------------------------
# The replies, parsed once: protobuf messages of the clients into the dataclasses above


class ReplyError(Exception):
    """A reply of a shape the check does not read: one line naming the API and the field."""


def _count(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
        raise ReplyError(f"{where} is {scrub(repr(value), limit=40)}, not a count")
    return value


def _amount(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ReplyError(f"{where} is {scrub(repr(value), limit=40)}, not a number")
    if not 0 <= value <= MAX_AMOUNT:
        raise ReplyError(f"{where} is {value:g}, out of range")
    return float(value)


def _text(value: Any, where: str, limit: int = 120) -> str:
    if not isinstance(value, str):
        raise ReplyError(f"{where} is {type(value).__name__}, not text")
    return scrub(value, limit=limit)


def _enum(value: Any, where: str = "", *, required: bool = False) -> str:
    """An enum field's name; a value the client does not know (a newer API) as ``value N``. ``required``: the
    unset value (0, ``..._UNSPECIFIED``, which is also what the parser leaves for a string where an object is) is a
    ``ReplyError``."""
    if required and not value:
        raise ReplyError(f"{where} is missing")
    name = getattr(value, "name", None)
    return name if isinstance(name, str) else f"value {scrub(repr(value), limit=20)}"


def _present(message: Any, name: str, where: str) -> None:
    """A field the check reads is in the reply. The protobuf JSON parser leaves a message field empty for a string
    where an object is (``ignore_unknown_fields``), and Compute's fields are ``optional``: absent is detectable."""
    if name not in message:
        raise ReplyError(f"{where} is missing")


def _named(message: Any, name: str, field: str = "name") -> None:
    """The reply is of the object asked for (a reply of another object, or none, is not read as this one)."""
    value = getattr(message, field)
    if value != name:
        raise ReplyError(f"{field} is {scrub(repr(value), limit=80)}, not {name}")


def reservation_reply(message: Any, name: str) -> Reservation:
    """``compute_v1.Reservation`` ``name`` as the check reads it."""
    _named(message, name)
    status, specific_required = _text(message.status, "status", 20), bool(message.specific_reservation_required)
    if "aggregate_reservation" in message:
        aggregate = message.aggregate_reservation
        _present(aggregate, "vm_family", "aggregateReservation.vmFamily")

        def chips(resources: Any, where: str) -> int:
            total = sum(
                _count(r.accelerator.accelerator_count, f"{where}[{n}].accelerator.acceleratorCount")
                for n, r in enumerate(resources)
            )
            return _count(total, where)

        return Reservation(
            status=status,
            specific=specific_required,
            aggregate=True,
            vm_family=_text(aggregate.vm_family, "aggregateReservation.vmFamily", 60),
            count=chips(aggregate.reserved_resources, "aggregateReservation.reservedResources"),
            in_use=chips(aggregate.in_use_resources, "aggregateReservation.inUseResources"),
        )
    _present(message, "specific_reservation", "specificReservation")
    specific = message.specific_reservation
    _present(specific, "count", "specificReservation.count")
    _present(specific, "instance_properties", "specificReservation.instanceProperties")
    _present(specific.instance_properties, "machine_type", "specificReservation.instanceProperties.machineType")
    return Reservation(
        status=status,
        specific=specific_required,
        aggregate=False,
        machine_type=_text(specific.instance_properties.machine_type, "instanceProperties.machineType", 60),
        count=_count(specific.count, "specificReservation.count"),
        in_use=_count(specific.in_use_count, "specificReservation.inUseCount"),
    )


def region_quotas(message: Any, region: str) -> dict[str, tuple[float, float]] | None:
    """``compute_v1.Region`` ``region``'s quotas, metric -> (limit, usage); None when Compute could not read them."""
    _named(message, region)
    if "quota_status_warning" in message or not message.quotas:
        return None  # Compute answers without quotas when it could not read them (regions.get "fails open")
    quotas: dict[str, tuple[float, float]] = {}
    for n, quota in enumerate(message.quotas):
        _present(quota, "metric", f"quotas[{n}].metric")
        _present(quota, "limit", f"quotas[{n}].limit")
        metric = _text(quota.metric, f"quotas[{n}].metric", 80)
        limit, usage = _amount(quota.limit, f"quotas[{n}].limit"), _amount(quota.usage, f"quotas[{n}].usage")
        quotas.setdefault(metric, (limit, usage))
    return quotas


def instance_types(pages: Iterable[Any]) -> list[tuple[str, int]]:
    """The (machine type, boot disk GB) of each VM of ``instances.list`` pages (``ListPager.pages``), at most
    ``MAX_PAGES`` pages; a VM listed without a boot disk holds 0 GB."""
    found: list[tuple[str, int]] = []
    for page_number, page in enumerate(pages):
        if page_number >= MAX_PAGES:
            raise ReplyError(f"more than {MAX_PAGES} pages of VMs")
        for n, item in enumerate(page.items):
            boot = [d for d in item.disks if d.boot]
            disk = _count(boot[0].disk_size_gb, f"items[{n}].disks[].diskSizeGb") if boot else 0
            found.append((_text(item.machine_type, f"items[{n}].machineType", 300), disk))
    return found


def offer_reply(message: Any, name: str) -> int:
    """A zone's ``machineTypes.get`` / ``acceleratorTypes.get`` / ``diskTypes.get`` reply for ``name``: a machine
    type's ``guestCpus`` (0 when absent), 0 for the others."""
    from google.cloud import compute_v1

    _named(message, name)
    return _count(message.guest_cpus, "guestCpus") if isinstance(message, compute_v1.MachineType) else 0


def granted(body: bytes) -> list[str]:
    """Resource Manager's ``TestIamPermissionsResponse`` (``{"permissions": [...]}``; none held: ``{}``)."""
    reply = json.loads(body)
    permissions = reply.get("permissions", [])
    if not isinstance(permissions, list):
        raise ReplyError(f"permissions is {type(permissions).__name__}, not a list")
    return [_text(p, f"permissions[{n}]", 100) for n, p in enumerate(permissions)]


def service_states(message: Any) -> dict[str, str]:
    """``BatchGetServicesResponse`` as API name -> state name."""
    return {
        _text(s.config.name, f"services[{n}].config.name", 80): _enum(s.state) for n, s in enumerate(message.services)
    }


def quota_limits(message: Any, quota: str) -> list[QuotaLimit]:
    """``cloudquotas_v1.QuotaInfo`` ``quota``'s dimension entries."""
    _named(message, quota, "quota_id")
    limits = []
    for n, info in enumerate(message.dimensions_infos):
        where = f"dimensionsInfos[{n}]"
        _present(info, "details", f"{where}.details")  # its value may be absent: 0, as proto3 JSON omits it
        value = info.details.value
        if isinstance(value, bool) or not isinstance(value, int) or abs(value) > MAX_COUNT:
            raise ReplyError(f"{where}.details.value is {scrub(repr(value), limit=40)}, not a limit")
        limits.append(
            QuotaLimit(
                dimensions={
                    _text(k, f"{where}.dimensions", 40): _text(v, f"{where}.dimensions", 40)
                    for k, v in info.dimensions.items()
                },
                value=value,
                locations=tuple(_text(loc, f"{where}.applicableLocations", 40) for loc in info.applicable_locations),
            )
        )
    return limits


_VERSION_ID = re.compile(r"[a-zA-Z0-9_-]{1,63}")
"""A CryptoKeyVersion's id (terraform-provider-google ``parseKmsCryptoKeyVersionId``; Cloud KMS numbers them)."""


def crypto_key_reply(message: Any, name: str) -> CryptoKey:
    """``kms_v1.CryptoKey`` ``name`` as the check reads it."""
    _named(message, name)
    rotates = "rotation_period" in message
    if "primary" not in message:
        return CryptoKey(purpose=_enum(message.purpose, "purpose", required=True), primary_state=None, rotates=rotates)
    primary = message.primary
    version = _text(primary.name, "primary.name", 400)
    prefix = f"{name}/cryptoKeyVersions/"
    if not version.startswith(prefix) or not _VERSION_ID.fullmatch(version[len(prefix) :]):
        raise ReplyError(f"primary.name is {scrub(repr(version), limit=80)}, not a version of this key")
    destroy_time = ""
    if "destroy_time" in primary:
        when = primary.destroy_time
        if not isinstance(when, datetime.datetime) or when.tzinfo is None:
            raise ReplyError(f"primary.destroyTime is {scrub(repr(when), limit=40)}, not a time")
        destroy_time = when.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%MZ")
    return CryptoKey(
        purpose=_enum(message.purpose, "purpose", required=True),
        primary_state=_enum(primary.state, "primary.state", required=True),
        primary_version=version[len(prefix) :],
        destroy_time=destroy_time,
        rotates=rotates,
    )


# ---------------------------------------------------------------------------------------------
# Every reply through a size cap: a requests adapter on each client's session


class ReplyTooLargeError(Exception):
    """A reply was larger than ``MAX_REPLY_BYTES`` (compressed or inflated)."""


class ReplyEncodingError(Exception):
    """A reply in a content encoding the check does not inflate (it asks for gzip or deflate only)."""


def capped_body(chunks: Iterable[bytes], encoding: str, cap: int = MAX_REPLY_BYTES) -> bytes:
    """The body, inflated when gzip or deflate, at most ``cap`` bytes either way (never more in memory)."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        decoder = None
    elif encoding in ("gzip", "x-gzip", "deflate"):
        decoder = zlib.decompressobj(32 + zlib.MAX_WBITS)  # gzip or zlib, by its header
    else:
        raise ReplyEncodingError(encoding[:20])
    parts: list[bytes] = []
    received = produced = 0
    for chunk in chunks:
        received += len(chunk)
        if received > cap:
            raise ReplyTooLargeError(cap)
        if decoder is not None:
            chunk = decoder.decompress(chunk, cap + 1 - produced)
            if decoder.unconsumed_tail:
                raise ReplyTooLargeError(cap)
        produced += len(chunk)
        if produced > cap:
            raise ReplyTooLargeError(cap)
        parts.append(chunk)
    return b"".join(parts)


_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_JSON_NESTING = re.compile(rb"[\[\]{}]")


def too_deep(body: bytes, limit: int = MAX_DEPTH) -> bool:
    """Whether JSON nests deeper than ``limit`` (counted on brackets outside strings, before any parse: the
    protobuf parser recurses on nesting)."""
    depth = 0
    for bracket in _JSON_NESTING.finditer(_JSON_STRING.sub(b"", body)):
        depth += 1 if bracket.group() in (b"[", b"{") else -1
        if depth > limit:
            return True
    return False


def json_object(body: bytes) -> None:
    """A successful reply of a Google API is a JSON object (checked before the client's protobuf parser, which
    reads an array as an empty message and recurses on nesting): ``ReplyError`` otherwise."""
    if not body.lstrip()[:1] == b"{":
        raise ReplyError("not a JSON object")
    if too_deep(body):
        raise ReplyError(f"JSON nested deeper than {MAX_DEPTH} levels")


def _capped_adapter(cap: int) -> Any:
    from requests.adapters import HTTPAdapter

    class CappedAdapter(HTTPAdapter):
        """Reads each reply itself, bounded (``capped_body``), and hands requests the plain bytes: the clients'
        REST transports then parse ``response.content`` as usual."""

        def send(  # type: ignore[override]  # the same arguments, passed on as they come
            self, request: Any, stream: bool = False, **kwargs: Any
        ) -> Any:
            request.headers["Accept-Encoding"] = "gzip, deflate"
            response = super().send(request, stream=True, **kwargs)
            try:
                body = capped_body(
                    response.raw.stream(64 * 1024, decode_content=False),
                    response.headers.get("Content-Encoding", ""),
                    cap,
                )
            except BaseException:
                response.close()  # drops the connection: the rest of the body is never read
                raise
            response.headers.pop("Content-Encoding", None)
            # What ``Response.content`` reads and then keeps (requests models.py): set, it is not read again.
            response._content = body
            response._content_consumed = True  # type: ignore[attr-defined]
            response.close()  # read to its end: the connection goes back to the pool
            if response.status_code < 400:
                json_object(body)
            return response

    return CappedAdapter(max_retries=0)


def cap_replies(client: Any, cap: int = MAX_REPLY_BYTES) -> None:
    """Mount the capped adapter on a client's REST session. The REST transports build their
    ``AuthorizedSession`` (a ``requests.Session``) in ``__init__`` and take no session argument (e.g.
    ``compute_v1/services/regions/transports/rest.py``: ``self._session = AuthorizedSession(...)``); mounting an
    adapter on that session is requests' own ``Session.mount``."""
    session = client.transport._session
    adapter = _capped_adapter(cap)
    for prefix in ("https://", "http://"):
        session.mount(prefix, adapter)


# ---------------------------------------------------------------------------------------------
# The bounded reads


class Clients:
    """The Compute Engine, Service Usage, Cloud Quotas and Cloud KMS clients, REST, every reply capped (tests point
    them at a loopback server)."""

    def __init__(self, **options: Any) -> None:
        from google.cloud import cloudquotas_v1, compute_v1, kms_v1, service_usage_v1

        self.reservations = compute_v1.ReservationsClient(**options)
        self.regions = compute_v1.RegionsClient(**options)
        self.instances = compute_v1.InstancesClient(**options)
        self.services = service_usage_v1.ServiceUsageClient(transport="rest", **options)
        self.quotas = cloudquotas_v1.CloudQuotasClient(transport="rest", **options)
        self.kms = kms_v1.KeyManagementServiceClient(transport="rest", **options)
        self.machine_types = compute_v1.MachineTypesClient(**options)
        self.accelerator_types = compute_v1.AcceleratorTypesClient(**options)
        self.disk_types = compute_v1.DiskTypesClient(**options)
        self.permissions = ProjectPermissions(**options)
        for client in self.all():
            cap_replies(client)

    def all(self) -> tuple[Any, ...]:
        return (
            self.reservations,
            self.regions,
            self.instances,
            self.services,
            self.quotas,
            self.kms,
            self.machine_types,
            self.accelerator_types,
            self.disk_types,
            self.permissions,
        )

    def close(self) -> None:
        for client in self.all():
            client.transport.close()


class ProjectPermissions:
    """Resource Manager's ``projects.testIamPermissions`` (v3, REST), through google-auth's ``AuthorizedSession``:
    the session every google-cloud REST transport uses (``transport._session``), so the same credentials, the same
    capped adapter (``cap_replies``) and api_core's exceptions (``from_http_response``). No Resource Manager client
    library is a dependency of the project for this one call."""

    ENDPOINT = "https://cloudresourcemanager.googleapis.com"

    def __init__(self, credentials: Any = None, client_options: Any = None, **_: Any) -> None:
        import google.auth
        from google.auth.transport.requests import AuthorizedSession

        if credentials is None:
            credentials, _project = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
        endpoint = (client_options or {}).get("api_endpoint") or self.ENDPOINT
        self.url = endpoint if "://" in endpoint else f"https://{endpoint}"
        self.transport = self
        self._session = AuthorizedSession(credentials)

    def test(self, project: str, permissions: Iterable[str], options: dict[str, Any]) -> list[str]:
        """The permissions of ``permissions`` the caller holds on ``project`` (retried and bounded as every read)."""
        from google.api_core import exceptions as api

        def once() -> list[str]:
            response = self._session.post(
                f"{self.url}/v3/projects/{project}:testIamPermissions",
                json={"permissions": list(permissions)},
                timeout=options["timeout"],
            )
            if response.status_code >= 400:
                raise api.from_http_response(response)
            return granted(response.content)

        return options["retry"](once)()

    def close(self) -> None:
        self._session.close()


def make_clients() -> Clients:
    """Clients with Application Default Credentials (what the gcp provider uses too)."""
    return Clients()


def transient(err: Exception) -> bool:
    """What a read retries: 429, 5xx, Compute's 403 ``rateLimitExceeded``, a dropped connection or timeout."""
    from google.api_core import exceptions as api
    from requests import exceptions as requests_errors

    if isinstance(err, requests_errors.SSLError):
        return False
    if isinstance(err, api.Forbidden):
        return "rateLimitExceeded" in _reasons(err)
    if isinstance(err, api.GoogleAPICallError):
        return err.code in (429, 500, 502, 503, 504)
    return isinstance(err, requests_errors.ConnectionError | requests_errors.Timeout)


def _error_info(err: Any) -> dict[str, Any]:
    """The ``google.rpc.ErrorInfo`` of an error: over REST, api_core keeps it as the JSON dict in
    ``details`` (its ``reason``/``metadata`` properties expect the proto and fail on it)."""
    for detail in getattr(err, "details", None) or []:
        if isinstance(detail, dict) and detail.get("@type") == "type.googleapis.com/google.rpc.ErrorInfo":
            return detail
    return {}


def _reasons(err: Any) -> set[str]:
    """Compute's ``errors[].reason`` values and the ErrorInfo reason (``SERVICE_DISABLED``)."""
    reasons = {str(e.get("reason")) for e in getattr(err, "errors", None) or [] if isinstance(e, dict)}
    info = _error_info(err).get("reason")
    return reasons | {str(info)} if info else reasons


def _options(budget: deadline.Budget) -> dict[str, Any]:
    from google.api_core import retry

    return {
        # The clients take one number: requests applies it to the connect and to each read, and the retry
        # shortens it to what is left of the total (api_core ``TimeToDeadlineTimeout``).
        "timeout": budget.read,
        "retry": retry.Retry(initial=0.5, maximum=4.0, multiplier=2.0, timeout=budget.total, predicate=transient),
    }


class ReadFailedError(Exception):
    """A read could not decide (no permission, no answer, a disabled API, an unreadable reply): one line."""


_PARSE_FIELD = re.compile(r"Failed to parse ([A-Za-z0-9_]+) field: ")
_PARSE_AT = re.compile(r" at [A-Za-z_][A-Za-z0-9_]*((?:\.[A-Za-z0-9_\[\]]+)*)\.*$")


def parse_failure(message: str) -> str:
    """What a protobuf JSON ``ParseError`` says (``json_format``), as ``<field>: <why>``: the field path it names
    (``... at Region.quotas[0].limit``, or the ``Failed to parse quotas field`` chain), or ``not JSON``."""
    if message.startswith("Failed to load JSON"):
        return "not JSON"
    fields = _PARSE_FIELD.findall(message)
    rest = _PARSE_FIELD.sub("", message).strip()
    at = _PARSE_AT.search(rest)
    path = (at.group(1).lstrip(".") if at else "") or ".".join(fields) or "a field"
    why = (rest[: at.start()] if at else rest).strip().rstrip(".")
    return f"{scrub(path, limit=80)}: {scrub(why, limit=80)}"


REPLY = "answered with a reply this check cannot read"


def _read(what: str, source: str, call: Callable[[dict[str, Any]], T], clients: Clients, budget: deadline.Budget) -> T:
    """One read through ``call(options)`` (the client call and its parse), bounded; every way it can fail is a
    ``ReadFailedError`` line naming ``what`` was read and the API (``source``), or the client's ``NotFound``."""
    from google.api_core import exceptions as api
    from google.auth import exceptions as auth
    from google.protobuf import json_format
    from requests import exceptions as requests_errors

    try:
        return deadline.call(lambda: call(_options(budget)), budget.total + 1.0, cancel=clients.close)
    except deadline.DeadlineExceededError:
        raise ReadFailedError(f"{what}: no answer within {budget.total:g} s") from None
    except api.NotFound:
        raise
    except api.Forbidden as err:
        reasons = _reasons(err)
        if "SERVICE_DISABLED" in reasons or "accessNotConfigured" in reasons:
            service = (_error_info(err).get("metadata") or {}).get("service", "the API")
            raise ReadFailedError(f"{what}: {scrub(str(service), limit=60)} is disabled") from None
        raise ReadFailedError(f"{what}: permission denied (HTTP 403)") from None
    except api.RetryError as err:
        raise ReadFailedError(f"{what}: no usable answer in time ({type(err.cause).__name__})") from None
    except api.GoogleAPICallError as err:
        raise ReadFailedError(f"{what}: HTTP {err.code}") from None
    except (auth.DefaultCredentialsError, auth.RefreshError):
        raise ReadFailedError(f"{what}: no usable Google credentials (gcloud auth application-default login)") from None
    except ReplyTooLargeError as err:
        raise ReadFailedError(f"{what}: {source} sent more than {err.args[0]} bytes") from None
    except ReplyEncodingError as err:
        raise ReadFailedError(f"{what}: {source} {REPLY} (content encoding {scrub(err.args[0])!r})") from None
    except ReplyError as err:
        raise ReadFailedError(f"{what}: {source} {REPLY} ({err})") from None
    except json_format.ParseError as err:
        raise ReadFailedError(f"{what}: {source} {REPLY} ({parse_failure(str(err))})") from None
    except requests_errors.RequestException as err:
        raise ReadFailedError(f"{what}: {type(err).__name__}") from None
    except (UnicodeError, ValueError, TypeError, AttributeError, KeyError, OverflowError, RecursionError) as err:
        # what the client's own parse raises besides ParseError (bytes that are not UTF-8, an enum it cannot map)
        raise ReadFailedError(f"{what}: {source} {REPLY} ({type(err).__name__})") from None


def check_capacity(settings: Settings, clients: Clients | None = None) -> list[Finding]:
    """Every finding of the capacity preflight (bounded reads; never raises for a read it cannot make)."""
    budget = deadline.BUDGETS["compute"]
    try:
        clients = clients or make_clients()
    except Exception as err:  # noqa: BLE001 (no credentials: the check cannot run)
        return [Finding("unknown", f"the capacity check could not start ({type(err).__name__}); nothing was checked")]
    try:
        return _check(settings, clients, budget)
    finally:
        clients.close()


def _check(settings: Settings, clients: Clients, budget: deadline.Budget) -> list[Finding]:
    from google.api_core import exceptions as api

    findings: list[Finding] = _permissions(settings, clients, budget)
    apis = REQUIRED_APIS + ((KMS_API,) if settings.gke.secrets_key else ())
    try:
        states = _read(
            f"listing the APIs of project {settings.project}",
            "Service Usage (services.batchGet)",
            lambda options: service_states(
                clients.services.batch_get_services(
                    request={
                        "parent": f"projects/{settings.project}",
                        "names": [f"projects/{settings.project}/services/{a}" for a in apis],
                    },
                    **options,
                )
            ),
            clients,
            budget,
        )
    except (ReadFailedError, api.NotFound) as err:
        if f"{SERVICE_USAGE} is disabled" in str(err):
            return [
                *findings,
                Finding(
                    "problem",
                    f"the Service Usage API is disabled in project {settings.project}: the stack cannot enable "
                    f"the APIs it needs; run `gcloud services enable {SERVICE_USAGE} --project "
                    f"{settings.project}`",
                ),
            ]
        findings.append(Finding("unknown", f"{err}; the APIs were not checked"))
        states = None
    # With the Cloud KMS API off in the project, no key ring of the stack's can be in use there (the stack
    # enables the API and never disables it): nothing to look for.
    kms = states is None or states.get(KMS_API) == "ENABLED"
    if states is not None:
        findings += api_findings(states, settings.project, apis)
        if states.get("compute.googleapis.com") != "ENABLED":
            findings.append(
                Finding(
                    "unknown",
                    "the Compute Engine API is not enabled yet: the zone's offers, reservation and quotas were not "
                    "checked",
                )
            )
            return findings + _secrets_key(settings, clients, budget, kms)
    need = needs(settings, _offers(settings, clients, budget, findings))
    ours = _held(settings, need, clients, budget, findings)
    if need.reservation is not None:
        project, name = need.reservation
        try:
            found = _read(
                f"reading reservation {name}",
                "Compute Engine (reservations.get)",
                lambda options: reservation_reply(
                    clients.reservations.get(project=project, zone=settings.zone, reservation=name, **options), name
                ),
                clients,
                budget,
            )
        except api.NotFound:
            findings += reservation_findings(need, None, settings.zone, ours)
        except ReadFailedError as err:
            findings.append(Finding("unknown", f"{err}; the reservation was not checked"))
        else:
            findings += reservation_findings(need, found, settings.zone, ours)
    try:
        quotas = _read(
            f"reading the quotas of region {settings.region}",
            "Compute Engine (regions.get)",
            lambda options: region_quotas(
                clients.regions.get(project=settings.project, region=settings.region, **options), settings.region
            ),
            clients,
            budget,
        )
    except (ReadFailedError, api.NotFound) as err:
        findings.append(Finding("unknown", f"{err}; the quotas were not checked"))
    else:
        findings += quota_findings(need, quotas, settings.region, ours)
    if need.reservation is None:
        findings += _tpu_quota(settings, need, clients, budget)
    return findings + _secrets_key(settings, clients, budget, kms)


def _offers(settings: Settings, clients: Clients, budget: deadline.Budget, findings: list[Finding]) -> dict[str, int]:
    """Whether ``gcp:zone`` offers each type the stack needs (``offers``): a type it does not is a problem (all in
    one line). Returns machine type -> guest CPUs as the zone answered (what the quota check counts)."""
    from google.api_core import exceptions as api

    reads = {
        "machine type": ("machineTypes.get", clients.machine_types, "machine_type"),
        "accelerator type": ("acceleratorTypes.get", clients.accelerator_types, "accelerator_type"),
        "disk type": ("diskTypes.get", clients.disk_types, "disk_type"),
    }
    vcpus: dict[str, int] = {}
    missing: list[Offer] = []
    unread: list[tuple[Offer, str]] = []
    for offer in offers(settings):
        method, client, field_name = reads[offer.kind]

        def read(
            options: dict[str, Any], offer: Offer = offer, client: Any = client, field_name: str = field_name
        ) -> int:
            reply = client.get(project=settings.project, zone=settings.zone, **{field_name: offer.name}, **options)
            return offer_reply(reply, offer.name)

        try:
            guest_cpus = _read(
                f"reading {offer.kind} {offer.name}", f"Compute Engine ({method})", read, clients, budget
            )
        except api.NotFound:
            missing.append(offer)
        except ReadFailedError as err:
            unread.append((offer, str(err)))
        else:
            if offer.kind == "machine type" and guest_cpus:
                vcpus[offer.name] = guest_cpus
    findings += offer_findings(settings.zone, missing)
    if unread:
        names = ", ".join(f"{o.kind} {o.name}" for o, _ in unread)
        findings.append(Finding("unknown", f"{unread[0][1]}; whether gcp:zone offers {names} was not checked"))
    return vcpus


def _permissions(settings: Settings, clients: Clients, budget: deadline.Budget) -> list[Finding]:
    """The permissions the stack's resources need (``infra.gcp.permissions``), asked of Resource Manager: missing
    ones are a problem, one line naming each with its role; a test that cannot be made is a warning."""
    from google.api_core import exceptions as api

    from infra.gcp.permissions import missing_text, needed

    wanted = needed(settings)
    try:
        held_permissions = _read(
            f"testing the permissions of the account running `up` in project {settings.project}",
            "Resource Manager (projects.testIamPermissions)",
            lambda options: clients.permissions.test(settings.project, wanted, options),
            clients,
            budget,
        )
    except (ReadFailedError, api.NotFound) as err:
        return [Finding("unknown", f"{err}; the permissions (docs/permissions.md) were not checked")]
    text = missing_text(settings.project, wanted, held_permissions)
    return [Finding("problem", text)] if text else []


def _secrets_key(settings: Settings, clients: Clients, budget: deadline.Budget, kms: bool = True) -> list[Finding]:
    """The Secrets key: one of one's own is read; with ``create``, a ring and key of the stack's names that
    survived a destroy are found (reused, or a stop naming the key to set). ``kms``: the Cloud KMS API may be
    enabled in the stack's project (False: it is not; no ring of the stack's can exist there)."""
    key = settings.gke.secrets_key
    if not key or (key == "create" and not kms):
        return []
    if key != "create":
        try:
            return key_findings(key, _crypto_key(key, clients, budget))
        except ReadFailedError as err:
            return [Finding("unknown", f"{err}; the Secrets key was not checked")]
    names = names_for(settings)
    ring_id = key_ring_id(settings.project, settings.region, names.key_ring)
    key_id = crypto_key_id(settings.project, settings.region, names.key_ring, names.crypto_key)
    try:
        ring = _key_ring_exists(ring_id, clients, budget)
    except ReadFailedError as err:
        return surviving_key_findings(ring_id, None, key_id, None, ring_error=str(err))
    if not ring:
        return []
    try:
        found = _crypto_key(key_id, clients, budget)
    except ReadFailedError as err:
        return surviving_key_findings(ring_id, True, key_id, None, key_error=str(err))
    return surviving_key_findings(ring_id, True, key_id, found)


def _crypto_key(name: str, clients: Clients, budget: deadline.Budget) -> CryptoKey | None:
    from google.api_core import exceptions as api

    try:
        return _read(
            f"reading Cloud KMS key {name}",
            "Cloud KMS (cryptoKeys.get)",
            lambda options: crypto_key_reply(clients.kms.get_crypto_key(name=name, **options), name),
            clients,
            budget,
        )
    except api.NotFound:
        return None


def _key_ring_exists(name: str, clients: Clients, budget: deadline.Budget) -> bool:
    from google.api_core import exceptions as api

    def read(options: dict[str, Any]) -> bool:
        _named(clients.kms.get_key_ring(name=name, **options), name)
        return True

    try:
        return _read(f"reading Cloud KMS key ring {name}", "Cloud KMS (keyRings.get)", read, clients, budget)
    except api.NotFound:
        return False


def _held(settings: Settings, need: Need, clients: Clients, budget: deadline.Budget, findings: list[Finding]) -> Held:
    """The stack's own node VMs in the zone (a later `up`: what they hold is not needed again)."""
    from google.api_core import exceptions as api

    try:
        types = _read(
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
                ).pages
            ),
            clients,
            budget,
        )
    except (ReadFailedError, api.NotFound) as err:
        findings.append(Finding("unknown", f"{err}; VMs this stack already holds are not counted"))
        return Held()
    return held(types, need.machine_type, need.tpu.boot_disk_type)


def _tpu_quota(settings: Settings, need: Need, clients: Clients, budget: deadline.Budget) -> list[Finding]:
    from google.api_core import exceptions as api

    quota = tpu_quota_id(need)
    if quota is None:
        return []
    name = f"projects/{settings.project}/locations/global/services/compute.googleapis.com/quotaInfos/{quota}"
    try:
        infos = _read(
            f"reading quota {quota}",
            "Cloud Quotas (quotaInfos.get)",
            lambda options: quota_limits(clients.quotas.get_quota_info(name=name, **options), quota),
            clients,
            budget,
        )
    except api.NotFound:
        infos = None
    except ReadFailedError as err:
        return [Finding("unknown", f"{err}; TPU quota was not checked")]
    return tpu_quota_findings(need, infos, settings.region)
