"""The restart drill (``tpu-rl:workflow.restartDrill``): ends a fresh training attempt once, after the run's first
checkpoint is committed, so that the JobSet restarts it on the same nodes and `make report` measures the restart's
start-up (docs/restart-drill.md). Run in the MaxText image beside train_rl as ``python3 restart_drill.py``; standard
library only.

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
import signal
import subprocess
import sys
import time
from collections.abc import Callable

SAYS = "tpu-rl: restart drill: "
"""How the drill's line begins in the attempt's log and side file (``workloads.observe.startup`` reads it there)."""
LOOK_SECONDS = 2.0
"""How often the log is looked at (a local file: the checkpoint scan runs only on a new training step)."""
KILL_AFTER = 30
"""train_rl has no SIGTERM handler (it dies at once); SIGKILL is for a process stuck in the kernel."""
SCAN_SECONDS = 300
"""The most one checkpoint scan may take (a few GCS requests: ``checkpoint_scan.py``)."""
READ_BYTES = 8 << 20
LINE_BYTES = 4096
TRAIN_STEP = re.compile(r"\] Train step (?P<step>[0-9]{1,12}) training loss")
"""tunix's line for each training step (the one ``stall_watchdog.py`` and ``train_exit.py`` read)."""


def alive(pid: int) -> bool:
    """Whether ``pid`` runs: it exists and is not a zombie (an exited child its parent has not reaped yet)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            return handle.read().rpartition(")")[2].split()[:1] != ["Z"]
    except OSError:
        return True  # no /proc: the signal answered


class Steps:
    """Reads a growing log from where it left off, and says whether a new training step came."""

    def __init__(self, path: str) -> None:
        self.path, self.offset, self.partial, self.step = path, 0, b"", -1

    def new(self) -> bool:
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                chunk = handle.read(READ_BYTES)
        except OSError:
            return False
        self.offset += len(chunk)
        *lines, rest = (self.partial + chunk).split(b"\n")
        self.partial = rest[:LINE_BYTES]
        moved = False
        for line in lines:
            match = TRAIN_STEP.search(line[:LINE_BYTES].decode("utf-8", errors="replace"))
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
        os.kill(pid, signal.SIGTERM)
        deadline = clock() + KILL_AFTER
        while alive(pid) and clock() < deadline:
            sleep(0.5)
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
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
