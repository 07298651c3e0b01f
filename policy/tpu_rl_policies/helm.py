"""A Helm release renders objects the pack cannot see: only the charts tpu-rl installs, in their namespaces, at their
versions and with the very values the program sets, and no other renderer (``reviewed-helm-charts``)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

import yaml
from pulumi_policy import EnforcementLevel, ResourceValidationArgs, ResourceValidationPolicy, Severity

from core.controllers import CHART_VALUES, JOBSET_VERSIONS, KUEUE_VERSIONS
from core.kueue_manager import configuration
from core.names import NODEPOOL_LABEL, SYSTEM_POOL

from .properties import _m, unseen
from .resources import HELM_RELEASE, Report, _guarded_resource

DURATION = re.compile(r"(?=[0-9])([0-9]+h)?([0-9]+m)?([0-9]+s)?")
"""A duration as ``core.config.values.format_duration`` writes it: what the configuration chooses (``tpu-rl:kueue``)."""
_MANAGER = configuration(0, 0)
KUEUE_CONFIGURATION: dict[str, Any] = {
    **_MANAGER,
    "waitForPodsReady": {**_MANAGER["waitForPodsReady"], "timeout": DURATION, "recoveryTimeout": DURATION},
}
"""Kueue's manager configuration as the program writes it (``core.kueue_manager``), its two timeouts any duration:
a field more (``manageJobsWithoutQueueName``, another integration) or a value changed is not one tpu-rl sets."""


HELM_CHARTS: dict[str, tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]] = {
    # chart: (versions, the value paths tpu-rl sets; "*" is any one key)
    "oci://registry.k8s.io/jobset/charts/jobset": (JOBSET_VERSIONS, CHART_VALUES["jobset"]),
    "oci://registry.k8s.io/kueue/charts/kueue": (KUEUE_VERSIONS, CHART_VALUES["kueue"]),
}
"""The Helm charts tpu-rl installs (``infra/k8s/platform.py`` JOBSET_CHART, ``infra/k8s/kueue.py`` CHART; a test
keeps them equal), at the versions adopted (``core.controllers``, which the configuration accepts)."""
INSTALLED: dict[str, tuple[str, dict[str, Any]]] = {
    "oci://registry.k8s.io/jobset/charts/jobset": ("jobset-system", {}),
    "oci://registry.k8s.io/kueue/charts/kueue": (
        "kueue-system",
        {
            "controllerManager": {"nodeSelector": {NODEPOOL_LABEL: SYSTEM_POOL}},
            "managerConfig": {"controllerManagerConfigYaml": KUEUE_CONFIGURATION},
        },
    ),
}
"""Each chart's namespace and values as the program installs it (``infra/k8s/manifests.py`` JOBSET_NAMESPACE,
``infra/k8s/kueue.py`` NAMESPACE and ``helm_values``; a test keeps them equal): a ``re.Pattern`` matches a text, and a
text that is YAML of a mapping is compared as that mapping."""


def _differs(value: Any, wanted: Any, path: str) -> Iterator[str]:
    """Where ``value`` is not what tpu-rl sets (``wanted``); a value not known yet is noted, not judged."""
    if unseen(value):
        return
    if isinstance(wanted, dict) and isinstance(value, str):
        try:
            value = yaml.safe_load(value)
        except yaml.YAMLError:
            yield path or "values"
            return
    if isinstance(wanted, dict):
        if not isinstance(value, dict):
            yield path or "values"
            return
        for key in sorted(set(value) | set(wanted), key=str):
            yield from _differs(value.get(key), wanted.get(key), f"{path}.{key}" if path else str(key))
    elif isinstance(wanted, list):
        if not isinstance(value, list) or len(value) != len(wanted):
            yield path
            return
        for index, (item, expected) in enumerate(zip(value, wanted, strict=True)):
            yield from _differs(item, expected, f"{path}[{index}]")
    elif isinstance(wanted, re.Pattern):
        if not isinstance(value, str) or not wanted.fullmatch(value):
            yield path
    elif type(value) is not type(wanted) or value != wanted:
        yield path


def _value_paths(values: Any, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    if unseen(values):
        return
    if isinstance(values, dict) and values:
        for key, value in values.items():
            yield from _value_paths(value, (*prefix, str(key)))
    elif prefix:
        yield prefix


def _reviewed_value(path: tuple[str, ...], allowed: Sequence[tuple[str, ...]]) -> bool:
    return any(
        len(path) == len(pattern) and all(p in ("*", part) for p, part in zip(pattern, path, strict=True))
        for pattern in allowed
    )


RENDERERS = re.compile(r"kubernetes:(helm\.sh/v\d+:Chart|yaml(/v\d+)?:Config(File|Group)|kustomize(/v\d+)?:Directory)")
"""Components that render Kubernetes objects from a chart, manifests or a kustomization (Helm v3 and v4 ``Chart``,
``yaml`` and ``yaml/v2`` ``ConfigFile``/``ConfigGroup``, ``kustomize`` ``Directory``): tpu-rl uses none of them."""


def _helm_charts(args: ResourceValidationArgs, props: dict[str, Any], report: Report) -> None:
    if RENDERERS.fullmatch(args.resource_type):
        report(
            f"{args.resource_type} {args.name} renders Kubernetes objects from a chart or from files, out of the "
            "review the stack's own objects get: tpu-rl installs charts only as the reviewed Helm releases "
            "(infra/k8s/platform.py) and registers every other object itself"
        )
        return
    if args.resource_type != HELM_RELEASE:
        return
    name = props.get("name") if isinstance(props.get("name"), str) else args.name
    chart, version = props.get("chart"), props.get("version")
    if unseen(chart):
        return
    allowed = HELM_CHARTS.get(chart) if isinstance(chart, str) else None
    if allowed is None:
        report(
            f"Helm release {name} installs chart {chart!r}, which is not one tpu-rl installs "
            f"({', '.join(HELM_CHARTS)}): "
            "the policy pack cannot see what a chart renders (its pods, images and RBAC), so only reviewed charts "
            "are allowed"
        )
        return
    versions, value_paths = allowed
    own_namespace, own_values = INSTALLED[str(chart)]
    namespace = props.get("namespace")
    if not unseen(namespace) and namespace != own_namespace:
        report(
            f"Helm release {name} installs {chart} in namespace {namespace or '(the provider default)'}, not "
            f"{own_namespace}: the chart's controller and its RBAC land where tpu-rl does not install them"
        )
    if version not in versions:
        report(
            f"Helm release {name}: {chart} version {version!r} is not one the stack's manifests are validated "
            f"against ({', '.join(versions)}); pin one of them"
        )
    if _m(props.get("repositoryOpts")).get("repo") is not None:
        report(f"Helm release {name}: repositoryOpts.repo fetches the chart from elsewhere; the OCI reference is all")
    for key in ("postrender", "valueYamlFiles"):
        if props.get(key) not in (None, "", []):
            report(
                f"Helm release {name}: {key} changes what the chart renders out of the policy pack's sight: remove it"
            )
    unreviewed = [".".join(p) for p in _value_paths(props.get("values")) if not _reviewed_value(p, value_paths)]
    if unreviewed:
        report(
            f"Helm release {name}: values {', '.join(unreviewed)} are not ones tpu-rl sets; a value can change the "
            "chart's images, privileges or webhooks"
        )
        return
    values = props.get("values")
    changed = list(_differs({} if values is None else values, own_values, ""))
    if changed:
        shown = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
        report(
            f"Helm release {name}: {shown} differ from what tpu-rl sets (infra/k8s/kueue.py helm_values): a value "
            "can move the controller or widen what it manages (manageJobsWithoutQueueName); keep the program's"
        )


reviewed_helm_charts = ResourceValidationPolicy(
    name="reviewed-helm-charts",
    description=(
        "Helm releases install only the charts tpu-rl installs (JobSet, Kueue), in their namespaces, at their versions "
        "and with the values the program sets; no other chart or manifest renderer."
    ),
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Keep the releases of infra/k8s/platform.py; add a chart to HELM_CHARTS after a review.",
    validate=_guarded_resource(_helm_charts),
)
