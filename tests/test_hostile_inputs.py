"""Hostile input to every CLI (``tools.plan``, ``tools.status``, ``tools.report``): each is one line
on stderr, exit 2, no traceback, nothing written, nothing echoed that it should not (no token, no control
character), within a few seconds. The limits live in ``core.inputs`` (files, YAML, JSON) and
``core.outdir`` (the output folder); the scrubbing in ``core.redact``."""

from __future__ import annotations

import importlib
import json
import os
import time

import pytest
import yaml

from tests.fake_kube import with_state
from tests.run_files import RECORD, upload_run
from tools import report as report_cli
from tools import status as status_cli
from tools.plan.cli import main as plan_main
from workloads.specs.step_specs import plan_workflow

TOKEN_LIKE = "hf_" + "Q" * 34
ESC = "\x1b[31m"


def one_line(capsys, code: int, *, expected: int = 2) -> str:
    """The failure's lines, one per problem (notes, e.g. a secret planned with a placeholder, may come before)."""
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    errors = [line for line in lines if not line.startswith("note: ")]
    assert code == expected, captured.err
    assert errors and "Traceback" not in captured.err, captured.err
    assert all(line.startswith("error: ") for line in errors), "each problem one line: " + captured.err
    assert TOKEN_LIKE not in captured.out + captured.err and "\x1b" not in captured.out + captured.err
    return "\n".join(errors)


def timed(run):
    start = time.monotonic()
    result = run()
    assert time.monotonic() - start < 10
    return result


# ---------------------------------------------------------------------------------------------
# Stack files and overrides (the plan; status and report read them the same way)


def special_files(tmp_path):
    fifo = tmp_path / "Pulumi.fifo.yaml"
    os.mkfifo(fifo)
    sparse = tmp_path / "Pulumi.sparse.yaml"
    with sparse.open("wb") as handle:
        handle.truncate(10 << 30)  # 10 GiB of nothing: refused by its size, never read
    link = tmp_path / "Pulumi.zero.yaml"
    link.symlink_to("/dev/zero")
    return {
        "dev-zero": ("/dev/zero", "not a regular file"),
        "fifo": (str(fifo), "not a regular file"),
        "sparse": (str(sparse), "is larger than 1000000 bytes"),
        "link-to-dev-zero": (str(link), "not a regular file"),
        "directory": (str(tmp_path), "not a regular file"),
    }


@pytest.mark.parametrize("case", ["dev-zero", "fifo", "sparse", "link-to-dev-zero", "directory"])
def test_a_stack_file_that_is_no_regular_file_is_refused_before_reading(case, tmp_path, capsys):
    path, words = special_files(tmp_path)[case]
    err = one_line(capsys, timed(lambda: plan_main(["--config-file", path])))
    assert words in err


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("config:\n  tpu-rl:x: " + "[" * 200 + "]" * 200 + "\n", "nested deeper than 64 levels"),
        ("config:\n  tpu-rl:training:\n    numBatches: " + "9" * 5000 + "\n", "out of range"),
        ("config:\n  a: &a [1]\n  b: *a\n", "YAML aliases"),
        (f"config:\n  tpu-rl:{TOKEN_LIKE}: 1\n", "[redacted]"),
        (f"config:\n  tpu-rl:clusterName{ESC}: x\n", "characters are not allowed"),
        ("config:\n  tpu-rl:clusterName\u200b: x\n", "unknown key"),
        ("config:\n  tpu-rl:namespace: !!binary aGVsbG8=\n", "the YAML tag !!binary is not a value here"),
        ("config:\n  tpu-rl:authorizedNetworks: !!set {1.2.3.4/32: null}\n", "the YAML tag !!set is not a value"),
        ("config:\n  tpu-rl:clusterName: !!timestamp 2026-12-01\n", "the YAML tag !!timestamp is not a value"),
        ("config:\n  tpu-rl:tpu: !!omap [{version: v6e}]\n", "the YAML tag !!omap is not a value here"),
        (
            "config:\n  gcp:project: p-123456\n  gcp:region: us-east5\n  gcp:zone: us-east5-b\n"
            "  tpu-rl:clusterName: 2026-12-01 10:00:00\n",
            'tpu-rl:clusterName = "2026-12-01 10:00:00" is',
        ),
    ],
    ids=[
        "deep",
        "huge-integer",
        "alias",
        "token-shaped-key",
        "escape-in-key",
        "invisible-character-in-key",
        "binary",
        "set",
        "explicit-timestamp",
        "omap",
        "a-date-is-text",
    ],
)
def test_hostile_stack_file_content_is_one_line(text, words, tmp_path, capsys):
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text(text)
    err = one_line(capsys, timed(lambda: plan_main(["--config-file", str(path)])))
    assert words in err


@pytest.mark.parametrize(
    ("override", "words"),
    [
        (TOKEN_LIKE, "expected KEY=VALUE"),
        (f"tpu-rl:{TOKEN_LIKE}=1", "[redacted]"),
        ("tpu-rl:training.extraArgs=" + '{"a":' * 500 + "1" + "}" * 500, "nested deeper than 64 levels"),
        ('tpu-rl:training={"numBatches": ' + "9" * 5000 + "}", "a number with too many digits"),
        ("tpu-rl:training.numBatches=" + "9" * 5000, "integer"),
        (f"tpu-rl:clusterName={ESC}x", "tpu-rl:clusterName"),
        (f"tpu-rl:training.{ESC}numBatches=1", "--set tpu-rl:training.numBatches: missing closing bracket"),
        (f"tpu-rl:training.num{ESC[:1]}Batches=1", "unknown field"),
        ("tpu-rl:training.extraArgs" + "[0]" * 3000 + "=1", "the path is 3001 levels deep; a stack's values nest"),
    ],
    ids=[
        "token-without-equals",
        "token-in-key",
        "deep-json",
        "huge-json-integer",
        "huge-integer",
        "escape-in-value",
        "escape-sequence-in-field",
        "escape-in-field",
        "deep-path",
    ],
)
@pytest.mark.slow
def test_hostile_overrides_are_one_line(override, words, capsys):
    err = one_line(capsys, timed(lambda: plan_main(["--stack", "dev", "--set", override])))
    assert words in err


@pytest.mark.parametrize(
    ("target", "words"),
    [("file", "is a file, not a folder"), ("/dev/null", "under /dev"), ("/proc/self", "under /proc")],
)
def test_a_bad_out_is_one_line_and_nothing_is_written(target, words, tmp_path, capsys):
    if target == "file":
        target = str(tmp_path / "plan.txt")
        (tmp_path / "plan.txt").write_text("mine")
    err = one_line(capsys, plan_main(["--stack", "dev", "--out", target]))
    assert words in err
    assert sorted(p.name for p in tmp_path.iterdir()) == (["plan.txt"] if target.endswith("plan.txt") else [])


@pytest.mark.slow
def test_out_keeps_the_users_files_and_never_follows_a_planted_link(tmp_path, capsys):
    out = tmp_path / "plan"
    assert plan_main(["--stack", "dev", "--out", str(out)]) == 0
    mine = out / "manifests" / "my-notes.yaml"
    mine.write_text("mine")
    assert plan_main(["--stack", "dev", "--out", str(out)]) == 0
    assert mine.read_text() == "mine", "only what the plan wrote is replaced"
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched")
    (out / "plan.json").unlink()
    (out / "plan.json").symlink_to(victim)
    capsys.readouterr()
    err = one_line(capsys, plan_main(["--stack", "dev", "--out", str(out)]))
    assert "plan.json is a symbolic link" in err and victim.read_text() == "untouched"


# ---------------------------------------------------------------------------------------------
# status: kubeconfigs, the interval, remote text


def status(tmp_path, kubeconfig, *extra):
    return status_cli.main(["--stack", "dev", "--kubeconfig", str(kubeconfig), *extra])


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("- a\n- b\n", "not a kubeconfig (not a mapping)"),
        ("contexts: 5\n", "contexts is not a list"),
        ("contexts: [5]\n", "no context gke_my-tpu-dev-project_us-east5_tpu-rl-dev"),
        ("a: " + "9" * 5000 + "\n", "out of range"),
        ("x: " + "[" * 100 + "]" * 100 + "\n", "nested deeper"),
    ],
    ids=["list", "contexts-not-list", "context-not-mapping", "huge-integer", "deep"],
)
def test_a_kubeconfig_of_the_wrong_shape_is_one_line(content, words, tmp_path, capsys):
    path = tmp_path / "kubeconfig"
    path.write_text(content)
    err = one_line(capsys, timed(lambda: status(tmp_path, path)))
    assert words in err


@pytest.mark.parametrize("case", ["dev-zero", "fifo", "sparse"])
def test_a_kubeconfig_that_is_no_regular_file_is_one_line(case, tmp_path, capsys):
    path = special_files(tmp_path)[case][0]
    err = one_line(capsys, timed(lambda: status(tmp_path, path)))
    assert "not a regular file" in err or "larger than" in err


@pytest.mark.parametrize("interval", ["inf", "nan", "-1", "1e9", "soon"])
def test_a_bad_interval_is_refused(interval, tmp_path, capsys):
    with pytest.raises(SystemExit) as exited:
        status(tmp_path, tmp_path / "none", "--watch", "--interval", interval)
    assert exited.value.code == 2 and "--interval" in capsys.readouterr().err


@pytest.mark.slow
def test_a_failure_message_from_the_cluster_is_shown_scrubbed(tmp_path, capsys, gcs):
    from tests.fake_kube import fake_cluster

    plan = plan_workflow(__import__("tests.lifecycle_walk", fromlist=["settings"]).settings("dev", []))
    with fake_cluster() as cluster:
        failed = with_state(plan.convert.manifest, "failed")
        failed["status"]["conditions"][-1]["message"] = f"{ESC}boom\nsecond line with {TOKEN_LIKE}\x07"
        cluster.put(failed)
        path = tmp_path / "kubeconfig"
        path.write_text(yaml.safe_dump(cluster.kubeconfig(context="gke_my-tpu-dev-project_us-east5_tpu-rl-dev")))
        code = status(tmp_path, path)
    captured = capsys.readouterr()
    assert code == 1 and "boom second line with [redacted]" in captured.out
    assert "\x1b" not in captured.out and "\x07" not in captured.out and TOKEN_LIKE not in captured.out


# ---------------------------------------------------------------------------------------------
# report: run records and logs are text from the run


@pytest.mark.parametrize(
    "record",
    [
        "tpu-rl run: [1, 2]",
        'tpu-rl run: {"slice": "x", "model": 5, "argv": "no list"}',
        'tpu-rl run: {"slice": {"chips": 1e400, "version": "v99"}}',
        "tpu-rl run: " + "[" * 5000 + "]" * 5000,
        'tpu-rl run: {"chips": ' + "9" * 5000 + "}",
        f'tpu-rl run: {{"model": "{ESC}evil{TOKEN_LIKE}"}}',
        'tpu-rl run: {"model": "m", "argv": ["num_batches=5", 7, null, {"a": 1}]}',
        'tpu-rl run: {"slice": {"chips": -4}, "argv": ["learning_rate=$x^{$"]}',
    ],
    ids=["list", "wrong-types", "huge-float", "deep", "huge-integer", "escape-and-token", "integer-argv", "mathtext"],
)
@pytest.mark.slow
def test_a_run_record_of_any_shape_never_breaks_the_report(record, gcs, tmp_path, capsys):
    run = "gs://my-tpu-dev-project-tpu-rl-dev/gemma4-e4b/train/0123456789/"
    upload_run(gcs, run, steps=[1, 2], logs=False)
    from tests.conftest import put

    put(gcs, run, "logs/train-20260921T130000Z.log", data=f"{record}\n".encode())
    out = tmp_path / "report"
    assert report_cli.main(["--run-uri", run, "--out", str(out)]) == 0, capsys.readouterr().err
    page = (out / "report.html").read_text() + (out / "report.json").read_text()
    assert TOKEN_LIKE not in page and "\x1b" not in page and "<script" not in page


@pytest.mark.slow
def test_a_good_record_still_names_the_model(gcs, tmp_path):
    run = "gs://my-tpu-dev-project-tpu-rl-dev/gemma4-e4b/train/0123456789/"
    upload_run(gcs, run, steps=[1, 2], logs=False)
    from tests.conftest import put

    put(gcs, run, "logs/train-20260921T130000Z.log", data=f"{RECORD}\n".encode())
    assert report_cli.main(["--run-uri", run, "--out", str(tmp_path / "r")]) == 0
    assert json.loads((tmp_path / "r" / "report.json").read_text())["run"]["model"] == "gemma4-e4b"


@pytest.mark.parametrize(
    "line",
    [
        "Pre RL Training: corr=1e300, total=1e300, accuracy=1e300%, partial_accuracy=1e300%, format_accuracy=1e300%, "
        "mean_reward=1e300",
        "Post RL Training: corr=inf, total=inf, accuracy=inf%, partial_accuracy=nan%, format_accuracy=-inf%, "
        "mean_reward=nan",
        "Intermediate Eval (step=99999999999999999999): corr=1, total=2, accuracy=50%, partial_accuracy=50%, "
        "format_accuracy=50%, mean_reward=1e308",
    ],
    ids=["1e300", "inf-nan", "huge-step"],
)
@pytest.mark.slow
def test_run_data_at_the_edges_of_a_number_never_breaks_the_report(line, gcs, tmp_path, capsys):
    """Evaluations a run logged at the edges of a number (1e300, inf, NaN, a huge step) and scalars at float32's
    edge (what tensorboardX can write): the report is written; the plots leave out what matplotlib cannot draw."""
    from tests.conftest import put
    from tests.run_files import write_events_with

    run = "gs://my-tpu-dev-project-tpu-rl-dev/gemma4-e4b/train/0123456789/"
    write_events_with(gcs, run, "rewards/train/sum", [3.4e38, -3.4e38, 1.0])
    put(gcs, run, "logs/train-20260921T130000Z.log", data=f"W1 x.py:1] {line}\n".encode())
    out = tmp_path / "report"
    assert report_cli.main(["--run-uri", run, "--out", str(out)]) == 0, capsys.readouterr().err
    assert (out / "reward.png").stat().st_size > 0 and json.loads((out / "report.json").read_text())["scalars"]


def test_a_date_in_a_stack_file_is_the_text_the_pulumi_cli_passes(tmp_path, capsys):
    """yaml.v3 (the CLI's) makes a timestamp a time only for a field typed as one: the program gets the text,
    so a hold written unquoted reads as the same value it would from `pulumi up` (it was an internal error)."""
    from tools.stack_files import read_yaml

    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text("config:\n  tpu-rl:gke:\n    holdUpgrades: 2026-12-01/2026-12-20\n  a: 2026-12-01\n")
    assert read_yaml(path)["config"] == {"tpu-rl:gke": {"holdUpgrades": "2026-12-01/2026-12-20"}, "a": "2026-12-01"}


HOSTILE_LINE = "model\x1b]8;;https://evil.example\x07click\x1b]8;;\x07 \x1b[2J\u202eexe.txt\u2066 ok"


@pytest.mark.parametrize(
    "module",
    ["workloads.container.complete_export", "workloads.container.evaluate_export", "workloads.container.publish_hub"],
    ids=["export", "evaluate", "publish"],
)
def test_no_escape_from_gcs_or_the_hub_reaches_a_step_log_line(module):
    """An object name or an error text that carries terminal escapes (a hyperlink, a screen clear) or bidi
    controls reaches `kubectl logs` on the operator's terminal: the container programs print what a terminal would
    draw of it, the sequences whole and the invisible characters removed (the module they share,
    ``workloads/container/shown.py``, holds ``core/terminal.py``'s ``HIDDEN``)."""
    line = importlib.import_module(module).shown.line(HOSTILE_LINE)
    assert line.isprintable() and "\x1b" not in line and "\u202e" not in line
    assert line == "modelclick exe.txt ok"
