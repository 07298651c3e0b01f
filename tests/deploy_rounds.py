"""The deploy workflow's rounds as CI runs them (.github/workflows/deploy.yml): each step's own bash, run here in real
bash with the GitHub variables set (``round_env``), the round's check against a fake `curl` answering as GitHub's REST
API answers (``github_answers``: real jq reads it), the stack step in a checkout with its check tool
(``with_check_tool``, ``stack_step``), and the `make up` step with the `make` a test puts on PATH (``up_env``).
``tests/test_deploy_workflow.py`` pins the workflow's structure with these; a scenario runs a round for its stack."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.project_check import venv_python
from tools.stack_files import ROOT

WORKFLOWS = ROOT / ".github" / "workflows"
DEPLOY = yaml.safe_load((WORKFLOWS / "deploy.yml").read_text())
JOBS: dict[str, Any] = DEPLOY["jobs"]
JOB = JOBS["deploy"]
STEPS = JOB["steps"]
BASH = shutil.which("bash")
JQ = shutil.which("jq")


def index(text: str) -> int:
    """The step of round 0 that uses the action ``text``, or whose script holds ``text``."""
    return next(i for i, s in enumerate(STEPS) if s.get("uses", "").startswith(text) or text in s.get("run", ""))


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
    """The round step's environment as the runner sets it: GitHub's variables for a dispatch of `main`, and what the
    fake `curl` answers (``CURL_*``)."""
    return {
        "GITHUB_API_URL": "https://api.github.com",
        "GITHUB_REPOSITORY": "acme/tpu-rl",
        "GITHUB_TOKEN": TOKEN,
        "CURL_BODY": str(tmp_path / "answer.json"),
        "CURL_STATUS": "200",
        "CURL_EXIT": "0",
        "CURL_LOG": str(tmp_path / "curl.log"),
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


TOKEN = "ghs_" + "T" * 36
"""The job's GITHUB_TOKEN (its shape: ``ghs_`` and 36 characters)."""


def rule(kind: str, ruleset: int = 42, **parameters: Any) -> dict[str, Any]:
    """One entry of GitHub's answer to ``GET /repos/{owner}/{repo}/rules/branches/{branch}`` ("Get rules for a
    branch", https://docs.github.com/en/rest/repos/rules: every rule of every active ruleset that targets the branch,
    whatever the level it is set at), with the ruleset it comes from."""
    entry: dict[str, Any] = {"type": kind}
    if parameters:
        entry["parameters"] = parameters
    return {**entry, "ruleset_source_type": "Repository", "ruleset_source": "acme/tpu-rl", "ruleset_id": ruleset}


def pull_request(**changed: Any) -> dict[str, Any]:
    """The `pull_request` rule of a ruleset that makes a branch reviewed (the REST API's
    ``repository-rule-pull-request`` parameters), with ``changed`` set."""
    parameters = {
        "required_approving_review_count": 1,
        "dismiss_stale_reviews_on_push": True,
        "require_code_owner_review": False,
        "require_last_push_approval": True,
        "required_review_thread_resolution": False,
        "allowed_merge_methods": ["merge", "squash", "rebase"],
        **changed,
    }
    return rule("pull_request", **parameters)


REVIEWED_RULES = [rule("deletion"), rule("non_fast_forward"), pull_request()]
FAKE_CURL = r"""#!/bin/bash
# GitHub's REST API as curl hands it over with --write-out '\n%{http_code}': the body, a newline, the status.
printf '%s\n' "$@" > "$CURL_LOG.argv"
cat > "$CURL_LOG.stdin"
[ -e "$CURL_BODY" ] && cat "$CURL_BODY"
printf '\n%s' "$CURL_STATUS"
exit "$CURL_EXIT"
"""


def github_answers(tmp_path: Path, rules: Any = None, body: str | None = None) -> None:
    """The fake `curl` on the step's PATH, and what GitHub answers: ``rules`` as JSON, or ``body`` as it is."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    write(folder, "curl", FAKE_CURL)
    text = body if body is not None else json.dumps(REVIEWED_RULES if rules is None else rules)
    (tmp_path / "answer.json").write_text(text)


def check_round(tmp_path: Path, **values: str) -> tuple[subprocess.CompletedProcess[str], str]:
    """Round 0's check as the runner runs it (GitHub's answer: the reviewed rules unless ``github_answers`` set
    another): the step's process and what it wrote to ``GITHUB_OUTPUT``."""
    output = tmp_path / "output"
    output.write_text("")
    if not (tmp_path / "bin" / "curl").exists():
        github_answers(tmp_path)
    done = run_step(tmp_path, STEPS[0]["run"], round_env(tmp_path, **values))
    return done, output.read_text()


def up_env(tmp_path: Path, **values: str) -> dict[str, str]:
    """The `make up` step's environment: round 0 of prod, a bound of 0.3 s, ``CALLS`` for the fake `make` to write
    what it was run with, and an empty ``GITHUB_OUTPUT``."""
    env = {
        "CALLS": str(tmp_path / "calls"),
        "GITHUB_OUTPUT": str(tmp_path / "output"),
        "STACK": "prod",
        "ROUND": "0",
        "UP_MINUTES": "0.005",
        **values,
    }
    (tmp_path / "output").write_text("")
    return env


def with_check_tool(root: Path) -> Path:
    """``root`` as the stack step finds the checkout: its check tool and the venv's python (the stack files are the
    caller's)."""
    (root / "tools").mkdir(parents=True, exist_ok=True)
    venv_python(root / ".venv" / "bin" / "python")
    shutil.copy(ROOT / "tools" / "check_pulumi_project.py", root / "tools")
    return root


def stack_step(tmp_path: Path, root: Path, stack: str) -> subprocess.CompletedProcess[str]:
    """The stack step (the committed stack file's recorded home) of ``stack`` in the checkout ``root``."""
    env = {"STACK": stack, "GITHUB_OUTPUT": str(tmp_path / "output")}
    return run_step(tmp_path, STEPS[index("tools/check_pulumi_project.py --get")]["run"], env, cwd=root)
