"""Artifact checks against a real GCS emulator (fake-gcs-server), standalone and inside the program."""

from __future__ import annotations

import subprocess
import sys

import pulumi
import pytest

from core.names import SETUP_FAILURE_EXIT
from infra.plan import plan_stack
from infra.plan.stack_files import ROOT
from tests.conftest import JOB, JOBSET, SENTINEL_TOKEN, plan_of, put
from tests.run_files import reward, upload_run
from workloads import checkpoint_scan
from workloads.artifacts import (
    ArtifactMissingError,
    check_converted,
    check_exported,
    final_checkpoint,
    short_run_warning,
)

BUCKET = "my-tpu-prod-project-tpu-rl-prod"
ACTOR = f"gs://{BUCKET}/gemma4-26b/train/def/rl/checkpoints/actor/"


def save(client, step: int, *, committed: bool = True) -> None:
    """What tunix/Orbax leave for one saved step on GCS."""
    names = [f"{step}/model_params/_METADATA", f"{step}/model_params/d/0.0", f"{step}/optimizer_state/_METADATA"]
    put(client, ACTOR, *names, *([f"{step}/commit_success.txt"] if committed else []))


def test_converted_checkpoint(gcs):
    uri = f"gs://{BUCKET}/gemma4-26b/convert/abc/0/items/"
    put(gcs, f"gs://{BUCKET}/", "unrelated")
    with pytest.raises(ArtifactMissingError, match="0/items/ is empty"):
        check_converted(gcs, uri)
    put(gcs, uri, "_METADATA", "params/0.0")
    check_converted(gcs, uri)


def test_steps_0_to_49_give_49_and_a_short_run_warning(gcs):
    for step in range(50):
        save(gcs, step)
    found = final_checkpoint(gcs, ACTOR)
    assert (found.step, found.uri, found.incomplete) == (49, f"{ACTOR}49/model_params/", ())
    warning = short_run_warning(found, 50, 256)
    assert "ended at step 49, not 50" in warning and "maxPrefillPredictLength (256" in warning
    assert short_run_warning(found, 49, 256) is None, "the configured last step: no warning"


def test_a_partial_last_step_is_skipped_and_named(gcs):
    for step in (10, 20):
        save(gcs, step)
    save(gcs, 30, committed=False)
    put(gcs, ACTOR, "40.orbax-checkpoint-tmp-1732/model_params/x")
    found = final_checkpoint(gcs, ACTOR)
    assert (found.step, found.incomplete) == (20, (30,))


def test_no_checkpoint_is_a_failure_naming_the_path(gcs):
    put(gcs, ACTOR, "notes.txt")
    with pytest.raises(ArtifactMissingError, match=f"no complete checkpoint was found under {ACTOR}"):
        final_checkpoint(gcs, ACTOR)


def test_a_commit_file_without_params_is_not_a_checkpoint(gcs):
    put(gcs, ACTOR, "7/commit_success.txt", "7/optimizer_state/x", "8/model_params/")
    with pytest.raises(ArtifactMissingError):
        final_checkpoint(gcs, ACTOR)


@pytest.mark.parametrize(
    ("names", "complete", "started"),
    [
        ([], [], []),
        (["5/commit_success.txt", "5/model_params/a"], [5], [5]),
        (["5/model_params/a"], [], [5]),
        (["5/commit_success.txt"], [], [5]),
        (["5/commit_success.txt", "5/model_params/"], [], [5]),
        (["5/commit_success.txt", "5/model_params/a", "12/commit_success.txt", "12/model_params/b"], [5, 12], [5, 12]),
        (["x5/commit_success.txt", "x5/model_params/a", "٥/commit_success.txt", "٥/model_params/a"], [], []),
        (["5/sub/commit_success.txt", "5/model_params/a"], [], [5]),
    ],
)
def test_complete_steps(names, complete, started):
    assert checkpoint_scan.complete_steps(names) == complete
    assert checkpoint_scan.started_steps(names) == started


def test_the_export_container_finds_the_same_step(gcs, monkeypatch):
    """The script the export runs (its inlined source, real python) prints what the program found."""
    for step in (10, 20):
        save(gcs, step)
    save(gcs, 30, committed=False)
    source = checkpoint_scan.__file__
    done = subprocess.run([sys.executable, source, ACTOR], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == final_checkpoint(gcs, ACTOR).uri == f"{ACTOR}20/model_params/"
    empty = f"gs://{BUCKET}/nothing/here/"
    done = subprocess.run([sys.executable, source, empty], capture_output=True, text=True, timeout=60)
    assert done.returncode == SETUP_FAILURE_EXIT == checkpoint_scan.NOTHING_TO_EXPORT
    assert f"no complete checkpoint under {empty}" in done.stderr and not done.stdout


def test_exported_model(gcs):
    uri = f"gs://{BUCKET}/gemma4-26b/export/ghi/"
    put(gcs, uri, "config.json")
    with pytest.raises(ArtifactMissingError, match=r"lacks \*\.safetensors, tokenizer files"):
        check_exported(gcs, uri)
    put(gcs, uri, "model-00001-of-00002.safetensors", "tokenizer.json")
    check_exported(gcs, uri)


def _completed(type_, inputs):
    if type_ == JOBSET:
        return {"terminalState": "Completed", "conditions": [{"type": "Completed", "status": "True"}]}
    if type_ == JOB:
        return {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}
    return None


def _run_up():
    """The program as during `pulumi up` (not offline, not preview), without the HF preflight."""
    return plan_stack(
        ROOT / "Pulumi.prod.yaml",
        ["tpu-rl:workflow.preflight=false"],
        live=True,
        secrets={"tpu-rl:hfToken": SENTINEL_TOKEN},
        status_for=_completed,
        raise_errors=False,
    )[0]


def test_up_stops_when_conversion_left_no_checkpoint(gcs):
    put(gcs, f"gs://{BUCKET}/", "unrelated")
    plan = _run_up()
    assert isinstance(plan.error, pulumi.RunError)
    assert "conversion finished but" in str(plan.error) and "/0/items/ is empty" in str(plan.error)
    assert not plan.find(JOBSET), "training never starts without its input"


def test_up_exports_the_last_step_found_and_warns_when_it_is_short(gcs):
    steps = plan_of("prod").outputs["steps"]
    put(gcs, steps["convert"]["artifactUri"], "_METADATA")
    actor = steps["train"]["artifactUri"]
    for step in (10, 20, 30, 40, 49):
        names = [f"{step}/model_params/x", f"{step}/commit_success.txt"]
        put(gcs, actor, *names)
    put(gcs, steps["export"]["artifactUri"], "config.json", "model.safetensors", "tokenizer_config.json")
    upload_run(gcs, steps["train"]["outputUri"], steps=[1, 2, 3, 4])
    plan = _run_up()
    assert plan.error is None, plan.error
    summary = plan.outputs["steps"]["train"]["summary"]
    assert summary["accuracyBefore"] == 30.0 and summary["accuracyAfter"] == 52.5
    assert summary["finalReward"] == pytest.approx(reward(4)) and summary["lastStep"] == 49
    assert summary["tpuChipHours"] > 0
    assert plan.outputs["steps"]["train"]["finalStep"] == 49
    assert plan.outputs["steps"]["train"]["checkpointUri"] == f"{actor}49/model_params/"
    assert plan.outputs["hfModelUri"] == steps["export"]["artifactUri"]
    assert any("training ended at step 49, not 50" in w for w in plan.warnings())


def test_up_fails_naming_the_path_when_training_saved_nothing(gcs):
    steps = plan_of("prod").outputs["steps"]
    put(gcs, steps["convert"]["artifactUri"], "_METADATA")
    plan = _run_up()
    assert isinstance(plan.error, pulumi.RunError)
    assert f"no complete checkpoint was found under {steps['train']['artifactUri']}" in str(plan.error)
    assert not plan.find(JOB, steps["export"]["name"]), "nothing to export: the export is never created"
