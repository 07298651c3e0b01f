"""Values copied from the example stacks that cannot work in a real deployment (checked before `up`)."""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from core.settings import Settings

EXAMPLE_PROJECTS = ("my-tpu-dev-project", "my-tpu-prod-project")
EXAMPLE_RESERVATION = "my-v6e-32-reservation"
DOCUMENTATION_NETWORKS = tuple(ipaddress.IPv4Network(n) for n in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24"))


def placeholder_problems(settings: Settings) -> list[str]:
    """The example stacks' placeholders still present in ``settings``."""
    problems = []
    if settings.project in EXAMPLE_PROJECTS:
        problems.append(f"gcp:project is the example placeholder {settings.project!r}: set your project id")
    if settings.tpu.reservation and settings.tpu.reservation.endswith(f"/{EXAMPLE_RESERVATION}"):
        problems.append(f"tpu-rl:tpu.reservation is the example placeholder {EXAMPLE_RESERVATION!r}")
    for cidr in settings.authorized_networks:
        network = ipaddress.IPv4Network(cidr)  # read_networks admits canonical IPv4 CIDRs only
        if any(network.subnet_of(doc) for doc in DOCUMENTATION_NETWORKS):
            problems.append(f"tpu-rl:authorizedNetworks has the documentation range {cidr}: set the networks you use")
    return problems
