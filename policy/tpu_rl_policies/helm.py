"""A Helm release renders objects the pack cannot see: only the charts tpu-rl installs, at their versions and
values, and no other renderer (``reviewed-helm-charts``)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

from pulumi_policy import EnforcementLevel, ResourceValidationArgs, ResourceValidationPolicy, Severity

from core.controllers import CHART_VALUES, JOBSET_VERSIONS, KUEUE_VERSIONS

from .properties import _m, unseen
from .resources import HELM_RELEASE, Report, _guarded_resource

HELM_CHARTS: dict[str, tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]] = {
    # chart: (versions, the value paths tpu-rl sets; "*" is any one key)
    "oci://registry.k8s.io/jobset/charts/jobset": (JOBSET_VERSIONS, CHART_VALUES["jobset"]),
    "oci://registry.k8s.io/kueue/charts/kueue": (KUEUE_VERSIONS, CHART_VALUES["kueue"]),
}
"""The Helm charts tpu-rl installs (``infra/k8s/platform.py`` JOBSET_CHART, ``infra/k8s/kueue.py`` CHART; a test
keeps them equal), at the versions adopted (``core.controllers``, which the configuration accepts)."""


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


reviewed_helm_charts = ResourceValidationPolicy(
    name="reviewed-helm-charts",
    description=(
        "Helm releases install only the charts tpu-rl installs (JobSet, Kueue), at their versions and values; no "
        "other chart or manifest renderer."
    ),
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Keep the releases of infra/k8s/platform.py; add a chart to HELM_CHARTS after a review.",
    validate=_guarded_resource(_helm_charts),
)
