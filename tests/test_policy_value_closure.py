"""How closed the policy pack is on values, drawn: a change of one leaf of the program's own plans of the example
stacks (another value of its kind, another resource's value at the same path, any text or number where one stands),
judged
by the whole pack as the engine runs it at `pulumi up`, is refused, or its path is among the open ones
(tests/data/open-value-paths.txt, which `python -m tests.value_closure --write` rewrites from a sweep of every leaf).
The list is the pack's honest measure: a path leaves it when the pack closes its values, never silently."""

from __future__ import annotations

import functools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import value_closure as closure

pytestmark = [pytest.mark.slow, pytest.mark.program]


@functools.cache
def _closed(stack: str) -> tuple[closure.Leaf, ...]:
    opened = closure.open_paths()
    return tuple(leaf for leaf in closure.leaves(stack) if closure.key(leaf) not in opened)


@functools.cache
def _others(stack: str) -> dict[str, list[object]]:
    return closure.others(stack)


def _values(leaf: closure.Leaf) -> st.SearchStrategy[object]:
    drawn: st.SearchStrategy[object] = st.sampled_from(closure.candidates(leaf, _others(leaf.stack), swaps=8))
    if isinstance(leaf.value, bool):
        return drawn
    if isinstance(leaf.value, int | float):
        return st.one_of(drawn, st.integers(-(2**31), 2**31).filter(lambda v: v != leaf.value))
    if isinstance(leaf.value, str):
        return st.one_of(drawn, st.text(min_size=1, max_size=40).filter(lambda v: v != leaf.value))
    return drawn  # an object's or a list's: the API server refuses a value of another kind before any pod runs


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_change_at_a_closed_path_is_refused(data):
    stack = data.draw(st.sampled_from(closure.STACKS))
    leaf = data.draw(st.sampled_from(_closed(stack)))
    value = data.draw(_values(leaf))
    assert closure.refused(closure.with_change(leaf, value), stack), (closure.key(leaf), leaf.name, value)


def test_every_open_path_is_a_path_of_the_plans():
    """No stale line: each open path is one the example stacks' plans hold (a path closed by a change of the program
    leaves the list at the next sweep)."""
    held = {closure.key(leaf) for stack in closure.STACKS for leaf in closure.leaves(stack)}
    assert sorted(closure.open_paths() - held) == []


def test_the_docs_count_the_open_paths():
    from tools.stack_files import ROOT

    said = (ROOT / "docs" / "policies.md").read_text()
    assert (
        f"\n{len(closure.open_paths())} of them today" in said or f" {len(closure.open_paths())} of them today" in said
    )
