"""`make test`'s fast tier on the two cores: the test files cut in two halves of about equal time, each half one pytest
process. Against pytest-xdist's two workers a run saves some 10 CPU-seconds of about 95: no controller takes each
test's three reports over a channel, and no process imports the other half's test modules (nor hypothesis, nor the
Google clients' libraries, unless its half needs them).

The cut (``halves``) weighs each test file by its seconds in a recorded run (``tests/data/file-seconds.txt``;
``make test-split`` records it again); a file not recorded weighs the median. The files of a group
(``tests.file_groups``) stay together. The first half prints as it runs, the second once the first has ended, then
one line for both; the exit status is the first failing half's (pytest's codes), 0 when both pass. Both halves
are bounded together by ``TIMEOUT``; a Ctrl-C interrupts both and waits ``INTERRUPTED`` seconds for them to end (a
second Ctrl-C kills them), then the run exits 2. Each half runs in a session of its own, killed at the end with
whatever its tests left running.

``python -m tests.fast_tier [pytest options]``: the run `make test` makes. ``--record`` first: the same run, then
``tests/data/file-seconds.txt`` rewritten from what each file took in it (``tests.file_seconds``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Protocol

from tests.file_groups import unit
from tests.file_seconds import SECONDS_FILE

ROOT = Path(__file__).resolve().parent.parent
SECONDS = ROOT / "tests" / "data" / "file-seconds.txt"
TIMEOUT = 20 * 60
"""How long both halves may take together, in seconds: a hung test ends the run here, not CI's job limit."""
NO_TESTS = 5
"""pytest's exit status when a half collected no test (its files all deselected): not a failure."""
INTERRUPTED_STATUS = 2
"""pytest's exit status when interrupted (Ctrl-C), and the run's."""
INTERRUPTED = 30
"""How long the halves may take to end after a Ctrl-C, in seconds, before they are killed."""
HEADER = "# seconds per test file in a run of the fast tier (make test-split); tests/fast_tier.py cuts by them\n"


def test_files() -> list[str]:
    """The fast tier's test files, relative to the root (``testpaths``, ``python_files``)."""
    return sorted(path.relative_to(ROOT).as_posix() for path in (ROOT / "tests").glob("test_*.py"))


def recorded(text: str) -> dict[str, float]:
    """``<seconds> <file>`` lines (``#`` comments skipped) as file -> seconds, a file's lines added up."""
    seconds: dict[str, float] = {}
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            value, path = line.split(maxsplit=1)
            seconds[path] = seconds.get(path, 0.0) + float(value)
    return seconds


def halves(files: Sequence[str], seconds: dict[str, float]) -> tuple[list[str], list[str]]:
    """``files`` in two halves of about equal seconds: the units (a group's files, or one file), heaviest first,
    each to the half with fewer seconds so far (the longest-processing-time rule). A file with no recorded seconds
    weighs the median of those recorded."""
    default = statistics.median(seconds.values()) if seconds else 1.0
    units: dict[str, list[str]] = {}
    for path in files:
        units.setdefault(unit(path), []).append(path)

    def weight(name: str) -> float:
        return sum(seconds.get(path, default) for path in units[name])

    cut: tuple[list[str], list[str]] = ([], [])
    totals = [0.0, 0.0]
    for name in sorted(units, key=lambda name: (-weight(name), name)):
        lighter = 0 if totals[0] <= totals[1] else 1
        cut[lighter].extend(units[name])
        totals[lighter] += weight(name)
    return sorted(cut[0]), sorted(cut[1])


def combined(codes: Sequence[int]) -> int:
    """The run's exit status from the halves': the first failing half's (a half killed by a signal: 1), else 0, or
    ``NO_TESTS`` when neither half ran a test."""
    failed = [code for code in codes if code not in (0, NO_TESTS)]
    if failed:
        return failed[0] if failed[0] > 0 else 1
    return 0 if 0 in codes else NO_TESTS


class Process(Protocol):
    """What ``wait`` needs of a process (``subprocess.Popen``)."""

    def poll(self) -> int | None: ...
    def kill(self) -> None: ...
    def wait(self) -> int: ...


class Half:
    """One half's pytest, in a session of its own, so that ``kill`` ends it with every process its tests started
    (a hung one's too); a Ctrl-C reaches it through ``interrupt`` (the terminal's reaches only this runner's group)."""

    def __init__(self, argv: list[str], environment: dict[str, str] | None, output: IO[bytes] | None = None) -> None:
        errors = None if output is None else subprocess.STDOUT
        self.process = subprocess.Popen(argv, env=environment, stdout=output, stderr=errors, start_new_session=True)

    def poll(self) -> int | None:
        return self.process.poll()

    def wait(self) -> int:
        return self.process.wait()

    @property
    def returncode(self) -> int:
        """The half's exit status, once it has ended (``wait``)."""
        return self.process.wait()

    def interrupt(self) -> None:
        self._signal(signal.SIGINT)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def _signal(self, number: int) -> None:
        with contextlib.suppress(ProcessLookupError):  # the group has ended
            os.killpg(self.process.pid, number)


def stop(processes: Sequence[Process]) -> None:
    """Kill each process and reap it."""
    for process in processes:
        process.kill()
        process.wait()


def wait(
    processes: Sequence[Process],
    timeout: float,
    clock: Callable[[], float] = time.monotonic,
    pause: Callable[[float], None] = time.sleep,
) -> list[float] | None:
    """Each process's seconds until it ended, or None when ``timeout`` passed first (then every process is killed)."""
    start = clock()
    ended: list[float | None] = [None] * len(processes)
    while None in ended:
        now = clock() - start
        for index, process in enumerate(processes):
            if ended[index] is None and process.poll() is not None:
                ended[index] = now
        if None in ended and now > timeout:
            stop(processes)
            return None
        if None in ended:
            pause(0.1)
    return [seconds for seconds in ended if seconds is not None]


def run(
    arguments: Sequence[str],
    command: Sequence[str],
    seconds: dict[str, float],
    environment: dict[str, str] | None = None,
    timeout: float = TIMEOUT,
) -> int:
    """``command`` (pytest) with ``arguments`` on each half of the test files (in ``environment``, else this one's);
    both halves' output, then one line."""
    first, second = halves(test_files(), seconds)
    with tempfile.TemporaryFile() as later:
        processes = [
            Half([*command, *arguments, *first], environment),
            Half([*command, *arguments, *second], environment, later),
        ]
        interrupted = False
        try:
            took = wait(processes, timeout)
        except KeyboardInterrupt:  # each half, interrupted in turn, ends printing what it ran
            interrupted = True
            try:
                for process in processes:
                    process.interrupt()
                wait(processes, INTERRUPTED)
            except KeyboardInterrupt:  # a second Ctrl-C: no more waiting
                pass
        stop(processes)  # what a half's tests left running ends with it
        sys.stdout.flush()
        later.seek(0)
        shutil.copyfileobj(later, sys.stdout.buffer)
        sys.stdout.flush()
    if interrupted:
        print("fast tier: interrupted")
        return INTERRUPTED_STATUS
    if took is None:
        print(f"fast tier: not ended in {timeout:.0f} s, both halves killed: a test hangs where a half's output stops")
        return 1
    codes = [process.returncode for process in processes]
    parts = zip((first, second), took, codes, strict=True)
    shown = "; ".join(f"{len(files)} files in {spent:.0f} s (exit {code})" for files, spent, code in parts)
    print(f"fast tier in two halves: {shown}")
    return combined(codes)


def main(argv: Sequence[str]) -> int:
    record = bool(argv) and argv[0] == "--record"
    arguments = list(argv[1:] if record else argv)
    command = [sys.executable, "-m", "pytest", "-p", "no:xdist"]
    seconds = recorded(SECONDS.read_text()) if SECONDS.is_file() else {}
    if not record:
        return run(arguments, command, seconds)
    with tempfile.TemporaryDirectory() as folder:
        target = Path(folder) / "seconds.txt"
        environment = {**os.environ, SECONDS_FILE: str(target)}
        status = run(arguments, [*command, "-p", "tests.file_seconds"], seconds, environment)
        taken = recorded(target.read_text()) if target.is_file() else {}
    if status == 0 and taken:  # a file none of whose tests ran (all slow) weighs nothing
        SECONDS.write_text(HEADER + "".join(f"{taken.get(path, 0.0):.2f} {path}\n" for path in test_files()))
        print(f"fast tier: {SECONDS.relative_to(ROOT)} rewritten")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
