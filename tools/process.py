"""How the operator tools end their process."""

from __future__ import annotations

import os
import sys
from typing import NoReturn


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
