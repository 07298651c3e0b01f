"""The example stacks' settings as the tests build them: ``settings(stack, overrides)``, with the sentinel Hugging
Face token the leak checks look for (the walk of every key behind docs/upgrades.md is ``tools/lifecycle_walk.py``)."""

from __future__ import annotations

import functools
from pathlib import Path

from core.config import load_settings
from core.settings import Settings
from tools.stack_files import ROOT, load_stack_config
from workloads.specs.step_specs import Workflow, plan_workflow

TOKEN = "hf_SENTINELtokenVALUEforLEAKchecks0123456789"


@functools.lru_cache(maxsize=64)
def _stack_config(stack_file: Path, text: str, overrides: tuple[str, ...]) -> tuple[dict[str, str], frozenset[str]]:
    """The stack file read once per test process and text (``text``, the file's, is the key: a stack file a test
    writes again is read again): some thirty modules build the example stacks' settings at import, in every worker
    (read fresh, Pulumi.yaml and the stack file take about 0.2 s each time)."""
    strings, secret_keys, _ = load_stack_config(stack_file, overrides)
    return strings, frozenset(secret_keys)


def raw(
    stack: str, overrides: list[str], token: str | None = TOKEN, stack_file: Path | None = None
) -> tuple[dict[str, str | None], frozenset[str]]:
    """The stack's raw config with ``token`` as the Hugging Face token (None: the token is not set), from
    ``stack_file`` (default: the example ``Pulumi.<stack>.yaml``)."""
    path = stack_file or ROOT / f"Pulumi.{stack}.yaml"
    strings, secret_keys = _stack_config(path, path.read_text(), tuple(overrides))
    config: dict[str, str | None] = {**strings, "tpu-rl:hfToken": token}
    return config, frozenset(secret_keys | {"tpu-rl:hfToken"})


def settings(stack: str, overrides: list[str], token: str | None = TOKEN, stack_file: Path | None = None) -> Settings:
    config, secret_keys = raw(stack, overrides, token, stack_file)
    return load_settings(config, stack, secret_keys)


def workflow(s: Settings) -> Workflow | None:
    return plan_workflow(s) if s.workflow.enabled else None
