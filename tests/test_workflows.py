"""The pull-request workflows: the tests and the policy preview run, and a branch cannot use the preview to
read prod (docs/security.md "Guardrails and PR review"; GitHub's security hardening guide for Actions)."""

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
    return next(i for i, s in enumerate(STEPS) if s.get("uses", "").startswith(prefix) or s.get("run") == prefix)


def test_the_tests_and_the_policy_preview_run_on_every_pull_request():
    tests = yaml.safe_load((WORKFLOWS / "test.yml").read_text())
    runs = [s["run"] for s in tests["jobs"]["test"]["steps"] if "run" in s]
    assert runs == ["TEST_BUDGET_STRICT=1 make test", "make lint", "make test-slow"], "as .ci/run: every tier"
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    assert JOB["strategy"]["matrix"]["stack"] == ["dev", "prod"]
    pulumi = step("pulumi/actions@")["with"]
    # The base branch's pack and config, never the pull request's (tests/test_preview_workflow.py).
    assert pulumi["command"] == "preview" and pulumi["comment-on-pr"] is True and pulumi["policyPacks"] == "base/policy"
    assert pulumi["policyPackConfigs"] == "base/policy/config/${{ matrix.stack }}.json"
    for stack in ("dev", "prod"):
        assert (ROOT / "policy" / "config" / f"{stack}.json").exists()


def test_each_stack_previews_in_its_own_environment_and_only_that_job_gets_an_oidc_token():
    """preview-prod has required reviewers (docs/security.md, the one-time setup): nothing of a prod preview runs
    before approval, and the Workload Identity provider accepts tokens of these environments only."""
    assert PREVIEW[True] == {"pull_request": None}, "never pull_request_target (YAML 1.1 reads the key on as True)"
    assert PREVIEW["permissions"] == {"contents": "read"}, "no workflow-wide id-token or write permission"
    assert JOB["environment"] == "preview-${{ matrix.stack }}"
    assert JOB["permissions"] == {"contents": "read", "id-token": "write", "pull-requests": "write"}
    auth = step("google-github-actions/auth@")["with"]
    assert "workload_identity_provider" in auth and "credentials_json" not in auth, "no long-lived keys"


def test_secrets_reach_the_preview_step_alone_and_the_branchs_install_runs_first():
    text = (WORKFLOWS / "preview.yml").read_text()
    assert "env" not in PREVIEW and "env" not in JOB, "no workflow- or job-level environment"
    holders = [i for i, s in enumerate(STEPS) if "secrets." in yaml.safe_dump(s)]
    assert holders == [index("pulumi/actions@")], "only the pulumi step sees a secret"
    assert set(step("pulumi/actions@")["env"]) == {"PULUMI_ACCESS_TOKEN", "PULUMI_CONFIG_PASSPHRASE"}
    install = index("make venv")
    base_pack = next(i for i, s in enumerate(STEPS) if "policy/requirements.lock" in s.get("run", ""))
    assert base_pack < install < index("google-github-actions/auth@") < index("pulumi/actions@"), (
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
    page = (ROOT / "docs" / "security.md").read_text()
    for words in (
        "required reviewers",
        "assertion.environment in ['preview-dev', 'preview-prod']",
        "attribute.environment/preview-prod",
        "environment secrets",
    ):
        assert words in page, words
