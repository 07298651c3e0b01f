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
  Cluster Toolkit skips its machine-type check for that reason) is of the v6e family
  (``VM_FAMILY_CLOUD_TPU_LITE_POD_SLICE_CT6E``) with the slices' chips free;
- the region's quotas, ``compute_v1.RegionsClient.get``: the CPU pools' families at their maximum size
  (``<FAMILY>_CPUS`` and ``CPUS``), minus what the stack holds;
- for capacity that is not reserved, the TPU chips: GKE's TPU pools use Compute Engine quota, but
  ``regions.get`` does not list the v6e metrics, so their limits are read from the Cloud Quotas API
  (``cloudquotas_v1.CloudQuotasClient.get_quota_info``: ``TPUS-PER-TPU-FAMILY-per-project-region`` with
  ``tpu_family=CT6E`` on demand, ``PREEMPTIBLE-TPU-V6E-per-project-region`` for spot and flex-start). It
  reports limits, not usage: a limit below the slices is a problem; whether other TPUs use it up is not
  known here. Flex-start may fall back to on-demand quota, so a short preemptible limit is a warning there;
- the APIs, ``service_usage_v1.ServiceUsageClient.batch_get_services``: the stack enables the ones it
  needs itself (``infra.gcp.apis``), so a disabled one is a note; a disabled Service Usage API, which
  that needs, is a problem;
- a Secrets key the stack is given (``tpu-rl:gke.secretsEncryptionKey`` naming a key),
  ``kms_v1.KeyManagementServiceClient.get_crypto_key``: it exists, encrypts and decrypts, and has an enabled
  primary version; otherwise GKE would refuse the cluster after the network, the bucket and the
  identities exist.

Each finding is one line: a *problem* stops `pulumi up` (and a preview) before anything is created; an
*unknown* (no permission, no answer, a quota metric this project does not list) is a warning, since the
check cannot decide. ``tpu-rl:workflow.capacityCheck: false`` skips it all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from core import deadline
from core.machines import machine_family, machine_shape
from core.names import REQUIRED_APIS
from core.redact import scrub
from core.settings import Settings

T = TypeVar("T")
CLUSTER_LABEL = "goog-k8s-cluster-name"
"""The label GKE puts on every node VM with its cluster's name (the stack's own VMs are counted as held)."""
SERVICE_USAGE = "serviceusage.googleapis.com"
V6E_FAMILY = "VM_FAMILY_CLOUD_TPU_LITE_POD_SLICE_CT6E"
"""An aggregate TPU reservation's family for v6e (``AllocationAggregateReservation.vmFamily``)."""


@dataclass(frozen=True)
class Finding:
    level: str
    """problem (stops `up`) | unknown (a warning: the check cannot decide) | note."""
    text: str


@dataclass(frozen=True)
class Need:
    """What the stack needs of the zone and region at its pools' maximum size."""

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
    cpus: dict[str, float] = field(default_factory=dict)
    """Quota metric -> vCPUs of the CPU pools at their maximum size (per family, and ``CPUS`` in all)."""


def needs(settings: Settings) -> Need:
    """What the stack's pools need, from its settings (pure)."""
    reservation = None
    if settings.tpu.capacity == "reservation" and settings.tpu.reservation:
        parts = settings.tpu.reservation.split("/")
        reservation = (parts[1], parts[3]) if len(parts) == 4 else (settings.project, settings.tpu.reservation)
    cpus: dict[str, float] = {}
    for pool in (settings.system_pool, settings.cpu_pool):
        _add_vcpus(cpus, pool.machine_type, pool.max_nodes)
    return Need(
        reservation=reservation,
        vms=settings.slice.hosts * settings.tpu.slices,
        machine_type=settings.slice.machine_type,
        chips=settings.total_chips,
        chips_per_vm=settings.slice.chips_per_vm,
        preemptible=settings.tpu.capacity in ("spot", "flex-start"),
        flex_start=settings.tpu.capacity == "flex-start",
        cpus=cpus,
    )


@dataclass(frozen=True)
class Held:
    """What the stack's own cluster already runs in the zone (its node VMs): counted as available."""

    tpu_vms: int = 0
    cpus: dict[str, float] = field(default_factory=dict)


def held(instances: list[dict[str, Any]], machine_type: str) -> Held:
    """The stack's node VMs (``machineType`` URLs, as Compute lists them) as TPU VMs and vCPUs per metric."""
    tpu = 0
    cpus: dict[str, float] = {}
    for instance in instances:
        name = str(instance.get("machine_type") or "").rsplit("/", 1)[-1]
        if name == machine_type:
            tpu += 1
        else:
            _add_vcpus(cpus, name, 1)
    return Held(tpu, cpus)


def _add_vcpus(cpus: dict[str, float], machine_type: str, count: int) -> None:
    """Add ``count`` machines' vCPUs to the quota metrics they draw on (``<FAMILY>_CPUS`` and ``CPUS``);
    a machine of unknown shape adds nothing."""
    shape = machine_shape(machine_type)
    if shape is None:
        return
    for metric in (f"{machine_family(machine_type).upper()}_CPUS", "CPUS"):
        cpus[metric] = cpus.get(metric, 0.0) + shape.vcpus * count


def reservation_findings(
    need: Need, found: dict[str, Any] | None, zone: str, ours: Held, *, key: str = "tpu-rl:tpu.reservation"
) -> list[Finding]:
    """The reservation against the slices (pure). ``found``: the reservation's fields, None when not found."""
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
    if found.get("status") not in (None, "READY"):
        problems.append(f"{where} is {scrub(str(found['status']), limit=20)}, not READY; wait for it or fix {key}")
    if not found.get("specific_reservation_required"):
        problems.append(
            f"{where} is not a specific reservation (specificReservationRequired is false): GKE's "
            "SPECIFIC_RESERVATION affinity, which the TPU pool uses, consumes only specific reservations; "
            "create it with --require-specific-reservation"
        )
    if found.get("aggregate"):
        family = str(found.get("vm_family") or "")
        if family != V6E_FAMILY:
            problems.append(
                f"{where} is a TPU reservation of {scrub(family, limit=60) or 'no'} family, the slice needs "
                f"{V6E_FAMILY}; fix {key} or tpu-rl:tpu.version"
            )
        unit, count, used, held_by_us, needed = (
            "chips",
            found.get("reserved"),
            found.get("in_use"),
            ours.tpu_vms,
            need.chips,
        )
        held_by_us *= need.chips_per_vm
    else:
        machine = str(found.get("machine_type") or "")
        if machine != need.machine_type:
            problems.append(
                f"{where} holds {scrub(machine, limit=40) or 'no'} VMs, the slice needs {need.machine_type}; fix "
                f"{key} or tpu-rl:tpu.machineType"
            )
        unit, count, used, held_by_us, needed = (
            "VMs",
            found.get("count"),
            found.get("in_use_count"),
            ours.tpu_vms,
            need.vms,
        )
    count, used = int(count or 0), int(used or 0)
    if not problems and count - used + held_by_us < needed:
        problems.append(
            f"{where} has {count - used} of {count} {unit} free"
            + (f" (and {held_by_us} held by this stack)" if held_by_us else "")
            + f", the slices need {needed}; free them in it or lower tpu-rl:tpu.slices"
        )
    return [Finding("problem", p) for p in problems]


def quota_findings(need: Need, quotas: dict[str, tuple[float, float]] | None, region: str, ours: Held) -> list[Finding]:
    """The region's CPU quotas (metric -> (limit, usage)) against what the pools need (pure)."""
    if quotas is None:
        return [Finding("unknown", f"the quotas of region {region} were not listed; they were not checked")]
    found: list[Finding] = []
    for metric, vcpus in sorted(need.cpus.items()):
        if metric not in quotas:
            found.append(Finding("unknown", f"region {region} lists no {metric} quota; it was not checked"))
            continue
        limit, usage = quotas[metric]
        left = limit - usage + ours.cpus.get(metric, 0.0)
        if left < vcpus:
            found.append(
                Finding(
                    "problem",
                    f"quota {metric} in {region}: {left:g} of {limit:g} vCPUs left, the CPU pools need {vcpus:g} at "
                    "their maximum size; request more quota or lower tpu-rl:cpuPool.maxNodes / "
                    "tpu-rl:systemPool.maxNodes",
                )
            )
    return found


def tpu_quota_id(need: Need) -> str:
    """The Cloud Quotas id of the TPU v6e chips the slices draw on."""
    return "PREEMPTIBLE-TPU-V6E-per-project-region" if need.preemptible else "TPUS-PER-TPU-FAMILY-per-project-region"


def tpu_quota_findings(need: Need, infos: list[dict[str, Any]] | None, region: str) -> list[Finding]:
    """The TPU v6e chip limit in ``region`` (``infos``: the quota's dimension entries as
    ``{"dimensions", "value", "locations"}``; None: not found) against the slices (pure)."""
    quota = tpu_quota_id(need)
    if infos is None:
        return [Finding("unknown", f"quota {quota} was not found; TPU quota was not checked")]
    wanted = {"region": region} if need.preemptible else {"region": region, "tpu_family": "CT6E"}

    def fits(info: dict[str, Any]) -> int:
        """How well an entry names the region (and family): exact, by location, the default; -1 another."""
        dims = info.get("dimensions") or {}
        if any(dims.get(k) not in (None, v) for k, v in wanted.items()):
            return -1
        return 2 if all(dims.get(k) == v for k, v in wanted.items()) else int(region in (info.get("locations") or []))

    ranked = sorted(rank for rank in ((fits(info), n) for n, info in enumerate(infos)) if rank[0] >= 0)
    if not ranked:
        return [Finding("unknown", f"quota {quota} has no limit for {region}; TPU quota was not checked")]
    limit = int(infos[ranked[-1][1]].get("value") or 0)
    if limit >= need.chips:
        return [Finding("note", f"quota {quota} in {region}: limit {limit} TPU chips (usage is not checked)")]
    text = (
        f"quota {quota} in {region}: the limit is {limit} TPU chips, the slices need {need.chips}; request more "
        "quota (gcloud alpha quotas preferences create) or use a smaller slice"
    )
    if need.flex_start:
        return [Finding("unknown", text + "; flex-start may use on-demand quota instead")]
    return [Finding("problem", text)]


def api_findings(states: dict[str, str] | None, project: str) -> list[Finding]:
    """Which of the stack's APIs are not enabled yet (the stack enables them itself)."""
    if states is None:
        return [Finding("unknown", f"the APIs of project {project} could not be listed; they were not checked")]
    disabled = sorted(api for api in REQUIRED_APIS if states.get(api) != "ENABLED")
    return [Finding("note", f"this `up` enables {', '.join(disabled)} in project {project}")] if disabled else []


# ---------------------------------------------------------------------------------------------
# The bounded reads


class Clients:
    """The Compute Engine, Service Usage, Cloud Quotas and Cloud KMS clients (tests point them at a loopback
    server)."""

    def __init__(self, **options: Any) -> None:
        from google.cloud import cloudquotas_v1, compute_v1, kms_v1, service_usage_v1

        self.reservations = compute_v1.ReservationsClient(**options)
        self.regions = compute_v1.RegionsClient(**options)
        self.instances = compute_v1.InstancesClient(**options)
        self.services = service_usage_v1.ServiceUsageClient(transport="rest", **options)
        self.quotas = cloudquotas_v1.CloudQuotasClient(transport="rest", **options)
        self.kms = kms_v1.KeyManagementServiceClient(transport="rest", **options)

    def close(self) -> None:
        for client in (self.reservations, self.regions, self.instances, self.services, self.quotas, self.kms):
            client.transport.close()


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
    """A read could not decide (no permission, no answer, a disabled API): one line."""


def _read(what: str, call: Callable[[dict[str, Any]], T], clients: Clients, budget: deadline.Budget) -> T:
    from google.api_core import exceptions as api
    from google.auth import exceptions as auth
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
    except requests_errors.RequestException as err:
        raise ReadFailedError(f"{what}: {type(err).__name__}") from None


def check_capacity(settings: Settings, clients: Clients | None = None) -> list[Finding]:
    """Every finding of the capacity preflight (bounded reads; never raises for a read it cannot make)."""
    from google.api_core import exceptions as api

    budget = deadline.BUDGETS["compute"]
    need = needs(settings)
    try:
        clients = clients or make_clients()
    except Exception as err:  # noqa: BLE001 (no credentials: the check cannot run)
        return [Finding("unknown", f"the capacity check could not start ({type(err).__name__}); nothing was checked")]
    findings: list[Finding] = []
    try:
        try:
            states = _read(
                f"listing the APIs of project {settings.project}",
                lambda options: {
                    s.config.name: s.state.name
                    for s in clients.services.batch_get_services(
                        request={
                            "parent": f"projects/{settings.project}",
                            "names": [f"projects/{settings.project}/services/{a}" for a in REQUIRED_APIS],
                        },
                        **options,
                    ).services
                },
                clients,
                budget,
            )
        except ReadFailedError as err:
            if f"{SERVICE_USAGE} is disabled" in str(err):
                return [
                    Finding(
                        "problem",
                        f"the Service Usage API is disabled in project {settings.project}: the stack cannot enable "
                        f"the APIs it needs; run `gcloud services enable {SERVICE_USAGE} --project "
                        f"{settings.project}`",
                    )
                ]
            findings.append(Finding("unknown", f"{err}; the APIs were not checked"))
            states = None
        if states is not None:
            findings += api_findings(states, settings.project)
            if states.get("compute.googleapis.com") != "ENABLED":
                findings.append(
                    Finding(
                        "unknown", "the Compute Engine API is not enabled yet: reservation and quotas were not checked"
                    )
                )
                return findings
        ours = _held(settings, need, clients, budget, findings)
        if need.reservation is not None:
            project, name = need.reservation
            try:
                found = _read(
                    f"reading reservation {name}",
                    lambda options: _reservation_fields(
                        clients.reservations.get(project=project, zone=settings.zone, reservation=name, **options)
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
                lambda options: _quotas(
                    clients.regions.get(project=settings.project, region=settings.region, **options)
                ),
                clients,
                budget,
            )
        except (ReadFailedError, api.NotFound) as err:
            findings.append(Finding("unknown", f"{err}; the quotas were not checked"))
        else:
            findings += quota_findings(need, quotas, settings.region, ours)
        if need.reservation is None and settings.tpu.version == "v6e":
            findings += _tpu_quota(settings, need, clients, budget)
        if settings.gke.secrets_key not in (None, "create"):
            findings += _secrets_key(str(settings.gke.secrets_key), clients, budget)
    finally:
        clients.close()
    return findings


KEY = "tpu-rl:gke.secretsEncryptionKey"


def key_findings(name: str, key: dict[str, Any] | None) -> list[Finding]:
    """Whether GKE can encrypt Secrets with the key ``name`` (its fields as read; None: not found)."""
    if key is None:
        return [
            Finding(
                "problem",
                f"{KEY}: key {name} was not found; create it (gcloud kms keys create) or set the key to `create`",
            )
        ]
    found: list[Finding] = []
    if key.get("purpose") != "ENCRYPT_DECRYPT":
        found.append(
            Finding("problem", f"{KEY}: key {name} is for {key.get('purpose')}; GKE needs an ENCRYPT_DECRYPT key")
        )
    if key.get("primary_state") != "ENABLED":
        state = key.get("primary_state") or "no primary version"
        found.append(
            Finding("problem", f"{KEY}: key {name} has {state} as its primary version; GKE needs an enabled one")
        )
    return found


def _secrets_key(name: str, clients: Clients, budget: deadline.Budget) -> list[Finding]:
    from google.api_core import exceptions as api

    try:
        key = _read(
            f"reading Cloud KMS key {name}",
            lambda options: _key_fields(clients.kms.get_crypto_key(name=name, **options)),
            clients,
            budget,
        )
    except api.NotFound:
        return key_findings(name, None)
    except ReadFailedError as err:
        return [Finding("unknown", f"{err}; the Secrets key was not checked")]
    return key_findings(name, key)


def _key_fields(key: Any) -> dict[str, Any]:
    primary = key.primary if "primary" in key else None
    return {
        "purpose": type(key).CryptoKeyPurpose(key.purpose).name,
        "primary_state": type(primary).CryptoKeyVersionState(primary.state).name if primary else None,
    }


def _held(settings: Settings, need: Need, clients: Clients, budget: deadline.Budget, findings: list[Finding]) -> Held:
    """The stack's own node VMs in the zone (a later `up`: what they hold is not needed again)."""
    from google.api_core import exceptions as api

    try:
        instances = _read(
            f"listing the node VMs of cluster {settings.cluster_name}",
            lambda options: [
                {"machine_type": i.machine_type}
                for i in clients.instances.list(
                    request={
                        "project": settings.project,
                        "zone": settings.zone,
                        "filter": f'labels.{CLUSTER_LABEL} = "{settings.cluster_name}"',
                    },
                    **options,
                )
            ],
            clients,
            budget,
        )
    except (ReadFailedError, api.NotFound) as err:
        findings.append(Finding("unknown", f"{err}; VMs this stack already holds are not counted"))
        return Held()
    return held(instances, need.machine_type)


def _tpu_quota(settings: Settings, need: Need, clients: Clients, budget: deadline.Budget) -> list[Finding]:
    from google.api_core import exceptions as api

    quota = tpu_quota_id(need)
    name = f"projects/{settings.project}/locations/global/services/compute.googleapis.com/quotaInfos/{quota}"
    try:
        infos = _read(
            f"reading quota {quota}",
            lambda options: [
                {
                    "dimensions": dict(i.dimensions),
                    "value": i.details.value,
                    "locations": list(i.applicable_locations),
                }
                for i in clients.quotas.get_quota_info(name=name, **options).dimensions_infos
            ],
            clients,
            budget,
        )
    except api.NotFound:
        infos = None
    except ReadFailedError as err:
        return [Finding("unknown", f"{err}; TPU quota was not checked")]
    return tpu_quota_findings(need, infos, settings.region)


def _reservation_fields(reservation: Any) -> dict[str, Any]:
    base = {
        "status": reservation.status or None,
        "specific_reservation_required": bool(reservation.specific_reservation_required),
    }
    if "aggregate_reservation" in reservation:
        aggregate = reservation.aggregate_reservation

        def chips(resources: Any) -> int:
            return sum(int(r.accelerator.accelerator_count) for r in resources)

        return {
            **base,
            "aggregate": True,
            "vm_family": aggregate.vm_family,
            "reserved": chips(aggregate.reserved_resources),
            "in_use": chips(aggregate.in_use_resources),
        }
    specific = reservation.specific_reservation
    return {
        **base,
        "machine_type": specific.instance_properties.machine_type,
        "count": specific.count,
        "in_use_count": specific.in_use_count,
    }


def _quotas(region: Any) -> dict[str, tuple[float, float]] | None:
    if "quota_status_warning" in region or not region.quotas:
        return None  # Compute answers without quotas when it could not read them (regions.get "fails open")
    return {q.metric: (float(q.limit), float(q.usage)) for q in region.quotas}
