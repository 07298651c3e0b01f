"""``tpu-rl`` (tools/tpu_rl.py): the operator's tools exit with their own status where ``make`` reports every failure as
2, and ``tpu-rl pulumi`` runs one pulumi command in the stack's state home, with its stack, or no pulumi at all.

Each test runs the command as a process in a checkout of its own (tests/fake_pulumi.py ``checkout``: its stack files
are the copy's), with the fake ``pulumi`` of tests/fake_pulumi.py on PATH recording each call's argv, its
``PULUMI_BACKEND_URL`` and its ``PULUMI_DEFAULT_ORGANIZATION``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fake_pulumi import CLEAN, calls, checkout, install
from tools.stack_files import ROOT

MAKE = shutil.which("make")


def tpu_rl(root: Path, *args: str, cwd: Path | None = None, pulumi: bool = True, **env: str):
    """``tpu-rl ARGS`` of the checkout ``root`` (its tools, its stack files), run from ``cwd`` (default: ``root``)."""
    tmp = root.parent
    if pulumi:
        install(tmp / "bin")
    environment = {k: v for k, v in os.environ.items() if k not in CLEAN}
    environment.update(
        PATH=f"{tmp / 'bin'}:{os.path.dirname(sys.executable)}:/usr/bin:/bin",
        PULUMI_LOG=str(tmp / "pulumi.log"),
        PULUMI_HOME=str(tmp / "pulumi-home"),
        PYTHONPATH=str(root),  # the checkout's tools, from any folder
    )
    environment.update({"KUBECONFIG": str(tmp / "no-kubeconfig"), **env})
    command = [sys.executable, "-m", "tools.tpu_rl", *args]
    return subprocess.run(command, cwd=cwd or root, env=environment, capture_output=True, text=True, timeout=60)


def errors(done: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in done.stderr.splitlines() if line.startswith("error:")]


def called(root: Path) -> list[tuple[list[str], str | None, str | None]]:
    return [(c["argv"], c["backend"], c.get("organization")) for c in calls(root.parent / "pulumi.log")]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return checkout(tmp_path)


def test_the_console_script_is_installed_in_the_venv_and_runs_from_any_folder(tmp_path):
    script = ROOT / ".venv" / "bin" / "tpu-rl"
    assert script.is_file(), "the Makefile's install puts tpu-rl in .venv/bin"
    done = subprocess.run([str(script), "--help"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert [line.split()[0] for line in done.stdout.splitlines()[2:]] == [
        *("status", "report", "logs", "audit", "maintenance", "plan", "rehearse", "pulumi")
    ]
    done = subprocess.run([str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.startswith("usage: tpu-rl COMMAND")


@pytest.mark.slow  # make, the venv's console script and a tool in turn: 2 s
@pytest.mark.skipif(MAKE is None, reason="make is not installed")
def test_the_tools_own_exit_code_reaches_the_shell_where_make_reports_2(root):
    """A cluster that does not answer is what a retry may cure: `tpu-rl logs` exits 1; `make logs` says 2."""
    kubeconfig = root.parent / "kubeconfig"
    context = "gke_my-tpu-dev-project_us-east5_tpu-rl-dev"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\n"
        f"contexts:\n- name: {context}\n  context: {{cluster: c, user: u}}\ncurrent-context: {context}\n"
        "users:\n- name: u\n  user: {token: t}\n"
    )
    done = tpu_rl(root, "logs", "--stack", "dev", "--step", "convert", KUBECONFIG=str(kubeconfig))
    assert done.returncode == 1 and errors(done)[0].startswith("error: cannot read the cluster: cannot reach"), done
    assert MAKE is not None
    environment = {k: v for k, v in os.environ.items() if k not in CLEAN}
    made = subprocess.run(
        [MAKE, "--no-print-directory", "-o", ".venv/.installed", "logs", "STACK=dev", "STEP=convert"],
        cwd=root,
        env={**environment, "KUBECONFIG": str(kubeconfig)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert made.returncode == 2 and errors(done)[0] in made.stderr


# ---------------------------------------------------------------------------------------------
# tpu-rl pulumi


def outside(root: Path) -> str:
    """A file backend outside the checkout (allowed as STATE_BACKEND)."""
    return f"file://{root.parent / 'state'}"


def test_pulumi_runs_in_the_stacks_home_with_its_stack_and_exits_with_pulumis_code(root):
    url = outside(root)
    done = tpu_rl(
        root, "pulumi", "--stack", "dev", "--", "config", "set", "--path", "tpu-rl:x.y", "1", STATE_BACKEND=url
    )
    assert done.returncode == 0, done.stderr
    assert called(root) == [(["config", "set", "--path", "tpu-rl:x.y", "1", "--stack", "dev"], url, None)]
    done = tpu_rl(root, "pulumi", "--stack", "dev", "--", "config", "get", "tpu-rl:x", STATE_BACKEND=url)
    assert done.returncode == 255, "pulumi's own exit status: the fake's `config get` fails"
    done = tpu_rl(root, "pulumi", "--stack", "dev", "--", "config", "set", "--", "tpu-rl:x", "-1", STATE_BACKEND=url)
    assert called(root)[-1][0] == ["config", "set", "--stack", "dev", "--", "tpu-rl:x", "-1"], "before pulumi's --"


def test_pulumi_never_runs_where_the_home_is_another_stacks(root):
    """A PULUMI_BACKEND_URL left in the shell that is not the stack's home is refused, as `make` refuses it (the
    example stack file without a home, a bad stack name: docs/troubleshooting.md "Exit codes",
    tests/test_exit_codes_documented.py)."""
    args = ("pulumi", "--stack", "dev", "--", "config", "set", "--secret", "tpu-rl:hfToken")
    done = tpu_rl(root, *args, STATE_BACKEND=outside(root), PULUMI_BACKEND_URL="gs://another-stacks-state")
    assert done.returncode == 2 and "unset PULUMI_BACKEND_URL" in errors(done)[0]
    assert called(root) == []


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--stack", "dev"], "name the pulumi command after --"),
        (["--stack", "dev", "--", "config", "set", "--stack", "prod", "tpu-rl:x", "1"], "sets --stack itself"),
        (["--stack", "dev", "--", "up", "-s", "prod"], "sets -s itself"),
        (["--stack", "dev", "--", "up", "--cwd=/elsewhere"], "sets --cwd itself"),
    ],
)
def test_pulumi_refuses_what_would_point_it_elsewhere(root, args, words):
    done = tpu_rl(root, "pulumi", *args, STATE_BACKEND=outside(root))
    assert done.returncode == 2 and words in errors(done)[0], done.stderr
    assert called(root) == []


def test_pulumi_runs_only_from_inside_its_checkout(root, tmp_path):
    """pulumi reads Pulumi.yaml and the stack file of the folder it runs in: another checkout's would be written."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = tpu_rl(root, "pulumi", "--stack", "dev", "--", "stack", "export", cwd=elsewhere, STATE_BACKEND=outside(root))
    assert done.returncode == 2 and f"cd {root.resolve()} first" in errors(done)[0]
    done = tpu_rl(root, "pulumi", "--stack", "dev", "--", "whoami", cwd=root / "tools", STATE_BACKEND=outside(root))
    assert done.returncode == 0 and len(called(root)) == 1, done.stderr


def test_a_cloud_home_gets_its_organization(root):
    path = root / "Pulumi.prod.yaml"
    path.write_text(
        path.read_text() + "  tpu-rl:stateBackend: https://api.pulumi.com\n  tpu-rl:stateOrganization: acme\n"
    )
    done = tpu_rl(
        root, "pulumi", "--stack", "prod", "--", "config", "set", "tpu-rl:x", "1", FAKE_CLOUD=str(root.parent)
    )
    assert done.returncode == 0, done.stderr
    assert called(root) == [(["config", "set", "tpu-rl:x", "1", "--stack", "prod"], "https://api.pulumi.com", "acme")]


def test_without_the_pulumi_cli_one_line_exit_1(root):
    done = tpu_rl(root, "pulumi", "--stack", "dev", "--", "stack", "export", pulumi=False, STATE_BACKEND=outside(root))
    assert done.returncode == 1 and errors(done)[0].startswith("error: the Pulumi CLI is required")
