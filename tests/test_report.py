"""The run report against fake-gcs-server with event files from a real TensorBoard writer."""

from __future__ import annotations

import json
import struct
import zlib

import pytest

from core.deadline import BUDGETS, Budget
from tests.conftest import put, put_conversion
from tests.lifecycle_walk import settings
from tests.report_screenshot import CHROMIUM, screenshot
from tests.run_files import FIRST_ATTEMPT, RESTORED, SECOND_ATTEMPT, STEP_SECONDS, reward, upload_run
from tools import report as report_cli
from workloads.observe.evaluations import parse_logs
from workloads.observe.run_data import gather
from workloads.specs.step_specs import plan_workflow

STEPS = [3, 1, 2, 5, 4, 10, 8, 9, 6, 7]
"""Written out of order, in two files (an attempt and its resume)."""
DEV = plan_workflow(settings("dev", []))
RUN = DEV.train.output_uri


def make(tmp_path, *args):
    out = tmp_path / "report"
    code = report_cli.main([*args, "--out", str(out)])
    return code, out


def held_chip_hours(gcs, chips: int) -> float:
    """Each attempt from its start (its files' names) to its last file's write time in GCS, times the chips."""
    from workloads.observe.evaluations import ATTEMPT
    from workloads.observe.run_data import _epoch

    bucket, _, prefix = RUN.removeprefix("gs://").partition("/")
    ends: dict[str, float] = {}
    for blob in gcs.list_blobs(bucket, prefix=prefix + "logs/"):
        attempt = ATTEMPT.search(blob.name)
        assert attempt, blob.name
        start = attempt.group(1)
        ends[start] = max(ends.get(start, 0.0), blob.updated.timestamp())
    held = 0.0
    for start, end in ends.items():
        began = _epoch(start)
        assert began is not None, start
        held += end - began
    return round(held / 3600 * chips, 2)


@pytest.mark.slow
def test_report_json_holds_every_tag_sorted_the_evaluations_and_the_summary(gcs, tmp_path):
    upload_run(gcs, RUN, steps=STEPS, checkpoints=(10,))
    code, out = make(tmp_path, "--stack", "dev")
    assert code == 0
    report = json.loads((out / "report.json").read_text())
    assert report["steps"] == 10
    assert sorted(report["scalars"]) == [
        "actor/train/kl",
        "actor/train/loss",
        "completions/train/mean_length",
        "jax/checkpoint/write/async/commit_future_count",
        "jax/orbax/write/async/start_time",
        "rewards/train/mean",
        "rewards/train/sum",
    ], "every tag unchanged, Orbax's step-0 scalars included"
    assert report["scalars"]["rewards/train/sum"] == [[s - 1, pytest.approx(reward(s))] for s in range(1, 11)]
    assert report["scalars"]["actor/train/loss"][0][0] == 1, "tunix: the rollout at step s-1, the update at s"
    assert report["stepOffsets"]["rewards/"] == 1 and "actor/" not in report["stepOffsets"]
    assert report["scalars"]["completions/train/mean_length"][-1] == [9, 250.0]
    assert report["evaluation"]["pre"] == {
        "corr": 12,
        "total": 40,
        "accuracy": 30.0,
        "partial_accuracy": 45.0,
        "format_accuracy": 80.0,
        "mean_reward": 0.45,
    }, "the first attempt's pre-RL line: the base model"
    assert report["evaluation"]["post"] == {
        "corr": 21,
        "total": 40,
        "accuracy": 52.5,
        "partial_accuracy": 60.0,
        "format_accuracy": 90.0,
        "mean_reward": 0.65,
    }
    assert report["evaluation"]["intermediate"] == [
        {
            "step": 5,
            "corr": 17,
            "total": 40,
            "accuracy": 42.5,
            "partial_accuracy": 50.0,
            "format_accuracy": 85.0,
            "mean_reward": 0.55,
        }
    ], "a re-evaluated step keeps its latest values"
    # Each attempt's span of tunix's events (rewards one second before the update), not the gap between them
    # nor Orbax's scalars two seconds after a save.
    per_attempt = (4 * STEP_SECONDS + 1) / 3600
    assert [a["hours"] for a in report["attempts"]] == [round(per_attempt, 4)] * 2
    assert [(a["firstStep"], a["lastStep"]) for a in report["attempts"]] == [(1, 5), (6, 10)]
    assert report["summary"] == {
        "accuracyBefore": 30.0,
        "accuracyAfter": 52.5,
        "meanRewardBefore": 0.45,
        "meanRewardAfter": 0.65,
        "finalReward": pytest.approx(reward(10)),
        "lastStep": 10,
        "stepChipHours": round(2 * per_attempt * 8, 2),
        "heldChipHours": held_chip_hours(gcs, 8),
        "attempts": 2,
    }
    assert report["summary"]["heldChipHours"] > report["summary"]["stepChipHours"], "start-up and gaps included"
    assert report["run"]["stack"] == "dev" and report["run"]["chips"] == 8 and report["run"]["capacity"] == "spot"
    assert report["run"]["steps"]["train"]["outputUri"] == RUN
    assert report["run"]["logs"] == [
        f"evals-{FIRST_ATTEMPT}.txt",
        f"evals-{SECOND_ATTEMPT}.txt",
        f"train-{SECOND_ATTEMPT}.log",
    ]
    attempts = report["evaluation"]["attempts"]
    assert [(a["start"], a["restoredStep"]) for a in attempts] == [(FIRST_ATTEMPT, None), (SECOND_ATTEMPT, RESTORED)]
    assert attempts[1]["pre"]["accuracy"] == 37.5 and attempts[1]["pre"]["afterRestore"] is True
    assert report["truncated"] is False


def _png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


@pytest.mark.slow
def test_plots_and_the_html_page(gcs, tmp_path):
    upload_run(gcs, RUN, steps=STEPS)
    code, out = make(tmp_path, "--stack", "dev")
    assert code == 0
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert pngs == ["kl.png", "length.png", "loss.png", "reward.png"]
    for name in pngs:
        width, height = _png_size(out / name)
        assert width >= 600 and height >= 300
        assert len(zlib.compress((out / name).read_bytes())) > 10_000, f"{name} has a plot in it"
    page = (out / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 4 and "http://" not in page and "https://" not in page
    for text in (
        "accuracy before",
        "30%",
        "52.5%",
        "+22.5",
        "Configuration (differences from the tutorial)",
        "tpu-rl:training.numBatches",
        "TPU time and cost",
        "estimate (train)",
        RUN,
    ):
        assert text in page, text


def test_a_truncated_last_file_and_an_empty_run(gcs, tmp_path):
    upload_run(gcs, RUN, steps=STEPS, truncate_last=True)
    data = gather(gcs, RUN)
    assert data.scalars.truncated
    series = {tag: dict(points) for tag, points in data.scalars.series.items()}
    assert 10 in series["actor/train/kl"] and data.scalars.last_step == 10, "everything before the cut is kept"
    empty = "gs://my-tpu-dev-project-tpu-rl-dev/gemma4-e4b/train/0000000000/"
    upload_run(gcs, empty, steps=[], logs=False)
    code, out = make(tmp_path, "--run-uri", empty)
    assert code == 0
    report = json.loads((out / "report.json").read_text())
    assert report["steps"] is None and report["scalars"] == {} and report["attempts"] == []
    assert report["evaluation"] == {
        "pre": None,
        "preUnknown": "the run left no logs",
        "post": None,
        "intermediate": [],
        "attempts": [],
    }
    assert not list(out.glob("*.png"))
    assert "No TensorBoard scalars were found" in (out / "report.html").read_text()


@pytest.mark.slow
def test_a_run_known_only_by_its_uri_uses_its_log(gcs, tmp_path):
    upload_run(gcs, RUN, steps=STEPS)
    code, out = make(tmp_path, "--run-uri", RUN, "--capacity", "spot")
    assert code == 0
    report = json.loads((out / "report.json").read_text())
    assert report["run"]["model"] == "gemma4-e4b" and report["run"]["chips"] == 8
    page = (out / "report.html").read_text()
    assert "learning_rate" in page and "2e-5" in page, "the argv's knobs against the tutorial's"


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--run-uri", "gs://bucket/no-slash"], "expected gs://BUCKET/MODEL/train/HASH/"),
        (["--stack", "dev", "--set", "tpu-rl:workflow.enabled=false"], "runs no workflow"),
        (["--stack", "dev", "--set", "tpu-rl:tpu.slices=0"], "tpu-rl:tpu.slices"),
    ],
)
def test_bad_inputs_are_one_line(args, words, tmp_path, capsys):
    code, out = make(tmp_path, *args)
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("error: ") and words in err and "\n" not in err
    assert not out.exists()


@pytest.mark.slow
def test_an_unreachable_bucket_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "http://127.0.0.1:9")
    monkeypatch.setitem(BUDGETS, "gcs", Budget(1.0, 0.5, 0.5))
    code, out = make(tmp_path, "--stack", "dev")
    err = capsys.readouterr().err.strip()
    assert code == 1 and "\n" not in err and not out.exists(), "a retry may cure it"
    assert err == (
        f"error: cannot read the run at {RUN}: GCS did not answer listing the checkpoints under "
        f"{RUN}rl/checkpoints/actor/ in time (ConnectionError); check the network, or retry later"
    )


def test_evaluation_lines_need_every_field():
    assert parse_logs([("a.log", "Pre RL Training: corr=1, total=2, accuracy=50.0%")]).pre is None


@pytest.mark.slow  # a browser: some 2.5 s
@pytest.mark.skipif(CHROMIUM is None, reason="no headless Chromium (Debian's package `chromium`) on this machine")
def test_the_page_renders_in_headless_chromium(gcs, tmp_path):
    upload_run(gcs, RUN, steps=STEPS, checkpoints=(10,))
    code, out = make(tmp_path, "--stack", "dev")
    assert code == 0
    shot = tmp_path / "report.png"
    screenshot(out / "report.html", shot, "1100,1500", profile=tmp_path / "profile", timeout=90)
    width, height = _png_size(shot)
    assert (width, height) == (1100, 1500)
    assert len(zlib.compress(shot.read_bytes())) > 50_000, "the page rendered text and plots"


@pytest.mark.pure
def test_pass_at_1_gives_a_float_corr_that_is_kept():
    """evaluate_rl.py 174-181: with eval_mode=pass_at_1 corr is the sum of per-question fractions."""
    line = (
        "W1130 05:02:03.000000 1 train_rl.py:786] Pre RL Training: corr=12.333333333333334, total=40, "
        "accuracy=30.833333333333336%, partial_accuracy=45.0%, format_accuracy=80.0%, mean_reward=0.4500"
    )
    pre = parse_logs([("train-20261130T050000Z.log", line)]).pre
    assert pre is not None and pre["corr"] == pytest.approx(12.333333333333334) and pre["total"] == 40
    whole = parse_logs([("train-20261130T050000Z.log", line.replace("12.333333333333334", "12"))]).pre
    assert whole is not None and whole["corr"] == 12


@pytest.mark.pure
def test_a_resumed_attempts_pre_rl_line_is_never_the_base_model():
    """A resume restores the checkpoint, then evaluates (train_rl.py 768-788): its Pre RL Training line is of
    trained weights. With the first attempt's log lost the base accuracy is unknown, and the reason says so."""
    resumed = "\n".join(
        [
            "I1130 06:00:40.000000 1 checkpoint_manager.py:293] Restored params from step: 30 in 1.000 seconds",
            "W1130 06:02:03.000000 1 train_rl.py:786] Pre RL Training: corr=30, total=40, accuracy=75.0%, "
            "partial_accuracy=80.0%, format_accuracy=95.0%, mean_reward=0.7000",
        ]
    )
    found = parse_logs([("train-20261130T060000Z.log", resumed)])
    assert found.pre is None and found.attempts[0].restored_step == 30
    assert found.pre_unknown is not None
    assert found.pre_unknown.startswith("every surviving log is of an attempt that resumed from a checkpoint")
    fresh = "W1130 05:02:03.000000 1 train_rl.py:786] Pre RL Training: corr=12, total=40, accuracy=30.0%, "
    fresh += "partial_accuracy=45.0%, format_accuracy=80.0%, mean_reward=0.4500"
    both = parse_logs([("train-20261130T060000Z.log", resumed), ("evals-20261130T050000Z.txt", fresh)])
    assert both.pre is not None
    assert both.pre["accuracy"] == 30.0 and both.pre_unknown is None, "the fresh attempt's, though it came first"


@pytest.mark.pure
def test_status_does_not_overstate_the_step_after_a_resume():
    """The dead attempt logged step 7; the new one restored step 5 and has logged nothing yet: it is at 5."""
    from workloads.observe.evaluations import Attempt, Evaluations
    from workloads.observe.run_data import RunData
    from workloads.observe.scalars import EventAttempt, Scalars

    dead = EventAttempt("events.out.tfevents.1790000000.head", 1_790_000_000.0, 1_790_003_000.0, 1, 7)
    scalars = Scalars(series={"actor/train/loss": [(7, 0.1)]}, attempts=[dead])
    logs = Evaluations(attempts=[Attempt("20260921T133000Z"), Attempt("20260921T150000Z", restored_step=5)])
    assert RunData("gs://b/r/", scalars, logs, checkpoint_step=5).last_step == 5
    started = EventAttempt("events.out.tfevents.1790010000.head", 1_790_010_000.0, 1_790_010_400.0, 6, 6)
    scalars.attempts.append(started)
    assert RunData("gs://b/r/", scalars, logs, checkpoint_step=5).last_step == 6


@pytest.mark.slow
def test_a_200_mib_log_is_read_by_its_head_and_tail(gcs):
    """A debug run's log is large; its pre-RL line is at the start and its post-RL line at the end."""
    from tests.run_files import POST, PRE, RECORD
    from workloads.observe.evaluations import HEAD_BYTES, TAIL_BYTES, read_run_logs

    bucket, _, prefix = RUN.removeprefix("gs://").partition("/")
    gcs.create_bucket(bucket)
    filler = b"I1130 05:10:00.000000 1 rl_cluster.py:730] Rollout string metric completions: ...\n"
    middle = filler * ((200 << 20) // len(filler))
    data = f"{RECORD}\n{PRE}\n".encode() + middle + f"{POST}\n".encode()
    assert len(data) >= 200 << 20 > HEAD_BYTES + TAIL_BYTES
    gcs.fake.lay_out(bucket, [f"{prefix}logs/train-20261130T050000Z.log"], data=data)
    found = read_run_logs(gcs, RUN)
    assert found.pre is not None and found.post is not None and found.run is not None
    assert found.pre["accuracy"] == 30.0 and found.post["accuracy"] == 52.5 and found.run.model == "gemma4-e4b"


@pytest.mark.parametrize("given", ["Spot", "reservation", "FLEX-START"])
@pytest.mark.slow
def test_capacity_is_any_case(gcs, tmp_path, given):
    upload_run(gcs, RUN, steps=STEPS)
    assert make(tmp_path, "--run-uri", RUN, "--capacity", given)[0] == 0
    assert f"({given.lower()})" in (tmp_path / "report" / "report.html").read_text(), "priced at that capacity"


def test_an_unknown_capacity_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exited:
        make(tmp_path, "--run-uri", RUN, "--capacity", "bogus")
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert exited.value.code == 2 and "invalid choice: 'bogus'" in err and not (tmp_path / "report").exists()


@pytest.mark.pure
def test_the_rollout_tags_are_aligned_with_the_update_they_feed():
    """tunix logs rewards/* at the global step before the update (rl_cluster.py buffer_metrics) and actor/* at
    the update (peft_trainer.py "increment the step by one for logging purpose")."""
    from workloads.observe.scalars import Scalars, is_training_tag, step_offset

    scalars = Scalars(series={"rewards/train/sum": [(0, 0.4), (1, 0.5)], "actor/train/loss": [(1, 2.0), (2, 1.0)]})
    assert scalars.aligned("rewards/train/sum") == [(1, 0.4), (2, 0.5)]
    assert scalars.aligned("actor/train/loss") == [(1, 2.0), (2, 1.0)]
    assert [step_offset(t) for t in ("completions/train/mean_length", "global/train/x", "perf/train/y")] == [1, 1, 0]
    assert not is_training_tag("jax/orbax/write/async/start_time") and is_training_tag("actor/train/kl")


@pytest.mark.slow
def test_a_publishing_stack_reports_where_the_model_was_published(gcs, tmp_path):
    publishing = ["--set", "tpu-rl:publish.repo=acme/gemma4-grpo"]
    plan = plan_workflow(settings("dev", ["tpu-rl:publish.repo=acme/gemma4-grpo"]))
    assert plan.publish is not None
    upload_run(gcs, RUN, steps=STEPS, checkpoints=(10,))
    code, out = make(tmp_path, "--stack", "dev", *publishing)
    assert code == 0
    report = json.loads((out / "report.json").read_text())
    assert report["run"]["published"] is None and report["run"]["steps"]["publish"]["name"] == plan.publish.name
    assert "<tr><th>hub</th><td colspan=2>not published yet</td></tr>" in (out / "report.html").read_text()

    branch = f"tpu-rl-{plan.publish.step_id}"
    record = {"repo": "acme/gemma4-grpo", "branch": branch, "commit": "f" * 40, "private": True}
    bucket, name = plan.publish.artifact_uri.removeprefix("gs://").split("/", 1)
    gcs.bucket(bucket).blob(name).upload_from_string(json.dumps(record))
    code, out = make(tmp_path / "again", "--stack", "dev", *publishing)
    assert code == 0
    assert json.loads((out / "report.json").read_text())["run"]["published"] == record
    page = (out / "report.html").read_text()
    assert f'<a href="https://huggingface.co/acme/gemma4-grpo/tree/{branch}">acme/gemma4-grpo@{branch}</a>' in page
    assert f"<code>{'f' * 40}</code>" in page


@pytest.mark.slow
def test_the_report_names_the_base_models_commit_the_conversion_recorded(gcs, tmp_path):
    plan = plan_workflow(settings("dev", []))
    upload_run(gcs, RUN, steps=STEPS, checkpoints=(10,))
    code, out = make(tmp_path, "--stack", "dev")
    assert code == 0 and json.loads((out / "report.json").read_text())["run"]["base"] is None, "not converted yet"
    assert "<tr><th>base</th>" not in (out / "report.html").read_text()
    put_conversion(gcs, plan.convert.output_uri, repo="google/gemma-4-e4b-it", commit="a" * 40)
    code, out = make(tmp_path / "again", "--stack", "dev")
    assert code == 0
    base = json.loads((out / "report.json").read_text())["run"]["base"]
    assert base == {"repo": "google/gemma-4-e4b-it", "revision": "main", "commit": "a" * 40}
    assert (
        f"<tr><th>base</th><td>google/gemma-4-e4b-it@main</td><td><code>{'a' * 40}</code></td></tr>"
        in (out / "report.html").read_text()
    )


@pytest.mark.slow
def test_the_report_names_the_datasets_commit_the_run_staged(gcs, tmp_path):
    """The run's ``dataset/dataset.json`` (``stage_dataset.py``): none before training staged it."""
    upload_run(gcs, RUN, steps=STEPS, checkpoints=(10,))
    code, out = make(tmp_path, "--run-uri", RUN)
    assert code == 0 and json.loads((out / "report.json").read_text())["run"]["dataset"] is None
    assert "<tr><th>dataset</th>" not in (out / "report.html").read_text()
    record = {"repo": "openai/gsm8k", "revision": "main", "commit": "b" * 40, "files": {}, "cache": "gs://b/x/"}
    put(gcs, RUN, "dataset/dataset.json", data=json.dumps(record).encode())
    code, out = make(tmp_path / "again", "--run-uri", RUN)
    assert code == 0
    assert json.loads((out / "report.json").read_text())["run"]["dataset"] == {
        "repo": "openai/gsm8k",
        "revision": "main",
        "commit": "b" * 40,
    }
    assert (
        f"<tr><th>dataset</th><td>openai/gsm8k@main</td><td><code>{'b' * 40}</code></td></tr>"
        in (out / "report.html").read_text()
    )


def test_the_hours_an_attempt_held_the_slice_run_from_its_start_to_its_last_file():
    """From the start in the files' names to the latest write of either file; while an attempt runs, to now;
    unknown when any attempt's times are (a summary never counts part of the run)."""
    from workloads.observe.evaluations import Attempt
    from workloads.observe.run_data import RunData, _epoch
    from workloads.observe.scalars import Scalars

    start = _epoch("20261130T050000Z")
    assert start is not None
    logs = [("evals-20261130T050000Z.txt", ""), ("train-20261130T050000Z.log", ""), ("evals-20261130T070000Z.txt", "")]
    written = {logs[0][0]: start + 1800, logs[1][0]: start + 3600, logs[2][0]: start + 7200 + 900}
    evaluations = parse_logs(logs, written)
    assert [a.held_hours() for a in evaluations.attempts] == [1.0, 0.25]
    data = RunData(RUN, Scalars(), evaluations, None)
    assert data.held_chip_hours(8) == 10.0
    assert data.held_chip_hours(8, now=start + 7200 + 3600) == 16.0, "the running attempt until now"
    assert data.held_chip_hours(0) is None and RunData(RUN, Scalars(), parse_logs([]), None).held_chip_hours(8) is None
    assert RunData(RUN, Scalars(), parse_logs(logs[:1]), None).held_chip_hours(8) is None, "no write time"
    assert Attempt("not-a-start", ended=start).held_hours() is None
    assert Attempt("20261130T050000Z", ended=start - 60).held_hours() == 0.0, "a clock skew is no negative hour"


@pytest.mark.slow
def test_an_event_file_past_its_bound_is_read_to_the_bound_and_the_report_says_it_was_cut(gcs, tmp_path, monkeypatch):
    """A 300 MiB event file (tunix writes a few MB) costs at most the bound, whatever the load: read up to it (its
    records there kept, the one cut short dropped) and ``truncated`` set; the same for the run's files together."""
    from workloads.observe import scalars

    upload_run(gcs, RUN, steps=STEPS, checkpoints=(10,))
    whole = json.loads((make(tmp_path / "whole", "--stack", "dev")[1] / "report.json").read_text())
    assert whole["truncated"] is False
    monkeypatch.setattr(scalars, "MAX_EVENT_FILE_BYTES", 600)
    cut = json.loads((make(tmp_path / "cut", "--stack", "dev")[1] / "report.json").read_text())
    assert cut["truncated"] is True
    assert 0 < len(cut["scalars"]["rewards/train/sum"]) < len(whole["scalars"]["rewards/train/sum"])
    monkeypatch.setattr(scalars, "MAX_EVENT_FILE_BYTES", 10**9)
    monkeypatch.setattr(scalars, "MAX_EVENT_BYTES", 1)
    none = json.loads((make(tmp_path / "none", "--stack", "dev")[1] / "report.json").read_text())
    assert none["truncated"] is True and none["scalars"] == {}, "one byte of the first file: no record"
