"""The stack's namespace as the policy pack reads it (``resources.Deployment.namespace``): ``tpu-rl:namespace`` as the
engine sends it in ``ConfigureStack``, or its default from the program's schema, one home for every policy that
judges what runs in it (``no-broad-rbac``'s own accounts, ``kueue-queue-fits``' namespace selector,
``pod-bindings``)."""

from __future__ import annotations

import pytest

from core.config.schema import FIELDS
from policy.tpu_rl_policies.resources import NAMESPACE_DEFAULT, Deployment
from tests import analyzer
from tests.rbac_stack import RBAC_POLICY, account, binding, role

pytestmark = pytest.mark.pure


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"tpu-rl:namespace": "rl-runs"}, "rl-runs"),
        ({}, "tpu-rl"),
        ({"tpu-rl:namespace": ""}, "tpu-rl"),
    ],
    ids=["configured", "unset", "empty"],
)
def test_the_namespace_is_the_configured_one_or_the_schemas_default(config, expected):
    assert Deployment(config=config).namespace() == expected


def test_the_default_is_the_programs():
    assert NAMESPACE_DEFAULT == next(f.default for f in FIELDS if f.key == "tpu-rl:namespace") == "tpu-rl"


@pytest.mark.parametrize(
    ("namespace", "expected"),
    [
        (None, []),
        (
            "rl-runs",
            [
                "RoleBinding b binds ServiceAccount tpu-rl/tpu-rl-dev-export, not one of the stack's Kubernetes "
                "service accounts in its namespace: bind the account of the step that needs it"
            ],
        ),
    ],
    ids=["default-namespace", "another-namespace"],
)
def test_the_stacks_own_accounts_are_those_in_its_configured_namespace(namespace, expected):
    """The stack's account in ``tpu-rl`` is its own only while ``tpu-rl`` is the stack's namespace."""
    config = {} if namespace is None else {"tpu-rl:namespace": namespace}
    own = {"kind": "ServiceAccount", "name": "tpu-rl-dev-export", "namespace": "tpu-rl"}
    pack = analyzer.Pack({"all": "mandatory"}, policies=[RBAC_POLICY], stack="dev", stack_config=config)
    found = pack.analyze_stack(
        [account(), role(), binding("RoleBinding", "b", {"kind": "Role", "name": "reader"}, own)]
    )
    assert [f.message for f in found] == expected
