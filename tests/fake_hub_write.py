"""A loopback stand-in for the Hugging Face Hub's *write* API (HF_ENDPOINT), in LFS mode: the JSON and error shapes
real ``huggingface_hub`` (2.4, ``HF_HUB_DISABLE_XET=1``) reads when it runs ``whoami``, ``create_repo``,
``create_branch``, ``upload_folder`` / ``create_commit`` (preupload, the LFS batch API, PUT and verify, the NDJSON
commit), ``list_repo_refs``, ``model_info(files_metadata=True)``, ``auth_check`` and ``hf_hub_download``.

State lives on the class: ``WritableHub.fresh()`` is a subclass with its own repositories (``PUBLIC_REPO`` and
``PRIVATE_REPO``, each with a ``main`` branch), request log (``requests``) and failure switch (``fail``). Errors carry
the Hub's ``X-Error-Code`` / ``X-Error-Message`` headers, so the client raises what it raises against huggingface.co:
``RepositoryNotFoundError`` (404 ``RepoNotFound``, also for a private repository the token may not see),
``RevisionNotFoundError`` (404 ``RevisionNotFound``), ``RemoteEntryNotFoundError`` (404 ``EntryNotFound``), and
``HfHubHTTPError`` with 401 (unknown token), 403 (no write access), 409 (exists). Only repositories with a namespace
(``ns/name``) are served; ids are unique across repository types."""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import re
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

from tests.loopback import QuietHandler

USER = "alice"
WRITE = "hf_writeTOKENalice"
"""Classic write token of ``alice``."""
READ_ONLY = "hf_readTOKENalice"
"""Classic read token of ``alice``: reads what alice may read, writes nothing."""
FINE_ACME = "hf_fineTOKENacme"
"""Fine-grained token of ``alice`` scoped to the ``acme`` org with ``repo.content.read`` and ``repo.write``."""
FINE_READ = "hf_fineTOKENreadonly"
"""Fine-grained token of ``alice`` scoped to ``acme`` with ``repo.content.read`` only."""
ORG_ROLES = {"acme": "write", "viewers": "read", "contrib": "contributor", "bosses": "admin"}
"""alice's organisations and her role in each (``contributor``: may create repos, write only to her own)."""
PUBLIC_REPO, PRIVATE_REPO = "acme/public-model", "acme/private-model"
"""The repositories every fresh Hub starts with (a ``main`` branch whose one commit holds ``.gitattributes``)."""
LFS_THRESHOLD = 10 * 1024 * 1024
"""Preupload answers ``lfs`` above this size (and for ``LFS_SUFFIXES``), ``regular`` otherwise."""
LFS_SUFFIXES = (".safetensors", ".png", ".bin")
INVALID_CREDENTIALS = "Invalid credentials in Authorization header"

GITATTRIBUTES = b"".join(
    f"{pattern} filter=lfs diff=lfs merge=lfs -text\n".encode()
    for pattern in ("*.bin", "*.ckpt", "*.h5", "*.msgpack", "*.onnx", "*.pt", "*.pth", "*.safetensors", "*.zip")
)


def _scoped(permissions: list[str]) -> dict:
    return {
        "canReadGatedRepos": True,
        "global": [],
        "scoped": [
            {"entity": {"_id": "65f0acme0000000000000001", "type": "org", "name": "acme"}, "permissions": permissions}
        ],
    }


TOKENS: dict[str, dict] = {
    WRITE: {"displayName": "ci-write", "role": "write"},
    READ_ONLY: {"displayName": "ci-read", "role": "read"},
    FINE_ACME: {
        "displayName": "ci-acme",
        "role": "fineGrained",
        "fineGrained": _scoped(["repo.content.read", "repo.write"]),
    },
    FINE_READ: {"displayName": "ci-acme-read", "role": "fineGrained", "fineGrained": _scoped(["repo.content.read"])},
}
"""The ``auth.accessToken`` of each known token (all of them ``alice``'s); any other token is a 401."""


def whoami(token: str) -> dict:
    """The ``/api/whoami-v2`` answer for a known token."""
    orgs = [
        {
            "type": "org",
            "id": f"65f0{name:0>20}",
            "name": name,
            "fullname": name.title(),
            "email": None,
            "canPay": False,
            "periodEnd": None,
            "avatarUrl": f"/avatars/{name}.svg",
            "roleInOrg": role,
            "isEnterprise": False,
        }
        for name, role in ORG_ROLES.items()
    ]
    access = {**TOKENS[token], "createdAt": "2025-01-01T00:00:00.000Z"}
    return {
        "type": "user",
        "id": "65f0a11ce000000000000001",
        "name": USER,
        "fullname": "Alice Example",
        "email": "alice@example.com",
        "emailVerified": True,
        "isPro": False,
        "canPay": False,
        "periodEnd": None,
        "avatarUrl": "/avatars/alice.svg",
        "orgs": orgs,
        "auth": {"type": "access_token", "accessToken": access},
    }


def git_hash(data: bytes) -> str:
    """Git's blob id (``git hash-object``), what the Hub calls a regular file's oid."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _permissions(token: str, namespace: str) -> list[str] | None:
    """A fine-grained token's permissions on ``namespace`` (``[]`` if none), None for a classic token."""
    fine = TOKENS[token].get("fineGrained")
    if fine is None:
        return None
    return [p for entry in fine["scoped"] if entry["entity"]["name"] == namespace for p in entry["permissions"]]


def may_read(token: str | None, repo: Repo) -> bool:
    """Public repositories to anyone; private ones to alice's namespace and orgs (and the token's scope)."""
    if not repo.private:
        return True
    if token is None:
        return False
    permissions = _permissions(token, repo.namespace)
    if permissions is not None and "repo.content.read" not in permissions:
        return False
    return repo.namespace == USER or repo.namespace in ORG_ROLES


def may_write(token: str | None, namespace: str, repo: Repo | None = None) -> bool:
    """Whether ``token`` may write to ``repo`` (None: create a repository) under ``namespace``."""
    if token is None or TOKENS[token]["role"] == "read":
        return False
    permissions = _permissions(token, namespace)
    if permissions is not None and "repo.write" not in permissions:
        return False
    if namespace == USER:
        return True
    role = ORG_ROLES.get(namespace)
    return role in ("write", "admin") or (role == "contributor" and (repo is None or repo.created_by == USER))


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


@dataclass(frozen=True)
class Blob:
    """A file in a commit's tree: its bytes and whether it is stored in LFS."""

    data: bytes
    lfs: bool = False

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @property
    def pointer(self) -> bytes:
        return f"version https://git-lfs.github.com/spec/v1\noid sha256:{self.sha256}\nsize {len(self.data)}\n".encode()

    @property
    def blob_id(self) -> str:
        """The git blob id (of the pointer file, for LFS)."""
        return git_hash(self.pointer if self.lfs else self.data)

    @property
    def oid(self) -> str:
        """What preupload reports: the sha256 for LFS, the git blob id for a regular file."""
        return self.sha256 if self.lfs else git_hash(self.data)


@dataclass
class Commit:
    oid: str
    parent: str | None
    title: str
    message: str
    tree: dict[str, Blob]
    date: str


_counter = itertools.count()


@dataclass
class Repo:
    """A repository: branches (name -> commit oid), every commit by oid, and the LFS objects uploaded to it."""

    id: str
    type: str = "model"
    private: bool = False
    created_by: str | None = None
    branches: dict[str, str] = field(default_factory=dict)
    commits: dict[str, Commit] = field(default_factory=dict)
    lfs: dict[str, bytes] = field(default_factory=dict)
    created: str = field(default_factory=_now)
    gated: str | bool = False

    @property
    def namespace(self) -> str:
        return self.id.split("/")[0]

    def resolve(self, revision: str) -> Commit | None:
        """The commit a branch name (``refs/heads/`` optional) or a full commit oid names."""
        oid = self.branches.get(revision.removeprefix("refs/heads/"), revision)
        return self.commits.get(oid)

    def head(self, branch: str = "main") -> Commit:
        return self.commits[self.branches[branch]]

    def commit(self, branch: str, title: str, tree: dict[str, Blob], message: str = "") -> Commit:
        """A new commit on ``branch`` (created if absent, from nothing) holding ``tree``."""
        parent = self.branches.get(branch)
        listing = "".join(f"{path} {blob.blob_id}\n" for path, blob in sorted(tree.items()))
        oid = hashlib.sha1(f"{parent}\n{title}\n{message}\n{listing}{next(_counter)}".encode()).hexdigest()
        self.commits[oid] = Commit(oid, parent, title, message, dict(tree), _now())
        self.branches[branch] = oid
        return self.commits[oid]

    def history(self, revision: str) -> list[Commit]:
        """The commits reachable from ``revision``, newest first."""
        found, commit = [], self.resolve(revision)
        while commit is not None:
            found.append(commit)
            commit = self.commits.get(commit.parent) if commit.parent else None
        return found


def new_repo(repo_id: str, *, private: bool = False, repo_type: str = "model", created_by: str | None = None) -> Repo:
    """A repository as the Hub creates one: ``main`` with an initial commit holding ``.gitattributes``."""
    repo = Repo(repo_id, repo_type, private, created_by)
    repo.commit("main", "initial commit", {".gitattributes": Blob(GITATTRIBUTES)})
    return repo


class HubError(Exception):
    """An error reply: status, ``X-Error-Code`` (or None), message, and extra JSON body fields."""

    def __init__(self, status: int, code: str | None, message: str, **extra: object) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.extra = status, code, message, extra


def _repo_not_found() -> HubError:
    return HubError(404, "RepoNotFound", "Repository not found")


def _revision_not_found(revision: str) -> HubError:
    return HubError(404, "RevisionNotFound", f"Invalid rev id: {revision}")


REPO_TYPES = {"models": "model", "datasets": "dataset", "spaces": "space"}
URL_PREFIX = {"model": "", "dataset": "datasets/", "space": "spaces/"}


class WritableHub(QuietHandler):
    """Just enough of the Hub's write API (LFS mode), with in-memory storage; see the module docstring."""

    repos: dict[str, Repo]
    """Repository id -> ``Repo`` (``repos[id].private``, ``.branches``, ``.head(branch).tree``, ``.lfs``)."""
    requests: list[str]
    """``"METHOD /path"`` of every request, in order (the path as sent, without the query string)."""
    fail: dict[str, int | list[int]]
    """Endpoint name -> status to fail its next request with (a list: one status per request, in order). Names:
    whoami, create, validate-yaml, branch, preupload, batch, upload, verify, commit, refs, info, auth-check, commits,
    settings, resolve."""
    lock: threading.RLock

    @classmethod
    def fresh(cls) -> type[WritableHub]:
        """A Hub of its own: the two starting repositories, an empty request log, no failures planned."""
        return type("FreshWritableHub", (cls,), _state())

    # -- plumbing ------------------------------------------------------------------------------------------------

    def _token(self) -> str | None:
        """The caller's known token, None when anonymous; an unknown token is a 401, as on the Hub."""
        auth = self.headers.get("Authorization", "")
        if not auth:
            return None
        token = auth.removeprefix("Bearer ").strip()
        if token not in TOKENS:
            raise HubError(401, None, INVALID_CREDENTIALS)
        return token

    def _base(self) -> str:
        return f"http://{self.headers.get('Host', '127.0.0.1')}"

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass  # trailers
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _json(self, body: bytes) -> dict:
        try:
            value = json.loads(body or b"{}")
        except ValueError as error:
            raise HubError(400, None, f"Invalid JSON body: {error}") from error
        if not isinstance(value, dict):
            raise HubError(400, None, "The body must be a JSON object")
        return value

    def _error(self, status: int, code: str | None, message: str, **extra: object) -> None:
        headers = {"X-Error-Code": code} if code else {}
        body = json.dumps({"error": message, **extra}).encode()
        self.send_body(status, body, **headers, **{"X-Error-Message": message})

    def _maybe_fail(self, name: str) -> None:
        plan = self.fail.get(name)
        if plan is None:
            return
        if isinstance(plan, list):
            status = plan.pop(0)
            if not plan:
                del self.fail[name]
        else:
            status = plan
            del self.fail[name]
        raise HubError(status, None, f"{name} failed (a failure the test asked for)")

    def _readable(self, repo_id: str, repo_type: str, token: str | None) -> Repo:
        repo = self.repos.get(repo_id)
        if repo is None or repo.type != repo_type or not may_read(token, repo):
            raise _repo_not_found()
        return repo

    def _writable(self, repo_id: str, repo_type: str, token: str | None) -> Repo:
        repo = self._readable(repo_id, repo_type, token)
        if not may_write(token, repo.namespace, repo):
            raise HubError(403, None, f"You don't have the rights to write to {repo_type} {repo_id}")
        return repo

    def _branch(self, repo: Repo, revision: str) -> str:
        branch = revision.removeprefix("refs/heads/")
        if branch not in repo.branches:
            raise _revision_not_found(revision)
        return branch

    def _handle(self) -> None:
        split = urlsplit(self.path)
        type(self).requests.append(f"{self.command} {split.path}")
        body = self._body() if self.command in ("POST", "PUT", "PATCH", "DELETE") else b""
        parts = [unquote(part) for part in split.path.strip("/").split("/")]
        query = parse_qs(split.query)
        try:
            with self.lock:
                self._route(parts, query, body)
        except HubError as error:
            self._error(error.status, error.code, error.message, **error.extra)
        except Exception as error:  # a request the fake does not understand: a 500 the client sees, not a reset
            self._error(500, None, f"fake Hub error: {type(error).__name__}: {error}")

    do_GET = do_HEAD = do_POST = do_PUT = _handle  # noqa: N815

    def _route(self, parts: list[str], query: dict[str, list[str]], body: bytes) -> None:
        method = self.command
        if parts[:1] == ["api"]:
            if parts[1:] == ["whoami-v2"] and method == "GET":
                return self._whoami()
            if parts[1:] == ["repos", "create"] and method == "POST":
                return self._create(body)
            if parts[1:] == ["validate-yaml"] and method == "POST":
                self._maybe_fail("validate-yaml")
                return self.send_json(200, {"errors": [], "warnings": []})
            if len(parts) >= 4 and parts[1] in REPO_TYPES:
                return self._repo_api(REPO_TYPES[parts[1]], "/".join(parts[2:4]), parts[4:], query, body)
        elif parts[:2] == ["_lfs", "upload"] and method == "PUT" and len(parts) == 6:
            return self._lfs_upload(parts[2], "/".join(parts[3:5]), parts[5], body)
        elif parts[:2] == ["_lfs", "verify"] and method == "POST" and len(parts) == 6:
            return self._lfs_verify(parts[2], "/".join(parts[3:5]), parts[5], body)
        else:
            repo_type = "model"
            if parts[0] in ("datasets", "spaces"):
                repo_type, parts = REPO_TYPES[parts[0]], parts[1:]
            lfs_batch = (
                len(parts) == 6 and parts[1].endswith(".git") and parts[2:] == ["info", "lfs", "objects", "batch"]
            )
            if lfs_batch and method == "POST":
                return self._lfs_batch(repo_type, f"{parts[0]}/{parts[1].removesuffix('.git')}", body)
            if len(parts) >= 5 and parts[2] == "resolve" and method in ("GET", "HEAD"):
                return self._resolve(repo_type, "/".join(parts[:2]), parts[3], "/".join(parts[4:]))
        raise HubError(404, None, "Not Found")

    # -- account and repositories ---------------------------------------------------------------------------------

    def _whoami(self) -> None:
        self._maybe_fail("whoami")
        token = self._token()
        if token is None:
            raise HubError(401, None, INVALID_CREDENTIALS)
        self.send_json(200, whoami(token))

    def _create(self, body: bytes) -> None:
        self._maybe_fail("create")
        token = self._token()
        if token is None:
            raise HubError(401, None, "You must be authenticated to create a repository")
        payload = self._json(body)
        name, namespace = payload.get("name"), payload.get("organization") or USER
        repo_type = payload.get("type") or "model"
        if not isinstance(name, str) or not re.fullmatch(r"[\w.-]{1,96}", name) or repo_type not in URL_PREFIX:
            raise HubError(400, None, "Invalid repository name or type")
        if not may_write(token, namespace):
            raise HubError(
                403, None, f'You don\'t have the rights to create a {repo_type} under the namespace "{namespace}"'
            )
        repo_id = f"{namespace}/{name}"
        url = f"{self._base()}/{URL_PREFIX[repo_type]}{repo_id}"
        if repo_id in self.repos:
            raise HubError(409, None, f"You already created this {repo_type} repo", url=url)
        private = payload.get("visibility", "private" if payload.get("private") else "public") == "private"
        self.repos[repo_id] = new_repo(repo_id, private=private, repo_type=repo_type, created_by=USER)
        self.send_json(200, {"url": url, "name": repo_id, "id": hashlib.sha1(repo_id.encode()).hexdigest()[:24]})

    def _repo_api(self, repo_type: str, repo_id: str, rest: list[str], query: dict, body: bytes) -> None:
        method, token = self.command, self._token()
        head = rest[0] if rest else ""
        if method == "GET" and (rest == [] or (head == "revision" and len(rest) == 2)):
            self._maybe_fail("info")
            return self._info(self._readable(repo_id, repo_type, token), rest[1] if rest else "main", query)
        if method == "GET" and head == "tree" and len(rest) >= 2:
            self._maybe_fail("tree")
            return self._tree(self._readable(repo_id, repo_type, token), rest[1], "/".join(rest[2:]), query)
        if method == "GET" and rest == ["refs"]:
            self._maybe_fail("refs")
            return self._refs(self._readable(repo_id, repo_type, token), query)
        if method == "GET" and head == "commits" and len(rest) == 2:
            self._maybe_fail("commits")
            return self._commits(self._readable(repo_id, repo_type, token), rest[1])
        if method == "GET" and rest in (["auth-check"], ["auth-check", "write"]):
            self._maybe_fail("auth-check")
            check = self._writable if rest[-1] == "write" else self._readable
            check(repo_id, repo_type, token)
            return self.send_json(200, {})
        if method == "POST" and head == "branch" and len(rest) == 2:
            self._maybe_fail("branch")
            return self._create_branch(self._writable(repo_id, repo_type, token), rest[1], body)
        if method == "POST" and head == "preupload" and len(rest) == 2:
            self._maybe_fail("preupload")
            return self._preupload(self._writable(repo_id, repo_type, token), rest[1], body)
        if method == "POST" and head == "commit" and len(rest) == 2:
            self._maybe_fail("commit")
            return self._commit(self._writable(repo_id, repo_type, token), rest[1], query, body)
        if method == "PUT" and rest == ["settings"]:
            self._maybe_fail("settings")
            return self._settings(self._writable(repo_id, repo_type, token), body)
        raise HubError(404, None, "Not Found")

    def _info(self, repo: Repo, revision: str, query: dict) -> None:
        commit = repo.resolve(revision)
        if commit is None:
            raise _revision_not_found(revision)
        blobs = query.get("blobs", ["false"])[0].lower() in ("1", "true")
        siblings = []
        for path, blob in sorted(commit.tree.items()):
            sibling: dict = {"rfilename": path}
            if blobs:
                sibling.update(blobId=blob.blob_id, size=len(blob.data))
                if blob.lfs:
                    sibling["lfs"] = {"sha256": blob.sha256, "size": len(blob.data), "pointerSize": len(blob.pointer)}
            siblings.append(sibling)
        info = {
            "_id": hashlib.sha1(repo.id.encode()).hexdigest()[:24],
            "id": repo.id,
            "author": repo.namespace,
            "sha": commit.oid,
            "lastModified": commit.date,
            "createdAt": repo.created,
            "private": repo.private,
            "disabled": False,
            "gated": repo.gated,
            "downloads": 0,
            "likes": 0,
            "tags": [],
            "siblings": siblings,
            "usedStorage": sum(len(data) for data in repo.lfs.values()),
        }
        readme = commit.tree.get("README.md")
        if readme is not None and readme.data.startswith(b"---\n"):
            try:
                card = yaml.safe_load(readme.data.split(b"\n---", 1)[0][4:])
            except yaml.YAMLError:
                card = None
            if isinstance(card, dict):
                info["cardData"] = card
        self.send_json(200, info)

    def _tree(self, repo: Repo, revision: str, path: str, query: dict) -> None:
        """GET /api/models/{repo}/tree/{rev}[/{path}]: the entries under ``path`` (``recursive``: all of them),
        folders as ``directory`` entries, files with their size and LFS pointer; one page (no ``Link``)."""
        commit = repo.resolve(revision)
        if commit is None:
            raise _revision_not_found(revision)
        recursive = query.get("recursive", ["false"])[0].lower() in ("1", "true")
        prefix = f"{path}/" if path else ""
        entries: dict[str, dict] = {}
        for name, blob in sorted(commit.tree.items()):
            if not name.startswith(prefix):
                continue
            parts = name[len(prefix) :].split("/")
            for depth in range(1, len(parts)):
                folder = prefix + "/".join(parts[:depth])
                if recursive or depth == 1:
                    entries.setdefault(
                        folder, {"type": "directory", "oid": git_hash(folder.encode()), "size": 0, "path": folder}
                    )
            if recursive or len(parts) == 1:
                entry: dict = {"type": "file", "oid": blob.blob_id, "size": len(blob.data), "path": name}
                if blob.lfs:
                    entry["lfs"] = {"oid": blob.sha256, "size": len(blob.data), "pointerSize": len(blob.pointer)}
                entries[name] = entry
        self.send_json(200, [entries[k] for k in sorted(entries)])

    def _refs(self, repo: Repo, query: dict) -> None:
        branches = [
            {"name": name, "ref": f"refs/heads/{name}", "targetCommit": oid}
            for name, oid in sorted(repo.branches.items())
        ]
        refs: dict = {"branches": branches, "converts": [], "tags": []}
        if query.get("include_prs"):
            refs["pullRequests"] = []
        self.send_json(200, refs)

    def _commits(self, repo: Repo, revision: str) -> None:
        if repo.resolve(revision) is None:
            raise _revision_not_found(revision)
        self.send_json(
            200,
            [
                {"id": c.oid, "title": c.title, "message": c.message, "authors": [{"user": USER}], "date": c.date}
                for c in repo.history(revision)
            ],
        )

    def _create_branch(self, repo: Repo, branch: str, body: bytes) -> None:
        if branch.startswith("refs/") or not re.fullmatch(r"[\w./-]+", branch) or ".." in branch:
            raise HubError(400, None, f"Invalid reference for a branch: {branch}")
        if branch in repo.branches:
            raise HubError(409, None, "Reference already exists")
        start = self._json(body).get("startingPoint") or "main"
        commit = repo.resolve(start)
        if commit is None:
            raise _revision_not_found(start)
        repo.branches[branch] = commit.oid
        self.send_json(200, {"name": branch, "ref": f"refs/heads/{branch}", "targetCommit": commit.oid})

    def _settings(self, repo: Repo, body: bytes) -> None:
        payload = self._json(body)
        if "visibility" in payload:
            repo.private = payload["visibility"] == "private"
        elif payload.get("private") is not None:
            repo.private = bool(payload["private"])
        if "gated" in payload:
            repo.gated = payload["gated"]
        self.send_json(200, {})

    # -- uploads ----------------------------------------------------------------------------------------------------

    def _preupload(self, repo: Repo, revision: str, body: bytes) -> None:
        commit = repo.resolve(revision)
        if commit is None:
            raise _revision_not_found(revision)
        files = self._json(body).get("files")
        if not isinstance(files, list):
            raise HubError(400, None, "files must be a list")
        answer = []
        for item in files:
            path, size = item.get("path"), item.get("size", 0)
            lfs = size > LFS_THRESHOLD or str(path).endswith(LFS_SUFFIXES)
            existing = commit.tree.get(path)
            answer.append(
                {
                    "path": path,
                    "uploadMode": "lfs" if lfs else "regular",
                    "shouldIgnore": False,
                    "oid": existing.oid if existing is not None else None,
                }
            )
        self.send_json(200, {"files": answer, "commitOid": commit.oid})

    def _lfs_batch(self, repo_type: str, repo_id: str, body: bytes) -> None:
        self._maybe_fail("batch")
        repo = self._writable(repo_id, repo_type, self._token())
        payload = self._json(body)
        if payload.get("operation") != "upload":
            raise HubError(400, None, "The fake Hub serves LFS uploads only")
        base = f"{self._base()}/_lfs/{{}}/{repo_type}/{repo_id}"
        objects = []
        for item in payload.get("objects", []):
            oid, size = item["oid"], item["size"]
            entry: dict = {"oid": oid, "size": size, "authenticated": True}
            if oid not in repo.lfs:
                entry["actions"] = {
                    "upload": {"href": f"{base.format('upload')}/{oid}", "expires_at": "2099-01-01T00:00:00Z"},
                    "verify": {"href": f"{base.format('verify')}/{oid}", "expires_at": "2099-01-01T00:00:00Z"},
                }
            objects.append(entry)
        reply = json.dumps({"transfer": "basic", "objects": objects, "hash_algo": "sha256"}).encode()
        self.send_body(200, reply, "application/vnd.git-lfs+json")

    def _lfs_upload(self, repo_type: str, repo_id: str, oid: str, body: bytes) -> None:
        self._maybe_fail("upload")
        repo = self.repos.get(repo_id)
        if repo is None or repo.type != repo_type:
            raise HubError(404, None, "No such upload")
        if hashlib.sha256(body).hexdigest() != oid:
            raise HubError(400, None, f"The uploaded bytes do not hash to {oid}")
        repo.lfs[oid] = body
        self.send_body(200, b"", "text/plain", ETag=f'"{hashlib.md5(body).hexdigest()}"')

    def _lfs_verify(self, repo_type: str, repo_id: str, oid: str, body: bytes) -> None:
        self._maybe_fail("verify")
        repo = self._writable(repo_id, repo_type, self._token())
        payload = self._json(body)
        if oid not in repo.lfs or payload.get("oid") != oid or payload.get("size") != len(repo.lfs[oid]):
            raise HubError(404, None, f"Object {oid} was not uploaded (or its size differs)")
        self.send_json(200, {"success": True})

    def _commit(self, repo: Repo, revision: str, query: dict, body: bytes) -> None:
        if query.get("create_pr"):
            raise HubError(400, None, "The fake Hub does not open pull requests")
        branch = self._branch(repo, revision)
        try:
            lines = [json.loads(line) for line in body.splitlines() if line.strip()]
        except ValueError as error:
            raise HubError(400, None, f"Invalid NDJSON: {error}") from error
        if not lines or lines[0].get("key") != "header":
            raise HubError(400, None, "The first line must be the header")
        header = lines[0]["value"]
        head = repo.head(branch)
        if header.get("parentCommit") not in (None, head.oid):
            raise HubError(412, None, "A commit has happened since. Please refresh and try again.")
        tree = dict(head.tree)
        for line in lines[1:]:
            key, value = line.get("key"), line.get("value", {})
            path = value.get("path", "")
            if key == "file":
                content = value.get("content", "")
                encoding = value.get("encoding", "base64")
                tree[path] = Blob(base64.b64decode(content) if encoding == "base64" else content.encode())
            elif key == "lfsFile":
                data = repo.lfs.get(value.get("oid", ""))
                if data is None or value.get("size", len(data)) != len(data):
                    raise HubError(400, None, f"LFS object {value.get('oid')} for {path} was never uploaded")
                tree[path] = Blob(data, lfs=True)
            elif key == "deletedFile":
                if tree.pop(path, None) is None:
                    raise HubError(404, "EntryNotFound", f"A file with this name doesn't exist: {path}")
            elif key == "deletedFolder":
                prefix = path.rstrip("/") + "/"
                gone = [name for name in tree if name.startswith(prefix)]
                if not gone:
                    raise HubError(404, "EntryNotFound", f"A folder with this name doesn't exist: {path}")
                for name in gone:
                    del tree[name]
            else:
                raise HubError(400, None, f"Unknown commit operation {key!r}")
        commit = repo.commit(branch, header.get("summary", ""), tree, header.get("description", ""))
        url = f"{self._base()}/{URL_PREFIX[repo.type]}{repo.id}/commit/{commit.oid}"
        self.send_json(200, {"success": True, "commitOid": commit.oid, "commitUrl": url, "pullRequestUrl": None})

    # -- downloads ---------------------------------------------------------------------------------------------------

    def _resolve(self, repo_type: str, repo_id: str, revision: str, path: str) -> None:
        self._maybe_fail("resolve")
        repo = self._readable(repo_id, repo_type, self._token())
        commit = repo.resolve(revision)
        if commit is None:
            raise _revision_not_found(revision)
        blob = commit.tree.get(path)
        if blob is None:
            raise HubError(404, "EntryNotFound", f"{path} does not exist on {revision}")
        data = blob.data
        etag = blob.sha256 if blob.lfs else blob.blob_id
        headers = {"X-Repo-Commit": commit.oid, "ETag": f'"{etag}"', "Accept-Ranges": "bytes"}
        wanted = self.headers.get("Range")
        if wanted and self.command == "GET" and data:
            first, _, last = wanted.removeprefix("bytes=").partition("-")
            start, end = int(first or 0), min(int(last) if last else len(data) - 1, len(data) - 1)
            headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
            return self.send_body(206, data[start : end + 1], "application/octet-stream", **headers)
        self.send_body(200, data, "application/octet-stream", **headers)


def _state() -> dict:
    return {
        "repos": {PUBLIC_REPO: new_repo(PUBLIC_REPO), PRIVATE_REPO: new_repo(PRIVATE_REPO, private=True)},
        "requests": [],
        "fail": {},
        "lock": threading.RLock(),
    }


for _name, _value in _state().items():
    setattr(WritableHub, _name, _value)  # WritableHub itself is a Hub too (prefer fresh(): a test's own state)
