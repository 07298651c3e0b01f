"""The closed world's shapes (``closed-world-shapes``): a resource of a type the program creates holds only the property
paths the program sets on that type, in the namespaces the program uses, with the values the program writes where a
value decides access (``core/data/closed-world.json``: ``shapes``, ``namespaces``, ``namespaced``, ``pinned``; written
by ``make closed-world`` from the program's own plans), or what the policy config admits with a reason.

``closed-world`` refuses a type nobody wrote a rule for; this refuses a setting nobody wrote a rule for on a type that
is allowed (a node pool's kubelet port, a pod's ``nodeName`` or ``hostAliases``, a JobSet's ``managedBy``, a value of
a Helm release, a key of a ConfigMap), an object in another namespace (``kube-system``), and an access-deciding value
other than the program's (an RBAC rule, a NetworkPolicy, a Secret's type, a StorageClass's provisioner).

It judges what the program sends, a resource's inputs (``Analyze``), not what the provider answers (a provider adds
defaults and computed outputs to those), so it is a resource validation. At a preview a path is known even when its
value is not: a path not listed is a finding at once; a value not known yet where the program writes an object (its
paths unseen), or at a pinned path, is judged at ``pulumi up``.

The admissions, ``closed-world-shapes.admit`` in the base branch's ``policy/config/<stack>.json``, one thing each with a
non-empty ``reason``: ``{"path": "<type>:<path>"}`` (the path and all under it; ``*`` for any key, ``[]`` for any
item); ``{"namespace": NS}``; ``{"pinned": "<type>:<path>", "value": V}`` (a value of a pinned path; an item of a
``[]`` path). An entry otherwise is a finding and admits nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
)

from core.closed_world import (
    ABSENT,
    FREE,
    ITEMS,
    ClosedWorld,
    fill_value,
    load,
    segment,
    segments,
    value_at,
)
from core.config.formats import CLUSTER_NAME, NAMESPACE
from core.config.schema import FIELDS

from .properties import Unseen, _config, judging, unseen
from .resources import DEPLOYMENT, HELM_RELEASE, Report, _guarded_resource

WORLD: ClosedWorld = load()
DEFAULTS = {f.key: f.default for f in FIELDS if f.key in ("tpu-rl:clusterName", "tpu-rl:namespace")}
SHOWN = 5
"""The paths one finding names at most."""
FIX = "or admit with a reason in the base branch's policy/config/<stack>.json (closed-world-shapes.admit)"
THINGS = ("path", "namespace", "pinned")
NOTHING = "\x00"
"""What a template's name stands for when the configured one is not the stack's own: no value holding it is one."""
NOTHING_IN_JSON = json.dumps(NOTHING)[1:-1]
"""``NOTHING`` as JSON spells it inside a value (``\\u0000``)."""


@dataclass
class Node:
    """A tree of the paths a type takes: each key's, ``FREE``'s and ``ITEMS``' subtree; ``leaf`` when a path ends
    here (a value of any kind may stand here), ``whole`` when everything under it is admitted."""

    children: dict[str, Node] = field(default_factory=dict)
    leaf: bool = False
    whole: bool = False

    def add(self, parts: list[str], whole: bool = False) -> None:
        node = self
        for part in parts:
            node = node.children.setdefault(part, Node())
        node.leaf = True
        node.whole = node.whole or whole

    def child(self, key: str) -> Node | None:
        return self.children.get(key) or self.children.get(FREE)


def _tree(paths: Any) -> Node:
    root = Node(leaf=True)
    for path in paths:
        parts = segments(path)
        if parts is not None:
            root.add(parts)
    return root


TREES = {type_: _tree(paths) for type_, paths in WORLD.shapes.items()}


@dataclass
class Admitted:
    """What the policy config admits, each with a reason."""

    paths: dict[str, list[list[str]]] = field(default_factory=dict)
    namespaces: set[str] = field(default_factory=set)
    values: dict[tuple[str, str], list[Any]] = field(default_factory=dict)


def _typed_path(value: Any) -> tuple[str, str, list[str]] | None:
    """``<type>:<path>`` (the type token is three ``:`` parts) as (type, path, segments); None when malformed."""
    parts = value.split(":", 3) if isinstance(value, str) else []
    if len(parts) != 4 or not all(parts):
        return None
    type_, path = ":".join(parts[:3]), parts[3]
    found = segments(path)
    return (type_, path, found) if found else None


def _entry(entry: dict[str, Any], admitted: Admitted) -> str | None:
    """Admit one well-formed entry; what is wrong with it otherwise."""
    things = [k for k in THINGS if k in entry]
    if len(things) != 1:
        return f"names {' and '.join(things) or 'nothing'}: name one of {', '.join(THINGS)}"
    thing = things[0]
    extra = sorted(set(entry) - {thing, "reason", *(("value",) if thing == "pinned" else ())})
    if extra:
        return f"has {', '.join(map(str, extra))}, which a {thing} entry does not take"
    reason, value = entry.get("reason"), entry[thing]
    if not isinstance(reason, str) or not reason.strip():
        return f"admits the {thing} {value} without a reason: give it a non-empty reason (why the stack needs it)"
    typed = _typed_path(value)
    if thing == "namespace" and isinstance(value, str) and value:
        admitted.namespaces.add(value)
    elif thing == "path" and typed is not None:
        admitted.paths.setdefault(typed[0], []).append(typed[2])
    elif thing == "pinned" and typed is not None and "value" in entry:
        admitted.values.setdefault(typed[:2], []).append(entry["value"])
    else:
        return f"admits a malformed {thing} ({value}): see docs/policies.md (the closed world) for the entry's shape"
    return None


def _admitted(entries: list[Any], report: Report) -> Admitted:
    """The entries of ``closed-world-shapes.admit``: a list, as the policy's schema declares it (the engine refuses
    any other value before the pack runs)."""
    admitted = Admitted()
    for index, entry in enumerate(entries):
        problem = _entry(entry, admitted) if isinstance(entry, dict) else "is not an object"
        if problem is not None:
            report(f"the policy config's closed-world-shapes admit[{index}] {problem}; it admits nothing until fixed")
    return admitted


def names() -> dict[str, str]:
    """What the list's templates stand for: the configuration the engine sends, its defaults when unset. A value
    that is not a name of the stack's own (a ``kube-`` namespace) stands for nothing."""
    cluster = DEPLOYMENT.setting("tpu-rl:clusterName") or DEFAULTS["tpu-rl:clusterName"]
    namespace = DEPLOYMENT.setting("tpu-rl:namespace") or DEFAULTS["tpu-rl:namespace"]
    return {
        "clusterName": cluster if CLUSTER_NAME.matches(cluster) else NOTHING,
        "namespace": namespace if NAMESPACE.matches(namespace) else NOTHING,
    }


def _strays(value: Any, node: Node, path: str, quiet: frozenset[str] = frozenset()) -> Iterator[str]:
    """The paths of ``value`` its tree does not take, each at its first segment the tree lacks. A value not known yet
    where the tree holds more than a leaf is noted (judged at `pulumi up`), but where the program itself sends one
    (``quiet``)."""
    if node.whole:
        return
    if isinstance(value, Unseen):
        if node.children and not node.leaf and path.removeprefix(".") not in quiet:
            unseen(value)
        return
    if isinstance(value, dict) and value:
        for key, item in value.items():
            where = f"{path}{segment(str(key))}"
            child = node.child(str(key))
            if child is None:
                yield where.removeprefix(".")
            else:
                yield from _strays(item, child, where, quiet)
    elif isinstance(value, list) and value:
        child = node.children.get(ITEMS)
        if child is None:
            yield f"{path}[]".removeprefix(".")
            return
        for item in value:
            yield from _strays(item, child, f"{path}[]", quiet)
    elif not node.leaf:
        yield (path or ".").removeprefix(".") or "."


def _paths(args: ResourceValidationArgs, props: dict[str, Any], admitted: Admitted, say: Callable[[str], None]) -> None:
    tree = TREES.get(args.resource_type)
    if tree is None:
        return  # a type the program does not create: closed-world's finding
    extra = Node()
    for parts in admitted.paths.get(args.resource_type, []):
        extra.add(parts, whole=True)
    quiet = WORLD.unknowns.get(args.resource_type, frozenset())
    strays = sorted(p for p in set(_strays(props, tree, "", quiet)) if not _admitted_path(p, extra))
    if strays:
        shown = ", ".join(strays[:SHOWN]) + (f" and {len(strays) - SHOWN} more" if len(strays) > SHOWN else "")
        say(
            f"{args.name}: {shown} {'is not a property' if len(strays) == 1 else 'are not properties'} the program "
            f"sets on {args.resource_type}: remove {'it' if len(strays) == 1 else 'them'}, {FIX}"
        )


def _admitted_path(path: str, extra: Node) -> bool:
    node: Node | None = extra
    for part in segments(path) or ():
        if node is None or node.whole:
            break
        node = node.child(part)
    return node is not None and node.whole


def _namespace(
    args: ResourceValidationArgs, props: dict[str, Any], admitted: Admitted, say: Callable[[str], None]
) -> None:
    type_ = args.resource_type
    if not type_.startswith("kubernetes:"):
        return
    if type_ == HELM_RELEASE:
        where, present, value = "namespace", "namespace" in props, props.get("namespace")
    else:
        metadata = props.get("metadata")
        if unseen(metadata):
            return
        where = "metadata.namespace"
        present = isinstance(metadata, dict) and "namespace" in metadata
        value = metadata.get("namespace") if isinstance(metadata, dict) else None
        if not present and type_ not in WORLD.namespaced:
            return  # a kind the program keeps out of namespaces; a namespace it is given is a stray path
    if unseen(value):
        return
    allowed = {str(n) for n in _filled(WORLD.namespaces)} | admitted.namespaces
    if not present or not isinstance(value, str) or value not in allowed:
        shown = f"namespace {value}" if present else "no namespace (the provider's default)"
        say(
            f"{args.name}: {type_} in {shown} at {where}, not one the program uses ({', '.join(sorted(allowed))}): "
            f"put it in the stack's namespace, {FIX}"
        )


def _pinned(
    args: ResourceValidationArgs, props: dict[str, Any], admitted: Admitted, say: Callable[[str], None]
) -> None:
    type_ = args.resource_type
    for path, values in WORLD.pinned.get(type_, {}).items():
        with judging():
            present, value = value_at(props, path.removesuffix("[]"))
            if present and _holds_unseen(value):
                continue
            allowed = _filled(values) + admitted.values.get((type_, path), [])
            if not present:
                if ABSENT not in values:
                    say(f"{args.name}: {path} of {type_} is unset, and the program always sets it: set it, {FIX}")
                continue
            items = value if path.endswith("[]") and isinstance(value, list) else [value]
            for item in items:
                if item not in allowed:
                    say(
                        f"{args.name}: {path} of {type_} is {json.dumps(item, sort_keys=True)[:300]}, not a value the "
                        f"program writes there: write the program's, {FIX}"
                    )


def _filled(templates: Any) -> list[Any]:
    """The values the templates stand for in the stack's configuration; none for one naming ``NOTHING``."""
    filled = [fill_value(t, names()) for t in templates]
    return [v for v in filled if NOTHING_IN_JSON not in json.dumps(v)]


def _holds_unseen(value: Any) -> bool:
    """Whether a value holds one not known yet, at any depth (each noted as read)."""
    if isinstance(value, dict):
        return any([_holds_unseen(v) for v in value.values()])
    if isinstance(value, list):
        return any([_holds_unseen(v) for v in value])
    return unseen(value)


JUDGES = (_paths, _namespace, _pinned)


def _closed_shapes(args: ResourceValidationArgs, props: dict[str, Any], report: Report) -> None:
    admitted = _admitted(_config(args)["admit"], report)
    for judge in JUDGES:
        with judging():
            judge(args, props, admitted, report)


closed_world_shapes = ResourceValidationPolicy(
    name="closed-world-shapes",
    description=(
        "A resource of a type the program creates holds only the property paths it sets, in its namespaces, with its "
        "values where they decide access (core/data/closed-world.json), or what the policy config admits with a reason."
    ),
    severity=Severity.CRITICAL,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps=(
        "Remove the property, namespace or value the program does not write, or admit it with a reason in the base "
        "branch's policy/config/<stack>.json (closed-world-shapes.admit); after a change to the program, run "
        "`make closed-world`."
    ),
    config_schema=PolicyConfigSchema(properties={"admit": {"type": "array", "default": []}}),
    validate=_guarded_resource(_closed_shapes),
)
