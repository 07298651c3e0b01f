"""The one base of the product's errors: every refusal of bad input, preflight problem and tool failure is a
``TpuRlError``, whose message is what the operator reads (one line per problem, each naming what failed and the
fix; no traceback) and whose ``exit_code`` is the process's exit status when a CLI stops on it: 2 for bad input
(a configuration, an argument, a file, a name that is another stack's), 1 for a failure of the world (a read that
did not answer, a step that failed). A CLI (``tools/*``, the program's entry point) catches this base alone.

Standard library only: the container programs' errors are under it too, this file shipped beside them as a file of
their step's ConfigMap (``workloads/specs/commands.py`` ``CORE_FILES``), as ``core/hf_model.py`` is. The one other root
is the program's stop, ``infra.stop.StopError``, the adapter to the Pulumi engine (tests/test_errors.py).
"""

from __future__ import annotations

BAD_INPUT = 2
"""The exit status of bad input: what the operator gave must change."""
FAILED = 1
"""The exit status of a failure of the world or of a step."""


class TpuRlError(Exception):
    """A refusal, a preflight problem or a tool failure: ``message`` (``str(error)``), one line per problem.

    ``exit_code`` is the class's unless the raiser knows better: a client library's error is translated at its seam
    into the caller's class with the code of what happened (``infra.client_errors``: a refused grant exits 2, a
    service that did not answer 1)."""

    exit_code: int = FAILED

    def __init__(self, *args: object, exit_code: int | None = None) -> None:
        super().__init__(*args)
        if exit_code is not None:
            self.exit_code = exit_code

    @property
    def message(self) -> str:
        return str(self)


class BadInputError(TpuRlError):
    """Bad input: the configuration, an argument or a file must change (exit 2)."""

    exit_code = BAD_INPUT


class UnavailableError(TpuRlError):
    """A service did not answer usefully (no answer in time, 429, a 5xx, a host it cannot reach): nothing the operator
    gave is wrong, and a later retry may cure it (exit 1). Its message ends with the retry hint."""
