"""The pack's property reading (``policy/tpu_rl_policies/properties.py``) where it does not read a value at once: props
read item by item (a proxy of a type ``plain`` does not know, another mapping or sequence, a subclass of ``str`` or
``float``), each unknown value an ``Unseen`` at its path and of its resource; what an ``Unseen`` answers and prints;
and how a manifest value is spelled in a message."""

from __future__ import annotations

import collections
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from pulumi_policy.proxy import UNKNOWN_NUMBER_VALUE, UNKNOWN_STRING_VALUE, UnknownValueError, unknown_checking_proxy

from policy.tpu_rl_policies import properties
from policy.tpu_rl_policies.properties import Unseen, _yaml, plain
from tests.policy_args import TYPE, noting, shown

pytestmark = pytest.mark.pure

OWNER = (f"urn:pulumi:dev::tpu-rl::{TYPE}::late", TYPE)
PROPS = {
    "spec": {
        "image": UNKNOWN_STRING_VALUE,
        "parallelism": 2.0,
        "ratio": 0.5,
        "args": ["run", UNKNOWN_NUMBER_VALUE, 3.0],
        "labels": {},
    }
}
READ = {
    "spec": {
        "image": ("unseen", "Job late: .spec.image", OWNER),
        "parallelism": ("int", 2),
        "ratio": ("float", 0.5),
        "args": [("str", "run"), ("unseen", "Job late: .spec.args[1]", OWNER), ("int", 3)],
        "labels": {},
    }
}
"""``PROPS`` as ``plain`` reads them for the resource ``OWNER``, at the path ``"Job late: "``."""


def test_a_proxy_of_a_type_plain_does_not_know_is_read_item_by_item(monkeypatch):
    """pulumi-policy's proxies, were their types not the ones ``plain`` reads at once, are read through their items:
    an item the proxy raises on (an unknown) is the same ``Unseen``, at its path and of its resource."""
    proxied = unknown_checking_proxy(PROPS)
    assert shown(plain(proxied, path="Job late: ", owner=OWNER)) == READ
    monkeypatch.setattr(properties, "_DICT_PROXY", None, raising=False)
    monkeypatch.setattr(properties, "_LIST_PROXY", None, raising=False)
    assert shown(plain(proxied, path="Job late: ", owner=OWNER)) == READ


class _Raising(Mapping[str, Any]):
    """A mapping that raises ``UnknownValueError`` on reading ``image``, as pulumi-policy's proxy does."""

    def __getitem__(self, key: str) -> Any:
        if key == "image":
            raise UnknownValueError(UNKNOWN_STRING_VALUE, [key])
        return {"replicas": 2.0}[key]

    def __iter__(self) -> Iterator[str]:
        return iter(("image", "replicas"))

    def __len__(self) -> int:
        return 2


class _Text(str):
    pass


class _Number(float):
    pass


@pytest.mark.parametrize(
    ("value", "path", "owner", "expected"),
    [
        (_Raising(), "p", OWNER, {"image": ("unseen", "p.image", OWNER), "replicas": ("int", 2)}),
        (
            collections.OrderedDict(a=[UNKNOWN_STRING_VALUE, 1.0], b=collections.UserList([2.5, UNKNOWN_STRING_VALUE])),
            "p",
            OWNER,
            {"a": [("unseen", "p.a[0]", OWNER), ("int", 1)], "b": [("float", 2.5), ("unseen", "p.b[1]", OWNER)]},
        ),
        ((UNKNOWN_STRING_VALUE, "a"), "", None, [("unseen", "[0]", None), ("str", "a")]),
        (_Text(UNKNOWN_STRING_VALUE), "spec.image", OWNER, ("unseen", "spec.image", OWNER)),
        (_Text(UNKNOWN_STRING_VALUE), "", None, ("unseen", ".", None)),
        (_Text("nginx"), "spec.image", OWNER, ("_Text", "nginx")),
        (_Number(2.0), "", None, ("int", 2)),
        (_Number(2.5), "", None, ("_Number", 2.5)),
    ],
    ids=["raising-mapping", "ordered-dict", "tuple", "text-unknown", "text-unknown-at-top", "text", "whole", "part"],
)
def test_another_mapping_sequence_or_subclass_is_read_like_a_dict_list_or_leaf(value, path, owner, expected):
    """A value of a type ``plain`` does not read at once is read as its base type would be: items one by one (an item a
    mapping raises ``UnknownValueError`` on is unknown), an unknown sentinel an ``Unseen`` at its path (``.`` at the
    top) and of its resource, a whole number a count."""
    assert shown(plain(value, path=path, owner=owner)) == expected


def test_an_unknown_is_neither_equal_nor_unequal_and_prints_as_not_known():
    """A check either way on an unknown decides nothing (``==`` and ``!=`` are both false), and a message that shows
    one says it is not known yet."""
    unknown = Unseen("spec.namespace", OWNER)
    for other in ("kueue-system", "", None, unknown):
        assert (unknown == other) is False
        assert (unknown != other) is False
    assert unknown.path == "spec.namespace" and unknown.owner == OWNER
    assert str(unknown) == repr(unknown) == f"{unknown}" == "(not known during preview)"
    assert f"namespace {unknown!r}" == "namespace (not known during preview)"


def test_a_check_on_an_unknown_is_noted():
    """Every way of reading an unknown to decide something is noted (what ``_judged`` names as not seen)."""
    unknown = Unseen("spec.namespace")
    reads, seen = noting(
        lambda: [unknown == "a", unknown != "a", str(unknown), hash(unknown), bool(unknown), "a" in unknown]
    )
    assert len(seen) == len(reads) and all(value is unknown for value in seen)


@pytest.mark.parametrize(
    ("value", "spelled"),
    [(True, "true"), (False, "false"), ("yes", "yes"), (1, "1"), ("True", "True"), (None, "None")],
)
def test_a_manifest_value_is_spelled_as_the_manifest_spells_it(value, spelled):
    """Booleans as YAML spells them (``true``, not Python's ``True``); any other value as its text."""
    assert _yaml(value) == spelled


def test_an_unknown_sentinel_that_is_the_whole_value_is_an_unseen_at_the_top():
    """The engine's sentinel as the whole value read (a whole field not known yet): its path is ``.``, which a finding
    shows ("cannot judge .")."""
    assert shown(plain(UNKNOWN_STRING_VALUE)) == ("unseen", ".", None)
