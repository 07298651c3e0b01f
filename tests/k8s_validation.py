"""Offline validation of rendered Kubernetes objects against the real schemas.

Core kinds: ``kubernetes-validate`` (strict). JobSets: the upstream CRD's
``openAPIV3Schema`` made strict (unknown fields fail, as server-side apply does), with
int32/int64 ranges, list-map/set uniqueness and CEL rules, checked after the JobSet
mutating webhook's defaults; plus the webhook's own rules (generated name lengths,
references). See ../shared/reference/schemas.md.
"""

from __future__ import annotations

import copy
import functools
import re
from pathlib import Path
from typing import Any

import celpy
import jsonschema
import kubernetes_validate
import yaml

K8S_VERSION = "1.33"
DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
RULE_NAME = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
JOB_FAILURE_REASONS = {
    "BackoffLimitExceeded",
    "DeadlineExceeded",
    "FailedIndexes",
    "MaxFailedIndexesExceeded",
    "PodFailurePolicy",
}


class WebhookError(ValueError):
    """What the JobSet admission webhook would reject."""


def validate_core(obj: dict[str, Any]) -> None:
    """Strict schema check of a core object (raises ``kubernetes_validate.ValidationError``)."""
    kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    name = obj["metadata"]["name"]
    if not DNS1123_SUBDOMAIN.match(name) or len(name) > 253:
        raise WebhookError(f"{obj['kind']} name {name!r} is not a DNS-1123 subdomain")


# ---------------------------------------------------------------------------------------------
# CRD schema -> strict JSON Schema


def _strictify(node: Any) -> Any:
    if isinstance(node, dict):
        node = {k: _strictify(v) for k, v in node.items()}
        if node.get("nullable") and isinstance(node.get("type"), str):
            node["type"] = [node["type"], "null"]
        if (
            "properties" in node
            and "additionalProperties" not in node
            and not node.get("x-kubernetes-preserve-unknown-fields")
        ):
            node["additionalProperties"] = False
        return node
    if isinstance(node, list):
        return [_strictify(v) for v in node]
    return node


_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}


def _format_range(validator, fmt, instance, schema):  # noqa: ANN001
    if fmt in _INT_RANGES and isinstance(instance, int) and not isinstance(instance, bool):
        low, high = _INT_RANGES[fmt]
        if not low <= instance <= high:
            yield jsonschema.ValidationError(f"{instance} is out of {fmt} range")


def _list_type(validator, list_type, instance, schema):  # noqa: ANN001
    if not isinstance(instance, list):
        return
    if list_type == "map":
        keys = schema.get("x-kubernetes-list-map-keys", [])
        seen = set()
        for item in instance:
            key = tuple(item.get(k) for k in keys) if isinstance(item, dict) else None
            if key in seen:
                yield jsonschema.ValidationError(f"duplicate list-map key {dict(zip(keys, key or (), strict=False))}")
            seen.add(key)
    elif list_type == "set":
        seen_items = []
        for item in instance:
            if item in seen_items:
                yield jsonschema.ValidationError(f"duplicate set item {item!r}")
            seen_items.append(item)


@functools.lru_cache(maxsize=256)
def _cel_program(rule: str) -> Any:
    env = celpy.Environment()
    return env.program(env.compile(rule))


def _cel(validator, rules, instance, schema):  # noqa: ANN001
    for rule in rules:
        if "oldSelf" in rule["rule"]:
            continue  # transition rules run on update only
        result = _cel_program(rule["rule"]).evaluate({"self": celpy.json_to_cel(instance)})
        if not bool(result):
            yield jsonschema.ValidationError(rule.get("message") or f"CEL rule failed: {rule['rule']}")


def crd_validator(crd_path: Path, version_name: str | None = None) -> jsonschema.protocols.Validator:
    """A strict validator for a served version of a CRD file (the first one unless named)."""
    crd = yaml.load(crd_path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 - safe
    version = next(v for v in crd["spec"]["versions"] if v.get("served", True) and version_name in (None, v["name"]))
    schema = _strictify(copy.deepcopy(version["schema"]["openAPIV3Schema"]))
    base = jsonschema.Draft202012Validator
    validator_class = jsonschema.validators.extend(
        base,
        {
            "format": _format_range,
            "x-kubernetes-list-type": _list_type,
            "x-kubernetes-validations": _cel,
        },
    )
    return validator_class(schema)


# ---------------------------------------------------------------------------------------------
# JobSet webhook


def jobset_defaults(obj: dict[str, Any]) -> dict[str, Any]:
    """The JobSet v0.10.1 mutating webhook's defaults (applied before schema validation)."""
    obj = copy.deepcopy(obj)
    spec = obj["spec"]
    spec.setdefault("successPolicy", {"operator": "All"})
    spec.setdefault("startupPolicy", {"startupPolicyOrder": "AnyOrder"})
    network = spec.setdefault("network", {})
    network.setdefault("enableDNSHostnames", True)
    network.setdefault("publishNotReadyAddresses", True)
    for job in spec["replicatedJobs"]:
        job_spec = job["template"]["spec"]
        job_spec.setdefault("completionMode", "Indexed")
        job_spec["template"]["spec"].setdefault("restartPolicy", "OnFailure")
    for i, rule in enumerate((spec.get("failurePolicy") or {}).get("rules", [])):
        rule.setdefault("name", f"failurePolicyRule{i}")
    return obj


def jobset_webhook_rules(obj: dict[str, Any]) -> None:
    """The JobSet validating webhook's checks that the schema cannot express."""
    name = obj["metadata"]["name"]
    spec = obj["spec"]
    jobs = {j["name"]: j for j in spec["replicatedJobs"]}
    for rjob in spec["replicatedJobs"]:
        job_spec = rjob["template"]["spec"]
        job_name = f"{name}-{rjob['name']}-{rjob.get('replicas', 1) - 1}"
        if len(job_name) > 63 or not DNS1035.match(job_name):
            raise WebhookError(
                f"JobSet name is too long, job names generated for this JobSet will exceed 63: {job_name}"
            )
        if job_spec.get("completionMode", "Indexed") == "Indexed" and "completions" in job_spec:
            pod = f"{job_name}-{job_spec['completions'] - 1}-abcde"
            if len(pod) > 63:
                raise WebhookError(
                    f"JobSet name is too long, pod names generated for this JobSet will exceed 63: {pod}"
                )
        # The Job API's own rule (kubernetes pkg/apis/batch/validation validateJobSpec): "only
        # restartPolicy=Never is supported when podFailurePolicy is specified".
        if "podFailurePolicy" in job_spec and job_spec["template"]["spec"].get("restartPolicy") != "Never":
            raise WebhookError(f"{rjob['name']}: a podFailurePolicy needs restartPolicy Never")
        if rjob.get("replicas", 1) * job_spec.get("parallelism", 1) > 2**31 - 1:
            raise WebhookError("replicas x parallelism exceeds int32")
        for dep in rjob.get("dependsOn") or []:
            if dep["name"] not in jobs or list(jobs).index(dep["name"]) >= list(jobs).index(rjob["name"]):
                raise WebhookError(f"dependsOn {dep['name']} must name an earlier replicatedJob")
    for target in (spec.get("successPolicy") or {}).get("targetReplicatedJobs") or []:
        if target not in jobs:
            raise WebhookError(f"successPolicy target {target} is not a replicatedJob")
    rule_names = []
    for rule in (spec.get("failurePolicy") or {}).get("rules") or []:
        if not 1 <= len(rule["name"]) <= 128 or not RULE_NAME.match(rule["name"]):
            raise WebhookError(f"invalid failure policy rule name {rule['name']!r}")
        rule_names.append(rule["name"])
        for target in rule.get("targetReplicatedJobs") or []:
            if target not in jobs:
                raise WebhookError(f"failure policy target {target} is not a replicatedJob")
        for reason in rule.get("onJobFailureReasons") or []:
            if reason not in JOB_FAILURE_REASONS:
                raise WebhookError(f"invalid onJobFailureReasons {reason}")
    if len(rule_names) != len(set(rule_names)):
        raise WebhookError("failure policy rule names must be unique")
    coordinator = spec.get("coordinator")
    if coordinator:
        target = jobs.get(coordinator["replicatedJob"])
        if target is None:
            raise WebhookError(f"coordinator {coordinator['replicatedJob']} is not a replicatedJob")
        if coordinator.get("jobIndex", 0) >= target.get("replicas", 1):
            raise WebhookError("coordinator jobIndex out of range")
        job_spec = target["template"]["spec"]
        if "completions" not in job_spec or coordinator.get("podIndex", 0) >= job_spec["completions"]:
            raise WebhookError("coordinator podIndex out of range")


def validate_jobset(obj: dict[str, Any], validator: jsonschema.protocols.Validator) -> None:
    """Webhook defaults, strict CRD schema, webhook rules, and each pod template as a core Job."""
    defaulted = jobset_defaults(obj)
    errors = sorted(validator.iter_errors(defaulted), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        raise jsonschema.ValidationError(f"{'/'.join(map(str, first.absolute_path))}: {first.message}")
    jobset_webhook_rules(defaulted)
    if not DNS1123_SUBDOMAIN.match(obj["metadata"]["name"]):
        raise WebhookError(f"JobSet name {obj['metadata']['name']!r} is not a DNS-1123 subdomain")
    for rjob in defaulted["spec"]["replicatedJobs"]:
        kubernetes_validate.validate(
            {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "x"}, "spec": rjob["template"]["spec"]},
            K8S_VERSION,
            strict=True,
        )


# ---------------------------------------------------------------------------------------------
# Kueue 0.17.1 webhooks (the same files, pkg/webhooks/ and jobframework/validation.go's rules here, in 0.17.8)


def kueue_webhook_rules(objects: list[dict[str, Any]]) -> None:
    """The Kueue validating webhooks' checks the CRD schema cannot express, and the references between
    the objects (``pkg/webhooks/clusterqueue_webhook.go`` ``validateResourceGroups``)."""
    flavors = {o["metadata"]["name"] for o in objects if o["kind"] == "ResourceFlavor"}
    queues = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ClusterQueue"}
    for queue in queues.values():
        covered: list[str] = []
        named: list[str] = []
        for group in queue["spec"].get("resourceGroups") or []:
            covered += group["coveredResources"]
            for flavor in group["flavors"]:
                named.append(flavor["name"])
                if [r["name"] for r in flavor["resources"]] != group["coveredResources"]:
                    raise WebhookError(f"{flavor['name']}: resources must match the name in coveredResources")
                if flavor["name"] not in flavors:
                    raise WebhookError(f"flavor {flavor['name']} is not a ResourceFlavor of the stack")
        for kind, names in (("coveredResources", covered), ("flavors", named)):
            if len(names) != len(set(names)):
                raise WebhookError(f"{queue['metadata']['name']}: {kind} must not repeat across resource groups")
        if queue["spec"].get("namespaceSelector") is None:
            raise WebhookError(f"{queue['metadata']['name']}: a null namespaceSelector admits no namespace")
    for local in (o for o in objects if o["kind"] == "LocalQueue"):
        if local["spec"]["clusterQueue"] not in queues:
            raise WebhookError(f"LocalQueue {local['metadata']['name']} names no ClusterQueue of the stack")
        if not DNS1123_SUBDOMAIN.match(local["metadata"]["name"]):
            raise WebhookError(f"LocalQueue name {local['metadata']['name']!r} is not a DNS-1123 subdomain")


def kueue_jobset_rules(obj: dict[str, Any]) -> None:
    """What Kueue 0.17.1's JobSet webhooks check on create (``jobframework/validation.go``
    ``ValidateLabelAsCRDName``): the queue name is a DNS-1123 subdomain; and what the program relies on:
    Kueue's webhook, not the manifest, suspends a queued JobSet (``ApplyDefaultForSuspend``)."""
    queue = (obj["metadata"].get("labels") or {}).get("kueue.x-k8s.io/queue-name")
    if queue is None:
        return
    if not DNS1123_SUBDOMAIN.match(queue) or len(queue) > 253:
        raise WebhookError(f"metadata.labels[kueue.x-k8s.io/queue-name]: {queue!r} is not a DNS-1123 subdomain")
    if "suspend" in obj["spec"]:
        raise WebhookError("a queued JobSet must not set spec.suspend (Kueue owns it; an apply would fight Kueue)")
