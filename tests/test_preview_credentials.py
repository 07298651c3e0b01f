"""What the PR preview hands the branch's code of Google's and GitHub's credentials: one access token of the stack's
preview account, served as the Compute Engine metadata server serves a VM's token, and nothing that mints another
(docs/guardrails.md "Guardrails and PR review").

google-github-actions/auth writes, by default, a credentials file whose ``credential_source`` holds the job's OIDC
request URL and token (v2.1.13 ``src/client/workload_identity_federation.ts`` ``createCredentialsFile``): whoever reads
it mints GitHub OIDC tokens, for any audience, while the job runs. The runner puts that URL and token in the
environment of every step of a job with ``id-token: write`` (actions/runner ``src/Runner.Worker/Handlers/
ScriptHandler.cs``: ``ACTIONS_ID_TOKEN_REQUEST_URL``, ``ACTIONS_ID_TOKEN_REQUEST_TOKEN``), and a permission is a job's,
never a step's. So the auth step mints an access token alone (``token_format: access_token``, no credentials file, no
exported variable), and each step that runs the branch's code unsets the two variables before it starts anything.

The steps that run the branch's code run here in bash, as the workflow has them (the trusted and work folders moved
under the test's, and a ``sudo`` that logs the environment it is handed and starts its command with the variables
sudo keeps), up to a ``pulumi`` that reads Application Default Credentials with google-auth as the program does.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.project_check import venv_python
from tools import metadata_server
from tools.stack_files import ROOT

WORKFLOW_TEXT = (ROOT / ".github" / "workflows" / "preview.yml").read_text()
WORKFLOW = yaml.safe_load(WORKFLOW_TEXT)
JOB: dict[str, Any] = WORKFLOW["jobs"]["preview"]
STEPS: list[dict[str, Any]] = JOB["steps"]
TRUSTED = "/var/lib/tpu-rl-preview"
WORK = "/var/lib/tpu-rl-branch"
OIDC = ("ACTIONS_ID_TOKEN_REQUEST_URL", "ACTIONS_ID_TOKEN_REQUEST_TOKEN")
UNSET = "unset ACTIONS_ID_TOKEN_REQUEST_URL ACTIONS_ID_TOKEN_REQUEST_TOKEN"
CREDENTIAL_FILES = ("GOOGLE_APPLICATION_CREDENTIALS", "CLOUDSDK_AUTH_CREDENTIAL_FILE_OVERRIDE", "GOOGLE_GHA_CREDS_PATH")
ACCOUNT = "preview-prod@acme-prod.iam.gserviceaccount.com"
ACCESS_TOKEN = "ya29.c.b0AXv0zTPreviewProdAccessToken0123456789"
BASH = shutil.which("bash")


def _step(text: str) -> dict[str, Any]:
    return next(s for s in STEPS if text in str(s.get("run", "")) or str(s.get("uses", "")).startswith(text))


AUTH = _step("google-github-actions/auth@")
MAKE_VENV = _step("/usr/bin/make venv")
PREVIEW = _step('/pulumi/pulumi" preview')
BRANCH_STEPS = [s for s in STEPS if "/usr/bin/make venv" in str(s.get("run")) or "/pulumi/pulumi" in str(s.get("run"))]
"""The steps that run the branch's code: its Makefile (`make venv`) and the CLI that runs its program."""


@pytest.mark.pure
def test_the_auth_step_mints_an_access_token_and_writes_no_credentials_file():
    assert AUTH["id"] == "auth"
    assert AUTH["with"] == {
        "workload_identity_provider": "${{ vars.GCP_WORKLOAD_IDENTITY_PROVIDER }}",
        "service_account": "${{ vars.GCP_PREVIEW_SERVICE_ACCOUNT }}",
        "create_credentials_file": False,
        "export_environment_variables": False,
        "token_format": "access_token",
        "access_token_lifetime": f"{PREVIEW['env']['TOKEN_LIFETIME']}s",
    }
    assert int(PREVIEW["env"]["TOKEN_LIFETIME"]) <= 3600, "an access token lives an hour at most by default"
    assert sum(str(s.get("uses", "")).startswith("google-github-actions/auth@") for s in STEPS) == 1
    # The token reaches the preview step alone, as data (its env), never written into a script.
    runs = yaml.safe_dump(WORKFLOW)
    assert runs.count("steps.auth.outputs") == 1 and PREVIEW["env"]["GOOGLE_ACCESS_TOKEN"] == (
        "${{ steps.auth.outputs.access_token }}"
    )
    for name in (*CREDENTIAL_FILES, "credentials_file_path", "auth_token"):
        assert name not in runs, name
    # A permission is a job's: the OIDC one is this job's alone, never the workflow's.
    assert WORKFLOW["permissions"] == {"contents": "read"} and JOB["permissions"]["id-token"] == "write"


@pytest.mark.pure
def test_each_step_that_runs_the_branchs_code_unsets_the_oidc_request_first():
    assert BRANCH_STEPS == [MAKE_VENV, PREVIEW]
    for step in BRANCH_STEPS:
        lines = [
            line.strip() for line in str(step["run"]).splitlines() if line.strip() and not line.strip().startswith("#")
        ]
        assert lines[:2] == ["PATH=/usr/bin:/bin", UNSET], step["name"]
        text = str(step["run"])
        for name in OIDC:
            assert text.count(name) == 1, (step["name"], name)
        # sudo keeps no more of this step's environment than the Pulumi token and passphrase.
        kept = re.findall(r"--preserve-env=(\S+)", text)
        assert all(set(names.split(",")) <= {"PULUMI_ACCESS_TOKEN", "PULUMI_CONFIG_PASSPHRASE"} for names in kept)
        assert "-E " not in text and "--preserve-env " not in text, "sudo never keeps the whole environment"
        assert "env" not in step or not set(step["env"]) & {*OIDC, *CREDENTIAL_FILES}


def _write(path: Path, text: str, executable: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if executable:
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


FAKE_SUDO = """#!{python}
# sudo as the steps use it: the environment it is handed is logged; a command runs with a fresh environment and the
# names --preserve-env keeps (sudoers(5): env_reset), as the same user here; install's owner and group are dropped.
import json, os, sys
args, keep = sys.argv[1:], []
while args[0].startswith("-"):
    flag = args.pop(0)
    if flag.startswith("--preserve-env="):
        keep = flag.split("=", 1)[1].split(",")
    elif flag == "-u":
        args.pop(0)
with open({log!r}, "a") as log:
    log.write(json.dumps({{"argv": args, "env": sorted(os.environ)}}) + "\\n")
if args[0] == "/usr/bin/install":
    for flag in ("-o", "-g"):
        if flag in args:
            del args[args.index(flag) : args.index(flag) + 2]
    os.execv(args[0], args)
if "/usr/bin/make" in args:
    sys.exit(0)  # the branch's make venv is not this test's
os.execve(args[0], args, {{**{{k: os.environ[k] for k in keep if k in os.environ}}, "PATH": "/usr/bin:/bin"}})
"""
FAKE_PULUMI = """#!{python}
# The CLI's stand-in: what reaches the branch's program (its environment, its folder) and what Application Default
# Credentials find, read with google-auth as the program's own reads do (infra/gcp/capacity/reads.py).
import json, os
import google.auth
from google.auth.transport.requests import Request
credentials, project = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
credentials.refresh(Request())
seen = {{"env": dict(os.environ), "cwd": os.getcwd(), "token": credentials.token, "project": project,
        "account": credentials.service_account_email, "kind": type(credentials).__module__}}
with open({record!r}, "w") as record:
    json.dump(seen, record)
print(json.dumps({{"steps": []}}))
"""


def _folders(tmp_path: Path) -> dict[str, Path]:
    """The trusted folder as the setup step leaves it, the branch's copy, the runner's temp folder and the fakes."""
    trusted, work = tmp_path / "trusted", tmp_path / "work"
    stack = (ROOT / "Pulumi.prod.yaml").read_text()
    stack = stack.replace("config:\n", "config:\n  tpu-rl:stateBackend: gs://acme-prod-state\n", 1)
    venv_python(trusted / "policy" / "venv" / "bin" / "python")
    for tool in ("check_pulumi_project.py", "metadata_server.py"):
        shutil.copy(ROOT / "tools" / tool, trusted / tool)
    _write(trusted / "base" / "Pulumi.prod.yaml", stack)
    _write(trusted / "end-branch-processes", "exit 0\n")
    _write(trusted / "branch-path", "/usr/bin:/bin\n")
    record = tmp_path / "seen.json"
    _write(trusted / "pulumi" / "pulumi", FAKE_PULUMI.format(python=sys.executable, record=str(record)), True)
    _write(work / "project" / "Pulumi.yaml", (ROOT / "Pulumi.yaml").read_text())
    _write(work / "project" / "Pulumi.prod.yaml", stack)
    (tmp_path / "runner").mkdir()
    sudo_log = tmp_path / "sudo.log"
    _write(tmp_path / "fakes" / "sudo", FAKE_SUDO.format(python=sys.executable, log=str(sudo_log)), True)
    return {"trusted": trusted, "work": work, "record": record, "sudo": sudo_log, "runner": tmp_path / "runner"}


def _run(tmp_path: Path, step: dict[str, Any], folders: dict[str, Path]) -> subprocess.CompletedProcess[str]:
    """The step's script as the runner runs it (its shell, its env), its folders moved, sudo the fake."""
    assert BASH is not None
    text = str(step["run"])
    assert text.startswith("PATH=/usr/bin:/bin\n")
    text = text.replace(TRUSTED, str(folders["trusted"])).replace(WORK, str(folders["work"]))
    text = text.replace("${{ matrix.stack }}", "prod").replace(
        "PATH=/usr/bin:/bin\n", f"PATH={tmp_path / 'fakes'}:/usr/bin:/bin\n", 1
    )
    script = _write(tmp_path / "step.sh", text)
    # What the runner gives a step of this job: its OIDC request, its temp folder, and the step's own env.
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "RUNNER_TEMP": str(folders["runner"]),
        "ACTIONS_ID_TOKEN_REQUEST_URL": "https://pipelines.actions.githubusercontent.com/abc/idtoken?api-version=2.0",
        "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9.runtime",
        "PULUMI_ACCESS_TOKEN": "pul-0123456789abcdef",
        "PULUMI_CONFIG_PASSPHRASE": "",
        "GOOGLE_ACCESS_TOKEN": ACCESS_TOKEN,
        "SERVICE_ACCOUNT": ACCOUNT,
        "TOKEN_LIFETIME": str(step.get("env", {}).get("TOKEN_LIFETIME", "")),
    }
    if "env" not in step:
        for name in ("PULUMI_ACCESS_TOKEN", "PULUMI_CONFIG_PASSPHRASE", "GOOGLE_ACCESS_TOKEN", "SERVICE_ACCOUNT"):
            env.pop(name)
    shell = JOB["defaults"]["run"]["shell"].split()[:-1]
    return subprocess.run(
        [*shell, str(script)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False
    )


def _sudo_calls(folders: dict[str, Path]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in folders["sudo"].read_text().splitlines()]


@pytest.mark.skipif(BASH is None, reason="bash")
def test_make_venv_runs_with_no_oidc_request_in_reach(tmp_path):
    folders = _folders(tmp_path)
    done = _run(tmp_path, MAKE_VENV, folders)
    assert done.returncode == 0, done.stderr
    (call,) = _sudo_calls(folders)
    assert call["argv"][-2:] == ["/usr/bin/make", "venv"]
    assert not set(call["env"]) & set(OIDC), "what sudo is handed holds no OIDC request"


@pytest.mark.skipif(BASH is None, reason="bash")
def test_the_branchs_program_finds_the_access_token_and_nothing_that_mints_another(tmp_path):
    folders = _folders(tmp_path)
    done = _run(tmp_path, PREVIEW, folders)
    assert done.returncode == 0, done.stderr
    calls = _sudo_calls(folders)
    assert [c["argv"][0] for c in calls] == ["/usr/bin/install", "/usr/bin/env"]
    for call in calls:
        assert not set(call["env"]) & {*OIDC, "GOOGLE_ACCESS_TOKEN"}, call["argv"]
    seen = json.loads(folders["record"].read_text())
    # Application Default Credentials, as google-auth finds them: the metadata server's token, account and project.
    assert seen["kind"] == "google.auth.compute_engine.credentials"
    assert (seen["token"], seen["account"], seen["project"]) == (ACCESS_TOKEN, ACCOUNT, "acme-prod")
    env = seen["env"]
    assert not {name for name in env if name.startswith(("ACTIONS_", "GITHUB_", "GOOGLE_", "CLOUDSDK_"))}, env
    assert ACCESS_TOKEN not in json.dumps(env), "the token is served, never in the program's environment"
    assert (
        re.fullmatch(r"127\.0\.0\.1:\d+", env["GCE_METADATA_HOST"])
        and env["GCE_METADATA_IP"] == env["GCE_METADATA_HOST"]
    )
    assert env["PULUMI_BACKEND_URL"] == "gs://acme-prod-state" and env["PULUMI_ACCESS_TOKEN"] == "pul-0123456789abcdef"
    # No credentials file anywhere the branch's user reaches; the server ended with the step.
    assert sorted(p.name for p in folders["work"].iterdir()) == ["project", "pulumi-home"]
    assert json.loads((folders["runner"] / "preview.json").read_text()) == {"steps": []}
    port = int(env["GCE_METADATA_HOST"].rsplit(":", 1)[1])
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


# The metadata server itself.


@pytest.mark.pure
def test_the_server_runs_as_a_file_on_the_standard_library():
    source = ROOT / "tools" / "metadata_server.py"
    imported: set[str] = set()
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add(str(node.module).split(".")[0])
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}


@pytest.mark.pure
def test_the_token_is_served_until_its_lifetime_ends():
    table = metadata_server.answers(ACCOUNT, ACCESS_TOKEN, deadline=100.0, now=40.0)
    token = "/computeMetadata/v1/instance/service-accounts/default/token"
    status, kind, body = table[token]
    assert (status, kind) == (200, "application/json")
    assert json.loads(body) == {"access_token": ACCESS_TOKEN, "expires_in": 60, "token_type": "Bearer"}
    assert table[f"/computeMetadata/v1/instance/service-accounts/{ACCOUNT}/token"] == table[token]
    assert table["/computeMetadata/v1/project/project-id"] == (200, "application/text", "acme-prod")
    expired = metadata_server.answers(ACCOUNT, ACCESS_TOKEN, deadline=100.0, now=100.0)
    assert expired[token][0] == 503 and ACCESS_TOKEN not in json.dumps(expired)


@pytest.fixture
def server():
    """The server as the preview step starts it: the token on its standard input, its port on its output."""
    process = subprocess.Popen(
        [sys.executable, "-I", str(ROOT / "tools" / "metadata_server.py"), ACCOUNT, "1800"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(ACCESS_TOKEN + "\n")
    process.stdin.close()
    port = int(process.stdout.readline())
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        process.kill()
        process.wait(timeout=10)


def _get(url: str, headers: dict[str, str]) -> tuple[int, str, str]:
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=5) as reply:
            return reply.status, reply.headers.get("Metadata-Flavor", ""), reply.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.headers.get("Metadata-Flavor", ""), err.read().decode()


def test_the_server_answers_as_the_metadata_server_does_and_nothing_more(server):
    flavor = {"Metadata-Flavor": "Google"}
    token = f"{server}/computeMetadata/v1/instance/service-accounts/default/token"
    status, header, body = _get(token + "?scopes=https://www.googleapis.com/auth/cloud-platform", flavor)
    assert (status, header) == (200, "Google") and json.loads(body)["access_token"] == ACCESS_TOKEN
    assert 1700 < json.loads(body)["expires_in"] <= 1800
    assert _get(token, {})[0] == 403, "Metadata-Flavor: Google is required"
    assert _get(token, {**flavor, "X-Forwarded-For": "10.0.0.1"})[0] == 403, "a forwarded request is refused"
    info = _get(f"{server}/computeMetadata/v1/instance/service-accounts/default/?recursive=true", flavor)
    assert json.loads(info[2]) == {
        "aliases": ["default"],
        "email": ACCOUNT,
        "scopes": ["https://www.googleapis.com/auth/cloud-platform"],
    }
    assert _get(f"{server}/", flavor)[:2] == (200, "Google"), "the ping google-auth makes at GCE_METADATA_IP"
    for path in ("instance/attributes/", "instance/service-accounts/other@x.iam.gserviceaccount.com/token", "../"):
        assert _get(f"{server}/computeMetadata/v1/{path}", flavor)[0] == 404, path


@pytest.mark.parametrize(
    "argv,stdin",
    [
        ([ACCOUNT, "1800"], ""),
        ([ACCOUNT, "1800"], "a token with spaces and more than sixteen\n"),
        ([ACCOUNT, "0"], ACCESS_TOKEN),
        ([ACCOUNT, "86400"], ACCESS_TOKEN),
        (["someone@example.com", "1800"], ACCESS_TOKEN),
        ([ACCOUNT], ACCESS_TOKEN),
    ],
    ids=["no-token", "not-a-token", "no-lifetime", "too-long", "not-an-account", "no-lifetime-given"],
)
def test_the_server_refuses_what_is_not_a_token_an_account_and_a_lifetime(argv, stdin):
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-I", str(ROOT / "tools" / "metadata_server.py"), *argv],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert (done.returncode, done.stdout) == (2, "") and done.stderr.count("\n") == 1
    assert ACCESS_TOKEN not in done.stderr and time.monotonic() - started < 30


def test_the_docs_say_what_the_branch_gets():
    page = " ".join((ROOT / "docs" / "guardrails.md").read_text().split())
    for words in (
        "create_credentials_file: false",
        "token_format: access_token",
        "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
        "tools/metadata_server.py",
        "GCE_METADATA_HOST",
    ):
        assert words in page, words
    assert os.path.exists(ROOT / "tools" / "metadata_server.py")
