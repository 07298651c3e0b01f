"""Compute Engine machine families: size of predefined shapes and the boot disk each family takes.

Sources: Compute Engine "Machine families resource and comparison guide" and "Hyperdisk"
(supported machine series), as of 2026-11. N4, N4D, C4, C4A, C4D, M4 and X4 take Hyperdisk only:
``pd-balanced`` boot disks and PD-backed storage classes are rejected there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PD_FAMILIES = ("e2", "n1", "n2", "n2d", "c2", "c2d", "c3", "c3d", "t2d", "t2a", "m1", "m2", "m3")
HYPERDISK_FAMILIES = ("n4", "n4d", "c4", "c4a", "c4d", "m4", "x4")

# GiB of memory per vCPU by family and class (standard, highmem, highcpu).
_DEFAULT_RATIOS = {"standard": 4.0, "highmem": 8.0, "highcpu": 1.0}
_RATIOS = {
    "n1": {"standard": 3.75, "highmem": 6.5, "highcpu": 0.9},
    "c4": {"standard": 3.75, "highmem": 7.75, "highcpu": 2.0},
    "c4d": {"standard": 3.875, "highmem": 7.75, "highcpu": 1.875},
    **{
        family: {"standard": 4.0, "highmem": 8.0, "highcpu": 2.0} for family in ("c2d", "c3", "c3d", "c4a", "n4", "n4d")
    },
}
_SHAPE = re.compile(r"(?P<family>[a-z][a-z0-9]*)-(?P<cls>standard|highmem|highcpu)-(?P<vcpus>[0-9]+)")


@dataclass(frozen=True)
class MachineShape:
    """Size of one machine type."""

    name: str
    vcpus: int
    memory_gib: float


def machine_family(name: str) -> str:
    """``n2-standard-64`` -> ``n2``."""
    return name.split("-", 1)[0]


def machine_shape(name: str) -> MachineShape | None:
    """Shape of a predefined machine type such as ``n2-standard-64``, or None if unknown."""
    match = _SHAPE.fullmatch(name)
    if not match:
        return None
    vcpus = int(match["vcpus"])
    ratio = _RATIOS.get(match["family"], _DEFAULT_RATIOS)[match["cls"]]
    return MachineShape(name, vcpus, vcpus * ratio)


def boot_disk_type(name: str) -> str | None:
    """The balanced boot disk this machine's family takes, or None for an unknown family."""
    family = machine_family(name)
    if family in HYPERDISK_FAMILIES:
        return "hyperdisk-balanced"
    if family in PD_FAMILIES:
        return "pd-balanced"
    return None
