"""A fake clock for the container's watchers of a live process (the stall watchdog, the restart drill): their looks
take no wall time, and a process they signal still gets the real time to act on the signal."""

from __future__ import annotations

import os
import time

_KILL = os.kill


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (not a zombie), read as the watchers read it."""
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            return handle.read().rpartition(")")[2].split()[:1] != ["Z"]
    except ProcessLookupError:
        return False
    except OSError:
        return True


class ProcessClock:
    """``clock()`` is the fake time; ``sleep`` moves it on at once. Installed as the watcher's ``os.kill``
    (``kill``), it records each signal; the next sleep then waits, for real, until the signalled process has ended
    or ``settle`` seconds have passed: a process that dies of the signal is gone before the next look, as it would
    be between looks seconds apart, and no look waits when nothing was sent."""

    def __init__(self, settle: float = 5.0) -> None:
        self.now = 0.0
        self.settle = settle
        self.signals: list[tuple[int, float]] = []
        self._signalled: int | None = None

    def __call__(self) -> float:
        return self.now

    def kill(self, pid: int, sig: int) -> None:
        if sig:
            self.signals.append((sig, self.now))
            self._signalled = pid
        _KILL(pid, sig)

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        pid, self._signalled = self._signalled, None
        if pid is None:
            return
        end = time.monotonic() + self.settle
        while alive(pid) and time.monotonic() < end:
            time.sleep(0.0005)
