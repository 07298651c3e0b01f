"""Stack files and ``--set`` overrides, read the way the Pulumi CLI reads them (plain functions).

``load_stack_config`` merges the project's declared defaults, a ``Pulumi.<stack>.yaml`` and
``--set KEY=VALUE`` overrides into what the CLI would hand the program: full key -> string,
objects as JSON. Stack files are read with limits (size, no YAML aliases, so no alias bombs);
overrides use ``pulumi config set --path`` syntax (``a.b``, ``a[0]``, ``a["b.c"]``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.config.values import OPAQUE_SECRET, UNSET_SECRET
from core.errors import BadInputError
from core.inputs import MAX_DEPTH, InputError, parse_json, parse_yaml, read_file
from core.names import PROJECT
from core.redact import scrub

if TYPE_CHECKING:
    from core.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
MAX_STACK_FILE_BYTES = 1_000_000


class StackFileError(BadInputError):
    """The stack file or an override cannot be read (one line)."""


def read_yaml(path: Path) -> Any:
    """A YAML document read with limits (``core.inputs``: a regular file of at most 1 MB, no aliases, nesting
    and integers bounded); errors as one-line ``StackFileError``."""
    try:
        data = read_file(path, MAX_STACK_FILE_BYTES)
    except InputError as err:
        message = str(err)
        if "larger than" in message:
            message += "; a stack file is a few KB"
        raise StackFileError(message) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise StackFileError(f"{path} is not UTF-8 text") from None
    try:
        return parse_yaml(text, str(path))
    except InputError as err:
        raise StackFileError(str(err)) from None


def project_declarations(root: Path = ROOT) -> dict[str, dict[str, Any]]:
    """The ``config:`` declarations of Pulumi.yaml, keyed by full key."""
    project = read_yaml(root / "Pulumi.yaml")
    name = project["name"]
    declared = {}
    for key, decl in (project.get("config") or {}).items():
        full = key if ":" in key else f"{name}:{key}"
        declared[full] = decl if isinstance(decl, dict) else {"value": decl}
    return declared


def to_config_string(value: Any) -> str:
    """How the Pulumi CLI hands a config value to the program: strings, objects as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


# ---------------------------------------------------------------------------------------------
# `pulumi config set --path` syntax (sdk/go/common/resource/properties_path.go, parsePropertyPath)


def parse_property_path(path: str) -> list[str | int]:
    """``a.b[0]["c.d"]`` -> ``["a", "b", 0, "c.d"]``, as Pulumi parses ``--path`` keys."""
    elements: list[str | int] = []
    if path.startswith("."):
        raise ValueError("expected the path to start with a name or index")
    i = 0
    while i < len(path):
        char = path[i]
        if char == ".":
            i += 1
            if i == len(path):
                raise ValueError("expected the path to end with a name or index")
        elif char == "[":
            if path[i + 1 : i + 2] == '"':
                key, j = [], i + 2
                while True:
                    if j >= len(path):
                        raise ValueError("missing closing quote in a property name")
                    if path[j] == '"':
                        j += 1
                        break
                    if path[j] == "\\" and path[j + 1 : j + 2] == '"':
                        key.append('"')
                        j += 2
                    else:
                        key.append(path[j])
                        j += 1
                if path[j : j + 1] != "]":
                    raise ValueError("missing closing bracket in a property access")
                elements.append("".join(key))
                i = j + 1
            else:
                end = path.find("]", i)
                if end == -1:
                    raise ValueError("missing closing bracket in an array index")
                segment = path[i + 1 : end]
                if not segment.isascii() or not segment.isdigit() or len(segment) > 6:
                    raise ValueError(f"invalid array index {segment!r}")
                elements.append(int(segment))
                i = end + 1
        else:
            j = i
            while j < len(path) and path[j] not in ".[":
                j += 1
            elements.append(path[i:j])
            i = j
    return elements


def _container_for(element: str | int) -> Any:
    return [] if isinstance(element, int) else {}


def set_path(config: dict[str, Any], key: str, value: Any) -> None:
    """Apply ``KEY=VALUE`` as ``pulumi config set --path KEY VALUE`` does."""
    namespace, sep, rest = key.partition(":")
    if not sep or not namespace or not rest:
        raise StackFileError(f"--set {scrub(key, limit=120)}: expected NAMESPACE:KEY[.FIELD|[INDEX]...]=VALUE")
    try:
        elements = parse_property_path(rest)
    except ValueError as err:
        raise StackFileError(f"--set {scrub(key, limit=120)}: {err}") from None
    top, *path = elements
    if not isinstance(top, str) or not top:
        raise StackFileError(f"--set {scrub(key, limit=120)}: the key must start with a name")
    if len(path) > MAX_DEPTH:
        raise StackFileError(
            f"--set {scrub(key, limit=120)}: the path is {len(path)} levels deep; a stack's values nest at most "
            f"{MAX_DEPTH} (core.inputs.MAX_DEPTH)"
        )
    full = f"{namespace}:{top}"
    if not path:
        config[full] = value
        return
    current = config.get(full)
    if isinstance(current, str) and current[:1] in ("{", "["):
        try:
            current = parse_json(current, "a config value")
        except InputError:
            current = None
    root = current if isinstance(current, (dict, list)) and type(current) is type(_container_for(path[0])) else None
    root = root if root is not None else _container_for(path[0])
    cursor: Any = root
    for element, following in zip(path, [*path[1:], None], strict=True):
        if following is None:
            _assign(key, cursor, element, value)
        else:
            existing = _get(cursor, element)
            if not isinstance(existing, (dict, list)) or type(existing) is not type(_container_for(following)):
                existing = _container_for(following)
                _assign(key, cursor, element, existing)
            cursor = existing
    config[full] = root


def _get(cursor: Any, element: str | int) -> Any:
    if isinstance(cursor, dict):
        return cursor.get(element)
    return cursor[element] if isinstance(element, int) and element < len(cursor) else None


def _assign(key: str, cursor: Any, element: str | int, value: Any) -> None:
    if isinstance(cursor, dict):
        if isinstance(element, int):
            raise StackFileError(f"--set {scrub(key, limit=120)}: [{element}] indexes a list, but this is an object")
        cursor[element] = value
        return
    if not isinstance(element, int):
        raise StackFileError(
            f"--set {scrub(key, limit=120)}: {scrub(repr(element), limit=60)} names a field, but this is a list"
        )
    if element > len(cursor):
        raise StackFileError(
            f"--set {scrub(key, limit=120)}: index {element} is past the end of the list (length {len(cursor)})"
        )
    if element == len(cursor):
        cursor.append(value)
    else:
        cursor[element] = value


def load_stack_config(
    stack_file: Path, overrides: Sequence[str] = (), root: Path = ROOT
) -> tuple[dict[str, str], set[str], list[str]]:
    """Project defaults + stack file + overrides -> (config strings, secret keys, notes).

    A ``secure:`` value stays an opaque secret. A secret the project declares but the stack
    file lacks gets a placeholder, so a plan can be made before the secret is set.
    """
    document = read_yaml(stack_file)
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise StackFileError(f"{stack_file}: expected a mapping with a `config:` section")
    stack_config = document.get("config") or {}
    if not isinstance(stack_config, dict):
        raise StackFileError(f"{stack_file}: `config:` must be a mapping of keys to values")
    declared = project_declarations(root)
    config: dict[str, Any] = {}
    secret_keys: set[str] = set()
    notes: list[str] = []
    for full, decl in declared.items():
        if "default" in decl:
            config[full] = decl["default"]
        elif "value" in decl:
            config[full] = decl["value"]
    for key, value in stack_config.items():
        if not isinstance(key, str) or ":" not in key:
            shown = scrub(str(key), limit=80)
            raise StackFileError(f"{stack_file}: config key {shown!r} must be NAMESPACE:KEY (e.g. tpu-rl:tpu)")
        opaque, secret = _opaque_secrets(value)
        config[key] = opaque
        if secret:
            secret_keys.add(key)
    environments = document.get("environment")
    if environments:
        notes.append(
            f"{stack_file.name} imports Pulumi ESC environments ({_names(environments)}); the offline tools read "
            "only the stack file, so values set there are not seen"
        )
    for override in overrides:
        key, sep, value = override.partition("=")
        if not sep:
            # Shown scrubbed and short: a token typed there by mistake is never printed.
            raise StackFileError(f"--set {scrub(override, limit=40)}: expected KEY=VALUE")
        set_path(config, key.strip(), value)
    workflow = _object(config.get(f"{PROJECT}:workflow"))
    workflow_on = str(workflow.get("enabled", True)).lower() != "false"
    needed = {
        f"{PROJECT}:hfToken": workflow_on,
        f"{PROJECT}:hfWriteToken": bool(_object(config.get(f"{PROJECT}:publish")).get("repo")),
    }
    from core.config.schema import SECRET_KEYS  # the schema and its rules: only where a stack is loaded

    for full in SECRET_KEYS:
        if needed[full] and config.get(full) in (None, ""):
            config[full] = UNSET_SECRET
            secret_keys.add(full)
            notes.append(f"{full} is not set in {stack_file.name}; planned with a placeholder secret")
    return {k: to_config_string(v) for k, v in config.items()}, secret_keys, notes


def _object(value: Any) -> dict[str, Any]:
    """A stack-file object as the program reads it (a JSON string, after ``--set``), {} when it is none."""
    if isinstance(value, str):
        try:
            value = parse_json(value, "a config value") if value.startswith("{") else {}
        except InputError:
            value = {}
    return value if isinstance(value, dict) else {}


def _is_secure(value: Any) -> bool:
    """A value `pulumi config set --secret` wrote: ``{secure: <ciphertext>}`` (any secrets provider)."""
    return isinstance(value, dict) and len(value) == 1 and "secure" in value


def _opaque_secrets(value: Any) -> tuple[Any, bool]:
    """``value`` with every ``secure:`` value (top level, or nested by ``--secret --path``) replaced by
    ``OPAQUE_SECRET``, and whether it held one. The Pulumi CLI marks the whole top-level key secret
    when any part of it is (``config.Map``: a secure value anywhere makes the key secure)."""
    if _is_secure(value):
        return OPAQUE_SECRET, True
    if isinstance(value, dict):
        pairs = [(k, *_opaque_secrets(v)) for k, v in value.items()]
        return {k: v for k, v, _ in pairs}, any(secret for _, _, secret in pairs)
    if isinstance(value, list):
        items = [_opaque_secrets(v) for v in value]
        return [v for v, _ in items], any(secret for _, secret in items)
    return value, False


def _names(environments: Any) -> str:
    if isinstance(environments, list):
        return ", ".join(str(e)[:60] for e in environments[:5] if isinstance(e, str)) or "listed"
    return "listed"


def stack_name(stack_file: Path) -> str:
    """`dev` for `Pulumi.dev.yaml` (any other file name is used as it is)."""
    return stack_file.name.removeprefix("Pulumi.").removesuffix(".yaml")


def load_stack(
    stack: str | None, config_file: Path | None = None, overrides: Sequence[str] = ()
) -> tuple[Settings, dict[str, Any], frozenset[str]]:
    """A stack's validated settings, read as the program reads them (for the CLIs that need no
    Pulumi CLI): `Pulumi.<stack>.yaml` or `config_file`, plus overrides. Returns the settings, the
    raw config and the secret keys; raises ``StackFileError`` or ``ConfigError`` (one line)."""
    from core.config import load_settings

    stack_file = config_file or ROOT / f"Pulumi.{stack}.yaml"
    config, secret_keys, _ = load_stack_config(stack_file, list(overrides))
    keys = frozenset(secret_keys)
    return load_settings(config, stack or stack_name(stack_file), keys), config, keys
