"""What training's watchers share, a file of the training step's ConfigMap only (the programs that import it, the
stall watchdog, the restart drill and the slice's wait, run in training alone; ``workloads.specs.commands.
program_imports`` ships it beside them): a change here renames training, and no other step. Standard library only,
as the image runs it.

A process watched beside train_rl (the stall watchdog, the restart drill): whether it runs (``alive``), its end as a
disruption ends it (``stop``), its growing log read in bounded looks (``LogFollower``), how often a bound is looked at
(``interval``) and a span of it as a person reads it (``duration``).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

KILL_AFTER = 30
"""Seconds between SIGTERM and SIGKILL (``stop``): train_rl has no SIGTERM handler (it dies at once); SIGKILL is for a
process stuck in the kernel."""
STOP_LOOK_SECONDS = 0.5
"""How often a stopped process is looked at until it is gone."""


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


def stop(pid: int, clock: Callable[[], float], sleep: Callable[[float], None]) -> None:
    """End ``pid`` as a disruption does: SIGTERM, then SIGKILL if it is still there ``KILL_AFTER`` seconds later."""
    os.kill(pid, signal.SIGTERM)
    deadline = clock() + KILL_AFTER
    while alive(pid) and clock() < deadline:
        sleep(STOP_LOOK_SECONDS)
    if alive(pid):
        os.kill(pid, signal.SIGKILL)


READ_BYTES = 8 << 20
"""How much of a log one look reads at most (the rest is read by the next looks)."""
LINE_BYTES = 4096
"""How much of a line is kept (what a watcher looks for is near its start)."""


class LogFollower:
    """A growing log (train_rl's) read from where the last look ended, at most ``READ_BYTES`` a look: a log of any
    size, with binary bytes or a line without its end yet, is read in constant memory."""

    def __init__(self, path: str) -> None:
        self.path, self.offset, self.partial = path, 0, b""

    def lines(self) -> list[str]:
        """The log's new complete lines, each its first ``LINE_BYTES`` decoded leniently (none when the log cannot be
        read); a log cut shorter than what was read is read again from its start."""
        try:
            with open(self.path, "rb") as handle:
                if os.fstat(handle.fileno()).st_size < self.offset:
                    self.offset, self.partial = 0, b""
                handle.seek(self.offset)
                chunk = handle.read(READ_BYTES)
        except OSError:
            return []
        self.offset += len(chunk)
        *lines, rest = (self.partial + chunk).split(b"\n")
        self.partial = rest[:LINE_BYTES]
        return [line[:LINE_BYTES].decode("utf-8", errors="replace") for line in lines]


def interval(seconds: float, looks: int, longest: float) -> float:
    """How long a watcher sleeps between looks within a bound of ``seconds``: the bound over ``looks``, at most
    ``longest`` and at least 0.05 s."""
    return min(longest, max(0.05, seconds / looks))


def duration(seconds: float) -> str:
    """``seconds`` as a person reads a span: ``2h05m``, ``4m07s``, ``9s``."""
    minutes, rest = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{rest:02d}s" if minutes else f"{rest}s"
