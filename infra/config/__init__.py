"""Configuration: the declarative schema, strict readers, cross-field rules -> ``core.settings.Settings``.

Pure (no Pulumi) except ``infra.config.runtime``, which reads the running stack's config.
"""

from infra.config.load import load_settings, read_fields
from infra.config.placeholders import placeholder_problems
from infra.config.schema import FIELDS, PROJECT_KEYS, SECRET_KEYS
from infra.config.values import ConfigError

__all__ = [
    "FIELDS",
    "PROJECT_KEYS",
    "SECRET_KEYS",
    "ConfigError",
    "load_settings",
    "placeholder_problems",
    "read_fields",
]
