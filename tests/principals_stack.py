"""Small prod stacks for ``stack-principals``, judged through pulumi-policy's own analyzer (``tests/analyzer.py``)
with no configuration from the engine: the resource types, the stack's Workload Identity pool, a resource builder and
the judgement (shared by ``tests/test_policy_stack_principals.py`` and
``tests/test_policy_workload_identity_bindings.py``)."""

from __future__ import annotations

import importlib
from typing import Any

from tests import analyzer
from tests.grant_cases import PROJECT

policies = importlib.import_module("policy.tpu_rl_policies")
PRINCIPALS = analyzer.pack_policy("stack-principals")
CLUSTER = "gcp:container/cluster:Cluster"
ACCOUNT = "gcp:serviceaccount/account:Account"
KSA = "kubernetes:core/v1:ServiceAccount"
WORKLOAD_USER = "roles/iam.workloadIdentityUser"
POOL = f"{PROJECT}.svc.id.goog"


def urn(type_: str, name: str) -> str:
    return f"urn:pulumi:prod::tpu-rl::{type_}::{name}"


def resource(type_: str, name: str, /, **props: Any) -> analyzer.Resource:
    return analyzer.Resource(type_, name, urn(type_, name), props)


def judge(*resources: analyzer.Resource, preview: bool = False) -> list[analyzer.Finding]:
    pack = analyzer.Pack({"all": "mandatory"}, dry_run=preview, policies=[PRINCIPALS], stack="prod", stack_config={})
    return pack.analyze_stack(list(resources))


def found(*resources: analyzer.Resource) -> list[tuple[str, str]]:
    """(URN, message) of each finding, every one mandatory and judged."""
    findings = judge(*resources)
    assert all(f.level == "mandatory" and not f.unjudged for f in findings), findings
    return [(f.urn, f.message) for f in findings]
