"""Every line an operator acts on of a training run's faults, reviewed word for word in tests/data/train-messages.tsv
(`TPU_RL_UPDATE_MESSAGES=1` rewrites it; check the diff): how the training container judged an attempt's end, and
what `pulumi up` and `make status` say of the slice. Each is made by the real function from the evidence a case
names; the behaviour behind each line is its module's tests'. Pure."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from core.names import DRILL_EXIT, SLICE_DOWN_EXIT, STALLED_EXIT
from workloads.container import slice_state, stall_watchdog, train_exit
from workloads.container.slice_state import Clock, Ended, Worker
from workloads.observe import slice_maintenance

pytestmark = pytest.mark.pure

MESSAGES = Path(__file__).parent / "data" / "train-messages.tsv"
CODES = (SLICE_DOWN_EXIT, STALLED_EXIT)
FRAMES = ["Traceback (most recent call last):", '  File "train_rl.py", line 812, in main', "    rl_train(config)"]
DEADLINE = [*FRAMES, "jax.errors.JaxRuntimeError: DEADLINE_EXCEEDED: pipe to worker 3 unreachable for 60s"]
DATA_LOSS = [*FRAMES, "jax.errors.JaxRuntimeError: DATA_LOSS: Slice 0 is unhealthy"]
UNAVAILABLE = [*FRAMES, "jax.errors.JaxRuntimeError: UNAVAILABLE: Socket closed"]
EXCEPTION = [*FRAMES, "ValueError: Reference model parameters changed during training!"]
WORKERS = [Worker(f"run-worker-0-{i}-x", f"uid-{i}", True, 0, None, "Running") for i in range(8)]
OOM = Worker("run-worker-0-3-x", "uid-3", True, 1, None, "Running", ended=(Ended("pathways-worker", "OOMKilled", 137),))


RESERVED, AUTOSCALED = slice_maintenance.SliceSize(8, True), slice_maintenance.SliceSize(8, False)
AWAY = slice_maintenance.SliceNotices(
    tuple(
        slice_maintenance.SliceNode(f"gke-tpu-rl-prod-tpu-np-{i}", None, active="ONGOING" if i > 4 else "", ready=i < 5)
        for i in range(7)
    )
)
"""A slice under host maintenance: 5 of its 7 nodes left Ready, 2 under way, 1 of the reservation's 8 gone."""


class Still:
    """The attempt's pods, the same at every read, on a clock that moves only when the check sleeps."""

    def __init__(self, pods: list[Worker]) -> None:
        self.answer, self.t = pods, 0.0

    def pods(self) -> list[Worker]:
        return list(self.answer)

    def clock(self) -> Clock:
        return Clock(now=lambda: self.t, wall=lambda: 1_796_032_800.0 + self.t, sleep=self._sleep)

    def _sleep(self, seconds: float) -> None:
        self.t += seconds


def checked(pods: list[Worker], tmp_path: Path) -> tuple[int, str]:
    """``slice_state.check`` of ``pods`` against a baseline of every worker Ready, unrestarted."""
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps({w.uid: [w.name, 0] for w in WORKERS}))
    api = Still(pods)
    return slice_state.check(api, 8, train_exit.CHECK_SECONDS, str(baseline), api.clock())


def judged(lines: list[str], check: Callable[[], tuple[int, str]]) -> str:
    return train_exit.verdict(1, lines, None, CODES, None, check)[1]


def cases(tmp_path: Path) -> dict[str, str]:
    fault = checked([*WORKERS[:3], OOM, *WORKERS[4:]], tmp_path)
    up = checked(WORKERS, tmp_path)
    down = checked(WORKERS[:7], tmp_path)
    return {
        "devices-after-ready": stall_watchdog.no_devices_for(7200, stall_watchdog.STALL_KEY),
        "devices-unread": stall_watchdog.no_devices_for(16200, stall_watchdog.BUDGET_KEY),
        "check-fault": fault[1],
        "judge-fault": judged(DEADLINE, lambda: fault),
        "judge-fault-data-loss": judged(DATA_LOSS, lambda: fault),
        "judge-other-down": judged(UNAVAILABLE, lambda: down),
        "judge-other-up": judged(UNAVAILABLE, lambda: up),
        "judge-exception-unread": judged(EXCEPTION, lambda: (2, "unknown: cannot read the slice's workers (HTTP 403)")),
        "judge-kept-code": train_exit.kept_line(DRILL_EXIT),
        "up-slice-away": slice_maintenance.away_refusal(slice_maintenance.away(AWAY, RESERVED), "prod"),
        "status-slice-away": slice_maintenance.slice_line(AWAY, RESERVED),
        "status-slice-gone": slice_maintenance.slice_line(slice_maintenance.SliceNotices(), RESERVED),
        "status-slice-at-zero": slice_maintenance.slice_line(slice_maintenance.SliceNotices(), AUTOSCALED),
    }


def read_messages() -> dict[str, str]:
    rows = (line.split("\t", 1) for line in MESSAGES.read_text().splitlines())
    return {case: text for case, text in rows}


def test_every_line_is_one_line_and_the_reviewed_one(tmp_path):
    found = cases(tmp_path)
    assert all(text and "\n" not in text and "\t" not in text for text in found.values())
    if os.environ.get("TPU_RL_UPDATE_MESSAGES"):
        MESSAGES.write_text("".join(f"{case}\t{text}\n" for case, text in found.items()))
    assert found == read_messages()
