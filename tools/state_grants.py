"""Who may use a stack's state bucket and key: their IAM policies set by `make state-bucket` (``bucket_policy``,
``key_policy``: the project's convenience members and public members removed, the state's roles granted, read back
and checked), and, once `make state-move` gave a stack a key ring of its own, the grants of those roles taken off
the key it used in the shared ring of earlier versions (``release_old_key``), every other binding left and named.

The policies are read and written at version 3 with their ``etag`` (a concurrent change makes the write fail rather
than be lost: https://cloud.google.com/iam/docs/policies#etag), through google-cloud-storage and google-cloud-kms,
each call bounded.
"""

from __future__ import annotations

import re
from typing import Any

from core.names import PROJECT
from infra.gcp.permissions import state_role
from tools.state_export import StateError

CONVENIENCE = ("projectOwner:", "projectEditor:", "projectViewer:")
PUBLIC = ("allUsers", "allAuthenticatedUsers")
TIMEOUT = (5.0, 20.0)
"""Connect and read timeout of every request, in seconds."""
STACK_LABEL = f"{PROJECT}-stack"
"""The label `make state-bucket` gives a stack's bucket and key, its value the stack's name (``label``)."""


def label(stack: str) -> str:
    """A stack's name as a label value (lowercase letters, digits, '-', '_'; at most 63)."""
    return re.sub(r"[^a-z0-9_-]", "-", stack.lower())[:63]


Bindings = list[tuple[str, list[str], Any]]
"""``(role, members, condition)`` of a policy, in order (a condition as the library gives it, or None)."""


def granted(bindings: Bindings, grants: dict[str, tuple[str, ...]]) -> tuple[Bindings, list[str]]:
    """``bindings`` without any convenience or public member, with ``grants`` (role -> members) added to the
    role's unconditioned binding; and the members removed."""
    removed: list[str] = []
    kept: Bindings = []
    for role, members, condition in bindings:
        gone = [m for m in members if m.startswith(CONVENIENCE) or m in PUBLIC]
        removed += [f"{m} ({role})" for m in gone]
        rest = [m for m in members if m not in gone]
        same = next((b for b in kept if b[0] == role and not b[2]), None) if not condition else None
        if same is not None:
            same[1].extend(m for m in rest if m not in same[1])
        elif rest:
            kept.append((role, rest, condition))
    for role, named in grants.items():
        if not named:
            continue
        target = next((b for b in kept if b[0] == role and not b[2]), None)
        if target is None:
            kept.append((role, list(named), None))
        else:
            target[1].extend(m for m in named if m not in target[1])
    return kept, removed


def policy_problem(where: str, bindings: Bindings, grants: dict[str, tuple[str, ...]]) -> str | None:
    """What the policy read back from ``where`` gets wrong: a convenience or public member, or a named member
    without its role (None: nothing)."""
    for role, members, _ in bindings:
        bad = [m for m in members if m.startswith(CONVENIENCE) or m in PUBLIC]
        if bad:
            return f"the IAM policy read back from {where} still grants {role} to {', '.join(bad)}"
    for role, named in grants.items():
        holders = {m for r, ms, condition in bindings if r == role and not condition for m in ms}
        lacking = [m for m in named if m not in holders]
        if lacking:
            return f"the IAM policy read back from {where} does not grant {role} to {', '.join(lacking)}"
    return None


def bucket_policy(storage: Any, bucket: str, grants: dict[str, tuple[str, ...]]) -> list[str]:
    """Set the bucket's IAM policy (``granted``), read it back and check it."""
    target = storage.bucket(bucket)
    policy = target.get_iam_policy(requested_policy_version=3, timeout=TIMEOUT)
    current = [(b["role"], sorted(b["members"]), b.get("condition")) for b in policy.bindings]
    bindings, removed = granted(current, grants)
    policy.version = 3
    policy.bindings = [{"role": r, "members": set(m), **({"condition": c} if c else {})} for r, m, c in bindings]
    target.set_iam_policy(policy, timeout=TIMEOUT)
    back = target.get_iam_policy(requested_policy_version=3, timeout=TIMEOUT)
    problem = policy_problem(
        f"gs://{bucket}", [(b["role"], sorted(b["members"]), b.get("condition")) for b in back.bindings], grants
    )
    if problem:
        raise StateError(problem)
    return _policy_lines(f"gs://{bucket}", grants, removed, [(b["role"], sorted(b["members"])) for b in back.bindings])


def key_policy(kms: Any, key: str, grants: dict[str, tuple[str, ...]]) -> list[str]:
    """Set the key's IAM policy (``granted``), read it back and check it."""
    from google.iam.v1 import policy_pb2  # type: ignore[import-untyped]

    def read() -> Any:
        return kms.get_iam_policy(
            request={"resource": key, "options": {"requested_policy_version": 3}}, timeout=TIMEOUT[1]
        )

    policy = read()
    current = [(b.role, list(b.members), b.condition if b.HasField("condition") else None) for b in policy.bindings]
    bindings, removed = granted(current, grants)
    new = policy_pb2.Policy(version=3, etag=policy.etag)
    for role, members, condition in bindings:
        new.bindings.add(role=role, members=members, **({"condition": condition} if condition else {}))
    kms.set_iam_policy(request={"resource": key, "policy": new}, timeout=TIMEOUT[1])
    back = read()
    problem = policy_problem(
        f"the key {key}",
        [(b.role, list(b.members), b.condition if b.HasField("condition") else None) for b in back.bindings],
        grants,
    )
    if problem:
        raise StateError(problem)
    return _policy_lines(f"the key {key}", grants, removed, [(b.role, list(b.members)) for b in back.bindings])


def _policy_lines(
    where: str, grants: dict[str, tuple[str, ...]], removed: list[str], back: list[tuple[str, list[str]]]
) -> list[str]:
    """What changed, and who holds the state's roles now (as read back)."""
    gone = sorted({m.split(" (")[0] for m in removed})
    lines = [f"{where}: removed {', '.join(gone)} (project convenience or public members)"] if gone else []
    for role in grants:
        holders = sorted({m for r, members in back if r == role for m in members})
        lines.append(f"{where}: {role}: {', '.join(holders) or 'nobody'}")
    return lines


def _read_key_policy(kms: Any, key: str) -> Any:
    return kms.get_iam_policy(request={"resource": key, "options": {"requested_policy_version": 3}}, timeout=TIMEOUT[1])


def release_old_key(kms: Any, old: str, new: str, stack: str) -> list[str]:
    """Take the grants of the state's two key roles (``roles/cloudkms.cryptoKeyEncrypterDecrypter`` and
    ``roles/cloudkms.cryptoKeyDecrypter``, unconditioned: what `make state-bucket` grants, whoever granted them) off
    ``old``, the key ``stack`` used in the shared ring, once its secrets are encrypted by ``new``; every other binding
    is left. The lines saying what was removed, what was left, and who holds no role on ``new``. Nothing when ``old``
    does not exist; a key another stack's label names is left whole."""
    from google.api_core import exceptions
    from google.iam.v1 import policy_pb2

    try:
        found = kms.get_crypto_key(name=old, timeout=TIMEOUT[1])
    except exceptions.NotFound:
        return []
    owner = dict(found.labels).get(STACK_LABEL)
    if owner and owner != label(stack):
        return [f"the key {old}: left as it is, its label {STACK_LABEL} naming stack {owner}"]
    roles = (state_role("write", "key"), state_role("read", "key"))
    policy = _read_key_policy(kms, old)
    kept = policy_pb2.Policy(version=3, etag=policy.etag)
    removed: dict[str, list[str]] = {}
    left: list[str] = []
    for binding in policy.bindings:
        conditioned = binding.HasField("condition")
        if binding.role in roles and not conditioned:
            removed.setdefault(binding.role, []).extend(binding.members)
            continue
        kept.bindings.add().CopyFrom(binding)
        left.append(f"{binding.role}: {', '.join(sorted(binding.members))}{' (conditioned)' if conditioned else ''}")
    lines = []
    if removed:
        kms.set_iam_policy(request={"resource": old, "policy": kept}, timeout=TIMEOUT[1])
        back = {
            (b.role, m) for b in _read_key_policy(kms, old).bindings if not b.HasField("condition") for m in b.members
        }
        still = sorted(m for role, members in removed.items() for m in members if (role, m) in back)
        if still:
            raise StateError(f"the IAM policy read back from the key {old} still grants {', '.join(still)}")
        for role, members in removed.items():
            lines.append(f"the key {old}: removed {role}: {', '.join(sorted(members))} (stack {stack}'s old key)")
        holders = {m for b in _read_key_policy(kms, new).bindings for m in b.members}
        lacking = sorted({m for members in removed.values() for m in members} - holders)
        if lacking:
            lines.append(
                f"the key {new}: {', '.join(lacking)} hold no role on it: if they still run stack {stack}'s commands, "
                f"grant them with make state-bucket STACK={stack} MEMBERS=... or READERS=..."
            )
    lines += [f"the key {old}: left {binding} (not a grant of make state-bucket)" for binding in left]
    return lines
