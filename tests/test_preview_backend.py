"""The PR preview reads each stack's state where the BASE commit's stack file records it (its
``tpu-rl:stateBackend``), never where the pull request's does nor anywhere else (no per-environment variable: a base
that records none is refused), and refuses a branch that moves the stack's state or changes its secrets provider
(docs/guardrails.md "Guardrails and PR review"). The base's stack file is copied, as root,
where the branch cannot write, before any of the branch's code runs; the base's ``tools/check_pulumi_project.py``
reads it. The step's lines that pick the backend run here in bash with the real check."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import slug
from tests.project_check import plain_yaml_once, venv_python  # noqa: F401 (an autouse fixture)
from tools import check_pulumi_project
from tools.check_pulumi_project import ProjectRefusedError
from tools.stack_files import ROOT

WORKFLOW = yaml.safe_load((ROOT / ".github" / "workflows" / "preview.yml").read_text())
STEPS: list[dict[str, Any]] = WORKFLOW["jobs"]["preview"]["steps"]
TRUSTED = "/var/lib/tpu-rl-preview"
BASH = shutil.which("bash")
PROD = (ROOT / "Pulumi.prod.yaml").read_text()
KMS = "gcpkms://projects/acme/locations/global/keyRings/pulumi-state/cryptoKeys/pulumi-secrets"


def _step(text: str) -> dict[str, Any]:
    return next(s for s in STEPS if text in str(s.get("run", "")))


def _logical_lines(step: dict[str, Any]) -> list[str]:
    text = str(step["run"]).replace("\\\n", " ")
    return [" ".join(line.split()) for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]


SETUP = _step("useradd")
PREVIEW = _step('/pulumi/pulumi" preview')


@pytest.mark.pure
def test_the_bases_stack_file_is_copied_where_the_branch_cannot_write_before_its_code_runs():
    lines = _logical_lines(SETUP)
    made = lines.index('sudo install -d -m 0755 "$trusted/base"')
    copied = lines.index(
        'if [ -e "base/Pulumi.$stack.yaml" ]; then sudo cp -P "base/Pulumi.$stack.yaml" "$trusted/base/"; fi'
    )
    owned = lines.index('sudo chown -R root:root "$trusted"')
    assert made < copied < owned < lines.index("rm -rf branch base"), "root's, from the base checkout, then sealed"
    assert not any("branch/Pulumi" in line for line in lines), "the branch's stack file is never the trusted copy"
    assert STEPS.index(SETUP) < STEPS.index(_step("/usr/bin/make venv")), "before any of the branch's code"


@pytest.mark.pure
def test_the_backend_is_read_from_the_bases_copy_never_the_branchs_file():
    lines = _logical_lines(PREVIEW)
    get = next(i for i, line in enumerate(lines) if "--get" in line)
    assert lines[get] == (
        'backend=$("$trusted/policy/venv/bin/python" "$trusted/check_pulumi_project.py" --get "$trusted/base" '
        '"$stack" tpu-rl:stateBackend)'
    )
    assert lines[get + 1] == 'if [ -z "$backend" ]; then'
    check = next(i for i, line in enumerate(lines) if line.endswith('--base "$trusted/base"'))
    assert check < get, "the branch's file is checked against the base's first"
    assert 'PULUMI_BACKEND_URL="$backend"' in next(line for line in lines if '/pulumi/pulumi" preview' in line)
    text = (ROOT / ".github" / "workflows" / "preview.yml").read_text()
    assert "vars.PULUMI_BACKEND_URL" not in text and "ENVIRONMENT_BACKEND" not in text, "no per-environment home"


def _trusted(tmp_path: Path, base_stack: str | None) -> Path:
    """The trusted folder as the setup step leaves it: the pack's python, the base's check, the base's stack file."""
    trusted = tmp_path / "trusted"
    venv_python(trusted / "policy" / "venv" / "bin" / "python")
    shutil.copy(ROOT / "tools" / "check_pulumi_project.py", trusted / "check_pulumi_project.py")
    (trusted / "base").mkdir()
    if base_stack is not None:
        (trusted / "base" / "Pulumi.prod.yaml").write_text(base_stack)
    return trusted


def _pick_backend(tmp_path: Path, trusted: Path) -> subprocess.CompletedProcess[str]:
    """The step's lines from the backend's read to its check, then the backend the CLI is given."""
    assert BASH is not None
    lines = _logical_lines(PREVIEW)
    first = next(i for i, line in enumerate(lines) if "--get" in line)
    last = lines.index("fi", first)
    script = "\n".join(
        [f"trusted={trusted} stack=prod", *lines[first : last + 1], 'echo "PULUMI_BACKEND_URL=$backend"']
    )
    env = {"PATH": os.environ["PATH"], "PULUMI_BACKEND_URL": "gs://a-runners-own"}
    return subprocess.run(
        [BASH, "--noprofile", "--norc", "-euo", "pipefail", "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


@pytest.mark.skipif(BASH is None, reason="bash")
def test_the_preview_reads_the_state_where_the_base_records_it_and_nowhere_else(tmp_path):
    recorded = PROD.replace("config:\n", "config:\n  tpu-rl:stateBackend: gs://acme-prod-state\n", 1)
    done = _pick_backend(tmp_path / "a", _trusted(tmp_path / "a", recorded))
    assert (done.returncode, done.stdout) == (0, "PULUMI_BACKEND_URL=gs://acme-prod-state\n"), done.stderr
    refusal = (
        "error: the base branch's Pulumi.prod.yaml records no tpu-rl:stateBackend: the preview reads a stack's state "
        "only where its committed stack file says it lives; run make stack STACK=prod and commit the file on the base "
        'branch (docs/ci.md "Running up from GitHub Actions")\n'
    )
    for case, base in (("records-none", PROD), ("no-stack-file", None)):
        done = _pick_backend(tmp_path / case, _trusted(tmp_path / case, base))
        assert (done.returncode, done.stdout, done.stderr) == (1, "", refusal), case
    hostile = PROD.replace("config:\n", "config:\n  tpu-rl:stateBackend: gs://x --evil\n", 1)
    done = _pick_backend(tmp_path / "d", _trusted(tmp_path / "d", hostile))
    assert done.returncode == 2 and done.stdout == "", "a value the check refuses stops the step"


def _stack(where: Path, stack_text: str | None, name: str = "prod") -> Path:
    where.mkdir(parents=True, exist_ok=True)
    (where / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    if stack_text is not None:
        (where / f"Pulumi.{name}.yaml").write_text(stack_text)
    return where


def _with(backend: str | None = None, provider: str | None = None) -> str:
    text = PROD
    if backend is not None:
        text = text.replace("config:\n", f"config:\n  tpu-rl:stateBackend: {backend}\n", 1)
    if provider is not None:
        text = f"secretsprovider: {provider}\n{text}"
    return text


BASE = _with("gs://acme-prod-state", KMS)
CHANGED = {
    "another backend": (
        _with("gs://elsewhere", KMS),
        "Pulumi.prod.yaml: tpu-rl:stateBackend is 'gs://elsewhere' where the base branch has 'gs://acme-prod-state': "
        "the preview reads the stack's state where the base records it; move a stack's state on the base branch, in "
        'a commit of its own (docs/state.md "Where the state lives")',
    ),
    "no backend": (
        _with(None, KMS),
        "Pulumi.prod.yaml: tpu-rl:stateBackend is unset where the base branch has 'gs://acme-prod-state': the preview "
        "reads the stack's state where the base records it; move a stack's state on the base branch, in a commit of "
        'its own (docs/state.md "Where the state lives")',
    ),
    "another secrets provider": (
        _with("gs://acme-prod-state", "passphrase"),
        f"Pulumi.prod.yaml: secretsprovider is 'passphrase' where the base branch has '{KMS}': the preview decrypts "
        "the stack's secrets with the base's provider; change it on the base branch, in a commit of its own (pulumi "
        "stack change-secrets-provider)",
    ),
    "no stack file": (
        None,
        "Pulumi.prod.yaml: tpu-rl:stateBackend is unset where the base branch has 'gs://acme-prod-state': the preview "
        "reads the stack's state where the base records it; move a stack's state on the base branch, in a commit of "
        'its own (docs/state.md "Where the state lives")',
    ),
}


@pytest.mark.pure
@pytest.mark.parametrize("variant", sorted(CHANGED))
def test_a_branch_that_moves_the_state_or_changes_the_secrets_provider_is_refused_in_one_line(tmp_path, variant):
    branch_text, message = CHANGED[variant]
    base = _stack(tmp_path / "base", BASE)
    branch = _stack(tmp_path / "branch", branch_text)
    with pytest.raises(ProjectRefusedError) as refused:
        check_pulumi_project.check(branch, "prod", base)
    assert str(refused.value) == message


@pytest.mark.pure
def test_a_branch_that_keeps_them_passes_whatever_else_it_changes(tmp_path):
    base = _stack(tmp_path / "base", BASE)
    edited = BASE.replace("tpu-rl:protect: true", "tpu-rl:protect: false")
    assert edited != BASE
    check_pulumi_project.check(_stack(tmp_path / "branch", edited), "prod", base)
    # A base without a stack file (a Pulumi Cloud stack): the branch records nothing either.
    check_pulumi_project.check(_stack(tmp_path / "b2", PROD), "prod", _stack(tmp_path / "base2", None))
    with pytest.raises(ProjectRefusedError, match="tpu-rl:stateBackend is 'gs://new' where the base branch has unset"):
        check_pulumi_project.check(_stack(tmp_path / "b3", _with("gs://new")), "prod", _stack(tmp_path / "b4", None))


@pytest.mark.pure
@pytest.mark.parametrize(
    "value",
    ["http://state.example.com", "gs://a b", '"gs://a\\nb"', "[gs://a]", "{secure: AAA}", "''", "ftp://x", "s3:/x"],
    ids=slug,
)
def test_a_recorded_backend_that_is_not_a_backend_url_is_refused(tmp_path, value):
    project = _stack(tmp_path, PROD.replace("config:\n", f"config:\n  tpu-rl:stateBackend: {value}\n", 1))
    with pytest.raises(ProjectRefusedError) as refused:
        check_pulumi_project.check(project, "prod")
    message = str(refused.value)
    assert message.startswith("Pulumi.prod.yaml: tpu-rl:stateBackend is ") and "\n" not in message
    assert message.endswith(", not a state backend URL (gs://, s3://, azblob://, https://, file://; no spaces)")


@pytest.mark.pure
def test_get_prints_plain_settings_only(tmp_path):
    for url in ("gs://acme-prod-state", "https://api.pulumi.com", "s3://b", "azblob://c", "file:///srv/state"):
        project = _stack(tmp_path / url.split(":")[0], _with(url))
        assert check_pulumi_project.get(project, "prod", "tpu-rl:stateBackend") == url
    assert check_pulumi_project.get(_stack(tmp_path / "p", PROD), "prod", "gcp:project") == "my-tpu-prod-project"
    assert check_pulumi_project.get(_stack(tmp_path / "n", PROD), "prod", "tpu-rl:stateBackend") is None
    assert check_pulumi_project.get(_stack(tmp_path / "none", None), "prod", "gcp:project") is None
    with pytest.raises(ProjectRefusedError, match=r"^'tpu-rl:hfToken' cannot be read here; the keys that can: "):
        check_pulumi_project.get(_stack(tmp_path / "p", PROD), "prod", "tpu-rl:hfToken")
    spaced = _stack(tmp_path / "s", PROD.replace("my-tpu-prod-project", "'my project'"))
    with pytest.raises(ProjectRefusedError) as refused:
        check_pulumi_project.get(spaced, "prod", "gcp:project")
    assert str(refused.value) == "Pulumi.prod.yaml: gcp:project is 'my project', not one word of printable text"
    with pytest.raises(ProjectRefusedError, match="not a plain name"):
        check_pulumi_project.get(tmp_path, "../prod", "gcp:project")


@pytest.mark.pure
def test_the_check_runs_as_the_workflows_run_it(tmp_path):
    """As a file of its own with the pack's interpreter: `--base` and `--get`, one line either way, exit 2."""
    script = tmp_path / "check_pulumi_project.py"
    shutil.copy(ROOT / "tools" / "check_pulumi_project.py", script)
    base, branch = _stack(tmp_path / "base", BASE), _stack(tmp_path / "branch", _with("gs://elsewhere", KMS))
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, env=env, timeout=30)

    done = run(str(base), "prod", "--base", str(base))
    assert done.returncode == 0 and done.stdout.endswith("its state backend and secrets provider the base's\n")
    done = run(str(branch), "prod", "--base", str(base))
    assert (done.returncode, done.stdout) == (2, "") and done.stderr.count("\n") == 1
    assert done.stderr.startswith("error: Pulumi.prod.yaml: tpu-rl:stateBackend is 'gs://elsewhere' where the base")
    done = run("--get", str(base), "prod", "tpu-rl:stateBackend")
    assert (done.returncode, done.stdout, done.stderr) == (0, "gs://acme-prod-state\n", "")
    done = run(str(base), "prod", "--other", str(base))
    assert done.returncode == 2 and done.stderr.startswith("usage: check_pulumi_project.py")
