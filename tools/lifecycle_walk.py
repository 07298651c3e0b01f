"""The walk behind docs/upgrades.md's "what re-runs" table: every config key set to another valid value, each step
classified (``python -m tools.docs_tables`` writes the table, ``tests/test_lifecycle.py`` keeps it current).

Pure builders only (``load_settings`` + ``plan_workflow``), which ``test_lifecycle`` proves equal to what the
program registers under the mock runtime; a full mock run per key would cost a minute.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from core.config import ConfigError, load_settings, read_fields
from core.config.fields import Field
from core.config.load import TOKEN_KEY
from core.config.schema import FIELDS
from core.config.values import Boolean, Duration, Integer, Number, OneOf, format_duration
from tools.stack_files import ROOT, load_stack_config
from workloads.specs.step_specs import Workflow, plan_workflow

PUBLISHING = ["tpu-rl:publish.repo=my-org/gemma4-grpo"]
"""The walk's stacks publish (the example stacks do not), so the table has the publish step's column."""
TOKEN = "hf_WALKtokenVALUEforLIFECYCLEwalk0123456789"  # noqa: S105 (a placeholder, not a credential)
OTHER_TOKEN = "hf_OTHERtokenVALUEforLIFECYCLEwalk0123456789"  # noqa: S105 (a placeholder, not a credential)
"""The Hugging Face token of the walk's stacks, and the other value it sets it to."""


def _workflow(stack: str, overrides: list[str], token: str = TOKEN) -> Workflow | None:
    """The example stack's planned workflow with ``overrides`` (None: the workflow is off)."""
    strings, secret_keys, _ = load_stack_config(ROOT / f"Pulumi.{stack}.yaml", overrides)
    settings = load_settings({**strings, TOKEN_KEY: token}, stack, frozenset({*secret_keys, TOKEN_KEY}))
    return plan_workflow(settings) if settings.workflow.enabled else None


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


def classify(base: Workflow, new: Workflow | None) -> dict[str, str]:
    """Per step of ``base``: re-runs | kept | ignored | not run; raises AssertionError on any other outcome (a new
    identity with the old output path, a field changed outside the step's ignoreChanges)."""
    result = {}
    for before in base:
        name = before.step
        after = new.get(name) if new else None
        if after is None:
            result[name] = "not run"
        elif after.name != before.name:
            if after.output_uri == before.output_uri:
                raise AssertionError(f"{name}: a new identity must get a new output path")
            result[name] = "re-runs"
        else:
            if after.output_uri != before.output_uri or after.ignore_changes != before.ignore_changes:
                raise AssertionError(f"{name} keeps its name but not its output path or ignoreChanges")
            changed = diff_paths(before.manifest, after.manifest)
            uncovered = [p for p in changed if p not in before.ignore_changes]
            if uncovered:
                raise AssertionError(f"{name} keeps its name but {uncovered} changed outside ignoreChanges")
            result[name] = "ignored" if changed else "kept"
    return result


def walk(stack: str) -> dict[str, dict[str, str]]:
    """Key -> per-step outcome, for every field of the schema, on one example stack (publishing)."""
    strings, secret_keys, _ = load_stack_config(ROOT / f"Pulumi.{stack}.yaml", PUBLISHING)
    base_values = read_fields({**strings, TOKEN_KEY: TOKEN}, frozenset({*secret_keys, TOKEN_KEY}))
    base = _workflow(stack, PUBLISHING)
    if base is None:
        raise AssertionError(f"{stack}: the walk needs a stack that runs the workflow")
    outcomes: dict[str, dict[str, str]] = {}
    for field in FIELDS:
        if field.secret:
            outcomes[field.key] = classify(base, _workflow(stack, PUBLISHING, token=OTHER_TOKEN))
            continue
        if isinstance(field.read, OneOf) and len(field.read.choices) == 1:
            # An allow-list of one (tpu-rl:kueue.version): no other value exists, so nothing can re-run.
            outcomes[field.key] = classify(base, base)
            continue
        companions = [override(k, v) for k, v in field.companions]
        for value in candidates(field, base_values.get(field.key)):
            try:
                changed = _workflow(stack, [*PUBLISHING, *companions, override(field.key, value)])
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
    """docs/upgrades.md's "what re-runs" table: keys grouped by outcome, a column per step of the walk's stack."""
    steps = list(next(iter(outcomes.values())))
    groups: dict[tuple[str, ...], list[str]] = {}
    for key, per_step in outcomes.items():
        groups.setdefault(tuple(per_step[s] for s in steps), []).append(key.removeprefix("tpu-rl:"))
    words = {"re-runs": "**re-runs**", "kept": "kept", "ignored": "kept (field ignored)", "not run": "not run"}
    lines = [f"| when you change | {' | '.join(steps)} |", "| --- |" + " --- |" * len(steps)]
    for result, keys in sorted(groups.items(), key=lambda item: (-item[0].count("re-runs"), item[1][0])):
        cells = " | ".join(words[r] for r in result)
        lines.append(f"| {', '.join(f'`{k}`' for k in keys)} | {cells} |")
    return "\n".join(lines)
