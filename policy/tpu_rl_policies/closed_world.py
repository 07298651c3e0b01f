"""A closed world (``closed-world``): a stack holds only the resource types, Kubernetes kinds, IAM roles (per grant
type), RBAC subjects and image repositories the program creates, as ``core/data/closed-world.json`` lists them
(written by ``make closed-world`` from the program's own plans), or what the policy config admits with a reason.

The other policies name what is bad; this one names what is allowed, so a kind of resource no rule was written for
(a Cloud Run service, a bucket ACL, a service account key, a fleet RBAC binding) is refused, not passed unjudged. An
admitted thing is then judged by the other policies as before. The admissions come from the policy config, which CI
takes from the base commit (docs/guardrails.md), never from the pull request's stack file: the stack's configuration
moves only what the list reads as templates (``tpu-rl:clusterName`` and ``tpu-rl:namespace`` in a subject's name and
namespace) and an image's tag or digest, and its mirrors serve their upstreams' repositories.

The admissions, ``closed-world.admit`` in ``policy/config/<stack>.json``, one thing each with a non-empty ``reason``:
``{"type": TOKEN}``; ``{"apiVersion": V, "kind": K}`` (the kind and the type token that creates it,
``kubernetes:<group>/<version>:<Kind>``); ``{"role": ROLE}``, optionally with ``"grantType": TOKEN``;
``{"subject": {"kind": K, "namespace": NS, "name": N}}``; ``{"image": REPOSITORY}`` (no tag or digest). An entry
otherwise is a finding and admits nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)

from core.closed_world import (
    ClosedWorld,
    fill,
    images_in,
    load,
    mirror_path,
    repository,
    roles_of,
    served,
    upstream_path,
    upstream_uri,
)
from core.config.formats import CLUSTER_NAME, NAMESPACE
from core.config.schema import FIELDS
from core.iam_types import grant_kind

from .grants import REPOSITORY
from .properties import _config, _l, _m, judging, unseen
from .resources import CLUSTER, DEPLOYMENT, Report, Resource, _guarded_stack
from .resources import NAMESPACE as NAMESPACE_TYPE

WORLD: ClosedWorld = load()
DEFAULTS = {f.key: f.default for f in FIELDS if f.key in ("tpu-rl:clusterName", "tpu-rl:namespace")}
THINGS = ("type", "kind", "role", "subject", "image")
QUALIFIERS = {"kind": ("apiVersion",), "role": ("grantType",)}


@dataclass
class Admitted:
    """What the policy config admits, each with a reason."""

    types: set[str] = field(default_factory=set)
    kinds: set[tuple[str, str]] = field(default_factory=set)
    roles: set[tuple[str | None, str]] = field(default_factory=set)
    """(grant type, or None for any), role."""
    subjects: set[tuple[str, str, str]] = field(default_factory=set)
    """(kind, namespace or "", name)."""
    images: set[str] = field(default_factory=set)


def kind_type(api_version: str, kind: str) -> str:
    """The type token of a Kubernetes kind (``v1`` is the ``core`` group's)."""
    group_version = api_version if "/" in api_version else f"core/{api_version}"
    return f"kubernetes:{group_version}:{kind}"


def _text(value: Any) -> bool:
    return isinstance(value, str) and value != ""


def _entry(entry: dict[str, Any], admitted: Admitted) -> str | None:
    """Admit one well-formed entry; what is wrong with it otherwise."""
    things = [k for k in THINGS if k in entry]
    if len(things) != 1:
        return f"names {' and '.join(things) or 'nothing'}: name one of {', '.join(THINGS)}"
    thing = things[0]
    extra = sorted(set(entry) - {thing, "reason", *QUALIFIERS.get(thing, ())})
    if extra:
        return f"has {', '.join(map(str, extra))}, which a {thing} entry does not take"
    reason = entry.get("reason")
    value = entry[thing]
    if not isinstance(reason, str) or not reason.strip():
        return f"admits the {thing} {value} without a reason: give it a non-empty reason (why the stack needs it)"
    if thing == "type" and _text(value):
        admitted.types.add(value)
    elif thing == "kind" and _text(value) and _text(entry.get("apiVersion")):
        admitted.kinds.add((entry["apiVersion"], value))
        admitted.types.add(kind_type(entry["apiVersion"], value))
    elif thing == "role" and _text(value) and (_text(entry.get("grantType")) or "grantType" not in entry):
        admitted.roles.add((entry.get("grantType"), value))
    elif thing == "subject" and isinstance(value, dict) and _text(value.get("kind")) and _text(value.get("name")):
        namespace = value.get("namespace", "")
        if not isinstance(namespace, str) or set(value) - {"kind", "namespace", "name"}:
            return f"admits a subject other than {{kind, namespace, name}} texts ({value})"
        admitted.subjects.add((value["kind"], namespace, value["name"]))
    elif thing == "image" and _text(value):
        if repository(value) != value:
            return f"admits the image {value} with a tag or digest: admit its repository, {repository(value)}"
        admitted.images.add(value)
    else:
        return f"admits a malformed {thing} ({value}): see docs/guardrails.md for the entry's shape"
    return None


def _admitted(entries: list[Any], report: Report) -> Admitted:
    """The entries of ``closed-world.admit``: a list, as the policy's schema declares it (the engine refuses any other
    value before the pack runs)."""
    admitted = Admitted()
    for index, entry in enumerate(entries):
        problem = _entry(entry, admitted) if isinstance(entry, dict) else "is not an object"
        if problem is not None:
            report(f"the policy config's closed-world admit[{index}] {problem}; it admits nothing until fixed")
    return admitted


def _names(resources: list[Resource]) -> list[dict[str, str]]:
    """The values the list's templates stand for: the configuration the engine sends (``tpu-rl:clusterName``,
    ``tpu-rl:namespace``, their defaults when unset), or, when it sends none, the stack's cluster and namespaces.
    A value that is not a name of the stack's own (a ``kube-`` namespace...) stands for nothing."""
    if DEPLOYMENT.config:
        clusters = [DEPLOYMENT.setting("tpu-rl:clusterName") or DEFAULTS["tpu-rl:clusterName"]]
        namespaces = [DEPLOYMENT.setting("tpu-rl:namespace") or DEFAULTS["tpu-rl:namespace"]]
    else:
        clusters = [r.props.get("name") for r in resources if r.resource_type == CLUSTER]
        namespaces = [_m(r.props.get("metadata")).get("name") for r in resources if r.resource_type == NAMESPACE_TYPE]
    clusters = [c for c in clusters if isinstance(c, str) and CLUSTER_NAME.matches(c)]
    namespaces = [n for n in namespaces if isinstance(n, str) and NAMESPACE.matches(n)]
    return [{"clusterName": c, "namespace": n} for c in clusters for n in namespaces]


def _mirrors(resources: list[Resource]) -> tuple[dict[str, str], bool]:
    """The stack's remote repositories: path -> upstream path; and whether one is not known yet (noted as read)."""
    mirrors: dict[str, str] = {}
    pending = False
    for r in resources:
        if r.resource_type != REPOSITORY:
            continue
        props = r.props
        mode, location, project, repository_id, remote = (
            props.get(k) for k in ("mode", "location", "project", "repositoryId", "remoteRepositoryConfig")
        )
        uri = upstream_uri(remote if isinstance(remote, dict) else {})
        if any([unseen(v) for v in (mode, location, project, repository_id, remote, uri)]):
            pending = True
        elif (
            mode == "REMOTE_REPOSITORY"
            and isinstance(location, str)
            and isinstance(project, str)
            and isinstance(repository_id, str)
            and isinstance(uri, str)
        ):
            mirrors[mirror_path(location, project, repository_id)] = upstream_path(uri)
    return mirrors, pending


@dataclass
class _Stack:
    """What judging one resource needs: the list, the admissions, the stack's names and mirrors, and the fix."""

    admitted: Admitted
    names: list[dict[str, str]]
    mirrors: dict[str, str]
    pending: bool
    fix: str


def _closed_world(args: StackValidationArgs, resources: list[Resource], report: Report) -> None:
    admitted = _admitted(_config(args)["admit"], report)
    fix = "remove it, or admit it with a reason in the base branch's policy/config/<stack>.json (closed-world.admit)"
    with judging():
        mirrors, pending = _mirrors(resources)
    world = _Stack(admitted, _names(resources), mirrors, pending, fix)
    for r in resources:

        def say(message: str, urn: str = r.urn) -> None:
            report(message, urn)

        for judge in JUDGES:
            with judging():
                judge(r, world, say)


def _type(r: Resource, stack: _Stack, say: Callable[[str], None]) -> None:
    if r.resource_type not in WORLD.types and r.resource_type not in stack.admitted.types:
        say(f"{r.name}: resource type {r.resource_type} is not one the program creates: {stack.fix}")


def _kind(r: Resource, stack: _Stack, say: Callable[[str], None]) -> None:
    if not r.resource_type.startswith("kubernetes:") or not ("apiVersion" in r.props or "kind" in r.props):
        return
    api, kind = r.props.get("apiVersion"), r.props.get("kind")
    if unseen(api) or unseen(kind):
        return
    if not (isinstance(api, str) and isinstance(kind, str)):
        say(f"{r.name}: a Kubernetes object of apiVersion {api} and kind {kind}, which are not texts: fix them")
        return
    if (api, kind) not in WORLD.kinds and (api, kind) not in stack.admitted.kinds:
        say(f"{r.name}: Kubernetes kind {kind} of {api} is not one the program creates: {stack.fix}")


def _roles(r: Resource, stack: _Stack, say: Callable[[str], None]) -> None:
    if grant_kind(r.resource_type) is None and r.resource_type not in WORLD.roles:
        return
    if unseen(r.props.get("role")) or unseen(r.props.get("policyData")):
        return
    roles = roles_of(r.props)
    if roles is None:
        say(f"{r.name}: its policy document cannot be read, so its roles cannot be judged: write it as JSON")
        return
    listed = WORLD.roles.get(r.resource_type, frozenset())
    for role in roles:
        if not isinstance(role, str):
            say(f"{r.name}: a role that is not a text ({role}) on {r.resource_type}: fix it")
        elif role not in listed and not {(None, role), (r.resource_type, role)} & stack.admitted.roles:
            say(f"{r.name}: role {role} on {r.resource_type} is not one the program grants with it: {stack.fix}")


def _subjects(r: Resource, stack: _Stack, say: Callable[[str], None]) -> None:
    if not r.resource_type.startswith("kubernetes:") or "subjects" not in r.props:
        return
    allowed = {(s.kind, fill(s.namespace, n), fill(s.name, n)) for s in WORLD.subjects for n in stack.names}
    for subject in _l(r.props.get("subjects")):
        with judging():
            values = [_m(subject).get(k) for k in ("kind", "namespace", "name")]
            if any([unseen(v) for v in values]):
                continue
            kind, namespace, name = values
            if not (isinstance(kind, str) and isinstance(name, str) and isinstance(namespace, (str, type(None)))):
                say(f"{r.name}: an RBAC subject that is not kind, namespace and name texts ({subject}): fix it")
                continue
            key = (kind, namespace or "", name)
            if key not in allowed and key not in stack.admitted.subjects:
                shown = f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"
                say(
                    f"{r.name}: RBAC subject {shown} is not one the program binds (its own Kubernetes service "
                    f"accounts in its namespace): {stack.fix}"
                )


def _images(r: Resource, stack: _Stack, say: Callable[[str], None]) -> None:
    for where, value in _image_values(r.props):
        with judging():
            if unseen(value) or not isinstance(value, str):
                continue
            path = served(value, stack.mirrors)
            if path in WORLD.images or path in stack.admitted.images:
                continue
            if stack.pending and "-docker.pkg.dev/" in path:
                continue  # perhaps a mirror not known yet: judged at `pulumi up` (its unknown values were noted)
            shown = f"{value} (repository {path})" if path != value else value
            say(
                f"{r.name}: image {shown} at {where.lstrip('.')} is not from a repository the program runs "
                f"({', '.join(sorted(WORLD.images))}; tpu-rl:images.* moves only a tag or digest): {stack.fix}"
            )


def _image_values(props: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """Every image of a resource: a value under a key ``image``, or its ``repository`` where the value is an object
    (a Helm chart's ``image: {repository, tag}``)."""
    for where, value in images_in(props):
        if isinstance(value, dict):
            if "repository" in value:
                yield f"{where}.repository", value.get("repository")
        else:
            yield where, value


JUDGES = (_type, _kind, _roles, _subjects, _images)


closed_world = StackValidationPolicy(
    name="closed-world",
    description=(
        "Only the resource types, Kubernetes kinds, roles, RBAC subjects and image repositories the program creates "
        "(core/data/closed-world.json), or what the policy config admits with a reason."
    ),
    severity=Severity.CRITICAL,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps=(
        "Remove what the program does not create, or admit it with a reason in the base branch's "
        "policy/config/<stack>.json (closed-world.admit); after a change to the program, run `make closed-world`."
    ),
    config_schema=PolicyConfigSchema(properties={"admit": {"type": "array", "default": []}}),
    validate=_guarded_stack(_closed_world),
)
