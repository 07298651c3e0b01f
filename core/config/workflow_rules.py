"""The workflow's rules: which steps run and their bounds, the training run's JobSet restarts (enough for the
disruptions a run of its length should survive, by the estimate's training hours), the read token a run needs, and
the publication's repository and write token."""

from __future__ import annotations

import math
from dataclasses import dataclass

from core.config.defaults import DEFAULT_RESTARTS, DEFAULT_UNSCHEDULABLE, DISRUPTION_HOURS
from core.config.fields import project_key as _k
from core.config.values import Values, error, format_duration
from core.estimate import train_hours, training_run
from core.models import Model, step_memory_gib
from core.printed_commands import pulumi_config_set
from core.settings import ModelSettings, PublishSettings, TpuSettings, TrainingSettings, WorkflowSettings
from core.steps import STEPS
from core.tpu import SliceShape


def workflow_settings(v: Values, tpu: TpuSettings, model: Model) -> WorkflowSettings:
    """``tpu-rl:workflow``, its restarts as configured or the capacity mode's default (``restarts_for_run`` raises
    that default to what the run's length needs)."""
    enabled = v[_k("workflow.enabled")]
    restarts = v[_k("workflow.maxRestarts")]
    unschedulable = v[_k("workflow.unschedulableTimeout")]
    memory = v[_k("workflow.stepMemoryGib")]
    return WorkflowSettings(
        enabled=enabled,
        preflight=v[_k("workflow.preflight")],
        capacity_check=v[_k("workflow.capacityCheck")],
        verify_export=v[_k("workflow.verifyExport")],
        max_restarts=DEFAULT_RESTARTS[tpu.capacity] if restarts is None else restarts,
        timeouts={step: v[_k(f"workflow.timeouts.{step}")] for step in STEPS},
        jobset_version=v[_k("workflow.jobsetVersion")],
        unschedulable_timeout=DEFAULT_UNSCHEDULABLE[tpu.capacity] if unschedulable is None else unschedulable,
        step_memory_gib=step_memory_gib(model) if memory is None else memory,
        stall_timeout=v[_k("workflow.stallTimeout")],
        restart_drill=v[_k("workflow.restartDrill")],
        steps=tuple(s.name for s in STEPS.values() if s.switch is None or v[s.switch]) if enabled else (),
    )


def check_token(v: Values, stack: str) -> None:
    """The Hugging Face read token, which every step of a run uses."""
    if not v["hfTokenSet"]:
        raise error(
            _k("hfToken"),
            None,
            "required while tpu-rl:workflow.enabled is true; set it with "
            f"`{pulumi_config_set(stack, _k('hfToken'), secret=True)}` (a Hugging Face read token)",
        )


def publish_settings(v: Values, stack: str) -> PublishSettings:
    """The publication: with the workflow on (off, there is no export to publish), a repository needs its own
    write token (a write token without a repository is unused: no Secret holds it)."""
    repo = v[_k("publish.repo")] or None
    if repo is None or not v[_k("workflow.enabled")]:
        return PublishSettings()
    if not v[_k("workflow.verifyExport")]:
        raise error(
            _k("publish.repo"),
            repo,
            "needs tpu-rl:workflow.verifyExport true: only an export compared with the base model is published",
        )
    if not v["hfWriteTokenSet"]:
        setting = pulumi_config_set(stack, _k("hfWriteToken"), secret=True)
        raise error(
            _k("hfWriteToken"),
            None,
            f"required with tpu-rl:publish.repo; set it with `{setting}` "
            "(a Hugging Face write token for the repository's namespace, not the read token)",
        )
    return PublishSettings(repo=repo, private=v[_k("publish.private")])


@dataclass(frozen=True)
class _Run:
    """What the estimate reads of ``Settings`` for a training run (``core.estimate.training_run``)."""

    model: ModelSettings
    training: TrainingSettings


def expected_train_hours(training: TrainingSettings, model: Model, chips: int) -> float:
    """The training step's wall-clock hours as the estimate gives them (``core.estimate.train_hours``: one attempt's
    start-up, then the steps), on ``chips``, every slice's."""
    return train_hours(training_run(_Run(ModelSettings(model, ""), training)), chips)


def restarts_needed(hours: float) -> int:
    """The counted restarts a run of ``hours`` of training should have: one per started ``DISRUPTION_HOURS``."""
    return max(1, math.ceil(hours / DISRUPTION_HOURS))


def restarts_for_run(v: Values, tpu: TpuSettings, training: TrainingSettings, model: Model, shape: SliceShape) -> int:
    """``tpu-rl:workflow.maxRestarts`` for the run: each disruption of a training run (a lost slice, a maintenance
    event, a stalled attempt, a disrupted head) costs one counted JobSet restart, so the default is the capacity
    mode's or, where more, ``restarts_needed`` by the estimate's training hours; a value set between 1 and that is
    refused, and 0 (fail at the first disruption, the tutorial's JobSet) stays allowed."""
    configured = v[_k("workflow.maxRestarts")]
    default = DEFAULT_RESTARTS[tpu.capacity]
    if not v[_k("workflow.enabled")]:
        return default if configured is None else configured
    hours = expected_train_hours(training, model, shape.chips * tpu.slices)
    needed = restarts_needed(hours)
    if configured is None:
        return max(default, needed)
    if 0 < configured < needed:
        raise error(
            _k("workflow.maxRestarts"),
            configured,
            f"each disruption of a training run (a lost slice, a maintenance event, a stalled attempt) costs one "
            f"counted JobSet restart, and the estimate's training takes {_hours(hours, needed)} h: at least "
            f"{needed}, one per started {DISRUPTION_HOURS} h; raise it to {needed} or more, or set 0 to fail the run "
            "at its first disruption (the tutorial's behaviour)",
        )
    return configured


MAX_DEADLINE_HOURS = 168
"""The most a step's deadline may be (``tpu-rl:workflow.timeouts.*``'s reader)."""


def check_train_deadline(
    v: Values, training: TrainingSettings, model: Model, shape: SliceShape, tpu: TpuSettings
) -> None:
    """A training attempt runs the whole training when it starts fresh, and its Job's ``activeDeadlineSeconds`` is
    ``tpu-rl:workflow.timeouts.train``, which fails the JobSet when it passes (``failOnDeadline``): a run whose
    estimated training (``expected_train_hours``) is longer than that deadline would fail after it, every time.
    Refused, naming both; the deadline is not derived, since it is the bound an operator chose for an attempt."""
    if not v[_k("workflow.enabled")]:
        return
    deadline = v[_k("workflow.timeouts.train")]
    hours = expected_train_hours(training, model, shape.chips * tpu.slices)
    if hours * 3600 <= deadline:
        return
    needed = math.ceil(hours)
    fix = (
        f"raise it to at least {needed}h, or lower tpu-rl:training.numBatches"
        if needed <= MAX_DEADLINE_HOURS
        else f"lower tpu-rl:training.numBatches (a deadline is at most {MAX_DEADLINE_HOURS}h)"
    )
    takes = _past(hours, deadline / 3600)
    raise error(
        _k("workflow.timeouts.train"),
        format_duration(deadline),
        f"it is each training attempt's deadline, and the estimate's training ({training.knobs['num_batches']} "
        f"batches) takes {takes} h, past it: the run would fail when the deadline passes; {fix}",
    )


def _hours(hours: float, needed: int) -> str:
    """``hours`` with as many decimals as show it is past the ``needed - 1`` days it exceeds (24.003, not 24.0)."""
    return _past(hours, (needed - 1) * DISRUPTION_HOURS)


def _past(hours: float, bound: float) -> str:
    """``hours`` with as many decimals as show it is past ``bound`` (24.003, not 24.0)."""
    for digits in range(1, 4):
        text = f"{hours:.{digits}f}"
        if float(text) > bound:
            return text
    return f"{hours:.4f}"
