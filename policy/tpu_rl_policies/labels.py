"""Labelable GCP resources carry the cost-attribution labels (``cost-attribution-labels``)."""

from __future__ import annotations

from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
)

from .properties import _config, _m, unseen
from .resources import BUCKET, CLUSTER, NODE_POOL, Report, _guarded_resource

LABEL_FIELDS = {BUCKET: ("labels",), CLUSTER: ("resourceLabels",), NODE_POOL: ("nodeConfig", "resourceLabels")}


def _labels(args: ResourceValidationArgs, props: dict[str, Any], report: Report) -> None:
    path = LABEL_FIELDS.get(args.resource_type)
    if path is None:
        return
    labels: Any = props
    for key in path:
        labels = _m(labels).get(key)
    required = _config(args)["requiredLabels"]
    labels = _m(labels)
    missing = [k for k in required if k not in labels or unseen(labels[k])]
    if missing:
        report(f"missing cost-attribution labels {', '.join(missing)} on {'.'.join(path)}")


cost_attribution_labels = ResourceValidationPolicy(
    name="cost-attribution-labels",
    description="Labelable GCP resources carry the cost-attribution labels.",
    severity=Severity.LOW,
    enforcement_level=EnforcementLevel.ADVISORY,
    remediation_steps="Keep settings.labels on every labelable resource.",
    config_schema=PolicyConfigSchema(
        properties={"requiredLabels": {"type": "array", "items": {"type": "string"}, "default": ["app", "stack"]}}
    ),
    validate=_guarded_resource(_labels),
)
