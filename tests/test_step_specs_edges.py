"""Edges of the planned steps (``workloads.specs.step_specs``): the paths each CPU step's script is given, the
held-out questions carried as they read, the MaxText check's mode in the export, what a failed step's message says
of its memory and its retry, the workflow's lookup of a step it does not run, and how a step's identity hashes the
account it runs as. Pure."""

from __future__ import annotations

import json
import shlex

import pytest

from tests.lifecycle_walk import settings
from workloads.specs.evaluation import HELD_OUT
from workloads.specs.step_manifests import WORKLOAD_CONTAINER
from workloads.specs.step_specs import Workflow, identity, plan_workflow

pytestmark = pytest.mark.pure

EVERY_STEP = [
    "tpu-rl:workflow.steps.evaluate=true",
    "tpu-rl:publish.repo=acme/gemma4-grpo",
    "tpu-rl:images.maxtextCheck=warn",
]


@pytest.fixture
def workflow() -> Workflow:
    """The prod stack running every step, its image's MaxText checked with a warning only; planned for each test, so
    that the mutation run, which maps each function to the tests that call it, maps the steps' builders to each."""
    return plan_workflow(settings("prod", EVERY_STEP))


def test_the_export_script_is_given_its_paths_and_the_check_mode(workflow):
    """The export marks its own output once it may read the checkpoints and the conversion, and the completion
    gets the base's repository, its output and the conversion's folder; ``warn`` reaches the MaxText check."""
    convert, train, export = workflow.convert, workflow.train, workflow.export
    lines = export.script.splitlines()
    assert lines[1].startswith("python3 /tpu-rl/maxtext_check.py ") and lines[1].endswith(" warn")
    assert lines[2] == f"python3 /tpu-rl/mark_folder.py {export.output_uri} {train.artifact_uri} {convert.output_uri}"
    assert lines[-1] == (
        f'exec python3 /tpu-rl/complete_export.py google/gemma-4-26b-a4b-it "${{commit}}" {export.output_uri} '
        f"{convert.output_uri}"
    )


def test_the_evaluation_marks_its_output_and_carries_the_questions_as_they_read(workflow):
    """The evaluation's folder is marked once its grant on the export holds; its spec is the last word of the
    program's line, the held-out questions in it as written (a typographic apostrophe stays one, not ``\\u2019``)."""
    export, evaluate = workflow.export, workflow["evaluate"]
    lines = evaluate.script.splitlines()
    assert lines[1] == f"python3 /tpu-rl/mark_folder.py {evaluate.output_uri} {export.artifact_uri}"
    words = shlex.split(lines[-1])
    assert words[:6] == [
        "exec",
        "python3",
        "/tpu-rl/evaluate_export.py",
        export.artifact_uri,
        "/scratch/evaluate",
        evaluate.output_uri + "record.json",
    ]
    spec = json.loads(words[6])
    assert [(q["question"], q["answer"]) for q in spec["questions"]] == [tuple(pair) for pair in HELD_OUT]
    question = HELD_OUT[0][0]
    assert not question.isascii() and question in words[6] and "\\u" not in words[6]


def test_a_failed_step_says_what_holds_its_memory_and_what_a_retry_does(workflow):
    """What a step's failure message names: the container whose memory ran out and what raises it, what a retry
    does beyond running again (training alone resumes), and what it leaves behind to verify."""
    train, publish = workflow.train, workflow.publish
    assert publish is not None
    assert (train.container, train.output) == (WORKLOAD_CONTAINER, "checkpoints")
    assert train.memory_fix == "the Pathways head's limits are xpk's (core/pathways.py HEAD_RESOURCES)"
    assert train.retry_note == "training resumes from its last checkpoint"
    assert publish.memory_fix == (
        "the publication's 32 GiB are fixed (workloads/specs/step_specs.py PUBLISH_MEMORY_GIB): it streams the export, "
        "so running out of memory is a bug of the upload to report"
    )
    assert (publish.container, publish.retry_note) == ("publish", "")


def test_a_step_the_workflow_does_not_run_is_named_in_the_lookup_error(workflow):
    without = Workflow(tuple(step for step in workflow if step.step != "evaluate"))
    assert without.get("evaluate") is None
    with pytest.raises(KeyError) as caught:
        without["evaluate"]
    assert caught.value.args == ("the workflow has no evaluate step",)


def test_a_steps_identity_hashes_its_account_by_its_step_and_a_pod_without_one_as_it_is(workflow):
    """Who a CPU step runs as is not what it computes: its account is hashed as ``tpu-rl-<step>`` whatever it is named
    (the account's name before clusters named theirs), so a renamed account keeps the step's name; a pod that names
    no account is hashed as it is."""
    prod = settings("prod", EVERY_STEP)
    manifest = workflow.convert.manifest

    def with_account(name: str | None) -> dict:
        changed = json.loads(json.dumps(manifest))
        pod = changed["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        if name is None:
            del pod["serviceAccountName"]
        else:
            pod["serviceAccountName"] = name
        return changed

    hashed = identity(prod, manifest, step="convert")
    assert identity(prod, with_account("another"), step="convert") == hashed
    assert identity(prod, with_account("tpu-rl-convert")) == hashed
    assert identity(prod, with_account(None), step="convert") == identity(prod, with_account(None)) != hashed


def test_a_steps_identity_is_the_hash_earlier_releases_gave_the_same_object_and_files():
    """What a step's name hashes, pinned on a small object of its shape: a payload field renamed, the cluster, the
    bucket or the account hashed differently would rename every step of every stack, and the next `up` would run
    them all again (CHANGELOG.md says which release does so on purpose, and this pin moves with it). A file is
    hashed as it is unless its name says Python: only a program loses its comments and docstrings."""
    manifest = {
        "metadata": {"name": "n", "labels": {"app": "tpu-rl"}, "annotations": {"a": "b"}},
        "spec": {
            "failurePolicy": {"maxRestarts": 3},
            "replicatedJobs": [
                {"template": {"spec": {"activeDeadlineSeconds": 60, "template": {"spec": {"serviceAccountName": "x"}}}}}
            ],
        },
    }
    prod = settings("prod", [])
    files = {"run.sh": "set -e  # bash, which parses as Python too\n", "p.py": '"""Doc."""\nX = 1  # why\n'}
    pinned = (identity(prod, manifest), identity(prod, manifest, step="convert"), identity(prod, manifest, files=files))
    assert pinned == ("7894eff9a4", "99b49cc9b2", "babfb9e1ed")


def test_the_fill_copies_as_json_would_and_refuses_what_json_cannot_carry():
    """Every key and string filled, a tuple carried as a list, the numbers, booleans and nulls as they are, nothing
    shared with the manifest; a set is a builder's bug."""
    from workloads.specs import step_specs

    manifest = {
        step_specs.NAME: [step_specs.OUTPUT, (step_specs.STEP_ID, 3)],
        "cache": f"{step_specs.HUB_CACHE}a {step_specs.SHARED_CACHE}b",
        "flags": [True, None, 1.5],
    }
    filled = step_specs._fill(manifest, "n", "h", "gs://b/out/", ("gs://c/w/", "gs://c/r/"))
    assert filled == {"n": ["gs://b/out/", ["h", 3]], "cache": "gs://c/w/a gs://c/r/b", "flags": [True, None, 1.5]}
    assert json.loads(json.dumps(filled)) == filled and manifest["flags"] is not filled["flags"]
    with pytest.raises(TypeError, match="a manifest holds a set"):
        step_specs._fill({"x": {1}}, "n", "h", "o", ("a", "b"))
