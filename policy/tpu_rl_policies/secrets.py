"""No secret material where anyone who may read an object reads it: container args, command and env values, labels
and annotations, the scripts a container runs from a ConfigMap volume, the ConfigMaps it reads
(``no-secrets-in-workloads``)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pulumi_policy import EnforcementLevel, Severity, StackValidationArgs, StackValidationPolicy

from core.redact import HF_TOKEN

from .env import ContainerEnv, MountedFile, Mounts, StackObjects, _command_words, container_env
from .pods import _namespace, kind_of, pod_containers, pods
from .properties import _l, _m, judging, unseen
from .resources import Report, Resource, _guarded_stack

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


def _metadata_secrets(metadata: Mapping[str, Any], where: str, report: Callable[[str], None]) -> None:
    """Labels and annotations are readable by anyone who may list the object (and land in logs and events)."""
    for field_name in ("labels", "annotations"):
        for key, value in _m(metadata.get(field_name)).items():
            kind = _secret_kind(value)
            if kind:
                report(f"{where}{field_name[:-1]} {key} contains secret material ({kind}); {SECRETS_FIX}")


def _container_secrets(
    container: Mapping[str, Any], env: ContainerEnv, report: Callable[[str], None], files: Sequence[MountedFile] = ()
) -> None:
    name = container.get("name", "?")
    for field_name in ("command", "args"):
        for word in _l(container.get(field_name)):
            kind = _secret_kind(str(word))
            if kind:
                # What kind, never what: PR comments carry policy messages, so no part of it is shown.
                report(f"container {name}: {field_name} contains secret material ({kind}); {SECRETS_FIX}")
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


def _no_secrets(args: StackValidationArgs, resources: list[Resource], report: Report) -> None:
    objects = StackObjects(resources)
    for r in resources:
        if kind_of(r.resource_type) is None:
            continue

        def say(message: str, urn: str = r.urn) -> None:
            report(message, urn)

        with judging():
            metadata = _m(r.props.get("metadata"))
            _metadata_secrets(metadata, "", say)
        namespace = _namespace(r.props)
        for pod in pods(r.resource_type, r.props):
            if pod.metadata is not metadata:  # a Pod's own metadata is its pod's
                with judging():
                    _metadata_secrets(pod.metadata, f"pod {pod.where}: ", say)
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
