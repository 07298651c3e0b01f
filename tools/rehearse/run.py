"""One step's rehearsal: its rendered script through bash in its sandbox, with the rehearsal's ``python3``.

The rehearsal's ``python3`` (``SHIM``) is the venv's interpreter, except where a call would need the slice, the
cluster or what the rehearsal has not: ``python3 -m maxtext.<module>`` goes to ``inside/stand_in.py`` (the converters
on the small model; train_rl up to its first device call); ``slice_state.py`` (the wait for the slice's workers, read
from the cluster's API) is not run; every other program (the evaluation's and the publication's included) runs whole.
Every call is written down, so the step's line says what ran. Training's script runs to its launcher line
(``sandbox.launcher_cut``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tools.rehearse import sandbox
from tools.rehearse.sandbox import StepPod

INSIDE = Path(__file__).parent / "inside"
SHIM = """#!/bin/bash
# The rehearsal's python3 (tools/rehearse/run.py): the venv's interpreter, but for what needs the slice or cluster.
if [ "$1" = -m ]; then echo "-m $2" >> "$REHEARSE_CALLS"; else echo "${1##*/}" >> "$REHEARSE_CALLS"; fi
case "$1" in
  -m) case "$2" in maxtext.*) PYTHONPATH="$REHEARSE_PYTHONPATH" \\
        exec "$REHEARSE_PYTHON" "$REHEARSE_STAND_IN" "$REHEARSE_SMALL" "${@:2}" ;; esac ;;
  */slice_state.py) echo "tpu-rl rehearse: not run: slice_state.py $2 (the slice's workers, from the cluster's API)"
    exit 0 ;;
esac
PYTHONPATH="$REHEARSE_PYTHONPATH" exec "$REHEARSE_PYTHON" "$@"  # never inherited by the next call
"""
STEP_SECONDS = 1200
SAYS = "tpu-rl rehearse: "


@dataclass(frozen=True)
class Outcome:
    step: str
    code: int
    seconds: float
    said: tuple[str, ...]
    """The stand-in's lines (``tpu-rl rehearse: ...``), without the prefix."""
    calls: tuple[str, ...]
    """The programs run, in order (``launch.py``, ``-m maxtext...``)."""
    log: Path
    last: str
    """The log's last line that says something (a failure's)."""
    closing: str = ""
    """The step's own program's last line (``tpu-rl <step>: ...``)."""


def lay_out(pod: StepPod, root: Path, package: Path) -> Path:
    """The step's sandbox under ``root``: its ConfigMap's files where the container mounts them (paths mapped), its
    volumes and the image's folders, MaxText at ``/deps/src/maxtext`` (the wheel's files, fresh: training patches one);
    the script to run."""
    shutil.rmtree(root, ignore_errors=True)
    paths = sandbox.container_paths(pod)
    for path in paths:
        (root / path.lstrip("/")).mkdir(parents=True, exist_ok=True)
    (root / "var/run/secrets/kubernetes.io/serviceaccount").mkdir(parents=True, exist_ok=True)
    (root / "home").mkdir()
    shutil.copytree(package, root / "deps/src/maxtext")
    for mount, files in {pod.config_mount: pod.files, **pod.other_config}.items():
        for name, text in files.items():
            (root / mount.lstrip("/") / name).write_text(sandbox.mapped(text, root, paths))
    script = sandbox.mapped(pod.script, root, paths)
    script = sandbox.launcher_cut(script)
    run = root / "rehearsed.sh"
    run.write_text(script)
    shim = root / "bin" / "python3"
    shim.parent.mkdir()
    shim.write_text(SHIM)
    shim.chmod(0o755)
    return run


def run_step(pod: StepPod, root: Path, package: Path, env: dict[str, str], log: Path) -> Outcome:
    """Lay out the step and run its script, bounded (``STEP_SECONDS``)."""
    script = lay_out(pod, root, package)
    paths = sandbox.container_paths(pod)
    calls = root / "calls.txt"
    settings = {name: sandbox.mapped(value, root, paths) for name, value in env.items()}
    settings |= {
        "PATH": f"{root / 'bin'}:/usr/bin:/bin",
        "HOME": str(root / "home"),
        "TMPDIR": str(root / "tmp"),
        "PYTHONPATH": str(root / "deps/src"),
        "REHEARSE_PYTHONPATH": str(root / "deps/src"),  # the image's, which the shim restores on every call
        "MAXTEXT_PKG_DIR": str(root / "deps/src/maxtext"),
        "REHEARSE_CALLS": str(calls),
        "REHEARSE_STAND_IN": str(INSIDE / "stand_in.py"),
    }
    started = time.monotonic()
    with log.open("w") as out:
        try:
            done = subprocess.run(
                ["bash", str(script)],
                env=settings,
                cwd=root / "deps",
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=STEP_SECONDS,
                check=False,
            )
            code = done.returncode
        except subprocess.TimeoutExpired:
            code = 124
            out.write(f"\n{SAYS}failed: the step ran over {STEP_SECONDS} s\n")
    seconds = time.monotonic() - started
    text = log.read_text(errors="replace")
    said = tuple(line.removeprefix(SAYS) for line in text.splitlines() if line.startswith(SAYS))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    failed = [s for s in said if s.startswith("failed: ")]
    last = failed[-1] if failed else (lines[-1] if lines else "")
    ran = tuple(calls.read_text().splitlines()) if calls.exists() else ()
    own = [line for line in lines if line.startswith("tpu-rl ") and not line.startswith(SAYS)]
    return Outcome(pod.step, code, seconds, said, ran, log, last, own[-1] if own else "")


def python_env(python: Path, small: Path) -> dict[str, str]:
    """What the shim needs: the venv's interpreter and the small model's sizes."""
    return {"REHEARSE_PYTHON": str(python), "REHEARSE_SMALL": str(small), "LANG": os.environ.get("LANG", "C.UTF-8")}
