"""vCPU and memory of predefined Compute Engine machine types (plain data, no Pulumi).

Only the regular ``<family>-<class>-<vcpus>`` shapes are known; anything else
(custom or special shapes) returns ``None`` and is not size-checked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# GiB of memory per vCPU for each class; N1 has its own ratios.
_GIB_PER_VCPU = {"standard": 4.0, "highmem": 8.0, "highcpu": 1.0}
_N1_GIB_PER_VCPU = {"standard": 3.75, "highmem": 6.5, "highcpu": 0.9}
_SHAPE = re.compile(r"^(?P<family>[a-z][a-z0-9]*)-(?P<cls>standard|highmem|highcpu)-(?P<vcpus>\d+)$")


@dataclass(frozen=True)
class MachineShape:
    """Size of one machine type."""

    name: str
    vcpus: int
    memory_gib: float


def machine_shape(name: str) -> MachineShape | None:
    """Shape of a predefined machine type such as ``n2-standard-64``, or None if unknown."""
    match = _SHAPE.match(name)
    if not match:
        return None
    vcpus = int(match["vcpus"])
    ratios = _N1_GIB_PER_VCPU if match["family"] == "n1" else _GIB_PER_VCPU
    return MachineShape(name, vcpus, vcpus * ratios[match["cls"]])
