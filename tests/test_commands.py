"""Rendered step scripts, run by a real bash from their ConfigMap's files with a ``python3`` shim, give exactly the
expected argv."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.maxtext_keys import MAXTEXT_VERSION, known_keys
from core.names import DRILL_EXIT, SETUP_FAILURE_EXIT, SLICE_DOWN_EXIT, SLICE_WAIT_EXIT, STALLED_EXIT
from tests.conftest import put, shared_path, slug
from tests.fake_hub import COMMIT
from tests.jobset_model import head_exit
from tests.lifecycle_walk import settings
from tests.shim_calls import read_calls
from tests.step_scripts import install, literal_env, objects, scripts_of, step_id
from workloads.container import restart_drill
from workloads.container.launch import RESUMED_ENV, SKIPPED
from workloads.specs.commands import (
    EXPORT_BASE_DIR,
    OPTIMIZER_PATCH,
    RUN_SCRIPT,
    SCRIPTS_DIR,
    TRAIN_BASE_DIR,
    TRAIN_RL,
    UTILS_RL,
    program_file,
    quote,
    vllm_additional_config,
)
from workloads.specs.train_script import (
    DRILL_ENV,
    RUN_LINE,
    SLICE_WAIT_ENV,
    STALL_ENV,
    TRAIN_LOG,
    launch_env,
)

# The tutorial's training command, verbatim (../shared/reference/tutorial.md, step 2).
TUTORIAL_TRAIN = """python3 -m maxtext.trainers.post_train.rl.train_rl run_name=rl
base_output_directory=gs://$GCS_BUCKET/gemma4-26b/trained/ model_name=gemma4-26b scan_layers=False
load_parameters_path=gs://$GCS_BUCKET/gemma4-26b/max-text-format/0/items/ hf_access_token=$HF_TOKEN
data_template_path=maxtext/examples/chat_templates/openmathinstruct2_rl.json num_batches=50
batch_size=4 train_micro_batch_size=2 max_target_length=640 max_prefill_predict_length=256
mu_dtype=bfloat16 grad_dtype=bfloat16 rollout_tensor_parallelism=4 rollout_expert_parallelism=1
trainer_devices_fraction=0.5 sampler_devices_fraction=0.5 tokenizer_path=google/gemma-4-26b-a4b-it
ici_tensor_parallelism=2 ici_expert_parallelism=4 ici_fsdp_parallelism=-1 hbm_utilization_vllm=0.7
remat_policy=full async_scheduling=False allow_split_physical_axes=true
ragged_gather_reduce_fallback=True
enable_dp_attention=False decode_sampling_temperature=0.8 decode_sampling_top_k=50
decode_sampling_nucleus_p=0.95
learning_rate=2e-5 learning_rate_schedule_steps=100 rl.num_generations=4 rl.reshard_chunk_size=4 debug=True
vllm_hf_overrides='{"architectures": ["MaxTextForCausalLM"]}'
vllm_additional_config="{'maxtext_config': {'model_name': 'gemma4-26b', 'model_call_mode': 'inference',
'enable_dp_attention': false, 'allow_split_physical_axes': true, 'use_ragged_sort': false,
'ragged_gather_reduce_fallback': true, 'prefuse_moe_weights': true, 'weight_dtype': 'bfloat16'}}\""""

TUTORIAL_CONVERT = """python3 -m maxtext.checkpoint_conversion.to_maxtext model_name=gemma4-26b
hf_access_token=$HF_TOKEN
--hf_model_path=google/gemma-4-26b-a4b-it base_output_directory=gs://$GCS_BUCKET/gemma4-26b/max-text-format/
scan_layers=False use_multimodal=False skip_jax_distributed_system=true checkpoint_storage_use_zarr3=0
checkpoint_storage_use_ocdbt=0 hardware=cpu --lazy_load_tensors=True"""

TUTORIAL_EXPORT = """python3 -m maxtext.checkpoint_conversion.to_huggingface model_name=gemma4-26b
hf_access_token=$HF_TOKEN
load_parameters_path=gs://$GCS_BUCKET/gemma4-26b/trained/rl/checkpoints/actor/50/model_params/
base_output_directory=gs://$GCS_BUCKET/gemma4-26b/hf-trained/ skip_jax_distributed_system=true
hardware=cpu scan_layers=False use_multimodal=False weight_dtype=bfloat16 --override_model_architecture"""


def tutorial_argv(command: str) -> list[str]:
    """The tutorial's argv after python3, as bash would split it (variables left literal)."""
    return shlex.split(command.replace("\n", " "))[1:]


# The programs a step's script runs, as its container sees them (files of its ConfigMap, mounted at /tpu-rl).
PATCH, MARK, UPLOADER = (f"{SCRIPTS_DIR}/{name}" for name in ("optimizer_patch.py", "mark_folder.py", "upload.py"))
SNAPSHOT, SCAN, COMPLETE, STAGE = (
    f"{SCRIPTS_DIR}/{n}" for n in ("base_snapshot.py", "checkpoint_scan.py", "complete_export.py", "stage_dataset.py")
)
WATCHDOG, JUDGE, LAUNCH, SLICE = (
    f"{SCRIPTS_DIR}/{name}" for name in ("stall_watchdog.py", "train_exit.py", "launch.py", "slice_state.py")
)


def run_in_bash(
    step: dict | str,
    tmp_path: Path,
    env: dict[str, str] | None = None,
    check: bool = True,
    script: str | None = None,
) -> list[list[str]]:
    """Run a step's script as its container does (``bash /tpu-rl/run.sh``, its ConfigMap's files in ``tmp_path``;
    ``script`` in place of its own, or a bare script for ``step``) with ``python3`` on PATH recording each call's
    argv, its programs named by their path in the container (``SHIM_RUN_C=1`` also runs them with the real
    interpreter; ``SHIM_TRAIN_RL=<file>`` runs that file for ``python3 -m ...``; ``base_snapshot.py`` prints
    ``SHIM_BASE_COMMIT``, ``COMMIT`` unless it is set empty: it runs for real in tests/test_base_snapshot.py, and
    here with ``SHIM_RUN_BASE=1``, alone of the programs). The image's MaxText passes its check unrecorded (the
    check runs for real in tests/test_maxtext_check.py). The training log and side file go to ``tmp_path`` instead
    of /tmp."""
    run_sh = install(step, tmp_path, script)
    log = tmp_path / "calls.log"
    log.write_text("")
    bin_dir = tmp_path / "bin"
    environment = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        STALL_ENV: "7200",
        SLICE_WAIT_ENV: "16200",
        "SHIM_BASE_COMMIT": COMMIT,
        **(env or {}),
    }
    done = subprocess.run(["bash", str(run_sh)], env=environment, timeout=60, capture_output=True, text=True)
    if check:
        assert done.returncode == 0, done.stderr
    _LAST_RUN[:] = [done]
    mounted = f"{run_sh.parent}/"
    return [[word.replace(mounted, f"{SCRIPTS_DIR}/") for word in call] for call in read_calls(log)]


_LAST_RUN: list[subprocess.CompletedProcess[str]] = []


def last_run() -> subprocess.CompletedProcess[str]:
    """The last ``run_in_bash``'s process: its return code, stdout and stderr."""
    return _LAST_RUN[-1]


def step_container(obj: dict) -> dict:
    """The step's container: the CPU step's only container, or the training head's workload container."""
    pod = obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    if obj["metadata"]["labels"]["app.kubernetes.io/component"] != "train":
        (container,) = pod["containers"]
        return container
    return next(c for c in pod["containers"] if c["name"] == "workload-container")


def container_script(obj: dict) -> str:
    """The script the step's container runs: ``run.sh`` of its ConfigMap, which its pod mounts at /tpu-rl."""
    pod = obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    container = step_container(obj)
    assert container["command"] == ["/bin/bash", f"{SCRIPTS_DIR}/{RUN_SCRIPT}"] and "args" not in container
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == SCRIPTS_DIR]
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    scripts = scripts_of(obj)
    assert mount["readOnly"] and volume["configMap"]["name"] == scripts["metadata"]["name"]
    return scripts["data"][RUN_SCRIPT]


@pytest.mark.pure
@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_each_step_runs_its_script_from_its_own_config_map(stack):
    """No script or program is an argument: each container runs ``bash /tpu-rl/run.sh`` from its step's
    ConfigMap, which holds the script and exactly the programs it runs, each the text the image runs."""
    objs = objects(stack, "tpu-rl:publish.repo=me/model", "tpu-rl:workflow.steps.evaluate=true")
    expected = {
        "convert": {"maxtext_check.py", "mark_folder.py", "base_snapshot.py"},
        "train": {
            "maxtext_check.py",
            "optimizer_patch.py",
            "checkpoint_scan.py",
            "mark_folder.py",
            "base_snapshot.py",
            "upload.py",
            "stall_watchdog.py",
            "restart_drill.py",
            "train_exit.py",
            "launch.py",
            "slice_state.py",
            "stage_dataset.py",
        },
        "export": {
            "maxtext_check.py",
            "mark_folder.py",
            "checkpoint_scan.py",
            "base_snapshot.py",
            "complete_export.py",
        },
        "evaluate": {"mark_folder.py", "evaluate_export.py"},
        "publish": {"mark_folder.py", "publish_hub.py"},
    }
    assert sorted(objs) == sorted(expected)
    for step, obj in objs.items():
        script = container_script(obj)
        data = scripts_of(obj)["data"]
        overrides = {"train.json"} if step == "train" else set()  # train_rl's, as data (core/step_config.py)
        imported = IMPORTED[step]  # what the programs import from their folder, run by none of them
        assert set(data) == {RUN_SCRIPT, *expected[step], *imported, *overrides}, step
        assert all(data[name] == program_file(name) for name in {*expected[step], *imported})
        assert all(f"python3 {SCRIPTS_DIR}/{name} " in script for name in expected[step])
        assert not any(f"{SCRIPTS_DIR}/{name}" in script for name in imported)
        assert "python3 -c" not in script and "bash -c" not in script


CORE = ("errors.py", "hf_model.py", "redact.py", "redact_keys.py", "terminal.py")
"""core's files the programs import (``commands.CORE_FILES``): the error tree, the model folder's checks and the
redaction, which ``shown.py`` applies."""
IMPORTED = {
    "convert": {"shown.py", "tpu_rl_program.py", *CORE},
    "train": {"shown.py", "tpu_rl_program.py", "tpu_rl_watch.py", *CORE},
    "export": {"shown.py", "tpu_rl_program.py", *CORE},
    "evaluate": {"shown.py", "evaluate_grader.py", "tpu_rl_program.py", "tpu_rl_download.py", *CORE},
    "publish": {"shown.py", "tpu_rl_program.py", "tpu_rl_download.py", *CORE},
}
"""The files of each step's ConfigMap its programs import and no script runs (``commands.program_imports``)."""


PROD_BUCKET = "gs://my-tpu-prod-project-tpu-rl-prod"


@pytest.mark.pure
@pytest.mark.slow
def test_training_argv_is_the_tutorials_with_only_the_documented_changes(tmp_path):
    objs = objects("prod")
    calls = run_in_bash(objs["train"], tmp_path, literal_env(objs["train"]))
    assert calls[0] == [PATCH, UTILS_RL], "the Adafactor patch runs first"
    actual = train_call(calls)
    assert calls[1] == [MARK, f"{PROD_BUCKET}/gemma4-26b/train/{step_id(objs['train'])}/"]
    convert_out = f"{PROD_BUCKET}/gemma4-26b/convert/{step_id(objs['convert'])}/"
    assert calls[2] == [SNAPSHOT, "fetch", convert_out, TRAIN_BASE_DIR], "the base at the converted commit"
    assert f"tpu-rl: the base model at commit {COMMIT} (tokenizer_path)" in last_run().stdout
    train_uri = objs["train"]["metadata"]["annotations"]["tpu-rl/input"]
    train_out = f"{PROD_BUCKET}/gemma4-26b/train/{step_id(objs['train'])}/"
    staged = [
        STAGE,
        "nvidia/OpenMathInstruct-2",
        "main",
        f"{train_out}dataset/",
        f"{PROD_BUCKET}/gemma4-26b/train/hub/",
        "data/train_1M-*.parquet",
    ]
    assert calls[3] == staged, "the dataset staged from the stack's dataset cache, before train_rl reads it"
    assert calls[4] == [SCAN, f"{train_out}rl/checkpoints/actor/"], "whether the attempt resumes, as tunix will"
    expected = []
    for arg in tutorial_argv(TUTORIAL_TRAIN):
        if arg.startswith("hf_access_token="):
            continue  # the token comes from the Secret via HF_TOKEN
        if arg.startswith("base_output_directory="):
            arg = f"base_output_directory={train_out}"
        if arg.startswith("load_parameters_path="):
            arg = f"load_parameters_path={train_uri}"
        if arg.startswith("tokenizer_path="):
            arg = f"tokenizer_path={TRAIN_BASE_DIR}"  # the base's files at the converted commit (docs/configuration.md)
        expected.append(arg)
        if arg.startswith("data_template_path="):
            expected += [
                "dataset_name=nvidia/OpenMathInstruct-2",
                "eval_dataset_name=nvidia/OpenMathInstruct-2",
                # the Hub's files, staged in the bucket by the first attempt
                f"hf_train_files={train_out}dataset/data/train_1M-*.parquet",
                "train_split=train_1M",
            ]
    expected.append("checkpoint_period=10")  # not in the tutorial: bounds what a failure loses (docs/configuration.md)
    assert actual == expected, "load_checkpoint_only_once is MaxText's (docs/first-run.md): not passed"
    assert train_uri == f"{PROD_BUCKET}/gemma4-26b/convert/{step_id(objs['convert'])}/0/items/"
    uploads = [c[1:] for c in calls if c[:1] == [UPLOADER]]
    evals, log = str(tmp_path / "evals.txt"), str(tmp_path / "train.log")
    assert [u[0] for u in uploads] == [evals, log, evals], "the side file at the start; both files at the end"
    assert f"> {TRAIN_LOG}" in container_script(objs["train"]), "the container writes its log to /tmp"
    attempt = re.fullmatch(re.escape(f"{train_out}logs/train-") + r"(\d{8}T\d{6}Z)\.log", uploads[1][1])
    assert attempt and uploads[0][1] == uploads[2][1] == f"{train_out}logs/evals-{attempt.group(1)}.txt"
    stall = str(tmp_path / "stalled")
    account, baseline = str(tmp_path / "account"), str(tmp_path / "slice.json")
    assert any(c[:1] == [WATCHDOG] and c[2:] == [log, "7200", stall, "16200", baseline] for c in calls), (
        "the watchdog watches the log with the manifest's bound, and the devices' by what the slice's wait saw"
    )
    drilled = str(tmp_path / "drilled")
    slice_words = [SLICE, account, "8", baseline]
    assert calls[-1] == [
        JUDGE,
        log,
        "0",
        stall,
        str(SLICE_DOWN_EXIT),
        str(STALLED_EXIT),
        drilled,
        str(DRILL_EXIT),
        *slice_words,
    ], "the judge, with the slice's evidence for a 'maybe down' error"
    assert [c for c in calls if c[:1] == [SLICE]] == [[SLICE, "wait", account, "8", "16200", baseline, log, "78"]]
    assert len(calls) == 13, "train_rl started by the launcher (workloads/container/launch.py); no restart drill"


def train_call(calls: list[list[str]]) -> list[str]:
    return next(c for c in calls if c[:2] == ["-m", TRAIN_RL])


@pytest.mark.pure
@pytest.mark.slow
def test_training_fails_with_train_rls_exit_code_after_copying_the_log(tmp_path):
    """The log is copied whatever happens; the container exits with train_rl's status."""
    train = objects("prod", "tpu-rl:training.optimizer=adamw")["train"]
    launch = f"{launch_env()} python3 {SCRIPTS_DIR}/launch.py"
    failing = container_script(train).replace(launch, f"(exit 7) && {launch}", 1)
    calls = run_in_bash(train, tmp_path, check=False, script=failing)
    assert last_run().returncode == 7, "the judge printed nothing (not run here): train_rl's status"
    finished = [c for c in calls if c[:1] != [WATCHDOG]]  # started in the background: any order
    assert finished[-3][:2] == [UPLOADER, str(tmp_path / "train.log")]
    assert finished[-1][:3] == [JUDGE, str(tmp_path / "train.log"), "7"]


@pytest.mark.pure
@pytest.mark.slow
@pytest.mark.parametrize("status", [SLICE_DOWN_EXIT, STALLED_EXIT, DRILL_EXIT, SLICE_WAIT_EXIT])
def test_a_judge_that_printed_nothing_never_passes_on_one_of_the_scripts_verdicts(tmp_path, status):
    """train_rl's status stands when the judge cannot say, except a code the script keeps for its own verdicts, which
    only evidence may give: 1, which fails the step (a 77 would restart it without bound: tests/test_failure_policy)."""
    train = objects("prod", "tpu-rl:training.optimizer=adamw")["train"]
    launch = f"{launch_env()} python3 {SCRIPTS_DIR}/launch.py"
    failing = container_script(train).replace(launch, f"(exit {status}) && {launch}", 1)
    run_in_bash(train, tmp_path, check=False, script=failing)
    assert last_run().returncode == 1


@pytest.mark.pure
def test_a_failing_patch_stops_the_training_script(tmp_path):
    """Strict mode: the first failing command ends the script with its status; train_rl never starts."""
    calls = run_in_bash(objects("prod")["train"], tmp_path, {"SHIM_FAIL": "3"}, check=False)
    assert last_run().returncode == 3 and len(calls) == 1 and calls[0][:1] == [PATCH]


@pytest.mark.pure
@pytest.mark.parametrize(
    ("shim", "resumed", "said"),
    [
        ({"SHIM_C_PRINTS": "gs://b/t/rl/checkpoints/actor/30/model_params/"}, True, "resuming from gs://b/t/rl/"),
        ({"SHIM_FAIL": "3"}, False, "a fresh attempt (no complete checkpoint)"),
        ({"SHIM_FAIL": "1"}, False, "no checkpoint read (exit 1: "),
        ({}, False, "no checkpoint read (exit 0: "),
    ],
    ids=["resumed", "fresh", "scan-failed", "scan-printed-nothing"],
)
def test_only_a_found_checkpoint_tells_the_launcher_the_attempt_resumes(tmp_path, shim, resumed, said):
    """The training script's resume lines, alone under bash: the checkpoint scan's answer decides; only a found
    checkpoint sets ``RESUMED_ENV`` (the launcher then skips the pre-RL evaluation); a scan that fails evaluates as
    MaxText always did, and the script goes on in every case (strict mode: a failure here would have ended it)."""
    whole = container_script(objects("prod")["train"])
    resume = whole[whole.index("scan=0;") : whole.index("\nattempt=")]
    script = f'set -euo pipefail\n{resume}\necho "env=${{{RESUMED_ENV}:-unset}}"\n'
    calls = run_in_bash(script, tmp_path, shim)
    out = last_run().stdout
    assert len(calls) == 1 and calls[0][0] == SCAN and calls[0][1].endswith("/rl/checkpoints/actor/")
    assert said in out
    assert out.rstrip().rsplit("\n", 1)[-1] == ("env=" + shim["SHIM_C_PRINTS"] if resumed else "env=unset")


@pytest.mark.slow
@pytest.mark.parametrize("resumed", [False, True], ids=["fresh", "resumed"])
def test_a_resumed_attempt_runs_the_releases_train_rl_without_its_pre_rl_evaluation(tmp_path, gcs, resumed):
    """The whole training script against fake-gcs-server with every program real (the checkpoint scan, the
    launcher and its patch of the release's train_rl.py where ``MAXTEXT_PKG_DIR`` says) and, as train_rl, the
    release's own pre-RL block (``tests/pre_rl_block.py``) from the file the launcher patched. A half-written save is
    never a reason to skip; a complete one is, and the restored weights are still synced."""
    import lzma

    from core.maxtext_keys import MAXTEXT_VERSION
    from tests import pre_rl_block
    from tests.conftest import VENDORED

    train = objects("prod", "tpu-rl:training.optimizer=adamw")["train"]
    output = f"{PROD_BUCKET}/gemma4-26b/train/{step_id(train)}/"
    actor = f"{output}rl/checkpoints/actor/"
    put(gcs, actor, "40/model_params/x")  # a save cut short (no commit file): never restored
    if resumed:
        put(gcs, actor, "30/model_params/x", "30/commit_success.txt")
    release = VENDORED / f"maxtext-{MAXTEXT_VERSION}" / "trainers/post_train/rl/train_rl.py.xz"
    package = tmp_path / "maxtext"
    copy = package / "trainers/post_train/rl/train_rl.py"
    copy.parent.mkdir(parents=True)
    copy.write_bytes(lzma.decompress(release.read_bytes()))
    env = train_env(
        train, tmp_path, Path(pre_rl_block.__file__), PRE_RL_BLOCK_FILE=str(copy), MAXTEXT_PKG_DIR=str(package)
    )
    calls = run_in_bash(train, tmp_path, env, check=False)
    out = last_run().stdout
    assert [SCAN, actor] in calls
    (log,) = [text for name, text in _logs(gcs, output).items() if name.startswith("train-")]
    (evals,) = [text for name, text in _logs(gcs, output).items() if name.startswith("evals-")]
    said = f"tpu-rl: resuming from {actor}30/model_params/: train_rl skips the pre-RL evaluation"
    skipped = f"{SKIPPED}{copy} patched: a resumed attempt syncs its weights and does not evaluate them"
    if resumed:
        assert said in out and skipped in out
        assert "synced" in out and "evaluated" not in out and "Pre RL Training" not in out
        assert log.splitlines()[1] == said, "the decision is in the attempt's log, after its run record"
        assert skipped in evals.splitlines(), "and the launcher's line in the side file, for `make status`"
    else:
        said = "tpu-rl: a fresh attempt (no complete checkpoint): train_rl runs the pre-RL evaluation"
        assert said in out and SKIPPED not in out
        assert "synced\nevaluated\nPre RL Training" in out
        assert log.splitlines()[1] == said and SKIPPED not in evals


@pytest.mark.pure
@pytest.mark.parametrize(
    ("overrides", "slices", "chips"),
    [
        ((), 1, 32),
        (
            (
                "tpu-rl:tpu.slices=2",
                "tpu-rl:training.iciExpertParallelism=1",
                "tpu-rl:training.rolloutTensorParallelism=32",
            ),
            2,
            64,
        ),
    ],
)
@pytest.mark.slow
def test_the_training_log_starts_with_the_run_record(tmp_path, overrides, slices, chips):
    """The report and the status tool read what the run is from the log's first line."""
    train = objects("prod", *overrides)["train"]
    log = tmp_path / "train.log"
    calls = run_in_bash(train, tmp_path, {"VLLM_HOST_IP": "10.1.2.3"})
    record = {
        "model": "gemma4-26b",
        "hfRepo": "google/gemma-4-26b-a4b-it",
        "slice": {
            "version": "v6e",
            "machineType": "ct6e-standard-4t",
            "topology": "4x8",
            "slices": slices,
            "chips": chips,
        },
        "optimizer": "adafactor",
        "dataset": "openmathinstruct2",
        "argv": train_call(calls)[2:],
    }
    assert log.read_text().splitlines()[0] == RUN_LINE + json.dumps(record, separators=(",", ":")), "compact JSON"
    assert "tpu-rl: starting train_rl (VLLM_HOST_IP=10.1.2.3)" in last_run().stdout


@pytest.mark.pure
@pytest.mark.parametrize(
    ("word", "quoted"),
    [
        ("plain=1", "plain=1"),
        ("two words", "'two words'"),
        ("{'a': 1}", "\"{'a': 1}\""),  # the tutorial's double-quoted vLLM config
        ("{'XLA': 'X'}", "\"{'XLA': 'X'}\""),
        ("it's $HOME", "'it'\"'\"'s $HOME'"),  # $ must not expand: single quotes
        ("it's `x`", "'it'\"'\"'s `x`'"),
        ("it's \\", "'it'\"'\"'s \\'"),
        ("it's!", "'it'\"'\"'s!'"),
        ('it\'s "x"', "'it'\"'\"'s \"x\"'"),
        ("load_parameters_path=${checkpoint}", '"load_parameters_path=${checkpoint}"'),
        ("${checkpoint}/items", '"${checkpoint}/items"'),
    ],
    ids=lambda value: slug(value),
)
def test_quoting_keeps_every_word_literal_except_the_checkpoint(word, quoted, tmp_path):
    assert quote(word) == quoted
    if "${checkpoint}" not in word:
        (echoed,) = run_in_bash(f"python3 {quoted}", tmp_path)
        assert echoed == [word]


@pytest.mark.pure
@pytest.mark.parametrize("word", ["x=${checkpoint} y", "$(id)${checkpoint}", "${checkpoint}`id`", "a b${checkpoint}"])
def test_unsafe_text_around_the_checkpoint_is_refused(word):
    with pytest.raises(ValueError, match=re.escape(f"unsafe text around ${{checkpoint}}: {word!r}")):
        quote(word)


@pytest.mark.pure
@pytest.mark.parametrize("enabled", [True, False])
def test_the_vllm_config_follows_its_knobs(enabled):
    flag = "true" if enabled else "false"
    overrides = [
        f"tpu-rl:training.{k}={flag}"
        for k in ("enableDpAttention", "allowSplitPhysicalAxes", "raggedGatherReduceFallback")
    ]
    config = vllm_additional_config(settings("prod", overrides))
    assert config == (
        "{'maxtext_config': {'model_name': 'gemma4-26b', 'model_call_mode': 'inference', "
        f"'enable_dp_attention': {flag}, 'allow_split_physical_axes': {flag}, 'use_ragged_sort': false, "
        f"'ragged_gather_reduce_fallback': {flag}, 'prefuse_moe_weights': true, 'weight_dtype': 'bfloat16'}}}}"
    )


@pytest.mark.pure
def test_conversion_argv(tmp_path):
    objs = objects("prod")
    mark, snapshot, convert = run_in_bash(objs["convert"], tmp_path)
    assert mark[:1] == [MARK]
    expected = [a for a in tutorial_argv(TUTORIAL_CONVERT) if not a.startswith("hf_access_token=")]
    convert_out = f"{PROD_BUCKET}/gemma4-26b/convert/{step_id(objs['convert'])}/"
    cache = f"{PROD_BUCKET}/gemma4-26b/convert/hub/"  # the Hub cache (core.layout.hub_cache)
    local = "/scratch/base-model"  # the commit's files, weights included (commands.CONVERT_BASE_DIR)
    # The cache it writes, then the one it reads first: the stack's own both times, with no shared cache.
    assert snapshot == [SNAPSHOT, "snapshot", "google/gemma-4-26b-a4b-it", "main", convert_out, cache, local, cache]
    expected = [
        f"base_output_directory={convert_out}" if a.startswith("base_output_directory=") else a
        for a in expected
        if not a.startswith("--hf_model_path=")
    ]
    # The weights of the commit the snapshot resolved, read from the local folder it filled (never the Hub).
    assert convert == [*expected, f"--revision={COMMIT}", f"--hf_model_path={local}"]
    assert f"tpu-rl: converting commit {COMMIT}" in last_run().stdout


def _export_expected(objs: dict, checkpoint: str) -> list[str]:
    export_out = f"{PROD_BUCKET}/gemma4-26b/export/{step_id(objs['export'])}/"
    expected = []
    for arg in tutorial_argv(TUTORIAL_EXPORT):
        if arg.startswith("hf_access_token="):
            continue
        if arg.startswith("load_parameters_path="):
            arg = f"load_parameters_path={checkpoint}"
        if arg.startswith("base_output_directory="):
            arg = f"base_output_directory={export_out}"
        if arg == "--override_model_architecture":
            expected += [
                "checkpoint_storage_use_zarr3=False",
                "checkpoint_storage_use_ocdbt=False",
                f"--hf_model_path={EXPORT_BASE_DIR}",
            ]
        expected.append(arg)
    return expected


@pytest.mark.slow
def test_export_argv_reads_the_newest_complete_checkpoint_found_at_run_time(tmp_path, gcs):
    """The export script runs the real checkpoint scan (its inlined source) against fake-gcs-server."""
    objs = objects("prod")
    actor = objs["export"]["metadata"]["annotations"]["tpu-rl/input"]
    assert actor == f"{PROD_BUCKET}/gemma4-26b/train/{step_id(objs['train'])}/rl/checkpoints/actor/"
    for step in (10, 20, 30, 40, 49):
        put(gcs, actor, f"{step}/model_params/x", f"{step}/commit_success.txt")
    put(gcs, actor, "50/model_params/x")  # a save cut short
    # SHIM_RUN_C runs every program for real, the completion too: the conversion's record names no verified object,
    # so it fails at once (it is tested for real in tests/test_export_complete.py).
    env = {
        "SHIM_RUN_C": "1",
        "STORAGE_EMULATOR_HOST": os.environ["STORAGE_EMULATOR_HOST"],
        "HF_ENDPOINT": "http://127.0.0.1:9",
        "NO_GCE_CHECK": "True",
    }
    mark, scan, fetch, export, complete = run_in_bash(objs["export"], tmp_path, env, check=False)
    out = f"{PROD_BUCKET}/gemma4-26b/export/{step_id(objs['export'])}/"
    convert_out = f"{PROD_BUCKET}/gemma4-26b/convert/{step_id(objs['convert'])}/"
    assert mark == [MARK, out, actor, convert_out], "the folder once the account may read the checkpoints and the base"
    assert scan == [SCAN, actor]
    assert fetch == [SNAPSHOT, "fetch", convert_out, EXPORT_BASE_DIR]
    assert export == _export_expected(objs, f"{actor}49/model_params/")
    # Completed at the commit, from the objects the conversion's record names as verified.
    assert complete == [COMPLETE, "google/gemma-4-26b-a4b-it", COMMIT, out, convert_out]


@pytest.mark.pure
def test_export_argv_takes_the_checkpoint_the_scan_prints(tmp_path):
    """The scan's answer (stubbed here; run for real above) becomes load_parameters_path."""
    objs = objects("prod")
    actor = objs["export"]["metadata"]["annotations"]["tpu-rl/input"]
    checkpoint = f"{actor}49/model_params/"
    _mark, scan, _fetch, export, complete = run_in_bash(objs["export"], tmp_path, {"SHIM_C_PRINTS": checkpoint})
    assert scan == [SCAN, actor]
    assert export == _export_expected(objs, checkpoint)
    assert complete[:1] == [COMPLETE]
    assert f"tpu-rl: exporting {checkpoint}" in last_run().stdout


@pytest.mark.slow
def test_export_stops_with_the_setup_failure_code_when_there_is_nothing_to_export(tmp_path, gcs):
    objs = objects("prod")
    put(gcs, f"{PROD_BUCKET}/", "unrelated")
    env = {"SHIM_RUN_C": "1", "STORAGE_EMULATOR_HOST": os.environ["STORAGE_EMULATOR_HOST"]}
    calls = run_in_bash(objs["export"], tmp_path, env, check=False)
    assert last_run().returncode == SETUP_FAILURE_EXIT
    assert len(calls) == 2, "to_huggingface never starts"
    assert "no complete checkpoint under" in last_run().stderr


@pytest.mark.pure
@pytest.mark.slow
def test_each_step_creates_its_output_folder_first_or_stops(tmp_path, gcs_folders):
    """TensorFlow's GCS mkdir (MaxText's paths) walks up from a missing folder and looks each parent up as an
    object: from an empty step folder it would reach <model>/<step>, outside the identity's prefixes (403).
    The folder is created first, for real against fake-gcs-server; a failure to create it stops the step."""
    objs = objects("prod")
    gcs = gcs_folders
    env = {"SHIM_RUN_C": "1", "STORAGE_EMULATOR_HOST": os.environ["STORAGE_EMULATOR_HOST"]}
    convert = objs["convert"]
    out = f"{PROD_BUCKET}/gemma4-26b/convert/{step_id(objs['convert'])}/"
    # No bucket yet: GCS refuses the create at once (as it would a 403), and MaxText never starts.
    calls = run_in_bash(convert, tmp_path, env, check=False)
    assert last_run().returncode == 1 and len(calls) == 1, "MaxText never starts"
    assert last_run().stderr.strip().endswith(f"tpu-rl: cannot create {out} (NotFound): check the step's bucket access")
    put(gcs, f"{PROD_BUCKET}/", "unrelated")
    calls = run_in_bash(convert, tmp_path, env)
    hub = f"{PROD_BUCKET}/gemma4-26b/convert/hub/"
    assert calls[0] == [MARK, out, hub, hub], "once it may use its Hub cache (the one written, the one read first)"
    assert calls[1][:2] == [SNAPSHOT, "snapshot"]
    assert calls[2][:2] == ["-m", "maxtext.checkpoint_conversion.to_maxtext"]
    folder = gcs.bucket(out.split("/")[2]).get_blob(out.split("/", 3)[3])
    assert folder is not None and folder.size == 0 and folder.name.endswith("/")
    assert f"tpu-rl: created {out}" in last_run().stdout


@pytest.mark.pure
@pytest.mark.slow
def test_adamw_means_no_patch(tmp_path):
    calls = run_in_bash(objects("prod", "tpu-rl:training.optimizer=adamw")["train"], tmp_path)
    started = [c[1] if c[0] == "-m" else c[0] for c in calls]
    assert started[:6] == [MARK, SNAPSHOT, STAGE, SCAN, UPLOADER, SLICE], "the base, the dataset, the slice"
    assert sorted(started[6:9]) == sorted([LAUNCH, TRAIN_RL, WATCHDOG]), "the launcher execs train_rl"
    assert started[9:] == [UPLOADER, UPLOADER, JUDGE]


@pytest.mark.pure
@pytest.mark.slow
def test_extra_args_are_appended_verbatim(tmp_path):
    objs = objects(
        "prod", "tpu-rl:training.extraArgs.eval_interval=1000", "tpu-rl:training.extraArgs.num_test_batches=2"
    )
    calls = run_in_bash(objs["train"], tmp_path)
    assert train_call(calls)[-2:] == ["eval_interval=1000", "num_test_batches=2"]


UTILS_RL_EXCERPT = """def get_optimizer(config, learning_rate):
  return optax.chain(
      optax.clip_by_global_norm(config.gradient_clipping_threshold),
      optax.adamw(
          learning_rate=learning_rate,
          b1=config.adam_b1,
          b2=config.adam_b2,
          weight_decay=config.adam_weight_decay,
      ),
  )
"""


@pytest.mark.pure
def test_optimizer_patch_replaces_exactly_one_call(tmp_path):
    target = tmp_path / "utils_rl.py"
    target.write_text(UTILS_RL_EXCERPT)
    subprocess.run([sys.executable, "-c", OPTIMIZER_PATCH, str(target)], check=True, capture_output=True)
    patched = target.read_text()
    assert "optax.adafactor(learning_rate=learning_rate)" in patched and "adamw" not in patched
    assert "clip_by_global_norm" in patched


@pytest.mark.pure
@pytest.mark.parametrize("text", ["no optimizer here\n", UTILS_RL_EXCERPT + UTILS_RL_EXCERPT], ids=["missing", "twice"])
def test_optimizer_patch_fails_loudly_when_the_image_changed(tmp_path, text):
    target = tmp_path / "utils_rl.py"
    target.write_text(text)
    result = subprocess.run([sys.executable, "-c", OPTIMIZER_PATCH, str(target)], capture_output=True, text=True)
    assert result.returncode == SETUP_FAILURE_EXIT, "not retried: the Jobs' podFailurePolicy fails at once on 3"
    assert "expected exactly one optax.adamw" in result.stderr
    assert target.read_text() == text


PINNED = f"maxtext-{MAXTEXT_VERSION}"
"""The pinned MaxText release's configuration files (``../shared``)."""


@pytest.mark.pure
@pytest.mark.parametrize("stack", ["dev", "prod"])
@pytest.mark.slow
def test_every_maxtext_key_exists_in_the_pinned_maxtext(stack, tmp_path):
    """Every ``key=value`` a step's script hands MaxText is a key of the pinned release (its YAML files and the
    fields only ``configs/types.py`` declares: ``core.maxtext_keys``'s table, made from that release's files)."""
    known = known_keys()
    overrides = ("tpu-rl:training.extraArgs.eval_interval=1000",)
    for step, obj in objects(stack, *overrides).items():
        calls = run_in_bash(obj, tmp_path)
        argv = next(c for c in calls if c[0] == "-m")
        keys = [a.split("=", 1)[0] for a in argv[2:] if not a.startswith("-")]
        unknown = [k for k in keys if k not in known]
        assert not unknown, f"{step}: keys not in MaxText {MAXTEXT_VERSION}: {unknown}"
        assert "hf_access_token" not in keys


@pytest.mark.pure
def test_data_templates_exist_in_the_pinned_maxtext():
    for stack in ("dev", "prod"):
        template = json.loads(scripts_of(objects(stack)["train"])["data"]["train.json"])["data_template_path"]
        assert shared_path(PINNED, *template.split("/")[1:]).exists()


@pytest.mark.pure
def test_model_names_exist_in_the_pinned_maxtext():
    for name in ("gemma4-26b", "gemma4-e4b"):
        assert shared_path(PINNED, "configs", "models", f"{name}.yml").exists()


@pytest.mark.pure
def test_training_env_matches_the_tutorial():
    head = objects("prod")["train"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    worker = objects("prod")["train"]["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]
    containers = head["initContainers"] + head["containers"] + worker["containers"]
    assert [c["name"] for c in containers] == ["pathways-proxy", "pathways-rm", "workload-container", "pathways-worker"]
    for container in containers:
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["GRPC_DNS_RESOLVER"] == "native"
        assert env["FLAGS_pathways_enforce_subset_devices_form_subslice"] == "false"
    workload = {e["name"]: e for e in head["containers"][0]["env"]}
    assert workload["JAX_PLATFORMS"]["value"] == "proxy,cpu"
    assert workload["ENABLE_PATHWAYS_PERSISTENCE"]["value"] == "1"
    assert workload["VLLM_HOST_IP"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    assert workload["HF_TOKEN"]["valueFrom"] == {"secretKeyRef": {"name": "hf-token", "key": "token"}}
    rm = head["initContainers"][1]
    assert "--instance_type=tpuv6e:4x8" in rm["args"] and "--instance_count=1" in rm["args"]
    # The Pathways scratch is training's compilation cache, keyed (tests/test_compile_cache.py).
    scratch = [a for a in rm["args"] if a.startswith("--gcs_scratch_location=")]
    assert re.fullmatch(
        r"--gcs_scratch_location=gs://my-tpu-prod-project-tpu-rl-prod/pathways/gemma4-26b/[0-9a-f]{10}/", *scratch
    )
    assert os.path.basename(head["nodeSelector"]["cloud.google.com/gke-nodepool"]) == "cpu-np"
    assert re.fullmatch(r"4", worker["containers"][0]["resources"]["limits"]["google.com/tpu"])


TRAIN_RL_STAND_IN = """import time
# What train_rl prints when it resumes (tunix checkpoint_manager.py 292-296, then MaxText train_rl.py 785-788),
# then it trains on; like train_rl it has no SIGTERM handler.
print("I1201 05:00:01.000000 1 checkpoint_manager.py:293] Restored params from step: 30 in 12.345 seconds", flush=True)
print("W1201 05:00:02.000000 1 train_rl.py:786] Pre RL Training: corr=30, total=40, accuracy=75.0%, "
      "partial_accuracy=80.0%, format_accuracy=95.0%, mean_reward=0.7000", flush=True)
print("I1201 05:00:03.000000 1 peft_trainer.py:736] Train step 31 training loss: 0.1", flush=True)
time.sleep(120)
"""


def _logs(gcs, prefix: str) -> dict[str, str]:
    bucket, _, path = prefix.removeprefix("gs://").partition("/")
    return {
        b.name.rsplit("/", 1)[-1]: b.download_as_bytes().decode(errors="replace")
        for b in gcs.list_blobs(bucket, prefix=path + "logs/")
    }


@pytest.mark.slow
def test_sigterm_reaches_train_rl_and_the_attempt_keeps_its_log_and_evaluations(tmp_path, gcs):
    """A JobSet restart or a deadline stops the head pod: the kubelet sends SIGTERM to the container's PID 1,
    bash. The script forwards it to train_rl, waits for it, copies the log and the side file, and exits
    with train_rl's status (143); the side file had the evaluation as soon as it was printed."""
    from workloads.observe.evaluations import read_run_logs

    objs = objects("prod", "tpu-rl:training.optimizer=adamw")
    output = f"{PROD_BUCKET}/gemma4-26b/train/{step_id(objs['train'])}/"
    gcs.create_bucket(output.removeprefix("gs://").split("/")[0])
    stand_in = tmp_path / "train_rl.py"
    stand_in.write_text(TRAIN_RL_STAND_IN)
    run_sh = install(objs["train"], tmp_path)
    env = train_env(objs["train"], tmp_path, stand_in)
    bash = subprocess.Popen(["bash", str(run_sh)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 40
        while not any(
            "Pre RL Training" in text for name, text in _logs(gcs, output).items() if name.startswith("evals-")
        ):
            assert time.monotonic() < deadline and bash.poll() is None, "the side file never had the evaluation"
            time.sleep(0.2)
        assert not any(name.startswith("train-") for name in _logs(gcs, output)), "the full log comes at the end"
        bash.send_signal(signal.SIGTERM)
        out, _ = bash.communicate(timeout=40)
    finally:
        bash.kill()
    assert bash.returncode == 128 + signal.SIGTERM, "train_rl's status: it was stopped by the forwarded SIGTERM"
    assert "tpu-rl: forwarding SIGTERM to train_rl" in out and "Train step 31" in out, "the log is on stdout"
    logs = _logs(gcs, output)
    (log,) = [text for name, text in logs.items() if name.startswith("train-")]
    (evals,) = [text for name, text in logs.items() if name.startswith("evals-")]
    assert log.startswith(RUN_LINE) and "Restored params from step: 30" in log and "Train step 31" in log
    assert evals.startswith(RUN_LINE) and "Train step" not in evals, "the side file holds only what it selects"
    found = read_run_logs(gcs, output)
    assert found.attempts[0].restored_step == 30 and found.pre is None
    assert found.pre_unknown is not None and "resumed from a checkpoint (step 30 first)" in found.pre_unknown


def train_env(obj: dict, tmp_path: Path, stand_in: Path, **overrides: str) -> dict[str, str]:
    """The workload container's literal environment (as the manifest sets it), with the shim on PATH running
    ``stand_in`` as train_rl and the GCS emulator for the uploads."""
    return {
        **literal_env(obj),
        "PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin",
        "SHIM_RUN_C": "1",
        "SHIM_TRAIN_RL": str(stand_in),
        "SHIM_BASE_COMMIT": COMMIT,
        "STORAGE_EMULATOR_HOST": os.environ["STORAGE_EMULATOR_HOST"],
        "NO_GCE_CHECK": "True",
        **overrides,
    }


def run_training(tmp_path: Path, gcs, stand_in: str, **env: str) -> tuple[subprocess.CompletedProcess, dict]:
    """The prod training script under real bash with ``stand_in`` as train_rl; (the run, its logs in GCS)."""
    objs = objects("prod", "tpu-rl:training.optimizer=adamw")
    output = f"{PROD_BUCKET}/gemma4-26b/train/{step_id(objs['train'])}/"
    bucket = output.removeprefix("gs://").split("/")[0]
    if not gcs.lookup_bucket(bucket):  # a test may have put a checkpoint there first
        gcs.create_bucket(bucket)
    (tmp_path / "train_rl.py").write_text(stand_in)
    run_sh = install(objs["train"], tmp_path)
    environment = train_env(objs["train"], tmp_path, tmp_path / "train_rl.py", **env)
    done = subprocess.run(
        ["bash", str(run_sh)], env=environment, capture_output=True, text=True, errors="replace", timeout=60
    )
    return done, _logs(gcs, output)


# What train_rl prints when a JAX call fails on a lost slice: the traceback, its last line the JaxRuntimeError
# ``jax.errors.JaxRuntimeError: CODE: message`` (jax errors.py sets the class's module to jax.errors; pathways-utils'
# own fault injector raises "DATA_LOSS: Simulated device loss error accessing array on lost device").
TRACEBACK = """Traceback (most recent call last):
  File "/deps/src/maxtext/trainers/post_train/rl/train_rl.py", line 812, in main
    rl_train(config)
  File "/deps/src/maxtext/trainers/post_train/rl/train_rl.py", line 790, in rl_train
    rl_trainer.train(train_dataset)
{error}
"""


def stand_in(
    error: str, *, before: str = "", after_bytes: int = 0, newline: bool = True, exit: str = "sys.exit(1)"
) -> str:
    """A train_rl that trains a step, writes ``before``, dies of ``error`` (its traceback on stderr, as Python
    prints it), with ``after_bytes`` of other output after it (threads shutting down, binary noise)."""
    text = TRACEBACK.format(error=error)
    if not newline:
        text = text.rstrip("\n")
    return f"""import os, sys
print("I1201 05:00:03.000000 1 peft_trainer.py:736] Train step 31 training loss: 0.1", flush=True)
sys.stdout.write({before!r}); sys.stdout.flush()
sys.stderr.write({text!r}); sys.stderr.flush()
chunk = b"W1201 05:10:00.000000 9 vllm.py:1] shutting down worker \\x00\\xff\\xfe not utf-8\\n" * 1000
left = {after_bytes}
while left > 0:
    os.write(2, chunk[:left]); left -= len(chunk)
{exit}
"""


DATA_LOSS = "jax.errors.JaxRuntimeError: DATA_LOSS: Simulated device loss error accessing array on lost device"
UNREAD = "and its slice is unknown: no in-cluster API"
LOST = f"lost a TPU slice ({DATA_LOSS}); exiting {SLICE_DOWN_EXIT} so the JobSet restarts"


@pytest.mark.parametrize(
    ("train_rl", "status", "says"),
    [
        (stand_in(DATA_LOSS), SLICE_DOWN_EXIT, LOST),
        # 30 MB after the error: the tail | grep -q of earlier versions died of SIGPIPE and exited 1.
        (stand_in(DATA_LOSS, after_bytes=30_000_000), SLICE_DOWN_EXIT, LOST),
        (stand_in(DATA_LOSS, newline=False), SLICE_DOWN_EXIT, LOST),
        (stand_in(DATA_LOSS, before="\x00\xff binary \x1b[31m\n" * 50, after_bytes=5000), SLICE_DOWN_EXIT, LOST),
        # The code anywhere in the error's text counts (pathways-utils tests `code in str(error)`).
        (
            stand_in("jax.errors.JaxRuntimeError: UNKNOWN: remote call failed\n  caused by DATA_LOSS on slice 0"),
            75,
            "lost",
        ),
        # pathways-utils' "may or may not be due to slice down": a deterministic error, not restarted.
        (
            stand_in("jax.errors.JaxRuntimeError: INTERNAL: RET_CHECK failure (mesh 2x4 does not tile 32 devices)"),
            1,
            "INTERNAL",
        ),
        (
            stand_in("jax.errors.JaxRuntimeError: DEADLINE_EXCEEDED: rpc timed out"),
            1,
            "'may or may not be due to slice down'",
        ),
        (stand_in("jax.errors.JaxRuntimeError: NOT_FOUND: buffer 17"), 1, "not restarted"),
        # Any other error asks the slice too; this head may not read it (no API here): not restarted, saying so.
        (stand_in("ValueError: INTERNAL is not a valid value for rl.loss_algo"), 1, UNREAD),
        (stand_in("jax.errors.JaxRuntimeError: UNAVAILABLE: Socket closed"), 1, UNREAD),
        # An earlier, handled DATA_LOSS traceback does not decide: the last traceback is what killed train_rl.
        (stand_in("ValueError: bad batch", before=TRACEBACK.format(error=DATA_LOSS)), 1, UNREAD),
        # Chained: the JaxRuntimeError is the cause, a RuntimeError what propagated (not a JaxRuntimeError).
        (
            stand_in(
                f"{DATA_LOSS}\n\nThe above exception was the direct cause of the following exception:\n\n"
                + TRACEBACK.format(error="RuntimeError: rollout failed").rstrip()
            ),
            1,
            UNREAD,
        ),
        # Killed by a signal after printing one: an OOM kill is not an exception of train_rl.
        (stand_in(DATA_LOSS, exit="os.kill(os.getpid(), 9)"), 137, ""),
        (
            stand_in("print('rpc status INTERNAL retried, DATA_LOSS none')", exit="sys.exit(0)").replace(
                "sys.stderr.write", "print"
            ),
            0,
            "",
        ),
    ],
    ids=[
        "data-loss",
        "30MB-after",
        "no-final-newline",
        "binary-bytes",
        "code-in-message",
        "internal",
        "deadline",
        "not-found",
        "exception",
        "unavailable",
        "earlier-traceback",
        "chained",
        "killed",
        "success",
    ],
)
@pytest.mark.slow
def test_the_training_script_exits_as_train_rl_died_for_any_log(tmp_path, gcs, train_rl, status, says):
    """A lost slice (pathways-utils' definite DATA_LOSS, in the exception train_rl died of) exits SLICE_DOWN_EXIT,
    which the head's podFailurePolicy counts as a disruption; any other error, on a slice this head cannot read, and
    a kill keep train_rl's status (FailJob), the error's line saying so; success stays 0 however the log reads. The
    log is copied either way."""
    done, logs = run_training(tmp_path, gcs, train_rl)
    assert done.returncode == status, done.stdout[-2000:] + done.stderr[-2000:]
    if says:
        assert says in done.stderr
    else:
        assert "tpu-rl: train_rl (exit" not in done.stderr
    assert any(name.startswith("train-") for name in logs), "the log is copied either way"


STALLS = """import time
print("I1201 05:00:03.000000 1 peft_trainer.py:736] Train step 31 training loss: 0.1", flush=True)
time.sleep(600)
"""


@pytest.mark.slow
def test_a_stalled_training_is_ended_and_exits_as_a_disruption(tmp_path, gcs):
    """train_rl stops writing (a blocked Pathways client): after the stall bound the watchdog ends it, the side
    file says so at once (`make status` reads it), and the script exits STALLED_EXIT, which the head's pod
    failure policy counts like a disruption (the JobSet restarts the run from its last checkpoint)."""
    started = time.monotonic()
    done, logs = run_training(tmp_path, gcs, STALLS, **{STALL_ENV: "2"})
    assert done.returncode == STALLED_EXIT, done.stdout + done.stderr
    assert time.monotonic() - started < 30, "ended by the watchdog, not by the stand-in's 10 minutes"
    assert "stalled: no training progress in train_rl's log for 2s" in done.stderr
    (evals,) = [text for name, text in logs.items() if name.startswith("evals-")]
    stalled = "tpu-rl: stalled: no training progress in train_rl's log for 2s (tpu-rl:workflow.stallTimeout)"
    assert stalled in evals
    (log,) = [text for name, text in logs.items() if name.startswith("train-")]
    assert "Train step 31" in log and "stalled" in log


@pytest.mark.slow
def test_a_training_that_keeps_writing_is_not_stalled(tmp_path, gcs):
    """A training step every second, slower than the watchdog looks and faster than the bound: never a stall."""
    step = "I1201 05:00:03.000000 1 peft_trainer.py:736] Train step {i} training loss: 0.1"
    writes = f"import time\nfor i in range(6):\n    print(f'{step}', flush=True); time.sleep(1)\n"
    done, _logs_ = run_training(tmp_path, gcs, writes, **{STALL_ENV: "3"})
    assert done.returncode == 0, done.stdout + done.stderr


# A train_rl that trains, has tunix commit the checkpoint of step 10 (orbax's commit_success.txt beside its
# model_params/, where checkpoint_scan.py looks) while step 11 runs, and goes on until it is stopped.
DRILLED = """import os, time
from google.cloud import storage
step = "I1201 05:00:03.000000 1 peft_trainer.py:736] Train step {} training loss: 0.1"
for n in range(1, 12):
    print(step.format(n), flush=True)
bucket, _, prefix = os.environ["DRILL_ACTOR"][len("gs://"):].partition("/")
for name in ("10/model_params/.zarray", "10/commit_success.txt"):
    storage.Client().bucket(bucket).blob(prefix + name).upload_from_string(b"x")
print(step.format(12), flush=True)
time.sleep(float(os.environ["STAND_IN_SECONDS"]))
"""


@pytest.mark.parametrize(
    ("drill", "resumes", "status"),
    [("true", False, DRILL_EXIT), ("true", True, 0), ("false", False, 0)],
    ids=["fresh", "resumed", "off"],
)
@pytest.mark.slow
def test_the_restart_drill_ends_a_fresh_attempt_once_after_its_first_checkpoint(tmp_path, gcs, drill, resumes, status):
    """With tpu-rl:workflow.restartDrill, a fresh attempt is ended once the run's first checkpoint is committed, the
    side file says so at once (`make report` reads it) and the script exits DRILL_EXIT, which the JobSet restarts
    without counting (test_failure_policy.py); an attempt that resumes (the drill's own restart, a retry) never
    repeats it, and without the key nothing happens."""
    objs = objects("prod", "tpu-rl:training.optimizer=adamw")
    actor = f"{PROD_BUCKET}/gemma4-26b/train/{step_id(objs['train'])}/rl/checkpoints/actor/"
    if resumes:
        put(gcs, actor, "5/commit_success.txt", "5/model_params/.zarray")
    started = time.monotonic()
    env = {DRILL_ENV: drill, "DRILL_ACTOR": actor, "STAND_IN_SECONDS": "60" if status else "3"}
    done, logs = run_training(tmp_path, gcs, DRILLED, **env)
    assert done.returncode == status, done.stdout[-3000:] + done.stderr[-3000:]
    assert time.monotonic() - started < 45, "ended by the drill, not by the stand-in's minute"
    (evals,) = [text for name, text in logs.items() if name.startswith("evals-")]
    (log,) = [text for name, text in logs.items() if name.startswith("train-")]
    line = restart_drill.drill_line(10)
    if status:
        assert line in evals and line in log and f"exiting {DRILL_EXIT} so the JobSet restarts it once" in done.stderr
    else:
        assert restart_drill.SAYS not in evals and restart_drill.SAYS not in log and "Train step 12" in log
    armed = "tpu-rl: the restart drill is on: this fresh attempt ends once after the run's first committed checkpoint"
    assert (armed in log) == (drill == "true" and not resumes)


@pytest.mark.parametrize("drill", ["true", "false"])
@pytest.mark.slow
def test_train_rls_own_77_is_not_the_drill_and_fails_the_run(tmp_path, gcs, drill):
    """Only the drill's own end (its marker) is the drill: a train_rl that itself exits 77, drill on or off, makes the
    script exit 1, which the JobSet's rules fail; a 77 passed on would be restarted without bound, never counted."""
    objs = objects("prod", "tpu-rl:training.optimizer=adamw")
    exits = (
        'print("I1201 05:00:03.000000 1 peft_trainer.py:736] Train step 1 training loss: 0.1")\nraise SystemExit(77)\n'
    )
    done, logs = run_training(tmp_path, gcs, exits, **{DRILL_ENV: drill})
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert "train_rl itself exited 77, a code the training script keeps for its own verdicts" in done.stderr
    assert head_exit(objs["train"], done.returncode, 0) == ("failed", "PodFailurePolicy")
    assert head_exit(objs["train"], DRILL_EXIT, 0) == ("restarted", 0), "what a 77 passed on would have done"
    assert any(name.startswith("train-") for name in logs)


# Gemma 4's turn markers (MaxText 0.2.4 multimodal/processor_gemma4.py:97; tunix c4ec573
# rl/agentic/parser/chat_template_parser/parser.py Gemma4ChatTemplateParser; vLLM's gemma4 chat template):
# a user turn is "<|turn>user\n...<turn|>\n", the generation prompt "<|turn>model\n".
GEMMA4_TURN, GEMMA4_END = "<|turn>", "<turn|>"
GEMMA3_MARKERS = ("<start_of_turn>", "<end_of_turn>")


def gemma4_prompt(user_content: str) -> str:
    """What the tokenizer's chat template makes of one user message with add_generation_prompt=True
    (MaxText utils_rl.py 765-769, process_data)."""
    return f"<bos>{GEMMA4_TURN}user\n{user_content.strip()}{GEMMA4_END}\n{GEMMA4_TURN}model\n"


@pytest.mark.parametrize("dataset", ["openmathinstruct2", "gsm8k"])
def test_each_dataset_prompt_has_exactly_one_turn_marker_per_turn_for_gemma4(dataset):
    """MaxText formats the data template (utils_rl.py 648-667, format_maxtext_messages) and then wraps it in
    the tokenizer's chat template: a template with turn markers of its own would nest them."""
    from core.knobs import DATASETS

    template = json.loads(shared_path(PINNED, *DATASETS[dataset].template.split("/")[1:]).read_text())
    system = template["SYSTEM_PROMPT"].format(
        reasoning_start_token="<reasoning>",
        reasoning_end_token="</reasoning>",
        solution_start_token="<answer>",
        solution_end_token="</answer>",
    )
    content = template["TEMPLATE"].format(system_prompt=system, question="What is 12 * 7?")
    prompt = gemma4_prompt(content)
    assert prompt.count(GEMMA4_TURN) == 2 and prompt.count(GEMMA4_END) == 1, "one user turn, one model turn"
    assert not any(marker in prompt for marker in GEMMA3_MARKERS), "no Gemma 3 markers inside Gemma 4's"
    assert "What is 12 * 7?" in prompt and "<answer>" in prompt


def test_the_gsm8k_template_would_nest_turn_markers():
    """Why neither choice uses gsm8k_rl.json: its TEMPLATE hard-codes Gemma 3's markers."""
    template = json.loads(shared_path(PINNED, "examples", "chat_templates", "gsm8k_rl.json").read_text())
    assert all(marker in template["TEMPLATE"] for marker in GEMMA3_MARKERS)


HUB_FILES = {
    "config.json": b'{"architectures": ["Gemma4ForConditionalGeneration"], "model_type": "gemma4"}',
    "tokenizer.json": b'{"version": "1.0"}' * 1000,
    "model-00001-of-00002.safetensors": b"\x08\x00\x00\x00\x00\x00\x00\x00{}      " * 100,
    "model-00002-of-00002.safetensors": b"\x08\x00\x00\x00\x00\x00\x00\x00{}      " * 200,
    "model.safetensors.index.json": b'{"metadata": {}, "weight_map": {}}',
}
"""The base repository the conversions below fetch (``tests.fake_hub.REPO`` at ``COMMIT``)."""


@pytest.mark.slow
def test_the_conversion_takes_each_hub_byte_once_a_restart_and_a_rerun_none(tmp_path, gcs):
    """The conversion's Hub reads, as the pod runs them: its script in bash, its programs for real (``SHIM_RUN_C``;
    ``to_maxtext`` is the shim, handed the local folder) against the loopback Hub, which counts the bytes it sends,
    and fake-gcs-server. The first attempt fetches each file once; a restart of the same step and a new conversion
    of the same commit (a re-run: another step, another output) run with no Hub at all."""
    from tests.conftest import SENTINEL_TOKEN
    from tests.fake_hub import FakeHub
    from tests.loopback import serve
    from workloads.specs.commands import CONVERT_BASE_DIR

    gcs.create_bucket(PROD_BUCKET.removeprefix("gs://"))
    base = {
        "SHIM_RUN_C": "1",
        "SHIM_BASE_COMMIT": "",  # base_snapshot.py runs for real
        "STORAGE_EMULATOR_HOST": os.environ["STORAGE_EMULATOR_HOST"],
        "HF_TOKEN": SENTINEL_TOKEN,
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "NO_GCE_CHECK": "True",
        "NO_PROXY": "127.0.0.1,localhost",
    }

    def convert(obj: dict, attempt: str, hub: str) -> list[list[str]]:
        local = tmp_path / attempt / "base-model"
        env = {**base, "HF_ENDPOINT": hub, "HF_HOME": str(tmp_path / attempt / "hf-home")}
        script = scripts_of(obj)["data"][RUN_SCRIPT].replace(CONVERT_BASE_DIR, str(local))
        calls = run_in_bash(obj, tmp_path / attempt, env, script=script)
        (maxtext,) = [call for call in calls if call[:2] == ["-m", "maxtext.checkpoint_conversion.to_maxtext"]]
        assert f"--hf_model_path={local}" in maxtext and f"--revision={COMMIT}" in maxtext
        assert {p.name: p.read_bytes() for p in local.iterdir() if p.is_file()} == HUB_FILES, "what to_maxtext reads"
        return calls

    first = objects("prod")["convert"]
    served = FakeHub.serving(HUB_FILES)
    for attempt in ("first", "restart", "rerun"):
        (tmp_path / attempt).mkdir()
    with serve(served) as hub:
        convert(first, "first", hub)
    assert sum(served.sent) == sum(len(data) for data in HUB_FILES.values()), "each byte of the commit once"
    closed = "http://127.0.0.1:9"  # any call to the Hub fails the step
    convert(first, "restart", closed)
    rerun = objects("prod", f"tpu-rl:model.revision={COMMIT}")["convert"]
    assert step_id(rerun) != step_id(first)
    convert(rerun, "rerun", closed)


@pytest.mark.slow
def test_a_training_restart_reads_the_base_and_the_dataset_with_no_hub(tmp_path, gcs):
    """Training's Hub reads, as the pod runs them: its script in bash with ``base_snapshot.py`` for real (the rest
    shimmed) against the loopback Hub, which counts what it sends, and fake-gcs-server. The first attempt stages the
    dataset's matching files once (the base's files come from the conversion's output, never the Hub); a restart of
    the same step stages nothing and runs with no Hub at all; a re-run (another learning rate: another training
    step, another output) takes the dataset from the stack's dataset cache, asking the Hub which commit ``main``
    names and for no file; one pinned to that commit asks the Hub nothing at all."""
    from tests.conftest import SENTINEL_TOKEN
    from tests.fake_hub_datasets import DATASET_FILES, DatasetHub
    from tests.loopback import serve

    objs = objects("prod", "tpu-rl:training.optimizer=adamw")
    train = objs["train"]
    gcs.create_bucket(PROD_BUCKET.removeprefix("gs://"))
    convert_out = f"{PROD_BUCKET}/gemma4-26b/convert/{step_id(objs['convert'])}/"
    put(gcs, convert_out, "base/config.json", data=b'{"model_type": "gemma4"}')
    record = {"repo": "google/gemma-4-26b-a4b-it", "revision": "main", "commit": COMMIT, "files": ["config.json"]}
    put(gcs, convert_out, "source.json", data=json.dumps(record).encode())
    train_out = f"{PROD_BUCKET}/gemma4-26b/train/{step_id(train)}/"
    env = {
        "SHIM_BASE_COMMIT": "",
        "SHIM_RUN_BASE": "1",
        "STORAGE_EMULATOR_HOST": os.environ["STORAGE_EMULATOR_HOST"],
        "HF_TOKEN": SENTINEL_TOKEN,
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "NO_GCE_CHECK": "True",
        "NO_PROXY": "127.0.0.1,localhost",
        "TMPDIR": str(tmp_path),
        "TPU_RL_RETRY_WAITS": "0,0",  # a call to the closed Hub fails at once, not after two minutes of tries
    }

    def attempt(name: str, hub: str, obj: dict = train) -> list[list[str]]:
        (tmp_path / name).mkdir()
        script = container_script(obj).replace(TRAIN_BASE_DIR, str(tmp_path / name / "base"))
        calls = run_in_bash(
            obj, tmp_path / name, {**env, "HF_ENDPOINT": hub, "HF_HOME": str(tmp_path / name)}, script=script
        )
        assert (tmp_path / name / "base" / "config.json").exists(), "the base's files, from the conversion's output"
        assert f"tpu-rl: the dataset nvidia/OpenMathInstruct-2 at commit {COMMIT}" in last_run().stdout
        assert "tpu-rl: starting train_rl" in last_run().stdout
        return calls

    served = DatasetHub.serving_dataset()
    with serve(served) as hub:
        attempt("first", hub)
    staged = {n: d for n, d in DATASET_FILES.items() if n.startswith("data/train_1M-")}
    assert sum(served.sent) == sum(len(d) for d in staged.values()), "the matching files, once"
    prefix = train_out.split("/", 3)[3] + "dataset/"
    found = {
        b.name.removeprefix(prefix): b.download_as_bytes()
        for b in gcs.list_blobs(train_out.split("/")[2], prefix=prefix)
    }
    assert {n: d for n, d in found.items() if n != "dataset.json"} == staged
    calls = attempt("restart", "http://127.0.0.1:9")  # any call to the Hub fails the attempt before train_rl
    (started,) = [c for c in calls if c[:2] == ["-m", TRAIN_RL]]
    assert f"hf_train_files={train_out}dataset/data/train_1M-*.parquet" in started, "train_rl reads the staged copy"
    rerun = objects("prod", "tpu-rl:training.optimizer=adamw", "tpu-rl:training.learningRate=2e-06")["train"]
    assert step_id(rerun) != step_id(train)
    again = DatasetHub.serving_dataset()
    with serve(again) as hub:
        calls = attempt("rerun", hub, rerun)
    assert again.sent == [], "no file from the Hub: the dataset cache holds the commit main names"
    rerun_out = f"{PROD_BUCKET}/gemma4-26b/train/{step_id(rerun)}/"
    (started,) = [c for c in calls if c[:2] == ["-m", TRAIN_RL]]
    assert f"hf_train_files={rerun_out}dataset/data/train_1M-*.parquet" in started, "the re-run's own copy"
    copied = {b.name for b in gcs.list_blobs(rerun_out.split("/")[2], prefix=rerun_out.split("/", 3)[3] + "dataset/")}
    assert {n.rsplit("/", 1)[1] for n in copied} == {n.rsplit("/", 1)[1] for n in staged} | {"dataset.json"}
    pinned = objects("prod", "tpu-rl:training.optimizer=adamw", f"tpu-rl:training.datasetRevision={COMMIT}")["train"]
    calls = attempt("pinned", "http://127.0.0.1:9", pinned)  # a re-run pinned to the cached commit: no Hub at all
    assert any(c[:2] == ["-m", TRAIN_RL] for c in calls)
