"""Configuration: the declarative schema, strict readers, cross-field rules -> ``core.settings.Settings``.

Pure: the composition root (``program``) reads the running stack's raw config from the Pulumi runtime
and hands it here; the offline tools read stack files and do the same.
"""

from core.config.load import load_settings, read_fields
from core.config.placeholders import placeholder_problems
from core.config.values import ConfigError

__all__ = [
    "ConfigError",
    "load_settings",
    "placeholder_problems",
    "read_fields",
]
