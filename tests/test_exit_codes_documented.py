"""The exit codes docs/troubleshooting.md "Exit codes" promises, checked by running each command of its table as the
shell runs it, in a checkout with the example stack files, no kubeconfig and no Google credentials: ``tpu-rl`` is the
checkout's (tools/tpu_rl.py), ``make`` the Makefile's (its install left out), and a fake ``pulumi`` records every
call, so that a command whose line says no pulumi runs is seen to run none."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fake_pulumi import CLEAN, calls, checkout, install
from tools.stack_files import ROOT

PAGE = ROOT / "docs" / "troubleshooting.md"
ROW = re.compile(r"^\| `(?P<command>[^`]+)` \| (?P<code>\d+) \| (?P<why>[^|]+) \|$", re.M)
MAKE = shutil.which("make")


def rows() -> list[tuple[str, int, str]]:
    """The table of the page's section "Exit codes": (command, exit code, why)."""
    section = PAGE.read_text().partition("\n## Exit codes\n")[2].partition("\n## ")[0]
    return [(m["command"], int(m["code"]), m["why"].strip()) for m in ROW.finditer(section)]


def shell(tmp_path: Path, command: str) -> tuple[subprocess.CompletedProcess[str], list[dict]]:
    """``command`` run by ``sh`` in a checkout of its own; the run and the fake pulumi's calls."""
    root = checkout(tmp_path)
    folder = tmp_path / "bin"
    install(folder)
    (folder / "tpu-rl").write_text(f'#!/bin/sh\nexec {sys.executable} -m tools.tpu_rl "$@"\n')
    (folder / "make").write_text(f'#!/bin/sh\nexec {MAKE} --no-print-directory -o .venv/.installed "$@"\n')
    for name in ("tpu-rl", "make"):
        (folder / name).chmod(0o755)
    environment = {k: v for k, v in os.environ.items() if k not in (*CLEAN, "KUBECONFIG", "CLOUDSDK_CONFIG")}
    environment.update(
        PATH=f"{folder}:/usr/bin:/bin",
        HOME=str(tmp_path / "home"),  # no gcloud login, no ~/.kube/config
        PULUMI_LOG=str(tmp_path / "pulumi.log"),
        PULUMI_HOME=str(tmp_path / "pulumi-home"),
        PYTHONPATH=str(root),
    )
    done = subprocess.run(["sh", "-c", command], cwd=root, env=environment, capture_output=True, text=True, timeout=60)
    return done, calls(tmp_path / "pulumi.log")


def test_the_page_has_the_table_this_runs():
    commands = [command for command, _, _ in rows()]
    assert len(commands) >= 6
    assert {"tpu-rl plan --stack dev", "tpu-rl status --stack dev", "make status STACK=dev"} <= set(commands)
    assert any(c.startswith("tpu-rl pulumi") for c in commands), "a pulumi command whose home cannot be decided"


@pytest.mark.slow  # each command run for real, through make or the console script: 0.3-2.5 s each
@pytest.mark.skipif(MAKE is None, reason="make is not installed")
@pytest.mark.parametrize(("command", "code", "why"), rows(), ids=[c for c, _, _ in rows()])
def test_each_documented_command_exits_with_the_code_the_page_gives(tmp_path, command, code, why):
    done, called = shell(tmp_path, command)
    assert done.returncode == code, f"{command}: {done.stderr}"
    lines = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == (0 if code == 0 else 1), done.stderr
    if "no pulumi runs" in why:
        assert called == []
