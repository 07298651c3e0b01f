"""The rehearsal's Hugging Face Hub: a loopback server (``HF_ENDPOINT``) holding the repositories the stack's steps
read, each at one commit, served as huggingface.co serves what ``huggingface_hub`` asks of it:

- ``GET /api/models/<repo>/revision/<rev>`` and ``/api/datasets/<repo>/revision/<rev>`` (``model_info`` and
  ``dataset_info``): the commit and, as with ``files_metadata=True``, each file's size and Git blob id, and for a file
  in Git LFS its ``lfs`` object (``sha256``, ``size``), the hash ``core.hf_model.HubFile`` checks a file against;
- ``HEAD`` and ``GET /<repo>/resolve/<rev>/<file>`` (``/datasets/<repo>/...`` for a dataset; ``hf_hub_download``):
  ``X-Repo-Commit``, an ``ETag`` (for an LFS file ``X-Linked-Etag`` and ``X-Linked-Size`` too, as the Hub sends),
  byte ranges (``Range: bytes=a-b`` -> 206);
- a write (``POST``, ``PUT``, ``DELETE``: a repository made, a commit) refused, 403 ``READS_ONLY``;
- errors with the Hub's ``X-Error-Code`` header (``RepoNotFound``, ``RevisionNotFound``, ``EntryNotFound``), so the
  client raises what it raises against huggingface.co. A revision is the branch ``main`` or the commit.

Every request and the bytes sent are counted (``Hub.requests``): the rehearsal's lines say what crossed the Hub.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

READS_ONLY = "the rehearsal's Hub serves reads only"
"""What the Hub answers a write with (403, the Hub's error headers): the client raises it, the step's program says it,
and the rehearsal reads the step as passed up to that write (``tools.rehearse.run``)."""
LFS_SUFFIXES = (".safetensors", ".parquet", ".model", "tokenizer.json")
"""What a repository keeps in Git LFS: the Hub's default ``.gitattributes`` patterns of the files served, and
``tokenizer.json``, which Gemma's repositories add."""


def git_blob_id(data: bytes) -> str:
    """Git's object id of a blob (``git hash-object``)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # noqa: S324 (Git's id, not a secret's hash)


def sibling(name: str, data: bytes) -> dict[str, Any]:
    """A file as the Hub lists it with ``files_metadata=True``."""
    if not name.endswith(LFS_SUFFIXES):
        return {"rfilename": name, "blobId": git_blob_id(data), "size": len(data)}
    sha256 = hashlib.sha256(data).hexdigest()
    pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {len(data)}\n".encode()
    lfs = {"sha256": sha256, "size": len(data), "pointerSize": len(pointer)}
    return {"rfilename": name, "blobId": git_blob_id(pointer), "size": len(data), "lfs": lfs}


@dataclass
class Repository:
    kind: str
    """``model`` or ``dataset``."""
    name: str
    commit: str
    files: dict[str, bytes]
    card: dict[str, Any] = field(default_factory=dict)


@dataclass
class Hub:
    """The repositories served, and what was asked."""

    repositories: dict[tuple[str, str], Repository] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)
    sent: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, repository: Repository) -> None:
        self.repositories[(repository.kind, repository.name)] = repository


class _Handler(BaseHTTPRequestHandler):
    hub: Hub
    disable_nagle_algorithm = True
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header(
            "Content-Type", "application/json" if status != 200 or body[:1] in b"{[" else "application/octet-stream"
        )
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
            with self.hub.lock:
                self.hub.sent += len(body)

    def _error(self, status: int, code: str, message: str) -> None:
        body = json.dumps({"error": message}).encode()
        self._send(status, body, {"X-Error-Code": code, "X-Error-Message": message})

    def _repository(self, kind: str, name: str, revision: str) -> Repository | None:
        found = self.hub.repositories.get((kind, name))
        if found is None:
            self._error(404, "RepoNotFound", "Repository not found")
            return None
        if revision not in ("main", found.commit):
            self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
            return None
        return found

    def _route(self) -> None:
        path = unquote(urlsplit(self.path).path)
        with self.hub.lock:
            self.hub.requests.append(f"{self.command} {path}")
        parts = path.strip("/").split("/")
        if parts[:1] == ["api"] and len(parts) >= 5 and parts[1] in ("models", "datasets") and "revision" in parts:
            at = parts.index("revision")
            kind = parts[1].removesuffix("s")
            found = self._repository(kind, "/".join(parts[2:at]), "/".join(parts[at + 1 :]))
            if found is not None:
                info = {
                    "id": found.name,
                    "sha": found.commit,
                    "private": False,
                    "siblings": [sibling(n, d) for n, d in sorted(found.files.items())],
                    "cardData": found.card,
                }
                self._send(200, json.dumps(info).encode())
            return
        kind = "model"
        if parts[:1] == ["datasets"]:
            kind, parts = "dataset", parts[1:]
        if "resolve" not in parts:
            self._error(404, "EntryNotFound", f"no route for {path}")
            return
        at = parts.index("resolve")
        found = self._repository(kind, "/".join(parts[:at]), parts[at + 1] if len(parts) > at + 1 else "")
        if found is None:
            return
        name = "/".join(parts[at + 2 :])
        if name not in found.files:
            self._error(404, "EntryNotFound", f"{name} does not exist on {found.commit}")
            return
        self._file(found, name)

    def _file(self, found: Repository, name: str) -> None:
        data = found.files[name]
        headers = {"X-Repo-Commit": found.commit, "Accept-Ranges": "bytes", "ETag": f'"{git_blob_id(data)}"'}
        if name.endswith(LFS_SUFFIXES):
            headers["X-Linked-Etag"] = f'"{hashlib.sha256(data).hexdigest()}"'
            headers["X-Linked-Size"] = str(len(data))
        wanted = self.headers.get("Range")
        if wanted and self.command == "GET":
            first, _, last = wanted.removeprefix("bytes=").partition("-")
            start = int(first or 0)
            end = min(int(last) if last else len(data) - 1, len(data) - 1)
            headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
            self._send(206, data[start : end + 1], headers)
            return
        self._send(200, data, headers)

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self._route()

    def do_HEAD(self) -> None:  # noqa: N802
        self._route()

    def _refuse(self) -> None:
        with self.hub.lock:
            self.hub.requests.append(f"{self.command} {urlsplit(self.path).path}")
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(min(length, 1 << 20))
        self._error(403, "Forbidden", READS_ONLY)

    do_POST = do_PUT = do_DELETE = _refuse  # noqa: N815


class HubServer:
    """The Hub on a loopback port, in a thread of its own, until ``stop``."""

    def __init__(self, hub: Hub) -> None:
        handler = type("Handler", (_Handler,), {"hub": hub})
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
