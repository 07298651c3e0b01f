"""Resume as exact as upstream allows: ``rl.num_iterations`` above 1 is refused outright while google/tunix#2290 is
open (tunix fast-forwards a resumed run's data by the trainer's loops, which count each input micro-batch
``num_iterations`` times; core/config/resume.py cites the source, read at tunix c7d8950, and says MaxText 0.2.5's pin
a8d7058 is unread): every attempt after a run's first resumes, the next ``up``'s retry among them, so no setting of
the restarts, the drill or Kueue makes it exact. The boundary: the values 1 and 2, each path of resume on or off."""

from __future__ import annotations

import json

import pytest

from core.config import ConfigError
from core.config.resume import ISSUE, PINNED, READ_AT
from tests.conftest import VENDORED
from tests.lifecycle_walk import settings
from tools.plan import main as plan_main

X = "tpu-rl:training.extraArgs.rl.num_iterations"
ALONE = ["tpu-rl:workflow.maxRestarts=0", "tpu-rl:kueue.enabled=false"]
"""No attempt resumes on its own: no JobSet restart, no drill (its default), no Kueue; the next `up` still retries."""


def _refusal(overrides: list[str], stack: str = "dev") -> str | None:
    try:
        settings(stack, overrides)
    except ConfigError as caught:
        return str(caught)
    return None


@pytest.mark.pure
@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_one_iteration_resumes_exactly_with_every_restart_on(stack):
    assert _refusal([f"{X}=1", "tpu-rl:workflow.restartDrill=true"], stack) is None


@pytest.mark.pure
@pytest.mark.parametrize("stack", ["dev", "prod"])
@pytest.mark.parametrize(
    "paths",
    [
        [],
        ALONE,
        [*ALONE, "tpu-rl:workflow.restartDrill=true"],
        ["tpu-rl:workflow.maxRestarts=0", "tpu-rl:kueue.enabled=false", "tpu-rl:kueue.queue=team-queue"],
    ],
    ids=["the-stacks-restarts", "none-on-its-own", "the-drill", "a-queue-elsewhere"],
)
def test_two_iterations_are_refused_whatever_resumes_naming_the_issue_and_the_pin(stack, paths):
    message = _refusal([f"{X}=2", *paths], stack)
    assert message is not None and message.startswith(f"{X} = 2 is invalid: must be 1 while {ISSUE} is open")
    assert "\n" not in message and "the next `up` retrying the run" in message
    assert f"read at {READ_AT}; MaxText 0.2.5's pin {PINNED} is unread" in message


@pytest.mark.pure
def test_the_pin_is_the_wheels():
    """The pin named is the tunix MaxText 0.2.5's wheel pins (its ``post_train_github_deps``)."""
    wheel = json.loads((VENDORED / "maxtext-0.2.5" / "wheel.json").read_text())
    (tunix,) = [dep for dep in wheel["post_train_github_deps"] if dep.startswith("google-tunix @ ")]
    assert f"/archive/{PINNED}" in tunix


@pytest.mark.pure
def test_no_training_no_refusal():
    assert _refusal([f"{X}=2", "tpu-rl:workflow.enabled=false"]) is None


def test_the_plan_exits_2_with_the_one_line(tmp_path, capsys):
    code = plan_main(["--out", str(tmp_path / "plan"), "--stack", "dev", "--set", f"{X}=2", *("--set", ALONE[0])])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith(f"error: {X} = 2 is invalid") and "\n" not in err
    assert not (tmp_path / "plan").exists(), "nothing written"
