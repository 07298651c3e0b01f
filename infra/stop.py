"""How the program stops `pulumi up`: a ``pulumi.RunError`` carrying the exit code of ``core.errors``.

The Python language host logs a ``RunError``'s text alone, as one error with no traceback (pulumi
``sdk/python/lib/pulumi/cmd/pulumi-language-python-exec``, ``except pulumi.RunError as e: pulumi.log.error(str(e))``),
and the CLI then exits 255 whatever the program meant. The offline plan (``tools/plan``) runs the program in-process and
exits with ``exit_code``: 2 when what the operator gave must change, 1 when a retry may cure it."""

from __future__ import annotations

import pulumi

from core.errors import BAD_INPUT, FAILED, TpuRlError


class StopError(pulumi.RunError):
    """The program stops with ``message`` (one line per problem); ``exit_code`` is ``core.errors``' ``BAD_INPUT`` or
    ``FAILED``."""

    def __init__(self, message: str, exit_code: int = FAILED) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def stop(err: TpuRlError, prefix: str = "") -> StopError:
    """``err`` as the program's stop, its exit code kept; ``prefix`` names the check it comes from."""
    return StopError(f"{prefix}{err}", err.exit_code)


def stop_all(problems: list[tuple[str, int]]) -> StopError:
    """Several problems, one line each: bad input when any is (the operator must change something before a retry can
    help), else a failure a retry may cure."""
    code = BAD_INPUT if any(code == BAD_INPUT for _, code in problems) else FAILED
    return StopError("\n".join(line for line, _ in problems), code)
