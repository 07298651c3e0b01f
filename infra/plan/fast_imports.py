"""Faster imports of the provider SDKs for the offline plan and the tests (never for `pulumi up`).

Two things make `import pulumi_gcp.compute` take seconds: its package `__init__` imports every
resource module, and its generated `_inputs`/`outputs` modules build thousands of classes whose
annotations (and `TypedDict` shapes) are evaluated at import. So, for the offline plan only:

- the heavy packages become light shells that import a resource module when one of its classes is
  first used (`LIGHT_PACKAGES`);
- the SDKs' generated modules are compiled with postponed annotations (PEP 563; they are still
  resolved by `typing.get_type_hints`, which is how the Pulumi runtime reads them) and with their
  `...ArgsDict(TypedDict)` classes built as plain `dict` subclasses (what a TypedDict is at run
  time; they are only named in annotations). The compiled code is cached per source file.

The plan's resources and inputs are the same either way (tests compare them with the builders').
"""

from __future__ import annotations
import __future__

import hashlib
import importlib
import importlib.machinery
import importlib.util
import marshal
import os
import re
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

LIGHT_PACKAGES = (
    "pulumi_gcp.compute",
    "pulumi_gcp.container",
    "pulumi_gcp.storage",
    "pulumi_gcp.serviceaccount",
    "pulumi_gcp.projects",
    "pulumi_kubernetes.helm.v3",
)


def _light_package(name: str) -> None:
    parent_name, _, child = name.rpartition(".")
    parent = importlib.import_module(parent_name)
    if type(sys.modules.get(name)) is types.ModuleType:
        return  # already really imported (lazy modules are subclasses)
    sys.modules.pop(name, None)
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return
    package_dir = Path(next(iter(spec.submodule_search_locations)))
    submodules = re.findall(r"^from \.(\w+) import \*$", (package_dir / "__init__.py").read_text(), re.M)
    module = types.ModuleType(name)
    module.__path__ = [str(package_dir)]
    module.__package__ = name
    module.__spec__ = spec
    module.__file__ = str(package_dir / "__init__.py")

    modules = {path.stem for path in package_dir.glob("*.py")}

    def __getattr__(attr: str) -> Any:  # noqa: N807 (PEP 562 module hook)
        if attr in modules and not attr[0].isupper():  # `from . import outputs` (helm.v3 has Release.py)
            return importlib.import_module(f"{name}.{attr}")
        if attr.startswith("_"):
            raise AttributeError(f"module {name!r} has no attribute {attr!r}")
        snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", attr).lower().removesuffix("_output")
        markers = (f"class {attr}(", f"class {attr}:", f"def {attr}(")
        candidates = ([snake] if snake in submodules else []) + submodules
        for sub in candidates:
            text = (package_dir / f"{sub}.py").read_text()
            if any(marker in text for marker in markers):
                value = getattr(importlib.import_module(f"{name}.{sub}"), attr)
                setattr(module, attr, value)
                return value
        raise AttributeError(f"module {name!r} has no attribute {attr!r}")

    module.__getattr__ = __getattr__  # type: ignore[attr-defined]
    sys.modules[name] = module
    setattr(parent, child, module)


SDK_PACKAGES = ("pulumi_gcp.", "pulumi_kubernetes.")
TRANSFORM = b"v1 postponed annotations, TypedDict as dict"
CACHE_DIR = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tpu-rl" / "sdk-code"


def sdk_source(source: bytes) -> bytes:
    """A generated SDK module's source with its TypedDict classes as plain dict subclasses."""
    return re.sub(rb"^(class \w+)\(TypedDict\):", rb"\1(dict):", source, flags=re.M)


class _SdkLoader(importlib.machinery.SourceFileLoader):
    """Compiles a generated SDK module with postponed annotations; caches the code object."""

    def get_code(self, fullname: str) -> types.CodeType:
        path = self.get_filename(fullname)
        source = self.get_data(path)
        key = hashlib.sha256(TRANSFORM + importlib.util.MAGIC_NUMBER + path.encode() + source).hexdigest()
        cached = CACHE_DIR / f"{key}.code"
        try:
            return marshal.loads(cached.read_bytes())
        except (OSError, ValueError, EOFError, TypeError):
            pass
        flags = __future__.annotations.compiler_flag
        code = compile(sdk_source(source), path, "exec", flags=flags, dont_inherit=True)
        _store(cached, marshal.dumps(code))
        return code


def _store(path: Path, data: bytes) -> None:
    """Write atomically (pytest workers may compile the same module at once); without a writable
    cache the module is simply compiled again next time."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent)
    except OSError:
        return
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.replace(temporary, path)
    except OSError:
        Path(temporary).unlink(missing_ok=True)


class _SdkFinder:
    """Routes the SDK packages' pure-Python modules to `_SdkLoader`."""

    @staticmethod
    def find_spec(name: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if not name.startswith(SDK_PACKAGES):
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.origin and spec.origin.endswith(".py"):
            spec.loader = _SdkLoader(name, spec.origin)
        return spec


def install() -> None:
    """Load the SDKs the fast way and replace the heavy packages by light shells (idempotent;
    program code is unchanged)."""
    if _SdkFinder not in sys.meta_path:
        sys.meta_path.insert(0, _SdkFinder)
    for package in LIGHT_PACKAGES:
        _light_package(package)
