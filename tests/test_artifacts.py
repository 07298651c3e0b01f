"""Artifact checks against a real GCS emulator (fake-gcs-server), standalone and inside the program."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pulumi
import pytest

from core.names import SETUP_FAILURE_EXIT
from tests.conftest import JOBSET, SENTINEL_TOKEN, plan_of, put, put_conversion, statuses, step_resources
from tests.container_files import container_program
from tests.fake_hub import COMMIT, GOOD, REPO, FakeHub
from tests.hf_files import CONFIG, LANG, LANGUAGE, VISION, model_files
from tests.loopback import serve
from tests.run_files import reward, upload_run
from tests.world import fake_world
from tools.plan import plan_stack
from tools.stack_files import ROOT
from workloads.container import checkpoint_scan
from workloads.observe.artifacts import (
    converted_problem,
    dataset_record,
    exported_problem,
    final_checkpoint,
    short_run_warning,
    source_record,
)

BUCKET = "my-tpu-prod-project-tpu-rl-prod"
ACTOR = f"gs://{BUCKET}/gemma4-26b/train/def/rl/checkpoints/actor/"


def save(client, step: int, *, committed: bool = True) -> None:
    """What tunix/Orbax leave for one saved step on GCS (Pathways: zarr v2, commit files per item)."""
    names = [
        f"{step}/_CHECKPOINT_METADATA",
        f"{step}/model_params/_METADATA",
        f"{step}/model_params/base.decoder.layers_0.mlp.wi_0.kernel.value/.zarray",
        f"{step}/model_params/base.decoder.layers_0.mlp.wi_0.kernel.value/0.0.0",
        f"{step}/optimizer_state/_METADATA",
    ]
    put(client, ACTOR, *names, *([f"{step}/commit_success.txt"] if committed else []))


def test_converted_checkpoint(gcs):
    output = f"gs://{BUCKET}/gemma4-26b/convert/abc/"
    uri = output + "0/items/"
    put(gcs, f"gs://{BUCKET}/", "unrelated")
    assert converted_problem(gcs, uri) == f"conversion finished but {uri} is empty: no MaxText checkpoint to train from"
    put(gcs, uri, "_METADATA", "params/0.0")
    assert converted_problem(gcs, uri) == (
        f"conversion finished but {output}source.json is missing or is not the record of a conversion"
    ), "a checkpoint without the record of its commit: training and the export could not read the same base"
    put_conversion(gcs, output)
    assert converted_problem(gcs, uri) is None
    record = source_record(gcs, output)
    assert record is not None and record.commit == COMMIT


def test_a_training_runs_dataset_record_is_read_as_base_snapshot_writes_it(gcs):
    """``<train output>dataset/dataset.json`` (``stage_dataset.py``, which tests/test_base_snapshot.py
    runs for real): its commit goes to the model card and the stack's outputs; anything else is None."""
    output = f"gs://{BUCKET}/gemma4-26b/train/def/"
    assert dataset_record(gcs, output) is None, "a run that staged nothing (or of an earlier version)"
    body = {"repo": "nvidia/OpenMathInstruct-2", "revision": "main", "commit": COMMIT, "files": {"a.parquet": 4}}
    put(gcs, output, "dataset/dataset.json", data=json.dumps({**body, "cache": "gs://b/m/train/hub/x/"}).encode())
    record = dataset_record(gcs, output)
    assert record is not None and (record.repo, record.revision, record.commit) == (body["repo"], "main", COMMIT)
    put(gcs, output, "dataset/dataset.json", data=json.dumps({**body, "commit": "main"}).encode())
    assert dataset_record(gcs, output) is None, "a branch is no commit"


def test_a_conversion_whose_base_files_are_missing_is_run_again(gcs):
    output = f"gs://{BUCKET}/gemma4-26b/convert/abc/"
    put_conversion(gcs, output)
    gcs.bucket(BUCKET).blob("gemma4-26b/convert/abc/base/tokenizer.json").delete()
    assert converted_problem(gcs, output + "0/items/") == (
        f"conversion finished but {output}base/ lacks tokenizer.json of the base's files"
    )


@pytest.mark.parametrize(
    "record",
    [
        b"{not json",
        b'["a list"]',
        json.dumps({"repo": REPO, "revision": "main", "commit": "main", "files": []}).encode(),
        json.dumps({"repo": REPO, "revision": "main", "commit": COMMIT.upper(), "files": []}).encode(),
        json.dumps({"repo": REPO, "revision": "main", "commit": COMMIT, "files": "config.json"}).encode(),
        json.dumps({"repo": REPO, "revision": "main", "commit": COMMIT, "files": ["x"] * 1001}).encode(),
        json.dumps({"repo": REPO, "revision": "main", "commit": COMMIT, "files": ["../config.json"]}).encode(),
        json.dumps({"repo": REPO, "commit": COMMIT, "files": []}).encode(),
    ],
    ids=["not-json", "a-list", "a-branch", "upper-case", "files-a-string", "too-many", "a-path", "partial"],
)
@pytest.mark.slow
def test_a_record_that_is_not_a_conversions_is_none(gcs, record):
    output = f"gs://{BUCKET}/gemma4-26b/convert/abc/"
    put(gcs, output, "source.json", data=record)
    assert source_record(gcs, output) is None


@pytest.mark.slow
def test_steps_0_to_49_give_49_and_a_short_run_warning(gcs):
    for step in range(50):
        save(gcs, step)
    found = final_checkpoint(gcs, ACTOR)
    assert found is not None
    assert (found.step, found.uri, found.incomplete) == (49, f"{ACTOR}49/model_params/", ())
    warning = short_run_warning(found, 50, 256)
    assert warning is not None
    assert "ended at step 49, not 50" in warning and "maxPrefillPredictLength (256" in warning
    assert "numBatches" not in warning, "a bigger numBatches also takes more prompts: it does not help"
    assert short_run_warning(found, 49, 256) is None, "the configured last step: no warning"


def test_a_partial_last_step_is_skipped_and_named(gcs):
    for step in (10, 20):
        save(gcs, step)
    save(gcs, 30, committed=False)
    put(gcs, ACTOR, "40.orbax-checkpoint-tmp/model_params/x")  # a local-style save: Orbax's tmp folder
    found = final_checkpoint(gcs, ACTOR)
    assert found is not None and (found.step, found.incomplete) == (20, (40, 30))


def test_no_checkpoint_is_none(gcs):
    put(gcs, ACTOR, "notes.txt", "tensorboard/events.out")
    assert final_checkpoint(gcs, ACTOR) is None


def test_a_commit_file_without_params_is_not_a_checkpoint(gcs):
    put(gcs, ACTOR, "7/commit_success.txt", "7/optimizer_state/x", "8/model_params/")
    assert final_checkpoint(gcs, ACTOR) is None


@pytest.mark.pure
@pytest.mark.parametrize(
    ("folder", "parsed"),
    [
        ("5", (5, True)),
        ("120", (120, True)),
        ("5.orbax-checkpoint-tmp", (5, False)),
        ("5.orbax-checkpoint-tmp-1732", (5, False)),
        ("x5", None),
        ("\u0665", None),
        ("5.other", None),
        ("", None),
        ("1" * 13, None),
    ],
    ids=["step", "three-digits", "tmp", "tmp-timestamp", "letter", "arabic-digit", "other-suffix", "empty", "huge"],
)
def test_step_folder_names(folder, parsed):
    assert checkpoint_scan.parse_step(folder) == parsed


@pytest.mark.slow
def test_the_export_container_finds_the_same_step(gcs, monkeypatch, tmp_path):
    """The script the export runs (as its ConfigMap ships it, real python) prints what the program found."""
    for step in (10, 20):
        save(gcs, step)
    save(gcs, 30, committed=False)
    source = container_program(tmp_path, "checkpoint_scan.py")
    done = subprocess.run([sys.executable, source, ACTOR], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    found = final_checkpoint(gcs, ACTOR)
    assert found is not None and done.stdout.strip() == found.uri == f"{ACTOR}20/model_params/"
    empty = f"gs://{BUCKET}/nothing/here/"
    done = subprocess.run([sys.executable, source, empty], capture_output=True, text=True, timeout=60)
    assert done.returncode == SETUP_FAILURE_EXIT == checkpoint_scan.NOTHING_TO_EXPORT
    assert f"no complete checkpoint under {empty}" in done.stderr and not done.stdout


def test_exported_model(gcs):
    """The check after the export (and the next `up`'s, which retries a completed export it fails): the folder
    as workloads.observe.exported reads it, so a shard cut short is retried, not only a missing file."""
    uri = f"gs://{BUCKET}/gemma4-26b/export/ghi/"
    put(gcs, uri, "config.json", data=b"{}")
    assert exported_problem(gcs, uri) == (
        f"export finished but {uri} is incomplete: tokenizer.json is missing; tokenizer_config.json is missing; "
        "no weights: neither model.safetensors.index.json nor model.safetensors"
    )
    files = model_files(LANGUAGE, 6)
    _export(gcs, uri, files)
    assert exported_problem(gcs, uri) is None
    for shard in range(1, 7):
        name = f"model-0000{shard}-of-00006.safetensors"
        _export(gcs, uri, {name: files[name][:-1]})
    found = exported_problem(gcs, uri)
    assert found is not None
    assert found.startswith(f"export finished but {uri} is incomplete: model-00001-of-00006.safetensors is ")
    assert found.endswith("the shard is cut short (and 1 more)") and found.count("cut short") == 5


def _completed(type_, inputs):
    if type_ == JOBSET:
        return {"terminalState": "Completed", "conditions": [{"type": "Completed", "status": "True"}]}
    return None


def _run_up():
    """The program as during `pulumi up` (not offline, not preview), without the HF preflight."""
    return plan_stack(
        ROOT / "Pulumi.prod.yaml",
        ["tpu-rl:workflow.preflight=false"],
        world=fake_world,
        secrets={"tpu-rl:hfToken": SENTINEL_TOKEN},
        outputs_for=statuses(_completed),
        raise_errors=False,
    )[0]


@pytest.mark.slow
def test_up_stops_when_conversion_left_no_checkpoint(gcs):
    put(gcs, f"gs://{BUCKET}/", "unrelated")
    plan = _run_up()
    assert isinstance(plan.error, pulumi.RunError)
    assert "conversion finished but" in str(plan.error) and "/0/items/ is empty" in str(plan.error)
    assert set(step_resources(plan)) == {"convert"}, "training never starts without its input"


def _trained(gcs) -> dict:
    """A converted checkpoint, a run that ended at step 49, and its evaluations and scalars in GCS."""
    steps = plan_of("prod").outputs["steps"]
    put_conversion(gcs, steps["convert"]["outputUri"])
    for step in (10, 20, 30, 40, 49):
        put(gcs, steps["train"]["artifactUri"], f"{step}/model_params/x", f"{step}/commit_success.txt")
    upload_run(gcs, steps["train"]["outputUri"], steps=[1, 2, 3, 4, 47, 48, 49])
    return steps


def _export(gcs, uri: str, files: dict[str, bytes]) -> None:
    bucket, _, prefix = uri.removeprefix("gs://").partition("/")
    for name, data in files.items():
        gcs.bucket(bucket).blob(prefix + name).upload_from_string(data)


def base_hub() -> type[FakeHub]:
    """The base model's repository on a loopback Hub: its language model and a vision tower, two shards."""
    return FakeHub.serving(model_files({**LANGUAGE, **VISION}, 2))


@pytest.mark.slow
def test_up_exports_the_last_step_found_and_warns_when_it_is_short(gcs, monkeypatch):
    steps = _trained(gcs)
    actor = steps["train"]["artifactUri"]
    _export(gcs, steps["export"]["artifactUri"], model_files({**LANGUAGE, **VISION}, 3))
    from workloads.observe import exported

    reads: list[str] = []
    real = exported.read_exported

    def read_exported(client, hf_uri: str, **call) -> exported.Exported:
        reads.append(hf_uri)
        return real(client, hf_uri, **call)

    monkeypatch.setattr(exported, "read_exported", read_exported)
    with serve(base_hub()) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub)
        plan = _run_up()
    assert plan.error is None, plan.error
    assert reads == [steps["export"]["artifactUri"]], "the export's folder is read once: its own check, then the base"
    assert any(
        f"export check: {steps['export']['artifactUri']} matches google/gemma-4-26b-a4b-it@{COMMIT}" in m
        for level, m in plan.logs
        if level == "INFO"
    )
    summary = plan.outputs["steps"]["train"]["summary"]
    assert summary["accuracyBefore"] == 30.0 and summary["accuracyAfter"] == 52.5
    assert summary["finalReward"] == pytest.approx(reward(49)) and summary["lastStep"] == 49
    assert summary["stepChipHours"] > 0 and summary["heldChipHours"] > summary["stepChipHours"]
    assert plan.outputs["steps"]["train"]["finalStep"] == 49
    assert plan.outputs["steps"]["train"]["checkpointUri"] == f"{actor}49/model_params/"
    assert plan.outputs["hfModelUri"] == steps["export"]["artifactUri"]
    assert any("training ended at step 49, not 50" in w for w in plan.warnings())


@pytest.mark.slow
def test_a_branch_moved_since_the_conversion_checks_the_export_against_the_commit_converted(gcs, monkeypatch):
    """``main`` (prod's revision) moved after the conversion (a push: one tensor more): the export is of the
    commit converted and is checked against it, not against where the branch points now."""
    from tools.stack_files import load_stack
    from workloads.observe.artifacts import storage_client
    from workloads.reader import Hub
    from workloads.workflow import export_differences

    steps = _trained(gcs)
    _export(gcs, steps["export"]["artifactUri"], model_files({**LANGUAGE, **VISION}, 3))
    pushed = {**LANGUAGE, **VISION, f"{LANG}layers.2.extra.weight": ("BF16", [2])}
    with serve(FakeHub.moving(model_files({**LANGUAGE, **VISION}, 2), model_files(pushed, 2))) as url:
        monkeypatch.setenv("HF_ENDPOINT", url)
        plan = _run_up()
        at_the_branch = export_differences(
            load_stack("prod", None, [])[0], steps["export"]["artifactUri"], storage_client, Hub(url, GOOD, "")
        )
    assert plan.error is None, plan.error
    assert any(f"matches google/gemma-4-26b-a4b-it@{COMMIT}" in m for level, m in plan.logs if level == "INFO")
    assert plan.outputs["steps"]["convert"]["baseCommit"] == COMMIT
    assert at_the_branch and "extra.weight" in at_the_branch[0], "checked at the branch, the export would fail"


@pytest.mark.slow
def test_up_fails_when_the_export_is_not_the_whole_base_model(gcs, monkeypatch):
    """Six differences (architecture, dtype, shape, a missing and two extra tensors): `up` fails with the first
    five, how many more there are, the export's logs and why the next `up` does not retry it."""
    steps = _trained(gcs)
    wrong = {
        **LANGUAGE,
        **VISION,
        f"{LANG}norm.weight": ("F32", [4]),
        f"{LANG}embed_tokens.weight": ("BF16", [4, 8]),
    }
    wrong.pop(f"{LANG}layers.1.self_attn.q_proj.weight")
    wrong.update({f"{LANG}layers.2.extra{i}.weight": ("BF16", [2]) for i in range(2)})
    _export(
        gcs, steps["export"]["artifactUri"], model_files(wrong, 3, {**CONFIG, "architectures": ["Gemma4ForCausalLM"]})
    )
    with serve(base_hub()) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub)
        plan = _run_up()
    assert isinstance(plan.error, pulumi.RunError)
    text = str(plan.error)
    assert text.startswith(
        f"the exported model {steps['export']['artifactUri']} does not match google/gemma-4-26b-a4b-it@{COMMIT} "
        '(the commit converted): config.json architectures is ["Gemma4ForCausalLM"]'
    )
    assert "(and 1 more); export logs: " in text and text.count("; ") == 5, text
    context, job = "gke_my-tpu-prod-project_us-east5_tpu-rl-prod", f"{steps['export']['name']}-export-0"
    assert f"export logs: kubectl --context {context} logs -n tpu-rl -l job-name={job}" in text
    assert "the next `up` does not retry it" in text
    assert SENTINEL_TOKEN not in text and "\n" not in text


@pytest.mark.slow
def test_up_runs_an_export_again_when_a_shard_is_missing(gcs, monkeypatch):
    """A shard the index names but GCS lacks (an upload cut short): incomplete, so the next `up` retries the
    export (its own check, before the comparison with the base)."""
    steps = _trained(gcs)
    files = model_files({**LANGUAGE, **VISION}, 3)
    files.pop("model-00003-of-00003.safetensors")
    _export(gcs, steps["export"]["artifactUri"], files)
    with serve(base_hub()) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub)
        plan = _run_up()
    text = str(plan.error)
    assert text.startswith(f"export finished but {steps['export']['artifactUri']} is incomplete: ")
    assert "model-00003-of-00003.safetensors, named by model.safetensors.index.json, is missing" in text
    assert f"the next `make up STACK=prod` runs {steps['export']['name']} again" in text


@pytest.mark.slow
def test_up_fails_naming_the_path_when_training_saved_nothing(gcs):
    steps = plan_of("prod").outputs["steps"]
    put_conversion(gcs, steps["convert"]["outputUri"])
    plan = _run_up()
    assert isinstance(plan.error, pulumi.RunError)
    assert f"no complete checkpoint was found under {steps['train']['artifactUri']}" in str(plan.error)
    assert "the next `make up STACK=prod` runs" in str(plan.error), "the error says how it is retried"
    assert not plan.find(JOBSET, steps["export"]["name"]), "nothing to export: the export is never created"


ORBAX_STEP = [
    line.removeprefix("10/")
    for line in (Path(__file__).parent / "data" / "orbax-step-names.txt").read_text().splitlines()
    if line and not line.startswith("#")
]
"""The names one actor step has, as Orbax wrote them (tests/make_orbax_fixture.py: orbax-checkpoint's v1
Checkpointer as tunix uses it, zarr v2 without OCDBT, commit files), relative to the step folder."""


def orbax_step(step: int, *, complete: bool, copies: int = 160) -> list[str]:
    """One step of a 26B run: the real writer's names with every array folder repeated ``copies`` times (a
    26B model has hundreds of arrays, each with a chunk per shard: ~17k objects a step). A save cut short
    has the first third of its arrays and no commit file."""
    arrays = sorted(name.rsplit("/", 1)[0] for name in ORBAX_STEP if name.endswith("/.zarray"))
    step_files = [name for name in ORBAX_STEP if name.rsplit("/", 1)[0] not in arrays]
    names = [f"{step}/{n}" for n in step_files if complete or not n.endswith("commit_success.txt")]
    folders = [(array, copy) for copy in range(copies) for array in arrays]
    for array, copy in folders if complete else folders[: len(folders) // 3]:
        files = [name for name in ORBAX_STEP if name.startswith(f"{array}/")]
        names += [f"{step}/{array.replace('.value', f'_{copy}.value', 1)}/{n.rsplit('/', 1)[1]}" for n in files]
    return names


@pytest.mark.slow
def test_the_newest_complete_step_among_150k_objects_is_found_quickly(gcs):
    """A 26B run's checkpoints: every step is ~18k objects. The scan lists step folders with a delimiter
    and checks one commit file and one name per step, so the newest step is never cut by a listing cap."""
    names = [name for step in range(0, 90, 10) for name in orbax_step(step, complete=True)]
    names += orbax_step(90, complete=False)  # a save cut short by a preemption
    assert len(names) >= 150_000
    bucket, prefix = checkpoint_scan.split_uri(ACTOR)
    gcs.create_bucket(bucket)
    gcs.fake.lay_out(bucket, [prefix + name for name in names])
    start = time.monotonic()
    found = final_checkpoint(gcs, ACTOR)
    elapsed = time.monotonic() - start
    assert found is not None
    assert (found.step, found.uri, found.incomplete) == (80, f"{ACTOR}80/model_params/", (90,))
    assert elapsed < 30, f"the scan took {elapsed:.1f} s"


def test_the_librarys_retries_end_one_read_before_the_wall_clocks_bound():
    """A run of 429s or 5xx ends in the library's RetryError, which names the answer, before ``bounded`` gives up
    on the call by the wall clock (tests/test_hostile_servers.py ``429-long``: "kept answering HTTP 429")."""
    from core.deadline import Budget
    from workloads.observe.artifacts import call_options

    assert call_options(Budget(60.0, 5.0, 20.0))["retry"].timeout == 40.0
    assert call_options(Budget(1.5, 0.5, 0.5))["timeout"] == (0.5, 0.5)
    assert call_options(Budget(1.5, 0.5, 0.5))["retry"].timeout == 1.0
    assert call_options(Budget(2.0, 1.0, 2.0))["retry"].timeout == 2.0, "never shorter than one read"


@pytest.mark.parametrize("variable", [None, "false"], ids=["unset", "set-by-the-operator"])
def test_a_read_starts_no_thread_of_the_library_unless_the_operator_asked(gcs, monkeypatch, variable):
    """google-cloud-storage fetches a bucket's metadata in a thread of its own on the first call that names the
    bucket, retried outside every budget: the product's clients turn it off (``infra.transports``), unless the
    operator set the library's variable, which is kept."""
    import threading

    from infra.transports import STORAGE_METADATA_OFF
    from workloads.observe.artifacts import storage_client

    if variable is None:
        monkeypatch.delenv(STORAGE_METADATA_OFF, raising=False)
    else:
        monkeypatch.setenv(STORAGE_METADATA_OFF, variable)
    started: list[str] = []
    start = threading.Thread.start

    def recorded(thread: threading.Thread) -> None:
        started.append(getattr(getattr(thread, "_target", None), "__name__", ""))
        start(thread)

    gcs.create_bucket("fresh-bucket").blob("note.txt").upload_from_string("a")
    monkeypatch.setattr(threading.Thread, "start", recorded)
    assert storage_client().bucket("fresh-bucket").blob("note.txt").download_as_bytes() == b"a"
    fetches = [name for name in started if name == "_fetch_background"]
    assert (fetches == []) is (variable is None), started
