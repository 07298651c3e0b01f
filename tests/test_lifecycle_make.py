"""`make destroy` and `make refresh` as the Makefile runs them, against a `pulumi` on PATH that records its
argv: neither runs the program, and destroy refuses a protected stack before the CLI is asked to destroy."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess

import pytest

from core.printed_commands import pulumi_config_set
from tools.stack_files import ROOT

MAKE = shutil.which("make")
PROTECT, WORKFLOW = "tpu-rl:protect", "tpu-rl:workflow.enabled"
pytestmark = [pytest.mark.skipif(MAKE is None, reason="make is not installed"), pytest.mark.slow]

FAKE_PULUMI = """#!/bin/sh
echo "$*" >> "$PULUMI_LOG"
case "$1 $2" in
  "config get") [ "$3" = tpu-rl:protect ] && [ -n "$PROTECT" ] && { echo "$PROTECT"; exit 0; }
                echo "error: configuration key '$3' not found for stack" >&2; exit 255 ;;
esac
exit 0
"""


def make(
    tmp_path, target: str, stack: str, protect: str | None, **variables: str
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    assert MAKE is not None  # the module is skipped without it
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    pulumi = folder / "pulumi"
    pulumi.write_text(FAKE_PULUMI)
    pulumi.chmod(pulumi.stat().st_mode | stat.S_IEXEC)
    log = tmp_path / "pulumi.log"
    log.write_text("")
    env = {
        **os.environ,
        "PATH": f"{folder}:{os.environ['PATH']}",
        "PULUMI_LOG": str(log),
        "PROTECT": protect or "",
        "PULUMI_RUN_PROGRAM": "true",  # a user's setting: the targets override it
        "STATE_BACKEND": f"file://{tmp_path / 'state'}",  # outside the checkout (tests/test_makefile.py)
        "ALLOW_PASSPHRASE": "1",  # a file backend's secrets: prod's protection is the subject here, not its key
        **variables,
    }
    for variable in ("PULUMI_BACKEND_URL", "PULUMI_ACCESS_TOKEN", "MAKEFLAGS", "MAKELEVEL", "MFLAGS"):
        env.pop(variable, None)
    done = subprocess.run(
        [MAKE, "--no-print-directory", "-o", ".venv/.installed", target, f"STACK={stack}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done, log.read_text().splitlines()


@pytest.mark.parametrize("value", ["true", "True"])
def test_make_destroy_refuses_a_protected_stack_in_one_line_naming_the_fix(tmp_path, value):
    done, calls = make(tmp_path, "destroy", "prod", value)
    assert done.returncode != 0
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    protect, workflow = (pulumi_config_set("prod", key, "false") for key in (PROTECT, WORKFLOW))
    assert line == (
        f"error: stack prod is protected (tpu-rl:protect: true); to destroy it, run `{protect}`, `{workflow}` and "
        "`make up STACK=prod` (it lifts every protection, GKE's deletion protection included, and deletes the steps' "
        "objects without running a step), then `make destroy STACK=prod` again"
    ), "each command in the stack's own home (tpu-rl pulumi), the workflow's field with --path"
    assert workflow == "tpu-rl pulumi --stack prod -- config set --path 'tpu-rl:workflow.enabled' false"
    assert not [c for c in calls if c.startswith("destroy")], "the CLI was never asked to destroy"


@pytest.mark.parametrize("protect", ["false", None])
def test_make_destroy_runs_the_cli_without_the_program(tmp_path, protect):
    done, calls = make(tmp_path, "destroy", "dev", protect)
    assert done.returncode == 0, done.stderr
    assert calls[-1] == "destroy --stack dev --run-program=false --continue-on-error=false", calls
    assert "--skip-preview" not in calls[-1], "the preview catches what is protected before anything is deleted"


def test_make_refresh_runs_the_cli_without_the_program(tmp_path):
    done, calls = make(tmp_path, "refresh", "prod", "true")
    assert done.returncode == 0, done.stderr
    assert calls[-1] == "refresh --stack prod --run-program=false", calls
