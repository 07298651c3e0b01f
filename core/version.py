"""tpu-rl's version, its releases and what each runs again, and what an `up` runs again of the steps a state holds.

A step's name is the hash of what it runs (``workloads.specs.step_specs.identity``), so a release that changes a
step's program or manifest renames the step, and the next `pulumi up` runs it again under its new name (a finished
run's output is kept: the new name writes a new folder). ``RELEASES`` says so per release (``CHANGELOG.md`` is its
page; ``tests/test_version.py`` keeps the two alike), and the program exports ``VERSION`` (the stack output
``version``), so `make up` can hand it the version and the step names the state holds (``STEPS_IN_STATE``) and the
program can say which steps this `up` runs again, and why, before it runs them (``program/stack.py``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from core.steps import STEPS

VERSION = "0.3.0"
"""This checkout's version: the newest of ``RELEASES``."""
STEPS_IN_STATE = "TPU_RL_STEPS_IN_STATE"
"""What `make up` hands the program: the state's ``version`` output and each step's name (``tools/state.py``
``releases``), as JSON ``{"version": ..., "steps": {step: name}}``."""


@dataclass(frozen=True)
class Release:
    """One release: its version and date, the steps whose names it changes (``reruns``: they run again on the first
    `up` of a stack whose state an older version wrote) and why."""

    version: str
    date: str
    reruns: tuple[str, ...]
    why: str


RELEASES = (
    Release(
        "0.1.0",
        "2026-12-06",
        tuple(STEPS),
        "a step's name hashes its programs without their comments and docstrings; the programs import what they share "
        "(hf_model.py, shown.py) as files of their ConfigMap; the TPU workers mount no API token",
    ),
    Release(
        "0.2.0",
        "2026-12-07",
        tuple(STEPS),
        "training reads its staged dataset (HF_DATASETS_OFFLINE=0); each fault of training gets its own verdict; one "
        "JSON reader and core's redaction ship in every step's ConfigMap; the steps' lines name make up",
    ),
    Release(
        "0.3.0",
        "2026-12-07",
        tuple(STEPS),
        "every step ships core's errors.py and the redaction's new rules (registry credentials, tokens in base64, "
        "escaped signed URLs); the shared program file is split by the steps that use it; the MaxText check finds "
        "MaxText through the import system's finders",
    ),
)
"""Every release, oldest first. A state without a ``version`` output was written before 0.1.0."""


@dataclass(frozen=True)
class InState:
    """What the state's last `up` left: the version that wrote it ("" before 0.1.0) and each step's name."""

    version: str
    steps: Mapping[str, str]


def in_state(text: str | None) -> InState | None:
    """``STEPS_IN_STATE``'s value, or None when unset or not such an object (a new stack, or `pulumi up` run by hand:
    nothing is compared)."""
    try:
        found = json.loads(text or "")
    except ValueError:
        return None
    if not isinstance(found, dict) or not isinstance(found.get("steps"), dict):
        return None
    version = found.get("version")
    steps = {str(k): v for k, v in found["steps"].items() if isinstance(v, str)}
    return InState(version if isinstance(version, str) else "", steps)


def since(version: str) -> tuple[Release, ...]:
    """The releases newer than ``version`` ("" : every release), oldest first."""
    known = [release.version for release in RELEASES]
    start = known.index(version) + 1 if version in known else 0
    return RELEASES[start:]


def runs_again(state: InState, planned: Mapping[str, str]) -> tuple[str, ...]:
    """The steps the state holds under another name than this `up` gives them, in the workflow's order: they run
    again (a changed setting, or a release that renames them)."""
    held = state.steps
    return tuple(step for step in STEPS if step in held and step in planned and planned[step] != held[step])


def why_again(state: InState, again: tuple[str, ...]) -> str:
    """One line for ``runs_again``'s steps: the releases since the state's version that rename them, else the
    configuration."""
    releases = [r for r in since(state.version) if set(r.reruns) & set(again)]
    written = f"tpu-rl {state.version}" if state.version else "a tpu-rl older than 0.1.0"
    if state.version != VERSION and releases:
        changes = "; ".join(f"{r.version}: {r.why}" for r in releases)
        return f"the state was written by {written}, and this is {VERSION} (CHANGELOG.md: {changes})"
    return "the configuration changed what they run"
