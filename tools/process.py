"""How the operator tools end their process: the error that ends it, reported, and the exit."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, NoReturn

from core.errors import TpuRlError
from core.redact import scrub_lines

if TYPE_CHECKING:  # the program's stop imports Pulumi, which no tool but the offline plan loads
    from infra.stop import StopError


def exit_now(code: int) -> NoReturn:
    """Flush the output and exit at once, skipping the interpreter's shutdown.

    A bounded call the tool abandoned at its deadline (``core.deadline.call``: a server that drips its headers
    or sends ``100 Continue`` forever) may still be inside a socket read in a daemon thread. Python's shutdown
    stops such threads when they next reach the interpreter, and one stopped inside the SSL and HTTP stack can
    abort the process (SIGABRT, exit 134) after the tool printed its line. The tool has written everything it
    writes by now (files are closed where they are written), so nothing is lost by not finalizing."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def report(err: TpuRlError | StopError, *, limit: int = 600, prefix: str = "error") -> int:
    """The one way a tool reports the error that ends it: each line of its message (a config's every problem is one
    line) as ``<prefix>: <line>`` on standard error, each scrubbed of secrets and terminal controls and cut at
    ``limit`` characters; returns the process's exit status (``core.errors``: 2 bad input, 1 a failure; a
    ``StopError`` of the program, run in-process by the offline plan, carries the same)."""
    for line in scrub_lines(str(err), limit=limit):
        print(f"{prefix}: {line}", file=sys.stderr)
    return err.exit_code
