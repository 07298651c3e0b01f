"""The run report against fake-gcs-server with event files from a real TensorBoard writer."""

from __future__ import annotations

import json
import struct
import zlib

import pytest

from core.deadline import BUDGETS, Budget
from tests.lifecycle_walk import settings
from tests.report_screenshot import CHROMIUM, screenshot
from tests.run_files import START, STEP_SECONDS, reward, upload_run
from workloads import report as report_cli
from workloads.evaluations import parse_logs
from workloads.run_data import gather
from workloads.steps import plan_workflow

STEPS = [3, 1, 2, 5, 4, 10, 8, 9, 6, 7]
"""Written out of order, in two files (an attempt and its resume)."""
DEV = plan_workflow(settings("dev", []))
RUN = DEV.train.output_uri


def make(tmp_path, *args):
    out = tmp_path / "report"
    code = report_cli.main([*args, "--out", str(out)])
    return code, out


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
        "rewards/train/mean",
        "rewards/train/sum",
    ]
    assert report["scalars"]["rewards/train/sum"] == [[s, pytest.approx(reward(s))] for s in range(1, 11)]
    assert report["scalars"]["completions/train/mean_length"][-1] == [10, 250.0]
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
    hours = ((START + 60 + 10 * STEP_SECONDS) - (START + 1 * STEP_SECONDS)) / 3600
    assert report["summary"] == {
        "accuracyBefore": 30.0,
        "accuracyAfter": 52.5,
        "meanRewardBefore": 0.45,
        "meanRewardAfter": 0.65,
        "finalReward": pytest.approx(reward(10)),
        "lastStep": 10,
        "tpuChipHours": round(hours * 8, 2),
    }
    assert report["run"]["stack"] == "dev" and report["run"]["chips"] == 8 and report["run"]["capacity"] == "spot"
    assert report["run"]["steps"]["train"]["outputUri"] == RUN
    assert report["run"]["logs"] == ["train-20261130T050000Z.log", "train-20261130T060000Z.log"]
    assert report["truncated"] is False


def _png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


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
    assert 7 not in series["completions/train/mean_length"], "the cut record (the last one written) is dropped"
    assert 7 in series["rewards/train/sum"] and data.scalars.last_step == 10, "everything before it is kept"
    empty = "gs://my-tpu-dev-project-tpu-rl-dev/gemma4-e4b/train/0000000000/"
    upload_run(gcs, empty, steps=[], logs=False)
    code, out = make(tmp_path, "--run-uri", empty)
    assert code == 0
    report = json.loads((out / "report.json").read_text())
    assert (
        report["steps"] is None
        and report["scalars"] == {}
        and report["evaluation"] == {"pre": None, "post": None, "intermediate": []}
    )
    assert not list(out.glob("*.png"))
    assert "No TensorBoard scalars were found" in (out / "report.html").read_text()


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


def test_an_unreachable_bucket_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "http://127.0.0.1:9")
    monkeypatch.setitem(BUDGETS, "gcs", Budget(1.0, 0.5, 0.5))
    code, out = make(tmp_path, "--stack", "dev")
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and not out.exists()
    assert err == (
        f"error: cannot read the run at {RUN}: GCS did not answer listing the checkpoints under "
        f"{RUN}rl/checkpoints/actor/ in time (ConnectionError); check the network"
    )


def test_evaluation_lines_need_every_field():
    assert parse_logs([("a.log", "Pre RL Training: corr=1, total=2, accuracy=50.0%")]).pre is None


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
