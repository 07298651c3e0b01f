"""The interpreter the Makefile makes every venv with: the distribution's CPython 3.11 where it can make a venv with
pip, else ``python3``, and ``PYTHON=`` over both (docs/testing.md "The interpreter"). Run as ``make -n`` prints the
first install rule in a checkout of its own, with the distribution's interpreter a script that records each probe."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAKE = shutil.which("make")
pytestmark = pytest.mark.skipif(MAKE is None, reason="make is not installed")


def venv_command(tmp_path: Path, distro: str, *args: str) -> tuple[str, int]:
    """The interpreter `make .venv/bin/uv` would make the venv with, and how many times the distribution's was run."""
    assert MAKE is not None
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    (tmp_path / "requirements.lock").write_text("")
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS", "PYTHON")}
    done = subprocess.run(
        [MAKE, "-s", "-n", f"DISTRO_PYTHON={distro}", *args, ".venv/bin/uv"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    made = [line for line in done.stdout.splitlines() if " -m venv " in line]
    assert len(made) == 1, done.stdout
    probes = tmp_path / "probes"
    return made[0].split(" -m venv ")[0], len(probes.read_text().splitlines()) if probes.exists() else 0


def distro(tmp_path: Path, answer: str) -> str:
    """A distribution interpreter that records each run and answers the probe as ``answer`` (exit 0) or not."""
    script = tmp_path / "python3.11"
    script.write_text(f'#!/bin/sh\necho "$*" >> {tmp_path}/probes\n{answer}\n')
    script.chmod(0o755)
    return str(script)


def test_the_distributions_python_makes_the_venv_when_it_can_make_one_with_pip(tmp_path):
    script = distro(tmp_path, f'exec {Path(sys.base_prefix) / "bin" / "python3"} "$@"')
    assert venv_command(tmp_path, script) == (script, 1), "the probe is the real one and runs once"
    assert "import ensurepip, venv" in (tmp_path / "probes").read_text()


def test_python3_makes_it_when_the_distributions_cannot(tmp_path):
    assert venv_command(tmp_path, distro(tmp_path, "exit 1")) == ("python3", 1)
    (tmp_path / "none").mkdir()
    assert venv_command(tmp_path / "none", str(tmp_path / "absent")) == ("python3", 0)


def test_an_interpreter_given_is_used_and_nothing_probed(tmp_path):
    given = "/opt/py/bin/python3"
    assert venv_command(tmp_path, distro(tmp_path, "exit 0"), f"PYTHON={given}") == (given, 0)
