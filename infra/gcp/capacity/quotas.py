"""The region's and the project's quotas and the TPU chips' limit.

- ``compute_v1.RegionsClient.get``: what a run uses (the system pool at its minimum, one cpu-np node for the CPU
  steps, the slices, their boot disks, and cpu-np's secondary boot disks when its image was read:
  ``infra.gcp.capacity.needs``) against each metric it draws on
  (``core.machines.CPU_QUOTAS`` and ``DISK_QUOTAS``, the rules as data with their sources), minus what the stack
  holds; the pools' autoscaling maximum beyond that is a warning naming the ``maxNodes`` to lower;
- ``compute_v1.ProjectsClient.get``: the project's quotas across all regions, counted the same way: the CPU pools'
  vCPUs on ``CPUS_ALL_REGIONS`` (the slices' perhaps: a warning) and the network's objects (``NETWORKS``,
  ``SUBNETWORKS``, ``ROUTERS``, ``FIREWALLS``: ``needs.NETWORK_OBJECTS``), held already when the stack's network
  exists (``compute_v1.NetworksClient.get``);
- for capacity that is not reserved, the TPU chips: GKE's TPU pools use Compute Engine quota, but ``regions.get``
  does not list the TPU metrics, so their limits are read from the Cloud Quotas API
  (``cloudquotas_v1.CloudQuotasClient.get_quota_info``), the quotas the slice's catalogue entry names
  (``core.tpu.TpuQuota``; v6e: ``TPUS-PER-TPU-FAMILY-per-project-region`` with ``tpu_family=CT6E`` on demand,
  ``PREEMPTIBLE-TPU-V6E-per-project-region`` for spot and flex-start; an entry that names none is not checked).
  It reports limits, not usage: a limit below the slices is a problem; whether other TPUs use it up is not known
  here. Flex-start may fall back to on-demand quota, so a short preemptible limit is a warning there."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core import deadline
from core.redact import scrub
from core.settings import Settings
from infra.gcp.capacity.findings import Finding
from infra.gcp.capacity.needs import NETWORK_OBJECTS, PROJECT, REGION, Held, Need, Pool, unit_of
from infra.gcp.capacity.reads import (
    MAX_COUNT,
    Clients,
    ReadFailedError,
    ReplyError,
    as_amount,
    as_text,
    bounded_read,
    require_field,
    require_name,
)
from infra.gcp.naming import names_for


def _lower_max(need: Need, metric: str, left: float, scope: str) -> str:
    """What to lower when ``left`` holds the run but not the pools at their maximum: the ``maxNodes`` of each pool
    that grows on ``metric``, with the largest value that fits when one pool does."""
    growing = [p for p in need.pools if p.max_nodes > p.run_nodes and p.per_node(metric)]
    if len(growing) != 1:
        return "lower " + " or ".join(f"{p.key}.maxNodes" for p in growing)
    pool = growing[0]
    per_node = pool.per_node(metric)
    others = need.draw("run", scope).get(metric, 0.0) - per_node * pool.run_nodes
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
    return found + _shortfalls(need, quotas, REGION, region, ours)


def global_quota_findings(
    need: Need, quotas: dict[str, tuple[float, float]] | None, project: str, ours: Held, network: bool | None
) -> list[Finding]:
    """The project's quotas across all regions (metric -> (limit, usage)) against what the stack draws (pure), as the
    region's are (``quota_findings``): the CPU pools' vCPUs on ``CPUS_ALL_REGIONS`` and the network's objects
    (``needs.NETWORK_OBJECTS``) short for the run is a problem, the pools' maximum a warning, the slices' vCPUs (which
    may count there, ``needs.ALL_REGIONS_CPUS``) a warning. ``network``: whether the stack's VPC network exists (a
    later `up`: its objects are held); None: not known, and the network's quotas are not checked."""
    if quotas is None:
        return [Finding("unknown", f"the quotas of project {project} were not listed; they were not checked")]
    objects = {metric: float(count) for metric, (count, _, _) in NETWORK_OBJECTS.items()} if network else {}
    mine = Held(ours.tpu_vms, {**ours.amounts, **objects}, ours.maybe)
    return _shortfalls(need, quotas, PROJECT, project, mine, frozenset(NETWORK_OBJECTS) if network is None else None)


def _what(metric: str, parts: list[Pool]) -> str:
    """What the run draws on ``metric``: the network's objects, or the pools' run nodes."""
    return NETWORK_OBJECTS[metric][2] if metric in NETWORK_OBJECTS else ", ".join(p.described(metric) for p in parts)


def _maybe_what(need: Need, metric: str, scope: str) -> str:
    """The rule a ``maybe`` line rests on, and where the check says why it is not settled."""
    if scope == REGION:
        return (
            f"{', '.join(need.maybe_families)} vCPUs count against {metric} as well as their own metric, which the "
            "Compute Engine documentation this check cites does not settle (core.machines.CPU_QUOTAS)"
        )
    return (
        f"the {need.vms} TPU VM(s)' vCPUs ({need.machine_type}) count against {metric}, which nothing this check "
        "could read settles (infra.gcp.capacity.needs.ALL_REGIONS_CPUS)"
    )


def _shortfalls(
    need: Need,
    quotas: dict[str, tuple[float, float]],
    scope: str,
    name: str,
    ours: Held,
    skip: frozenset[str] | None = None,
) -> list[Finding]:
    """One line per metric of ``scope`` (a region's quotas or the project's, ``name``) that does not hold the run,
    the pools at their maximum or what the run may draw (``Need.maybe``); ``skip``: metrics not checked."""
    where = f"in {name}" if scope == REGION else f"of project {name}"
    run, peak = need.draw("run", scope), need.draw("max", scope)
    found: list[Finding] = []
    lined: set[str] = set()
    """Metrics with a line already: one line per metric."""
    for metric in sorted((set(run) | set(peak)) - (skip or set())):
        lined.add(metric)
        if metric not in quotas:
            found.append(Finding("unknown", f"{scope} {name} lists no {metric} quota; it was not checked"))
            continue
        limit, usage = quotas[metric]
        left, unit = limit - usage + ours.amounts.get(metric, 0.0), unit_of(metric)
        needed, most = run.get(metric, 0.0), peak.get(metric, 0.0)
        if left < needed:
            parts = [p for p in need.pools if p.run_nodes and p.per_node(metric)]
            keys = [k for p in parts for k in p.fix_keys(metric)]
            found.append(
                Finding(
                    "problem",
                    f"quota {metric} {where}: {left:g} of {limit:g} {unit} left, the run needs {needed:g} ("
                    + _what(metric, parts)
                    + "); request more quota"
                    + (f" or lower {' / '.join(dict.fromkeys(keys))}" if keys else ""),
                )
            )
        elif left < most:
            found.append(
                Finding(
                    "unknown",
                    f"quota {metric} {where}: {left:g} of {limit:g} {unit} left hold the run ({needed:g}) but not "
                    f"the pools at their autoscaling maximum ({most:g}), so GKE cannot scale them that far; "
                    f"{_lower_max(need, metric, left, scope)} or request more quota",
                )
            )
        else:
            lined.discard(metric)
    for metric, extra in sorted(need.maybe(scope).items()):
        if metric in lined:
            continue
        if metric not in quotas:
            found.append(Finding("unknown", f"{scope} {name} lists no {metric} quota; it was not checked"))
            continue
        limit, usage = quotas[metric]
        left = limit - usage + ours.amounts.get(metric, 0.0) + ours.maybe.get(metric, 0.0)
        total = run.get(metric, 0.0) + extra
        if left < total:
            found.append(
                Finding(
                    "unknown",
                    f"quota {metric} {where}: {left:g} of {limit:g} vCPUs left; the run needs {total:g} if "
                    f"{_maybe_what(need, metric, scope)}; if GKE cannot add nodes, request more quota",
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


def region_quotas(message: Any, region: str) -> dict[str, tuple[float, float]] | None:
    """``compute_v1.Region`` ``region``'s quotas, metric -> (limit, usage); None when Compute could not read them."""
    require_name(message, region)
    if "quota_status_warning" in message or not message.quotas:
        return None  # Compute answers without quotas when it could not read them (regions.get "fails open")
    return _quotas(message)


def project_quotas(message: Any, project: str) -> dict[str, tuple[float, float]] | None:
    """``compute_v1.Project`` ``project``'s quotas across all regions, metric -> (limit, usage), in the same
    ``quotas[]`` shape as a region's (``Quota``); None when it lists none."""
    require_name(message, project)
    return _quotas(message) if message.quotas else None


def network_exists(message: Any, network: str) -> bool:
    """``compute_v1.Network`` ``network``: it exists (``networks.get`` answers NotFound otherwise)."""
    require_name(message, network)
    return True


def _quotas(message: Any) -> dict[str, tuple[float, float]]:
    """A ``quotas[]`` list (a region's or the project's), metric -> (limit, usage); the first entry of a metric."""
    quotas: dict[str, tuple[float, float]] = {}
    for n, quota in enumerate(message.quotas):
        require_field(quota, "metric", f"quotas[{n}].metric")
        require_field(quota, "limit", f"quotas[{n}].limit")
        metric = as_text(quota.metric, f"quotas[{n}].metric", 80)
        limit, usage = as_amount(quota.limit, f"quotas[{n}].limit"), as_amount(quota.usage, f"quotas[{n}].usage")
        quotas.setdefault(metric, (limit, usage))
    return quotas


def quota_limits(message: Any, quota: str) -> list[QuotaLimit]:
    """``cloudquotas_v1.QuotaInfo`` ``quota``'s dimension entries."""
    require_name(message, quota, "quota_id")
    limits = []
    for n, info in enumerate(message.dimensions_infos):
        where = f"dimensionsInfos[{n}]"
        require_field(info, "details", f"{where}.details")  # its value may be absent: 0, as proto3 JSON omits it
        value = info.details.value
        if isinstance(value, bool) or not isinstance(value, int) or abs(value) > MAX_COUNT:
            raise ReplyError(f"{where}.details.value is {scrub(repr(value), limit=40)}, not a limit")
        limits.append(
            QuotaLimit(
                dimensions={
                    as_text(k, f"{where}.dimensions", 40): as_text(v, f"{where}.dimensions", 40)
                    for k, v in info.dimensions.items()
                },
                value=value,
                locations=tuple(as_text(loc, f"{where}.applicableLocations", 40) for loc in info.applicable_locations),
            )
        )
    return limits


def check_quotas(
    settings: Settings, need: Need, ours: Held, clients: Clients, budget: deadline.Budget
) -> list[Finding]:
    """The region's quotas (``quota_findings``), read."""
    from google.api_core import exceptions as api

    try:
        quotas = bounded_read(
            f"reading the quotas of region {settings.region}",
            "Compute Engine (regions.get)",
            lambda options: region_quotas(
                clients.regions.get(project=settings.project, region=settings.region, **options), settings.region
            ),
            clients,
            budget,
        )
    except (ReadFailedError, api.NotFound) as err:
        return [Finding("unknown", f"{err}; the quotas were not checked")]
    return quota_findings(need, quotas, settings.region, ours)


def check_global_quotas(
    settings: Settings, need: Need, ours: Held, clients: Clients, budget: deadline.Budget
) -> list[Finding]:
    """The project's quotas (``global_quota_findings``), read, and whether the stack's network exists."""
    from google.api_core import exceptions as api

    project = settings.project
    try:
        quotas = bounded_read(
            f"reading the quotas of project {project}",
            "Compute Engine (projects.get)",
            lambda options: project_quotas(clients.projects.get(project=project, **options), project),
            clients,
            budget,
        )
    except (ReadFailedError, api.NotFound) as err:
        return [Finding("unknown", f"{err}; the project's quotas were not checked")]
    name = names_for(settings).network
    found: list[Finding] = []
    network: bool | None
    try:
        network = bounded_read(
            f"reading network {name}",
            "Compute Engine (networks.get)",
            lambda options: network_exists(clients.networks.get(project=project, network=name, **options), name),
            clients,
            budget,
        )
    except api.NotFound:
        network = False
    except ReadFailedError as err:
        network = None
        found.append(Finding("unknown", f"{err}; the quotas of the network's objects were not checked"))
    return found + global_quota_findings(need, quotas, project, ours, network)


def check_tpu_quota(settings: Settings, need: Need, clients: Clients, budget: deadline.Budget) -> list[Finding]:
    from google.api_core import exceptions as api

    quota = tpu_quota_id(need)
    if quota is None:
        return []
    name = f"projects/{settings.project}/locations/global/services/compute.googleapis.com/quotaInfos/{quota}"
    try:
        infos = bounded_read(
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
