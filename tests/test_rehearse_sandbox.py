"""`make rehearse`'s reading of the plan (tools/rehearse/sandbox.py): each step's pod as the plan renders it, its
container paths moved under the sandbox and nothing else, training's script up to its launcher line, the cluster's
values given stand-ins; and which outputs a step reads that the rehearsal stands in for (the catalogue)."""

from __future__ import annotations

import copy

import pytest

from core.names import HF_SECRET
from core.step_config import LAUNCHER
from core.steps import STEPS
from tests.pure_plan import pure_plan
from tools.rehearse import sandbox
from tools.rehearse.rehearsal import stood_in

pytestmark = pytest.mark.pure


def pods(stack: str = "dev", *overrides: str) -> dict[str, sandbox.StepPod]:
    return {pod.step: pod for pod in sandbox.step_pods(pure_plan(stack, *overrides).kubernetes_objects())}


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_step_is_its_jobsets_script_container_with_its_configmap(stack):
    found = pods(stack, "tpu-rl:workflow.steps.evaluate=true", "tpu-rl:publish.repo=me/model")
    assert list(found) == ["convert", "train", "export", "evaluate", "publish"]
    for pod in found.values():
        assert pod.config_mount == "/tpu-rl" and pod.script == pod.files["run.sh"]
        assert pod.script.startswith("set -euo pipefail\n")
    assert "train.json" in found["train"].files and LAUNCHER in found["train"].files
    card = found["publish"].other_config
    assert list(card) == ["/card"], "the model card's ConfigMap too (the pure plan holds no card's text)"


def test_container_paths_move_under_the_sandbox_once_and_nothing_else_does(tmp_path):
    paths = ("/tpu-rl", "/scratch", "/tmp", "/deps/src")
    text = (
        "python3 /tpu-rl/x.py gs://b/tmp/x /tmp/tpu-rl-train.log '/tmp/a' x=/scratch/base https://h/scratch/y "
        "/tmpfoo /tmp-x /deps/src/maxtext /deps/srcx /tpu-rl"
    )
    root = tmp_path / "tmp" / "tpu-rl"  # a sandbox whose own path holds container paths: mapped once, not again
    assert sandbox.mapped(text, root, paths) == (
        f"python3 {root}/tpu-rl/x.py gs://b/tmp/x {root}/tmp/tpu-rl-train.log '{root}/tmp/a' x={root}/scratch/base "
        f"https://h/scratch/y /tmpfoo /tmp-x {root}/deps/src/maxtext /deps/srcx {root}/tpu-rl"
    )


def test_trainings_script_ends_at_its_launcher_line_and_others_run_whole():
    found = pods()
    train = found["train"].script.splitlines()
    cut = sandbox.launcher_cut(found["train"].script).splitlines()
    launcher = next(n for n, line in enumerate(train) if f"/{LAUNCHER}" in line)
    assert cut[: launcher + 1] == train[: launcher + 1], "the script as rendered, the launcher line included"
    assert cut[launcher + 1 :] == ["wait $!; status=$?", "cat /tmp/tpu-rl-train.log", 'exit "$status"']
    for step in ("convert", "export"):
        assert sandbox.launcher_cut(found[step].script) == found[step].script


def test_the_clusters_values_get_stand_ins_and_the_rehearsals_settings_win():
    train = pods()["train"]
    env = sandbox.environment(train, {HF_SECRET: "hf_standIN"}, {"JAX_PLATFORMS": "cpu"})
    assert env["HF_TOKEN"] == "hf_standIN", "a Secret's value is its stand-in"
    assert env["VLLM_HOST_IP"] == "127.0.0.1", "the pod's IP"
    assert env["TPU_RL_JOBSET_UID"] == "rehearse", "any other field"
    assert dict(train.env)["JAX_PLATFORMS"]["value"] == "proxy,cpu" and env["JAX_PLATFORMS"] == "cpu"
    assert env["TPU_RL_STALL_SECONDS"] == dict(train.env)["TPU_RL_STALL_SECONDS"]["value"]


def test_what_a_step_reads_from_the_slice_is_stood_in_by_what_the_slice_read():
    """Training runs on the slice, so its checkpoints are stood in for the export by the conversion's, which training
    itself starts from; no other step reads a step on the slice."""
    found = {step: stood_in(step) for step in STEPS}
    assert found == {"convert": [], "train": [], "export": [("train", "convert")], "evaluate": [], "publish": []}


def test_a_jobset_of_no_step_is_refused():
    objects = copy.deepcopy(pure_plan("dev").kubernetes_objects())
    jobset = next(o for o in objects if o.get("kind") == "JobSet")
    jobset["metadata"]["labels"][sandbox.COMPONENT] = "warmup"
    with pytest.raises(sandbox.RenderedStepError, match="names no step of the catalogue"):
        sandbox.step_pods(objects)


def test_the_rehearsals_python3_runs_every_call_on_the_images_path(tmp_path):
    """Every call gets the image's PYTHONPATH, whatever its caller's environment held (training's launcher starts
    MaxText with its own), and every call is written down in order."""
    import subprocess

    from tools.rehearse.run import SHIM

    shim, python = tmp_path / "python3", tmp_path / "python"
    shim.write_text(SHIM)
    python.write_text('#!/bin/sh\necho "$PYTHONPATH"\n')
    for path in (shim, python):
        path.chmod(0o755)
    env = {
        "PATH": "/usr/bin:/bin",
        "REHEARSE_PYTHON": str(python),
        "REHEARSE_PYTHONPATH": "/deps/src",
        "REHEARSE_CALLS": str(tmp_path / "calls"),
        "PYTHONPATH": "/elsewhere:/deps/src",  # what the launcher's own environment holds
    }

    def path_of(*argv: str) -> str:
        return subprocess.run([str(shim), *argv], env=env, capture_output=True, text=True, check=True).stdout.strip()

    assert path_of("/tpu-rl/launch.py") == "/deps/src"
    assert path_of("-m", "maxtext.trainers.post_train.rl.train_rl").splitlines()[-1] == "/deps/src"
    assert (tmp_path / "calls").read_text().splitlines() == ["launch.py", "-m maxtext.trainers.post_train.rl.train_rl"]


def test_a_steps_line_says_what_it_wrote_to_the_hub_and_what_its_program_said_last(tmp_path):
    """Only the branches a step made or moved are named, with what they then hold; a program's own closing line is
    said when no stand-in spoke for the step."""
    from tools.rehearse.hub_repos import Blob, Hub, StandIns, filled_repo, new_repo
    from tools.rehearse.rehearsal import describe, heads, written
    from tools.rehearse.run import Outcome

    hub = Hub(StandIns("r", "w"))
    hub.add(filled_repo("google/base", {"config.json": b"{}"}))
    before = heads(hub)
    hub.add(new_repo("org/model", private=True))
    hub.repos["org/model"].commit("run-1", "tpu-rl", {"model.safetensors": Blob(b"w" * 2_000_000, lfs=True)})
    lines = written(hub, before)
    assert [line.split(" is commit ")[0] for line in lines] == [
        "the Hub's org/model (private) @main",
        "the Hub's org/model (private) @run-1",
    ]
    assert lines[1].endswith(": 1 files, 2.0 MB, 1 in LFS (model.safetensors)")
    outcome = Outcome("publish", 0, 7.0, (), ("publish_hub.py",), tmp_path / "log", "", "tpu-rl publish: done")
    assert describe(outcome, lines[1:]) == (
        f"publish: passed in 7 s; ran publish_hub.py; it said: tpu-rl publish: done; {lines[1]}"
    )
