"""The loopback write Hub (tests/fake_hub_write.py) against the real ``huggingface_hub`` client in LFS mode.

The client runs in a subprocess, as in the container: ``HF_HUB_DISABLE_XET`` and ``HF_ENDPOINT`` are read when
``huggingface_hub.constants`` is imported, and ``hf_xet`` is installed here, so only a fresh interpreter with
``HF_HUB_DISABLE_XET=1`` takes the LFS path (preupload, LFS batch, PUT, verify, NDJSON commit). One subprocess per
group of scenarios; the Hub's state (``hub.repos``, ``hub.requests``) is read in the test process."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.fake_hub_write import (
    FINE_ACME,
    FINE_READ,
    PRIVATE_REPO,
    PUBLIC_REPO,
    READ_ONLY,
    WRITE,
    WritableHub,
    new_repo,
)
from tests.loopback import serve
from tools.rehearse.hub import HubHandler
from tools.rehearse.hub_repos import Hub, StandIns, filled_repo

PRELUDE = """
import json, os, sys
from huggingface_hub import CommitOperationDelete, HfApi, constants, hf_hub_download

assert constants.HF_HUB_DISABLE_XET and constants.ENDPOINT == os.environ["HF_ENDPOINT"]
api, out = HfApi(), {}

def outcome(call, *args, **kwargs):
    # ["ok", value] or [exception class name, HTTP status]
    try:
        return ["ok", call(*args, **kwargs)]
    except Exception as error:
        return [type(error).__name__, getattr(getattr(error, "response", None), "status_code", None)]
"""


def run_client(url: str, script: str, tmp_path: Path, token: str = WRITE, **env: str) -> dict:
    """Run ``script`` (after ``PRELUDE``) with the client pointed at ``url``; the ``out`` dict it fills."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("HF_") and "proxy" not in k.lower()}
    environment.update(
        HF_ENDPOINT=url,
        HF_HUB_DISABLE_XET="1",
        HF_HUB_DISABLE_TELEMETRY="1",
        HF_HUB_DISABLE_PROGRESS_BARS="1",
        HF_TOKEN=token,
        HF_HOME=str(tmp_path / "hf-home"),
        NO_PROXY="127.0.0.1,localhost",
        **env,
    )
    source = PRELUDE + textwrap.dedent(script) + "\nprint(json.dumps(out))\n"
    done = subprocess.run([sys.executable, "-c", source], env=environment, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.slow
def test_whoami_permissions_and_privacy(tmp_path):
    hub = WritableHub.fresh()
    hub.repos["contrib/theirs"] = new_repo("contrib/theirs")  # in alice's contributor org, not created by her
    script = f"""
    out["whoami"] = {{t: api.whoami(token=t) for t in {[WRITE, READ_ONLY, FINE_ACME, FINE_READ]!r}}}
    out["invalid"] = outcome(api.whoami, token="hf_notAtoken")
    create = lambda repo, token, **kw: outcome(lambda: str(api.create_repo(repo, token=token, **kw)))
    out["create"] = {{
        "viewers/x": create("viewers/x", {WRITE!r}),
        "acme/by-read-token": create("acme/by-read-token", {READ_ONLY!r}),
        "acme/by-fine-read": create("acme/by-fine-read", {FINE_READ!r}),
        "alice/by-fine-acme": create("alice/by-fine-acme", {FINE_ACME!r}),
        "acme/by-fine-acme": create("acme/by-fine-acme", {FINE_ACME!r}),
        "contrib/mine": create("contrib/mine", {WRITE!r}),
        "alice/secret": create("alice/secret", {WRITE!r}, private=True),
        "again": create("alice/secret", {WRITE!r}),
    }}
    check = lambda repo, token, write=True: outcome(api.auth_check, repo, write=write, token=token)
    out["auth"] = {{
        "write": check({PUBLIC_REPO!r}, {WRITE!r}),
        "fine-acme": check({PUBLIC_REPO!r}, {FINE_ACME!r}),
        "read-token": check({PUBLIC_REPO!r}, {READ_ONLY!r}),
        "fine-read": check({PUBLIC_REPO!r}, {FINE_READ!r}),
        "read-token, read": check({PUBLIC_REPO!r}, {READ_ONLY!r}, write=False),
        "contributor, own": check("contrib/mine", {WRITE!r}),
        "contributor, theirs": check("contrib/theirs", {WRITE!r}),
    }}
    private = lambda repo, token: outcome(lambda: api.model_info(repo, token=token).private)
    out["private"] = {{
        "owner": private("alice/secret", {WRITE!r}),
        "token scoped to acme": private("alice/secret", {FINE_ACME!r}),
        "anonymous": private("alice/secret", False),
        "org member": private({PRIVATE_REPO!r}, {READ_ONLY!r}),
        "org, anonymous": private({PRIVATE_REPO!r}, False),
        "public, anonymous": private({PUBLIC_REPO!r}, False),
    }}
    out["branch, no repo"] = outcome(api.create_branch, "acme/missing", branch="b")
    """
    with serve(hub) as url:
        out = run_client(url, script, tmp_path)

    who = out["whoami"]
    assert {token: (w["name"], w["auth"]["accessToken"]["role"]) for token, w in who.items()} == {
        WRITE: ("alice", "write"),
        READ_ONLY: ("alice", "read"),
        FINE_ACME: ("alice", "fineGrained"),
        FINE_READ: ("alice", "fineGrained"),
    }
    assert {o["name"]: o["roleInOrg"] for o in who[WRITE]["orgs"]} == {
        "acme": "write",
        "viewers": "read",
        "contrib": "contributor",
        "bosses": "admin",
    }
    assert who[WRITE]["type"] == "user" and who[WRITE]["auth"]["type"] == "access_token"
    assert who[FINE_ACME]["auth"]["accessToken"]["fineGrained"]["scoped"][0]["permissions"] == [
        "repo.content.read",
        "repo.write",
    ]
    assert who[FINE_READ]["auth"]["accessToken"]["fineGrained"]["scoped"][0]["entity"]["name"] == "acme"
    assert out["invalid"] == ["HfHubHTTPError", 401]

    created = out["create"]
    for repo in ("viewers/x", "acme/by-read-token", "acme/by-fine-read", "alice/by-fine-acme"):
        assert created[repo] == ["HfHubHTTPError", 403], repo
    assert created["acme/by-fine-acme"] == ["ok", f"{url}/acme/by-fine-acme"]
    assert created["contrib/mine"][0] == "ok" and created["alice/secret"][0] == "ok"
    assert created["again"] == ["HfHubHTTPError", 409]  # exist_ok=False
    assert hub.repos["alice/secret"].private and not hub.repos["contrib/mine"].private

    assert out["auth"] == {
        "write": ["ok", None],
        "fine-acme": ["ok", None],
        "read-token": ["HfHubHTTPError", 403],
        "fine-read": ["HfHubHTTPError", 403],
        "read-token, read": ["ok", None],
        "contributor, own": ["ok", None],
        "contributor, theirs": ["HfHubHTTPError", 403],
    }
    assert out["private"] == {
        "owner": ["ok", True],
        "token scoped to acme": ["RepositoryNotFoundError", 404],
        "anonymous": ["RepositoryNotFoundError", 404],
        "org member": ["ok", True],
        "org, anonymous": ["RepositoryNotFoundError", 404],
        "public, anonymous": ["ok", False],
    }
    assert out["branch, no repo"] == ["RepositoryNotFoundError", 404]


@pytest.mark.slow
def test_upload_folder_in_lfs_mode(tmp_path):
    folder = tmp_path / "export"
    folder.mkdir()
    weights = bytes(range(256)) * 4096  # 1 MiB
    (folder / "model.safetensors").write_bytes(weights)
    (folder / "config.json").write_text('{"model_type": "gemma"}\n')
    (folder / "README.md").write_text("---\nlicense: gemma\n---\n# A fine-tuned Gemma\n")
    hub = WritableHub.fresh()
    repo, branch = "acme/gemma-ft", "ft/run-1"
    script = f"""
    repo, branch, folder = {repo!r}, {branch!r}, {str(folder)!r}
    out["urls"] = [str(api.create_repo(repo, private=True, exist_ok=True)) for _ in range(2)]
    out["private"] = api.model_info(repo).private
    for _ in range(2):
        api.create_branch(repo, branch=branch, exist_ok=True)
    upload = lambda: api.upload_folder(repo_id=repo, folder_path=folder, repo_type="model", revision=branch).oid
    out["first"] = upload()
    out["refs"] = {{b.name: b.target_commit for b in api.list_repo_refs(repo).branches}}
    out["sha"] = api.model_info(repo, revision=branch).sha
    out["second"] = upload()
    info = api.model_info(repo, revision=branch, files_metadata=True)
    out["files"] = {{s.rfilename: [s.size, s.lfs.sha256 if s.lfs else None] for s in info.siblings}}
    out["license"] = info.card_data.license
    out["readme"] = open(hf_hub_download(repo, "README.md", revision=branch)).read()
    out["main"] = [s.rfilename for s in api.model_info(repo).siblings]
    """
    with serve(hub) as url:
        out = run_client(url, script, tmp_path)

    assert out["urls"] == [f"{url}/{repo}"] * 2
    assert out["private"] is True and hub.repos[repo].private
    first, refs = out["first"], out["refs"]
    assert len(first) == 40 and first == refs[branch] == out["sha"]
    assert refs["main"] != first and out["main"] == [".gitattributes"]
    # The second, identical upload: the LFS batch answered "already stored" (no PUT), and the client dropped every
    # unchanged file, sent no commit, and returned the branch head it read from model_info.
    assert out["second"] == first == hub.repos[repo].branches[branch]
    assert [r for r in hub.requests if r.startswith("PUT ")] == [f"PUT /_lfs/upload/model/{repo}/{_sha256(weights)}"]
    assert sum(r.startswith(f"POST /api/models/{repo}/commit/") for r in hub.requests) == 1
    assert sum(r.endswith("/info/lfs/objects/batch") for r in hub.requests) == 2
    assert out["files"] == {
        ".gitattributes": [len(hub.repos[repo].head().tree[".gitattributes"].data), None],
        "README.md": [len((folder / "README.md").read_bytes()), None],
        "config.json": [24, None],
        "model.safetensors": [len(weights), _sha256(weights)],
    }
    assert out["license"] == "gemma" and out["readme"].startswith("---\nlicense: gemma\n---\n")


@pytest.mark.slow
def test_failures_the_client_sees(tmp_path):
    hub = WritableHub.fresh()
    hub.fail = {"commit": 500}
    script = f"""
    add = lambda revision="main", token=None: api.upload_file(
        path_or_fileobj=b"hello", path_in_repo="notes.txt", repo_id={PUBLIC_REPO!r}, revision=revision, token=token
    ).oid
    out["failed"] = outcome(add)
    out["retried"] = outcome(add)
    out["no branch"] = outcome(add, "no-such-branch")
    out["no repo"] = outcome(api.upload_file, path_or_fileobj=b"x", path_in_repo="x", repo_id="acme/missing")
    out["read token"] = outcome(add, token={READ_ONLY!r})
    delete = lambda path, revision="main": api.create_commit(
        {PUBLIC_REPO!r}, operations=[CommitOperationDelete(path)], commit_message="rm", revision=revision
    )
    out["commit, no branch"] = outcome(delete, "notes.txt", "no-such-branch")  # no preupload: straight to /commit
    out["delete, no file"] = outcome(delete, "absent.txt")
    out["commits"] = [c.title for c in api.list_repo_commits({PUBLIC_REPO!r})]
    """
    with serve(hub) as url:
        out = run_client(url, script, tmp_path)

    assert out["failed"] == ["HfHubHTTPError", 500]
    assert out["retried"] == ["ok", hub.repos[PUBLIC_REPO].branches["main"]]
    assert out["no branch"] == ["RevisionNotFoundError", 404]
    assert out["no repo"] == ["RepositoryNotFoundError", 404]
    assert out["read token"] == ["HfHubHTTPError", 403]
    assert out["commit, no branch"] == ["RevisionNotFoundError", 404]
    assert out["delete, no file"] == ["RemoteEntryNotFoundError", 404]
    assert out["commits"] == ["Upload notes.txt with huggingface_hub", "initial commit"]
    assert hub.repos[PUBLIC_REPO].head().tree["notes.txt"].data == b"hello"
    assert hub.fail == {}


@pytest.mark.slow
def test_the_rehearsals_accounts_and_where_a_file_is_stored(tmp_path):
    """The rehearsal's Hub (``StandIns``): its pods' write token creates and uploads, the read token reads the served
    repositories and writes nothing, any other token is a 401; the upload's files go to LFS as the Hub decides, by
    the branch's ``.gitattributes`` (``*.safetensors``), by a NUL in the first bytes (the card's PNG), else regular."""
    read, write = "hf_rehearsalREAD", "hf_rehearsalWRITE"
    hub = Hub(StandIns(read, write))
    hub.add(filled_repo("google/base", {"config.json": b"{}", "tokenizer.json": b"{}"}, extra_lfs=("tokenizer.json",)))
    folder = tmp_path / "export"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"weights")
    (folder / "reward-curve.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    (folder / "config.json").write_text("{}")
    script = f"""
    out["read"] = outcome(lambda: [s.rfilename for s in api.model_info("google/base", token={read!r}).siblings])
    out["read token writes"] = outcome(api.create_repo, "org/model", token={read!r})
    out["unknown token"] = outcome(api.model_info, "google/base", token="hf_other")
    api.create_repo("org/model", private=True, token={write!r})
    upload = lambda: api.upload_folder(repo_id="org/model", folder_path={str(folder)!r}, token={write!r}).oid
    out["upload"] = outcome(upload)
    """
    with serve(type("RehearsalHub", (HubHandler,), {"hub": hub})) as url:
        out = run_client(url, script, tmp_path, token="")

    assert out["read"] == ["ok", [".gitattributes", "config.json", "tokenizer.json"]]
    assert out["read token writes"] == ["HfHubHTTPError", 403]
    assert out["unknown token"] == ["HfHubHTTPError", 401]
    assert out["upload"][0] == "ok"
    stored = {name: blob.lfs for name, blob in hub.repos["org/model"].head().tree.items()}
    assert stored == {
        ".gitattributes": False,
        "model.safetensors": True,
        "reward-curve.png": True,
        "config.json": False,
    }
    assert hub.repos["google/base"].head().tree["tokenizer.json"].lfs


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
