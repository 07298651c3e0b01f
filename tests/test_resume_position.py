"""The report records, per attempt, the checkpoint step it resumed from and where its data resumed: tunix's
``Fast forwarded N micro-batches.`` (``rl/rl_learner.py`` ``RLLearner._prepare_data``, c7d8950 line 407, logged
through absl after ``Restored params from step: N in X seconds``, ``sft/checkpoint_manager.py`` ``maybe_restore``), in
prompts by the run record's batch sizes; the lines as absl prints them, from the training log and the side file the
training script copies them to."""

from __future__ import annotations

import json
import re

import pytest

from tests.lifecycle_walk import settings
from tools.report_html import _attempt_rows
from workloads.observe.evaluations import parse_logs
from workloads.specs.commands import train_argv
from workloads.specs.train_script import RUN_LINE, SIDE_PATTERN, run_record

pytestmark = pytest.mark.pure

RESTORED = "I1130 06:00:40.000000 1 checkpoint_manager.py:320] Restored params from step: {} in 12.345 seconds"
FORWARDED = "I1130 06:02:00.000000 1 rl_learner.py:407] Fast forwarded {} micro-batches."
FIRST, SECOND = "20261130T050000Z", "20261130T060000Z"


def _record(argv: list[str]) -> str:
    return RUN_LINE + json.dumps({"model": "gemma4-26b", "argv": argv})


def _attempts(second: list[str], first: list[str] | None = None) -> list[dict]:
    logs = [(f"logs/evals-{SECOND}.txt", "\n".join(second))]
    if first is not None:
        logs.append((f"logs/train-{FIRST}.log", "\n".join(first)))
    return parse_logs(logs).to_json()["attempts"]


def test_a_resumed_attempt_records_its_step_and_its_data_position_in_prompts():
    argv = train_argv(settings("prod", []), "gs://b/in/", "gs://b/out/")
    sizes = dict(a.split("=", 1) for a in argv if a.startswith(("batch_size=", "train_micro_batch_size=")))
    assert sizes == {"batch_size": "4", "train_micro_batch_size": "2"}, "the prod stack's sizes, as the run passes them"
    record = RUN_LINE + json.dumps(run_record(settings("prod", []), argv))
    first, second = _attempts([record, RESTORED.format(30), FORWARDED.format(60)], first=[record, "Train step 1"])
    assert (first["restoredStep"], first["dataPosition"]) == (None, None), "a fresh start"
    assert second["restoredStep"] == 30
    assert second["dataPosition"] == {"microBatches": 60, "prompts": 120}, "60 micro-batches of 2 prompts"


@pytest.mark.parametrize(
    ("argv", "prompts"),
    [
        (["batch_size=8", "train_micro_batch_size=-1"], 80),  # -1: tunix takes MaxText's whole batches
        (["batch_size=8"], 80),
        (["batch_size=8", "train_micro_batch_size=1"], 10),
        (["train_micro_batch_size=-1"], None),  # no batch size recorded: the count alone
        (["batch_size=often"], None),
    ],
)
def test_the_position_in_prompts_is_the_micro_batch_size_times_the_count(argv, prompts):
    (attempt,) = _attempts([_record(argv), RESTORED.format(10), FORWARDED.format(10)])
    assert attempt["dataPosition"] == {"microBatches": 10, "prompts": prompts}


def test_without_a_run_record_the_count_alone():
    (attempt,) = _attempts([RESTORED.format(10), FORWARDED.format(20)])
    assert attempt["dataPosition"] == {"microBatches": 20, "prompts": None}


def test_a_restore_without_the_fast_forward_has_no_data_position():
    """An attempt that ended between the restore and its first data (or tunix that logs no such line)."""
    (attempt,) = _attempts([_record(["batch_size=4"]), RESTORED.format(10)])
    assert attempt["restoredStep"] == 10 and attempt["dataPosition"] is None


@pytest.mark.parametrize(
    "line",
    [
        "I1130 06:02:00.000000 1 rl_learner.py:407] Fast forwarded micro-batches.",
        "I1130 06:02:00.000000 1 rl_learner.py:407] Fast forwarded -3 micro-batches.",
        "I1130 06:02:00.000000 1 rl_learner.py:407] Fast forwarded 3 batches.",
    ],
)
def test_other_lines_are_no_position(line):
    (attempt,) = _attempts([line])
    assert attempt["dataPosition"] is None


def test_the_first_fast_forward_of_an_attempt_counts():
    (attempt,) = _attempts([FORWARDED.format(4), FORWARDED.format(9)])
    assert attempt["dataPosition"]["microBatches"] == 4


def test_the_training_script_copies_both_lines_to_the_side_file():
    """A killed attempt keeps them: the script copies the lines ``SIDE_PATTERN`` matches (``grep -E``)."""
    for line in (RESTORED.format(10), FORWARDED.format(20)):
        assert re.search(SIDE_PATTERN, line), line


def test_the_report_shows_where_each_attempt_resumed():
    from datetime import UTC, datetime

    logs = _attempts([_record(["batch_size=4", "train_micro_batch_size=2"]), RESTORED.format(5), FORWARDED.format(10)])
    start = datetime(2026, 11, 30, 6, 1, tzinfo=UTC).timestamp()
    report = {
        "evaluation": {"attempts": logs},
        "attempts": [{"start": start, "end": start + 3600, "firstStep": 6, "lastStep": 50, "hours": 1.0}],
    }
    row = _attempt_rows(report)
    assert "resumed from step 5, data from prompt 20 (10 micro-batches skipped)" in row
