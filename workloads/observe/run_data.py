"""Everything a finished or running training run left in GCS, gathered for the status, the report and the
stack output (scalars, evaluations, checkpoints, what the run was)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.layout import actor_checkpoints, tensorboard_dir
from workloads.observe.evaluations import Evaluations, read_run_logs
from workloads.observe.scalars import Scalars, read_run_scalars

REWARD_TAGS = ("rewards/train/sum", "rewards/train/mean")
"""Per-completion reward summed over the reward functions (what ``mean_reward`` averages), then the mean."""


def reward_tag(scalars: Scalars) -> str | None:
    """The tag to show as "reward" (the summed reward, else its mean, else any reward tag)."""
    for tag in REWARD_TAGS:
        if scalars.series.get(tag):
            return tag
    rewards = sorted(t for t in scalars.series if "reward" in t and scalars.series[t])
    return rewards[0] if rewards else None


@dataclass
class RunData:
    output_uri: str
    scalars: Scalars
    evaluations: Evaluations
    checkpoint_step: int | None

    @property
    def last_step(self) -> int | None:
        """The step training reached: the current attempt's. A resumed attempt starts again from its
        checkpoint, so until its first event it is at the step it restored (else the newest complete
        checkpoint), not at the step the dead attempt had logged."""
        events = self.scalars.attempts
        logs = self.evaluations.attempts
        newest_log = _epoch(logs[-1].name) if logs else None
        if events and (newest_log is None or events[-1].start >= newest_log):
            logged = self.scalars.last_step
            if logged is not None:
                return max(logged, self.checkpoint_step) if self.checkpoint_step is not None else logged
        if logs and logs[-1].restored_step is not None:
            return logs[-1].restored_step
        return self.checkpoint_step

    @property
    def final_reward(self) -> float | None:
        tag = reward_tag(self.scalars)
        return self.scalars.last(tag) if tag else None

    def step_chip_hours(self, chips: int) -> float | None:
        """TPU chip-hours of the training steps: each attempt's span of tunix's own events, summed, times the
        chips (start-up, compilation, the first step, the evaluations before and after, the gaps between
        attempts and Orbax's step-0 scalars left out: less than the slice bills)."""
        hours = self.scalars.training_hours
        if hours is None or chips <= 0:
            return None
        return hours * chips

    def held_chip_hours(self, chips: int, now: float | None = None) -> float | None:
        """TPU chip-hours the training attempts held the slice: each attempt from its start (the training
        container's, in its files' names) to its last file (its log, copied when train_rl exits), times the
        chips; ``now`` ends the newest attempt while it runs. Start-up, compilation and every evaluation
        included: what an autoscaled slice bills at least (a reserved one bills every hour it exists)."""
        attempts = self.evaluations.attempts
        if not attempts or chips <= 0:
            return None
        hours = [a.held_hours(now if a is attempts[-1] else None) for a in attempts]
        if any(h is None for h in hours):
            return None
        return sum(h for h in hours if h is not None) * chips

    def summary(self, chips: int) -> dict[str, Any]:
        """The stack output: before/after accuracy, final reward, chip-hours of the steps and of the attempts
        (None where not logged)."""
        pre, post = self.evaluations.pre or {}, self.evaluations.post or {}
        steps, held = self.step_chip_hours(chips), self.held_chip_hours(chips)
        return {
            "accuracyBefore": pre.get("accuracy"),
            "accuracyAfter": post.get("accuracy"),
            "meanRewardBefore": pre.get("mean_reward"),
            "meanRewardAfter": post.get("mean_reward"),
            "finalReward": self.final_reward,
            "lastStep": self.last_step,
            "stepChipHours": round(steps, 2) if steps is not None else None,
            "heldChipHours": round(held, 2) if held is not None else None,
            "attempts": len(self.scalars.attempts),
        }


def _epoch(name: str) -> float | None:
    """``20261130T050000Z`` (an attempt's UTC start) as a Unix time."""
    from datetime import UTC, datetime

    try:
        return datetime.strptime(name, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


def gather(client: Any, output_uri: str) -> RunData:
    """Read a run's scalars, evaluations and newest complete checkpoint from GCS (each read bounded;
    ``workloads.observe.artifacts.StorageError`` names what could not be read)."""
    from workloads.observe.artifacts import bounded, final_checkpoint

    actor = actor_checkpoints(output_uri)
    found = bounded(
        client, f"listing the checkpoints under {actor}", lambda call: final_checkpoint(client, actor, **call)
    )
    events = tensorboard_dir(output_uri)
    scalars = bounded(
        client, f"reading the TensorBoard files under {events}", lambda call: read_run_scalars(client, events, **call)
    )
    evaluations = bounded(
        client, f"reading the logs under {output_uri}logs/", lambda call: read_run_logs(client, output_uri, **call)
    )
    return RunData(
        output_uri=output_uri,
        scalars=scalars,
        evaluations=evaluations,
        checkpoint_step=found.step if found else None,
    )
