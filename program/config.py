"""Read the running stack's raw config from the Pulumi runtime and validate it (``core.config``), and what `make up`
tells the program to go on past (``TPU_RL_ACCEPT``)."""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping
from typing import Any

import pulumi
from pulumi.runtime import config as runtime_config

from core.config.load import load_settings
from core.config.schema import PROVIDER_KEYS
from core.errors import BadInputError
from core.names import PROJECT
from core.redact import scrub
from core.settings import Settings

ACCEPT_ENV = "TPU_RL_ACCEPT"
"""What `make up ACCEPT=<word>,<word>` hands the program: the words of ``Accept``, comma-separated."""


class Accept(enum.StrEnum):
    """What `pulumi up` may be told to go on past instead of stopping (``ACCEPT_ENV``)."""

    MAINTENANCE = "maintenance"
    """A host maintenance of the slice scheduled inside the expected training (``workloads.reader`` ``LiveReader
    .check_maintenance``): one warning instead of the stop (docs/maintenance.md "The check in up")."""
    RERUN = "rerun"
    """A protected stack's training that this `up` would run again because a newer tpu-rl renames it
    (``core.version``): the note instead of the stop (CHANGELOG.md says what each release runs again)."""
    AUDIT = "audit"
    """A finding of the access audit `make up` runs before `pulumi up` for a protected stack (``tools/audit.py``): its
    lines as warnings instead of the stop (docs/audit.md "In make up"). The Makefile reads it; the program only
    accepts the word."""


class AcceptError(BadInputError):
    """A word of ``TPU_RL_ACCEPT`` that is not one of ``Accept`` (one line naming the allowed words)."""


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


def accepted(environ: Mapping[str, str] | None = None) -> frozenset[Accept]:
    """The words of ``TPU_RL_ACCEPT`` (``environ``: the process's by default), read once, where the program starts;
    ``AcceptError`` for a word that is not one of ``Accept``. Empty words (``a,,b``, a trailing comma) are none."""
    text = (os.environ if environ is None else environ).get(ACCEPT_ENV, "")
    words = [word.strip() for word in text.split(",") if word.strip()]
    allowed = [choice.value for choice in Accept]
    for word in words:
        if word not in allowed:
            raise AcceptError(
                f"{ACCEPT_ENV} (make up's ACCEPT=): {scrub(word, limit=40)!r} is not something `up` can be told to "
                f"go on past; the words are: {', '.join(allowed)} (comma-separated)"
            )
    return frozenset(Accept(word) for word in words)
