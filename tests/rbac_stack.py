"""Small stacks of RBAC objects for ``no-broad-rbac``, judged through pulumi-policy's own analyzer
(``tests/analyzer.py``): the stack's own Kubernetes service account and Role, and builders of roles, bindings and
rules beside them (shared by ``tests/test_policy_rbac_rules.py`` and ``tests/test_policy_rbac_objects.py``)."""

from __future__ import annotations

import importlib
from typing import Any

from tests import analyzer

policies = importlib.import_module("policy.tpu_rl_policies")
RBAC_POLICY = analyzer.pack_policy("no-broad-rbac")
RBAC = "kubernetes:rbac.authorization.k8s.io/v1"
KSA_TYPE = "kubernetes:core/v1:ServiceAccount"
OWN = {"kind": "ServiceAccount", "name": "tpu-rl-dev-export", "namespace": "tpu-rl"}
"""The stack's own Kubernetes service account (``account()``), which every binding here may bind."""
READER = {"kind": "Role", "name": "reader"}
"""The stack's own Role (``role()``), which every binding here may reference."""


def resource(kind: str, name: str, props: dict[str, Any]) -> analyzer.Resource:
    type_ = KSA_TYPE if kind == "ServiceAccount" else f"{RBAC}:{kind}"
    return analyzer.Resource(type_, name, f"urn:pulumi:dev::tpu-rl::{type_}::{name}", props)


def account() -> analyzer.Resource:
    return resource("ServiceAccount", "export-ksa", {"metadata": {"name": "tpu-rl-dev-export", "namespace": "tpu-rl"}})


def role(kind: str = "Role", name: str = "reader", *rules: dict[str, Any], **extra: Any) -> analyzer.Resource:
    """A role of the stack's in its namespace (a ClusterRole has none), holding ``rules`` (a harmless read of pods
    when none is given); its Pulumi resource name differs from its Kubernetes name."""
    metadata = {"name": name, "namespace": "tpu-rl"} if kind == "Role" else {"name": name}
    read = {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}
    return resource(kind, f"{name}-res", {"metadata": metadata, "rules": list(rules) or [read], **extra})


def binding(kind: str, name: str, ref: Any, *subjects: dict[str, Any]) -> analyzer.Resource:
    """A binding in the stack's namespace of ``ref`` (none when ``None``) to ``subjects`` (none when none given)."""
    body: dict[str, Any] = {"metadata": {"name": name, "namespace": "tpu-rl"}, "subjects": list(subjects)}
    if ref is not None:
        body["roleRef"] = {"apiGroup": "rbac.authorization.k8s.io", **ref}
    return resource(kind, f"{name}-res", body)


def found(*resources: analyzer.Resource) -> list[tuple[str, str]]:
    """(URN, message) of each finding of the stack ``resources`` (with the stack's own account and role), every one
    mandatory and judged."""
    pack = analyzer.Pack({"all": "mandatory"}, policies=[RBAC_POLICY], stack="dev", stack_config={})
    findings = pack.analyze_stack([account(), role(), *resources])
    assert all(f.policy == RBAC_POLICY.name and f.level == "mandatory" and not f.unjudged for f in findings), findings
    return [(f.urn, f.message) for f in findings]


def rule(**fields: list[str]) -> dict[str, Any]:
    """A rule reading pods (``get`` on ``""``/``pods``) with ``fields`` in place of its own."""
    return {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"], **fields}
