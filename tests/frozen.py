"""What the tests' per-process caches hand out, frozen: a cached plan, parse or answer is shared by every test of the
worker that asks for it again, so a test that changed one in place would change what the tests after it read (and
pass or fail by the order they run in). ``freeze`` copies a value into dicts and lists that refuse every change
(``SharedValueError``, naming the fix); a test copies what it means to change (``copy.deepcopy``, ``copy.copy``,
``dict(...)``, ``list(...)``, ``{**value}``: each copy is a plain, changeable one).

``TPU_RL_NO_TEST_CACHE=1`` turns the caches off (``caching``): every call computes afresh, as the scheduled run does
(``.github/workflows/scheduled.yml``), so a test that passes only on what another left in a cache fails there.
"""

from __future__ import annotations

import copy
import dataclasses
import os
from typing import Any, NoReturn

import yaml

NO_CACHE = "TPU_RL_NO_TEST_CACHE"


def caching() -> bool:
    """Whether the tests' caches may answer (not with ``TPU_RL_NO_TEST_CACHE=1``)."""
    return os.environ.get(NO_CACHE) != "1"


class SharedValueError(TypeError):
    """A test changed a value the tests' caches share."""


def _refuse(self: Any, *args: Any, **kwargs: Any) -> NoReturn:
    raise SharedValueError(
        f"this {'dict' if isinstance(self, dict) else 'list'} is shared by the tests' cache (tests/frozen.py): "
        "copy it (copy.deepcopy) before changing it"
    )


class FrozenDict(dict[Any, Any]):
    """A ``dict`` no one changes: it reads, compares, hashes into JSON, YAML and protobuf as a dict; a copy of it
    (``copy``, ``deepcopy``, a pickle) is a plain dict."""

    __slots__ = ()
    __setitem__ = __delitem__ = __ior__ = clear = pop = popitem = setdefault = update = _refuse

    def __copy__(self) -> dict[Any, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[Any, Any]:
        return {copy.deepcopy(k, memo): copy.deepcopy(v, memo) for k, v in self.items()}

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        return dict, (dict(self),)


class FrozenList(list[Any]):
    """A ``list`` no one changes (``FrozenDict``'s list)."""

    __slots__ = ()
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return [copy.deepcopy(v, memo) for v in self]

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        return list, (list(self),)


def freeze(value: Any) -> Any:
    """``value`` with every dict and list in it (inside tuples, and the fields of a dataclass that is not frozen, as a
    plan is) a frozen copy; anything else is itself. The value given is not changed."""
    kind = type(value)
    if kind is dict or kind is FrozenDict:
        return value if kind is FrozenDict else FrozenDict({k: freeze(v) for k, v in value.items()})
    if kind is list or kind is FrozenList:
        return value if kind is FrozenList else FrozenList([freeze(v) for v in value])
    if kind is tuple:
        return tuple(freeze(v) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type) and not kind.__dataclass_params__.frozen:
        return dataclasses.replace(value, **{f.name: freeze(getattr(value, f.name)) for f in _init_fields(value)})
    return value


def _init_fields(value: Any) -> list[dataclasses.Field[Any]]:
    return [f for f in dataclasses.fields(value) if f.init]


def _representers(cls: Any) -> set[Any]:
    """``cls`` and every class made from it so far."""
    found: set[Any] = {cls}
    for sub in cls.__subclasses__():
        found |= _representers(sub)
    return found


for _representer in _representers(yaml.representer.SafeRepresenter):  # a frozen value dumps as the dict or list it is
    _representer.add_representer(FrozenDict, yaml.representer.SafeRepresenter.represent_dict)
    _representer.add_representer(FrozenList, yaml.representer.SafeRepresenter.represent_list)
