"""Faster imports of the provider SDKs for the offline plan and the tests."""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
import types
from pathlib import Path
from typing import Any

# Generated provider packages import every resource module in their __init__ (pulumi_gcp.compute
# alone takes seconds). The offline plan only needs a handful, so these packages are installed as
# light shells that import a resource module when one of its classes is first used.
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

    def __getattr__(attr: str) -> Any:  # noqa: N807 (PEP 562 module hook)
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


def install() -> None:
    """Replace the heavy SDK packages by light shells (idempotent; program code is unchanged)."""
    for package in LIGHT_PACKAGES:
        _light_package(package)
