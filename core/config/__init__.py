"""Configuration: the declarative schema, strict readers, cross-field rules -> ``core.settings.Settings``.

Pure: the composition root (``program``) reads the running stack's raw config from the Pulumi runtime
and hands it here; the offline tools read stack files and do the same.

The names below are imported on first use (PEP 562 ``__getattr__``): a tool that needs only a submodule
(``core.config.formats``, ``core.config.placeholders``) does not pay for the schema and its rules, which a
`make` target's short-lived tool process would import on every run.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from core.config.load import load_settings, read_fields
    from core.config.placeholders import placeholder_problems
    from core.config.values import ConfigError

__all__ = [
    "ConfigError",
    "load_settings",
    "placeholder_problems",
    "read_fields",
]

_HOMES = {
    "ConfigError": "core.config.values",
    "load_settings": "core.config.load",
    "placeholder_problems": "core.config.placeholders",
    "read_fields": "core.config.load",
}
"""The submodule each exported name lives in."""


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
