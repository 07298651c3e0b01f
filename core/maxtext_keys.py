"""MaxText's configuration keys and their types (``MAXTEXT_VERSION``): a fact table of the pinned image.

``train_rl`` loads ``configs/post_train/rl.yml`` (MaxText's ``configs/base.yml`` is the converters') and checks the
keys with ``configs/pyconfig.py`` ``_prepare_for_pydantic``: a top-level key that is no field of its pydantic model,
``configs/types.py`` ``RLConfig`` (``train_rl.py`` ``_rl_train_impl``: ``config_class=types.RLConfig``), stops it
(``_check_for_invalid_keys``), but a typo inside a nested block (``rl.num_generation=8``) is merged silently and the
run trains with the default. The table lists the keys of both YAML files (the type of their default) and the fields
of ``RLConfig`` that no YAML file names (``load_checkpoint_only_once``, ``log_weight_sync_time``: the type of their
annotation), read statically (``ast``) from ``types.py``; every key of a nested block as ``rl.num_generations``; so
``extraArgs`` can be checked before a TPU starts. What the loader takes but the run would not use as written is
refused with its reason (``REFUSED``, ``refusals``): the fields MaxText derives (``DerivedValues``, and what
``RLConfig.set_derived_values_and_validate`` overwrites), ``rl``'s fields written flat (``num_generations``:
``RLConfig.map_flat_fields_to_nested_models`` copies it over ``rl.num_generations``), the other nested blocks'
dotted copies (``vllm.log_weight_sync_time``: MaxText reads the flat key), and the keys of ``base.yml`` that are no
field of ``RLConfig`` (pyconfig stops train_rl with them).

The table is made from the release's wheel, with the files the tests read, by one command (docs/releases.md
"Adopting a MaxText release")::

    make maxtext VERSION=0.2.5        # python -m tools.adopt_maxtext 0.2.5

or from any folder of MaxText configs (``src/maxtext/configs`` of a checkout, which holds ``types.py``)::

    python -m core.maxtext_keys path/to/maxtext/configs > core/data/maxtext-0.2.5-keys.json
"""

from __future__ import annotations

import ast
import difflib
import functools
import json
import lzma
import sys
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from core.inputs import SAFE_LOADER

MAXTEXT_VERSION = "0.2.5"
"""The MaxText of the image ``tpu_post_training:0.2.5`` (``core.config.workflow_keys`` ``DEFAULT_IMAGES``)."""
TABLE = Path(__file__).parent / "data" / f"maxtext-{MAXTEXT_VERSION}-keys.json"
REFUSED = TABLE.with_name(f"maxtext-{MAXTEXT_VERSION}-refused.json")
"""Key -> why ``extraArgs`` refuses it though MaxText's loader takes it (``refusals``)."""
RECORD = TABLE.with_name(f"maxtext-{MAXTEXT_VERSION}-record.json")
"""The adopted wheel's ``RECORD`` lines of its ``maxtext/`` files, with the wheel's name and sha256 (written by
``tools/adopt_maxtext.py``): what each MaxText step checks the image's MaxText against before it loads a weight
(``workloads/container/maxtext_check.py``)."""
CONFIG_FILES = ("base.yml", "post_train/rl.yml")
TYPES_FILE = "types.py"
"""The pydantic models pyconfig checks keys against (in ``configs/``, or ``types.py.xz`` where vendored)."""
CONFIG_CLASS = "RLConfig"
"""train_rl's model (``train_rl.py`` ``_rl_train_impl``: ``setup_configs_and_devices(..., config_class=RLConfig)``)."""
DERIVED_CLASS = "DerivedValues"
"""The fields "derived from other config values" (its docstring): pyconfig takes them, the keys they come from rule."""
META = {
    "base_config": "pyconfig reads it from a config file only (configs/pyconfig.py _load_config): a value does nothing"
}
"""The field pyconfig itself consumes (``RunInfo``: "a meta-field ... consumed by the config loading system")."""
_ANNOTATED = {
    "bool": "bool",
    "int": "int",
    "NonNegativeInt": "int",
    "PositiveInt": "int",
    "float": "float",
    "NonNegativeFloat": "float",
    "str": "str",
    "list": "list",
    "tuple": "list",
    "dict": "dict",
}
"""A field's annotation -> the table's type (pydantic's constrained ints and floats are ints and floats)."""


def type_name(value: Any) -> str:
    """The table's name for the type of a YAML default."""
    if value is None:
        return "null"
    for kind, name in ((bool, "bool"), (int, "int"), (float, "float"), (str, "str"), (list, "list"), (dict, "dict")):
        if isinstance(value, kind):
            return name
    return "str"


def _yaml_keys(configs_dir: Path) -> dict[str, str]:
    """Key -> type of its default for every key of ``base.yml`` and ``post_train/rl.yml`` (rl.yml wins)."""
    table: dict[str, str] = {}
    for name in CONFIG_FILES:
        document = yaml.load((configs_dir / name).read_text(), Loader=SAFE_LOADER) or {}  # noqa: S506 - a safe loader
        for key, value in document.items():
            table[key] = type_name(value)
            if isinstance(value, dict):
                for sub, sub_value in value.items():
                    table[f"{key}.{sub}"] = type_name(sub_value)
    return table


def _source(configs_dir: Path, name: str) -> str:
    """A file of ``configs_dir``, or its ``.xz`` (the vendored layout: MaxText's code compressed)."""
    path = configs_dir / name
    if path.exists():
        return path.read_text()
    return lzma.decompress(path.with_name(path.name + ".xz").read_bytes()).decode()


class _Field(NamedTuple):
    owner: str
    """The class of ``types.py`` that declares it."""
    annotation: ast.expr
    default: ast.expr | None


class _Models:
    """The classes of ``types.py``, read with ``ast`` (MaxText is not imported: its dependencies are the TPU stack)."""

    def __init__(self, source: str) -> None:
        tree = ast.parse(source)
        self.classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
        self.aliases = {
            node.targets[0].id: node.value
            for node in tree.body
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
        }

    def bases(self, name: str) -> list[str]:
        return [ast.unparse(base) for base in self.classes[name].bases]

    def is_model(self, name: str) -> bool:
        return name in self.classes and any(base == "BaseModel" or self.is_model(base) for base in self.bases(name))

    def fields(self, name: str) -> dict[str, _Field]:
        """A model's fields, its bases' included (the first base's win, as in Python's MRO; its own over all)."""
        found: dict[str, _Field] = {}
        for base in reversed(self.bases(name)):
            if self.is_model(base):
                found.update(self.fields(base))
        for node in self.classes[name].body:
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and node.target.id != "model_config"
            ):
                found[node.target.id] = _Field(name, node.annotation, node.value)
        return found

    def kind(self, field: _Field) -> str:
        """The table's type of a field: its annotation's, else its default's."""
        named = self._annotation(field.annotation)
        if named is not None:
            return named
        default = field.default
        if isinstance(default, ast.Call) and ast.unparse(default.func) == "Field":
            given = [*default.args[:1], *(k.value for k in default.keywords if k.arg == "default")]
            default = given[0] if given else None
        try:
            return type_name(ast.literal_eval(default)) if default is not None else "null"
        except ValueError:
            return "str"  # an enum member (``DecoderBlockType.LLAMA2``): pydantic reads it from its text

    def _annotation(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Constant) and node.value is None:
            return "null"
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return self._union([node.left, node.right])
        if isinstance(node, ast.Subscript):
            outer = ast.unparse(node.value)
            inner = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if outer == "Optional":
                return self._union([*inner, ast.Constant(None)])
            if outer == "Literal":
                values = {type_name(ast.literal_eval(item)) for item in inner}
                return values.pop() if len(values) == 1 else "str"
            return _ANNOTATED.get(outer)
        name = ast.unparse(node)
        if name in _ANNOTATED:
            return _ANNOTATED[name]
        if self.is_model(name):
            return "dict"
        if name in self.classes:  # an enum of types.py
            return "int" if "enum.IntEnum" in self.bases(name) or "IntEnum" in self.bases(name) else "str"
        if name in self.aliases and name != ast.unparse(self.aliases[name]):
            return self._annotation(self.aliases[name])
        return None

    def _union(self, members: list[ast.expr]) -> str | None:
        """``X | None`` is X (extraArgs gives a value; leaving the key out keeps MaxText's default); int | float is
        float; a scalar or a list (``str | list[str]``) is the scalar, the one value extraArgs gives."""
        flat: list[ast.expr] = []
        for member in members:
            if isinstance(member, ast.BinOp) and isinstance(member.op, ast.BitOr):
                flat += [member.left, member.right]
            else:
                flat.append(member)
        kinds = {self._annotation(member) for member in flat} - {"null"}
        if None in kinds or not kinds:
            return None if None in kinds else "null"
        if kinds == {"int", "float"}:
            return "float"
        scalars = kinds - {"list", "dict"}
        return (scalars or kinds).pop() if len(scalars or kinds) == 1 else None

    def overwritten(self, name: str) -> set[str]:
        """The fields a model's ``model_validator(mode="after")`` methods assign in their body (not under an ``if``
        or a loop): a value given for them is overwritten."""
        assigned: set[str] = set()
        for method in self.classes[name].body:
            if not isinstance(method, ast.FunctionDef) or not any(
                "model_validator" in ast.unparse(d) and "after" in ast.unparse(d) for d in method.decorator_list
            ):
                continue
            for statement in method.body:
                if isinstance(statement, ast.Assign):
                    assigned |= {
                        target.attr
                        for target in statement.targets
                        if isinstance(target, ast.Attribute) and ast.unparse(target.value) == "self"
                    }
                call = statement.value if isinstance(statement, ast.Expr) else None
                if (
                    isinstance(call, ast.Call)
                    and ast.unparse(call.func) == "object.__setattr__"
                    and len(call.args) == 3
                    and isinstance(call.args[1], ast.Constant)
                ):
                    assigned.add(str(call.args[1].value))
        return assigned


def analyse(configs_dir: Path) -> tuple[dict[str, str], dict[str, str]]:
    """The table (key -> type) and the refusals (key -> why) of a release's ``configs/``: its YAML files' keys and
    train_rl's fields (``CONFIG_CLASS``), less what the run would not use as written (the module's docstring)."""
    yaml_keys = _yaml_keys(configs_dir)
    models = _Models(_source(configs_dir, TYPES_FILE))
    fields = models.fields(CONFIG_CLASS)
    blocks = {
        name: ast.unparse(f.annotation) for name, f in fields.items() if models.is_model(ast.unparse(f.annotation))
    }
    nested = {name for name in blocks if any(key.startswith(f"{name}.") for key in yaml_keys)}
    """The blocks the YAML writes as blocks (``rl:``), which MaxText reads nested (``config.rl.num_generations``)."""
    overwritten = models.overwritten(CONFIG_CLASS) & set(fields)
    derived = set(models.fields(DERIVED_CLASS)) | overwritten
    where = f"configs/types.py {CONFIG_CLASS}.map_flat_fields_to_nested_models"
    refused: dict[str, str] = dict(META)
    for key in sorted(derived):
        refused[key] = (
            f"MaxText computes it from other keys and overwrites a value (configs/types.py {CONFIG_CLASS}"
            ".set_derived_values_and_validate)"
            if key in overwritten
            else f"MaxText's pre-training derives it from other keys (configs/types.py {DERIVED_CLASS}); train_rl "
            "does not use it"
        )
    for block in sorted(nested):
        for sub in models.fields(blocks[block]):
            if sub not in yaml_keys:
                refused.setdefault(
                    sub, f"MaxText reads {block}.{sub}: set that (a flat {sub} is copied over it, {where})"
                )
    for block in sorted(set(blocks) - nested):
        refused[block] = f"MaxText reads this block's fields as flat keys (configs/types.py {CONFIG_CLASS}): set each"
        for sub in models.fields(blocks[block]):
            refused[f"{block}.{sub}"] = (
                f"MaxText takes the flat key {sub}, copied over this one or read instead of it ({where}): set {sub}"
            )
    for key in yaml_keys:
        if key.split(".", 1)[0] not in fields:
            refused[key] = f"no field of train_rl's config (configs/types.py {CONFIG_CLASS}): pyconfig stops the run"
    table = {key: kind for key, kind in yaml_keys.items() if key not in refused}
    for name, field in fields.items():
        if name not in table and name not in refused:
            table[name] = models.kind(field)
    for block in nested:
        for sub, field in models.fields(blocks[block]).items():
            table.setdefault(f"{block}.{sub}", models.kind(field))
    return dict(sorted(table.items())), dict(sorted(refused.items()))


def generate(configs_dir: Path) -> dict[str, str]:
    """Key -> type (``analyse``): what ``core/data/maxtext-<version>-keys.json`` holds."""
    return analyse(configs_dir)[0]


def refusals(configs_dir: Path) -> dict[str, str]:
    """Key -> why extraArgs refuses it (``analyse``): what ``core/data/maxtext-<version>-refused.json`` holds."""
    return analyse(configs_dir)[1]


def pinned_record() -> dict[str, Any]:
    """The adopted wheel's ``RECORD`` pin (``RECORD``): ``version``, ``wheel``, ``sha256`` and its ``record`` lines."""
    return dict(json.loads(RECORD.read_text()))


@functools.cache
def known_keys() -> dict[str, str]:
    """The committed table: MaxText key -> type name."""
    return json.loads(TABLE.read_text())


@functools.cache
def refused_keys() -> dict[str, str]:
    """The committed refusals: MaxText key -> why extraArgs refuses it."""
    return json.loads(REFUSED.read_text())


def closest_key(key: str) -> str | None:
    """The known key a typo most likely meant, if any is close."""
    table = known_keys()
    prefix = key.split(".", 1)[0] + "." if "." in key else ""
    pool = [k for k in table if k.startswith(prefix)] if prefix else list(table)
    matches = difflib.get_close_matches(key, pool, n=1, cutoff=0.75)
    return matches[0] if matches else None


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(
            f"usage: python -m core.maxtext_keys MAXTEXT_CONFIGS_DIR > core/data/maxtext-{MAXTEXT_VERSION}-keys.json"
        )
    print(json.dumps(generate(Path(sys.argv[1])), indent=1))
