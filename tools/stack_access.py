"""A stack file's ``tpu-rl:access``: who the stack names as its own (``core.settings.AccessSettings``), read for
`make state-bucket` and written by it.

``declared`` reads the key alone from ``Pulumi.<stack>.yaml`` with the configuration's own readers (a problem of it
is one ``ConfigError`` line each, exit 2; the file's other keys are not read: the state is made before the stack's
settings are final). ``record`` appends the members `make state-bucket` granted that the key does not name yet
(``MEMBERS=`` and the caller to ``members``, ``READERS=`` to ``readers``) to their lists, as `pulumi config set --path
'tpu-rl:access.members[N]'` appends an item: a block list under its field, two spaces deeper than the field
(``with_access``); every other line of the file is kept as it was, comments included, and the result must read as the
same file with those items more, or nothing is written.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from core.errors import TpuRlError
from core.inputs import InputError, parse_yaml
from core.names import PROJECT
from core.printed_commands import make_target
from core.settings import AccessSettings
from tools.state_home import StateRefusedError

KEY = f"{PROJECT}:access"
FIELDS = ("members", "readers")


def declared(stack: str, root: Path) -> AccessSettings:
    """``tpu-rl:access`` of ``root``'s ``Pulumi.<stack>.yaml`` (``ConfigError`` or ``StackFileError``, exit 2)."""
    from core.config.load import read_access
    from tools.stack_files import load_stack_config

    config, _, _ = load_stack_config(root / f"Pulumi.{stack}.yaml")
    return read_access(config, stack)


def missing(access: AccessSettings, field: str, members: tuple[str, ...]) -> tuple[str, ...]:
    """The members of ``members`` that ``access``'s ``field`` does not name yet (as IAM reads an email: in any case)."""
    named = {m.lower() for m in getattr(access, field)}
    return tuple(m for m in dict.fromkeys(members) if m.lower() not in named)


def record(stack: str, root: Path, access: AccessSettings, members: tuple[str, ...], readers: tuple[str, ...]) -> None:
    """Append to the stack file's ``tpu-rl:access`` the ``members`` and ``readers`` it does not name yet, and say so
    in one line (nothing when it names them all)."""
    added = {"members": missing(access, "members", members), "readers": missing(access, "readers", readers)}
    if not any(added.values()):
        return
    path = root / f"Pulumi.{stack}.yaml"
    text = path.read_text()
    for field, items in added.items():
        if items:
            text = with_access(text, path.name, field, items)
    path.write_text(text)
    said = "; ".join(f"{KEY}.{field} {', '.join(items)}" for field, items in added.items() if items)
    print(
        f"recorded {said} in {path.name}: commit it, so that the access audit of `{make_target('up', stack)}` counts "
        "them as the stack's own (docs/audit.md#the-stacks-own-list)"
    )


def with_access(text: str, name: str, field: str, items: tuple[str, ...]) -> str:
    """``text`` (a stack file) with ``items`` appended to ``tpu-rl:access.<field>`` (module docstring);
    StateRefusedError when the result would read as anything but the same file with those items more."""
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    try:
        written = _appended(lines, field, items)
    except _InlineError:
        written = ""
    _check(text, written, name, field, items)
    return written


class _InlineError(TpuRlError):
    """A key holds its value on its own line (a flow list or object): nothing this module appends to (caught here:
    the file is refused as one that cannot take the items)."""


def _appended(lines: list[str], field: str, items: tuple[str, ...]) -> str:
    config = _block(lines, -1, "config")
    if config is None:
        written = "".join(lines) + "config:\n" + _access("  ", field, items)
    else:
        start, end, indent = config
        access = _block(lines, start, KEY, indent, end)
        if access is None:
            written = "".join([*lines[:end], _access(indent or "  ", field, items), *lines[end:]])
        else:
            key_at, key_end, sub = access
            inner = sub or indent + "  "
            own = _block(lines, key_at, field, inner, key_end)
            if own is None:
                added = f"{inner}{field}:\n" + "".join(f"{inner}  - {m}\n" for m in items)
                written = "".join([*lines[:key_end], added, *lines[key_end:]])
            else:
                _, field_end, item = own
                dash = item or inner + "  "
                added = "".join(f"{dash}- {m}\n" for m in items)
                written = "".join([*lines[:field_end], added, *lines[field_end:]])
    return written


def _access(indent: str, field: str, items: tuple[str, ...]) -> str:
    return f"{indent}{KEY}:\n{indent}  {field}:\n" + "".join(f"{indent}    - {m}\n" for m in items)


def _block(
    lines: list[str], parent: int, key: str, indent: str = "", end: int | None = None
) -> tuple[int, int, str] | None:
    """The lines of ``key:`` at ``indent`` among ``lines[parent + 1 : end]``: its line, the line after its block,
    and its block's indent ("" for an empty block); None when there is no such key. A key with a value on its own line
    (a flow list, ``[]``) is none this can append to: ``_InlineError``."""
    stop = len(lines) if end is None else end
    pattern = re.compile(rf"{re.escape(indent)}{re.escape(key)}:[ \t]*(?P<rest>[^\n]*)\n")
    for at in range(parent + 1, stop):
        found = pattern.fullmatch(lines[at])
        if found is None:
            continue
        if found.group("rest") and not found.group("rest").lstrip().startswith("#"):
            raise _InlineError
        inner, after = "", at + 1
        for below in range(at + 1, stop):
            line = lines[below]
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            depth = line[: len(line) - len(line.lstrip())]
            if len(depth) <= len(indent) and not (line.lstrip().startswith("- ") and len(depth) == len(indent)):
                break
            inner = inner or depth
            after = below + 1
        return at, after, inner
    return None


def _check(before_text: str, written: str, name: str, field: str, items: tuple[str, ...]) -> None:
    """``written`` reads as ``before_text`` with ``items`` more in ``tpu-rl:access.<field>``, or StateRefusedError."""
    try:
        before, after = parse_yaml(before_text, name) or {}, parse_yaml(written, name) if written else None
    except InputError as err:
        raise StateRefusedError(str(err)) from None
    config: Any = before.get("config") if isinstance(before, dict) else None
    config = config if isinstance(config, dict) else {}
    access = config.get(KEY) or {}
    listed = access.get(field) or [] if isinstance(access, dict) else None
    if isinstance(listed, list) and isinstance(access, dict):
        wanted = {**before, "config": {**config, KEY: {**access, field: [*listed, *items]}}}
        if after == wanted:
            return
    raise StateRefusedError(
        f"{name} cannot take {', '.join(items)} in {KEY}.{field} here; add them to that list yourself, one "
        "`- <member>` a line"
    )
