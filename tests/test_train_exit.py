"""The training script's judge of train_rl's exit (``workloads/run/train_exit.py``) and its stall watchdog
(``workloads/run/stall_watchdog.py``) as functions; ``test_commands.py`` runs both through bash. Pure."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.names import SLICE_DOWN_EXIT, STALLED_EXIT
from workloads.run import stall_watchdog, train_exit

pytestmark = pytest.mark.pure

CODES = (SLICE_DOWN_EXIT, STALLED_EXIT)
FRAMES = ["Traceback (most recent call last):", '  File "train_rl.py", line 812, in main', "    rl_train(config)"]


def judged(status: int, *lines: str, stalled: str | None = None) -> int:
    return train_exit.verdict(status, list(lines), stalled, CODES)[0]


def test_the_exception_train_rl_died_of_is_the_last_tracebacks():
    first = [*FRAMES, "jax.errors.JaxRuntimeError: DATA_LOSS: lost", "", "During handling of the above exception:"]
    assert train_exit.final_error([*first, *FRAMES, "ValueError: x"]) == "ValueError: x"
    assert train_exit.final_error([*FRAMES, "jax.errors.JaxRuntimeError: INTERNAL: a", "  b", "", "c"]) == (
        "jax.errors.JaxRuntimeError: INTERNAL: a\n  b"
    )
    assert train_exit.final_error(["E1 x.py:1] jax.errors.JaxRuntimeError: DATA_LOSS: x", "more", "", "later"]) == (
        "jax.errors.JaxRuntimeError: DATA_LOSS: x\nmore"
    ), "no traceback: the last JaxRuntimeError line (from the error on) and its message"
    assert judged(1, "E1 x.py:1] jax.errors.JaxRuntimeError: DATA_LOSS: x") == SLICE_DOWN_EXIT
    assert train_exit.final_error(["I1201 train step 3", "done"]) is None
    assert train_exit.final_error([*FRAMES]) is None, "a traceback cut short names no exception"
    # A log line between the frames is neither `Name: message` nor `module.Name: message`.
    assert train_exit.final_error([*FRAMES, "I1201 05:00:00.1 7 x.py:1] y: z", "KeyError: 'k'"]) == "KeyError: 'k'"


def test_a_long_message_is_judged_up_to_a_bound():
    message = [f"  line {i}" for i in range(100)]
    error = train_exit.final_error([*FRAMES, "jax.errors.JaxRuntimeError: UNKNOWN: x", *message, "  DATA_LOSS"])
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
        "'may or may not be due to slice down': not restarted, since a deterministic error would fail the same way; "
        "the next `pulumi up` retries the run from its last checkpoint"
    )
    assert train_exit.verdict(1, [*FRAMES, "ValueError: x"], None, CODES) == (1, "")
    assert train_exit.verdict(0, [], "stalled: quiet", CODES) == (
        STALLED_EXIT,
        f"stalled: quiet; exiting {STALLED_EXIT} so the JobSet restarts it from its last checkpoint",
    ), "the watchdog's note wins over train_rl's status (143 after its SIGTERM)"


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
    assert train_exit.main([str(log), "143", str(marker), "75", "76"]) == 76
    assert train_exit.main([str(log), "oops", str(tmp_path / "no-marker"), "75", "76"]) == 75, "status read as 1"


def test_the_judge_as_the_container_runs_it_prints_the_status_and_keeps_it_when_it_breaks(tmp_path):
    source = Path(train_exit.__file__).read_text()
    log = tmp_path / "log"
    log.write_text("\n".join([*FRAMES, "jax.errors.JaxRuntimeError: DATA_LOSS: x"]))
    done = subprocess.run(
        [sys.executable, "-c", source, str(log), "1", str(tmp_path / "m"), "75", "76"], capture_output=True, text=True
    )
    assert done.stdout == "75\n" and "lost a TPU slice" in done.stderr
    broken = subprocess.run([sys.executable, "-c", source, str(log), "7"], capture_output=True, text=True)
    assert broken.stdout == "7\n" and "could not judge train_rl's exit (ValueError)" in broken.stderr


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        time.sleep(0.002)  # the real process gets the time to act on a signal


def test_the_watchdog_ends_a_quiet_train_rl_and_leaves_a_growing_one(tmp_path, monkeypatch):
    log, marker = tmp_path / "log", tmp_path / "marker"
    log.write_text("start\n")
    quiet = subprocess.Popen(["sleep", "60"])
    clock = Clock()
    sent: list[tuple[int, float]] = []
    real_kill = os.kill

    def kill(pid: int, sig: int) -> None:
        if sig:
            sent.append((sig, clock.now))
        real_kill(pid, sig)

    monkeypatch.setattr(stall_watchdog.os, "kill", kill)
    try:
        assert stall_watchdog.watch(quiet.pid, str(log), 100, str(marker), clock=clock, sleep=clock.sleep)
        assert quiet.wait(timeout=10) in (-signal.SIGTERM, -signal.SIGKILL)
    finally:
        quiet.kill()
    assert sent[0][0] == signal.SIGTERM and 100 <= sent[0][1] < 105, "once the bound passed, looking every 5 s"
    assert marker.read_text() == "stalled: no new line in train_rl's log for 1m40s (tpu-rl:workflow.stallTimeout)\n"
    assert log.read_text().endswith(
        "tpu-rl: stalled: no new line in train_rl's log for 1m40s (tpu-rl:workflow.stallTimeout); stopping it\n"
    )

    busy = subprocess.Popen(["sleep", "60"])
    clock, writes = Clock(), 0

    def grow(seconds: float) -> None:
        nonlocal writes
        clock.sleep(seconds)
        with open(log, "a") as handle:
            handle.write("x\n")
        writes += 1
        if writes == 200:
            busy.kill()
            busy.wait()

    marker.unlink()
    assert not stall_watchdog.watch(busy.pid, str(log), 100, str(marker), clock=clock, sleep=grow)
    assert not marker.exists() and clock.now >= 200 * 5


def test_the_watchdog_kills_what_ignores_sigterm(tmp_path):
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
    clock = Clock()
    try:
        assert stall_watchdog.watch(
            stubborn.pid, str(tmp_path / "none"), 1, str(tmp_path / "m"), clock=clock, sleep=clock.sleep
        )
        assert stubborn.wait(timeout=10) == -signal.SIGKILL
    finally:
        stubborn.kill()
    assert clock.now >= stall_watchdog.KILL_AFTER


def test_the_watchdog_interval_and_messages():
    assert (
        stall_watchdog.interval(7200) == 60
        and stall_watchdog.interval(100) == 5
        and stall_watchdog.interval(0.1) == 0.05
    )
    assert stall_watchdog.stalled_for(7200).startswith("stalled: no new line in train_rl's log for 2h00m ")
    assert "for 45m00s " in stall_watchdog.stalled_for(2700) and "for 9s " in stall_watchdog.stalled_for(9)
    assert not stall_watchdog.alive(2**22 + 12345) and stall_watchdog.alive(os.getpid())
    assert stall_watchdog.size("/nonexistent") == -1
    start = time.monotonic()
    assert not stall_watchdog.watch(2**22 + 12345, "/nonexistent", 1, "/nonexistent/m"), "nothing to watch"
    assert time.monotonic() - start < 1
