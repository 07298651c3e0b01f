"""Which settings of a stack differ from the tutorial's: for the run report and the model card.

Pure: a function of the raw config (full key -> value, as ``core.config.load`` takes it). Secrets never
appear: a field with ``secret=True`` is skipped before its value is looked at (``read_fields`` has already
dropped the tokens, and refuses any other key stored as a secret).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.config.fields import DERIVED
from core.config.load import read_fields
from core.config.schema import FIELDS


def config_diff(raw: Mapping[str, Any], secret_keys: frozenset[str]) -> list[dict[str, Any]]:
    """Every setting whose value differs from the tutorial's default, in schema order, as
    ``{"key", "value", "tutorial"}`` (provider keys, derived defaults and secrets left out). A list setting is
    compared, and shown, as the tuple its reader returns."""
    values = read_fields(raw, secret_keys)
    diff = []
    for f in FIELDS:
        if f.secret or not f.key.startswith("tpu-rl:") or f.default is DERIVED:
            continue
        default = f.read(f.key, f.default) if f.default not in ("", {}) else f.default
        if isinstance(default, list):  # a list setting (authorizedNetworks, images.registries) reads as a tuple
            default = tuple(default)
        if values[f.key] != default:
            diff.append({"key": f.key, "value": values[f.key], "tutorial": default})
    return diff
