"""The loopback Hugging Face Hub (``HF_ENDPOINT``): the rehearsal's, and the tests' (``tests/fake_hub_write.py``
gives it other accounts and a failure switch). It answers what the real ``huggingface_hub`` asks of huggingface.co in
LFS mode (``HF_HUB_DISABLE_XET=1``), with the Hub's JSON and error shapes:

- reads: ``model_info``/``dataset_info`` (``GET /api/{models,datasets}/<repo>[/revision/<rev>]``; with
  ``blobs=true``, each file's size, Git blob id and, for a file in Git LFS, its ``lfs`` object), ``list_repo_tree``,
  ``list_repo_refs``, ``list_repo_commits``, ``auth_check``, ``whoami`` and ``hf_hub_download`` (``HEAD``/``GET
  [/datasets]/<repo>/resolve/<rev>/<file>``: ``X-Repo-Commit``, an ``ETag``, for an LFS file ``X-Linked-Etag`` and
  ``X-Linked-Size``, byte ranges);
- writes: ``create_repo``, ``create_branch``, ``update_repo_settings`` and ``create_commit``/``upload_folder``
  (preupload, the LFS batch API, ``PUT`` and verify, the NDJSON commit);
- errors with the Hub's ``X-Error-Code`` header (``RepoNotFound``, also for a private repository the token may not
  see; ``RevisionNotFound``; ``EntryNotFound``) or status alone (401 an unknown token, 403 no write access, 409 it
  exists, 412 a stale parent), so the client raises what it raises against huggingface.co.

Who may do what is the ``Accounts`` the Hub is given; the rehearsal's (``StandIns``) are its pods' two Secrets' values.
Every request and the bytes sent are counted (``Hub.requests``, ``Hub.sent``): the rehearsal's lines say what crossed.
Only repositories with a namespace (``ns/name``) are served; ids are unique across repository types.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

from core.errors import TpuRlError
from tools.rehearse.hub_repos import Blob, Hub, Repo, git_hash, in_lfs, lfs_patterns, new_repo

INVALID_CREDENTIALS = "Invalid credentials in Authorization header"
REPO_TYPES = {"models": "model", "datasets": "dataset", "spaces": "space"}
URL_PREFIX = {"model": "", "dataset": "datasets/", "space": "spaces/"}


class HubReplyError(TpuRlError):
    """An error reply of the loopback Hub: status, ``X-Error-Code`` (or None), message, extra JSON body fields."""

    def __init__(self, status: int, code: str | None, message: str, **extra: object) -> None:
        super().__init__(message)
        self.status, self.code, self.extra = status, code, extra


def _repo_not_found() -> HubReplyError:
    return HubReplyError(404, "RepoNotFound", "Repository not found")


def _revision_not_found(revision: str) -> HubReplyError:
    return HubReplyError(404, "RevisionNotFound", f"Invalid rev id: {revision}")


def _flag(query: dict[str, list[str]], name: str) -> bool:
    return query.get(name, ["false"])[0].lower() in ("1", "true")


class HubHandler(BaseHTTPRequestHandler):
    """The Hub's routes over ``hub`` (a subclass names it); see the module docstring."""

    hub: Hub
    disable_nagle_algorithm = True
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def checkpoint(self, endpoint: str) -> None:
        """Called before each endpoint (``whoami``, ``create``, ``info``, ``commit``, ``upload``, ``resolve``...): a
        subclass may fail it with a ``HubReplyError``."""

    # -- plumbing ----------------------------------------------------------------------------------------------------

    def send_body(self, status: int, body: bytes, content_type: str = "application/json", **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
            with self.hub.lock:
                self.hub.sent += len(body)

    def send_json(self, status: int, value: object) -> None:
        self.send_body(status, json.dumps(value).encode())

    def _token(self) -> str | None:
        """The caller's known token, None when anonymous; an unknown token is a 401, as on the Hub."""
        auth = self.headers.get("Authorization", "")
        if not auth:
            return None
        token = auth.removeprefix("Bearer ").strip()
        if not self.hub.accounts.known(token):
            raise HubReplyError(401, None, INVALID_CREDENTIALS)
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

    def _json(self, body: bytes) -> dict[str, Any]:
        try:
            value = json.loads(body or b"{}")
        except ValueError as error:
            raise HubReplyError(400, None, f"Invalid JSON body: {error}") from error
        if not isinstance(value, dict):
            raise HubReplyError(400, None, "The body must be a JSON object")
        return value

    def _error(self, status: int, code: str | None, message: str, **extra: object) -> None:
        headers = {"X-Error-Code": code} if code else {}
        body = json.dumps({"error": message, **extra}).encode()
        self.send_body(status, body, **headers, **{"X-Error-Message": message})

    def _readable(self, repo_id: str, repo_type: str, token: str | None) -> Repo:
        repo = self.hub.repos.get(repo_id)
        if repo is None or repo.type != repo_type or not self.hub.accounts.may_read(token, repo):
            raise _repo_not_found()
        return repo

    def _writable(self, repo_id: str, repo_type: str, token: str | None) -> Repo:
        repo = self._readable(repo_id, repo_type, token)
        if not self.hub.accounts.may_write(token, repo.namespace, repo):
            raise HubReplyError(403, None, f"You don't have the rights to write to {repo_type} {repo_id}")
        return repo

    def _branch(self, repo: Repo, revision: str) -> str:
        branch = revision.removeprefix("refs/heads/")
        if branch not in repo.branches:
            raise _revision_not_found(revision)
        return branch

    def _handle(self) -> None:
        split = urlsplit(self.path)
        with self.hub.lock:
            self.hub.requests.append(f"{self.command} {split.path}")
        body = self._body() if self.command in ("POST", "PUT", "PATCH", "DELETE") else b""
        parts = [unquote(part) for part in split.path.strip("/").split("/")]
        writes = self.command in ("POST", "PUT", "DELETE")  # reads run side by side; a write holds the Hub
        try:
            with self.hub.lock if writes else contextlib.nullcontext():
                self._route(parts, parse_qs(split.query), body)
        except HubReplyError as error:
            self._error(error.status, error.code, str(error), **error.extra)
        except Exception as error:  # noqa: BLE001 (a request the Hub does not understand: a 500, not a reset)
            self._error(500, None, f"loopback Hub error: {type(error).__name__}: {error}")

    do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = _handle  # noqa: N815 (http.server's names)

    def _route(self, parts: list[str], query: dict[str, list[str]], body: bytes) -> None:
        method = self.command
        if parts[:1] == ["api"]:
            if parts[1:] == ["whoami-v2"] and method == "GET":
                return self._whoami()
            if parts[1:] == ["repos", "create"] and method == "POST":
                return self._create(body)
            if parts[1:] == ["validate-yaml"] and method == "POST":
                self.checkpoint("validate-yaml")
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
        raise HubReplyError(404, None, "Not Found")

    # -- account and repositories ------------------------------------------------------------------------------------

    def _whoami(self) -> None:
        self.checkpoint("whoami")
        token = self._token()
        if token is None:
            raise HubReplyError(401, None, INVALID_CREDENTIALS)
        self.send_json(200, self.hub.accounts.whoami(token))

    def _create(self, body: bytes) -> None:
        self.checkpoint("create")
        token = self._token()
        if token is None:
            raise HubReplyError(401, None, "You must be authenticated to create a repository")
        payload = self._json(body)
        name, namespace = payload.get("name"), payload.get("organization") or self.hub.accounts.user
        repo_type = payload.get("type") or "model"
        if not isinstance(name, str) or not re.fullmatch(r"[\w.-]{1,96}", name) or repo_type not in URL_PREFIX:
            raise HubReplyError(400, None, "Invalid repository name or type")
        if not self.hub.accounts.may_write(token, namespace):
            raise HubReplyError(
                403, None, f'You don\'t have the rights to create a {repo_type} under the namespace "{namespace}"'
            )
        repo_id = f"{namespace}/{name}"
        url = f"{self._base()}/{URL_PREFIX[repo_type]}{repo_id}"
        if repo_id in self.hub.repos:
            raise HubReplyError(409, None, f"You already created this {repo_type} repo", url=url)
        private = payload.get("visibility", "private" if payload.get("private") else "public") == "private"
        self.hub.add(new_repo(repo_id, private=private, repo_type=repo_type, created_by=self.hub.accounts.user))
        oid = hashlib.sha1(repo_id.encode()).hexdigest()[:24]  # noqa: S324 (an id)
        self.send_json(200, {"url": url, "name": repo_id, "id": oid})

    def _repo_api(
        self, repo_type: str, repo_id: str, rest: list[str], query: dict[str, list[str]], body: bytes
    ) -> None:
        method, token = self.command, self._token()
        head = rest[0] if rest else ""
        if method == "GET" and (rest == [] or (head == "revision" and len(rest) >= 2)):
            self.checkpoint("info")
            revision = "/".join(rest[1:]) if rest else "main"
            return self._info(self._readable(repo_id, repo_type, token), revision, query)
        if method == "GET" and head == "tree" and len(rest) >= 2:
            self.checkpoint("tree")
            return self._tree(self._readable(repo_id, repo_type, token), rest[1], "/".join(rest[2:]), query)
        if method == "GET" and rest == ["refs"]:
            self.checkpoint("refs")
            return self._refs(self._readable(repo_id, repo_type, token), query)
        if method == "GET" and head == "commits" and len(rest) == 2:
            self.checkpoint("commits")
            return self._commits(self._readable(repo_id, repo_type, token), rest[1])
        if method == "GET" and rest in (["auth-check"], ["auth-check", "write"]):
            self.checkpoint("auth-check")
            check = self._writable if rest[-1] == "write" else self._readable
            check(repo_id, repo_type, token)
            return self.send_json(200, {})
        if method == "POST" and head == "branch" and len(rest) == 2:
            self.checkpoint("branch")
            return self._create_branch(self._writable(repo_id, repo_type, token), rest[1], body)
        if method == "POST" and head == "preupload" and len(rest) == 2:
            self.checkpoint("preupload")
            return self._preupload(self._writable(repo_id, repo_type, token), rest[1], body)
        if method == "POST" and head == "commit" and len(rest) == 2:
            self.checkpoint("commit")
            return self._commit(self._writable(repo_id, repo_type, token), rest[1], query, body)
        if method == "PUT" and rest == ["settings"]:
            self.checkpoint("settings")
            return self._settings(self._writable(repo_id, repo_type, token), body)
        raise HubReplyError(404, None, "Not Found")

    def _info(self, repo: Repo, revision: str, query: dict[str, list[str]]) -> None:
        commit = repo.resolve(revision)
        if commit is None:
            raise _revision_not_found(revision)
        siblings = []
        for path, blob in sorted(commit.tree.items()):
            sibling: dict[str, Any] = {"rfilename": path}
            if _flag(query, "blobs"):
                sibling.update(blobId=blob.blob_id, size=len(blob.data))
                if blob.lfs:
                    sibling["lfs"] = {"sha256": blob.sha256, "size": len(blob.data), "pointerSize": len(blob.pointer)}
            siblings.append(sibling)
        info: dict[str, Any] = {
            "_id": hashlib.sha1(repo.id.encode()).hexdigest()[:24],  # noqa: S324 (an id)
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

    def _tree(self, repo: Repo, revision: str, path: str, query: dict[str, list[str]]) -> None:
        """The entries under ``path`` (``recursive``: all of them), folders as ``directory`` entries, files with their
        size and LFS pointer; one page (no ``Link``)."""
        commit = repo.resolve(revision)
        if commit is None:
            raise _revision_not_found(revision)
        recursive = _flag(query, "recursive")
        prefix = f"{path}/" if path else ""
        entries: dict[str, dict[str, Any]] = {}
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
                entry: dict[str, Any] = {"type": "file", "oid": blob.blob_id, "size": len(blob.data), "path": name}
                if blob.lfs:
                    entry["lfs"] = {"oid": blob.sha256, "size": len(blob.data), "pointerSize": len(blob.pointer)}
                entries[name] = entry
        self.send_json(200, [entries[k] for k in sorted(entries)])

    def _refs(self, repo: Repo, query: dict[str, list[str]]) -> None:
        branches = [
            {"name": name, "ref": f"refs/heads/{name}", "targetCommit": oid}
            for name, oid in sorted(repo.branches.items())
        ]
        refs: dict[str, Any] = {"branches": branches, "converts": [], "tags": []}
        if query.get("include_prs"):
            refs["pullRequests"] = []
        self.send_json(200, refs)

    def _commits(self, repo: Repo, revision: str) -> None:
        if repo.resolve(revision) is None:
            raise _revision_not_found(revision)
        user = self.hub.accounts.user
        history = repo.history(revision)
        self.send_json(
            200,
            [
                {"id": c.oid, "title": c.title, "message": c.message, "authors": [{"user": user}], "date": c.date}
                for c in history
            ],
        )

    def _create_branch(self, repo: Repo, branch: str, body: bytes) -> None:
        if branch.startswith("refs/") or not re.fullmatch(r"[\w./-]+", branch) or ".." in branch:
            raise HubReplyError(400, None, f"Invalid reference for a branch: {branch}")
        if branch in repo.branches:
            raise HubReplyError(409, None, "Reference already exists")
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

    # -- uploads -----------------------------------------------------------------------------------------------------

    def _preupload(self, repo: Repo, revision: str, body: bytes) -> None:
        commit = repo.resolve(revision)
        if commit is None:
            raise _revision_not_found(revision)
        files = self._json(body).get("files")
        if not isinstance(files, list):
            raise HubReplyError(400, None, "files must be a list")
        attributes = commit.tree.get(".gitattributes")
        patterns = lfs_patterns(attributes.data) if attributes else []
        answer = []
        for item in files:
            path, size = str(item.get("path")), int(item.get("size", 0))
            sample = base64.b64decode(item.get("sample") or "")
            existing = commit.tree.get(path)
            answer.append(
                {
                    "path": path,
                    "uploadMode": "lfs" if in_lfs(patterns, path, size, sample) else "regular",
                    "shouldIgnore": False,
                    "oid": existing.oid if existing is not None else None,
                }
            )
        self.send_json(200, {"files": answer, "commitOid": commit.oid})

    def _lfs_batch(self, repo_type: str, repo_id: str, body: bytes) -> None:
        self.checkpoint("batch")
        repo = self._writable(repo_id, repo_type, self._token())
        payload = self._json(body)
        if payload.get("operation") != "upload":
            raise HubReplyError(400, None, "The loopback Hub serves LFS uploads only")
        base = f"{self._base()}/_lfs/{{}}/{repo_type}/{repo_id}"
        objects = []
        for item in payload.get("objects", []):
            oid, size = item["oid"], item["size"]
            entry: dict[str, Any] = {"oid": oid, "size": size, "authenticated": True}
            if oid not in repo.lfs:
                entry["actions"] = {
                    "upload": {"href": f"{base.format('upload')}/{oid}", "expires_at": "2099-01-01T00:00:00Z"},
                    "verify": {"href": f"{base.format('verify')}/{oid}", "expires_at": "2099-01-01T00:00:00Z"},
                }
            objects.append(entry)
        reply = json.dumps({"transfer": "basic", "objects": objects, "hash_algo": "sha256"}).encode()
        self.send_body(200, reply, "application/vnd.git-lfs+json")

    def _lfs_upload(self, repo_type: str, repo_id: str, oid: str, body: bytes) -> None:
        self.checkpoint("upload")
        repo = self.hub.repos.get(repo_id)
        if repo is None or repo.type != repo_type:
            raise HubReplyError(404, None, "No such upload")
        if hashlib.sha256(body).hexdigest() != oid:
            raise HubReplyError(400, None, f"The uploaded bytes do not hash to {oid}")
        repo.lfs[oid] = body
        self.send_body(200, b"", "text/plain", ETag=f'"{hashlib.md5(body).hexdigest()}"')  # noqa: S324 (S3's ETag)

    def _lfs_verify(self, repo_type: str, repo_id: str, oid: str, body: bytes) -> None:
        self.checkpoint("verify")
        repo = self._writable(repo_id, repo_type, self._token())
        payload = self._json(body)
        if oid not in repo.lfs or payload.get("oid") != oid or payload.get("size") != len(repo.lfs[oid]):
            raise HubReplyError(404, None, f"Object {oid} was not uploaded (or its size differs)")
        self.send_json(200, {"success": True})

    def _commit(self, repo: Repo, revision: str, query: dict[str, list[str]], body: bytes) -> None:
        if query.get("create_pr"):
            raise HubReplyError(400, None, "The loopback Hub does not open pull requests")
        branch = self._branch(repo, revision)
        try:
            lines = [json.loads(line) for line in body.splitlines() if line.strip()]
        except ValueError as error:
            raise HubReplyError(400, None, f"Invalid NDJSON: {error}") from error
        if not lines or lines[0].get("key") != "header":
            raise HubReplyError(400, None, "The first line must be the header")
        header = lines[0]["value"]
        head = repo.head(branch)
        if header.get("parentCommit") not in (None, head.oid):
            raise HubReplyError(412, None, "A commit has happened since. Please refresh and try again.")
        tree = dict(head.tree)
        for line in lines[1:]:
            _apply(repo, tree, line.get("key"), line.get("value", {}))
        commit = repo.commit(branch, header.get("summary", ""), tree, header.get("description", ""))
        url = f"{self._base()}/{URL_PREFIX[repo.type]}{repo.id}/commit/{commit.oid}"
        self.send_json(200, {"success": True, "commitOid": commit.oid, "commitUrl": url, "pullRequestUrl": None})

    # -- downloads ---------------------------------------------------------------------------------------------------

    def _resolve(self, repo_type: str, repo_id: str, revision: str, path: str) -> None:
        self.checkpoint("resolve")
        repo = self._readable(repo_id, repo_type, self._token())
        commit = repo.resolve(revision)
        if commit is None:
            raise _revision_not_found(revision)
        blob = commit.tree.get(path)
        if blob is None:
            raise HubReplyError(404, "EntryNotFound", f"{path} does not exist on {revision}")
        data = blob.data
        headers = {"X-Repo-Commit": commit.oid, "ETag": f'"{blob.blob_id}"', "Accept-Ranges": "bytes"}
        if blob.lfs:
            headers |= {"X-Linked-Etag": f'"{blob.sha256}"', "X-Linked-Size": str(len(data))}
        wanted = self.headers.get("Range")
        if wanted and self.command == "GET" and data:
            first, _, last = wanted.removeprefix("bytes=").partition("-")
            start, end = int(first or 0), min(int(last) if last else len(data) - 1, len(data) - 1)
            headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
            return self.send_body(206, data[start : end + 1], "application/octet-stream", **headers)
        self.send_body(200, data, "application/octet-stream", **headers)


def _apply(repo: Repo, tree: dict[str, Blob], key: str | None, value: dict[str, Any]) -> None:
    """One operation of an NDJSON commit, on ``tree``."""
    path = value.get("path", "")
    if key == "file":
        content = value.get("content", "")
        encoding = value.get("encoding", "base64")
        tree[path] = Blob(base64.b64decode(content) if encoding == "base64" else content.encode())
    elif key == "lfsFile":
        data = repo.lfs.get(value.get("oid", ""))
        if data is None or value.get("size", len(data)) != len(data):
            raise HubReplyError(400, None, f"LFS object {value.get('oid')} for {path} was never uploaded")
        tree[path] = Blob(data, lfs=True)
    elif key == "deletedFile":
        if tree.pop(path, None) is None:
            raise HubReplyError(404, "EntryNotFound", f"A file with this name doesn't exist: {path}")
    elif key == "deletedFolder":
        prefix = path.rstrip("/") + "/"
        gone = [name for name in tree if name.startswith(prefix)]
        if not gone:
            raise HubReplyError(404, "EntryNotFound", f"A folder with this name doesn't exist: {path}")
        for name in gone:
            del tree[name]
    else:
        raise HubReplyError(400, None, f"Unknown commit operation {key!r}")


class HubServer:
    """The Hub on a loopback port, in a thread of its own, until ``stop``."""

    def __init__(self, hub: Hub) -> None:
        handler = type("Handler", (HubHandler,), {"hub": hub})
        self.hub = hub
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self) -> HubServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
