"""``no-broad-rbac`` on which RBAC objects it judges and as what, through pulumi-policy's own analyzer
(``tests/analyzer.py``) on small stacks built by hand: a ``RolePatch`` or ``ClusterRolePatch`` has its rules judged as
the role it patches, and is refused when that role is one of the cluster's own; a binding's role is the stack's only
when its kind, its name and, for a Role, the binding's namespace match a role the stack declares, and a binding of any
other is named by that kind and name. Each finding is the exact line an operator reads, on the URN of the resource that
holds it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.rbac_stack import OWN, binding, found, resource, role, rule

pytestmark = pytest.mark.pure


def changes_built_in(kind: str, name: str) -> str:
    return (
        f"{kind} {name} has a built-in name, and declaring it changes the cluster's own: declare a role of the "
        "stack's in the stack's namespace"
    )


def in_system(kind: str, name: str, namespace: str) -> str:
    return (
        f"{kind} {name} is in {namespace}, where declaring it changes the cluster's own of that name: declare a role "
        "of the stack's in the stack's namespace"
    )


def undeclared(kind: str, name: str, ref_kind: str, ref_name: str) -> str:
    return (
        f"{kind} {name} binds the {ref_kind} {ref_name}, which the stack does not declare: its rules are not judged; "
        "bind a role of the stack's"
    )


@pytest.mark.parametrize(
    ("kind", "metadata", "expected"),
    [
        ("RolePatch", {"name": "reader", "namespace": "tpu-rl"}, "Role reader"),
        ("ClusterRolePatch", {"name": "pod-reader"}, "ClusterRole pod-reader"),
        ("ClusterRolePatch", {}, "ClusterRole pods-patch"),
    ],
    ids=["role", "cluster-role", "unnamed"],
)
def test_a_patch_of_a_role_has_its_rules_judged_as_the_role_it_patches(kind, metadata, expected):
    """The rules a patch applies become the patched role's; the finding names the role (``Role``, not ``RolePatch``),
    by its Kubernetes name or else the patch's Pulumi resource name."""
    patch = resource(kind, "pods-patch", {"metadata": metadata, "rules": [rule(verbs=["*"])]})
    assert found(patch) == [(patch.urn, f"{expected} rule 0 grants every verb ('*'): list what it needs")]


@pytest.mark.parametrize(
    ("kind", "metadata", "expected"),
    [
        ("ClusterRolePatch", {"name": "admin"}, [changes_built_in("ClusterRolePatch", "admin")]),
        (
            "ClusterRolePatch",
            {"name": " System:Basic-User"},
            [changes_built_in("ClusterRolePatch", " System:Basic-User")],
        ),
        (
            "RolePatch",
            {"name": "system:controller:bootstrap-signer", "namespace": "kube-system"},
            [in_system("RolePatch", "system:controller:bootstrap-signer", "kube-system")],
        ),
        ("ClusterRolePatch", {"name": "admins"}, []),
        ("Role", {"name": "view", "namespace": "tpu-rl"}, []),
        ("ClusterRole", {"name": "system:basic-user"}, [changes_built_in("ClusterRole", "system:basic-user")]),
        (
            "Role",
            {"name": "system:controller:bootstrap-signer", "namespace": "kube-public"},
            [in_system("Role", "system:controller:bootstrap-signer", "kube-public")],
        ),
        (
            "Role",
            {"name": "extension-apiserver-authentication-reader", "namespace": "kube-system"},
            [in_system("Role", "extension-apiserver-authentication-reader", "kube-system")],
        ),
        ("Role", {"name": "pod-reader", "namespace": "kube-system"}, [in_system("Role", "pod-reader", "kube-system")]),
        ("ClusterRole", {"name": "pod-reader"}, []),
        ("RolePatch", {"name": "Admin", "namespace": "tpu-rl"}, [changes_built_in("RolePatch", "Admin")]),
    ],
    ids=[
        "admin",
        "system-spelled",
        "kube-system-role",
        "near-miss",
        "namespaced-role-named-view",
        "upserted-cluster-role",
        "upserted-kube-public-role",
        "kube-system-role-without-system-prefix",
        "any-kube-system-role",
        "cluster-role-of-its-own-name",
        "patch-of-a-built-in-name-in-the-stacks-namespace",
    ],
)
def test_a_role_that_changes_a_built_in_one_is_refused_by_its_name_or_namespace(kind, metadata, expected):
    """A patch of ``admin`` or of any ``system:`` role, however spelled, changes what every binding of that role grants
    across the cluster (``system:basic-user`` is bound to every authenticated user), whatever rules it adds. A Role the
    stack declares in its own namespace under the name of a built-in ClusterRole is a role of its own; a ClusterRole
    of a built-in name is the cluster's own, which the provider's upsert (``upsertExistingObjects``) changes as a
    patch would. So is a Role of any name in ``kube-system`` or ``kube-public``: the cluster's own there are not all
    ``system:`` (``extension-apiserver-authentication-reader``)."""
    changed = resource(kind, "changed-res", {"metadata": metadata, "rules": [rule()]})
    assert found(changed) == [(changed.urn, message) for message in expected]


def declared(kind: str, name: str, namespace: str) -> Any:
    """A role of the stack's named ``name`` whose manifest carries ``namespace`` (a ClusterRole's too)."""
    return resource(kind, f"{name}-res", {"metadata": {"name": name, "namespace": namespace}, "rules": [rule()]})


def bound_in(namespace: str, kind: str, ref_kind: str, ref_name: str) -> Any:
    """A binding ``b`` in ``namespace`` of the role ``ref_kind``/``ref_name`` to the stack's own account."""
    body = {
        "metadata": {"name": "b", "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": ref_kind, "name": ref_name},
        "subjects": [OWN],
    }
    return resource(kind, "b-res", body)


@pytest.mark.parametrize(
    ("roles", "bound", "expected"),
    [
        ([declared("ClusterRole", "pod-reader", "tpu-rl")], ("tpu-rl", "ClusterRoleBinding", "ClusterRole"), None),
        ([declared("ClusterRole", "pod-reader", "tpu-rl")], ("tpu-rl", "RoleBinding", "ClusterRole"), None),
        ([declared("Role", "pod-reader", "tpu-rl")], ("tpu-rl", "RoleBinding", "Role"), None),
        ([], ("tpu-rl", "RoleBinding", "Role"), undeclared("RoleBinding", "b", "Role", "pod-reader")),
        (
            [declared("Role", "pod-reader", "tpu-rl")],
            ("tpu-rl", "RoleBinding", "ClusterRole"),
            undeclared("RoleBinding", "b", "ClusterRole", "pod-reader"),
        ),
        (
            [declared("Role", "pod-reader", "tpu-rl")],
            ("tpu-rl-other", "RoleBinding", "Role"),
            undeclared("RoleBinding", "b", "Role", "pod-reader"),
        ),
    ],
    ids=[
        "cluster-role-with-stray-namespace",
        "cluster-role-in-a-role-binding",
        "role",
        "undeclared",
        "role-of-that-name-only",
        "role-of-another-namespace",
    ],
)
def test_a_binding_binds_a_role_of_the_stacks_only_by_kind_name_and_namespace(roles, bound, expected):
    """A Role is the one of its name in the binding's namespace; a ClusterRole is cluster-wide, and a namespace in its
    manifest is dropped by the API server (``k8s.io/apiserver`` ``rest.BeforeCreate`` clears it on a cluster-scoped
    object). A binding of any other role is named by that role's kind and name, as ``kubectl`` shows its roleRef."""
    namespace, kind, ref_kind = bound
    binding_ = bound_in(namespace, kind, ref_kind, "pod-reader")
    assert found(*roles, binding_) == ([] if expected is None else [(binding_.urn, expected)])


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ({"kind": "Role", "name": "reader"}, None),
        ({"kind": "Role", "name": "writer"}, undeclared("RoleBinding", "b", "Role", "writer")),
        (
            {"kind": "ClusterRole", "name": "Edit"},
            "RoleBinding b binds the built-in Edit role: bind a role with the rules it needs",
        ),
        (
            {"kind": "ClusterRole", "name": "system:aggregate-to-view"},
            "RoleBinding b binds the built-in system:aggregate-to-view role: bind a role of the stack's with the rules "
            "it needs",
        ),
    ],
    ids=["own-role", "undeclared", "admin-role", "system-role"],
)
def test_a_binding_patch_is_judged_as_the_binding_it_patches(ref, expected):
    """A ``RoleBindingPatch`` of the stack's own binding, of the stack's own role, to its own account passes; one of any
    other role is named as the ``RoleBinding`` it patches, a built-in administrator role (``edit``, however spelled)
    apart from the other built-in ones."""
    patch = binding("RoleBindingPatch", "b", ref, OWN)
    assert found(patch) == ([] if expected is None else [(patch.urn, expected)])


def in_the(namespace: str, kind: str, name: str, ref: Any, *subjects: dict[str, Any]) -> Any:
    """``binding()`` with its metadata's namespace ``namespace`` (none when ``None``)."""
    bound = binding(kind, name, ref, *subjects)
    metadata = {"name": name} if namespace is None else {"name": name, "namespace": namespace}
    return resource(kind, f"{name}-res", {**bound.props, "metadata": metadata})


@pytest.mark.parametrize(
    ("namespace", "kind", "name", "expected"),
    [
        (
            None,
            "ClusterRoleBinding",
            "system:node",
            "ClusterRoleBinding system:node has a built-in name, and declaring it changes the cluster's own",
        ),
        (
            "kube-system",
            "RoleBinding",
            "readers",
            "RoleBinding readers is in kube-system, where declaring it changes the cluster's own of that name",
        ),
        ("tpu-rl", "RoleBinding", "system:node", None),
        (None, "ClusterRoleBinding", "readers", None),
    ],
    ids=["upserted-cluster-binding", "kube-system-binding", "namespaced-binding-of-a-system-name", "own-name"],
)
def test_a_binding_that_changes_one_of_the_clusters_is_refused_by_its_name_or_namespace(
    namespace, kind, name, expected
):
    """A ClusterRoleBinding of a built-in name is the cluster's own, which the provider's upsert replaces (its
    subjects and role with the stack's); so is a binding of any name in ``kube-system`` or ``kube-public``. A
    RoleBinding in the stack's own namespace is its own, whatever its name."""
    ref = {"kind": "ClusterRole" if kind.startswith("Cluster") else "Role", "name": "reader"}
    cluster_reader = role("ClusterRole", "reader")
    bound = in_the(namespace, kind, name, ref, OWN)
    remedy = ": bind a role of the stack's in a binding of its own, in the stack's namespace"
    messages = [message for urn, message in found(cluster_reader, bound) if urn == bound.urn]
    undeclared_role = undeclared(kind, name, "Role", "reader")
    assert [m for m in messages if m != undeclared_role] == ([] if expected is None else [expected + remedy])


@pytest.mark.parametrize(
    ("kind", "subject", "expected"),
    [
        ("RoleBinding", {"kind": "ServiceAccount", "name": "tpu-rl-dev-export"}, None),
        (
            "ClusterRoleBinding",
            {"kind": "ServiceAccount", "name": "tpu-rl-dev-export"},
            "ServiceAccount tpu-rl-dev-export",
        ),
        ("RoleBinding", {"kind": "User", "name": "alice@example.com", "namespace": "tpu-rl"}, "User alice@example.com"),
        ("RoleBinding", {"kind": "ServiceAccount", "name": "default"}, "ServiceAccount tpu-rl/default"),
    ],
    ids=["role-binding-namespace-defaulted", "cluster-binding-no-namespace", "user", "defaulted-other-account"],
)
def test_a_subject_without_a_namespace_is_in_a_role_bindings_own(kind, subject, expected):
    """A RoleBinding's ServiceAccount subject with no namespace is the binding's namespace's account (Kubernetes
    ``pkg/registry/rbac/validation/rule.go`` ``appliesToUser``), so the stack's own passes; a ClusterRoleBinding's has
    no namespace to default to and binds no account of the stack's. A subject is named as ``kubectl`` shows it: with
    its namespace only where it has one."""
    ref = {"kind": "ClusterRole" if kind.startswith("Cluster") else "Role", "name": "reader"}
    bound = binding(kind, "b", ref, subject)
    messages = [message for _, message in found(role("ClusterRole", "reader"), bound)]
    assert messages == (
        []
        if expected is None
        else [
            f"{kind} b binds {expected}, not one of the stack's Kubernetes service accounts in its namespace: bind "
            "the account of the step that needs it"
        ]
    )
