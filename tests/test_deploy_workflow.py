"""The deploy workflow (.github/workflows/deploy.yml): `make up` of one stack from GitHub Actions, everything per stack
(environment, runner), the state where the committed stack file records it and nowhere else, reviewed branches only
(a ruleset's pull_request rule, read from GitHub's REST API), every install before any secret, and a run longer than
the runner's job limit stopped with Pulumi's Ctrl-C and continued by the next round of the same run, which the one
approval of round 0 carries and a re-run does not (docs/guardrails.md "The deploy workflow"). The rounds' scripts run
here in real bash with the GitHub variables set: the round's check against a fake `curl` answering as GitHub's REST
API answers (real jq reads it); `make up` with the real `make` and `tools.state select` and a fake `pulumi` only
(tests/fake_pulumi.py), and the bound with a `make` that waits for Ctrl-C; expressions are evaluated as the runner
evaluates them (tests/github_expression.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.deploy_rounds import (
    BASH,
    DEPLOY,
    JOB,
    JOBS,
    JQ,
    STEPS,
    TOKEN,
    WORKFLOWS,
    check_round,
    github_answers,
    index,
    pull_request,
    rule,
    run_step,
    stack_step,
    up_env,
    with_check_tool,
    write,
)
from tests.fake_pulumi import CLEAN, calls, checkout, install
from tests.github_expression import evaluate, render, render_text
from tools.stack_files import ROOT

pytestmark = pytest.mark.slow

PREVIEW = yaml.safe_load((WORKFLOWS / "preview.yml").read_text())
ROUNDS = 13
"""Round 0 (the job `deploy`) and the continuations `continue-1` ... `continue-12`."""
CONTINUATIONS = [f"continue-{n}" for n in range(1, ROUNDS)]
HOSTED_JOB_LIMIT_MINUTES = 360
"""GitHub-hosted runners: "Each job in a workflow can run for up to 6 hours of execution time" (GitHub Docs, Actions
limits)."""
MAKE = shutil.which("make")
REVIEWED = "deploy-${{ inputs.stack }}"
CONTINUED = "deploy-${{ inputs.stack }}-continued"


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
    """The job's GITHUB_TOKEN is read-only (contents: read; metadata: read, which every GITHUB_TOKEN holds, is what
    the rules endpoint needs) and reaches the round's check alone, before the checkout."""
    assert DEPLOY["concurrency"] == {"group": "deploy-${{ inputs.stack }}", "cancel-in-progress": False}, (
        "a cancelled `up` would leave the stack locked"
    )
    assert DEPLOY["permissions"] == {"contents": "read"}
    for name, job in JOBS.items():
        assert job["permissions"] == {"contents": "read", "id-token": "write"}, name
    holders = [i for i, step in enumerate(STEPS) if "github.token" in yaml.safe_dump(step)]
    assert holders == [0] and STEPS[0]["env"]["GITHUB_TOKEN"] == "${{ github.token }}"
    text = yaml.safe_dump(DEPLOY)  # what runs, comments aside
    assert "secrets.GITHUB_TOKEN" not in text and "actions" not in DEPLOY["permissions"]
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


@pytest.mark.skipif(BASH is None, reason="bash")
def test_the_round_step_reads_what_the_runner_sets():
    step = STEPS[0]
    assert step["id"] == "round" and "uses" not in step
    assert step["env"] == {
        "STACK": "${{ inputs.stack }}",
        "DEFAULT_BRANCH": "${{ github.event.repository.default_branch }}",
        "APPROVED_ATTEMPT": "${{ needs.deploy.outputs.approved-attempt }}",
        "ROUND_JOB": "${{ github.job }}",
        "GITHUB_TOKEN": "${{ github.token }}",
    }
    # In round 0, `needs` has no `deploy`: a property of null is null (actions/runner Index.cs), so empty.
    assert render_text(step["env"]["APPROVED_ATTEMPT"], {"needs": {}}) == ""
    approved = {"needs": {"deploy": {"outputs": {"approved-attempt": "2"}}}}
    assert render_text(step["env"]["APPROVED_ATTEMPT"], approved) == "2"


@pytest.mark.skipif(BASH is None or JQ is None, reason="bash and jq")
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


@pytest.mark.skipif(BASH is None or JQ is None, reason="bash and jq")
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


NOT_REVIEWED = (
    'has no active ruleset rule "Require a pull request before merging" with at least 1 required approval, "Dismiss '
    'stale pull request approvals when new commits are pushed" and "Require approval of the most recent reviewable '
    'push"; {stack} deploys only reviewed code: add that ruleset for {branch}, enforcement Active, no bypass list '
    '(docs/guardrails.md "The deploy workflow")'
)
UNREVIEWED_RULES = {
    "no ruleset (a classic protection rule, which the job's token cannot read, or none)": [],
    "a ruleset without a pull request rule": [rule("deletion"), rule("non_fast_forward")],
    "a pull request with no approval": [pull_request(required_approving_review_count=0)],
    "approvals that survive a new push": [pull_request(dismiss_stale_reviews_on_push=False)],
    "a last push its pusher may approve": [pull_request(require_last_push_approval=False)],
    "a count that is not a number": [pull_request(required_approving_review_count="1")],
    "a pull request rule without parameters": [rule("pull_request")],
}


@pytest.mark.skipif(BASH is None or JQ is None, reason="bash and jq")
@pytest.mark.parametrize("stack,branch", [("dev", "release/1.2"), ("prod", "main")])
def test_a_round_deploys_only_a_branch_whose_ruleset_requires_a_reviewed_pull_request(tmp_path, stack, branch):
    """ "Protected" is not "reviewed": the branch's active rules (GitHub's REST API, GET
    /repos/{owner}/{repo}/rules/branches/{branch}) must hold a pull_request rule asking for an approval, dismissing a
    stale one and having the last push approved by another person; asked with the job's token, given on stdin."""
    values = {"STACK": stack, "GITHUB_REF": f"refs/heads/{branch}", "GITHUB_REF_NAME": branch}
    github_answers(tmp_path)
    done, output = check_round(tmp_path, **values)
    assert done.returncode == 0, done.stderr
    assert output == "round=0\napproved-attempt=1\n"
    argv = (tmp_path / "curl.log.argv").read_text().splitlines()
    encoded = branch.replace("/", "%2F")
    assert argv[-1] == f"https://api.github.com/repos/acme/tpu-rl/rules/branches/{encoded}?per_page=100"
    assert TOKEN not in "".join(argv), "the token is never on a command line (/proc/<pid>/cmdline is anyone's)"
    assert (tmp_path / "curl.log.stdin").read_text() == f"Authorization: Bearer {TOKEN}\n"
    assert (
        argv[argv.index("--header") + 1] == "@-" and "--proto" in argv and argv[argv.index("--proto") + 1] == "=https"
    )
    # Two rulesets: a weak one and the one that makes it reviewed (GitHub enforces every one; one suffices here).
    github_answers(tmp_path, [pull_request(required_approving_review_count=0), rule("deletion", 7), pull_request()])
    assert check_round(tmp_path, **values)[0].returncode == 0
    github_answers(tmp_path, [pull_request(required_approving_review_count=2)])
    assert check_round(tmp_path, **values)[0].returncode == 0
    for case, rules in UNREVIEWED_RULES.items():
        github_answers(tmp_path, rules)
        done, output = check_round(tmp_path, **values)
        assert (done.returncode, output) == (1, ""), case
        assert done.stderr == f"error: branch {branch} {NOT_REVIEWED.format(stack=stack, branch=branch)}\n", case


@pytest.mark.skipif(BASH is None or JQ is None, reason="bash and jq")
def test_an_answer_the_round_cannot_read_refuses_in_one_line(tmp_path):
    """Not found (a token without access), a network failure, a body that is not a list: one line, nothing runs."""
    github_answers(tmp_path, body='{"message": "Not Found", "status": "404"}')
    done, output = check_round(tmp_path, CURL_STATUS="404")
    assert (done.returncode, output) == (1, "")
    assert done.stderr == (
        "error: GitHub's REST API answered 404 to GET /repos/acme/tpu-rl/rules/branches/main (the rules that say main "
        "is reviewed); prod deploys only reviewed code: run the workflow again, or read the API's status\n"
    )
    github_answers(tmp_path, body="")
    done, _ = check_round(tmp_path, CURL_STATUS="000", CURL_EXIT="7")  # curl: could not connect
    assert done.returncode == 1 and done.stderr.startswith("error: GitHub's REST API answered 000 to GET ")
    for body in ('{"message": "Moved"}', "<html>", '"pull_request"'):
        github_answers(tmp_path, body=body)
        done, output = check_round(tmp_path)
        assert (done.returncode, output) == (1, ""), body
        assert done.stderr == (
            "error: GitHub's answer to GET /repos/acme/tpu-rl/rules/branches/main is not a list of rules; prod deploys "
            "only reviewed code\n"
        ), body


@pytest.mark.skipif(BASH is None or shutil.which("timeout") is None, reason="bash and coreutils' timeout")
def test_an_up_stopped_at_its_bound_asks_for_the_next_round_until_the_last(tmp_path):
    """The bound and the rounds, with a `make` that waits for Ctrl-C as `pulumi up` does (what `make up` itself does
    with the stack's home: the next test, with the real `make`)."""
    (tmp_path / "bin").mkdir()
    # A `make up` that waits until Ctrl-C (SIGINT), as Pulumi does, then ends as the CLI does after a cancel.
    write(
        tmp_path / "bin",
        "make",
        '#!/bin/bash\necho "$* ${PULUMI_BACKEND_URL-unset}" > "$CALLS"\ntrap "exit 255" INT\n'
        "while :; do sleep 0.05; done\n",
    )
    script = STEPS[index("make up STACK")]["run"]
    done = run_step(tmp_path, script, up_env(tmp_path, PULUMI_BACKEND_URL="gs://elsewhere"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "output").read_text() == "continue=true\n"
    assert (tmp_path / "calls").read_text() == "up STACK=prod YES=1 unset\n", "no backend but the stack file's"
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


def installed_checkout(tmp_path: Path, dev_home: str) -> Path:
    """A checkout (tests/fake_pulumi.py ``checkout``: its own Makefile, stack files and tools) as the install step
    leaves it: both venvs' stamps current (`policy/` a folder of its own, whose `venv/.installed` is new), and
    ``Pulumi.dev.yaml`` naming a project of its own and recording ``dev_home`` as its state home."""
    root = checkout(tmp_path)
    (root / "policy").unlink()
    (root / "policy").mkdir()
    for entry in (ROOT / "policy").iterdir():
        if entry.name not in ("venv", "__pycache__"):
            (root / "policy" / entry.name).symlink_to(entry)
    (root / "policy" / "venv").mkdir()
    (root / "policy" / "venv" / ".installed").touch()
    dev = root / "Pulumi.dev.yaml"
    text = dev.read_text().replace("my-tpu-dev-project", "acme-dev")
    dev.write_text(text.replace("config:\n", f"config:\n  tpu-rl:stateBackend: {dev_home}\n", 1))
    return root


@pytest.mark.skipif(
    BASH is None or MAKE is None or shutil.which("timeout") is None, reason="bash, make and coreutils' timeout"
)
def test_make_up_gets_the_stack_files_home_through_tools_state_select_and_no_other(tmp_path):
    """The step as it runs: the real `make up` (its `tools.state select`, locks and state read) in a checkout whose
    dev stack file records a home outside it; only `pulumi` is a fake (tests/fake_pulumi.py, keeping the stack where
    the diy backend keeps it). Every pulumi command gets the recorded home; a PULUMI_BACKEND_URL the runner carries
    is not a second source: the step unsets it, and `select` would refuse it (exit 2) were it kept."""
    state = tmp_path / "state"
    home = f"file://{state}"
    root = installed_checkout(tmp_path, home)
    (state / ".pulumi" / "stacks" / "tpu-rl").mkdir(parents=True)
    (state / ".pulumi" / "stacks" / "tpu-rl" / "dev.json").write_text('{"version": 3, "deployment": null}')
    install(tmp_path / "bin")
    log = tmp_path / "pulumi.log"
    env = {k: v for k, v in os.environ.items() if k not in CLEAN}
    env.update(
        PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}",
        PULUMI_LOG=str(log),
        PULUMI_HOME=str(tmp_path / "pulumi-home"),
        FAKE_CLOUD=str(tmp_path / "cloud"),
        GITHUB_OUTPUT=str(tmp_path / "output"),
        STACK="dev",
        ROUND="0",
        UP_MINUTES="5",
        PULUMI_BACKEND_URL="gs://acme-dev-pulumi-state-dev",  # a runner's leftover: the stack's default, not its home
    )
    (tmp_path / "output").write_text("")
    script = STEPS[index("make up STACK")]["run"]
    done = run_step(tmp_path, script, env, cwd=root)
    assert done.returncode == 0, done.stderr
    made = [(" ".join(c["argv"]), c["backend"]) for c in calls(log)]
    assert made == [
        ("stack select dev", home),
        ("stack export --stack dev", home),
        (
            "up --stack dev --yes --non-interactive --policy-pack policy --policy-pack-config policy/config/dev.json",
            home,
        ),
    ]
    assert (tmp_path / "output").read_text() == "", "an up that ended asks for no other round"
    # The same step keeping the runner's variable meets `select`'s refusal: the check the step must not rely on.
    log.write_text("")
    kept = script.replace("unset PULUMI_BACKEND_URL\n", "")
    assert kept != script
    done = run_step(tmp_path, kept, env, cwd=root)
    assert done.returncode == 2 and calls(log) == []
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert line.startswith(
        f"error: PULUMI_BACKEND_URL is gs://acme-dev-pulumi-state-dev, but stack dev's state lives in {home}"
    )


def stack_files(tmp_path: Path, dev_project: str, prod_project: str, backend: str = "gs://acme-{stack}-state") -> Path:
    """What the stack step finds: the checkout's check tool, the venv's python and the two stack files, each
    recording ``backend`` (``{stack}`` the stack's name) unless it is empty."""
    root = with_check_tool(tmp_path / "checkout")
    for stack, project in (("dev", dev_project), ("prod", prod_project)):
        record = f"  tpu-rl:stateBackend: {backend.replace('{stack}', stack)}\n" if backend else ""
        (root / f"Pulumi.{stack}.yaml").write_text(f"config:\n  gcp:project: {project}\n{record}")
    return root


@pytest.mark.skipif(BASH is None, reason="bash")
def test_a_stack_file_that_records_no_home_is_refused_before_any_credential(tmp_path):
    """No per-environment home: the committed stack file's tpu-rl:stateBackend is the one source CI reads, and a
    file that records none stops the run in one line, before Workload Identity and `make up`."""
    (tmp_path / "bin").mkdir()
    assert "vars.PULUMI_BACKEND_URL" not in yaml.safe_dump(DEPLOY) and "PULUMI_BACKEND_URL" not in str(
        STEPS[index("make up STACK")]["env"]
    )
    assert index("tools/check_pulumi_project.py --get") < index("google-github-actions/auth@") < index("make up STACK")
    for stack in ("dev", "prod"):
        done = stack_step(tmp_path, stack_files(tmp_path / stack, "acme-dev", "acme-prod", backend=""), stack)
        assert (done.returncode, done.stdout) == (1, "")
        assert done.stderr == (
            f"error: Pulumi.{stack}.yaml records no tpu-rl:stateBackend: CI deploys a stack only where its committed "
            f"stack file says its state lives; run make stack STACK={stack} where the stack's state is, and commit "
            f'Pulumi.{stack}.yaml (docs/ci.md "Running up from GitHub Actions")\n'
        )
    recorded = stack_files(tmp_path / "recorded", "acme-dev", "acme-prod")
    assert stack_step(tmp_path, recorded, "prod").returncode == 0
    assert stack_step(tmp_path, recorded, "dev").returncode == 0


@pytest.mark.skipif(BASH is None, reason="bash")
def test_a_shared_project_is_the_programs_to_refuse_not_a_repository_variables(tmp_path):
    """One home for "two stacks in one project": the stack files' tpu-rl:sharedProject, which the program's preflight
    reads (core/config/projects.py); the workflow's step reads the recorded home only, whatever the projects."""
    (tmp_path / "bin").mkdir()
    step = STEPS[index("tools/check_pulumi_project.py --get")]
    assert step["id"] == "stack" and "SHARED_PROJECT" not in step["env"]
    assert "DEPLOY_DEV_SHARED_PROJECT" not in (ROOT / ".github" / "workflows" / "deploy.yml").read_text()
    assert (
        index("make venv policy-venv")
        < index("tools/check_pulumi_project.py --get")
        < index("google-github-actions/auth@")
    )
    shared = stack_files(tmp_path / "shared", "acme-tpu", "acme-tpu")
    assert stack_step(tmp_path, shared, "dev").returncode == 0, "the preflight refuses it, with the stack file's key"
    # A stack file the check refuses stops the step (a value that is not a backend URL).
    hostile = stack_files(tmp_path / "hostile", "acme-dev", "acme-prod", backend="'gs://x\n  evil'")
    done = stack_step(tmp_path, hostile, "dev")
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
        "tpu-rl:sharedProject",
        "GITHUB_RUN_ATTEMPT",
        "actions: write",
        "Allow administrators to bypass",
        "tpu-rl:stateBackend",
        "GET /repos/{owner}/{repo}/rules/branches/{branch}",
        "Require a pull request before merging",
        "Dismiss stale pull request approvals when new commits are pushed",
        "Require approval of the most recent reviewable push",
        "require_last_push_approval",
        "no bypass list",
    ):
        assert words in security, words
    assert "PULUMI_BACKEND_URL` of the job's environment" not in security + operations, "no per-environment home"
    assert "DEPLOY_RUNS_ON`" not in security + operations, "no runner variable shared by the stacks"
    for words in (
        "deploy-prod-continued",
        "make venv policy-venv",
        "pulumi plugin install",
        "approved",
        "No per-environment home",
        "make stack STACK=<stack>",
    ):
        assert words in operations, words
