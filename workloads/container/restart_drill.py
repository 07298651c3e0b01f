"""The restart drill (``tpu-rl:workflow.restartDrill``): ends a fresh training attempt once, after the run's first
checkpoint is committed, so that the JobSet restarts it on the same nodes and `make report` measures the restart's
start-up (docs/restart-drill.md). Run in the MaxText image beside train_rl as ``python3 /tpu-rl/restart_drill.py``, a
file of the training step's ConfigMap beside ``tpu_rl_watch.py``, which it imports; standard library only.

    python3 restart_drill.py PID LOG FINAL_STEP MARKER ACTOR_URI

The training script starts it only for an attempt that starts fresh (its checkpoint scan found no complete
checkpoint), so an attempt that resumes (the drill's own restart, a restart after a disruption, a retry by `pulumi
up`) never repeats it. It reads train_rl's log (``LOG``) from where its last look ended; on each new training step
(tunix's ``Train step N training loss``, ``PeftTrainer._log_metrics``) it asks ``checkpoint_scan.py``, the file beside
it, for the newest complete checkpoint under ``ACTOR_URI``: the step tunix would restore, committed (orbax's
``commit_success.txt``). Once there is one below ``FINAL_STEP`` (a checkpoint of the last step means the run is about
to complete, with nothing left to restart for), it writes ``MARKER`` (why, one line), appends that line to the log
(the training script copies it to the side file at once: ``SAYS``), sends train_rl SIGTERM and, if it is still there
``KILL_AFTER`` seconds later, SIGKILL: what a disruption does, with the checkpoint just committed and the next one
``checkpointPeriod`` steps away. The training script then exits ``DRILL_EXIT`` as ``train_exit.py`` judges (when
nothing else explains the end), which the JobSet restarts without counting it against ``maxRestarts``. It exits by
itself once train_rl is gone.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING or __package__:  # the repository's package (the tests)
    from workloads.container.tpu_rl_watch import LogFollower, alive, stop
else:  # python3 /tpu-rl/restart_drill.py: tpu_rl_watch.py is a file of the same ConfigMap, its folder on sys.path
    from tpu_rl_watch import LogFollower, alive, stop

SAYS = "tpu-rl: restart drill: "
"""How the drill's line begins in the attempt's log and side file (``workloads.observe.startup`` reads it there)."""
LOOK_SECONDS = 2.0
"""How often the log is looked at (a local file: the checkpoint scan runs only on a new training step)."""
SCAN_SECONDS = 300
"""The most one checkpoint scan may take (a few GCS requests: ``checkpoint_scan.py``)."""
TRAIN_STEP = re.compile(r"\] Train step (?P<step>[0-9]{1,12}) training loss")
"""tunix's line for each training step (the one ``stall_watchdog.py`` and ``train_exit.py`` read)."""


class Steps:
    """Follows a growing log (``LogFollower``), and says whether a new training step came."""

    def __init__(self, path: str) -> None:
        self.log, self.step = LogFollower(path), -1

    def new(self) -> bool:
        moved = False
        for line in self.log.lines():
            match = TRAIN_STEP.search(line)
            if match is not None and int(match["step"]) > self.step:
                self.step, moved = int(match["step"]), True
        return moved


def scan_with(program: str, root: str, timeout: float = SCAN_SECONDS) -> Callable[[], int | None]:
    """The newest complete checkpoint's step under ``root``, as ``checkpoint_scan.py`` (``program``) prints it
    (``<root><step>/model_params/``, exit 0); None when it finds none (exit 3) or cannot say now."""

    def scan() -> int | None:
        try:
            done = subprocess.run(
                [sys.executable, program, root], capture_output=True, text=True, timeout=timeout, check=False
            )
        except (OSError, subprocess.SubprocessError):
            return None
        lines = done.stdout.strip().splitlines()
        if done.returncode != 0 or not lines or not lines[-1].startswith(root):
            return None
        step = lines[-1][len(root) :].split("/", 1)[0]
        return int(step) if step.isdigit() and len(step) <= 12 else None

    return scan


def drill_line(step: int) -> str:
    return (
        f"{SAYS}checkpoint {step} is committed; ending this attempt once so that the JobSet restarts it on the same "
        "nodes (tpu-rl:workflow.restartDrill)"
    )


def watch(
    pid: int,
    log: str,
    final_step: int,
    marker: str,
    scan: Callable[[], int | None],
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """Watch until train_rl is gone; True when the drill ended it."""
    steps = Steps(log)
    while alive(pid):
        sleep(LOOK_SECONDS)
        if not steps.new():
            continue
        step = scan()
        if step is None:
            continue
        if step >= final_step:
            _append(log, f"tpu-rl: no restart drill: the first checkpoint, step {step}, is the run's last\n")
            return False
        line = drill_line(step)
        with open(marker, "w", encoding="utf-8") as handle:
            handle.write(line.removeprefix("tpu-rl: ") + "\n")
        _append(log, line + "\n")
        stop(pid, clock, sleep)
        return True
    return False


def _append(path: str, text: str) -> None:
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(text)


if __name__ == "__main__":
    pid, log, final_step, marker, root = sys.argv[1:]
    program = os.path.join(os.path.dirname(os.path.abspath(__file__)), "checkpoint_scan.py")
    with contextlib.suppress(ProcessLookupError):  # train_rl ended between the check and the signal
        watch(int(pid), log, int(final_step), marker, scan_with(program, root))
