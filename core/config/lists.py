"""The list values of a stack file: the networks that may reach the control plane (``tpu-rl:authorizedNetworks``)
and the registries the images may come from (``tpu-rl:images.registries``), each a non-empty list of unique items,
and the stack's own IAM members (``tpu-rl:access.members``, ``.readers``), a list of unique members that may be
empty; each read one by one, every item's problem reported with its index (the ``NETWORKS``, ``REGISTRIES`` and
``IAM_MEMBERS`` markers of ``core.config.formats``, read by ``core.config.load``)."""

from __future__ import annotations

from typing import Any

from core.config.formats import IAM_MEMBER, REGISTRY
from core.config.values import UNREADABLE, Problems, canonical_cidr, error
from core.inputs import InputError, parse_json

MAX_REGISTRIES = 20
MAX_AUTHORIZED_NETWORKS = 50
"""GKE's limit of authorized networks for a cluster with a public endpoint."""
MAX_MEMBERS = 50
"""The most members ``tpu-rl:access.members`` or ``.readers`` lists: a stack's operators and CI principals are a
few; each is granted on the state bucket and key, whose policies hold at most 1,500 principals
(https://cloud.google.com/iam/quotas)."""


def _config_list(
    key: str,
    value: Any,
    *,
    items: str,
    example: str,
    purpose: str,
    limit: int,
    counted: str,
    too_many: str,
    empty: bool = False,
) -> list[Any]:
    """A JSON list (a stack file's YAML list, or the CLI's JSON text) of at most ``limit`` items, non-empty unless
    ``empty``."""
    if isinstance(value, str):
        if value[:1] != "[":
            raise error(key, value, f"a list of {items}, e.g. {example}")
        try:
            value = parse_json(value, "a config value")
        except InputError:
            raise error(key, value, f"malformed JSON; expected a list of {items}") from None
    if not isinstance(value, list) or not (value or empty):
        raise error(key, value, f"a {'' if empty else 'non-empty '}list of {items} {purpose}")
    if len(value) > limit:
        raise error(key, f"{len(value)} {counted}", too_many)
    return value


def read_networks(key: str, value: Any) -> tuple[str, ...]:
    """A non-empty list of unique canonical IPv4 CIDRs, at most GKE's limit."""
    networks = _config_list(
        key,
        value,
        items="CIDRs",
        example='["203.0.113.0/24"]',
        purpose="that may reach the control plane",
        limit=MAX_AUTHORIZED_NETWORKS,
        counted="networks",
        too_many=f"GKE allows at most {MAX_AUTHORIZED_NETWORKS} authorized networks",
    )
    problems = Problems()
    seen: dict[str, int] = {}
    for index, item in enumerate(networks):
        cidr = problems.run(canonical_cidr, f"{key}[{index}]", item)
        if cidr is UNREADABLE:
            continue
        if cidr in seen:
            problems.add(error(f"{key}[{index}]", item, f"duplicate of {key}[{seen[cidr]}]"))
        seen.setdefault(cidr, index)
    problems.check()
    return tuple(networks)


def read_registries(key: str, value: Any) -> tuple[str, ...]:
    """A non-empty list of unique registry paths (host and repository path)."""
    registries = _config_list(
        key,
        value,
        items="registry paths",
        example='["us-docker.pkg.dev/cloud-tpu-images"]',
        purpose="the images may come from",
        limit=MAX_REGISTRIES,
        counted="registries",
        too_many=f"at most {MAX_REGISTRIES}",
    )
    problems = Problems()
    for index, item in enumerate(registries):
        if problems.run(REGISTRY, f"{key}[{index}]", item) is not UNREADABLE and item in registries[:index]:
            problems.add(error(f"{key}[{index}]", item, f"duplicate of {key}[{registries.index(item)}]"))
    problems.check()
    return tuple(registries)


def read_members(key: str, value: Any) -> tuple[str, ...]:
    """A list of unique IAM members (``IAM_MEMBER``), at most ``MAX_MEMBERS``; empty is none."""
    members = _config_list(
        key,
        value,
        items="IAM members",
        example='["user:ops@example.com"]',
        purpose="the stack counts as its own",
        limit=MAX_MEMBERS,
        counted="members",
        too_many=f"at most {MAX_MEMBERS}",
        empty=True,
    )
    problems = Problems()
    seen: dict[str, int] = {}
    for index, item in enumerate(members):
        if problems.run(IAM_MEMBER, f"{key}[{index}]", item) is UNREADABLE:
            continue
        if item.lower() in seen:
            problems.add(error(f"{key}[{index}]", item, f"duplicate of {key}[{seen[item.lower()]}]"))
        seen.setdefault(item.lower(), index)
    problems.check()
    return tuple(members)
