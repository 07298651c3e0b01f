"""The walk behind the lifecycle tests: every config key set to another valid value, each step classified.

Pure builders only (``load_settings`` + ``plan_workflow``), which ``test_lifecycle`` proves equal to what
the program registers under the mock runtime; a full mock run per key would cost a minute.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from core.config import ConfigError, load_settings, read_fields
from core.config.fields import Field
from core.config.schema import FIELDS
from core.config.values import Boolean, Duration, Integer, Number, OneOf, format_duration
from core.settings import Settings
from tools.stack_files import ROOT, load_stack_config
from workloads.specs.step_specs import Workflow, plan_workflow

STEPS = ("convert", "train", "export", "publish")
PUBLISHING = ["tpu-rl:publish.repo=my-org/gemma4-grpo"]
"""The walk's stacks publish (the example stacks do not), so the table has the publish step's column."""
TOKEN = "hf_SENTINELtokenVALUEforLEAKchecks0123456789"
OTHER_TOKEN = "hf_OTHERtokenVALUEforLIFECYCLEwalk0123456789"


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


def override(key: str, value: Any) -> str:
    return f"{key}={value if isinstance(value, str) else json.dumps(value)}"


def candidates(field: Field, current: Any) -> Iterator[Any]:
    """Other valid-looking values of a field, best first (the walk keeps the first the config accepts)."""
    reader = field.read
    seen = {json.dumps(current, sort_keys=True)}
    out: list[Any] = []
    if isinstance(reader, Boolean):
        out.append(not current)
    elif isinstance(reader, OneOf):
        out += [c for c in reader.choices if c != current]
    elif isinstance(reader, Integer):
        near = (current * 2, current + 1, current - 1) if current is not None else ()
        out += [v for v in (*near, reader.low, reader.low + 1, reader.high) if reader.low <= v <= reader.high]
    elif isinstance(reader, Number) and current is not None:
        out += [v for v in (current / 2, current * 1.5, reader.low, reader.high) if reader.low <= v <= reader.high]
    elif isinstance(reader, Duration) and current is not None:
        out += [
            format_duration(v) for v in (current + 3600, current * 2, current - 60) if reader.low <= v <= reader.high
        ]
    out += list(field.samples)
    for value in out:
        key = json.dumps(value, sort_keys=True)
        if key not in seen:
            seen.add(key)
            yield value


def diff_paths(a: Any, b: Any, path: str = "") -> list[str]:
    """Property paths (``spec.replicatedJobs[0].x``) where two manifests differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        paths = []
        for key in sorted(set(a) | set(b)):
            # Pulumi's property path syntax (what ignoreChanges holds): name.name, or ["key"] for other keys.
            if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
                sub = f"{path}.{key}" if path else key
            else:
                sub = f'{path}["{key}"]'
            if key not in a or key not in b:
                paths.append(sub)
            else:
                paths += diff_paths(a[key], b[key], sub)
        return paths
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [p for i, (x, y) in enumerate(zip(a, b, strict=True)) for p in diff_paths(x, y, f"{path}[{i}]")]
    return [] if a == b else [path]


def classify(base: Workflow | None, new: Workflow | None) -> dict[str, str]:
    """Per step: re-runs | kept | ignored | not run | runs; raises AssertionError on any other outcome."""
    result = {}
    for name in STEPS:
        before = getattr(base, name) if base else None
        after = getattr(new, name) if new else None
        if after is None:
            result[name] = "not run"
        elif before is None:
            result[name] = "runs"
        elif after.name != before.name:
            assert after.output_uri != before.output_uri, f"{name}: a new identity must get a new output path"
            result[name] = "re-runs"
        else:
            assert after.output_uri == before.output_uri and after.ignore_changes == before.ignore_changes
            changed = diff_paths(before.manifest, after.manifest)
            uncovered = [p for p in changed if p not in before.ignore_changes]
            assert not uncovered, f"{name} keeps its name but {uncovered} changed outside ignoreChanges"
            result[name] = "ignored" if changed else "kept"
    return result


def walk(stack: str) -> dict[str, dict[str, str]]:
    """Key -> per-step outcome, for every field of the schema, on one example stack."""
    config, secret_keys = raw(stack, PUBLISHING)
    base_values = read_fields(config, secret_keys)
    base = workflow(load_settings(config, stack, secret_keys))
    outcomes: dict[str, dict[str, str]] = {}
    for field in FIELDS:
        if field.secret:
            changed = workflow(settings(stack, PUBLISHING, token=OTHER_TOKEN))
            outcomes[field.key] = classify(base, changed)
            continue
        if isinstance(field.read, OneOf) and len(field.read.choices) == 1:
            # An allow-list of one (tpu-rl:kueue.version): no other value exists, so nothing can re-run.
            outcomes[field.key] = classify(base, base)
            continue
        companions = [override(k, v) for k, v in field.companions]
        for value in candidates(field, base_values.get(field.key)):
            try:
                changed = workflow(settings(stack, [*PUBLISHING, *companions, override(field.key, value)]))
            except ConfigError:
                continue
            try:
                outcomes[field.key] = classify(base, changed)
            except AssertionError as err:
                raise AssertionError(f"{stack}: {field.key} = {value!r}: {err}") from None
            break
        else:
            raise AssertionError(f"{field.key}: no candidate value is valid on {stack}; add a sample to the schema")
    return outcomes


def table(outcomes: dict[str, dict[str, str]]) -> str:
    """docs/upgrades.md's "what re-runs" table: keys grouped by outcome."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for key, per_step in outcomes.items():
        groups.setdefault(tuple(per_step[s] for s in STEPS), []).append(key.removeprefix("tpu-rl:"))
    words = {
        "re-runs": "**re-runs**",
        "kept": "kept",
        "ignored": "kept (field ignored)",
        "not run": "not run",
        "runs": "runs",
    }
    lines = ["| when you change | convert | train | export | publish |", "| --- | --- | --- | --- | --- |"]
    for result, keys in sorted(groups.items(), key=lambda item: (-item[0].count("re-runs"), item[1][0])):
        cells = " | ".join(words[r] for r in result)
        lines.append(f"| {', '.join(f'`{k}`' for k in keys)} | {cells} |")
    return "\n".join(lines)
