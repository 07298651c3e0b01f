"""TPU slice catalogue: which machine types form which slices (plain data, no Pulumi).

Sources: GKE "Plan TPUs in GKE" tables and xpk's ``system_characteristics.py``.
A slice is ``topology`` chips; it needs ``chips / chips_per_vm`` VMs ("hosts").
A single-host slice is what one VM forms on its own; GKE rejects ``tpu_topology``
on such pools, so they get no COMPACT placement policy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class MachineType:
    """One TPU VM shape."""

    name: str
    chips_per_vm: int
    single_host_topology: str
    multi_host_topologies: tuple[str, ...] = ()

    @property
    def topologies(self) -> tuple[str, ...]:
        """Every topology this machine type can form, smallest first."""
        return (self.single_host_topology, *self.multi_host_topologies)

    @property
    def multi_host_capable(self) -> bool:
        return bool(self.multi_host_topologies)


@dataclass(frozen=True)
class TpuVersion:
    """One TPU generation as GKE and Pathways name it."""

    name: str
    gke_accelerator: str
    pathways_type: str
    boot_disk_type: str
    default_machine_type: str
    machine_types: tuple[MachineType, ...]

    def machine(self, name: str | None) -> MachineType | None:
        return next((m for m in self.machine_types if m.name == name), None)


_V6E_V5E_MULTI = ("2x4", "4x4", "4x8", "8x8", "8x16", "16x16")

CATALOGUE: dict[str, TpuVersion] = {
    "v6e": TpuVersion(
        name="v6e",
        gke_accelerator="tpu-v6e-slice",
        pathways_type="tpuv6e",
        boot_disk_type="hyperdisk-balanced",
        default_machine_type="ct6e-standard-4t",
        machine_types=(
            MachineType("ct6e-standard-1t", 1, "1x1"),
            MachineType("ct6e-standard-4t", 4, "2x2", _V6E_V5E_MULTI),
            MachineType("ct6e-standard-8t", 8, "2x4"),
        ),
    ),
    "v5e": TpuVersion(
        name="v5e",
        gke_accelerator="tpu-v5-lite-podslice",
        pathways_type="tpuv5e",
        boot_disk_type="pd-balanced",
        default_machine_type="ct5lp-hightpu-4t",
        machine_types=(
            MachineType("ct5lp-hightpu-1t", 1, "1x1"),
            MachineType("ct5lp-hightpu-4t", 4, "2x2", _V6E_V5E_MULTI),
            MachineType("ct5lp-hightpu-8t", 8, "2x4"),
        ),
    ),
    "v5p": TpuVersion(
        name="v5p",
        gke_accelerator="tpu-v5p-slice",
        pathways_type="tpuv5",
        boot_disk_type="pd-balanced",
        default_machine_type="ct5p-hightpu-4t",
        machine_types=(
            MachineType(
                "ct5p-hightpu-4t",
                4,
                "2x2x1",
                ("2x2x2", "2x2x4", "2x4x4", "4x4x4", "4x4x8", "4x8x8", "8x8x8", "8x8x16"),
            ),
        ),
    ),
}

DEFAULT_VERSION = "v6e"
DEFAULT_TOPOLOGY = {"ct6e-standard-4t": "4x8", "ct5lp-hightpu-4t": "4x8", "ct5p-hightpu-4t": "2x2x4"}


def chips_in(topology: str) -> int:
    """Number of chips in a topology string such as ``4x8`` or ``2x2x4``."""
    return math.prod(int(d) for d in topology.split("x"))


@dataclass(frozen=True)
class SliceShape:
    """A resolved slice: what one TPU node pool is, and what Pathways and pods call it."""

    version: str
    machine_type: str
    topology: str
    chips_per_vm: int
    gke_accelerator: str
    pathways_type: str
    boot_disk_type: str

    @property
    def chips(self) -> int:
        return chips_in(self.topology)

    @property
    def hosts(self) -> int:
        return self.chips // self.chips_per_vm

    @property
    def multi_host(self) -> bool:
        return self.hosts > 1

    @property
    def pathways_instance_type(self) -> str:
        """The resource manager's ``--instance_type``, e.g. ``tpuv6e:4x8``."""
        return f"{self.pathways_type}:{self.topology}"

    @property
    def pool_topology(self) -> str | None:
        """``placement_policy.tpu_topology``: only multi-host pools may set it."""
        return self.topology if self.multi_host else None


def resolve_slice(version: str, machine_type: str, topology: str) -> SliceShape:
    """Build a SliceShape; the caller has validated the combination with ``allowed_topologies``."""
    v = CATALOGUE[version]
    m = v.machine(machine_type)
    if m is None or topology not in m.topologies:
        raise ValueError(f"{machine_type} cannot form {topology}")
    return SliceShape(
        version=version,
        machine_type=machine_type,
        topology=topology,
        chips_per_vm=m.chips_per_vm,
        gke_accelerator=v.gke_accelerator,
        pathways_type=v.pathways_type,
        boot_disk_type=v.boot_disk_type,
    )


def all_slices() -> list[SliceShape]:
    """Every (version, machine type, topology) the catalogue lists."""
    return [resolve_slice(v.name, m.name, t) for v in CATALOGUE.values() for m in v.machine_types for t in m.topologies]


# Flex-start (Dynamic Workload Scheduler) limits, from GKE's "About TPUs in GKE: flex-start" and
# Cluster Toolkit's DWS examples, as of 2026-11: GKE 1.33.0-gke.1712000 or later, and TPU v6e
# flex-start is offered in a few zones only. Extend the table when Google adds zones.
FLEX_START_MIN_GKE = "1.33.0-gke.1712000"
FLEX_START_ZONES = {"v6e": ("asia-northeast1-b", "us-east5-a", "us-east5-b")}
