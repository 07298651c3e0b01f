"""Read the running stack's raw config from the Pulumi runtime and validate it (``core.config``)."""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.runtime import config as runtime_config

from core.config.load import load_settings
from core.config.schema import PROVIDER_KEYS
from core.names import PROJECT
from core.settings import Settings


def raw_config() -> tuple[dict[str, Any], frozenset[str]]:
    """All ``tpu-rl:*`` keys plus the gcp keys, as strings, and which of them are secret."""
    # No exported function lists the keys: the language host passes them to `set_all_config`, which
    # stores them in the module's `CONFIG` (pulumi 3.272 sdk/python/lib/pulumi/runtime/config.py), and
    # older hosts in PULUMI_CONFIG (`get_config_env`). This line is the one non-exported name the program
    # reads; the offline plan (set_mocks + set_all_config) and so every program test runs it.
    keys = set(runtime_config.get_config_env()) | set(runtime_config.CONFIG.get())
    wanted = {k for k in keys if k.startswith(f"{PROJECT}:")} | set(PROVIDER_KEYS)
    raw = {k: runtime_config.get_config(k) for k in sorted(wanted)}
    secret = frozenset(k for k in wanted if runtime_config.is_config_secret(k))
    secret |= frozenset(runtime_config.get_config_secret_keys_env()) & wanted
    return {k: v for k, v in raw.items() if v is not None}, secret


def settings_from_runtime() -> Settings:
    """Validated settings of the running stack."""
    raw, secret_keys = raw_config()
    return load_settings(raw, pulumi.get_stack(), secret_keys)
