"""Ends a training attempt that stopped making progress (run in the MaxText image beside train_rl as
``python3 -c`` of this file's text; standard library only).

    python3 stall_watchdog.py PID LOG SECONDS MARKER

Progress is a new byte in train_rl's log (it logs every weight sync, evaluation item and checkpoint: see the
docs/operations.md "What happens when..."). When the log has not grown for ``SECONDS`` while train_rl (``PID``)
runs, the
watchdog writes ``MARKER`` (why, one line), appends that line to the log, sends train_rl SIGTERM and, if it
is still there ``KILL_AFTER`` seconds later, SIGKILL. The training script then exits ``STALLED_EXIT``
(``train_exit.py``). It exits by itself once train_rl is gone.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time

KILL_AFTER = 30
"""train_rl has no SIGTERM handler (it dies at once); SIGKILL is for a process stuck in the kernel."""


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


def size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return -1


def interval(seconds: float) -> float:
    """How often the log is looked at: a twentieth of the bound, between 0.05 s and a minute."""
    return min(60.0, max(0.05, seconds / 20))


def stalled_for(seconds: float) -> str:
    minutes, rest = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    text = f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{rest:02d}s" if minutes else f"{rest}s"
    return f"stalled: no new line in train_rl's log for {text} (tpu-rl:workflow.stallTimeout)"


def watch(pid: int, log: str, seconds: float, marker: str, clock=time.monotonic, sleep=time.sleep) -> bool:
    """Watch until train_rl is gone; True when it had to be stopped."""
    last, since = size(log), clock()
    while alive(pid):
        sleep(interval(seconds))
        now, current = clock(), size(log)
        if current != last:
            last, since = current, now
            continue
        if now - since < seconds:
            continue
        line = stalled_for(seconds)
        with open(marker, "w", encoding="utf-8") as handle:
            handle.write(line + "\n")
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(f"tpu-rl: {line}; stopping it\n")
        os.kill(pid, signal.SIGTERM)
        deadline = clock() + KILL_AFTER
        while alive(pid) and clock() < deadline:
            sleep(0.5)
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
        return True
    return False


if __name__ == "__main__":
    pid, log, seconds, marker = sys.argv[1:]
    with contextlib.suppress(ProcessLookupError):  # train_rl ended between the check and the signal
        watch(int(pid), log, float(seconds), marker)
