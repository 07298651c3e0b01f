"""The tests' caches share nothing a test can change (tests/frozen.py): what a cache hands out refuses every change in
place, a copy of it is a plain value to change, and ``TPU_RL_NO_TEST_CACHE=1`` turns the caches off."""

from __future__ import annotations

import copy
import json
import pickle
from typing import Any

import pytest
import yaml

from tests import analyzer
from tests.frozen import NO_CACHE, FrozenDict, FrozenList, SharedValueError, caching, freeze
from tests.pure_plan import per_mutant_cache, pure_plan, remembering
from tools.plan.offline import Plan

VALUE: dict[str, Any] = {
    "spec": {"containers": [{"name": "c", "args": ["a", "b"]}], "replicas": 1},
    "pair": ({"k": [1]}, "x"),
}

DICT_CHANGES = {
    "item": lambda d: d.__setitem__("new", 1),
    "del": lambda d: d.__delitem__("spec"),
    "update": lambda d: d.update(new=1),
    "setdefault": lambda d: d.setdefault("new", 1),
    "pop": lambda d: d.pop("spec"),
    "popitem": lambda d: d.popitem(),
    "clear": lambda d: d.clear(),
    "ior": lambda d: d.__ior__({"new": 1}),
}
LIST_CHANGES = {
    "item": lambda items: items.__setitem__(0, "z"),
    "slice": lambda items: items.__setitem__(slice(0, 1), ["z"]),
    "del": lambda items: items.__delitem__(0),
    "append": lambda items: items.append("z"),
    "extend": lambda items: items.extend(["z"]),
    "insert": lambda items: items.insert(0, "z"),
    "pop": lambda items: items.pop(),
    "remove": lambda items: items.remove("a"),
    "clear": lambda items: items.clear(),
    "sort": lambda items: items.sort(),
    "reverse": lambda items: items.reverse(),
    "iadd": lambda items: items.__iadd__(["z"]),
    "imul": lambda items: items.__imul__(2),
}


@pytest.mark.parametrize("change", DICT_CHANGES.values(), ids=list(DICT_CHANGES))
def test_a_frozen_dict_refuses_every_change(change):
    shared = freeze(VALUE)
    with pytest.raises(
        SharedValueError, match=r"^this dict is shared by the tests' cache \(tests/frozen.py\): copy it"
    ):
        change(shared)
    with pytest.raises(SharedValueError):
        change(shared["spec"])
    assert shared == VALUE


@pytest.mark.parametrize("change", LIST_CHANGES.values(), ids=list(LIST_CHANGES))
def test_a_frozen_list_refuses_every_change(change):
    shared = freeze(VALUE)
    args = shared["spec"]["containers"][0]["args"]
    with pytest.raises(SharedValueError, match=r"^this list is shared by the tests' cache"):
        change(args)
    assert args == ["a", "b"]


def test_freezing_copies_and_leaves_the_value_given_as_it_was():
    given = copy.deepcopy(VALUE)
    shared = freeze(given)
    assert shared == given == VALUE
    assert type(shared) is FrozenDict and type(shared["spec"]["containers"]) is FrozenList
    assert type(shared["pair"]) is tuple and type(shared["pair"][0]["k"]) is FrozenList, "inside a tuple too"
    given["spec"]["replicas"] = 2  # the value given is still the caller's, and apart from the frozen copy
    assert type(given["spec"]) is dict and shared["spec"]["replicas"] == 1
    assert freeze(shared) is shared, "frozen once"


@pytest.mark.parametrize(
    "copied",
    [
        copy.deepcopy,
        lambda v: pickle.loads(pickle.dumps(v, protocol=5)),
        lambda v: json.loads(json.dumps(v)),
        lambda v: yaml.safe_load(yaml.safe_dump(v)),
    ],
    ids=["deepcopy", "pickle", "json", "yaml"],
)
def test_a_copy_of_a_frozen_value_is_plain_and_equal(copied):
    shared = freeze({"spec": {"args": ["a"], "n": 1}})
    mine = copied(shared)
    assert mine == shared and type(mine) is dict and type(mine["spec"]) is dict and type(mine["spec"]["args"]) is list
    mine["spec"]["args"].append("b")
    assert shared["spec"]["args"] == ["a"]


def test_a_shallow_copy_changes_at_its_top_only():
    shared = freeze({"spec": {"n": 1}, "items": [1]})
    for top in (copy.copy(shared), dict(shared), {**shared}):
        top["spec"] = {"n": 2}
        assert type(top) is dict and shared["spec"] == {"n": 1}
    items = copy.copy(shared["items"])
    items.append(2)
    assert type(items) is list and shared["items"] == [1] and shared["items"] + [2] == [1, 2]
    with pytest.raises(SharedValueError):
        copy.copy(shared)["spec"]["n"] = 2


def test_a_plan_is_frozen_field_by_field():
    plan = Plan(stack="dev", resources=[{"type": "t", "name": "n", "inputs": {"a": [1]}}], outputs={"o": {}})
    shared = freeze(plan)
    assert shared == plan and shared is not plan
    assert type(shared.resources) is FrozenList and type(shared.outputs["o"]) is FrozenDict
    assert type(shared.wire) is FrozenDict
    assert type(plan.resources) is list, "the plan given is unchanged"


def test_a_cached_plan_is_frozen_and_a_test_that_changes_it_fails(monkeypatch):
    monkeypatch.delenv(NO_CACHE, raising=False)
    plan = pure_plan("dev")
    assert pure_plan("dev") is plan
    with pytest.raises(SharedValueError):
        plan.resources[0]["inputs"]["name"] = "changed"
    with pytest.raises(SharedValueError):
        plan.resources.append({})
    mine = copy.deepcopy(plan)
    mine.resources[0]["inputs"]["name"] = "changed"
    assert pure_plan("dev").resources[0]["inputs"].get("name") != "changed"


def _counted() -> tuple[list[int], Any]:
    calls: list[int] = []

    def build(n: int) -> dict[str, Any]:
        calls.append(n)
        return {"n": n, "items": [n]}

    return calls, build


def test_a_cache_makes_each_value_once_and_hands_it_out_frozen(monkeypatch):
    monkeypatch.delenv(NO_CACHE, raising=False)
    calls, build = _counted()
    cached = per_mutant_cache(build)
    first = cached(1)
    assert cached(1) is first and calls == [1]
    with pytest.raises(SharedValueError):
        first["items"].append(2)


def test_a_bounded_cache_drops_the_least_recently_used(monkeypatch):
    monkeypatch.delenv(NO_CACHE, raising=False)
    calls, build = _counted()
    cached = per_mutant_cache(maxsize=2)(build)
    cached(1), cached(2), cached(1), cached(3)  # 2 is the least recently used when 3 comes
    assert calls == [1, 2, 3]
    cached(1), cached(3)
    assert calls == [1, 2, 3]
    cached(2)
    assert calls == [1, 2, 3, 2]


def test_each_mutant_has_its_own_cache_but_the_packs_share_a_product_result(monkeypatch):
    """A mutant of the product gets values made with it active; a mutant of the policy pack, which the product never
    imports, shares what the unmutated run made of a product-only function (a plan), not of one that reads the pack."""
    monkeypatch.delenv(NO_CACHE, raising=False)
    calls, build = _counted()
    plan, judged = per_mutant_cache(product_only=True)(build), per_mutant_cache(build)
    for mutant in ("", "policy.tpu_rl_policies.env.x__secret_data__mutmut_1", "core.redact.x_scrub__mutmut_1"):
        monkeypatch.setenv("MUTANT_UNDER_TEST", mutant)
        plan(1), judged(2)
    assert calls == [1, 2, 2, 1, 2], "the plan made again only for the product's mutant; the judgement for each"


def test_the_caches_are_off_with_no_test_cache(monkeypatch):
    monkeypatch.setenv(NO_CACHE, "1")
    assert not caching() and not remembering()
    calls, build = _counted()
    cached = per_mutant_cache(build)
    first, second = cached(1), cached(1)
    assert calls == [1, 1] and first is not second
    with pytest.raises(SharedValueError):  # frozen all the same: a test behaves alike with the caches on or off
        second["n"] = 2
    monkeypatch.setenv(NO_CACHE, "0")
    assert caching()


def test_the_analyzers_shared_plan_is_a_frozen_copy_made_once():
    plan = Plan(stack="dev", resources=[{"type": "t", "name": "n", "inputs": {"a": [1]}}], outputs={})
    shared = analyzer.frozen(plan)
    assert analyzer.frozen(plan) is shared and analyzer.frozen(shared) is shared
    assert type(plan.resources[0]["inputs"]) is dict, "the plan given is unchanged"
    with pytest.raises(SharedValueError):
        shared.resources[0]["inputs"]["a"].append(2)
    assert analyzer.inputs(shared, shared.resources[0]) == {"a": [1]}
