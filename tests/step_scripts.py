"""The step scripts as their containers run them, for the tests that run them through a real bash: each step's
ConfigMap of scripts as the builders make it (``objects``, ``scripts_of``), written where the kubelet would mount it
with its container paths made the test's (``install``, ``local_paths``), and the ``python3`` shim that records each
call (``SHIM``)."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

from tests.lifecycle_walk import settings
from tests.shim_calls import LOG
from workloads.specs.commands import RUN_SCRIPT, SCRIPTS_DIR
from workloads.specs.step_specs import plan_workflow
from workloads.specs.train_script import (
    ACCOUNT_DIR,
    DRILL_MARKER,
    EVALS_LOG,
    SLICE_BASELINE,
    STALL_MARKER,
    TRAIN_LOG,
)
from workloads.workflow import INPUT_ANNOTATION

SHIM = f"""#!/bin/sh
case "$1" in */maxtext_check.py) exit 0;; esac
{LOG}
case "$1" in */launch.py) exec "{{python}}" "$@";; esac
case "$1" in */base_snapshot.py|*/stage_dataset.py)
  if [ -n "$SHIM_BASE_COMMIT" ]; then echo "$SHIM_BASE_COMMIT"; exit 0; fi
  if [ -n "$SHIM_RUN_BASE" ]; then exec "{{python}}" "$@"; fi;; esac
case "$1" in *.py)
  if [ -n "$SHIM_RUN_C" ]; then exec "{{python}}" "$@"; fi
  if [ -n "$SHIM_C_PRINTS" ]; then echo "$SHIM_C_PRINTS"; fi;;
esac
if [ "$1" = "-m" ] && [ -n "$SHIM_TRAIN_RL" ]; then exec "{{python}}" "$SHIM_TRAIN_RL"; fi
if [ -n "$SHIM_FAIL" ]; then exit "$SHIM_FAIL"; fi
"""


def local_paths(script: str, tmp_path: Path) -> str:
    """The training script with its log, side file, its stall and drill markers and the slice's baseline in
    ``tmp_path`` instead of /tmp, and its service account's files in ``tmp_path/account`` (the base's files are fetched
    by ``base_snapshot.py``, which prints a commit here and writes nothing)."""
    markers = ((STALL_MARKER, "stalled"), (DRILL_MARKER, "drilled"), (SLICE_BASELINE, "slice.json"))
    for path, name in ((TRAIN_LOG, "train.log"), (EVALS_LOG, "evals.txt"), (ACCOUNT_DIR, "account"), *markers):
        script = script.replace(path, str(tmp_path / name))
    return script


def install(step: dict | str, tmp_path: Path, script: str | None = None) -> Path:
    """The step's ConfigMap of scripts written to ``tmp_path/tpu-rl`` as the kubelet mounts it (or a bare
    ``script`` alone), its ``/tpu-rl`` and /tmp paths made ``tmp_path``'s (``local_paths``), and the ``python3``
    shim on ``tmp_path/bin``; the path of its ``run.sh``."""
    files = dict(scripts_of(step)["data"]) if isinstance(step, dict) else {RUN_SCRIPT: step}
    if script is not None:
        files[RUN_SCRIPT] = script
    folder = tmp_path / "tpu-rl"
    folder.mkdir(exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(local_paths(text, tmp_path).replace(f"{SCRIPTS_DIR}/", f"{folder}/"))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    shim = bin_dir / "python3"
    shim.write_text(SHIM.format(python=sys.executable, log=tmp_path / "calls.log"))
    shim.chmod(0o755)
    return folder / RUN_SCRIPT


_SCRIPTS: dict[str, dict] = {}
"""Each planned step's ConfigMap of scripts, by the step's name (``objects`` records them)."""


def objects(stack: str, *overrides: str) -> dict[str, dict]:
    """The step objects the builders make for an example stack (what the program registers:
    ``test_workflow`` and ``test_policy`` compare the two); each one's ConfigMap of scripts is ``scripts_of``."""
    found = {}
    for step in plan_workflow(settings(stack, list(overrides))).steps:
        manifest = copy.deepcopy(step.manifest)
        if step.input_uri:  # annotated by the program once the previous step's output is verified
            manifest["metadata"]["annotations"][INPUT_ANNOTATION] = step.input_uri
        found[step.step] = manifest
        _SCRIPTS[step.name] = copy.deepcopy(step.scripts)
    return found


def scripts_of(obj: dict) -> dict:
    """The ConfigMap of scripts of a step object from ``objects``."""
    return _SCRIPTS[obj["metadata"]["name"]]


def literal_env(obj: dict) -> dict[str, str]:
    """The training workload container's environment as the manifest sets it (literal values only)."""
    pod = obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    (workload,) = [c for c in pod["containers"] if c["name"] == "workload-container"]
    return {e["name"]: e["value"] for e in workload["env"] if "value" in e}


def step_id(obj: dict) -> str:
    return obj["metadata"]["labels"]["tpu-rl/step-id"]
