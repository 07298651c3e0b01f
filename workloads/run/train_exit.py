"""How the training container ends, from train_rl's status and the end of its log (run in the MaxText image as
``python3 -c`` of this file's text, like ``checkpoint_scan.py``; standard library only).

    python3 train_exit.py LOG STATUS STALL_MARKER SLICE_DOWN_EXIT STALLED_EXIT   # prints the exit status

(the two codes are ``core.names``'; the image has no copy of the program's modules).

- train_rl succeeded (0): 0.
- The stall watchdog ended it (``STALL_MARKER`` exists, ``stall_watchdog.py``): ``STALLED_EXIT``, which the head's
  pod failure policy counts like a disruption, so the JobSet restarts the run from its last checkpoint.
- It died of a lost TPU slice: ``SLICE_DOWN_EXIT`` (counted, the JobSet restarts). The rule is pathways-utils'
  own (v0.1.11, the version MaxText 0.2.4's ``pathwaysutils>=0.1.11`` installs; ``pathwaysutils/elastic/
  elastic.py`` ``is_error_due_to_slice_down``): the error is a ``JaxRuntimeError`` and a code of
  ``_ELASTIC_DOWN_ERROR_TYPES`` (``DATA_LOSS``) is in its text. The codes of
  ``_ELASTIC_DOWN_ADDITIONAL_ERROR_TYPES`` (``DEADLINE_EXCEEDED``, ``NOT_FOUND``, ``INTERNAL``) are what
  pathways-utils itself calls "may or may not be due to slice down": an XLA ``INTERNAL: RET_CHECK failure``
  or a bad mesh raises them too, and for pathways-utils a wrong guess costs an in-process retry, for a JobSet
  a new start-up, compilation and pre-RL evaluation on the whole slice. They fail the run (the next
  `pulumi up` retries it from its checkpoint), and the line says why.
- Anything else: train_rl's status (the head's pod failure policy fails the run at once).

The error judged is the one train_rl died of, and only when it died of one (exit 1: Python's status for an
uncaught exception; a kill by a signal is not an error of the program): the exception of the log's last
traceback (Python prints the propagated exception last; an earlier traceback is superseded), or, in a log
without a traceback, its last ``JaxRuntimeError`` line. The whole log is read once, line by line, as bytes
decoded leniently, with each line and the message kept bounded: a log of any size, with binary bytes or
without a final newline, is judged the same way, in constant memory.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable

DOWN_CODES = ("DATA_LOSS",)
"""pathways-utils' ``_ELASTIC_DOWN_ERROR_TYPES``."""
MAYBE_DOWN_CODES = ("DEADLINE_EXCEEDED", "NOT_FOUND", "INTERNAL")
"""pathways-utils' ``_ELASTIC_DOWN_ADDITIONAL_ERROR_TYPES``."""
UNCAUGHT_EXIT = 1
"""Python's exit status after an uncaught exception (absl's ``app.run`` keeps it)."""
LINE_CHARS = 4096
MESSAGE_LINES = 40
"""How much of a multi-line exception message is judged (a JaxRuntimeError's text can span lines)."""
TRACEBACK = "Traceback (most recent call last):"
_EXCEPTION = re.compile(r"[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Iteration)(: .*)?|[A-Za-z_]\w*(\.\w+)+(: .*)?")
"""How Python prints the exception after a traceback's frames: ``Name: message``, or ``module.Name: message``
for a class outside builtins (an absl or logging line is neither)."""
_JAX_ERROR = re.compile(r"(?<![\w.])(?:[A-Za-z_]\w*\.)*JaxRuntimeError: ")
"""A ``JaxRuntimeError`` as Python prints it: its (qualified) class name, then ``: ``."""
JAX_ERROR_TYPE = "JaxRuntimeError"


def lines_of(path: str) -> Iterable[str]:
    """The file's lines, decoded (invalid bytes replaced), each cut to ``LINE_CHARS``; none if unreadable."""
    try:
        with open(path, "rb") as handle:
            for raw in handle:
                yield raw[:LINE_CHARS].decode("utf-8", errors="replace").rstrip("\r\n")
    except OSError:
        return


def final_error(lines: Iterable[str]) -> str | None:
    """The text of the exception train_rl died of, as far as the log shows it (None: no exception found)."""
    tracebacks = False
    in_frames = False
    error: list[str] | None = None
    collecting = False
    jax: list[str] | None = None
    jax_collecting = False
    for line in lines:
        stripped = line.strip()
        if stripped == TRACEBACK:
            tracebacks, in_frames, error, collecting = True, True, None, False
            continue
        if in_frames:
            if line and not line[0].isspace() and _EXCEPTION.fullmatch(line):
                error, in_frames, collecting = [line], False, True
            continue
        if collecting:
            if not stripped or len(error or ()) >= MESSAGE_LINES:
                collecting = False
            elif error is not None:
                error.append(line)
        if not tracebacks:
            if match := _JAX_ERROR.search(line):
                jax, jax_collecting = [line[match.start() :]], True
            elif jax_collecting and jax is not None:
                if not stripped or len(jax) >= MESSAGE_LINES:
                    jax_collecting = False
                else:
                    jax.append(line)
    found = error if tracebacks else jax
    return "\n".join(found) if found else None


def verdict(status: int, lines: Iterable[str], stalled: str | None, codes: tuple[int, int]) -> tuple[int, str]:
    """(the container's exit status, what it says) for train_rl's ``status``, its log's lines and the stall
    watchdog's note (None: it did not end the attempt); ``codes``: the slice-down and stalled exit codes."""
    slice_down_exit, stalled_exit = codes
    if stalled is not None:
        return stalled_exit, f"{stalled}; exiting {stalled_exit} so the JobSet restarts it from its last checkpoint"
    if status != UNCAUGHT_EXIT:
        return status, ""
    error = final_error(lines)
    if error is None or error.split(":", 1)[0].rsplit(".", 1)[-1] != JAX_ERROR_TYPE:
        return status, ""
    first = error.split("\n", 1)[0].strip()[:200]
    if any(code in error for code in DOWN_CODES):
        return slice_down_exit, (
            f"train_rl (exit {status}) lost a TPU slice ({first}); exiting {slice_down_exit} so the JobSet restarts"
        )
    maybe = next((code for code in MAYBE_DOWN_CODES if code in error), None)
    if maybe:
        return status, (
            f"train_rl (exit {status}) failed with {maybe} ({first}), which pathways-utils calls 'may or may not be "
            "due to slice down': not restarted, since a deterministic error would fail the same way; the next "
            "`pulumi up` retries the run from its last checkpoint"
        )
    return status, ""


def main(argv: list[str]) -> int:
    log, status_text, marker, slice_down_exit, stalled_exit = argv
    status = int(status_text) if status_text.isdigit() else 1
    stalled = None
    if os.path.exists(marker):
        with open(marker, encoding="utf-8", errors="replace") as handle:
            stalled = " ".join(handle.read(500).split()) or "the stall watchdog ended train_rl"
    code, message = verdict(status, lines_of(log), stalled, (int(slice_down_exit), int(stalled_exit)))
    if message:
        print(f"tpu-rl: {message}", file=sys.stderr, flush=True)
    return code


if __name__ == "__main__":
    try:
        code = main(sys.argv[1:])
    except Exception as err:  # noqa: BLE001 (the container keeps train_rl's status)
        print(f"tpu-rl: could not judge train_rl's exit ({type(err).__name__})", file=sys.stderr, flush=True)
        code = int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2].isdigit() else 1
    print(code)
