"""How the program stops `pulumi up`: a ``pulumi.RunError`` carrying the exit code of ``core.errors``; and how it
says anything else there (``log_info``, ``log_warn``).

The Python language host logs a ``RunError``'s text alone, as one error with no traceback (pulumi
``sdk/python/lib/pulumi/cmd/pulumi-language-python-exec``, ``except pulumi.RunError as e: pulumi.log.error(str(e))``),
and the CLI then exits 255 whatever the program meant. The offline plan (``tools/plan``) runs the program in-process and
exits with ``exit_code``: 2 when what the operator gave must change, 1 when a retry may cure it.

The engine prints a stop's text and every log line as they are, on the operator's terminal, and they carry text from
elsewhere (a tensor's name from a shard's header, a cluster's message, a record's field): each line is scrubbed here,
once, as the tools scrub theirs (``core.redact.scrub_lines``: no terminal control, no secret)."""

from __future__ import annotations

from typing import Any

import pulumi

from core.errors import BAD_INPUT, FAILED, TpuRlError
from core.redact import scrub_lines

MAX_LINE = 4000
"""The longest line the program prints (a config problem or a step's stop is a few hundred characters)."""


def shown(message: str) -> str:
    """``message`` as the engine may print it: each line scrubbed (``core.redact.scrub_lines``), cut at ``MAX_LINE``."""
    return "\n".join(scrub_lines(message, limit=MAX_LINE))


def log_info(message: str, resource: Any = None, *, ephemeral: bool | None = None) -> None:
    """``pulumi.log.info`` of ``message`` (``shown``)."""
    pulumi.log.info(shown(message), resource, ephemeral=ephemeral)


def log_warn(message: str, resource: Any = None) -> None:
    """``pulumi.log.warn`` of ``message`` (``shown``)."""
    pulumi.log.warn(shown(message), resource)


class StopError(pulumi.RunError):
    """The program stops with ``message`` (one line per problem); ``exit_code`` is ``core.errors``' ``BAD_INPUT`` or
    ``FAILED``.

    The one exception class of the product on a library's base, and the one root beside ``core.errors.TpuRlError``
    (tests/test_errors.py): the adapter at the seam to the engine, which shows a ``RunError``'s text alone and a
    traceback for anything else; ``stop`` makes a ``TpuRlError`` one."""

    def __init__(self, message: str, exit_code: int = FAILED) -> None:
        super().__init__(shown(message))
        self.exit_code = exit_code


def stop(err: TpuRlError, prefix: str = "") -> StopError:
    """``err`` as the program's stop, its exit code kept; ``prefix`` names the check it comes from."""
    return StopError(f"{prefix}{err}", err.exit_code)


def stop_all(problems: list[tuple[str, int]]) -> StopError:
    """Several problems, one line each: bad input when any is (the operator must change something before a retry can
    help), else a failure a retry may cure."""
    code = BAD_INPUT if any(code == BAD_INPUT for _, code in problems) else FAILED
    return StopError("\n".join(line for line, _ in problems), code)
