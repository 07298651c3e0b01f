"""The zone's offers, ``compute_v1.MachineTypesClient.get``, ``AcceleratorTypesClient.get``,
``DiskTypesClient.get``: each pool's machine and boot disk type, the slice's machine type and its chips' accelerator
type; one line names every type ``gcp:zone`` does not offer. The accelerator type is a second witness of the
slice's machine type, not what GKE is asked for (the TPU pool names the machine type and its topology,
``infra.gcp.gke_spec.tpu_pool_args``; no ``guest_accelerator``): a zone that does not list it while it offers the
machine type is a warning, and a stop only with the machine type (``accelerator_findings``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core import deadline
from core.settings import Settings
from core.tpu import CATALOGUE
from infra.gcp.capacity.findings import Finding
from infra.gcp.capacity.reads import Clients, ReadFailedError, as_count, bounded_read, require_name


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


def accelerator_findings(zone: str, machine: Offer, accelerators: list[Offer], machine_read: bool) -> list[Finding]:
    """Accelerator types ``gcp:zone`` answered NotFound for while the slice's machine type ``machine`` is offered
    (``machine_read``) or could not be read (pure): one warning, never a stop. The TPU pool asks GKE for the machine
    type; a zone that offers it but lists no accelerator type of that name decides nothing about the pool."""
    if not accelerators:
        return []
    listed = ", ".join(f"accelerator type {o.name} ({' / '.join(o.keys)})" for o in accelerators)
    offered = (
        f"it offers machine type {machine.name} ({' / '.join(machine.keys)}), what the TPU pool asks for"
        if machine_read
        else f"machine type {machine.name} ({' / '.join(machine.keys)}) could not be read either"
    )
    return [
        Finding(
            "unknown",
            f"gcp:zone {zone} lists no {listed}: acceleratorTypes.get answered not found; {offered}, so this is "
            f"not a stop; if GKE refuses the TPU pool, set gcp:zone to a zone that offers both "
            f"(gcloud compute accelerator-types list --filter=zone:{zone})",
        )
    ]


def offer_reply(message: Any, name: str) -> int:
    """A zone's ``machineTypes.get`` / ``acceleratorTypes.get`` / ``diskTypes.get`` reply for ``name``: a machine
    type's ``guestCpus`` (0 when absent), 0 for the others."""
    from google.cloud import compute_v1

    require_name(message, name)
    return as_count(message.guest_cpus, "guestCpus") if isinstance(message, compute_v1.MachineType) else 0


def check_offers(
    settings: Settings, clients: Clients, budget: deadline.Budget, findings: list[Finding]
) -> dict[str, int]:
    """Whether ``gcp:zone`` offers each type the stack needs (``offers``): a type it does not is a problem (all in
    one line), but the slices' accelerator type only with their machine type (``accelerator_findings``). Returns
    machine type -> guest CPUs as the zone answered (what the quota check counts)."""
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
            guest_cpus = bounded_read(
                f"reading {offer.kind} {offer.name}", f"Compute Engine ({method})", read, clients, budget
            )
        except api.NotFound:
            missing.append(offer)
        except ReadFailedError as err:
            unread.append((offer, str(err)))
        else:
            if offer.kind == "machine type" and guest_cpus:
                vcpus[offer.name] = guest_cpus
    slice_type = settings.slice.machine_type
    machine = next((o for o in offers(settings) if o.kind == "machine type" and o.name == slice_type), None)
    if machine is not None and machine not in missing:
        covered = [o for o in missing if o.kind == "accelerator type"]
        missing = [o for o in missing if o.kind != "accelerator type"]
        findings += accelerator_findings(settings.zone, machine, covered, all(o != machine for o, _ in unread))
    findings += offer_findings(settings.zone, missing)
    if unread:
        names = ", ".join(f"{o.kind} {o.name}" for o, _ in unread)
        findings.append(Finding("unknown", f"{unread[0][1]}; whether gcp:zone offers {names} was not checked"))
    return vcpus
