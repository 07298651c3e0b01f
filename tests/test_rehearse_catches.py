"""`make rehearse` catches what would fail a training attempt on the slice (slow tier): training's rehearsal, on the
bucket `make rehearse STACK=dev` left, fails with the library's own error when the launcher line switches `datasets`
offline, when the staged files' pattern matches none, when the tokenizer path is not the snapshot's, and when a reward
function MaxText does not define is named.

It needs the rehearsal's venv and that bucket (.ci/run makes both before the slow tier, and sets
``TPU_RL_REHEARSED=1``, which turns a missing one into a failure); elsewhere the tests skip, saying why."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path

import pytest

from tools.rehearse import sandbox, venv
from tools.rehearse.rehearsal import RehearsalFailedError, plan_pods, rehearse
from tools.stack_files import load_stack

pytestmark = pytest.mark.slow
LEFT = venv.BUILD / "run-dev" / "gcs"


@pytest.fixture(scope="module")
def train() -> sandbox.StepPod:
    if not (LEFT.exists() and (venv.BUILD / f"venv-{venv.MAXTEXT_VERSION}" / "tpu-rl-rehearse.json").exists()):
        if os.environ.get("TPU_RL_REHEARSED"):
            pytest.fail("make rehearse STACK=dev ran, yet its venv or bucket is missing")
        pytest.skip("needs the rehearsal's venv and the bucket it left: run make rehearse STACK=dev first")
    return next(pod for pod in plan_pods("dev") if "train.json" in pod.files)


def rehearsed(pod: sandbox.StepPod, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """Training's rehearsal of ``pod`` on a copy of the bucket the full rehearsal left: the failure's line."""
    shutil.copytree(LEFT, tmp_path / "gcs")
    with pytest.raises(RehearsalFailedError) as failed:
        rehearse(load_stack("dev")[0], [pod], tmp_path)
    capsys.readouterr()
    return str(failed.value)


def with_config(pod: sandbox.StepPod, **changes: str) -> sandbox.StepPod:
    config = {**json.loads(pod.files["train.json"]), **changes}
    return dataclasses.replace(pod, files={**pod.files, "train.json": json.dumps(config)})


def test_a_launcher_line_that_switches_datasets_offline_fails(train, tmp_path, capsys):
    script = train.script.replace(" HF_DATASETS_OFFLINE=0", "")
    assert script != train.script
    pod = dataclasses.replace(train, script=script, files={**train.files, "run.sh": script})
    assert "OfflineModeIsEnabled: Offline mode is enabled. Tried to reach gs://" in rehearsed(pod, tmp_path, capsys)


def test_a_pattern_that_matches_no_staged_file_fails(train, tmp_path, capsys):
    files = json.loads(train.files["train.json"])["hf_train_files"].replace("/train-*", "/nothing-*")
    said = rehearsed(with_config(train, hf_train_files=files), tmp_path, capsys)
    assert "ValueError: At least one valid data file must be specified" in said


def test_a_tokenizer_path_the_snapshot_lacks_fails(train, tmp_path, capsys):
    said = rehearsed(with_config(train, tokenizer_path="/tmp/tpu-rl-base/tokenizer"), tmp_path, capsys)
    assert "step train failed its rehearsal" in said and "tpu-rl-base/tokenizer" in said


def test_a_reward_function_maxtext_does_not_define_fails(train, tmp_path, capsys):
    pod = with_config(
        train,
        reward_functions_path="/deps/src/maxtext/trainers/post_train/rl/utils_rl.py",
        reward_functions="check_numbers,no_such_reward",
    )
    assert "no_such_reward" in rehearsed(pod, tmp_path, capsys)
