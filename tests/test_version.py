"""tpu-rl's version (``core.version``): CHANGELOG.md repeats ``RELEASES``, the program exports the version, and
`make up` hands the program the state's version and step names, from which it says which steps this `up` runs again
and stops a protected stack's training an upgrade would run again until ``ACCEPT=rerun``."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping

import pytest

from core.errors import BAD_INPUT
from core.version import RELEASES, STEPS_IN_STATE, VERSION, InState, in_state, runs_again, since, why_again
from infra.stop import StopError
from program import world
from tools.plan import plan_stack
from tools.stack_files import ROOT
from tools.state_export import steps_in_state

CHANGELOG = ROOT / "CHANGELOG.md"
REAL = ["gcp:project=real-project-1", "tpu-rl:tpu.reservation=res-a", 'tpu-rl:authorizedNetworks=["198.18.0.0/15"]']


def test_the_changelog_repeats_the_releases():
    text = CHANGELOG.read_text()
    headings = re.findall(r"^## (\d+\.\d+\.\d+) \((\d{4}-\d{2}-\d{2})\)\n\nRuns again: ([^\n]+)\.$", text, re.MULTILINE)
    assert headings == [(r.version, r.date, ", ".join(r.reruns) or "nothing") for r in reversed(RELEASES)]
    assert RELEASES[-1].version == VERSION and text.index(f"## {VERSION} ") < text.index("## Before 0.1.0")


@pytest.mark.pure
def test_what_the_state_holds_is_read_as_make_up_hands_it():
    state = {"deployment": {"resources": [{"type": "pulumi:pulumi:Stack", "outputs": {
        "version": "0.1.0", "steps": {"convert": {"name": "m-convert-1"}, "train": {"name": "m-train-2"}, "x": 3},
    }}]}}  # fmt: skip
    handed = json.dumps(steps_in_state(json.dumps(state)))
    assert in_state(handed) == InState("0.1.0", {"convert": "m-convert-1", "train": "m-train-2"})
    old = steps_in_state(json.dumps({"deployment": {"resources": [{"type": "pulumi:pulumi:Stack", "outputs": {}}]}}))
    assert in_state(json.dumps(old)) == InState("", {})
    for unusable in (None, "", "not json", "[]", '{"steps": 1}'):
        assert in_state(unusable) is None


@pytest.mark.pure
def test_the_steps_run_again_are_those_renamed_in_order_and_why():
    state = InState("", {"convert": "c1", "train": "t1", "export": "e1"})
    assert runs_again(state, {"convert": "c1", "train": "t2", "export": "e2"}) == ("train", "export")
    assert runs_again(state, {"convert": "c1", "train": "t1"}) == (), "a step this `up` does not plan is not run"
    assert why_again(state, ("train",)).startswith(
        f"the state was written by a tpu-rl older than 0.1.0, and this is {VERSION}"
    )
    current = InState(VERSION, state.steps)
    assert why_again(current, ("train",)) == "the configuration changed what they run"
    assert since("") == RELEASES and since(VERSION) == ()


@pytest.mark.pure
def test_the_releases_since_a_version_and_the_line_that_names_them():
    """An unknown version (or none) is older than every release; the line names the state's version, this one, and
    each release since that renames one of the steps, with its reason; a step no release renames is the
    configuration's doing."""
    assert since("0.0.9") == RELEASES and since("") == RELEASES and since(RELEASES[0].version) == RELEASES[1:]
    first, newest = RELEASES[0], RELEASES[-1]
    again = (newest.reruns[-1],)
    every = "; ".join(f"{r.version}: {r.why}" for r in RELEASES if again[0] in r.reruns)
    assert why_again(InState("0.0.9", {}), again) == (
        f"the state was written by tpu-rl 0.0.9, and this is {VERSION} (CHANGELOG.md: {every})"
    )
    assert why_again(InState("", {}), again) == (
        f"the state was written by a tpu-rl older than 0.1.0, and this is {VERSION} (CHANGELOG.md: {every})"
    )
    later = "; ".join(f"{r.version}: {r.why}" for r in RELEASES[1:] if again[0] in r.reruns)
    assert newest.version in later and first.version + ":" not in later
    assert why_again(InState(first.version, {}), again) == (
        f"the state was written by tpu-rl {first.version}, and this is {VERSION} (CHANGELOG.md: {later})"
    ), "only the releases since the state's version"
    assert why_again(InState("0.0.9", {}), ("not-a-step",)) == "the configuration changed what they run"
    assert in_state(json.dumps({"version": 3, "steps": {"train": "t"}})) == InState("", {"train": "t"})
    assert in_state(json.dumps({"steps": {"train": "t", 7: "x"}})) == InState("", {"train": "t", "7": "x"})


def _up(monkeypatch, stack: str, state: Mapping[str, object], *overrides: str, accept: str = ""):
    monkeypatch.setenv(STEPS_IN_STATE, json.dumps(state))
    monkeypatch.setenv("TPU_RL_ACCEPT", accept)
    handed_over = world.World(state=world.InState.of(os.environ))  # what `make up` hands over, nothing else read
    stack_file = ROOT / f"Pulumi.{stack}.yaml"
    return plan_stack(stack_file, [*overrides], stack=stack, world=lambda: handed_over, raise_errors=False)[0]


def test_the_decision_names_the_steps_and_stops_only_an_upgrades_rerun_of_protected_training(monkeypatch):
    from program.config import Accept
    from program.stack import _runs_again
    from tests.lifecycle_walk import settings
    from workloads.specs.step_specs import plan_workflow

    warned: list[str] = []
    monkeypatch.setattr("pulumi.log.warn", lambda message, *args, **kwargs: warned.append(message))
    prod, dev = settings("prod", REAL), settings("dev", [])
    plan, dev_plan = plan_workflow(prod), plan_workflow(dev)
    renamed = {"convert": plan.convert.name, "train": "gemma4-26b-train-0000000000"}
    older = json.dumps({"version": "", "steps": renamed})
    with pytest.raises(StopError) as stopped:
        _runs_again(prod, plan, frozenset(), older)
    assert stopped.value.exit_code == BAD_INPUT and str(stopped.value).startswith("this `up` runs again: train (")
    _runs_again(prod, plan, frozenset({Accept.RERUN}), older)
    mine = json.dumps({"version": VERSION, "steps": renamed})
    _runs_again(prod, plan, frozenset(), mine)  # the operator's own setting changed: a note
    dev_state = json.dumps({"version": "", "steps": {"train": "gemma4-e4b-train-0000000000"}})
    _runs_again(dev, dev_plan, frozenset(), dev_state)  # not protected: a note
    same = json.dumps({"version": "", "steps": {"convert": plan.convert.name}})
    _runs_again(prod, plan, frozenset(), same)  # nothing renamed: nothing said
    _runs_again(prod, plan, frozenset(), None)  # nothing handed over: nothing said
    assert [line.split(" (")[0] for line in warned] == ["this `up` runs again: train"] * 3
    assert "the configuration changed what they run" in warned[1]


@pytest.mark.slow
@pytest.mark.program
def test_a_protected_stack_stops_before_an_upgrade_runs_its_training_again_unless_told(monkeypatch):
    old = {"version": "", "steps": {"convert": "gemma4-26b-convert-0000000000", "train": "gemma4-26b-train-0000000000"}}
    stopped = _up(monkeypatch, "prod", old, *REAL)
    assert isinstance(stopped.error, StopError) and stopped.error.exit_code == BAD_INPUT
    assert str(stopped.error).startswith(
        "this `up` runs again: convert, train (the state was written by a tpu-rl older"
    )
    assert str(stopped.error).endswith("`make up STACK=prod ACCEPT=rerun` to run them again")
    assert stopped.resources == [], "nothing is created"
    told = _up(monkeypatch, "prod", old, *REAL, accept="rerun")
    assert told.error is None
    assert any(m.startswith("this `up` runs again: convert, train") for level, m in told.logs if level == "WARNING")
    same = _up(monkeypatch, "prod", {"version": VERSION, "steps": old["steps"]}, *REAL)
    assert same.error is None, "a changed setting is the operator's own: a note, never a stop"
