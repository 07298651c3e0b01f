"""`make test`'s two halves (tests/fast_tier.py): how the files are cut, what a run prints and returns, its bound, and
the seconds each file is weighed by (tests/file_seconds.py)."""

from __future__ import annotations

import functools
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests import fast_tier, file_seconds
from tests.file_groups import GROUPS, unit


def test_the_halves_hold_every_file_once_and_each_group_whole():
    files = fast_tier.test_files()
    first, second = fast_tier.halves(files, fast_tier.recorded(fast_tier.SECONDS.read_text()))
    assert sorted(first + second) == files and not set(first) & set(second)
    for group in set(GROUPS.values()):
        members = {path for path, name in GROUPS.items() if name == group}
        assert members <= set(first) or members <= set(second), group
    assert set(GROUPS) <= set(files), "tests/file_groups.py names only test files that exist"


def test_the_halves_differ_by_no_more_than_the_heaviest_unit():
    seconds = {"suite/test_a.py": 5.0, "suite/test_b.py": 4.0, "suite/test_c.py": 3.0, "suite/test_d.py": 3.0}
    first, second = fast_tier.halves(list(seconds), seconds)
    assert (first, second) == (["suite/test_a.py", "suite/test_d.py"], ["suite/test_b.py", "suite/test_c.py"])


def test_a_group_weighs_as_its_files_together(monkeypatch):
    monkeypatch.setitem(GROUPS, "suite/test_b.py", "pair")
    monkeypatch.setitem(GROUPS, "suite/test_c.py", "pair")
    seconds = {"suite/test_a.py": 5.0, "suite/test_b.py": 3.0, "suite/test_c.py": 3.0}
    assert fast_tier.halves(list(seconds), seconds) == (["suite/test_b.py", "suite/test_c.py"], ["suite/test_a.py"])
    assert unit("suite/test_b.py") == "pair" and unit("suite/test_a.py") == "suite/test_a.py"


def test_a_file_not_recorded_weighs_the_median_and_a_recorded_file_gone_weighs_nothing():
    seconds = {"suite/test_a.py": 1.0, "suite/test_b.py": 2.0, "suite/test_c.py": 9.0, "suite/test_gone.py": 50.0}
    files = ["suite/test_a.py", "suite/test_b.py", "suite/test_c.py", "suite/test_new.py"]
    # The median of what is recorded (5.5): the new file with a and b (8.5) against c (9).
    assert fast_tier.halves(files, seconds) == (
        ["suite/test_c.py"],
        ["suite/test_a.py", "suite/test_b.py", "suite/test_new.py"],
    )
    assert fast_tier.halves(["suite/test_x.py", "suite/test_y.py"], {}) == (["suite/test_x.py"], ["suite/test_y.py"])


def test_recorded_lines_add_up_per_file_and_skip_comments():
    text = "# header\n1.5 suite/test_a.py\n\n0.25 suite/test_b.py\n2 suite/test_a.py\n"
    assert fast_tier.recorded(text) == {"suite/test_a.py": 3.5, "suite/test_b.py": 0.25}


@pytest.mark.parametrize(
    ("codes", "status"),
    [
        ((0, 0), 0),
        ((0, 5), 0),  # one half's files all deselected
        ((5, 5), 5),
        ((1, 0), 1),
        ((0, 2), 2),
        ((5, 1), 1),
        ((4, 1), 4),  # the first failing half's
        ((-9, 0), 1),  # killed by a signal
    ],
)
def test_the_status_is_the_first_failing_halfs(codes, status):
    assert fast_tier.combined(codes) == status


class _Process:
    def __init__(self, ends_at: float | None, clock: list[float]) -> None:
        self.ends_at, self.clock, self.killed = ends_at, clock, False

    def poll(self) -> int | None:
        return 0 if self.killed or (self.ends_at is not None and self.clock[0] >= self.ends_at) else None

    def kill(self) -> None:
        self.killed = True

    def wait(self) -> int:
        return 0


def _clocked(*ends: float | None) -> tuple[list[_Process], list[float], dict]:
    now = [0.0]
    processes = [_Process(end, now) for end in ends]

    def pause(seconds: float) -> None:
        now[0] += seconds

    return processes, now, {"clock": lambda: now[0], "pause": pause}


def test_the_wait_gives_each_halfs_seconds():
    processes, _, clock = _clocked(3.0, 1.0)
    took = fast_tier.wait(processes, 60, **clock)
    assert took == pytest.approx([3.0, 1.0], abs=0.11)
    assert not any(process.killed for process in processes)


def test_a_half_past_the_bound_ends_the_run_with_both_killed():
    processes, now, clock = _clocked(2.0, None)
    assert fast_tier.wait(processes, 30, **clock) is None
    assert all(process.killed for process in processes) and 30 < now[0] < 31


FAKE_PYTEST = """import os, signal, subprocess, sys, time
files = [word for word in sys.argv[1:] if word.startswith("suite/")]
if "suite/test_slow_first.py" in files:
    time.sleep(0.1)  # the first half ends last: its output still comes first
if "suite/test_hangs.py" in files:
    time.sleep(60)
if "suite/test_leaves_a_process.py" in files:
    os.environ["LEFT"] and open(os.environ["LEFT"], "w").write(str(subprocess.Popen(["sleep", "60"]).pid))
if "suite/test_waits_for_ctrl_c.py" in files:
    signal.signal(signal.SIGINT, lambda *_: (print("interrupted:", " ".join(files)), sys.exit(2)))
    open(os.environ["READY"], "w").close()
    time.sleep(10)
print("half of", len(files), "files:", " ".join(sys.argv[1:3]))
sys.exit(1 if "suite/test_fails.py" in files else 0)
"""


def test_a_run_prints_the_first_half_then_the_second_then_one_line_and_returns_the_failure(
    tmp_path, monkeypatch, capfd
):
    files = ["suite/test_fails.py", "suite/test_other.py", "suite/test_slow_first.py"]
    monkeypatch.setattr(fast_tier, "test_files", lambda: files)
    script = tmp_path / "pytest.py"
    script.write_text(FAKE_PYTEST)
    seconds = {"suite/test_slow_first.py": 9.0, "suite/test_fails.py": 4.0, "suite/test_other.py": 4.0}
    status = fast_tier.run(["-q", "-x"], [sys.executable, str(script)], seconds)
    lines = capfd.readouterr().out.splitlines()
    assert lines[:2] == ["half of 1 files: -q -x", "half of 2 files: -q -x"]
    assert lines[2].startswith("fast tier in two halves: 1 files in ") and lines[2].endswith("2 files in 0 s (exit 1)")
    assert len(lines) == 3 and status == 1


def test_the_plugin_adds_each_files_seconds_in_one_write(tmp_path, monkeypatch):
    target = tmp_path / "seconds.txt"
    target.write_text("1.000 suite/test_other_half.py\n")
    monkeypatch.setenv(file_seconds.SECONDS_FILE, str(target))
    monkeypatch.setattr(file_seconds, "_seconds", type(file_seconds._seconds)(float))
    for nodeid, duration in [("suite/test_b.py::t", 0.5), ("suite/test_a.py::t[x]", 0.25), ("suite/test_b.py::u", 1.0)]:
        file_seconds.pytest_runtest_logreport(SimpleNamespace(nodeid=nodeid, duration=duration))
    file_seconds.pytest_sessionfinish(None)
    assert target.read_text() == "1.000 suite/test_other_half.py\n0.250 suite/test_a.py\n1.500 suite/test_b.py\n"


def test_a_recording_rewrites_the_seconds_only_when_the_run_passes(tmp_path, monkeypatch):
    monkeypatch.delenv(file_seconds.SECONDS_FILE, raising=False)  # set when this very run records
    seconds = tmp_path / "file-seconds.txt"
    seconds.write_text("7.00 suite/test_a.py\n")
    monkeypatch.setattr(fast_tier, "SECONDS", seconds)
    monkeypatch.setattr(fast_tier, "ROOT", tmp_path)
    monkeypatch.setattr(fast_tier, "test_files", lambda: ["suite/test_a.py", "suite/test_slow_only.py"])
    calls = []

    def run(arguments, command, weights, environment, status=0):
        calls.append((arguments, command[-2:], weights))
        with open(environment[file_seconds.SECONDS_FILE], "a") as handle:
            handle.write("2.500 suite/test_a.py\n")
        return status

    monkeypatch.setattr(fast_tier, "run", run)
    assert fast_tier.main(["--record", "-q"]) == 0
    assert calls == [(["-q"], ["-p", "tests.file_seconds"], {"suite/test_a.py": 7.0})]
    assert seconds.read_text() == fast_tier.HEADER + "2.50 suite/test_a.py\n0.00 suite/test_slow_only.py\n"
    monkeypatch.setattr(fast_tier, "run", functools.partial(run, status=1))
    assert fast_tier.main(["--record"]) == 1
    assert "2.50 suite/test_a.py" in seconds.read_text(), "a failed run records nothing"
    assert file_seconds.SECONDS_FILE not in file_seconds.os.environ, "only the halves' environment names the file"


def test_a_ctrl_c_interrupts_both_halves_waits_for_them_and_says_so(tmp_path, monkeypatch, capfd):
    """The terminal's Ctrl-C reaches this runner alone (each half has a session of its own): it interrupts each
    half, which ends printing what it ran."""
    monkeypatch.setattr(fast_tier, "test_files", lambda: ["suite/test_a.py", "suite/test_waits_for_ctrl_c.py"])
    monkeypatch.setenv("READY", str(tmp_path / "ready"))
    script = tmp_path / "pytest.py"
    script.write_text(FAKE_PYTEST)
    real, calls = fast_tier.wait, []

    def interrupted(processes, timeout):
        calls.append(timeout)
        if len(calls) == 1:
            deadline = time.monotonic() + 10
            # The first half has ended, and the second, waiting for a Ctrl-C, has set its handler.
            while (processes[0].poll() is None or not (tmp_path / "ready").exists()) and time.monotonic() < deadline:
                time.sleep(0.01)
            raise KeyboardInterrupt
        return real(processes, timeout)

    monkeypatch.setattr(fast_tier, "wait", interrupted)
    status = fast_tier.run(["-q"], [sys.executable, str(script)], {})
    assert capfd.readouterr().out.splitlines() == [
        "half of 1 files: -q suite/test_a.py",
        "interrupted: suite/test_waits_for_ctrl_c.py",
        "fast tier: interrupted",
    ]
    assert status == 2 and calls == [fast_tier.TIMEOUT, fast_tier.INTERRUPTED]


def test_what_a_half_left_running_ends_with_the_run(tmp_path, monkeypatch):
    monkeypatch.setattr(fast_tier, "test_files", lambda: ["suite/test_a.py", "suite/test_leaves_a_process.py"])
    monkeypatch.setenv("LEFT", str(tmp_path / "left"))
    script = tmp_path / "pytest.py"
    script.write_text(FAKE_PYTEST)
    assert fast_tier.run(["-q"], [sys.executable, str(script)], {}) == 0
    left = int((tmp_path / "left").read_text())
    deadline = time.monotonic() + 10
    while Path(f"/proc/{left}").exists() and "Z" not in Path(f"/proc/{left}/stat").read_text().split()[2]:
        assert time.monotonic() < deadline, "the sleep a half started still runs"
        time.sleep(0.01)


def test_a_second_ctrl_c_kills_both_halves_at_once(tmp_path, monkeypatch, capfd):
    monkeypatch.setattr(fast_tier, "test_files", lambda: ["suite/test_a.py", "suite/test_hangs.py"])
    script = tmp_path / "pytest.py"
    script.write_text(FAKE_PYTEST)
    started = []

    def interrupted(processes, timeout):
        started.extend(processes)
        raise KeyboardInterrupt

    monkeypatch.setattr(fast_tier, "wait", interrupted)
    assert fast_tier.run(["-q"], [sys.executable, str(script)], {}) == 2
    assert capfd.readouterr().out.splitlines()[-1] == "fast tier: interrupted"
    assert all(process.poll() is not None for process in started), "the hung half was killed, not left running"
