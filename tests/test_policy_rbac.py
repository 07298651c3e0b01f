"""``no-broad-rbac``: a binding binds a role the stack declares to the stack's own Kubernetes service accounts only;
every spelling of everyone, a built-in role and a patch of a built-in binding are refused, each beside its near miss,
at ``pulumi up`` and at a preview."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from tests import analyzer
from tests.conftest import plan_of
from tests.grant_cases import _plan
from tools.plan.offline import UNKNOWN

pytestmark = pytest.mark.pure

policies = importlib.import_module("policy.tpu_rl_policies")
RBAC_POLICY = analyzer.pack_policy("no-broad-rbac")
API = "rbac.authorization.k8s.io/v1"
KSA = {"kind": "ServiceAccount", "name": "tpu-rl-prod-export", "namespace": "tpu-rl"}
ROLE = (
    "kubernetes:rbac.authorization.k8s.io/v1:Role",
    "reader",
    {
        "apiVersion": API,
        "kind": "Role",
        "metadata": {"name": "reader", "namespace": "tpu-rl"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}],
    },
)


def _binding(kind: str = "RoleBinding", name: str = "readers", role_ref: Any = None, *subjects: Any) -> tuple:
    body: dict[str, Any] = {"apiVersion": API, "kind": kind, "metadata": {"name": name, "namespace": "tpu-rl"}}
    if role_ref is not False:
        body["roleRef"] = role_ref or {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"}
    body["subjects"] = list(subjects) or [KSA]
    return (f"kubernetes:rbac.authorization.k8s.io/v1:{kind}", name, body)


def found(*extra: Any, preview: bool = False) -> list[analyzer.Finding]:
    pack = analyzer.Pack(
        {"all": "mandatory"},
        dry_run=preview,
        policies=[RBAC_POLICY],
        stack="prod",
        stack_config=analyzer.engine_config("prod"),
    )
    return pack.analyze_stack(analyzer.resources(_plan(*extra), preview=preview, stack_view=True))


@pytest.mark.program
@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_programs_own_role_and_binding_pass(stack):
    plan = plan_of(stack)
    assert any(r["type"].endswith(":RoleBinding") for r in plan.resources)
    pack = analyzer.Pack(
        {"all": "mandatory"}, policies=[RBAC_POLICY], stack=stack, stack_config=analyzer.engine_config(stack)
    )
    assert pack.analyze_stack(analyzer.resources(plan, preview=False, stack_view=True)) == []


def test_the_near_miss_passes():
    assert found(ROLE, _binding()) == []
    assert found(ROLE, _binding("RoleBindingPatch", "readers")) == []


@pytest.mark.parametrize(
    ("subject", "words"),
    [
        ({"kind": "User", "name": "system:anonymous"}, "binds system:anonymous: everyone"),
        ({"kind": "Group", "name": "system:anonymous"}, "binds system:anonymous: everyone"),
        ({"kind": "Group", "name": "system:serviceaccounts"}, "binds system:serviceaccounts: everyone"),
        ({"kind": "Group", "name": "system:serviceaccounts:tpu-rl"}, "binds system:serviceaccounts:tpu-rl: everyone"),
        ({"kind": "Group", "name": "system:unauthenticated"}, "everyone"),
        ({"kind": "Group", "name": " System:Authenticated "}, "everyone"),
        ({"kind": "Group", "name": "tpu-rl-operators"}, "not one of the stack's Kubernetes service accounts"),
        ({"kind": "User", "name": "alice@example.com"}, "not one of the stack's Kubernetes service accounts"),
        ({**KSA, "namespace": "kube-system"}, "binds ServiceAccount kube-system/tpu-rl-prod-export, not one"),
        ({**KSA, "name": "default"}, "binds ServiceAccount tpu-rl/default, not one"),
        ({**KSA, "kind": "serviceaccount"}, "not one of the stack's"),
    ],
)
@pytest.mark.parametrize("kind", ["RoleBinding", "ClusterRoleBinding"])
def test_subjects_only_the_stacks_own_accounts(kind, subject, words):
    role_ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"}
    cluster_role = (
        "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole",
        "reader",
        {**ROLE[2], "kind": "ClusterRole", "metadata": {"name": "reader"}},
    )
    if kind == "ClusterRoleBinding":
        role_ref = {**role_ref, "kind": "ClusterRole"}
    messages = [
        f.message for f in found(ROLE, cluster_role, _binding(kind, "readers", role_ref, subject), preview=True)
    ]
    assert len(messages) == 1 and words in messages[0], messages


@pytest.mark.parametrize(
    ("binding", "words"),
    [
        (
            _binding("ClusterRoleBindingPatch", "cluster-admin", False),
            "ClusterRoleBindingPatch cluster-admin has a built-in name, and declaring it changes the cluster's own",
        ),
        (_binding("ClusterRoleBindingPatch", "system:node-proxier", False), "has a built-in name"),
        (_binding("RoleBindingPatch", "readers", False), "names no roleRef"),
        (
            _binding("RoleBinding", "r", {"kind": "ClusterRole", "name": "system:controller:job-controller"}),
            "binds the built-in system:controller:job-controller",
        ),
        (
            _binding("RoleBinding", "r", {"kind": "ClusterRole", "name": " Cluster-Admin"}),
            "binds the built-in  Cluster-Admin role",
        ),
        (_binding("RoleBinding", "r", {"kind": "ClusterRole", "name": "view"}), "binds the built-in view role"),
        (_binding("RoleBinding", "r", {"kind": "Role", "name": "undeclared"}), "which the stack does not declare"),
    ],
)
def test_built_in_bindings_and_roles(binding, words):
    messages = [f.message for f in found(ROLE, binding)]
    assert any(words in m for m in messages), messages
    assert all(not f.unjudged for f in found(ROLE, binding, preview=True))


def test_a_list_of_bindings_is_judged_item_by_item():
    items = [_binding()[2], _binding("RoleBinding", "b", None, {"kind": "Group", "name": "system:authenticated"})[2]]
    listed = ("kubernetes:rbac.authorization.k8s.io/v1:RoleBindingList", "l", {"items": items})
    (finding,) = found(ROLE, listed)
    assert "RoleBinding b binds system:authenticated" in finding.message


def test_an_unknown_subject_is_judged_at_up():
    binding = _binding("RoleBinding", "readers", None, {**KSA, "name": UNKNOWN})
    (preview,) = found(ROLE, binding, preview=True)
    assert preview.unjudged and preview.level == "advisory" and ".subjects[0].name" in preview.message
    assert any("cannot judge" in f.message and f.level == "mandatory" for f in found(ROLE, binding))
