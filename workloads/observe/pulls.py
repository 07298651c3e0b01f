"""The image pulls a pod's kubelet records in its events (kubelet ``pkg/kubelet/images/image_manager.go``
``EnsureImageExists``: ``Successfully pulled image "%s" in %v (%v including waiting). Image size: %v bytes.``, or
``Container image "%s" already present on machine``), read for each attempt's start-up (``workloads.observe.startup``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from infra.k8s.live_objects import Event

_DURATION = re.compile(r"([0-9]+(?:\.[0-9]+)?)(h|ms|m|s|µs|us|ns)")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "µs": 1e-6, "us": 1e-6, "ns": 1e-9}
PULLED = re.compile(
    r'^Successfully pulled image "(?P<image>[^"]{1,500})" in (?P<pull>[0-9.hmsµun]{1,40}) '
    r"\((?P<total>[0-9.hmsµun]{1,40}) including waiting\)(?:\. Image size: (?P<bytes>[0-9]{1,15}) bytes\.)?"
)
PRESENT = re.compile(r'^Container image "(?P<image>[^"]{1,500})" already present on machine')


def go_duration(text: str) -> float | None:
    """Seconds of a Go ``time.Duration`` as ``String()`` prints it (``1m2.345s``, ``850ms``, ``1h0m0s``)."""
    if not text or "".join(m.group(0) for m in _DURATION.finditer(text)) != text:
        return None
    return sum(float(number) * _UNITS[unit] for number, unit in _DURATION.findall(text))


@dataclass(frozen=True)
class Pull:
    """One image a pod's kubelet pulled (or found present), from its ``Pulled`` event."""

    pod: str
    image: str
    seconds: float
    """The pull's time including the wait for the kubelet's pull queue (0 when present)."""
    size: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"pod": self.pod, "image": self.image, "seconds": round(self.seconds, 1), "bytes": self.size}


def pulls(events: Iterable[Event], pods: set[str]) -> list[Pull]:
    """The image pulls the ``Pulled`` events of ``pods`` record."""
    found = []
    for event in events:
        name = event.involved_object.name
        if event.involved_object.kind != "Pod" or name not in pods or event.reason != "Pulled":
            continue
        if match := PULLED.match(event.message):
            seconds = go_duration(match["total"])
            if seconds is not None:
                size = int(match["bytes"]) if match["bytes"] else None
                found.append(Pull(name, match["image"], seconds, size))
        elif match := PRESENT.match(event.message):
            found.append(Pull(name, match["image"], 0.0))
    return sorted(found, key=lambda p: (p.pod, p.image))
