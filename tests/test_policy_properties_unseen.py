"""What a value the engine does not know yet (``Unseen``) holds when a policy looks inside it: nothing. A check of
membership, length or items on one decides nothing in the policy's favour or against it; it is noted, so the policy
says what it could not see."""

from __future__ import annotations

from typing import Any

import pytest

from policy.tpu_rl_policies import properties
from policy.tpu_rl_policies.properties import Unseen
from tests.policy_args import noting

pytestmark = pytest.mark.pure


@pytest.mark.parametrize("item", ["hostPath", "", None, 0, ("a", "b")])
def test_nothing_is_in_an_unknown_and_looking_is_noted(item):
    """``"hostPath" in volume`` on a volume not known yet is false (no field is there to pass or refuse), and read."""
    unknown = Unseen("spec.volumes[0]")
    assert noting(lambda: item in unknown) == (False, [unknown])


def _noted(read: Any) -> list[Any]:
    """What reading with ``read`` noted as not known."""
    return noting(read)[1]


def test_an_unknown_has_no_items_and_counting_or_walking_them_is_noted():
    unknown = Unseen("spec.containers")
    assert len(unknown) == 0 and list(unknown) == []
    assert _noted(lambda: len(unknown)) == [unknown]
    assert _noted(lambda: [item for item in unknown]) == [unknown]


def test_a_value_no_policy_can_see_reads_as_such():
    """What a finding shows for a value known only at run time (a ``fieldRef``) or not declared by the stack."""
    assert repr(properties.UNKNOWN) == str(properties.UNKNOWN) == "(not known during preview)"


def test_two_unknowns_in_a_set_are_each_noted_once():
    """Each unknown hashes apart: putting two in a set reads each once, and compares neither with the other (a
    comparison would note one again, where another part of the policy is judged)."""
    first, second = Unseen("spec.a"), Unseen("spec.b")
    assert noting(lambda: {first, second})[1] == [first, second]
