"""Kubernetes resource quantities, what a pod asks the scheduler and Kueue for, and what a GKE node can give: the
numbers a ClusterQueue's quota and a pool's size must agree on (plain functions).

- A pod's request is the scheduler's formula, which Kueue uses as is (Kueue 0.17.1
  ``pkg/workload/workload.go`` ``totalRequestsFromPodSets`` -> ``k8s.io/component-helpers/resource``
  ``PodRequests``): the sum of its containers plus its native sidecars (init containers with
  ``restartPolicy: Always``), or the largest other init container if that is more; a container with a
  limit but no request requests its limit (Kueue ``UseLimitsAsMissingRequestsInPod``).
- A node's allocatable is its capacity minus what GKE reserves for the kubelet and system daemons and
  the eviction threshold (GKE "Standard cluster architecture", node allocatable resources: CPU 6 % of
  the first core, 1 % of the second, 0.5 % of the next two, 0.25 % of the rest; memory 25 % of the
  first 4 GiB, 20 % of the next 4, 10 % of the next 8, 6 % of the next 112, 2 % of the rest, plus
  100 MiB).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from core.machines import MachineShape

_QUANTITY = re.compile(
    r"(?P<number>[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE](?P<exponent>[+-]?[0-9]+))?"
)
"""apimachinery's ``resource.ParseQuantity`` (``pkg/api/resource/quantity.go``): a signed decimal number (``1``,
``1.5``, ``1.``, ``.5``), then a binary SI suffix (``Ki`` to ``Ei``), a decimal SI one (``n``, ``u``, ``m``, none,
``k`` to ``E``; ``E`` alone is exa) or a decimal exponent (``e``/``E`` and a signed integer: ``1.8e11``). No space,
nothing else: ``100GB``, ``1K``, ``1e`` and ``12 Gi`` are refused as the API server refuses them."""
_FACTORS = {
    None: Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}
_MAX_EXPONENT = 400
"""A decimal exponent beyond this is refused here (apimachinery truncates it to 32 bits; no real quantity has one)."""


def quantity(text: Any) -> float:
    """A Kubernetes quantity (``"16"``, ``"500m"``, ``"128Gi"``, ``"1.8e11"``) as a number of units (cores, bytes,
    chips); a JSON number (an ``int`` or a finite ``float``, as a manifest may give one) is read as its decimal
    text, the way ``Quantity.UnmarshalJSON`` does. Anything else raises ``ValueError`` (``not a Kubernetes
    quantity``), never another exception. A negative quantity parses (the API server's validation of requests,
    limits and quotas refuses it; the caller checks)."""
    if isinstance(text, bool) or not isinstance(text, (str, int, float)):
        raise ValueError(f"not a Kubernetes quantity: {text!r}")
    if isinstance(text, float) and not math.isfinite(text):
        raise ValueError(f"not a Kubernetes quantity: {text!r}")
    match = _QUANTITY.fullmatch(text if isinstance(text, str) else repr(text))
    if not match:
        raise ValueError(f"not a Kubernetes quantity: {text!r}")
    number = Decimal(match["number"])
    if match["exponent"] is not None:
        exponent = int(match["exponent"])
        if abs(exponent) > _MAX_EXPONENT:
            raise ValueError(f"not a Kubernetes quantity: {text!r} (exponent out of range)")
        return float(number.scaleb(exponent))
    return float(number * _FACTORS[match["suffix"]])


DECIMAL_SUFFIXES = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
BINARY_SUFFIXES = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")


def canonical_millis(millis: int) -> str:
    """``millis`` thousandths of a unit as the API server writes a decimal quantity back (apimachinery v0.34.4
    ``amount.go`` ``int64Amount.AsCanonicalBytes``: every factor of 10 moved into the exponent, then the exponent
    lowered to a multiple of 3; ``quantity.go`` ``CanonicalizeBytes``): 64000 is ``64``, 62500 ``62500m``, 2000000
    ``2k``. A quota written otherwise reads back otherwise (Kueue's conversion webhook re-encodes a ClusterQueue), and
    every preview would show a change."""
    if millis == 0:
        return "0"
    amount, exponent = millis, -3
    while amount % 10 == 0:
        amount, exponent = amount // 10, exponent + 1
    while exponent % 3:
        amount, exponent = amount * 10, exponent - 1
    return f"{amount}{DECIMAL_SUFFIXES[exponent]}"


def canonical_bytes(count: int) -> str:
    """``count`` bytes as the API server writes a binary quantity back (``CanonicalizeBytes``: under 1024 as a decimal
    one; else every factor of 1024 into the suffix, ``int64Amount.AsCanonicalBase1024Bytes``): 2**39 is ``512Gi``,
    1536 MiB ``1536Mi``."""
    if abs(count) < 1024:
        return canonical_millis(count * 1000)
    amount, exponent = count, 0
    while amount % 1024 == 0 and exponent < len(BINARY_SUFFIXES) - 1:
        amount, exponent = amount // 1024, exponent + 1
    return f"{amount}{BINARY_SUFFIXES[exponent]}"


def _add(total: dict[str, float], amounts: Mapping[str, float]) -> None:
    for name, amount in amounts.items():
        total[name] = total.get(name, 0.0) + amount


def container_requests(container: Mapping[str, Any]) -> dict[str, float]:
    """What one container requests: its requests, and its limits where it has no request."""
    resources = container.get("resources") or {}
    asked = {name: quantity(value) for name, value in (resources.get("limits") or {}).items()}
    asked.update({name: quantity(value) for name, value in (resources.get("requests") or {}).items()})
    return asked


def pod_requests(pod: Mapping[str, Any]) -> dict[str, float]:
    """What one pod requests: its containers plus its native sidecars, or, if more, what the pod needs
    while an init container runs (that container plus the sidecars started before it)."""
    running: dict[str, float] = {}
    for container in pod.get("containers") or []:
        _add(running, container_requests(container))
    sidecars: dict[str, float] = {}
    starting: dict[str, float] = {}
    for init in pod.get("initContainers") or []:
        asked = container_requests(init)
        if init.get("restartPolicy") == "Always":  # a native sidecar: runs for the rest of the pod's life
            _add(sidecars, asked)
            during = dict(sidecars)
        else:
            during = dict(sidecars)
            _add(during, asked)
        for name, amount in during.items():
            starting[name] = max(starting.get(name, 0.0), amount)
    _add(running, sidecars)
    needed = {name: max(running.get(name, 0.0), starting.get(name, 0.0)) for name in set(running) | set(starting)}
    return {name: amount for name, amount in sorted(needed.items()) if amount}


def _tiers(amount: float, tiers: tuple[tuple[float, float], ...], rest: float) -> float:
    reserved, left = 0.0, amount
    for size, share in tiers:
        part = min(left, size)
        reserved += part * share
        left -= part
    return reserved + left * rest


def allocatable(shape: MachineShape) -> dict[str, float]:
    """What a GKE node of this shape offers pods: cores and bytes of memory (GKE's reservations)."""
    cpu = shape.vcpus - _tiers(shape.vcpus, ((1, 0.06), (1, 0.01), (2, 0.005)), 0.0025)
    gib = shape.memory_gib - _tiers(shape.memory_gib, ((4, 0.25), (4, 0.20), (8, 0.10), (112, 0.06)), 0.02)
    return {"cpu": cpu, "memory": gib * 2**30 - 100 * 2**20}
