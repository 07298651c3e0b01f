"""The pull-request workflows: the tests and the policy preview run, and a branch cannot use the preview to
read prod (docs/guardrails.md "Guardrails and PR review"; GitHub's security hardening guide for Actions)."""

from __future__ import annotations

import re

import yaml

from tools.stack_files import ROOT

WORKFLOWS = ROOT / ".github" / "workflows"
PREVIEW = yaml.safe_load((WORKFLOWS / "preview.yml").read_text())
JOB = PREVIEW["jobs"]["preview"]
STEPS = JOB["steps"]


def step(prefix: str) -> dict:
    return next(s for s in STEPS if s.get("uses", "").startswith(prefix))


def index(prefix: str) -> int:
    """The step that uses the action ``prefix``, or whose script holds ``prefix``."""
    return next(i for i, s in enumerate(STEPS) if s.get("uses", "").startswith(prefix) or prefix in s.get("run", ""))


def test_the_tests_and_the_policy_preview_run_on_every_pull_request():
    tests = yaml.safe_load((WORKFLOWS / "test.yml").read_text())
    runs = [s["run"] for s in tests["jobs"]["test"]["steps"] if "run" in s]
    assert runs == ["TEST_BUDGET_STRICT=1 make test", "make lint", "make test-slow"], "as .ci/run: every tier"
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    assert JOB["strategy"]["matrix"]["stack"] == ["dev", "prod"]
    # The base branch's pack and config, installed where the branch cannot write, never the pull request's
    # (tests/test_preview_workflow.py); the result commented on the pull request.
    preview = STEPS[index('/pulumi/pulumi" preview')]["run"]
    assert "--json --show-sames" in preview and "--policy-pack" not in preview
    judge = STEPS[index("judge_preview.py")]["run"]
    assert (
        '"$trusted/policy/venv/bin/python" "$trusted/policy/judge_preview.py" "$stack" "$RUNNER_TEMP/preview.json"'
    ) in judge
    assert "gh pr comment" in STEPS[index("gh pr comment")]["run"]
    assert "command" not in step("pulumi/actions@")["with"], "the action installs the CLI only"
    for stack in ("dev", "prod"):
        assert (ROOT / "policy" / "config" / f"{stack}.json").exists()


def test_each_stack_previews_in_its_own_environment_and_only_that_job_gets_an_oidc_token():
    """preview-prod has required reviewers (docs/guardrails.md, the one-time setup): nothing of a prod preview runs
    before approval, and the Workload Identity provider accepts tokens of these environments only."""
    assert PREVIEW[True] == {"pull_request": None}, "never pull_request_target (YAML 1.1 reads the key on as True)"
    assert PREVIEW["permissions"] == {"contents": "read"}, "no workflow-wide id-token or write permission"
    assert JOB["environment"] == "preview-${{ matrix.stack }}"
    assert JOB["permissions"] == {"contents": "read", "id-token": "write", "pull-requests": "write"}
    auth = step("google-github-actions/auth@")["with"]
    assert "workload_identity_provider" in auth and "credentials_json" not in auth, "no long-lived keys"
    assert [s.get("uses", "").split("@")[0] for s in STEPS].count("google-github-actions/auth") == 1


def test_secrets_reach_the_preview_step_alone_and_the_branchs_install_runs_first():
    """The stack's secrets reach the preview step alone; the GitHub token, given explicitly, the comment step alone,
    which runs none of the branch's code (tests/test_preview_workflow.py: the branch's code runs as tpu-rl-branch)."""
    text = (WORKFLOWS / "preview.yml").read_text()
    assert "env" not in PREVIEW and "env" not in JOB, "no workflow- or job-level environment"
    holders = [i for i, s in enumerate(STEPS) if "secrets." in yaml.safe_dump(s)]
    preview, comment = index('/pulumi/pulumi" preview'), index("gh pr comment")
    assert holders == [preview, comment], "only the preview and the comment steps see a secret"
    assert {k for k, v in STEPS[preview]["env"].items() if "secrets." in v} == {
        "PULUMI_ACCESS_TOKEN",
        "PULUMI_CONFIG_PASSPHRASE",
    }
    assert STEPS[comment]["env"] == {"GH_TOKEN": "${{ secrets.GITHUB_TOKEN }}"}
    assert "sudo" not in STEPS[comment]["run"].replace("/var/lib/tpu-rl-preview/end-branch-processes", "")
    install = index("/usr/bin/make venv")
    base_pack = index("policy/requirements.lock")
    assert base_pack < install < index("google-github-actions/auth@") < preview < comment, (
        "no credential during install"
    )
    assert "env" not in STEPS[install] and "env" not in STEPS[base_pack]
    checkouts = [s for s in STEPS if s.get("uses", "").startswith("actions/checkout@")]
    assert len(checkouts) == 2 and all(s["with"]["persist-credentials"] is False for s in checkouts), (
        "no GitHub token left in .git"
    )
    assert text.count("secrets.") == 3


def test_every_action_is_pinned_by_commit_sha_with_its_tag():
    pinned = re.compile(r"^\s*- uses: [\w.-]+/[\w.-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+$")
    for workflow in sorted(WORKFLOWS.glob("*.yml")):
        uses = [line for line in workflow.read_text().splitlines() if "uses:" in line]
        assert uses, workflow.name
        for line in uses:
            assert pinned.match(line), f"{workflow.name}: {line.strip()} (pin the full commit SHA, tag in a comment)"


def test_the_security_page_gives_the_setup_that_makes_this_hold():
    page = (ROOT / "docs" / "guardrails.md").read_text()
    for words in (
        "required reviewers",
        "assertion.environment in ['preview-dev', 'preview-prod']",
        "assertion.environment in ['deploy-dev', 'deploy-dev-continued', 'deploy-prod', 'deploy-prod-continued'] && "
        "assertion.workflow_ref.startsWith('OWNER/REPO/.github/workflows/deploy.yml@refs/heads/')",
        "attribute.environment/deploy-prod`",
        "attribute.environment/deploy-prod-continued`",
        "attribute.environment/preview-prod",
        "environment secrets",
        "`tpu-rl-branch`",
        "`kernel.yama.ptrace_scope`",
        "What this does not cover",
    ):
        assert words in page, words
