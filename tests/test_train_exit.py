"""The training script's judge of train_rl's exit (``workloads/container/train_exit.py``) and its stall watchdog
(``workloads/container/stall_watchdog.py``) as functions; ``test_commands.py`` runs both through bash. Pure."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from core.names import DRILL_EXIT, SLICE_DOWN_EXIT, STALLED_EXIT
from tests.container_files import container_program
from tests.process_clock import ProcessClock
from workloads.container import stall_watchdog, tpu_rl_watch, train_exit
from workloads.container.tpu_rl_watch import interval

pytestmark = pytest.mark.pure

CODES = (SLICE_DOWN_EXIT, STALLED_EXIT)
FRAMES = ["Traceback (most recent call last):", '  File "train_rl.py", line 812, in main', "    rl_train(config)"]


def absl(message: str, level: str = "I", where: str = "peft_trainer.py:735") -> str:
    """A line as absl prints it (``<level><mmdd> <time> <thread id, 5 wide> <file>:<line>] ``)."""
    return f"{level}1204 10:11:12.345678  4242 {where}] {message}\n"


def judged(status: int, *lines: str, stalled: str | None = None) -> int:
    return train_exit.verdict(status, list(lines), stalled, CODES)[0]


def _error(lines: list[str]) -> str | None:
    return train_exit.evidence(lines).error


def test_the_exception_train_rl_died_of_is_the_last_tracebacks():
    first = [*FRAMES, "jax.errors.JaxRuntimeError: DATA_LOSS: lost", "", "During handling of the above exception:"]
    assert _error([*first, *FRAMES, "ValueError: x"]) == "ValueError: x"
    assert _error([*FRAMES, "jax.errors.JaxRuntimeError: INTERNAL: a", "  b", "", "c"]) == (
        "jax.errors.JaxRuntimeError: INTERNAL: a\n  b"
    )
    assert _error(["E1 x.py:1] jax.errors.JaxRuntimeError: DATA_LOSS: x", "more", "", "later"]) == (
        "jax.errors.JaxRuntimeError: DATA_LOSS: x\nmore"
    ), "no traceback: the last JaxRuntimeError line (from the error on) and its message"
    assert judged(1, "E1 x.py:1] jax.errors.JaxRuntimeError: DATA_LOSS: x") == SLICE_DOWN_EXIT
    assert _error(["I1201 train step 3", "done"]) is None
    assert _error([*FRAMES]) is None, "a traceback cut short names no exception"
    # A log line between the frames is neither `Name: message` nor `module.Name: message`.
    assert _error([*FRAMES, "I1201 05:00:00.1 7 x.py:1] y: z", "KeyError: 'k'"]) == "KeyError: 'k'"


def test_a_long_message_is_judged_up_to_a_bound():
    message = [f"  line {i}" for i in range(100)]
    error = _error([*FRAMES, "jax.errors.JaxRuntimeError: UNKNOWN: x", *message, "  DATA_LOSS"])
    assert error is not None and error.count("\n") == train_exit.MESSAGE_LINES - 1 and "DATA_LOSS" not in error


@pytest.mark.parametrize(
    ("status", "error", "expected"),
    [
        (1, "jax.errors.JaxRuntimeError: DATA_LOSS: Slice 0 is unhealthy", SLICE_DOWN_EXIT),
        (1, "jaxlib.xla_extension.JaxRuntimeError: UNKNOWN: rpc failed: DATA_LOSS", SLICE_DOWN_EXIT),
        (1, "jax.errors.JaxRuntimeError: INTERNAL: RET_CHECK failure", 1),
        (1, "jax.errors.JaxRuntimeError: DEADLINE_EXCEEDED: x", 1),
        (1, "jax.errors.JaxRuntimeError: NOT_FOUND: x", 1),
        (1, "RuntimeError: caused by JaxRuntimeError: DATA_LOSS", 1),
        (1, "ValueError: DATA_LOSS", 1),
        (137, "jax.errors.JaxRuntimeError: DATA_LOSS: x", 137),
        (143, "jax.errors.JaxRuntimeError: DATA_LOSS: x", 143),
        (0, "jax.errors.JaxRuntimeError: DATA_LOSS: x", 0),
        (3, "jax.errors.JaxRuntimeError: DATA_LOSS: x", 3),
    ],
)
def test_only_pathways_utils_definite_slice_down_of_an_uncaught_jax_error_restarts(status, error, expected):
    assert judged(status, *FRAMES, error) == expected


def test_what_the_judge_says():
    _, lost = train_exit.verdict(1, [*FRAMES, "jax.errors.JaxRuntimeError: DATA_LOSS: x"], None, CODES)
    assert lost == (
        "train_rl (exit 1) lost a TPU slice (jax.errors.JaxRuntimeError: DATA_LOSS: x); exiting 75 so the JobSet "
        "restarts"
    )
    _, maybe = train_exit.verdict(1, [*FRAMES, "jax.errors.JaxRuntimeError: INTERNAL: y"], None, CODES)
    assert maybe == (
        "train_rl (exit 1) failed with INTERNAL (jax.errors.JaxRuntimeError: INTERNAL: y), which pathways-utils calls "
        "'may or may not be due to slice down', and its slice is unknown: not read: not restarted, since a "
        "deterministic error would fail the same way; the next `make up STACK=<stack>` retries the run from its last "
        "checkpoint"
    )
    code, line = train_exit.verdict(1, [*FRAMES, "ValueError: x"], None, CODES)
    assert code == 1 and line.startswith("train_rl (exit 1) failed with ValueError: x, and its slice is unknown")
    assert train_exit.verdict(143, [], "stalled: quiet", CODES) == (
        STALLED_EXIT,
        f"stalled: quiet; exiting {STALLED_EXIT} so the JobSet restarts it from its last checkpoint",
    ), "with no other evidence, the watchdog's note wins over train_rl's status (143 after its SIGTERM)"
    assert train_exit.verdict(0, [], "stalled: quiet", CODES) == (0, ""), "train_rl returned before the signal"


def test_the_judge_reads_any_file(tmp_path):
    log = tmp_path / "log"
    log.write_bytes(
        b"\xff\xfe\x00 noise\n" * 10 + "\n".join([*FRAMES, "jax.errors.JaxRuntimeError: DATA_LOSS: x"]).encode()
    )
    assert train_exit.main([str(log), "1", str(tmp_path / "no-marker"), "75", "76"]) == 75, "no final newline"
    assert list(train_exit.lines_of(str(tmp_path / "missing"))) == []
    long = tmp_path / "long"
    long.write_bytes(b"x" * 100_000 + b"\n")
    assert [len(line) for line in train_exit.lines_of(str(long))] == [train_exit.LINE_CHARS]
    marker = tmp_path / "marker"
    marker.write_text("stalled:   no new\nline\n")
    assert train_exit.main([str(log), "143", str(marker), "75", "76"]) == 75, "the error, not the hang after it"
    assert train_exit.main([str(long), "143", str(marker), "75", "76"]) == 76, "no other evidence: stalled"
    assert train_exit.main([str(log), "oops", str(tmp_path / "no-marker"), "75", "76"]) == 75, "status read as 1"


def test_the_judge_as_the_container_runs_it_prints_the_status_and_keeps_it_when_it_breaks(tmp_path):
    source = str(container_program(tmp_path, "train_exit.py"))
    log = tmp_path / "log"
    log.write_text("\n".join([*FRAMES, "jax.errors.JaxRuntimeError: DATA_LOSS: x"]))
    done = subprocess.run(
        [sys.executable, source, str(log), "1", str(tmp_path / "m"), "75", "76"], capture_output=True, text=True
    )
    assert done.stdout == "75\n" and "lost a TPU slice" in done.stderr
    broken = subprocess.run([sys.executable, source, str(log), "7"], capture_output=True, text=True)
    assert broken.stdout == "7\n" and "could not judge train_rl's exit (ValueError)" in broken.stderr


def watched(
    log: Path,
    write: Callable[[int], str],
    monkeypatch,
    *,
    ticks: int = 200,
    seconds: float = 100,
    devices: float | None = None,
    devices_key: str = stall_watchdog.BUDGET_KEY,
) -> tuple[bool, float]:
    """Watch a live process for ``ticks`` looks while ``write(tick)`` appends to ``log`` before each; (whether the
    watchdog ended it, when on the fake clock)."""
    child = subprocess.Popen(["sleep", "60"])
    clock, tick = ProcessClock(), 0
    monkeypatch.setattr(tpu_rl_watch.os, "kill", clock.kill)

    def look(interval: float) -> None:
        nonlocal tick
        clock.sleep(interval)
        with open(log, "a") as handle:
            handle.write(write(tick))
        tick += 1
        if tick == ticks:
            child.kill()
            child.wait()

    try:
        ended = stall_watchdog.watch(
            child.pid,
            str(log),
            seconds,
            str(log) + ".marker",
            clock=clock,
            sleep=look,
            devices_seconds=devices,
            devices_key=devices_key,
        )
    finally:
        child.kill()
        child.wait()
    return ended, clock.now


def test_the_watchdog_ends_a_quiet_train_rl(tmp_path, monkeypatch):
    log, marker = tmp_path / "log", tmp_path / "marker"
    log.write_text("start\n")
    quiet = subprocess.Popen(["sleep", "60"])
    clock = ProcessClock()
    monkeypatch.setattr(tpu_rl_watch.os, "kill", clock.kill)
    try:
        assert stall_watchdog.watch(quiet.pid, str(log), 100, str(marker), clock=clock, sleep=clock.sleep)
        assert quiet.wait(timeout=10) in (-signal.SIGTERM, -signal.SIGKILL)
    finally:
        quiet.kill()
    assert clock.signals[0][0] == signal.SIGTERM and 100 <= clock.signals[0][1] < 105, (
        "once the bound passed, looking every 5 s"
    )
    assert clock.signals[1:] == [], "it died of the SIGTERM: no SIGKILL"
    line = "stalled: no training progress in train_rl's log for 1m40s (tpu-rl:workflow.stallTimeout)"
    assert marker.read_text() == line + "\n"
    assert log.read_text().endswith(f"tpu-rl: {line}; stopping it\n")


def test_the_watchdog_leaves_a_training_one(tmp_path, monkeypatch):
    """A new step every look (5 s), or every 19 looks (95 s of the 100 s bound): never ended."""
    log = tmp_path / "log"
    assert watched(
        log, lambda tick: absl(f"Train step {tick} training loss: 0.5  - training perplexity: 1.6"), monkeypatch
    ) == (
        False,
        200 * 5,
    )
    log.unlink()
    sparse = "".join([absl("vLLM engine warming up"), absl("Train step 1 training loss: 0.5")])
    ended, _ = watched(
        log, lambda tick: absl(f"Train step {tick} training loss: 0.5") if tick % 19 == 0 else sparse, monkeypatch
    )
    assert not ended, "the repeated step 1 between them is no progress, the new ones are"


def test_the_watchdog_ends_a_log_that_grows_without_progress(tmp_path, monkeypatch):
    """A loop that logs every look (a retry, a repeated step) is ended at the bound, as a silent log is."""
    log = tmp_path / "log"
    log.write_text(absl("Train step 7 training loss: 0.5"))
    ended, when = watched(
        log,
        lambda tick: absl(f"retrying the rollout worker ({tick})") + absl("Train step 7 training loss: 0.5"),
        monkeypatch,
    )
    assert ended and 100 <= when < 110
    assert (tmp_path / "log.marker").read_text().startswith("stalled: no training progress")


@pytest.mark.parametrize(
    "line",
    [
        "Creating RL cluster...",
        "Setting up RL trainer...",
        "Reference Model initialized successfully",
        "Policy Model initialized successfully",
        "Starting RL training...",
        "Restored params from step: 40 in 12.500 seconds",
        "Fast forwarded 160 micro-batches.",
        "Evaluation Question: What is 2+2?",
        "Pre RL Training: corr=1, total=5, accuracy=20.0%, partial_accuracy=20.0%, format_accuracy=80.0%",
        "Intermediate Eval (step=20): corr=2, total=5, accuracy=40.0%",
        "Running evaluation on train step 20.",
        "RL Training Completed Successfully!",
    ],
)
def test_each_stage_of_a_run_is_progress(tmp_path, monkeypatch, line):
    """Start-up, evaluation and the end of training move the clock on, each stage within the bound (95 s of 100)."""
    log = tmp_path / "log"
    ended, _ = watched(
        log, lambda tick: absl(line) if tick % 19 == 0 else absl("I am still here"), monkeypatch, ticks=45
    )
    assert not ended
    progress = stall_watchdog.Progress(str(log))
    assert progress.moved(), "read from the start"
    assert not progress.moved(), "nothing new"


def test_the_watchdog_reads_a_log_in_bounded_pieces_and_from_the_start_when_it_is_cut(tmp_path, monkeypatch):
    log = tmp_path / "log"
    monkeypatch.setattr(tpu_rl_watch, "READ_BYTES", 64)
    log.write_bytes(b"\xff" * 200 + b"\n" + absl("Train step 1 training loss: 0.5").encode())
    progress = stall_watchdog.Progress(str(log))
    seen = [progress.moved() for _ in range(6)]
    assert seen.count(True) == 1 and progress.step == 1, "the step line, read across looks, counts once"
    log.write_text(absl("Train step 2 training loss: 0.5"))
    assert [progress.moved(), progress.moved()] == [False, True] and progress.step == 2, (
        "a log cut shorter is read again from its start (its one line in two pieces)"
    )
    assert not stall_watchdog.Progress(str(tmp_path / "missing")).moved()
    with open(log, "a") as handle:
        handle.write("I1204 10:00:00.000000 1 peft_trainer.py:735] Train step 3 training loss")  # no newline yet
    assert not progress.moved(), "a line still being written waits for its end"
    with open(log, "a") as handle:
        handle.write(": 0.4\n")
    assert progress.moved()


def test_the_watchdog_kills_what_ignores_sigterm(tmp_path, monkeypatch):
    stubborn = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(1, flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
    )
    assert stubborn.stdout is not None
    stubborn.stdout.readline()
    clock = ProcessClock(settle=0.02)
    monkeypatch.setattr(tpu_rl_watch.os, "kill", clock.kill)
    try:
        assert stall_watchdog.watch(
            stubborn.pid, str(tmp_path / "none"), 1, str(tmp_path / "m"), clock=clock, sleep=clock.sleep
        )
        assert stubborn.wait(timeout=10) == -signal.SIGKILL
    finally:
        stubborn.kill()
    assert clock.now >= tpu_rl_watch.KILL_AFTER
    assert [sig for sig, _ in clock.signals[:2]] == [signal.SIGTERM, signal.SIGKILL]


def test_the_watchdog_interval_and_messages():
    looks = (stall_watchdog.LOOKS, stall_watchdog.LONGEST_LOOK)
    assert interval(7200, *looks) == 60 and interval(100, *looks) == 5 and interval(0.1, *looks) == 0.05
    assert stall_watchdog.stalled_for(7200).startswith("stalled: no training progress in train_rl's log for 2h00m ")
    assert "for 45m00s " in stall_watchdog.stalled_for(2700) and "for 9s " in stall_watchdog.stalled_for(9)
    assert not stall_watchdog.alive(2**22 + 12345) and stall_watchdog.alive(os.getpid())
    start = time.monotonic()
    assert not stall_watchdog.watch(2**22 + 12345, "/nonexistent", 1, "/nonexistent/m"), "nothing to watch"
    assert time.monotonic() - start < 1


FAULT = (
    3,
    "fault: run-worker-0-3-x: container pathways-worker ended OOMKilled (exit code 137), with no disruption in 1m00s",
)


# How a training attempt ends, by the evidence in its log: (error, hung, completed) -> the container's exit status.
# Each row is judged with and without shutdown noise (the same verdict), on a log as train_rl prints it: absl lines
# (MaxText 0.2.4 train_rl.py, tunix c4ec573), then what a real Python interpreter prints for the error and for the
# noise at exit (tracebacks of an atexit callback, a finalizer and a thread). docs/when-a-step-fails.md "How a
# training attempt ends" is this table (test_the_docs_table_is_this_one).
ERRORS = {
    "none": "",
    "slice lost": 'raise JaxRuntimeError("DATA_LOSS: Slice 1 is unhealthy: the TPU worker is gone")',
    "maybe lost, slice down": 'raise JaxRuntimeError("DEADLINE_EXCEEDED: pipe to worker 3 unreachable for 60s")',
    "maybe lost, slice up": 'raise JaxRuntimeError("INTERNAL: RET_CHECK failure (xla/service/hlo_sharding.cc:1123)")',
    "another error, slice down": 'raise JaxRuntimeError("UNAVAILABLE: Socket closed")',
    "another error, slice up": 'raise ValueError("Reference model parameters changed during training!")',
    "any error, a container's own fault": 'raise JaxRuntimeError("DATA_LOSS: Slice 0 is unhealthy")',
}
VERDICTS = {
    ("none", False, False): 143,  # no evidence: train_rl's status (a signal: the JobSet's restart, a deleted pod)
    ("none", True, False): STALLED_EXIT,
    **{
        (error, hung, False): code
        for error, code in (
            ("slice lost", SLICE_DOWN_EXIT),
            ("maybe lost, slice down", SLICE_DOWN_EXIT),
            ("maybe lost, slice up", 1),
            ("another error, slice down", SLICE_DOWN_EXIT),
            ("another error, slice up", 1),
            ("any error, a container's own fault", 1),
        )
        for hung in (False, True)
    },
    **{(error, hung, True): 0 for error in ERRORS for hung in (False, True)},
}
DOWN = (1, "down: worker run-worker-0-3-x of this attempt is gone")
UP = (0, "up: 8 of 8 workers Ready for 1m00s, none restarted or stopped")
SLICE = {
    "slice lost": UP,
    "maybe lost, slice down": DOWN,
    "maybe lost, slice up": UP,
    "another error, slice down": DOWN,
    "another error, slice up": UP,
    "any error, a container's own fault": FAULT,
}
"""What ``slice_state.py check`` answers for each row with an error (every one asks it; a lost slice's ``DATA_LOSS``
keeps its verdict on a slice that shows no fault)."""
RUN = [
    absl("Creating RL cluster...", where="train_rl.py:558"),
    absl("Setting up RL trainer...", where="train_rl.py:596"),
    absl("Starting RL training...", "W", "train_rl.py:799"),
    *(absl(f"Train step {step} training loss: 0.{step}  - training perplexity: 1.{step}") for step in range(1, 4)),
]
PROGRAM = """
import atexit, sys, threading
class JaxRuntimeError(Exception):
    pass
JaxRuntimeError.__module__ = "jax.errors"
sys.stdout.write(sys.argv[1])
sys.stdout.flush()
if sys.argv[2] == "noise":
    class ThreadPool:
        def __del__(self):
            raise RuntimeError("cannot schedule new futures after interpreter shutdown")
    pool = ThreadPool()
    def close_writer():
        raise OSError("the metrics writer is closed")
    atexit.register(close_writer)
    worker = threading.Thread(target=lambda: 1 / 0, name="rollout-0")
    worker.start()
    worker.join()
"""


@functools.cache
def printed(error: str, noise: bool, completed: bool) -> tuple[str, ...]:
    """What train_rl's log holds: the run's lines and what the interpreter printed as it ended."""
    lines = RUN + ([absl("RL Training Completed Successfully!", "W", "train_rl.py:810")] if completed else [])
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM + ERRORS[error], "".join(lines), "noise" if noise else "quiet"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
    )
    return tuple(done.stdout.splitlines())


@pytest.mark.parametrize("noise", [False, True], ids=["quiet exit", "shutdown noise"])
@pytest.mark.parametrize(("error", "hung", "completed"), list(VERDICTS), ids=lambda v: str(v))
def test_how_a_training_attempt_ends(error, hung, completed, noise):
    log = list(printed(error, noise, completed))
    assert (noise and "Exception ignored in atexit callback" in "\n".join(log)) or not noise
    stalled = None
    if hung:
        stalled = "stalled: no training progress in train_rl's log for 2h00m (tpu-rl:workflow.stallTimeout)"
        log.append(f"tpu-rl: {stalled}; stopping it")
        status = 128 + signal.SIGTERM
    else:
        status = 1 if error != "none" else 0 if completed else 128 + signal.SIGTERM

    def slice_check() -> tuple[int, str]:
        asked.append(error)
        return SLICE[error]

    asked: list[str] = []

    code, said = train_exit.verdict(status, log, stalled, CODES, None, slice_check)
    assert code == VERDICTS[error, hung, completed]
    assert asked == ([error] if error != "none" and not completed else []), "the slice is asked after every error"
    if code == 1:
        assert said, "a failure says why"
    if completed and (hung or error != "none"):
        assert "training completed (its last checkpoint saved)" in said and "recorded as done" in said
    if hung and error != "none" and not completed:
        assert "then hung until the stall watchdog ended it" in said


def test_a_trace_training_survived_is_not_the_error():
    """An exception logged with its traceback mid-run (a failed metrics write), then new steps: not what ended it."""
    handled = [*FRAMES, "jax.errors.JaxRuntimeError: DATA_LOSS: x", "", absl("Train step 9 training loss: 0.1")]
    assert _error(handled) is None
    assert judged(143, *handled, stalled="stalled: x") == STALLED_EXIT
    assert _error([*handled, *FRAMES, "ValueError: y"]) == "ValueError: y"


def test_a_chained_shutdown_trace_is_noise_too():
    noise = ["Exception ignored in: <function Pool.__del__ at 0x7f>", *FRAMES, "RuntimeError: a", ""]
    chained = [*noise, "During handling of the above exception, another exception occurred:", "", *FRAMES, "OSError: b"]
    died = [*FRAMES, "ValueError: the error", ""]
    assert _error([*died, *chained]) == "ValueError: the error"
    assert _error([*chained]) is None
    real_chain = [
        *died,
        "During handling of the above exception, another exception occurred:",
        "",
        *FRAMES,
        "KeyError: k",
    ]
    assert _error(real_chain) == "KeyError: k", "a chain of the real error is the error"


def test_the_docs_table_is_this_one():
    """docs/when-a-step-fails.md "How a training attempt ends" states VERDICTS, row for row ("any" error and "either"
    hang expand to each)."""
    text = (Path(__file__).parents[1] / "docs" / "when-a-step-fails.md").read_text()
    section = text.split("### How a training attempt ends", 1)[1].split("\n#", 1)[0]
    rows = [line.strip("|").split("|") for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    table: dict[tuple[str, bool, bool], int] = {}
    for error, hung, completed, code, _what in rows[1:]:
        errors = list(ERRORS) if error.strip() == "any" else [error.split("(")[0].strip()]
        hangs = [False, True] if hung.strip() == "either" else [hung.strip() == "yes"]
        exit_code = int(code.split("(")[1].split(":")[0]) if "status" in code else int(code)
        for name in errors:
            for each in hangs:
                table[name, each, completed.strip() == "yes"] = exit_code
    assert table == VERDICTS


# -- the slice: the watchdog's clock starts at its devices, and the judge asks it after a "maybe down" error ---------

BACKEND = "System Information: Jax Backend: PJRT C API (Pathways proxy)"
"""MaxText 0.2.5 ``max_utils.print_system_information``'s third line, once JAX's backend is up."""


def test_the_stall_clock_starts_when_the_devices_are_up(tmp_path, monkeypatch):
    """A restarted head's train_rl waits for its devices longer than the stall bound (100 s) but within its devices'
    bound (1000 s): not a stall. The stall clock starts at MaxText's backend line (look 60, 300 s in), so with no
    progress after it the attempt is ended 100 s later, not 100 s after it began."""
    log = tmp_path / "log"
    log.write_text(absl("Installed tunix ...", where="train_rl.py:348"))
    ended, when = watched(
        log, lambda tick: absl(BACKEND, where="max_utils.py:837") if tick == 60 else "", monkeypatch, devices=1000
    )
    assert ended and 60 * 5 + 100 <= when < 60 * 5 + 110
    assert (tmp_path / "log.marker").read_text().startswith("stalled: no training progress in train_rl's log for 1m40s")


def test_devices_that_never_come_up_are_ended_at_their_own_bound(tmp_path, monkeypatch):
    log = tmp_path / "log"
    log.write_text("")
    ended, when = watched(log, lambda tick: "", monkeypatch, devices=300, ticks=1000)
    assert ended and 300 <= when < 310
    assert (tmp_path / "log.marker").read_text() == (
        "stalled: train_rl's devices did not come up within 5m00s of its start (tpu-rl:kueue.recoveryTimeout)\n"
    )


@pytest.mark.parametrize(
    ("workers_ready", "when", "key"),
    [(True, 100, "tpu-rl:workflow.stallTimeout"), (False, 1000, "tpu-rl:kueue.recoveryTimeout")],
    ids=["workers-seen-ready", "workers-unread"],
)
def test_devices_that_hang_after_the_slice_was_seen_ready_cost_the_stall_bound(
    tmp_path, monkeypatch, workers_ready, when, key
):
    """Once the slice's wait saw every worker Ready, the devices answer in minutes: a start-up that hangs before them
    is ended at the stall bound (100 s here), not the recovery budget (1000 s), which stays the bound only while the
    workers could not be read (the slice may then still be away)."""
    log = tmp_path / "log"
    log.write_text("")
    bound, named = stall_watchdog.devices_bound(100, 1000, workers_ready)
    assert named == key
    ended, at = watched(log, lambda tick: "", monkeypatch, devices=bound, devices_key=named, ticks=1000)
    assert ended and when <= at < when * 1.1
    assert (tmp_path / "log.marker").read_text() == stall_watchdog.no_devices_for(when, key) + "\n"


def test_the_watchdog_takes_its_devices_bound_from_the_slices_baseline(tmp_path, monkeypatch):
    """The program's arguments as the training script gives them: the stall bound, the recovery budget and the
    baseline the slice's wait writes once every worker is Ready (its absence: the workers were not read)."""
    asked = []
    monkeypatch.setattr(stall_watchdog, "watch", lambda *args, **kwargs: asked.append(kwargs))
    baseline = tmp_path / "slice.json"
    args = ["4242", str(tmp_path / "log"), "7200", str(tmp_path / "m"), "16200", str(baseline)]
    stall_watchdog.main(args)
    baseline.write_text("{}")
    stall_watchdog.main(args)
    stall_watchdog.main(args[:4])
    assert asked == [
        {"devices_seconds": 16200.0, "devices_key": "tpu-rl:kueue.recoveryTimeout"},
        {"devices_seconds": 7200.0, "devices_key": "tpu-rl:workflow.stallTimeout"},
        {"devices_seconds": None, "devices_key": "tpu-rl:kueue.recoveryTimeout"},
    ]


def test_any_progress_line_also_starts_the_stall_clock(tmp_path, monkeypatch):
    """Should MaxText stop printing its backend line, the first progress line arms the stall bound instead."""
    log = tmp_path / "log"
    log.write_text("")
    ended, when = watched(
        log,
        lambda tick: absl("Creating RL cluster...", where="train_rl.py:498") if tick == 10 else "",
        monkeypatch,
        devices=10_000,
    )
    assert ended and 10 * 5 + 100 <= when < 10 * 5 + 110


MAYBE = [*FRAMES, "jax.errors.JaxRuntimeError: DEADLINE_EXCEEDED: pipe to worker 3 unreachable for 60s"]


@pytest.mark.parametrize(
    ("answer", "code", "says"),
    [
        ((1, "down: 3 of 8 workers Ready; run-worker-0-3-x: Pending: 0/4 nodes"), SLICE_DOWN_EXIT, "exiting 75"),
        ((0, "up: 8 of 8 workers Ready for 1m00s, none restarted or stopped"), 1, "not restarted"),
        ((2, "unknown: cannot read the slice's workers (HTTP 403 listing the pods)"), 1, "not restarted"),
    ],
    ids=["down", "up", "unknown"],
)
def test_a_maybe_down_error_is_judged_by_the_slice(answer, code, says):
    asked = []

    def slice_check() -> tuple[int, str]:
        asked.append(True)
        return answer

    found, line = train_exit.verdict(1, MAYBE, None, CODES, None, slice_check)
    assert (found, asked) == (code, [True])
    assert says in line and f"and its slice is {answer[1]}" in line and "\n" not in line


def test_a_containers_own_fault_fails_the_run_naming_it():
    """A worker's OOM kill (or a sidecar's crash), with no disruption, restarted in place: train_rl's error is not a
    lost slice, so the run fails at once (exit 1) with the container, reason and code, instead of spending every
    restart on the same fault."""
    code, line = train_exit.verdict(1, MAYBE, None, CODES, None, lambda: FAULT)
    assert code == 1 and "\n" not in line
    assert "(run-worker-0-3-x: container pathways-worker ended OOMKilled (exit code 137)" in line
    assert "not a lost slice, so not restarted" in line


@pytest.mark.parametrize(
    "error",
    [
        "jax.errors.JaxRuntimeError: UNAVAILABLE: Socket closed",
        "jax.errors.JaxRuntimeError: ABORTED: the collective was cancelled",
        "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace for the cause.",
        "ValueError: x",
    ],
    ids=["unavailable", "aborted", "sampler-engine", "python"],
)
def test_an_error_outside_pathways_utils_codes_is_judged_by_the_slice(error):
    """Any error train_rl died of asks the slice: a lost slice's evidence restarts it, a healthy or unreadable slice
    fails it at once with a line saying so (before, these failed with no line and no look)."""
    lines = [*FRAMES, error]
    assert train_exit.verdict(1, lines, None, CODES, None, lambda: DOWN)[0] == SLICE_DOWN_EXIT
    for answer in (UP, (2, "unknown: cannot read the slice's workers (HTTP 403 listing the pods)")):

        def check(answer: tuple[int, str] = answer) -> tuple[int, str]:
            return answer

        code, line = train_exit.verdict(1, lines, None, CODES, None, check)
        assert code == 1 and f"failed with {error[:60]}" in line
        assert f"and its slice is {answer[1]}: not restarted" in line


def test_the_slice_is_asked_after_every_error_and_never_without_one():
    asked = []

    def answer() -> tuple[int, str]:
        asked.append(True)
        return UP

    data_loss = [*FRAMES, "jax.errors.JaxRuntimeError: DATA_LOSS: x"]
    assert train_exit.verdict(1, data_loss, None, CODES, None, answer)[0] == SLICE_DOWN_EXIT, "pathways-utils' own"
    assert train_exit.verdict(1, data_loss, None, CODES, None, lambda: FAULT)[0] == 1, "unless a container's fault"
    for lines in ([], ["I1201 05:00:00.1 7 x.py:1] done"]):
        train_exit.verdict(1, lines, None, CODES, None, answer)
    assert train_exit.verdict(0, MAYBE, None, CODES, None, answer) == (0, "")
    assert len(asked) == 1, "no error, no look (a signal, success)"
    hung = train_exit.verdict(143, MAYBE, "stalled: quiet", CODES, None, lambda: (1, "down: gone"))
    assert hung[0] == SLICE_DOWN_EXIT, "an error the run hung after is judged by the slice too"


def test_the_judge_runs_the_slice_check_as_the_container_does(tmp_path):
    """``main`` with the slice's program, account, workers and baseline runs ``slice_state.py check`` and takes its
    answer (a stand-in that says what it was asked); one that cannot start is 'unknown'."""
    log = tmp_path / "log"
    log.write_text("\n".join(MAYBE))
    stand_in = tmp_path / "slice_state.py"
    stand_in.write_text("import sys\nprint('noise')\nprint('down: asked ' + ' '.join(sys.argv[1:]))\nsys.exit(1)\n")
    args = [str(log), "1", str(tmp_path / "m"), "75", "76", str(tmp_path / "d"), "77"]
    slice_args = [str(stand_in), "/account", "8", str(tmp_path / "baseline.json")]
    assert train_exit.main([*args, *slice_args]) == SLICE_DOWN_EXIT
    assert train_exit.ask_slice(*slice_args) == (1, f"down: asked check /account 8 60 {tmp_path / 'baseline.json'}")
    assert train_exit.ask_slice(str(tmp_path / "missing.py"), "/a", "8", "/b")[0] == 2
    assert train_exit.main(args) == 1, "no slice program: the slice is unknown, the error fails the run"


@pytest.mark.parametrize("status", [SLICE_DOWN_EXIT, STALLED_EXIT, DRILL_EXIT])
def test_train_rls_own_exit_is_never_taken_for_one_of_the_scripts_verdicts(tmp_path, status):
    """train_rl (or anything under it) that itself exits 75, 76 or 77 with none of their evidence (no error in its
    log, no stall marker, no drill marker) fails the run: the JobSet's rules would otherwise restart it as a lost slice,
    a stall, or the drill without bound (77 restarts without counting). Only the drill's marker makes 77."""
    log, marker, drill = tmp_path / "log", tmp_path / "stalled", tmp_path / "drilled"
    log.write_text(absl("Train step 3 training loss: 0.5"))
    args = [str(log), str(status), str(marker), "75", "76", str(drill), str(DRILL_EXIT)]
    assert train_exit.main(args) == 1
    assert train_exit.verdict(status, [], None, CODES, None, None, (DRILL_EXIT,)) == (1, train_exit.kept_line(status))
    drill.write_text("restart drill: checkpoint 10 is committed\n")
    assert train_exit.main([*args[:1], "143", *args[2:]]) == DRILL_EXIT, "the drill's own end"
    assert train_exit.main(args) == DRILL_EXIT, "its marker decides when nothing else explains the end"


def test_a_judge_that_breaks_never_passes_on_a_kept_code(tmp_path):
    source = str(container_program(tmp_path, "train_exit.py"))
    unreadable = str(tmp_path)  # a stall marker that is a folder: the judge fails reading it
    for status, code in ((DRILL_EXIT, 1), (SLICE_DOWN_EXIT, 1), (7, 7)):
        broken = subprocess.run(
            [sys.executable, source, str(tmp_path / "log"), str(status), unreadable, "75", "76", "d", "77"],
            capture_output=True,
            text=True,
        )
        assert broken.stdout == f"{code}\n" and "could not judge train_rl's exit" in broken.stderr
