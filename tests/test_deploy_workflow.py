"""The deploy workflow (.github/workflows/deploy.yml): `make up` of one stack from GitHub Actions, everything per stack
(environment, runner, backend), dev from protected branches only, every install before any secret, and a run longer
than the runner's job limit stopped with Pulumi's Ctrl-C and continued by the next round of the same run, which the
one approval of round 0 carries and a re-run does not (docs/guardrails.md "The deploy workflow"). The rounds' scripts
run here in real bash with the GitHub variables set and a fake `make`; expressions are evaluated as the runner
evaluates them (tests/github_expression.py)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.github_expression import evaluate, render, render_text
from tools.stack_files import ROOT

WORKFLOWS = ROOT / ".github" / "workflows"
DEPLOY = yaml.safe_load((WORKFLOWS / "deploy.yml").read_text())
PREVIEW = yaml.safe_load((WORKFLOWS / "preview.yml").read_text())
JOBS: dict[str, Any] = DEPLOY["jobs"]
JOB = JOBS["deploy"]
STEPS = JOB["steps"]
ROUNDS = 13
"""Round 0 (the job `deploy`) and the continuations `continue-1` ... `continue-12`."""
CONTINUATIONS = [f"continue-{n}" for n in range(1, ROUNDS)]
HOSTED_JOB_LIMIT_MINUTES = 360
"""GitHub-hosted runners: "Each job in a workflow can run for up to 6 hours of execution time" (GitHub Docs, Actions
limits)."""
BASH = shutil.which("bash")
REVIEWED = "deploy-${{ inputs.stack }}"
CONTINUED = "deploy-${{ inputs.stack }}-continued"


def index(text: str) -> int:
    return next(i for i, s in enumerate(STEPS) if s.get("uses", "").startswith(text) or text in s.get("run", ""))


def test_deploys_are_started_by_hand_never_by_a_pull_request():
    assert set(DEPLOY[True]) == {"workflow_dispatch"}, "YAML 1.1 reads the key `on` as True"
    inputs = DEPLOY[True]["workflow_dispatch"]["inputs"]
    assert set(inputs) == {"stack"}, "a run deploys its ref's head: no commit to choose, no round to forge"
    assert inputs["stack"]["type"] == "choice"
    assert inputs["stack"]["options"] == PREVIEW["jobs"]["preview"]["strategy"]["matrix"]["stack"], "the same stacks"


def test_the_rounds_are_one_job_definition_chained_in_one_run():
    """Round 0 and the twelve continuations are the same job (YAML aliases of round 0's keys), each continuation
    needing round 0 (whose approved attempt it checks) and the round before it, and running only when that round's
    `up` stopped at its bound."""
    assert list(JOBS) == ["deploy", *CONTINUATIONS]
    assert "needs" not in JOB and "if" not in JOB
    for n, name in enumerate(CONTINUATIONS, start=1):
        job, before = JOBS[name], ("deploy" if n == 1 else f"continue-{n - 1}")
        assert job["needs"] == (["deploy"] if n == 1 else ["deploy", before]), name
        assert job["if"] == f"needs.{before}.outputs.continue == 'true'", name
        for key in ("runs-on", "timeout-minutes", "permissions", "defaults", "outputs", "steps"):
            assert job[key] == JOB[key], (name, key)
        assert set(job) == {
            "name",
            "needs",
            "if",
            "runs-on",
            "environment",
            "timeout-minutes",
            "permissions",
            "defaults",
            "outputs",
            "steps",
        }, name
    assert JOB["outputs"] == {
        "continue": "${{ steps.up.outputs.continue }}",
        "approved-attempt": "${{ steps.round.outputs.approved-attempt }}",
    }
    # A round runs only after its predecessor asked for it; a skipped predecessor's outputs are empty.
    condition = JOBS["continue-2"]["if"]
    assert evaluate(condition, {"needs": {"continue-1": {"outputs": {"continue": "true"}}}}) is True
    assert evaluate(condition, {"needs": {"continue-1": {"outputs": {"continue": ""}}}}) is False
    assert evaluate(condition, {"needs": {}}) is False


def test_one_approval_per_run_round_0_alone_in_the_reviewed_environment():
    """deploy-prod has required reviewers, who approve each job that references it: only round 0 does. The
    continuations run in deploy-<stack>-continued (no reviewers, the same deployment branches)."""
    assert JOB["environment"] == REVIEWED
    assert [name for name, job in JOBS.items() if job["environment"] == REVIEWED] == ["deploy"]
    assert all(JOBS[name]["environment"] == CONTINUED for name in CONTINUATIONS)
    for stack in ("dev", "prod"):
        contexts = {"inputs": {"stack": stack}}
        assert render(JOB["environment"], contexts) == f"deploy-{stack}"
        assert render(JOBS["continue-7"]["environment"], contexts) == f"deploy-{stack}-continued"
    # Every job that may use the continued environment needs round 0, in the same run: no other way in.
    assert all("deploy" in JOBS[name]["needs"] for name in CONTINUATIONS)


def test_each_stack_runs_on_its_own_runner_never_the_other_stacks():
    """`runs-on` is evaluated before the job's environment, so an environment's variables are empty there (GitHub
    Docs, Contexts: environment variables are available "after their environment is declared by the runner";
    github/docs#33389): the runner is a repository variable per stack, and prod never falls back to dev's."""
    runs_on = JOB["runs-on"]
    assert "DEPLOY_RUNS_ON)" not in runs_on and "vars.DEPLOY_RUNS_ON " not in runs_on, "no runner shared by stacks"
    prod_labels, dev_group = '["self-hosted","tpu-rl-prod"]', '{"group":"tpu-rl-dev","labels":["self-hosted"]}'
    both = {"DEPLOY_RUNS_ON_PROD": prod_labels, "DEPLOY_RUNS_ON_DEV": dev_group}
    assert render(runs_on, {"inputs": {"stack": "prod"}, "vars": both}) == ["self-hosted", "tpu-rl-prod"]
    assert render(runs_on, {"inputs": {"stack": "dev"}, "vars": both}) == {
        "group": "tpu-rl-dev",
        "labels": ["self-hosted"],
    }
    # A stack without its own variable runs on a GitHub-hosted runner (a fresh VM per job), never the other's.
    assert render(runs_on, {"inputs": {"stack": "prod"}, "vars": {"DEPLOY_RUNS_ON_DEV": dev_group}}) == "ubuntu-24.04"
    assert render(runs_on, {"inputs": {"stack": "dev"}, "vars": {"DEPLOY_RUNS_ON_PROD": prod_labels}}) == "ubuntu-24.04"


def test_one_run_per_stack_never_cancelled_and_an_oidc_token_per_job_only():
    assert DEPLOY["concurrency"] == {"group": "deploy-${{ inputs.stack }}", "cancel-in-progress": False}, (
        "a cancelled `up` would leave the stack locked"
    )
    assert DEPLOY["permissions"] == {"contents": "read"}
    for name, job in JOBS.items():
        assert job["permissions"] == {"contents": "read", "id-token": "write"}, name
    text = yaml.safe_dump(DEPLOY)  # what runs, comments aside
    assert "GITHUB_TOKEN" not in text and "github.token" not in text and "actions" not in DEPLOY["permissions"]
    auth = STEPS[index("google-github-actions/auth@")]["with"]
    assert "workload_identity_provider" in auth and "credentials_json" not in auth, "no long-lived keys"


def test_every_install_runs_before_any_secret_or_credential():
    """No step before `make up` holds a secret; the Google credential comes after the install step, which installs
    both venvs and the program's plugins with nothing in its environment."""
    assert "env" not in DEPLOY and all("env" not in job for job in JOBS.values()), "no workflow- or job-level env"
    holders = [i for i, s in enumerate(STEPS) if "secrets." in yaml.safe_dump(s)]
    up = index("make up STACK")
    assert holders == [up]
    assert {k for k, v in STEPS[up]["env"].items() if "secrets." in str(v)} == {
        "PULUMI_ACCESS_TOKEN",
        "PULUMI_CONFIG_PASSPHRASE",
    }
    install = index("make venv policy-venv")
    assert STEPS[install]["run"].splitlines() == [
        "make venv policy-venv",
        "PULUMI_SKIP_UPDATE_CHECK=true pulumi plugin install",
    ]
    assert "env" not in STEPS[install]
    auth = index("google-github-actions/auth@")
    assert install < auth < up, "no credential during the install"
    # Before the install: the round's check, the checkout and the setup actions; nothing else runs a command.
    assert [s.get("uses", "").split("@")[0] or s["id"] for s in STEPS[:install]] == [
        "round",
        "actions/checkout",
        "actions/setup-python",
        "google-github-actions/setup-gcloud",
        "pulumi/actions",
    ]
    assert "command" not in STEPS[index("pulumi/actions@")]["with"], "the action installs the CLI only"
    checkout = STEPS[index("actions/checkout@")]
    assert checkout["with"] == {"ref": "${{ github.sha }}", "persist-credentials": False}
    assert "NO_POLICY" not in yaml.safe_dump(DEPLOY), "the deploy always runs with the policy pack"


def test_make_up_installs_nothing_once_the_install_step_has_run():
    """The Makefile's own database: `up`'s prerequisites are the stamps of `make venv` and `make policy-venv`
    (each written after its install), so the install step leaves `make up` nothing to install."""
    database = subprocess.run(
        ["make", "-pnq", "-R", "up"], cwd=ROOT, capture_output=True, text=True, timeout=30, check=False
    ).stdout
    rules = {}
    for line in database.splitlines():
        target, colon, prerequisites = line.partition(":")
        if colon and target in ("up", "venv", "policy-venv") and not prerequisites.startswith("="):
            rules[target] = prerequisites.split()
    assert rules["venv"] == [".venv/.installed"] and rules["policy-venv"] == ["policy/venv/.installed"]
    assert rules["up"] == rules["venv"] + rules["policy-venv"]


def test_up_is_bounded_below_the_runners_job_limit_and_the_rounds_outlast_a_training_wait():
    minutes = int(STEPS[index("make up STACK")]["env"]["UP_MINUTES"])
    run = STEPS[index("make up STACK")]["run"]
    assert 'timeout --signal=INT --kill-after=10m "${UP_MINUTES}m" make up STACK="$STACK" YES=1' in run
    assert minutes + 10 < JOB["timeout-minutes"] <= HOSTED_JOB_LIMIT_MINUTES
    assert f'if [ "$ROUND" -ge {ROUNDS - 1} ]; then' in run, "the last round fails rather than asks for another"
    assert f"continue-1[0-{ROUNDS - 11}]) round=" in STEPS[0]["run"]
    assert ROUNDS * minutes / 60 > 48.5, "longer than a training's wait: 2 attempts x (24 h + 15 min)"


def write(folder: Path, name: str, text: str) -> None:
    path = folder / name
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def run_step(
    tmp_path: Path, text: str, env: dict[str, str], cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    assert BASH is not None
    script = tmp_path / "step.sh"
    script.write_text(text)
    environment = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", **env}
    return subprocess.run(
        [BASH, "--noprofile", "--norc", "-euo", "pipefail", str(script)],
        env=environment,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def round_env(tmp_path: Path, **values: str) -> dict[str, str]:
    """The round step's environment as the runner sets it: GitHub's variables for a dispatch of `main`."""
    return {
        "GITHUB_REF": "refs/heads/main",
        "GITHUB_REF_NAME": "main",
        "GITHUB_REF_TYPE": "branch",
        "GITHUB_REF_PROTECTED": "true",
        "GITHUB_RUN_ID": "4242",
        "GITHUB_RUN_ATTEMPT": "1",
        "GITHUB_SHA": "a" * 40,
        "GITHUB_OUTPUT": str(tmp_path / "output"),
        "DEFAULT_BRANCH": "main",
        "STACK": "prod",
        "ROUND_JOB": "deploy",
        "APPROVED_ATTEMPT": "",
        **values,
    }


def check_round(tmp_path: Path, **values: str) -> tuple[subprocess.CompletedProcess[str], str]:
    output = tmp_path / "output"
    output.write_text("")
    done = run_step(tmp_path, STEPS[0]["run"], round_env(tmp_path, **values))
    return done, output.read_text()


@pytest.mark.skipif(BASH is None, reason="bash")
def test_the_round_step_reads_what_the_runner_sets():
    step = STEPS[0]
    assert step["id"] == "round" and "uses" not in step
    assert step["env"] == {
        "STACK": "${{ inputs.stack }}",
        "DEFAULT_BRANCH": "${{ github.event.repository.default_branch }}",
        "APPROVED_ATTEMPT": "${{ needs.deploy.outputs.approved-attempt }}",
        "ROUND_JOB": "${{ github.job }}",
    }
    # In round 0, `needs` has no `deploy`: a property of null is null (actions/runner Index.cs), so empty.
    assert render_text(step["env"]["APPROVED_ATTEMPT"], {"needs": {}}) == ""
    approved = {"needs": {"deploy": {"outputs": {"approved-attempt": "2"}}}}
    assert render_text(step["env"]["APPROVED_ATTEMPT"], approved) == "2"


@pytest.mark.skipif(BASH is None, reason="bash")
def test_dev_deploys_a_protected_branch_only_and_prod_the_default_branch_only(tmp_path):
    (tmp_path / "bin").mkdir()
    done, output = check_round(
        tmp_path, STACK="dev", GITHUB_REF="refs/heads/topic", GITHUB_REF_NAME="topic", GITHUB_REF_PROTECTED="false"
    )
    assert (done.returncode, output) == (1, "")
    assert done.stderr == (
        "error: refs/heads/topic is not a protected branch; dev deploys only a protected branch (protect it, or run "
        "the workflow from the default branch)\n"
    )
    done, _ = check_round(tmp_path, STACK="dev", GITHUB_REF="refs/tags/v1", GITHUB_REF_TYPE="tag")
    assert done.returncode == 1 and "refs/tags/v1 is not a protected branch" in done.stderr
    done, _ = check_round(tmp_path, STACK="dev", GITHUB_REF_PROTECTED="")
    assert done.returncode == 1, "a runner that does not say the branch is protected is refused"
    done, output = check_round(tmp_path, STACK="dev", GITHUB_REF="refs/heads/release", GITHUB_REF_NAME="release")
    assert done.returncode == 0, done.stderr
    assert output == "round=0\napproved-attempt=1\n"
    # prod: the default branch alone, protected or not elsewhere.
    done, output = check_round(tmp_path, STACK="prod", GITHUB_REF="refs/heads/release", GITHUB_REF_NAME="release")
    assert (done.returncode, output) == (1, "")
    assert done.stderr == (
        "error: prod deploys only the default branch main, not release: run the workflow from main\n"
    )
    done, output = check_round(tmp_path, STACK="prod")
    assert done.returncode == 0 and output == "round=0\napproved-attempt=1\n"


@pytest.mark.skipif(BASH is None, reason="bash")
def test_a_continuation_runs_only_in_the_attempt_whose_round_0_was_approved(tmp_path):
    """A re-run is a new attempt of the run; the jobs it does not re-run keep their outputs. A continuation carries
    round 0's approval only in the attempt round 0 ran in; a forged or missing attempt is refused, before anything."""
    (tmp_path / "bin").mkdir()
    done, output = check_round(tmp_path, ROUND_JOB="continue-3", APPROVED_ATTEMPT="1", GITHUB_RUN_ATTEMPT="1")
    assert done.returncode == 0, done.stderr
    assert output == "round=3\napproved-attempt=1\n"
    done, output = check_round(tmp_path, ROUND_JOB="continue-3", APPROVED_ATTEMPT="1", GITHUB_RUN_ATTEMPT="2")
    assert (done.returncode, output) == (1, "")
    assert done.stderr == (
        "error: round 3 runs in attempt 2 of run 4242, whose round 0 ran in attempt 1: a re-run carries no approval; "
        "start a new run of the deploy workflow (prod waits for a reviewer)\n"
    )
    for forged in ("", "2 ", "02", "1; echo approved-attempt=2"):
        done, output = check_round(tmp_path, ROUND_JOB="continue-12", APPROVED_ATTEMPT=forged, GITHUB_RUN_ATTEMPT="2")
        assert (done.returncode, output) == (1, ""), forged
    done, _ = check_round(tmp_path, ROUND_JOB="continue-1", APPROVED_ATTEMPT="")
    assert "whose round 0 ran in attempt (none)" in done.stderr
    # Re-running round 0 (it waits for a reviewer again) starts the attempt its continuations then carry.
    done, output = check_round(tmp_path, ROUND_JOB="deploy", APPROVED_ATTEMPT="", GITHUB_RUN_ATTEMPT="2")
    assert done.returncode == 0 and output == "round=0\napproved-attempt=2\n"
    for job in ("continue-13", "continue-0", "continue-01", "other"):
        done, output = check_round(tmp_path, ROUND_JOB=job, APPROVED_ATTEMPT="1")
        assert (done.returncode, output) == (2, ""), job
    done, output = check_round(tmp_path, GITHUB_RUN_ATTEMPT="1x")
    assert (done.returncode, output) == (2, "")


def up_env(tmp_path: Path, **values: str) -> dict[str, str]:
    env = {
        "CALLS": str(tmp_path / "calls"),
        "GITHUB_OUTPUT": str(tmp_path / "output"),
        "STACK": "prod",
        "ROUND": "0",
        "RECORDED_BACKEND": "",
        "ENVIRONMENT_BACKEND": "",
        "UP_MINUTES": "0.005",
        **values,
    }
    (tmp_path / "output").write_text("")
    return {k: v for k, v in env.items()}


@pytest.mark.skipif(BASH is None or shutil.which("timeout") is None, reason="bash and coreutils' timeout")
def test_an_up_stopped_at_its_bound_asks_for_the_next_round_until_the_last(tmp_path):
    (tmp_path / "bin").mkdir()
    # A `make up` that waits until Ctrl-C (SIGINT), as Pulumi does, then ends as the CLI does after a cancel.
    write(
        tmp_path / "bin",
        "make",
        '#!/bin/bash\necho "$* ${PULUMI_BACKEND_URL-unset}" > "$CALLS"\ntrap "exit 255" INT\n'
        "while :; do sleep 0.05; done\n",
    )
    script = STEPS[index("make up STACK")]["run"]
    done = run_step(tmp_path, script, up_env(tmp_path))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "output").read_text() == "continue=true\n"
    assert (tmp_path / "calls").read_text() == "up STACK=prod YES=1 unset\n"
    assert "round 1 of this run adopts the running step" in done.stdout
    # The last round (its bound 60 ms: what it says is the subject here, not the call it stopped).
    done = run_step(tmp_path, script, up_env(tmp_path, ROUND="12", UP_MINUTES="0.001"))
    assert done.returncode == 1 and (tmp_path / "output").read_text() == ""
    assert done.stderr == (
        "error: up has not ended in 13 rounds of 0.001 minutes (69 hours); read make status STACK=prod\n"
    )
    write(tmp_path / "bin", "make", "#!/bin/bash\nexit 2\n")
    done = run_step(tmp_path, script, up_env(tmp_path))
    assert done.returncode == 2 and (tmp_path / "output").read_text() == "", "a failed up fails the run"


@pytest.mark.skipif(BASH is None, reason="bash")
def test_the_backend_is_the_stack_files_else_the_environments_variable(tmp_path):
    """`make` passes the stack file's tpu-rl:stateBackend to every pulumi command; only a stack file that records
    none lets the environment's PULUMI_BACKEND_URL through."""
    (tmp_path / "bin").mkdir()
    write(tmp_path / "bin", "make", '#!/bin/bash\necho "${PULUMI_BACKEND_URL-unset}" > "$CALLS"\n')
    script = STEPS[index("make up STACK")]["run"]
    step_env = STEPS[index("make up STACK")]["env"]
    assert step_env["RECORDED_BACKEND"] == "${{ steps.stack.outputs.backend }}"
    assert step_env["ENVIRONMENT_BACKEND"] == "${{ vars.PULUMI_BACKEND_URL }}"
    environment = {"ENVIRONMENT_BACKEND": "gs://env-state"}
    assert run_step(tmp_path, script, up_env(tmp_path, **environment)).returncode == 0
    assert (tmp_path / "calls").read_text() == "gs://env-state\n"
    recorded = {"RECORDED_BACKEND": "gs://acme-prod-state", **environment}
    assert run_step(tmp_path, script, up_env(tmp_path, **recorded)).returncode == 0
    assert (tmp_path / "calls").read_text() == "unset\n", "the stack file's, which make passes itself"
    assert run_step(tmp_path, script, up_env(tmp_path)).returncode == 0
    assert (tmp_path / "calls").read_text() == "unset\n"


def checkout(tmp_path: Path, dev_project: str, prod_project: str, backend: str = "") -> Path:
    """What the stack step finds: the checkout's check tool, the venv's python and the two stack files."""
    root = tmp_path / "checkout"
    (root / "tools").mkdir(parents=True)
    (root / ".venv" / "bin").mkdir(parents=True)
    (root / ".venv" / "bin" / "python").symlink_to(sys.executable)
    shutil.copy(ROOT / "tools" / "check_pulumi_project.py", root / "tools")
    record = f"  tpu-rl:stateBackend: {backend}\n" if backend else ""
    (root / "Pulumi.dev.yaml").write_text(f"config:\n  gcp:project: {dev_project}\n{record}")
    (root / "Pulumi.prod.yaml").write_text(f"config:\n  gcp:project: {prod_project}\n{record}")
    return root


@pytest.mark.skipif(BASH is None, reason="bash")
def test_dev_is_refused_where_it_shares_prods_project_unless_the_variable_accepts_it(tmp_path):
    (tmp_path / "bin").mkdir()
    step = STEPS[index("tools/check_pulumi_project.py --get")]
    assert step["id"] == "stack" and step["env"]["SHARED_PROJECT"] == "${{ vars.DEPLOY_DEV_SHARED_PROJECT }}"
    assert (
        index("make venv policy-venv")
        < index("tools/check_pulumi_project.py --get")
        < index("google-github-actions/auth@")
    )
    output = tmp_path / "output"

    def stack_step(root: Path, stack: str, shared: str = "") -> subprocess.CompletedProcess[str]:
        output.write_text("")
        env = {"STACK": stack, "SHARED_PROJECT": shared, "GITHUB_OUTPUT": str(output)}
        return run_step(tmp_path, step["run"], env, cwd=root)

    shared = checkout(tmp_path / "shared", "acme-tpu", "acme-tpu", backend="gs://acme-tpu-state")
    done = stack_step(shared, "dev")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == (
        "error: dev and prod share the project acme-tpu, where deploy-dev's account holds project-wide roles that "
        "reach prod's cluster: give dev a project of its own, or accept the shared project by setting the "
        'repository variable DEPLOY_DEV_SHARED_PROJECT to acme-tpu (docs/guardrails.md "The deploy workflow")\n'
    )
    assert stack_step(shared, "dev", shared="other-project").returncode == 1, "accepting another project accepts none"
    assert stack_step(shared, "dev", shared="acme-tpu").returncode == 0
    assert output.read_text() == "backend=gs://acme-tpu-state\n"
    assert stack_step(shared, "prod").returncode == 0, "prod is not the stack whose account reaches the other's"
    apart = checkout(tmp_path / "apart", "acme-dev", "acme-prod")
    assert stack_step(apart, "dev").returncode == 0
    assert output.read_text() == "backend=\n"
    # A stack file the check refuses stops the step (a value that is not a backend URL).
    hostile = checkout(tmp_path / "hostile", "acme-dev", "acme-prod", backend="'gs://x\n  evil'")
    done = stack_step(hostile, "dev")
    assert done.returncode == 2 and done.stderr.startswith("error: Pulumi.dev.yaml: tpu-rl:stateBackend is ")


def test_the_setup_docs_say_how_each_guarantee_is_set_up():
    security = " ".join((ROOT / "docs" / "guardrails.md").read_text().split())
    operations = " ".join((ROOT / "docs" / "ci.md").read_text().split())
    for words in (
        "deploy-prod-continued",
        "DEPLOY_RUNS_ON_PROD",
        "DEPLOY_RUNS_ON_DEV",
        "--ephemeral",
        "Protected branches only",
        "DEPLOY_DEV_SHARED_PROJECT",
        "GITHUB_RUN_ATTEMPT",
        "actions: write",
        "Allow administrators to bypass",
        "tpu-rl:stateBackend",
    ):
        assert words in security, words
    assert "DEPLOY_RUNS_ON`" not in security + operations, "no runner variable shared by the stacks"
    for words in ("deploy-prod-continued", "make venv policy-venv", "pulumi plugin install", "approved"):
        assert words in operations, words
