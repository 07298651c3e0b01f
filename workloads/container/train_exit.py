"""How the training container ends, from train_rl's status and its log (run in the MaxText image as
a file of the training step's ConfigMap, with ``shown.py`` beside it; standard library only).

    python3 train_exit.py LOG STATUS STALL_MARKER SLICE_DOWN_EXIT STALLED_EXIT [DRILL_MARKER DRILL_EXIT
                          [SLICE_STATE ACCOUNT_DIR WORKERS BASELINE]]            # prints the exit status

(the codes are ``core.names``'; the image has no copy of the program's modules).

The verdict goes by evidence, in this order (docs/when-a-step-fails.md "How a training attempt ends" has the table):

1. **Completed.** The log has MaxText's ``RL Training Completed Successfully!`` (MaxText 0.2.5
   ``train_rl.py`` ``rl_train`` line 768, as in 0.2.4, printed once ``rl_trainer.train`` returns; tunix's learner
   ends its ``train`` with ``rl_engine.close()`` (``rl_learner.py`` 653 at c4ec573, 0.2.4's tunix, and at c7d8950, the
   newest tunix mirrored; 0.2.5's pin a8d7058 is not), whose actor trainer's ``close`` saves the last step's
   checkpoint with ``force=True`` and closes the checkpoint manager, so the line implies the final checkpoint is
   written):
   0, whatever followed (the post-training evaluation failing, a hang at exit that the watchdog ended, a
   signal). Restarting would restore the final checkpoint only to train nothing.
2. train_rl succeeded (0): 0.
3. **An error ended it.** train_rl died of an uncaught exception (exit 1, Python's status for one), or the
   watchdog ended a run that had logged its fatal error and then hung at exit (tunix's thread pools can keep
   the interpreter from exiting): the error decides.
   - A lost TPU slice: ``SLICE_DOWN_EXIT`` (counted, the JobSet restarts). The rule is pathways-utils' own
     (v0.1.11 to v0.1.13, the releases MaxText 0.2.5's ``pathwaysutils>=0.1.11`` can install, the same in
     each; ``pathwaysutils/elastic/elastic.py`` ``is_error_due_to_slice_down``): the error is a
     ``JaxRuntimeError`` and a code of ``_ELASTIC_DOWN_ERROR_TYPES`` (``DATA_LOSS``) is in its text.
   - The codes of ``_ELASTIC_DOWN_ADDITIONAL_ERROR_TYPES`` (``DEADLINE_EXCEEDED``, ``NOT_FOUND``,
     ``INTERNAL``) are what pathways-utils itself calls "may or may not be due to slice down": an XLA
     ``INTERNAL: RET_CHECK failure`` or a bad mesh raises them too, and the Pathways proxy's 60 s pipe timeout
     (``--pathways_pipe_unreachable_timeout=60s``) makes ``DEADLINE_EXCEEDED`` a likely first sign of a maintenance.
     So the slice decides, by evidence: ``slice_state.py check`` (``SLICE_STATE``, with the head's service account in
     ``ACCOUNT_DIR``, the slice's ``WORKERS`` and the ``BASELINE`` its wait wrote) watches the attempt's worker pods
     for ``CHECK_SECONDS``; a worker gone, restarted, being stopped by Kubernetes or not Ready is a lost slice
     (``SLICE_DOWN_EXIT``); a worker's or a head sidecar's container that ended ``OOMKilled`` or with a non-zero exit,
     with no disruption, is a fault of its own, named, and fails the run (a restart would meet it again, and spend
     every restart); on a slice whose every worker stayed Ready, or one that cannot be read, the error fails the run
     (the next `make up STACK=<stack>` retries it from its checkpoint), and the line says why.
   - Any other error (``UNAVAILABLE``, ``ABORTED``, a dying sampler engine, a Python exception) is judged by the slice
     the same way: a lost slice's evidence restarts it (``SLICE_DOWN_EXIT``); a healthy or unreadable slice fails the
     run (1; the head's pod failure policy fails it at once), since a deterministic error would fail the same way
     after a restart, and the line says so.
   - Whatever the error, ``DATA_LOSS`` included, a container of the slice that ended of its own fault (an OOM kill, a
     non-zero exit, with no disruption) fails the run naming it.
4. **Stalled, with no other evidence**: the stall watchdog ended it (``STALL_MARKER`` exists,
   ``stall_watchdog.py``): ``STALLED_EXIT``, which the head's pod failure policy counts like a disruption, so
   the JobSet restarts the run from its last checkpoint.
5. **Ended by the restart drill, with no other evidence**: the drill ended this fresh attempt after the run's
   first committed checkpoint (``DRILL_MARKER`` exists, ``restart_drill.py``): ``DRILL_EXIT``, which the JobSet
   restarts once on the same nodes without counting it against ``maxRestarts``.
6. Anything else (a signal, an OOM kill): train_rl's status, unless train_rl itself exited one of the codes the script
   keeps for its own verdicts (``SLICE_DOWN_EXIT``, ``STALLED_EXIT``, ``DRILL_EXIT``) with none of their evidence:
   1, so that only the drill's own end (its marker) is restarted as the drill and only evidence restarts the run.

The error judged is the exception of the log's last traceback (Python prints the propagated exception last;
an earlier traceback is superseded), or, in a log without a traceback, its last ``JaxRuntimeError`` line. Two
kinds of trace are not that error: what Python prints at shutdown or from another thread (``Exception ignored
in``, ``Exception ignored in atexit callback``, ``Error in atexit._run_exitfuncs``, ``Exception in thread``,
and the exceptions chained to them), which never replaces the error that ended the run; and a trace followed by
a new training step (``Train step N training loss``, tunix's ``PeftTrainer._log_metrics``), which training
survived. The whole log is read once, line by line, as bytes decoded leniently, with each line and the message
kept bounded: a log of any size, with binary bytes or without a final newline, is judged the same way, in
constant memory.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING or __package__:  # the repository's package (the tests)
    from workloads.container import shown
else:  # python3 /tpu-rl/train_exit.py: shown.py is a file of the same ConfigMap, its folder on sys.path
    import shown


DOWN_CODES = ("DATA_LOSS",)
"""pathways-utils' ``_ELASTIC_DOWN_ERROR_TYPES``."""
MAYBE_DOWN_CODES = ("DEADLINE_EXCEEDED", "NOT_FOUND", "INTERNAL")
"""pathways-utils' ``_ELASTIC_DOWN_ADDITIONAL_ERROR_TYPES``."""
UNCAUGHT_EXIT = 1
CHECK_SECONDS = 60
"""How long ``slice_state.py check`` watches the workers for evidence after a "maybe down" error: a maintenance's
eviction or a lost host shows in their pods within the proxy's 60 s pipe timeout that raised the error."""
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
COMPLETED = "] RL Training Completed Successfully!"
"""The end of MaxText's line once training returned (0.2.5 ``train_rl.py`` ``rl_train``, ``max_logging.warning``:
absl's ``W<date> <time> <thread> train_rl.py:<line>] `` prefix, then the message)."""
TRAIN_STEP = re.compile(r"\] Train step [0-9]+ training loss")
"""tunix's line for each training step (``peft_trainer.py`` ``_log_metrics``, absl ``logging.info``; the same at c4ec573
and c7d8950)."""
SHUTDOWN_TRACES = (
    "Exception ignored ",  # an exception in a finalizer, a __del__, a weakref callback, an atexit callback (3.12+)
    "Error in atexit._run_exitfuncs",  # an atexit callback (Python up to 3.11)
    "Exception in thread ",  # threading.excepthook: a thread's uncaught exception
    "Exception in threading.excepthook",
)
"""The lines Python prints before a traceback that did not end the program (CPython ``PyErr_WriteUnraisable``,
``atexit_callfuncs``, ``threading.excepthook``)."""
CHAINED = (
    "During handling of the above exception, another exception occurred:",
    "The above exception was the direct cause of the following exception:",
)
"""The lines that chain a traceback to the one before it (it is of the same kind)."""


def lines_of(path: str) -> Iterable[str]:
    """The file's lines, decoded (invalid bytes replaced), each cut to ``LINE_CHARS``; none if unreadable."""
    try:
        with open(path, "rb") as handle:
            for raw in handle:
                yield raw[:LINE_CHARS].decode("utf-8", errors="replace").rstrip("\r\n")
    except OSError:
        return


@dataclass
class Evidence:
    """What train_rl's log says about how it ended."""

    completed: bool = False
    error: str | None = None
    """The text of the exception train_rl died of, as far as the log shows it (None: no exception found)."""


def evidence(lines: Iterable[str]) -> Evidence:
    """Read the log once: whether training completed, and the error it died of (the module's docstring)."""
    completed = tracebacks = in_frames = collecting = noise = False
    error: list[str] | None = None
    jax: list[str] | None = None
    jax_collecting = False
    last = ""
    for line in lines:
        stripped = line.strip()
        if stripped == TRACEBACK:
            noise = last.startswith(SHUTDOWN_TRACES) or (noise and last in CHAINED)
            in_frames, collecting = True, False
            if not noise:
                tracebacks, error = True, None
            continue
        if stripped:
            last = stripped
        if in_frames:
            if line and not line[0].isspace() and _EXCEPTION.fullmatch(line):
                in_frames, collecting = False, not noise
                if not noise:
                    error = [line]
            continue
        if line.endswith(COMPLETED):
            completed = True
        elif TRAIN_STEP.search(line):
            error, jax, collecting, jax_collecting = None, None, False, False  # training went on
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
    return Evidence(completed, "\n".join(found) if found else None)


SliceCheck = Callable[[], tuple[int, str]]
"""``slice_state.py check``'s answer: (0 up, 1 down, 2 unknown, 3 a container's own fault; its line)."""
FAULT = 3


def verdict(  # noqa: PLR0913 (the evidence, each of its own kind)
    status: int,
    lines: Iterable[str],
    stalled: str | None,
    codes: tuple[int, int],
    drilled: tuple[str, int] | None = None,
    slice_check: SliceCheck | None = None,
    kept: Collection[int] = (),
) -> tuple[int, str]:
    """(the container's exit status, what it says) for train_rl's ``status``, its log's lines and the stall
    watchdog's note (None: it did not end the attempt); ``codes``: the slice-down and stalled exit codes;
    ``drilled``: the restart drill's note and exit code when it ended the attempt; ``slice_check``: the slice's
    evidence, asked after an error (None: not asked, the slice counts as unknown); ``kept``: the other codes the
    script keeps for its own verdicts (the drill's, whether or not it ran). The order of the evidence is the module
    docstring's."""
    slice_down_exit, stalled_exit = codes
    found = evidence(lines)
    ended = f"was ended by the stall watchdog ({stalled})" if stalled is not None else f"exited {status}"
    if found.completed:
        if status == 0 and stalled is None:
            return 0, ""
        also = f" after {_first(found.error)}" if found.error else ""
        return 0, (
            f"train_rl logged that training completed (its last checkpoint saved), then {ended}{also}: recorded as "
            "done, not restarted (the post-training evaluation may be missing)"
        )
    if status == 0:
        return 0, ""
    if found.error is not None and (status == UNCAUGHT_EXIT or stalled is not None):
        return _error_verdict(status, found.error, stalled, slice_down_exit, slice_check)
    if stalled is not None:
        return stalled_exit, f"{stalled}; exiting {stalled_exit} so the JobSet restarts it from its last checkpoint"
    if drilled is not None:
        note, drill_exit = drilled
        return drill_exit, (
            f"{note}; exiting {drill_exit} so the JobSet restarts it once from that checkpoint, not counted against "
            "tpu-rl:workflow.maxRestarts"
        )
    if status in {*codes, *kept, *([drilled[1]] if drilled else [])}:
        return UNCAUGHT_EXIT, kept_line(status)
    return status, ""


def kept_line(status: int) -> str:
    """What the judge says of a train_rl that itself exited a code the script keeps for its own verdicts."""
    return (
        f"train_rl itself exited {status}, a code the training script keeps for its own verdicts (a lost slice, a "
        f"stall, the restart drill's end), with none of their evidence: exiting {UNCAUGHT_EXIT} so the JobSet fails "
        "the run instead of restarting it; the next `make up STACK=<stack>` retries it from its last checkpoint"
    )


def _first(error: str) -> str:
    return error.split("\n", 1)[0].strip()[:200]


def _error_verdict(
    status: int, error: str, stalled: str | None, slice_down_exit: int, slice_check: SliceCheck | None
) -> tuple[int, str]:
    """The verdict of a run that died of ``error`` (exit 1), or hung after it until the watchdog ended it: the slice is
    asked after every error (the module's docstring)."""
    first = _first(error)
    hung = f", then hung until the stall watchdog ended it ({stalled})" if stalled is not None else ""
    exited = f"exit {status}" if stalled is None else "uncaught error"
    jax = error.split(":", 1)[0].rsplit(".", 1)[-1] == JAX_ERROR_TYPE
    maybe = next((code for code in MAYBE_DOWN_CODES if code in error), None) if jax else None
    said = (
        f"{maybe} ({first}){hung}, which pathways-utils calls 'may or may not be due to slice down'"
        if maybe
        else f"{first}{hung}"
    )
    state, seen = slice_check() if slice_check is not None else (2, "unknown: not read")
    if state == FAULT:
        return UNCAUGHT_EXIT, _fault_line(f"train_rl ({exited}) failed with {maybe or first}{hung}", seen)
    if jax and any(code in error for code in DOWN_CODES):
        return slice_down_exit, (
            f"train_rl ({exited}) lost a TPU slice ({first}){hung}; exiting {slice_down_exit} so the JobSet restarts"
        )
    if state == 1:
        return slice_down_exit, (
            f"train_rl ({exited}) failed with {said}, and its slice is {seen}; exiting {slice_down_exit} so the "
            "JobSet restarts"
        )
    return UNCAUGHT_EXIT, (
        f"train_rl ({exited}) failed with {said}, and its slice is {seen}: not restarted, since a deterministic error "
        "would fail the same way; the next `make up STACK=<stack>` retries the run from its last checkpoint"
    )


def _fault_line(what: str, seen: str) -> str:
    """The line of an error whose slice shows a container's own fault (``slice_state.py check``'s ``fault: ...``)."""
    return (
        f"{what}, and its slice shows a container's own fault ({seen.removeprefix('fault: ')}): not a lost slice, so "
        f"not restarted (the next attempt would meet the same fault and spend a restart on it); exiting "
        f"{UNCAUGHT_EXIT}: the next `make up STACK=<stack>` retries the run from its last checkpoint"
    )


def _note(marker: str, default: str) -> str | None:
    """A marker file's line (None: there is none)."""
    if not os.path.exists(marker):
        return None
    with open(marker, encoding="utf-8", errors="replace") as handle:
        return " ".join(handle.read(500).split()) or default


def ask_slice(program: str, account_dir: str, workers: str, baseline: str) -> tuple[int, str]:
    """Run ``slice_state.py check`` (its own bounds, and a margin for its start): (its status, its line)."""
    argv = [sys.executable, program, "check", account_dir, workers, str(CHECK_SECONDS), baseline]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=CHECK_SECONDS + 120)
    except (OSError, subprocess.TimeoutExpired) as err:
        return 2, f"unknown: the check did not answer ({type(err).__name__})"
    said = (done.stdout.strip().splitlines() or [f"unknown: the check exited {done.returncode} saying nothing"])[-1]
    return (done.returncode if done.returncode in (0, 1, FAULT) else 2), " ".join(said.split())[:400]


def main(argv: list[str]) -> int:
    log, status_text, marker, slice_down_exit, stalled_exit, *more = argv
    status = int(status_text) if status_text.isdigit() else 1
    stalled = _note(marker, "the stall watchdog ended train_rl")
    drilled: tuple[str, int] | None = None
    kept: tuple[int, ...] = ()
    if more:
        drill_marker, drill_exit = more[:2]
        note = _note(drill_marker, "the restart drill ended train_rl")
        drilled = (note, int(drill_exit)) if note is not None else None
        kept = (int(drill_exit),)
    check = functools.partial(ask_slice, *more[2:6]) if len(more) >= 6 else None
    codes = (int(slice_down_exit), int(stalled_exit))
    code, message = verdict(status, lines_of(log), stalled, codes, drilled, check, kept)
    if message:  # it quotes train_rl's log and the slice check's line: nothing a terminal would act on or hide
        print(f"tpu-rl: {shown.redacted(message)}", file=sys.stderr, flush=True)
    return code


if __name__ == "__main__":
    try:
        code = main(sys.argv[1:])
    except Exception as err:  # noqa: BLE001 (the container keeps train_rl's status)
        print(f"tpu-rl: could not judge train_rl's exit ({type(err).__name__})", file=sys.stderr, flush=True)
        code = int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2].isdigit() else 1
        code = UNCAUGHT_EXIT if str(code) in sys.argv[4:6] + sys.argv[7:8] else code  # never a verdict it keeps
    print(code)
