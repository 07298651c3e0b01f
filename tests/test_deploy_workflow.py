"""The deploy workflow (.github/workflows/deploy.yml): `make up` of one stack from GitHub Actions, per-stack
environment, one run per stack, secrets only where `up` runs, and a run longer than the runner's job limit stopped
with Pulumi's Ctrl-C and continued by the next run (its scripts run here in real bash with a fake `make` and `gh`)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
import yaml

from tools.stack_files import ROOT

WORKFLOWS = ROOT / ".github" / "workflows"
DEPLOY = yaml.safe_load((WORKFLOWS / "deploy.yml").read_text())
PREVIEW = yaml.safe_load((WORKFLOWS / "preview.yml").read_text())
JOB = DEPLOY["jobs"]["deploy"]
STEPS = JOB["steps"]
HOSTED_JOB_LIMIT_MINUTES = 360
"""GitHub-hosted runners: "Each job in a workflow can run for up to 6 hours of execution time" (GitHub Docs, Actions
limits)."""
BASH = shutil.which("bash")


def index(text: str) -> int:
    return next(i for i, s in enumerate(STEPS) if s.get("uses", "").startswith(text) or text in s.get("run", ""))


def test_deploys_are_started_by_hand_never_by_a_pull_request():
    assert set(DEPLOY[True]) == {"workflow_dispatch"}, "YAML 1.1 reads the key `on` as True"
    inputs = DEPLOY[True]["workflow_dispatch"]["inputs"]
    assert inputs["stack"]["type"] == "choice"
    assert inputs["stack"]["options"] == PREVIEW["jobs"]["preview"]["strategy"]["matrix"]["stack"], "the same stacks"


def test_each_stack_deploys_in_its_own_environment_one_run_at_a_time_never_cancelled():
    assert JOB["environment"] == "deploy-${{ inputs.stack }}", "deploy-prod has required reviewers (docs/security.md)"
    assert DEPLOY["concurrency"] == {"group": "deploy-${{ inputs.stack }}", "cancel-in-progress": False}, (
        "a cancelled `up` would leave the stack locked"
    )
    assert DEPLOY["permissions"] == {"contents": "read"}
    assert JOB["permissions"] == {"contents": "read", "id-token": "write", "actions": "write"}
    auth = STEPS[index("google-github-actions/auth@")]["with"]
    assert "workload_identity_provider" in auth and "credentials_json" not in auth, "no long-lived keys"


def test_secrets_reach_the_up_step_and_the_dispatch_alone_and_never_the_install():
    assert "env" not in DEPLOY and "env" not in JOB, "no workflow- or job-level environment"
    holders = [i for i, s in enumerate(STEPS) if "secrets." in yaml.safe_dump(s)]
    up, dispatch = index("make up STACK"), index("gh workflow run")
    assert holders == [up, dispatch]
    assert {k for k, v in STEPS[up]["env"].items() if "secrets." in str(v)} == {
        "PULUMI_ACCESS_TOKEN",
        "PULUMI_CONFIG_PASSPHRASE",
    }, "the preview's secret handling"
    assert STEPS[dispatch]["env"]["GH_TOKEN"] == "${{ secrets.GITHUB_TOKEN }}"
    install = index("make venv")
    assert install < index("google-github-actions/auth@") < up < dispatch, "no credential during install"
    assert "env" not in STEPS[install]
    checkout = STEPS[index("actions/checkout@")]
    assert checkout["with"]["persist-credentials"] is False


def test_up_is_bounded_below_the_runners_job_limit():
    minutes = int(STEPS[index("make up STACK")]["env"]["UP_MINUTES"])
    run = STEPS[index("make up STACK")]["run"]
    assert 'timeout --signal=INT --kill-after=10m "${UP_MINUTES}m" make up STACK="$STACK" YES=1' in run
    assert minutes + 10 < JOB["timeout-minutes"] <= HOSTED_JOB_LIMIT_MINUTES
    rounds = 12
    assert f"-ge {rounds} ]" in STEPS[index("gh workflow run")]["run"]
    assert rounds * minutes / 60 > 48.5, "longer than a training's wait: 2 attempts x (24 h + 15 min)"


def write(folder: Path, name: str, text: str) -> None:
    path = folder / name
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def run_step(tmp_path: Path, text: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    assert BASH is not None
    script = tmp_path / "step.sh"
    script.write_text(text.replace("PATH=/usr/bin:/bin", f"PATH={tmp_path / 'bin'}:/usr/bin:/bin"))
    environment = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", **env}
    return subprocess.run(
        [BASH, "--noprofile", "--norc", "-euo", "pipefail", str(script)],
        env=environment,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


@pytest.mark.skipif(BASH is None or shutil.which("timeout") is None, reason="bash and coreutils' timeout")
def test_an_up_stopped_at_its_bound_asks_for_the_next_run_and_a_failure_stays_a_failure(tmp_path):
    (tmp_path / "bin").mkdir()
    # A `make up` that waits until Ctrl-C (SIGINT), as Pulumi does, then ends as the CLI does after a cancel.
    write(
        tmp_path / "bin",
        "make",
        '#!/bin/bash\necho "$*" > "$CALLS"\ntrap "exit 255" INT\nwhile :; do sleep 0.05; done\n',
    )
    output = tmp_path / "output"
    env = {"CALLS": str(tmp_path / "calls"), "GITHUB_OUTPUT": str(output), "STACK": "prod", "UP_MINUTES": "0.005"}
    done = run_step(tmp_path, STEPS[index("make up STACK")]["run"], env)
    assert done.returncode == 0, done.stderr
    assert output.read_text() == "continue=true\n"
    assert (tmp_path / "calls").read_text() == "up STACK=prod YES=1\n"
    write(tmp_path / "bin", "make", "#!/bin/bash\nexit 2\n")
    output.write_text("")
    done = run_step(tmp_path, STEPS[index("make up STACK")]["run"], env)
    assert done.returncode == 2 and output.read_text() == "", "a failed up fails the job and is not continued"


@pytest.mark.skipif(BASH is None, reason="bash")
def test_the_next_run_is_the_same_stack_and_commit_and_the_chain_ends(tmp_path):
    (tmp_path / "bin").mkdir()
    write(tmp_path / "bin", "gh", '#!/bin/bash\necho "$*" > "$CALLS"\n')
    (tmp_path / "commit").write_text("a" * 40 + "\n")
    env = {
        "CALLS": str(tmp_path / "calls"),
        "RUNNER_TEMP": str(tmp_path),
        "STACK": "prod",
        "GITHUB_REPOSITORY": "acme/tpu-rl",
        "GITHUB_REF_NAME": "main",
    }
    script = STEPS[index("gh workflow run")]["run"]
    done = run_step(tmp_path, script, {**env, "ROUND": "08"})
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "calls").read_text().split() == (
        f"workflow run deploy.yml --repo acme/tpu-rl --ref main -f stack=prod -f commit={'a' * 40} -f round=9".split()
    )
    (tmp_path / "calls").unlink()
    done = run_step(tmp_path, script, {**env, "ROUND": "12"})
    assert done.returncode == 1 and "continued 12 times" in done.stderr
    assert not (tmp_path / "calls").exists()
    done = run_step(tmp_path, script, {**env, "ROUND": "1; rm -rf /"})
    assert done.returncode == 2 and not (tmp_path / "calls").exists()


@pytest.mark.skipif(BASH is None or shutil.which("git") is None, reason="bash and git")
def test_a_continuation_deploys_only_a_commit_of_the_dispatched_branch(tmp_path):
    repo = tmp_path / "repo"
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "a"], check=True)
    first = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "b"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run([*git, "checkout", "-q", "--orphan", "other"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "c"], check=True)
    stranger = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    script = f"cd {repo}\n" + STEPS[index("merge-base --is-ancestor")]["run"]
    (tmp_path / "bin").mkdir()
    env = {"GITHUB_SHA": head, "GITHUB_REF_NAME": "main", "RUNNER_TEMP": str(tmp_path)}
    assert run_step(tmp_path, script, {**env, "COMMIT": first}).returncode == 0
    refused = run_step(tmp_path, script, {**env, "COMMIT": stranger})
    assert refused.returncode == 1 and f"{stranger} is not on main" in refused.stderr
    assert run_step(tmp_path, script, {**env, "COMMIT": "main"}).returncode == 2
