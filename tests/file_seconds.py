"""A pytest plugin that records how long each test file took (its tests' setup, call and teardown), for the fast tier's
cut into halves (``tests/fast_tier.py``, ``--record``): with ``TPU_RL_FILE_SECONDS`` set to a file, each process adds
one ``<seconds> <file>`` line per file it ran to it, in one write at the session's end.
"""

from __future__ import annotations

import os
from collections import defaultdict
from typing import Any

SECONDS_FILE = "TPU_RL_FILE_SECONDS"

_seconds: defaultdict[str, float] = defaultdict(float)


def pytest_runtest_logreport(report: Any) -> None:
    _seconds[report.nodeid.split("::", 1)[0]] += report.duration


def pytest_sessionfinish(session: Any) -> None:
    target = os.environ.get(SECONDS_FILE)
    if target and _seconds:
        lines = "".join(f"{seconds:.3f} {path}\n" for path, seconds in sorted(_seconds.items()))
        with open(target, "a") as handle:  # appended in one write: the other half writes to the same file
            handle.write(lines)
