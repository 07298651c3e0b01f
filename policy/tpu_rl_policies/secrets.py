"""No secret material where anyone who may read an object reads it: container args, command and env values, labels
and annotations, the scripts a container runs from a ConfigMap volume, the ConfigMaps it reads
(``no-secrets-in-workloads``)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from pulumi_policy import EnforcementLevel, Severity, StackValidationArgs, StackValidationPolicy

from core.redact import HF_TOKEN

from .env import ContainerEnv, MountedFile, Mounts, StackObjects, _command_words, container_env
from .pods import _name, _namespace, kind_of, pod_containers, pods
from .properties import _l, _m, judging, unseen
from .resources import CONFIG_MAP, SECRET, Report, Resource, _guarded_stack

_ACCESS_TOKEN = r"_access_token="
_ASSIGNED = r"_(TOKEN|KEY|SECRET|PASSWORD)="
KINDS: dict[re.Pattern[str], str] = {
    HF_TOKEN: "a Hugging Face token",
    re.compile(rf"(?i)\bhf{_ACCESS_TOKEN}(?!\s*$)\S+"): "hf_access_token=...",
    re.compile(rf"\b[A-Z][A-Z0-9_]*{_ASSIGNED}\S+"): "a *_TOKEN/KEY/SECRET/PASSWORD= assignment",
    re.compile(r"(?i)--(hf-)?token[= ]\S+"): "a --token flag",
}
"""What each secret pattern finds, as a policy message names it (never the text it matched)."""
TOKEN_PATTERNS = tuple(KINDS)
SECRET_ENV_NAME = re.compile(r"(?i)(TOKEN|SECRET|PASSWORD|API_?KEY|ACCESS_KEY)")
CORES: dict[re.Pattern[str], re.Pattern[str]] = {
    pattern: re.compile(core, pattern.flags)
    for pattern in TOKEN_PATTERNS
    for core in (_ACCESS_TOKEN, _ASSIGNED)
    if core in pattern.pattern
}
"""A part every match of a pattern contains (a run of it outside any alternative or repetition, with its flags),
searched first: found at once, or in a long script some forty times faster than the whole pattern, whose leading
``\b`` and character classes the engine tries at every position. Where the part is absent, the pattern cannot
match; where it is present, the pattern decides."""


SECRETS_FIX = "pass secrets as env valueFrom.secretKeyRef (MaxText reads HF_TOKEN from the environment)"


def _secret_kind(text: Any) -> str | None:
    """What kind of secret material ``text`` holds (a policy message names the kind, never the text)."""
    if unseen(text) or not isinstance(text, str):
        return None
    return next(
        (
            KINDS[pattern]
            for pattern in TOKEN_PATTERNS
            if (pattern not in CORES or CORES[pattern].search(text)) and pattern.search(text)
        ),
        None,
    )


def _key(key: Any) -> str:
    """A mapping key as a message names it: ``<secret>`` when the key is itself secret material (a message says
    where and what kind, never the text)."""
    return "<secret>" if _secret_kind(key) else str(key)


INDEX = re.compile(r"\[[0-9]+\]")


def _texts(node: Any, path: str) -> Iterator[tuple[str, str]]:
    """Every text in ``node`` (plain), with its path (a key of a mapping is text too: an env name, a header's); one
    not known yet is noted, not judged (one nested past the props' depth limit too: ``plain`` made it one, and so
    bounds this walk). A key that is itself secret material is named ``<secret>`` in the path: a message names where,
    never what."""
    if unseen(node):
        return
    if isinstance(node, str):
        yield path or ".", node
    elif isinstance(node, dict):
        for key, value in node.items():
            here = f"{path}.{_key(key)}" if path else _key(key)
            if isinstance(key, str):
                yield here, key
            yield from _texts(value, here)
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from _texts(item, f"{path}[{index}]")


def _metadata_everywhere(node: Any, path: str) -> Iterator[tuple[str, dict[Any, Any]]]:
    """Every ``metadata`` mapping of an object (plain: ``plain`` bounds its depth), its own, its pod templates', a
    JobSet's replicated Job templates', a CronJob's Job template's, a custom kind's, with the path it is at."""
    if isinstance(node, dict):
        for key, value in node.items():
            here = f"{path}.{key}" if path else str(key)
            if key == "metadata" and isinstance(value, dict):
                yield here, value
            yield from _metadata_everywhere(value, here)
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from _metadata_everywhere(item, f"{path}[{index}]")


def _metadata_secrets(metadata: Mapping[str, Any], where: str, report: Callable[[str], None]) -> None:
    """Labels and annotations are readable by anyone who may list the object (and land in logs and events)."""
    for field_name in ("labels", "annotations"):
        for key, value in _m(metadata.get(field_name)).items():
            kind = _secret_kind(value) or _secret_kind(key)
            if kind:
                report(f"{where}{field_name[:-1]} {_key(key)} contains secret material ({kind}); {SECRETS_FIX}")


def _container_secrets(
    container: Mapping[str, Any], env: ContainerEnv, report: Callable[[str], None], files: Sequence[MountedFile] = ()
) -> None:
    name = container.get("name", "?")
    # Every text the container carries but its env (judged below by name too): command, args, probes' and lifecycle
    # hooks' commands and headers, working directory... What kind, never what: PR comments carry policy messages.
    for path, text in _texts({k: v for k, v in container.items() if k != "env"}, ""):
        kind = _secret_kind(text)
        if kind:
            where = INDEX.sub("", path)
            report(f"container {name}: {where} contains secret material ({kind}); {SECRETS_FIX}")
    for entry in _l(container.get("env")):
        entry = _m(entry)
        value = entry.get("value")
        if value is not None and (
            SECRET_ENV_NAME.search(str(entry.get("name") or "")) or _secret_kind(str(value)) is not None
        ):
            report(f"container {name}: env {entry.get('name')} has a literal value; {SECRETS_FIX}")
        if entry.get("name") == "HF_TOKEN" and "secretKeyRef" not in _m(entry.get("valueFrom")):
            report(f"container {name}: HF_TOKEN must come from a secretKeyRef; {SECRETS_FIX}")
    # The scripts and programs it runs from a ConfigMap volume: what its command would carry as arguments.
    for mounted in files:
        kind = _secret_kind(mounted.text)
        if kind:
            report(
                f"container {name}: {mounted.path} ({mounted.source}) contains secret material ({kind}); {SECRETS_FIX}"
            )
    # What the ConfigMaps the container reads give it (a ConfigMap is plain text to anyone who may read it).
    for var, value in env.values.items():
        if value.kind != "ConfigMap":
            continue
        if var == "HF_TOKEN":
            if value.from_env_from:
                report(f"container {name}: HF_TOKEN must come from a secretKeyRef; {SECRETS_FIX}")
        elif SECRET_ENV_NAME.search(var) or _secret_kind(value.value) is not None:
            report(f"container {name}: env {var} comes from {value.source}, which is not a Secret; {SECRETS_FIX}")


SERVICE_ACCOUNT_TOKEN = "kubernetes.io/service-account-token"


def _object_secrets(r: Resource, say: Callable[[str], None]) -> None:
    """A ConfigMap's data, mounted or not, is plain text to anyone who may read it; a Secret of type
    ``kubernetes.io/service-account-token`` is a token of a Kubernetes service account that never expires, and any pod
    that mounts it acts as that account (the steps get short-lived projected tokens)."""
    if r.resource_type == CONFIG_MAP:
        for key, value in _m(r.props.get("data")).items():
            kind = _secret_kind(value) or _secret_kind(key)
            if kind:
                say(f"ConfigMap {_name(r)}: data {_key(key)} contains secret material ({kind}); store it in a Secret")
    elif r.resource_type == SECRET and r.props.get("type") == SERVICE_ACCOUNT_TOKEN:
        say(
            f"Secret {_name(r)} is a {SERVICE_ACCOUNT_TOKEN}: a service account's token that never expires; the "
            "steps get short-lived tokens from their pods' own accounts, remove it"
        )


def _no_secrets(args: StackValidationArgs, resources: list[Resource], report: Report) -> None:
    objects = StackObjects(resources)
    for r in resources:
        if kind_of(r.resource_type) is None:
            continue

        def say(message: str, urn: str = r.urn) -> None:
            report(message, urn)

        found = pods(r.resource_type, r.props)
        named = {id(pod.metadata): f"pod {pod.where}: " for pod in found}
        for path, metadata in _metadata_everywhere(r.props, ""):
            with judging():
                _metadata_secrets(metadata, "" if path == "metadata" else named.get(id(metadata), f"{path}: "), say)
        with judging():
            _object_secrets(r, say)
        namespace = _namespace(r.props)
        for pod in found:
            for container in pod_containers(pod.spec):
                with judging():
                    env = container_env(container, namespace, objects)
                    files = Mounts(pod.spec, container, namespace, objects).run_files(_command_words(container, env))
                    _container_secrets(container, env, say, files)


no_secrets_in_workloads = StackValidationPolicy(
    name="no-secrets-in-workloads",
    description=(
        "No tokens or keys in container args, command or env values, in labels or annotations, in the scripts a "
        "container runs from a ConfigMap volume, or in the ConfigMaps a container reads; HF_TOKEN comes from a Secret."
    ),
    severity=Severity.CRITICAL,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Store the token as a Pulumi secret and reference the Kubernetes Secret with secretKeyRef.",
    validate=_guarded_stack(_no_secrets),
)
