"""The pull-request workflows: the tests and the policy preview run, and a branch cannot use the preview to
read prod (docs/guardrails.md "Guardrails and PR review"; GitHub's security hardening guide for Actions); the
Workload Identity providers (one in each stack's project) and bindings the page documents admit this repository's
tokens, by id, from each account's own environments alone (evaluated here as Google evaluates an attribute condition:
CEL on the token's claims)."""

from __future__ import annotations

import re
import shlex
from typing import Any

import celpy
import pytest
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
    pinned = re.compile(r"^\s*- uses: [\w.-]+/[\w.-]+(/[\w.-]+)?@[0-9a-f]{40} # v\d+\.\d+\.\d+$")  # owner/repo[/action]
    for workflow in sorted(WORKFLOWS.glob("*.yml")):
        uses = [line for line in workflow.read_text().splitlines() if "uses:" in line]
        assert uses, workflow.name
        for line in uses:
            assert pinned.match(line), f"{workflow.name}: {line.strip()} (pin the full commit SHA, tag in a comment)"


def test_the_security_page_gives_the_setup_that_makes_this_hold():
    page = (ROOT / "docs" / "guardrails.md").read_text()
    for words in (
        "required reviewers",
        "assertion.repository_owner_id == 'OWNER_ID' && assertion.repository_id == 'REPO_ID'",
        "assertion.environment == 'preview-prod'",
        "assertion.environment in ['deploy-prod', 'deploy-prod-continued'] && "
        "assertion.workflow_ref.startsWith('OWNER/REPO/.github/workflows/deploy.yml@refs/heads/')",
        "attribute.environment/preview-prod",
        "environment secrets",
        "`tpu-rl-branch`",
        "`kernel.yama.ptrace_scope`",
        "What this does not cover",
    ):
        assert words in page, words


# The Workload Identity provider and bindings, as the page gives them.


def _commands(page: str) -> list[list[str]]:
    """Each gcloud command of the page's bash blocks, as the shell splits it, a `for environment in ...` loop
    written out once per value."""
    found: list[list[str]] = []
    for block in re.findall(r"```bash\n(.*?)```", page, re.S):
        lines = [line.strip() for line in re.sub(r"\\\n\s*", " ", block).splitlines() if line.strip()]
        values: list[str] = [""]
        for line in lines:
            loop = re.fullmatch(r"for environment in (.+); do", line)
            if loop:
                values = loop.group(1).split()
            elif line == "done":
                values = [""]
            elif line.startswith("gcloud "):
                found += [shlex.split(line.replace("$environment", value)) for value in values]
    return found


def _flags(command: list[str]) -> dict[str, str]:
    return dict(word[2:].split("=", 1) for word in command if word.startswith("--") and "=" in word)


PAGE_COMMANDS = _commands((ROOT / "docs" / "guardrails.md").read_text())
PROVIDERS = {
    _flags(c)["project"]: c
    for c in PAGE_COMMANDS
    if c[1:5] == ["iam", "workload-identity-pools", "providers", "create-oidc"]
}
"""Each stack's provider, by the project of its pool: prod's ``P``, dev's ``D`` (one pool per stack's project)."""
STACK_OF = {"P": "prod", "D": "dev"}
ENVIRONMENTS = {
    "prod": (("preview-prod",), ("deploy-prod", "deploy-prod-continued")),
    "dev": (("preview-dev",), ("deploy-dev", "deploy-dev-continued")),
}
"""A stack's preview and deploy environments."""
REPO = {"OWNER/REPO": "octo-org/octo-repo", "REPO_ID": "74", "OWNER_ID": "65"}
"""The page's placeholders, filled as GitHub's own example token has them (GitHub Docs, "OpenID Connect reference":
``repository_id`` and ``repository_owner_id`` are strings)."""


def _claims(environment: str | None, workflow: str = "preview.yml", **changed: str) -> dict[str, str]:
    """A GitHub Actions OIDC token's claims for a job of octo-org/octo-repo (https://docs.github.com/en/actions/
    reference/security/oidc): ``environment`` only for a job that declares one."""
    claims = {
        "sub": f"repo:octo-org/octo-repo:environment:{environment}",
        "repository": "octo-org/octo-repo",
        "repository_id": "74",
        "repository_owner": "octo-org",
        "repository_owner_id": "65",
        "workflow_ref": f"octo-org/octo-repo/.github/workflows/{workflow}@refs/heads/main",
        "ref": "refs/heads/main",
        **changed,
    }
    if environment is not None:
        claims["environment"] = environment
    return claims


def _admits(claims: dict[str, Any], project: str = "P") -> bool:
    """Google's verdict on the provider of the pool in ``project``: its condition is true (false, or an error such
    as a missing claim, rejects the token)."""
    expression = _flags(PROVIDERS[project])["attribute-condition"]
    for placeholder, value in REPO.items():
        expression = expression.replace(placeholder, value)
    environment = celpy.Environment()
    program = environment.program(environment.compile(expression))
    try:
        result = program.evaluate({"assertion": celpy.json_to_cel(claims)})
    except celpy.CELEvalError:
        return False
    return isinstance(result, celpy.celtypes.BoolType) and bool(result)


def test_each_stacks_provider_pins_the_repository_by_id_and_names_its_own_environments_alone():
    """One pool per stack's project: prod's provider admits prod's environments and none of dev's, and the other way
    round, so dev's deploy identity, which administers dev's project, rewrites no provider prod's principals come
    from."""
    assert set(PROVIDERS) == set(STACK_OF)
    for project, stack in STACK_OF.items():
        flags = _flags(PROVIDERS[project])
        condition = flags["attribute-condition"]
        assert "assertion.repository ==" not in condition and "assertion.repository_owner ==" not in condition, (
            "a name is reused once a repository is renamed or deleted; an id never is"
        )
        assert flags["issuer-uri"] == "https://token.actions.githubusercontent.com"
        assert "attribute.environment=assertion.environment" in flags["attribute-mapping"].split(",")
        for other, (previews, deploys) in ENVIRONMENTS.items():
            for environment in previews:
                assert _admits(_claims(environment), project) == (other == stack), (project, environment)
            for environment in deploys:
                assert _admits(_claims(environment, "deploy.yml"), project) == (other == stack), (project, environment)
                assert not _admits(_claims(environment, "preview.yml"), project), f"{environment} from another workflow"


@pytest.mark.parametrize(
    "claims",
    [
        _claims("preview-prod", repository_id="75"),  # a new repository that took the name
        _claims("preview-prod", repository_owner_id="66"),  # an owner that took the name
        _claims("deploy-prod", "deploy.yml", repository_id="75"),
        _claims(None),  # a job with no environment (a push, a pull request's other jobs)
        _claims("production"),
        _claims("deploy-prod", "deploy.yml", workflow_ref="evil/octo-repo/.github/workflows/deploy.yml@refs/heads/x"),
    ],
    ids=["renamed-repo", "renamed-owner", "deploy-other-repo", "no-environment", "other-environment", "other-ref"],
)
def test_the_provider_refuses_another_repository_or_environment(claims):
    assert not _admits(claims)


def test_each_account_is_bound_to_its_own_environments_alone():
    """A principalSet per environment (attribute.environment, mapped from assertion.environment) of the pool in the
    account's own project, one binding per account and environment: a dev job cannot impersonate a prod account, a
    preview never a deploy account."""
    bound: dict[str, set[str]] = {}
    for command in PAGE_COMMANDS:
        if command[1:4] != ["iam", "service-accounts", "add-iam-policy-binding"]:
            continue
        flags = _flags(command)
        assert flags["role"] == "roles/iam.workloadIdentityUser"
        project = command[4].split("@")[1].split(".")[0]
        pool = _flags(PROVIDERS[project])["workload-identity-pool"]
        prefix = f"principalSet://iam.googleapis.com/projects/{project}_NUMBER/locations/global/workloadIdentityPools/"
        assert flags["member"].startswith(f"{prefix}{pool}/attribute.environment/"), flags["member"]
        bound.setdefault(command[4].split("@")[0], set()).add(flags["member"].rsplit("/", 1)[1])
    assert bound == {
        "preview-prod": {"preview-prod"},
        "preview-dev": {"preview-dev"},
        "deploy-prod": {"deploy-prod", "deploy-prod-continued"},
        "deploy-dev": {"deploy-dev", "deploy-dev-continued"},
    }
