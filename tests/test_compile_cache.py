"""Training's compilation cache: one keyed folder of the bucket, the Pathways servers' scratch, kept
across attempts and shared by the runs whose compiled programs are the same; a changed model, image, slice or program
knob is another folder."""

from __future__ import annotations

import re

import pytest

from core.layout import PATHWAYS_SCRATCH, compile_cache
from infra.gcp.access import NODE_ACCOUNTS, READER_ROLE, WRITER_ROLE, bucket_grants
from tests.iam_conditions import covers
from tests.lifecycle_walk import settings
from tests.pure_plan import per_mutant_cache
from workloads.specs.step_specs import compile_cache_key, plan_workflow

PATHWAYS_SERVERS = ("pathways-proxy", "pathways-rm", "pathways-worker")
PROD = settings("prod", [])

COLD = [
    ["tpu-rl:model.name=gemma4-e4b"],
    ["tpu-rl:images.maxtext=us-docker.pkg.dev/cloud-tpu-images/maxtext-images/tpu_post_training@sha256:" + "3" * 64],
    ["tpu-rl:images.pathwaysServer=us-docker.pkg.dev/cloud-tpu-v2-images/pathways/server@sha256:" + "1" * 64],
    ["tpu-rl:images.pathwaysProxy=us-docker.pkg.dev/cloud-tpu-v2-images/pathways/proxy_server@sha256:" + "2" * 64],
    ["tpu-rl:tpu.topology=16x16"],
    ["tpu-rl:tpu.slices=2", "tpu-rl:training.iciExpertParallelism=1", "tpu-rl:training.rolloutTensorParallelism=32"],
    ["tpu-rl:training.maxTargetLength=1024"],
    ["tpu-rl:training.iciTensorParallelism=4"],
    ["tpu-rl:training.optimizer=adamw"],
    ["tpu-rl:training.extraArgs.eval_interval=5"],
]
"""Changes that make another compiled program (or another compiler, or another mesh): another folder."""
WARM = [
    ["tpu-rl:training.numBatches=7"],
    ["tpu-rl:training.checkpointPeriod=5"],
    ["tpu-rl:training.loadCheckpointOnlyOnce=false"],
    ["tpu-rl:model.revision=" + "a" * 40],
    ["tpu-rl:training.dataset=gsm8k"],
    ["tpu-rl:training.datasetRevision=" + "b" * 40],
    ["tpu-rl:workflow.timeouts.train=48h"],
    ["tpu-rl:workflow.stallTimeout=2h"],
]
"""Changes that compile the same programs: the same folder, warm."""


@per_mutant_cache
def prod_workflow():
    """The prod stack's steps, built once per process (and mutant): each case compares its own with them."""
    return plan_workflow(PROD)


def scratch_args(step) -> dict[str, list[str]]:
    """Each container of the training JobSet -> its ``--gcs_scratch_location`` values."""
    found: dict[str, list[str]] = {}
    for job in step.manifest["spec"]["replicatedJobs"]:
        pod = job["template"]["spec"]["template"]["spec"]
        for container in [*pod.get("initContainers", []), *pod["containers"]]:
            found[container["name"]] = [
                a.partition("=")[2] for a in container.get("args", []) if a.startswith("--gcs_scratch_location=")
            ]
    return found


@pytest.mark.pure
def test_the_key_is_a_short_hash_and_the_folder_is_the_pathways_scratch_under_it():
    key = compile_cache_key(PROD)
    assert re.fullmatch(r"[0-9a-f]{10}", key)
    assert compile_cache_key(settings("prod", [])) == key, "a pure function of the settings"
    uri = compile_cache(PROD.bucket_name, "gemma4-26b", key)
    assert uri == f"gs://my-tpu-prod-project-tpu-rl-prod/pathways/gemma4-26b/{key}/"
    found = scratch_args(prod_workflow().train)
    assert {name: found[name] for name in PATHWAYS_SERVERS} == {name: [uri] for name in PATHWAYS_SERVERS}
    assert found["workload-container"] == [], "train_rl's JAX keeps no cache of its own under Pathways"


@pytest.mark.pure
@pytest.mark.parametrize("overrides", COLD, ids=lambda o: o[0].split("=")[0])
def test_what_changes_a_compiled_program_is_another_folder(overrides):
    other = settings("prod", overrides)
    assert compile_cache_key(other) != compile_cache_key(PROD)
    assert scratch_args(plan_workflow(other).train)["pathways-rm"] != scratch_args(prod_workflow().train)["pathways-rm"]


@pytest.mark.pure
@pytest.mark.parametrize("overrides", WARM, ids=lambda o: o[0].split("=")[0])
def test_what_compiles_the_same_programs_shares_the_folder(overrides):
    other = settings("prod", overrides)
    assert compile_cache_key(other) == compile_cache_key(PROD)
    assert scratch_args(plan_workflow(other).train) == scratch_args(prod_workflow().train)


@pytest.mark.pure
def test_a_new_run_with_the_same_programs_is_a_new_step_that_reads_the_warm_cache():
    """More batches: a new step (its name and output change, nothing is overwritten) whose servers read the same
    cache folder; the folder's content is never part of a step's identity (the manifest holds its name only)."""
    first, longer = prod_workflow().train, plan_workflow(settings("prod", ["tpu-rl:training.numBatches=7"])).train
    assert first.name != longer.name and first.output_uri != longer.output_uri
    assert scratch_args(first) == scratch_args(longer)


@pytest.mark.pure
def test_only_the_training_step_may_write_the_cache_and_a_folder_walk_stays_inside_its_grant():
    """The node accounts (the Pathways head and workers) write the cache folder and every parent a GCS client's mkdir
    looks up as an object without its "/"; no CPU step's identity reads or writes any of it."""
    bucket = PROD.bucket_name
    key = compile_cache_key(PROD)
    folder = compile_cache(bucket, "gemma4-26b", key).removeprefix(f"gs://{bucket}/")
    names = [folder + "compilation_cache/default/x.binarypb", folder, folder.rstrip("/"), "pathways/gemma4-26b"]
    names.append(PATHWAYS_SCRATCH.rstrip("/"))
    grants = bucket_grants("gemma4-26b", running=PROD.workflow.steps)
    for grant in grants:
        if grant.role not in (WRITER_ROLE, READER_ROLE):
            continue
        holds = [covers(grant, bucket, name) for name in names]
        if grant.holder in NODE_ACCOUNTS and grant.role == WRITER_ROLE:
            assert all(holds), grant
        else:
            assert not any(holds), grant


@pytest.mark.pure
def test_the_key_of_the_same_settings_is_the_key_an_earlier_release_gave():
    """The folder a stack's earlier runs filled: a key computed differently (a field renamed or added) sends every
    stack to a cold cache, hours of TPU compile; such a change is a release's note (CHANGELOG.md: what it re-runs),
    and this pin moves with it."""
    assert (compile_cache_key(PROD), compile_cache_key(settings("dev", []))) == ("c9bd5f7c7c", "9afad0ee86")
