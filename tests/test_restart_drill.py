"""The restart drill's watcher (``workloads/container/restart_drill.py``) on a fake clock against a live process and
its log in the format tunix prints it, its checkpoint scan through a program as the container runs it, and the
training script's judge of an attempt the drill ended (``workloads/container/train_exit.py``); ``test_commands.py``
runs the whole training script through bash with the drill on. Pure."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.names import DRILL_EXIT, SLICE_DOWN_EXIT, STALLED_EXIT
from tests.container_files import container_program
from tests.process_clock import ProcessClock
from workloads.container import restart_drill, tpu_rl_watch, train_exit
from workloads.container.tpu_rl_watch import KILL_AFTER

pytestmark = pytest.mark.pure

ROOT = "gs://b/gemma4-26b/train/6c750b4e3d/rl/checkpoints/actor/"


def step(n: int) -> str:
    """tunix's line for a training step (``peft_trainer.py`` ``_log_metrics``) through absl."""
    return f"I1201 05:{n % 60:02d}:03.000000 1 peft_trainer.py:736] Train step {n} training loss: 0.5\n"


def drilled(tmp_path: Path, lines: list[str], committed: dict[int, int], final: int = 50, monkeypatch=None):
    """Watch a live process while ``lines[i]`` is appended to its log before look i; the scan answers
    ``committed[i]`` (the newest committed checkpoint at look i, else none): (ended, scans, signals, log, marker)."""
    log, marker = tmp_path / "train.log", tmp_path / "drilled"
    log.write_text("tpu-rl run: {}\n")
    child = subprocess.Popen(["sleep", "60"])
    clock, looks, scans, sent, ours = ProcessClock(), [0], [], [], []

    def look(seconds: float) -> None:
        clock.sleep(seconds)
        if looks[0] < len(lines):
            with open(log, "a") as handle:
                handle.write(lines[looks[0]])
        elif looks[0] > len(lines) + 5:
            ours.append(True)  # train_rl ends by itself: not a signal of the drill's
            child.kill()
            child.wait()
        looks[0] += 1

    def scan() -> int | None:
        scans.append(looks[0] - 1)
        return committed.get(looks[0] - 1)

    def kill(pid: int, sig: int) -> None:
        if sig and not ours:
            sent.append(sig)
        clock.kill(pid, sig)

    assert monkeypatch is not None
    monkeypatch.setattr(tpu_rl_watch.os, "kill", kill)
    try:
        ended = restart_drill.watch(child.pid, str(log), final, str(marker), scan, clock=clock, sleep=look)
    finally:
        ours.append(True)
        child.kill()
        child.wait()
    return ended, scans, sent, log.read_text(), marker.read_text() if marker.exists() else None


def test_the_drill_ends_a_fresh_attempt_once_its_first_checkpoint_is_committed(tmp_path, monkeypatch):
    """Checkpoint 10 commits while step 11 runs; the look after step 12 finds it: the drill writes its marker and its
    line, and stops train_rl as a disruption would (SIGTERM)."""
    lines = [step(n) for n in range(1, 13)]
    ended, scans, sent, log, marker = drilled(tmp_path, lines, {11: 10}, monkeypatch=monkeypatch)
    assert ended and sent == [signal.SIGTERM]
    assert scans == list(range(12)), "a scan on each new training step, none after the drill"
    line = restart_drill.drill_line(10)
    assert line == (
        "tpu-rl: restart drill: checkpoint 10 is committed; ending this attempt once so that the JobSet restarts it "
        "on the same nodes (tpu-rl:workflow.restartDrill)"
    )
    assert line.startswith(restart_drill.SAYS) and log.endswith(line + "\n")
    assert marker == line.removeprefix("tpu-rl: ") + "\n"


def test_the_drill_scans_only_on_a_new_training_step(tmp_path, monkeypatch):
    """Other lines, and a step seen before (a retry loop), start no scan: the scan is a few GCS requests."""
    noise = "W1201 05:00:03.000000 9 vllm.py:1] engine warming up\n"
    lines = [noise, step(1), noise, step(1), step(2), noise + noise]
    ended, scans, sent, _log, marker = drilled(tmp_path, lines, {}, monkeypatch=monkeypatch)
    assert not ended and sent == [] and marker is None
    assert scans == [1, 4]


def test_no_drill_when_the_first_checkpoint_is_the_runs_last(tmp_path, monkeypatch):
    """A run whose first checkpoint is its final step is about to complete: nothing is left to restart for."""
    ended, _scans, sent, log, marker = drilled(tmp_path, [step(50)], {0: 50}, final=50, monkeypatch=monkeypatch)
    assert not ended and sent == [] and marker is None
    assert log.endswith("tpu-rl: no restart drill: the first checkpoint, step 50, is the run's last\n")
    assert restart_drill.SAYS not in log, "the report would take the next attempt for the drill's restart"


def test_the_drill_kills_what_ignores_sigterm(tmp_path, monkeypatch):
    stubborn = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "print('ready', flush=True)\ntime.sleep(60)",
        ],
        stdout=subprocess.PIPE,
    )
    assert stubborn.stdout is not None and stubborn.stdout.readline() == b"ready\n"
    log, marker = tmp_path / "log", tmp_path / "marker"
    log.write_text(step(11))
    clock = ProcessClock(settle=0.02)
    monkeypatch.setattr(tpu_rl_watch.os, "kill", clock.kill)
    try:
        assert restart_drill.watch(stubborn.pid, str(log), 50, str(marker), lambda: 10, clock=clock, sleep=clock.sleep)
        assert stubborn.wait(timeout=10) == -signal.SIGKILL
    finally:
        stubborn.kill()
        stubborn.wait()
    assert KILL_AFTER <= clock.now < KILL_AFTER + restart_drill.LOOK_SECONDS + 1
    assert [sig for sig, _ in clock.signals[:2]] == [signal.SIGTERM, signal.SIGKILL]


@pytest.mark.parametrize(
    ("program", "expected"),
    [
        (f"print('{ROOT}10/model_params/')", 10),
        (
            f"import sys; print('tpu-rl: no complete checkpoint under {ROOT}', file=sys.stderr); sys.exit(3)",
            None,
        ),
        ("import sys; sys.exit(1)", None),
        (f"print('{ROOT}x/model_params/')", None),
        ("print('gs://elsewhere/10/model_params/')", None),
        (f"import time; time.sleep(30); print('{ROOT}10/model_params/')", None),
    ],
    ids=["found", "none", "failed", "not-a-step", "another-root", "hung"],
)
def test_the_scan_reads_what_checkpoint_scan_prints(tmp_path, program, expected):
    """``checkpoint_scan.py``'s contract: exit 0 with ``<root><step>/model_params/``, exit 3 when there is none;
    anything else, or a scan past its bound, says nothing now (the next training step asks again): the hung scan
    would find checkpoint 10 after 30 s, its bound ends it first."""
    path = tmp_path / "checkpoint_scan.py"
    path.write_text(program)
    bound = 0.05 if "time.sleep" in program else 30
    started = time.monotonic()
    assert restart_drill.scan_with(str(path), ROOT, timeout=bound)() == expected
    assert time.monotonic() - started < 10, "a scan past its bound is ended there"


def test_the_scan_is_the_checkpoint_scan_beside_it():
    """The container runs ``python3 /tpu-rl/restart_drill.py``: its scan is ``/tpu-rl/checkpoint_scan.py``, the file
    of the same ConfigMap the training script's resume check and the export run."""
    source = Path(restart_drill.__file__).read_text()
    assert 'os.path.join(os.path.dirname(os.path.abspath(__file__)), "checkpoint_scan.py")' in source
    assert (Path(restart_drill.__file__).parent / "checkpoint_scan.py").exists()


NOTE = restart_drill.drill_line(10).removeprefix("tpu-rl: ")
CODES = (SLICE_DOWN_EXIT, STALLED_EXIT)
TRACE = [
    "Traceback (most recent call last):",
    '  File "/deps/src/maxtext/trainers/post_train/rl/train_rl.py", line 790, in rl_train',
]


@pytest.mark.parametrize(
    ("status", "lines", "stalled", "expected"),
    [
        (143, [step(11)], None, DRILL_EXIT),  # SIGTERM, nothing else: the drill's restart
        (137, [step(11)], None, DRILL_EXIT),  # killed past KILL_AFTER
        (0, [step(50)], None, 0),  # it exited 0 on its own first
        (143, ["W1201 06:00:00.000000 1 train_rl.py:768] RL Training Completed Successfully!"], None, 0),
        (1, [*TRACE, "ValueError: bad batch"], None, 1),  # it died of its own error first
        (1, [*TRACE, "jax.errors.JaxRuntimeError: DATA_LOSS: lost"], None, SLICE_DOWN_EXIT),
        (143, [step(11)], "stalled: no training progress", STALLED_EXIT),
    ],
    ids=["sigterm", "sigkill", "exited-0", "completed", "error", "slice-down", "stalled"],
)
def test_an_attempt_the_drill_ended_exits_drill_exit_when_nothing_else_explains_its_end(
    status, lines, stalled, expected
):
    code, says = train_exit.verdict(status, lines, stalled, CODES, (NOTE, DRILL_EXIT))
    assert code == expected
    if expected == DRILL_EXIT:
        assert says == (
            f"{NOTE}; exiting {DRILL_EXIT} so the JobSet restarts it once from that checkpoint, not counted against "
            "tpu-rl:workflow.maxRestarts"
        )
    assert train_exit.verdict(status, lines, stalled, CODES)[0] == (status if expected == DRILL_EXIT else expected)


def test_the_judge_as_the_container_runs_it_reads_the_drills_marker(tmp_path):
    log, marker = tmp_path / "log", tmp_path / "drilled"
    log.write_text(step(11))
    source = str(container_program(tmp_path, "train_exit.py"))
    argv = [str(log), "143", str(tmp_path / "stalled"), "75", "76", str(marker), str(DRILL_EXIT)]
    done = subprocess.run([sys.executable, source, *argv], capture_output=True, text=True)
    assert done.stdout == "143\n", "no marker: train_rl's status"
    marker.write_text(NOTE + "\n")
    done = subprocess.run([sys.executable, source, *argv], capture_output=True, text=True)
    assert done.stdout == f"{DRILL_EXIT}\n" and f"tpu-rl: {NOTE}; exiting {DRILL_EXIT}" in done.stderr
