"""A loopback stand-in for the Hugging Face Hub (HF_ENDPOINT): model info and the file metadata HEAD
request, with its real error headers (``X-Error-Code``), tokens that are good, not licensed or invalid, and
repositories named after a way a server can go wrong. ``FakeHub.files`` (a subclass sets it) are served as
the Hub serves a repository's files: HEAD with the commit and ETag headers ``hf_hub_download`` reads, GET
with byte ranges (``Range: bytes=a-b`` -> 206), as ``parse_safetensors_file_metadata`` reads a header."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from tests.loopback import QuietHandler

REPO = "google/gemma-4-26b-a4b-it"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
MOVED = "fedcba9876543210fedcba9876543210fedcba98"
"""Where ``main`` points once it moved (``FakeHub.moved``): a later commit of the repository."""
GOOD, NOT_ACCEPTED, BAD = "hf_goodTOKEN", "hf_licenceNOTaccepted", "hf_invalidTOKEN"


LFS = (".safetensors", ".parquet", ".bin", "tokenizer.json")
"""What a repository keeps in Git LFS: the Hub's default ``.gitattributes`` patterns the tests' files match, and
``tokenizer.json``, which Gemma's repositories add."""


def git_blob_id(data: bytes) -> str:
    """Git's object id of a blob (``git hash-object``): the SHA-1 of ``blob <size>\\0`` and the bytes."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def sibling(name: str, data: bytes) -> dict[str, Any]:
    """A file as the Hub lists it with ``files_metadata=True`` (``/api/models/<repo>/revision/<rev>``'s
    ``siblings``, as huggingface_hub 2.4.0's ``ModelInfo`` reads them): its size and Git blob id, and for a file in
    LFS its LFS object (``sha256``, ``size``, ``pointerSize``), whose Git blob is then the pointer file's."""
    if not name.endswith(LFS):
        return {"rfilename": name, "blobId": git_blob_id(data), "size": len(data)}
    sha256 = hashlib.sha256(data).hexdigest()
    pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {len(data)}\n".encode()
    lfs = {"sha256": sha256, "size": len(data), "pointerSize": len(pointer)}
    return {"rfilename": name, "blobId": git_blob_id(pointer), "size": len(data), "lfs": lfs}


class FakeHub(QuietHandler):
    """Just enough of the Hub API: model info and the file metadata HEAD request."""

    files: dict[str, bytes] = {}
    """The repository's files at ``COMMIT`` (empty: ``config.json`` is a 123-byte stand-in)."""
    ranges: list[str] = []
    """``<file> <Range header, or "whole">`` of every GET of a file, in order (how much was read)."""
    ignores_range = False
    """A server (or a proxy or CDN in front of it) that ignores ``Range`` and answers every GET with the whole
    file (200): a reader that trusts it pulls a whole shard for an 8-byte header read."""
    sent: list[int] = []
    """Bytes of file content written to clients, per GET, in order (what a reader made the server send)."""
    moved: dict[str, bytes] | None = None
    """The files at ``MOVED``, where ``main`` points once someone pushed to it (None: ``main`` is ``COMMIT``)."""

    @classmethod
    def moving(cls, files: dict[str, bytes], moved: dict[str, bytes]) -> type[FakeHub]:
        """A Hub whose ``main`` was at ``COMMIT`` holding ``files`` and moved to ``MOVED`` holding ``moved``."""
        return type("MovedHub", (cls.serving(files),), {"moved": moved})

    def _at(self, revision: str) -> tuple[str, dict[str, bytes]]:
        """The commit a (checked) revision names and the files it holds."""
        if self.moved is not None and revision in ("main", MOVED):
            return MOVED, self.moved
        return COMMIT, self.files

    @classmethod
    def serving(cls, files: dict[str, bytes]) -> type[FakeHub]:
        """A Hub whose repository holds ``files``, with a request log of its own."""
        return type("ServingHub", (cls,), {"files": files, "ranges": [], "sent": []})

    def _token(self) -> str:
        return self.headers.get("Authorization", "").removeprefix("Bearer ")

    def _error(self, status: int, code: str | None, message: str) -> None:
        headers = {"X-Error-Code": code} if code else {}
        self.send_body(status, json.dumps({"error": message}).encode(), **headers, **{"X-Error-Message": message})

    def _check(self, repo: str, revision: str) -> bool:
        if self._token() == BAD:
            self._error(401, None, "Invalid credentials in Authorization header")
        elif repo != REPO:
            self._error(404, "RepoNotFound", "Repository not found")
        elif revision not in ("main", COMMIT) and not (self.moved is not None and revision == MOVED):
            self._error(404, "RevisionNotFound", "Invalid rev id")
        else:
            return True
        return False

    def _misbehave(self, repo: str) -> bool:
        """Repositories named after a way a server (or a proxy in front of it) can go wrong."""
        name = repo.split("/")[-1]
        if self.misbehave(name, drips=40, pause=0.25):
            pass
        elif name in ("garbage", "nonutf8", "shape"):
            body = {"garbage": b"<html>oops", "nonutf8": b"\xff\xfe\x00{", "shape": b'["not", "an", "object"]'}[name]
            self.send_body(200, body)
        elif name == "redirect":
            self.send_body(302, b"", Location=self.path)
        elif name == "echo":
            # A broken proxy that echoes request headers into its error.
            self._error(502, None, f"bad gateway; request had {self.headers.get('Authorization')}")
        else:
            return False
        return True

    def do_GET(self):  # noqa: N802
        parts = self.path.split("?")[0].strip("/").split("/")
        if parts[:2] == ["api", "models"] and "revision" in parts and self._misbehave("/".join(parts[2:4])):
            return
        if parts[:2] == ["api", "models"] and "revision" in parts:
            i = parts.index("revision")
            repo, revision = "/".join(parts[2:i]), parts[i + 1]
            if self._check(repo, revision):
                # As the Hub lists them with files_metadata=True (size, blobId, and lfs for large files).
                sha, files = self._at(revision)
                siblings = [sibling(name, data) for name, data in sorted(files.items())]
                self.send_json(
                    200,
                    {
                        "id": repo,
                        "sha": sha,
                        "private": False,
                        "gated": "manual",
                        "siblings": siblings,
                        # As google/gemma-4-* declare it: Gemma 4 is released under Apache 2.0.
                        "cardData": {"license": "apache-2.0"},
                        "tags": ["transformers", "license:apache-2.0"],
                    },
                )
        elif "resolve" in parts and self.files:
            self._file(parts)
        else:
            self._error(404, None, "not found")

    def _file(self, parts: list[str]) -> None:
        i = parts.index("resolve")
        repo, revision, name = "/".join(parts[:i]), parts[i + 1], "/".join(parts[i + 2 :])
        if self.misbehave(name.removesuffix(".safetensors"), drips=40, pause=0.25):
            return  # a shard named hang, drip or reset
        if not self._check(repo, revision):
            return
        sha, files = self._at(revision)
        if name not in files:
            self._error(404, "EntryNotFound", f"{name} does not exist on {revision}")
            return
        data = files[name]
        headers = {"X-Repo-Commit": sha, "ETag": f'"{len(data)}-{sha[:8]}-{name}"', "Accept-Ranges": "bytes"}
        wanted = self.headers.get("Range")
        if self.command == "GET":
            type(self).ranges.append(f"{name} {wanted or 'whole'}")
        if wanted and self.command == "GET" and not self.ignores_range:
            first, _, last = wanted.removeprefix("bytes=").partition("-")
            start, end = int(first), min(int(last) if last else len(data) - 1, len(data) - 1)
            headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
            self.send_body(206, data[start : end + 1], "application/octet-stream", **headers)
            type(self).sent.append(end + 1 - start)
            return
        self._whole(data, headers)

    def _whole(self, data: bytes, headers: dict[str, str]) -> None:
        """The whole file, 200, in 64 kB writes; a client that hangs up stops it (counted in ``sent``)."""
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(data)))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        written = 0
        if self.command == "GET":
            try:
                for at in range(0, len(data), 65536):
                    self.wfile.write(data[at : at + 65536])
                    written += len(data[at : at + 65536])
            except OSError:
                pass  # the client stopped reading
            type(self).sent.append(written)

    def do_HEAD(self):  # noqa: N802
        parts = self.path.split("?")[0].strip("/").split("/")
        if "resolve" in parts and self.files:
            self._file(parts)
        elif "resolve" in parts:
            i = parts.index("resolve")
            repo, revision = "/".join(parts[:i]), parts[i + 1]
            if not self._check(repo, revision):
                return
            if self._token() == NOT_ACCEPTED:
                self._error(403, "GatedRepo", "Access to model is restricted and you are not in the authorized list")
                return
            self.send_body(200, b"x" * 123, "application/octet-stream", **{"X-Repo-Commit": COMMIT, "ETag": '"abc"'})
        else:
            self._error(404, None, "not found")
