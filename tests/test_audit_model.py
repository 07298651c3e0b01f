"""What the access audit judges, as plain values (tools/audit_model.py): IAM conditions read as IAM reads them (or named
as not evaluated), a policy's or a role's reply of another shape as one line, inheritance down a chain of policies,
Cloud Storage's convenience members, and RBAC bindings that administer a cluster."""

from __future__ import annotations

import pytest

from tools.audit_model import (
    Binding,
    Policy,
    ReplyShapeError,
    Resource,
    Target,
    bindings_of,
    condition_test,
    lines,
    permissions_of,
    rbac_reaches,
    reaches,
    rules_reach_secrets,
    subject_member,
)

pytestmark = pytest.mark.pure

KEY = Resource(
    "projects/p/locations/global/keyRings/pulumi-state/cryptoKeys/tpu-rl-prod",
    "cloudkms.googleapis.com/CryptoKey",
    "cloudkms.googleapis.com",
)
RING = Resource(
    "projects/p/locations/global/keyRings/pulumi-state", "cloudkms.googleapis.com/KeyRing", "cloudkms.googleapis.com"
)
OBJECT = Resource("projects/_/buckets/b/objects/.pulumi/x", "storage.googleapis.com/Object", "storage.googleapis.com")

CONDITIONS = [
    (f'resource.name.startsWith("{KEY.name}")', {KEY: True, RING: False}),
    (f'!resource.name.startsWith("{KEY.name}")', {KEY: False, RING: True}),
    (f'resource.name == "{RING.name}"', {KEY: False, RING: True}),
    (f'resource.name != "{RING.name}"', {KEY: True, RING: False}),
    (
        'resource.type == "cloudkms.googleapis.com/KeyRing" || resource.name.endsWith("/tpu-rl-prod")',
        {KEY: True, RING: True},
    ),
    (
        'resource.service == "cloudkms.googleapis.com" && !(resource.type == "cloudkms.googleapis.com/KeyRing")',
        {KEY: True, RING: False},
    ),
    ("resource.name.startsWith('projects/_/buckets/b/objects/.pulumi/')", {OBJECT: True, KEY: False}),
]


@pytest.mark.parametrize(("expression", "expected"), CONDITIONS, ids=[str(n) for n in range(len(CONDITIONS))])
def test_a_condition_on_the_resource_is_evaluated_as_iam_reads_it(expression, expected):
    test = condition_test(expression)
    assert test is not None
    assert {resource: test(resource) for resource in expected} == expected


@pytest.mark.parametrize(
    "expression",
    [
        'request.time < timestamp("2030-01-01T00:00:00Z")',
        "api.getAttribute('iam.googleapis.com/modifiedGrantsByRole', []).hasOnly(['roles/viewer'])",
        'resource.name.startsWith("a") ||',
        'resource.name.startsWith("a"',
        'resource.name.matches("a.*")',
        "(" * 5000,
        "",
    ],
    ids=["time", "modified-grants", "dangling-or", "unclosed", "matches", "deep", "empty"],
)
def test_a_condition_it_does_not_read_is_not_evaluated(expression):
    assert condition_test(expression) is None


def target(*policies: Policy, resources: tuple[Resource, ...] = (KEY,), evaluable: bool = True) -> Target:
    return Target("decrypt stack prod's state key", frozenset({"d"}), policies, resources, evaluable)


def roles(role: str) -> frozenset[str] | None:
    return {"r/dec": frozenset({"d"}), "r/other": frozenset({"x"})}.get(role)


def test_a_grant_up_the_chain_reaches_down_it_and_the_own_list_and_agents_are_left_out():
    project = Policy(
        "project p",
        (
            Binding(
                "r/dec", ("user:a@x", "user:own@x", "serviceAccount:service-1@gcp-sa-x.iam.gserviceaccount.com"), ""
            ),
        ),
    )
    ring = Policy("key ring R", (Binding("r/dec", ("group:g@x",), ""), Binding("r/other", ("user:b@x",), "")))
    found, unread = reaches(target(project, ring), roles, frozenset({"user:own@x"}), {})
    assert lines(found) == [
        "user:a@x can decrypt stack prod's state key (r/dec on project p)",
        "group:g@x can decrypt stack prod's state key (r/dec on key ring R)",
    ]
    assert unread == []


def test_conditions_are_evaluated_where_the_service_reads_them_and_named_where_not():
    excluded = Binding("r/dec", ("user:a@x",), f'!resource.name.startsWith("{KEY.name}")')
    unknown = Binding("r/dec", ("user:b@x",), 'request.time < timestamp("2030-01-01T00:00:00Z")')
    policy = Policy("project p", (excluded, unknown))
    found, _ = reaches(target(policy), roles, frozenset(), {})
    assert lines(found) == [
        "user:b@x can decrypt stack prod's state key (r/dec on project p, conditional, not evaluated: request.time < "
        'timestamp("2030-01-01T00:00:00Z"))'
    ]
    found, _ = reaches(target(policy, evaluable=False), roles, frozenset(), {})
    assert [r.member for r in found] == ["user:a@x", "user:b@x"], "a service without resource attributes"


def test_a_convenience_member_is_every_holder_of_its_basic_role_and_an_unread_role_is_named():
    policy = Policy(
        "gs://b", (Binding("r/dec", ("projectEditor:12", "deleted:user:gone@x"), ""), Binding("r/x", ("user:c@x",), ""))
    )
    found, unread = reaches(
        target(policy), roles, frozenset({"user:own@x"}), {"roles/editor": ("user:own@x", "user:e@x")}
    )
    assert [r.member for r in found] == ["user:e@x"]
    assert unread == [("r/x", "gs://b")]


@pytest.mark.parametrize(
    ("reply", "line"),
    [
        ([], "the policy is not a JSON object"),
        ({"bindings": {}}, "bindings is dict, not a list"),
        ({"bindings": [1]}, "bindings[0] is not an object"),
        ({"bindings": [{"role": 5, "members": []}]}, "bindings[0].role is int, not text"),
        ({"bindings": [{"role": "r", "members": "user:a"}]}, "bindings[0].members is str, not a list"),
        ({"bindings": [{"role": "r", "members": [], "condition": "x"}]}, "bindings[0].condition is not an object"),
        ({"bindings": [{"role": "r"}] * 1501}, "bindings has 1501 entries, more than 1500"),
    ],
)
def test_a_policy_of_another_shape_is_one_line_naming_the_field(reply, line):
    with pytest.raises(ReplyShapeError) as caught:
        bindings_of(reply, "the IAM policy of project p")
    assert str(caught.value) == f"the IAM policy of project p: {line}"


def test_a_policy_and_a_role_as_google_answers_them():
    reply = {
        "version": 3,
        "etag": "BwY=",
        "bindings": [{"role": "r", "members": ["user:a@x"], "condition": {"expression": "e", "title": "t"}}],
    }
    assert bindings_of(reply, "p") == (Binding("r", ("user:a@x",), "e"),)
    assert bindings_of({"etag": "BwY="}, "p") == ()
    assert permissions_of({"name": "roles/x", "includedPermissions": ["a", "b"]}, "roles/x") == frozenset({"a", "b"})
    with pytest.raises(ReplyShapeError, match="the role roles/x: includedPermissions is str, not a list"):
        permissions_of({"includedPermissions": "a"}, "roles/x")


SECRETS = [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]


@pytest.mark.parametrize(
    ("rules", "expected"),
    [
        (SECRETS, True),
        ([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["list"]}], True),
        ([{"apiGroups": ["apps"], "resources": ["*"], "verbs": ["*"]}], True),
        ([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]}], False),
        ([{"apiGroups": ["apps"], "resources": ["secrets"], "verbs": ["get"]}], False),
        ([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}], False),
        (None, False),
        (["x"], False),
    ],
)
def test_a_role_reaches_the_clusters_secrets(rules, expected):
    assert rules_reach_secrets(rules) is expected


@pytest.mark.parametrize(
    ("subject", "member"),
    [
        ({"kind": "User", "name": "a@example.com"}, "user:a@example.com"),
        ({"kind": "User", "name": "ci@p.iam.gserviceaccount.com"}, "serviceAccount:ci@p.iam.gserviceaccount.com"),
        ({"kind": "Group", "name": "ops@example.com"}, "group:ops@example.com"),
        ({"kind": "Group", "name": "system:masters"}, None),
        ({"kind": "User", "name": "system:kube-controller-manager"}, None),
        ({"kind": "ServiceAccount", "name": "default", "namespace": "x"}, None),
        ({"kind": "User", "name": 5}, None),
    ],
)
def test_an_rbac_subject_as_an_iam_member(subject, member):
    assert subject_member(subject) == member


def test_rbac_bindings_that_administer_the_cluster_or_read_its_secrets():
    bindings = [
        {
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "a"},
            "roleRef": {"kind": "ClusterRole", "name": "edit"},
            "subjects": [{"kind": "User", "name": "a@x"}],
        },
        {
            "kind": "RoleBinding",
            "metadata": {"name": "b", "namespace": "tpu-rl"},
            "roleRef": {"kind": "Role", "name": "reader"},
            "subjects": [{"kind": "User", "name": "b@x"}],
        },
        {
            "kind": "RoleBinding",
            "metadata": {"name": "c", "namespace": "tpu-rl"},
            "roleRef": {"kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "name": "c@x"}],
        },
        {
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "d"},
            "roleRef": {"kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"kind": "User", "name": "own@x"}],
        },
        "not a binding",
    ]
    found = rbac_reaches(
        bindings, {("Role", "tpu-rl/reader"): SECRETS, ("ClusterRole", "view"): []}, "c1", frozenset({"user:own@x"})
    )
    assert lines(found) == [
        "user:a@x can administer cluster c1 (RBAC: ClusterRoleBinding a binds ClusterRole edit)",
        "user:b@x can administer cluster c1 (RBAC: RoleBinding tpu-rl/b binds Role reader)",
    ]


def test_one_line_per_member_and_grant_with_a_shared_verb_said_once():
    from tools.audit_model import Reach

    found = [
        Reach("user:a@x", "set IAM on key ring R", "r on p"),
        Reach("user:a@x", "set IAM on the key K", "r on p"),
        Reach("user:a@x", "decrypt stack prod's state key", "r on p"),
        Reach("user:a@x", "set IAM on key ring R", "r on p"),
        Reach("user:a@x", "mint tokens of A", "s on p"),
    ]
    assert lines(found) == [
        "user:a@x can set IAM on key ring R, the key K and decrypt stack prod's state key (r on p)",
        "user:a@x can mint tokens of A (s on p)",
    ]
