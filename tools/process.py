"""How the operator tools end their process: the error that ends it, reported, and the exit."""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn

from core.errors import TpuRlError
from core.redact import scrub_lines

if TYPE_CHECKING:  # the program's stop imports Pulumi, which no tool but the offline plan loads
    from infra.stop import StopError


INTERNAL = 70
"""The exit status of a tool's own fault (``sysexits.h`` ``EX_SOFTWARE``): neither what the operator gave (2) nor
what a retry may cure (1)."""
TRACEBACK = "TPU_RL_TRACEBACK"
"""Set (to anything) to see an internal error's traceback instead of its one line."""


def entry_point(main: Callable[[], int]) -> NoReturn:
    """A `make` target's command: ``main``'s exit status; an error of the project's tree it lets out, reported
    (``report``); anything else a fault of tpu-rl's, one line naming it and the line that raised it, exit
    ``INTERNAL``. No command prints a traceback unless ``TPU_RL_TRACEBACK`` asks for one."""
    try:
        code = main()
    except TpuRlError as err:
        exit_now(report(err))
    except KeyboardInterrupt:
        exit_now(130)
    except Exception as err:  # noqa: BLE001 (a fault of tpu-rl's: one line naming it, never a traceback)
        if os.environ.get(TRACEBACK):
            traceback.print_exc()
            exit_now(INTERNAL)
        where = traceback.extract_tb(err.__traceback__)[-1]
        message = f"internal error: {type(err).__name__}: {err} (at {where.filename}:{where.lineno})"
        for line in scrub_lines(message, limit=600)[:1]:
            print(f"error: {line}; please report it ({TRACEBACK}=1 shows the traceback)", file=sys.stderr)
        exit_now(INTERNAL)
    exit_now(code)


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
