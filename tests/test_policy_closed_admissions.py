"""``closed-world-shapes``' admissions (``closed-world-shapes.admit`` in the policy config) that are not entries: an
item that is not an object is a finding naming its index and admits nothing, the items after it still read; an
``admit`` that is not a list never reaches the policy, the engine refuses it against the policy's schema. Judged
through pulumi-policy's analyzer with the stack's configuration as the engine sends it."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from core.errors import BadInputError
from tests import analyzer

pytestmark = pytest.mark.pure

POLICY = importlib.import_module("policy.tpu_rl_policies.closed_shapes").closed_world_shapes
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
FIX = "or admit with a reason in the base branch's policy/config/<stack>.json (closed-world-shapes.admit)"
TOKEN = f"r: data.token is not a property the program sets on {CONFIG_MAP}: remove it, {FIX}"
"""The finding on a ConfigMap holding ``data.token``, a path the program never sets, when nothing admits it."""
ADMITTED = {"path": f"{CONFIG_MAP}:data.token", "reason": "the team's scripts read it"}


def messages(admit: Any) -> list[str]:
    """What ``closed-world-shapes`` says at `pulumi up` of a ConfigMap holding ``data.token``, with ``admit``."""
    config = {"all": "mandatory", "closed-world-shapes": {"enforcementLevel": "mandatory", "admit": admit}}
    pack = analyzer.Pack(config, policies=[POLICY], stack="dev", stack_config=analyzer.engine_config("dev"))
    metadata = {"name": "c", "namespace": "tpu-rl"}
    props = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {"token": "x"}}
    resource = analyzer.Resource(CONFIG_MAP, "r", f"urn:pulumi:dev::tpu-rl::{CONFIG_MAP}::r", props)
    return [f.message for f in pack.analyze(resource)]


def not_an_object(index: int) -> str:
    return f"the policy config's closed-world-shapes admit[{index}] is not an object; it admits nothing until fixed"


@pytest.mark.parametrize(
    ("admit", "expected"),
    [
        ([f"{CONFIG_MAP}:data.token"], [not_an_object(0), TOKEN]),
        (["path"], [not_an_object(0), TOKEN]),
        ([5, None, ["path"], ADMITTED], [not_an_object(0), not_an_object(1), not_an_object(2)]),
    ],
    ids=["path-text", "key-text", "then-an-entry"],
)
def test_an_item_that_is_not_an_object_is_named_and_admits_nothing(admit, expected):
    """An item written as the path alone (or a key's name, a number, null, a list) is no entry: it is named by its
    index and admits nothing (``data.token`` stays a finding), and a well-formed entry after it still admits."""
    assert messages(admit) == expected


@pytest.mark.parametrize("admit", ["everything", {"path": f"{CONFIG_MAP}:data.token", "reason": "r"}, None])
def test_an_admit_that_is_not_a_list_is_refused_by_the_engine(admit):
    """The policy's schema declares ``admit`` an array: the engine refuses any other value before the pack runs."""
    with pytest.raises(BadInputError, match=r"closed-world-shapes\.admit: .* is not of type array$"):
        messages(admit)
