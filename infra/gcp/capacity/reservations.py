"""The reservation (capacity ``reservation``), ``compute_v1.ReservationsClient.get``: it exists in ``gcp:zone`` (a
shared one in its owner project), is *specific* (GKE's ``SPECIFIC_RESERVATION`` affinity consumes only those), is
``READY`` and has every slice free, counting what this stack's cluster already holds (a later ``up``): a
reservation of VMs holds the slice's machine type with its VMs free; an *aggregate* TPU reservation
(``aggregateReservation``, how TPU capacity is often reserved; Cluster Toolkit skips its machine-type check for that
reason) is of the slice's TPU family (its catalogue entry's ``reservation_family``,
``VM_FAMILY_CLOUD_TPU_LITE_POD_SLICE_CT6E`` for v6e) with the slices' chips free."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core import deadline
from core.settings import Settings
from infra.gcp.capacity.findings import Finding
from infra.gcp.capacity.needs import Held, Need
from infra.gcp.capacity.reads import (
    Clients,
    ReadFailedError,
    as_count,
    as_text,
    bounded_read,
    require_field,
    require_name,
)


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


def reservation_reply(message: Any, name: str) -> Reservation:
    """``compute_v1.Reservation`` ``name`` as the check reads it."""
    require_name(message, name)
    status, specific_required = as_text(message.status, "status", 20), bool(message.specific_reservation_required)
    if "aggregate_reservation" in message:
        aggregate = message.aggregate_reservation
        require_field(aggregate, "vm_family", "aggregateReservation.vmFamily")

        def chips(resources: Any, where: str) -> int:
            total = sum(
                as_count(r.accelerator.accelerator_count, f"{where}[{n}].accelerator.acceleratorCount")
                for n, r in enumerate(resources)
            )
            return as_count(total, where)

        return Reservation(
            status=status,
            specific=specific_required,
            aggregate=True,
            vm_family=as_text(aggregate.vm_family, "aggregateReservation.vmFamily", 60),
            count=chips(aggregate.reserved_resources, "aggregateReservation.reservedResources"),
            in_use=chips(aggregate.in_use_resources, "aggregateReservation.inUseResources"),
        )
    require_field(message, "specific_reservation", "specificReservation")
    specific = message.specific_reservation
    require_field(specific, "count", "specificReservation.count")
    require_field(specific, "instance_properties", "specificReservation.instanceProperties")
    require_field(specific.instance_properties, "machine_type", "specificReservation.instanceProperties.machineType")
    return Reservation(
        status=status,
        specific=specific_required,
        aggregate=False,
        machine_type=as_text(specific.instance_properties.machine_type, "instanceProperties.machineType", 60),
        count=as_count(specific.count, "specificReservation.count"),
        in_use=as_count(specific.in_use_count, "specificReservation.inUseCount"),
    )


def check_reservation(
    settings: Settings, need: Need, ours: Held, clients: Clients, budget: deadline.Budget
) -> list[Finding]:
    """The reservation the slices use (``reservation_findings``), read; nothing without one."""
    from google.api_core import exceptions as api

    if need.reservation is None:
        return []
    project, name = need.reservation
    try:
        found = bounded_read(
            f"reading reservation {name}",
            "Compute Engine (reservations.get)",
            lambda options: reservation_reply(
                clients.reservations.get(project=project, zone=settings.zone, reservation=name, **options), name
            ),
            clients,
            budget,
        )
    except api.NotFound:
        return reservation_findings(need, None, settings.zone, ours)
    except ReadFailedError as err:
        return [Finding("unknown", f"{err}; the reservation was not checked")]
    return reservation_findings(need, found, settings.zone, ours)
