"""Resume as exact as upstream allows: ``rl.num_iterations`` above 1 is refused while a training attempt can resume
on its own (google/tunix#2290: tunix fast-forwards a resumed run's data by the trainer's loops, which count each
input micro-batch ``num_iterations`` times; core/config/resume.py cites the source), at every boundary: the value
(1 and 2), the restarts (``workflow.maxRestarts`` 0 and 1), the drill, and Kueue (its own or a queue elsewhere)."""

from __future__ import annotations

import pytest

from core.config import ConfigError
from tests.lifecycle_walk import settings
from tools.plan import main as plan_main

X = "tpu-rl:training.extraArgs.rl.num_iterations"
ALONE = ["tpu-rl:workflow.maxRestarts=0", "tpu-rl:kueue.enabled=false"]
"""No attempt resumes on its own: no JobSet restart, no drill (its default), no Kueue."""


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
def test_two_iterations_are_refused_with_the_stacks_restarts_naming_the_issue(stack):
    message = _refusal([f"{X}=2"], stack)
    assert message is not None and message.startswith(f"{X} = 2 is invalid: must be 1 while a training attempt")
    assert "google/tunix#2290" in message and "\n" not in message
    assert "workflow.maxRestarts" in message and "Kueue" in message


@pytest.mark.pure
def test_two_iterations_run_where_no_attempt_resumes_on_its_own():
    assert _refusal([f"{X}=2", *ALONE]) is None
    assert settings("dev", [f"{X}=1000", *ALONE]).training.final_step == 10 * 1000


@pytest.mark.pure
def test_one_jobset_restart_is_a_resume():
    message = _refusal([f"{X}=2", "tpu-rl:workflow.maxRestarts=1", "tpu-rl:kueue.enabled=false"])
    assert message is not None and "(workflow.maxRestarts 1)" in message


@pytest.mark.pure
def test_the_restart_drill_is_a_resume():
    message = _refusal([f"{X}=2", *ALONE, "tpu-rl:workflow.restartDrill=true"])
    assert message is not None and "(workflow.restartDrill true)" in message


@pytest.mark.pure
@pytest.mark.parametrize(
    "kueue", [["tpu-rl:kueue.enabled=true"], ["tpu-rl:kueue.enabled=false", "tpu-rl:kueue.queue=team-queue"]]
)
def test_kueues_readmission_is_a_resume(kueue):
    message = _refusal([f"{X}=2", "tpu-rl:workflow.maxRestarts=0", *kueue])
    assert message is not None and "(Kueue re-admitting an evicted step" in message


@pytest.mark.pure
def test_no_training_no_refusal():
    assert _refusal([f"{X}=2", "tpu-rl:workflow.enabled=false"]) is None


def test_the_plan_exits_2_with_the_one_line(tmp_path, capsys):
    code = plan_main(["--out", str(tmp_path / "plan"), "--stack", "dev", "--set", f"{X}=2"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith(f"error: {X} = 2 is invalid") and "\n" not in err
    assert not (tmp_path / "plan").exists(), "nothing written"
