"""``no-broad-rbac`` on the rules a role holds and the role a binding references, through pulumi-policy's own analyzer
(``tests/analyzer.py``) on small stacks built by hand: a wildcard in any field of a rule (``apiGroups``,
``resources`` with a ``/*`` subresource among them, ``verbs``, ``nonResourceURLs``), an escalating verb or resource,
an aggregated ClusterRole, a binding of a built-in administrator role or a patch of a built-in binding, a subject
outside the stack. Each finding is the exact line an operator reads, on the URN of the resource that holds it."""

from __future__ import annotations

import pytest

from tests.rbac_stack import OWN, READER, binding, found, role, rule

pytestmark = pytest.mark.pure


@pytest.mark.parametrize(
    ("rules", "expected"),
    [
        ([rule(apiGroups=["*"])], ["ClusterRole wide rule 0 grants every apiGroup ('*'): list what it needs"]),
        ([rule(resources=["*"])], ["ClusterRole wide rule 0 grants every resource ('*'): list what it needs"]),
        ([rule(resources=["jobs/*"])], ["ClusterRole wide rule 0 grants every resource ('*'): list what it needs"]),
        (
            [rule(resources=["*/exec"], verbs=["create"])],
            ["ClusterRole wide rule 0 grants every resource ('*'): list what it needs"],
        ),
        ([rule(verbs=["*"])], ["ClusterRole wide rule 0 grants every verb ('*'): list what it needs"]),
        (
            [rule(), {"nonResourceURLs": ["*"], "verbs": ["get"]}],
            ["ClusterRole wide rule 1 grants every nonResourceURL ('*'): list what it needs"],
        ),
        ([{"nonResourceURLs": ["/healthz/*", "/metrics"], "verbs": ["get"]}], []),
        ([rule(apiGroups=["batch/*"], resources=["jobs", "jobs/status"])], []),
    ],
    ids=[
        "api-groups",
        "resources",
        "subresources",
        "every-resources-subresource",
        "verbs",
        "non-resource-urls",
        "url-prefix",
        "group-suffix",
    ],
)
def test_a_wildcard_in_any_field_of_a_rule_is_named_by_its_field(rules, expected):
    """``*`` is every value of the field it is in; in ``resources`` so are ``*/exec`` (that subresource of every
    resource, as Kubernetes' ``pkg/apis/rbac/v1/evaluation_helpers.go`` ``ResourceMatches`` reads it) and
    ``pods/*``, which in ``nonResourceURLs`` or ``apiGroups`` is a path or a name, not a wildcard of the resources."""
    wide = role("ClusterRole", "wide", *rules)
    assert found(wide) == [(wide.urn, message) for message in expected]


@pytest.mark.parametrize(
    ("rule_", "expected"),
    [
        (
            rule(resources=["roles", "clusterroles"], verbs=["escalate", "bind", "get"]),
            "Role grantor rule 0 grants bind, escalate: a way to any permission",
        ),
        (
            rule(resources=["secrets"], verbs=["list", "get"]),
            "Role grantor rule 0 grants get, list on secrets: it reads or changes the namespace's Secrets, the Hugging "
            "Face tokens among them",
        ),
        (
            rule(resources=["pods"], verbs=["get", "create", "delete"]),
            "Role grantor rule 0 grants create, delete, get on pods: a pod it creates runs as any service account of "
            "the namespace, with any Secret mounted",
        ),
    ],
    ids=["escalating-verbs", "secrets", "pods-create"],
)
def test_an_escalating_rule_names_every_verb_it_grants(rule_, expected):
    """The verbs are listed sorted and comma-separated, as an operator compares them with the rule."""
    grantor = role("Role", "grantor", rule_)
    assert found(grantor) == [(grantor.urn, expected)]


@pytest.mark.parametrize(
    ("aggregation", "expected"),
    [
        (
            {"clusterRoleSelectors": [{"matchLabels": {"rbac.example.com/aggregate-to-tpu-rl": "true"}}]},
            ["ClusterRole gathered aggregates other roles (aggregationRule): list its rules instead"],
        ),
        ({"clusterRoleSelectors": []}, []),
        ({}, []),
    ],
    ids=["selectors", "no-selectors", "empty"],
)
def test_an_aggregated_cluster_role_is_refused(aggregation, expected):
    """An aggregated ClusterRole holds whatever rules the ClusterRoles its selectors match hold, now or later: none
    of them is judged here. An aggregation selecting nothing adds nothing."""
    gathered = role("ClusterRole", "gathered", aggregationRule=aggregation)
    assert found(gathered) == [(gathered.urn, message) for message in expected]


def built_in(kind: str, name: str, role_name: str) -> str:
    return f"{kind} {name} binds the built-in {role_name} role: bind a role of the stack's with the rules it needs"


def admin(kind: str, name: str, role_name: str) -> str:
    return f"{kind} {name} binds the built-in {role_name} role: bind a role with the rules it needs"


@pytest.mark.parametrize(
    ("kind", "ref", "expected"),
    [
        ("RoleBinding", {"kind": "ClusterRole", "name": "admin"}, admin("RoleBinding", "b", "admin")),
        ("RoleBinding", {"kind": "ClusterRole", "name": " Edit"}, admin("RoleBinding", "b", " Edit")),
        (
            "ClusterRoleBinding",
            {"kind": "ClusterRole", "name": "cluster-admin"},
            admin("ClusterRoleBinding", "b", "cluster-admin"),
        ),
        ("RoleBinding", {"kind": "ClusterRole", "name": "view"}, built_in("RoleBinding", "b", "view")),
        ("RoleBinding", {"kind": "Role", "name": "admin"}, built_in("RoleBinding", "b", "admin")),
        (
            "RoleBinding",
            {"kind": "ClusterRole", "name": "system:aggregate-to-edit"},
            built_in("RoleBinding", "b", "system:aggregate-to-edit"),
        ),
    ],
    ids=["admin", "edit-spelled", "cluster-admin", "view", "role-named-admin", "system"],
)
def test_a_binding_of_a_built_in_role_names_the_role_it_binds(kind, ref, expected):
    """Only a ClusterRole is one of the cluster's built-in administrator roles (``cluster-admin``, ``admin``,
    ``edit``, however spelled); a Role of one of their names is refused by its name, as every other built-in one is."""
    bound = binding(kind, "b", ref, OWN)
    assert found(bound) == [(bound.urn, expected)]


def test_a_patch_of_a_built_in_binding_is_refused_with_the_role_it_leaves_undeclared():
    """A patch changes the cluster's own binding; with no roleRef it grants whatever role that binding holds."""
    patch = binding("ClusterRoleBindingPatch", "cluster-admin", None, OWN)
    assert found(patch) == [
        (
            patch.urn,
            "ClusterRoleBindingPatch cluster-admin has a built-in name, and declaring it changes the cluster's own: "
            "bind a role of the stack's in a binding of its own, in the stack's namespace",
        ),
        (
            patch.urn,
            "ClusterRoleBinding cluster-admin names no roleRef: the role it grants is whatever the binding it patches "
            "holds; declare it",
        ),
    ]


def outside(kind: str, name: str, subject: str) -> str:
    return (
        f"{kind} {name} binds {subject}, not one of the stack's Kubernetes service accounts in its namespace: bind "
        "the account of the step that needs it"
    )


@pytest.mark.parametrize(
    ("subject", "words"),
    [
        (
            {"kind": "User", "name": "alice@example.com", "apiGroup": "rbac.authorization.k8s.io"},
            "User alice@example.com",
        ),
        (
            {"kind": "ServiceAccount", "name": "tpu-rl-dev-export", "namespace": "kube-system"},
            "ServiceAccount kube-system/tpu-rl-dev-export",
        ),
        (
            {"kind": "Group", "name": "tpu-rl-operators@example.com", "apiGroup": "rbac.authorization.k8s.io"},
            "Group tpu-rl-operators@example.com",
        ),
    ],
    ids=["user", "other-namespace", "group"],
)
def test_a_subject_outside_the_stack_is_named_by_kind_namespace_and_name(subject, words):
    """A user or group has no namespace: it reads by its name alone."""
    bound = binding("RoleBinding", "b", READER, OWN, subject)
    assert found(bound) == [(bound.urn, outside("RoleBinding", "b", words))]
