"""What `make audit` judges, as plain values (no network; ``tools/audit.py`` reads the world into them).

An IAM policy's bindings are parsed once, where a reply is read (``bindings_of``); the question of each target (a
permission set on a resource, e.g. "decrypt the state key") is answered over the chain of policies that apply to
it, outermost first: a project's bindings apply to every bucket, key ring, key and service account in it, a ring's
to its keys (https://cloud.google.com/iam/docs/resource-hierarchy-access-control, and the Cloud KMS and Cloud
Storage pages each names). A binding's condition is evaluated on the resource's name where the service recognizes
resource attributes (Cloud Storage and Cloud KMS: https://cloud.google.com/iam/docs/conditions-resource-attributes)
and the expression is one this module parses (``resource.name``/``type``/``service`` with ``startsWith``,
``endsWith``, ``==``, ``!=``, ``!``, ``&&``, ``||`` and parentheses); any other condition is reported as
"conditional, not evaluated", never dropped.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from core.errors import TpuRlError
from core.redact import scrub
from infra.gcp.capacity.reads import ReplyError

MAX_BINDINGS = 1500
"""IAM allows at most 1,500 principals in a policy (https://cloud.google.com/iam/quotas), so at most as many
bindings."""
MAX_PERMISSIONS = 20000
"""A role holds at most a few thousand permissions (roles/owner: about 10,000)."""


class ReplyShapeError(ReplyError):
    """A reply of another shape than the audit reads: one line naming the source and the field (``bounded_read``
    makes it the read's one line)."""


# ---------------------------------------------------------------------------------------------
# Policies and roles, parsed where read


@dataclass(frozen=True)
class Binding:
    role: str
    members: tuple[str, ...]
    condition: str
    """The condition's expression ("" for none)."""


@dataclass(frozen=True)
class Node:
    """A project or folder as Resource Manager's ``projects.get``/``folders.get`` names it."""

    number: str
    """A project's number ("" for a folder)."""
    parent: str
    """``folders/<id>`` or ``organizations/<id>`` ("" for none)."""
    project_id: str = ""
    """A project's id ("" for a folder, or a reply that names none)."""


@dataclass(frozen=True)
class Policy:
    """One resource's IAM policy: ``where`` names it in a finding (``project P``, ``gs://B``...)."""

    where: str
    bindings: tuple[Binding, ...]


def _text(value: Any, where: str, limit: int = 400) -> str:
    if not isinstance(value, str):
        raise ReplyShapeError(f"{where} is {type(value).__name__}, not text")
    return value if len(value) <= limit else scrub(value, limit=limit)


def _list(value: Any, where: str, limit: int) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ReplyShapeError(f"{where} is {type(value).__name__}, not a list")
    if len(value) > limit:
        raise ReplyShapeError(f"{where} has {len(value)} entries, more than {limit}")
    return value


def bindings_of(reply: Any, source: str) -> tuple[Binding, ...]:
    """An IAM policy's bindings (``google.iam.v1.Policy`` JSON, as Resource Manager, Cloud KMS, IAM and Cloud Storage
    answer ``getIamPolicy``); ``ReplyShapeError`` naming ``source`` and the field otherwise."""
    if not isinstance(reply, dict):
        raise ReplyShapeError(f"{source}: the policy is not a JSON object")
    found = []
    for n, entry in enumerate(_list(reply.get("bindings"), f"{source}: bindings", MAX_BINDINGS)):
        where = f"{source}: bindings[{n}]"
        if not isinstance(entry, dict):
            raise ReplyShapeError(f"{where} is not an object")
        members = tuple(_text(m, f"{where}.members") for m in _list(entry.get("members"), f"{where}.members", 1500))
        condition = entry.get("condition") or {}
        if not isinstance(condition, dict):
            raise ReplyShapeError(f"{where}.condition is not an object")
        expression = _text(condition.get("expression", ""), f"{where}.condition.expression", 12800)
        found.append(Binding(_text(entry.get("role"), f"{where}.role", 200), members, expression))
    return tuple(found)


def permissions_of(reply: Any, role: str) -> frozenset[str]:
    """IAM ``roles.get``'s ``includedPermissions`` (``ReplyShapeError`` otherwise)."""
    if not isinstance(reply, dict):
        raise ReplyShapeError(f"the role {role}: the reply is not a JSON object")
    listed = _list(reply.get("includedPermissions"), f"the role {role}: includedPermissions", MAX_PERMISSIONS)
    return frozenset(_text(p, f"the role {role}: includedPermissions", 200) for p in listed)


# ---------------------------------------------------------------------------------------------
# Conditions


@dataclass(frozen=True)
class Resource:
    """A resource as a condition sees it (``resource.name``, ``.type``, ``.service``)."""

    name: str
    type: str
    service: str


Test = Callable[[Resource], bool]
_TOKEN = re.compile(
    r"""\s*(?:(?P<op>&&|\|\||==|!=|!|\(|\)|,)|(?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')|(?P<id>[A-Za-z_][\w.]*))"""
)
_ATTRIBUTES = {"resource.name": "name", "resource.type": "type", "resource.service": "service"}
_METHODS: dict[str, Callable[[str, str], bool]] = {
    "startsWith": str.startswith,
    "endsWith": str.endswith,
}


class _UnparsedError(TpuRlError):
    """An expression this module does not evaluate (caught here: ``condition_test`` answers None)."""


def _tokens(expression: str) -> list[tuple[str, str]]:
    found, at = [], 0
    text = expression.rstrip()
    while at < len(text):
        match = _TOKEN.match(text, at)
        if match is None or match.end() == at:
            raise _UnparsedError
        kind = match.lastgroup or ""
        value = match.group(kind)
        found.append((kind, value[1:-1].replace('\\"', '"').replace("\\'", "'") if kind == "str" else value))
        at = match.end()
    return found


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens = tokens
        self.at = 0

    def peek(self) -> tuple[str, str]:
        return self.tokens[self.at] if self.at < len(self.tokens) else ("end", "")

    def take(self, kind: str, value: str | None = None) -> str:
        found = self.peek()
        if found[0] != kind or (value is not None and found[1] != value):
            raise _UnparsedError
        self.at += 1
        return found[1]

    def either(self) -> Test:
        left = self.both()
        while self.peek() == ("op", "||"):
            self.at += 1
            right = self.both()
            left = (lambda a, b: lambda r: a(r) or b(r))(left, right)
        return left

    def both(self) -> Test:
        left = self.unary()
        while self.peek() == ("op", "&&"):
            self.at += 1
            right = self.unary()
            left = (lambda a, b: lambda r: a(r) and b(r))(left, right)
        return left

    def unary(self) -> Test:
        if self.peek() == ("op", "!"):
            self.at += 1
            inner = self.unary()
            return lambda r: not inner(r)
        if self.peek() == ("op", "("):
            self.at += 1
            inner = self.either()
            self.take("op", ")")
            return inner
        return self.atom()

    def atom(self) -> Test:
        name = self.take("id")
        head, _, method = name.rpartition(".")
        if head in _ATTRIBUTES and method in _METHODS:
            self.take("op", "(")
            text = self.take("str")
            self.take("op", ")")
            field, test = _ATTRIBUTES[head], _METHODS[method]
            return lambda r: test(getattr(r, field), text)
        if name in _ATTRIBUTES and self.peek()[0] == "op" and self.peek()[1] in ("==", "!="):
            equal = self.take("op") == "=="
            text, field = self.take("str"), _ATTRIBUTES[name]
            return lambda r: (getattr(r, field) == text) == equal
        raise _UnparsedError


def condition_test(expression: str) -> Test | None:
    """A test of the resource for ``expression``; None when it is not one this module evaluates."""
    try:
        parser = _Parser(_tokens(expression))
        test = parser.either()
        parser.take("end")
    except (_UnparsedError, RecursionError):
        return None
    return test


# ---------------------------------------------------------------------------------------------
# Who reaches what


@dataclass(frozen=True)
class Target:
    """A question the audit asks: who holds any of ``permissions`` on a resource, through the ``chain`` of policies
    that apply to it (outermost first), tried on each of ``resources`` (a state's objects: any one is enough)."""

    can: str
    """What holding it means, e.g. ``decrypt stack prod's state key``."""
    permissions: frozenset[str]
    chain: tuple[Policy, ...]
    resources: tuple[Resource, ...]
    evaluable: bool = True
    """Whether the resource's service recognizes resource attributes (Cloud Storage, Cloud KMS): only then are
    conditions evaluated."""


@dataclass(frozen=True)
class Reach:
    """A member that can do ``can``, through ``via`` (a role on a resource, or an RBAC binding)."""

    member: str
    can: str
    via: str


CONVENIENCE = {"projectOwner:": "roles/owner", "projectEditor:": "roles/editor", "projectViewer:": "roles/viewer"}
"""Cloud Storage's convenience members: every holder of the project's basic role
(https://cloud.google.com/storage/docs/access-control/iam#convenience-values)."""
AGENT = re.compile(
    r"serviceAccount:(service-\d+@[a-z0-9-]+\.iam\.gserviceaccount\.com|\d+@cloudservices\.gserviceaccount\.com)"
)
"""Google-managed service agents (https://cloud.google.com/iam/docs/service-agents): Google's services acting in the
project, with no key and no way for a principal to act as them."""


def expand(member: str, basic: Mapping[str, tuple[str, ...]]) -> tuple[str, ...]:
    """A member as the principals it stands for: a convenience member is every holder of its basic role on the
    project (``basic``: role -> members); a deleted principal is none."""
    for prefix, role in CONVENIENCE.items():
        if member.startswith(prefix):
            return basic.get(role, ())
    if member.startswith("deleted:"):
        return ()
    return (member,)


def reaches(
    target: Target,
    permissions: Callable[[str], frozenset[str] | None],
    own: frozenset[str],
    basic: Mapping[str, tuple[str, ...]],
) -> tuple[list[Reach], list[tuple[str, str]]]:
    """Every member outside ``own`` that holds any of the target's permissions, and the roles whose contents could
    not be read ``(role, where)``. ``permissions(role)``: the role's permissions (None: not read)."""
    found: list[Reach] = []
    unread: list[tuple[str, str]] = []
    for policy in target.chain:
        for binding in policy.bindings:
            outsiders = [m for member in binding.members for m in expand(member, basic) if _outside(m, own)]
            if not outsiders:
                continue
            held = permissions(binding.role)
            if held is None:
                unread.append((binding.role, policy.where))
                continue
            if not held & target.permissions:
                continue
            via = f"{binding.role} on {policy.where}"
            if binding.condition:
                test = condition_test(binding.condition) if target.evaluable else None
                if test is None:
                    via += f", conditional, not evaluated: {scrub(binding.condition, limit=200)}"
                elif not any(test(r) for r in target.resources):
                    continue
            found += [Reach(m, target.can, via) for m in dict.fromkeys(outsiders)]
    return found, unread


def _outside(member: str, own: frozenset[str]) -> bool:
    return member.lower() not in own and not AGENT.fullmatch(member)


def lines(found: Iterable[Reach]) -> list[str]:
    """One line per member and grant: everything that grant lets the member do."""
    grouped: dict[tuple[str, str], list[str]] = {}
    for reach in found:
        cans = grouped.setdefault((reach.member, reach.via), [])
        if reach.can not in cans:
            cans.append(reach.can)
    return [f"{scrub(member, limit=200)} can {_joined(cans)} ({via})" for (member, via), cans in grouped.items()]


VERBS = ("set IAM on ", "mint tokens of ")
"""A capability's words a following one of the same verb leaves out (``set IAM on A and B``)."""


def _joined(items: list[str]) -> str:
    shown = [
        item.removeprefix(verb)
        if n and (verb := next((v for v in VERBS if item.startswith(v)), "")) and items[n - 1].startswith(verb)
        else item
        for n, item in enumerate(items)
    ]
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} and {shown[-1]}"


# ---------------------------------------------------------------------------------------------
# The cluster's RBAC


ADMIN_ROLES = ("cluster-admin", "admin", "edit")
"""Kubernetes' user-facing roles that reach Secrets (https://kubernetes.io/docs/reference/access-authn-authz/rbac/
#user-facing-roles: ``edit`` "allows read/write access to most objects in a namespace", Secrets included)."""
SECRET_VERBS = {"get", "list", "watch", "*"}


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def rules_reach_secrets(rules: Any) -> bool:
    """Whether a role's ``rules`` read Secrets or grant everything."""
    for rule in rules if isinstance(rules, list) else []:
        if not isinstance(rule, dict):
            continue
        groups, resources, verbs = (_strings(rule.get(k)) for k in ("apiGroups", "resources", "verbs"))
        core = "" in groups or "*" in groups
        if core and {"secrets", "*"} & set(resources) and SECRET_VERBS & set(verbs):
            return True
        if "*" in resources and "*" in verbs:
            return True
    return False


def subject_member(subject: Any) -> str | None:
    """The IAM member an RBAC subject names (GKE authenticates Google identities by email): a User or Group with an
    email; None for a Kubernetes service account, a ``system:`` user or group, or anything else."""
    if not isinstance(subject, dict) or subject.get("kind") not in ("User", "Group"):
        return None
    name = subject.get("name")
    if not isinstance(name, str) or name.startswith("system:") or "@" not in name:
        return None
    if subject["kind"] == "Group":
        return f"group:{name}"
    return f"serviceAccount:{name}" if name.endswith(".gserviceaccount.com") else f"user:{name}"


def rbac_reaches(
    bindings: Iterable[Any], roles: Mapping[tuple[str, str], Any], cluster: str, own: frozenset[str]
) -> list[Reach]:
    """Members outside ``own`` that ClusterRoleBindings or RoleBindings (each as the API serves it) bind to a role
    that administers the cluster or reads its Secrets. ``roles``: ``(kind, namespace/name)`` -> the role's rules."""
    found = []
    for binding in bindings:
        if not isinstance(binding, dict):
            continue
        kind = binding.get("kind") or "RoleBinding"
        meta, ref = _object(binding.get("metadata")), _object(binding.get("roleRef"))
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "?")
        ref_kind, ref_name = str(ref.get("kind") or ""), str(ref.get("name") or "")
        rules = roles.get((ref_kind, f"{namespace}/{ref_name}" if ref_kind == "Role" else ref_name))
        if ref_name not in ADMIN_ROLES and not rules_reach_secrets(rules):
            continue
        where = f"{kind} {namespace + '/' if namespace else ''}{name}"
        via = scrub(f"RBAC: {where} binds {ref_kind} {ref_name}", limit=200)
        for subject in binding.get("subjects") or []:
            member = subject_member(subject)
            if member and _outside(member, own):
                found.append(Reach(member, f"administer cluster {cluster}", via))
    return found
