"""What a policy reads: plain copies of the props, and the values the engine does not know yet (``Unseen``),
noted as they are read so a policy says what it could not see (``resources._judged``)."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from typing import Any

from pulumi_policy import ResourceValidationArgs, StackValidationArgs, proxy
from pulumi_policy.proxy import UnknownValueError


class _Unknown:
    """A value this policy cannot see: what a container gets only at run time (a ``fieldRef``), an object the stack
    does not declare (``UNKNOWN``), or a value the engine does not know yet (``Unseen``)."""

    def __repr__(self) -> str:
        return "(not known during preview)"

    __str__ = __repr__


UNKNOWN: Any = _Unknown()


class Unseen(_Unknown):
    """A value the engine does not know yet, at its property path: at a preview, an output of a resource not created
    yet (the engine sends a sentinel string; ``rpc.go`` ``marshalUnknownProperty``).

    Reading it to decide anything (its truth, an equality, a membership, its text, its items) notes it, so a policy
    never passes it as an empty or harmless value: a policy that noted one says what it could not see (``_judged``:
    advisory at a preview, a finding at ``pulumi up``, where the engine knows every value). It is neither equal nor
    unequal to anything (``==`` and ``!=`` are both false): a check either way is noted, and decides nothing."""

    def __init__(self, path: str, owner: tuple[str, str] | None = None) -> None:
        self.path = path
        self.owner = owner
        """(URN, type) of the resource it is a value of, in a stack validation (None: the resource judged)."""

    def __bool__(self) -> bool:
        _note(self)
        return False

    def __eq__(self, other: object) -> bool:
        _note(self)
        return False

    def __ne__(self, other: object) -> bool:
        _note(self)
        return False

    def __hash__(self) -> int:  # a lookup in a set or a mapping: a membership decided on it
        _note(self)
        return id(self)

    def __str__(self) -> str:
        _note(self)
        return "(not known during preview)"

    __repr__ = __str__

    def __iter__(self) -> Iterator[Any]:
        _note(self)
        return iter(())

    def __len__(self) -> int:
        _note(self)
        return 0

    def __contains__(self, item: object) -> bool:
        _note(self)
        return False


_UNSEEN: ContextVar[list[tuple[Unseen, tuple[int, ...]]] | None] = ContextVar("tpu_rl_unseen", default=None)
"""The unknown values the running validation read, each with the scope it was read in (``_judged`` sets it up)."""
_SCOPE: ContextVar[tuple[int, ...]] = ContextVar("tpu_rl_scope", default=())
_SCOPES = itertools.count(1)


def _note(value: Unseen) -> None:
    seen = _UNSEEN.get()
    if seen is not None:
        seen.append((value, _SCOPE.get()))


@contextlib.contextmanager
def judging() -> Iterator[None]:
    """A part of a check judged on its own (one container, one object's metadata): a finding reported inside it
    rests only on the unknown values read inside it or around it before, not on those of a part judged before it."""
    token = _SCOPE.set((*_SCOPE.get(), next(_SCOPES)))
    try:
        yield
    finally:
        _SCOPE.reset(token)


def unseen(value: Any) -> bool:
    """Whether ``value`` is one the engine does not know yet (noted as read)."""
    if isinstance(value, Unseen):
        _note(value)
        return True
    return False


_UNKNOWN_SENTINELS = frozenset(
    (
        proxy.UNKNOWN_BOOLEAN_VALUE,
        proxy.UNKNOWN_NUMBER_VALUE,
        proxy.UNKNOWN_STRING_VALUE,
        proxy.UNKNOWN_ARRAY_VALUE,
        proxy.UNKNOWN_ASSET_VALUE,
        proxy.UNKNOWN_ARCHIVE_VALUE,
        proxy.UNKNOWN_OBJECT_VALUE,
    )
)
"""``pulumi_policy.proxy``'s markers of unknown values (a raw, unproxied props dict carries them as strings)."""
_UNKNOWN_STRING = proxy.UNKNOWN_STRING_VALUE
_MAX_DEPTH = 64


def _key_path(path: str, key: Any) -> str:
    return f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}"


_DICT_PROXY: Any = getattr(proxy, "_DictProxy", None)
_LIST_PROXY: Any = getattr(proxy, "_ListProxy", None)
"""pulumi-policy's read-only proxies (``unknown_checking_proxy``). ``plain`` reads what one wraps through the key the
proxy keeps for it (``"__target"``), at once, not item by item through the check that raises on an unknown: the
unknown's sentinel found there becomes the same ``Unseen``. (Another type, or none of this name, is read item by item.)
"""
_LEAVES = frozenset((int, bool, type(None)))


def plain(value: Any, depth: int = 0, path: str = "", owner: tuple[str, str] | None = None) -> Any:
    """A plain copy of analyzer props: read-only proxies become ``dict`` and ``list``; every value the preview does not
    know becomes an ``Unseen`` at its path (the proxies raise on reading one, which would stop the whole policy with an
    advisory "can't run during preview": a mandatory policy silently off for the values it had not read yet); a
    number that is whole becomes an ``int`` (the engine sends every number as a double and pulumi-policy reads it
    with ``json_format.MessageToDict``: ``parallelism: 1`` arrives as ``1.0``, still a count)."""
    return _plain(value, depth, path, None, owner)


def _plain(value: Any, depth: int, parent: str, key: Any, owner: tuple[str, str] | None) -> Any:
    """``plain`` of the item ``key`` of what is at ``parent`` (``None``: the value at ``parent`` itself). The path is
    written only where an ``Unseen`` keeps it or a container passes it on: most of what a policy reads is text."""
    if depth > _MAX_DEPTH:
        return Unseen(f"{_at(parent, key)} (nested more than {_MAX_DEPTH} levels)", owner)
    kind = type(value)
    if kind is str:
        return Unseen(_at(parent, key) or ".", owner) if value in _UNKNOWN_SENTINELS else value
    if kind in _LEAVES:
        return value
    if kind is float:
        return int(value) if value.is_integer() else value
    path = _at(parent, key)
    if kind is _DICT_PROXY or kind is dict:
        return _plain_dict(value["__target"] if kind is _DICT_PROXY else value, kind is _DICT_PROXY, depth, path, owner)
    if kind is _LIST_PROXY or kind is list:
        target = value["__target"] if kind is _LIST_PROXY else value
        return [_plain(item, depth + 1, path, index, owner) for index, item in enumerate(target)]
    return _plain_other(value, depth, path, owner)


def _at(parent: str, key: Any) -> str:
    return parent if key is None else _key_path(parent, key)


def _plain_dict(target: dict[Any, Any], proxied: bool, depth: int, path: str, owner: tuple[str, str] | None) -> Any:
    """``plain`` of a dict (what a proxy wraps, ``proxied``), item by item."""
    out: dict[Any, Any] = {}
    for key, item in target.items():
        if proxied and key == "__target":
            item = target  # a proxy answers its own key with what it wraps, whatever its item there holds
        out[key] = _plain(item, depth + 1, path, key, owner)
    return out


def _plain_other(value: Any, depth: int, path: str, owner: tuple[str, str] | None) -> Any:
    """``plain`` of a value of any other type (a subclass, another mapping or sequence), read item by item."""
    if isinstance(value, str):
        return Unseen(path or ".", owner) if value in _UNKNOWN_SENTINELS else value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        out: dict[Any, Any] = {}
        for key in list(value):
            try:
                item = value[key]
            except UnknownValueError:
                item = _UNKNOWN_STRING
            out[key] = plain(item, depth + 1, _key_path(path, key), owner)
        return out
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        items: list[Any] = []
        for index in range(len(value)):
            try:
                item = value[index]
            except UnknownValueError:
                item = _UNKNOWN_STRING
            items.append(plain(item, depth + 1, _key_path(path, index), owner))
        return items
    return value


def _config(args: ResourceValidationArgs | StackValidationArgs) -> dict[str, Any]:
    """The policy's config as plain values (the engine sends it as a Struct: ``256`` arrives as ``256.0``): every key
    its schema gives a default holds a value of the schema's type (the engine fills the defaults and refuses any
    other type before the pack runs: ``ReconcilePolicyPackConfig``, ``tests/analyzer.py`` ``reconciled``)."""
    config = plain(args.get_config())
    return config if isinstance(config, dict) else {}


def _m(value: Any) -> dict[Any, Any]:
    """``value`` if it is a mapping, else an empty one (a list where a mapping belongs reads as nothing; an unknown one
    is noted as read)."""
    unseen(value)
    return value if isinstance(value, dict) else {}


def _l(value: Any) -> list[Any]:
    unseen(value)
    return value if isinstance(value, list) else []


def _yaml(value: Any) -> str:
    """A manifest value as the manifest spells it (``true``, not Python's ``True``)."""
    return "true" if value is True else "false" if value is False else str(value)


def _on(value: Any) -> bool:
    """A boolean field that is set to anything but false (``true`` or malformed); one not known yet is noted, not
    judged (``_judged``)."""
    return not unseen(value) and value is not None and value is not False
