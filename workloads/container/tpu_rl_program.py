"""What the programs of a step share: a file of every ConfigMap whose programs import it, beside them in its folder
(``workloads.specs.commands.program_imports``); standard library only, as the image runs it, and ``errors.py``
(``core/errors.py``, shipped beside it).

- How a run ends: ``RefusedError`` for what the program was given, which fails the same way on every try (exit
  ``REFUSED``: the step is not retried), ``FailedError`` for what failed outside it this time (exit 1: a later try,
  or the step's next run, may succeed); both in the project's one error tree (``core.errors``).
- A process watched beside train_rl (the stall watchdog, the restart drill): whether it runs (``alive``), its end as a
  disruption ends it (``stop``), its growing log read in bounded looks (``LogFollower``), how often a bound is looked
  at (``interval``) and a span of it as a person reads it (``duration``).
- A downloaded object's local file that takes at most the object's listed size (``CappedFile``).

The folder of the ConfigMap comes first on ``sys.path``, so a file named like a package of the image would hide that
package from every program of the folder: no package has a top-level module named ``tpu_rl_*``.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING or __package__:  # the repository's package (the tests)
    from core.errors import BadInputError, TpuRlError
else:  # python3 /tpu-rl/<program>.py: core's errors.py is a file of the same ConfigMap
    from errors import BadInputError, TpuRlError

REFUSED = 3
"""A refusal's exit status (``core.names.SETUP_FAILURE_EXIT``): the step fails at once and is not retried."""
FAILED = 1
"""A failure's exit status: the step fails, and the next `make up` runs it again."""


class RefusedError(BadInputError):
    """What the program was given fails the same way on every try (an argument, a record, an image, an answer no retry
    changes such as an API's 403): a program that ends on it exits ``REFUSED``."""

    exit_code = REFUSED


class FailedError(TpuRlError):
    """Something outside the program failed this time (the Hub, GCS, the API server, a model that does not load): a
    later try may succeed; a program that ends on it exits ``FAILED``."""


class ListingTooLongError(FailedError):
    """A GCS listing that did not end within its bound of pages (``checkpoint_scan.py`` ``MAX_PAGES``)."""


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


class CappedFile:
    """The local copy of one object, at most ``cap`` bytes (its listed size): a server that sends more stops the
    download (google-cloud-storage writes the body in chunks) with ``too_large`` instead of filling the disk. Its line
    names ``what`` when given."""

    def __init__(self, path: Path, cap: int, too_large: type[Exception], what: str = "") -> None:
        self.file, self.cap, self.too_large, self.written = path.open("wb"), cap, too_large, 0
        self.what = f"{what}: " if what else ""

    def write(self, chunk: bytes) -> int:
        self.written += len(chunk)
        if self.written > self.cap:
            raise self.too_large(f"{self.what}GCS sent more than its {self.cap} listed bytes")
        return self.file.write(chunk)

    def flush(self) -> None:
        self.file.flush()

    def close(self) -> None:
        self.file.close()
