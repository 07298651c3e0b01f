"""What the loopback Hub (``tools.rehearse.hub``) holds and who may touch it: repositories as commits of trees of
blobs, where the Hub stores a file (LFS or Git), and the accounts (``Accounts``; the rehearsal's are ``StandIns``)."""

from __future__ import annotations

import fnmatch
import hashlib
import itertools
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

LFS_THRESHOLD = 10 * 1024 * 1024
"""A file above this size goes to LFS whatever ``.gitattributes`` says (the Hub's preupload rule)."""
LFS_PATTERNS = [
    "*.7z",
    "*.arrow",
    "*.bin",
    "*.bz2",
    "*.ckpt",
    "*.ftz",
    "*.gz",
    "*.h5",
    "*.joblib",
    "*.lfs.*",
    "*.mlmodel",
    "*.model",
    "*.msgpack",
    "*.npy",
    "*.npz",
    "*.onnx",
    "*.ot",
    "*.parquet",
    "*.pb",
    "*.pickle",
    "*.pkl",
    "*.pt",
    "*.pth",
    "*.rar",
    "*.safetensors",
    "saved_model/**/*",
    "*.tar.*",
    "*.tar",
    "*.tflite",
    "*.tgz",
    "*.wasm",
    "*.xz",
    "*.zip",
    "*.zst",
    "*tfevents*",
]
"""The ``.gitattributes`` patterns the Hub writes into a new repository."""


def gitattributes(patterns: list[str] | tuple[str, ...] = LFS_PATTERNS) -> bytes:
    return b"".join(f"{pattern} filter=lfs diff=lfs merge=lfs -text\n".encode() for pattern in patterns)


def lfs_patterns(text: bytes) -> list[str]:
    """The patterns a ``.gitattributes`` puts in LFS."""
    return [line.split()[0] for line in text.decode(errors="replace").splitlines() if "filter=lfs" in line.split()]


def in_lfs(patterns: list[str], path: str, size: int, sample: bytes) -> bool:
    """Whether the Hub stores ``path`` in LFS: a pattern of the branch's ``.gitattributes`` matches its name or path,
    it is larger than ``LFS_THRESHOLD``, or its first bytes hold a NUL (the Hub takes it as binary)."""
    name = path.rsplit("/", 1)[-1]
    matched = any(fnmatch.fnmatchcase(name, p) or fnmatch.fnmatchcase(path, p) for p in patterns)
    return matched or size > LFS_THRESHOLD or b"\0" in sample


def git_hash(data: bytes) -> str:
    """Git's blob id (``git hash-object``), what the Hub calls a regular file's oid."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # noqa: S324 (Git's id, not a secret's hash)


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
        seed = f"{parent}\n{title}\n{message}\n{listing}{next(_counter)}"
        oid = hashlib.sha1(seed.encode()).hexdigest()  # noqa: S324 (a commit id, not a secret's hash)
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
    repo.commit("main", "initial commit", {".gitattributes": Blob(gitattributes())})
    return repo


def filled_repo(
    repo_id: str, files: dict[str, bytes], *, repo_type: str = "model", extra_lfs: tuple[str, ...] = ()
) -> Repo:
    """A public repository whose ``main`` holds ``files`` (and a ``.gitattributes`` with the Hub's patterns and
    ``extra_lfs``), each in LFS as the Hub would store it."""
    repo = Repo(repo_id, repo_type)
    attributes = gitattributes((*LFS_PATTERNS, *extra_lfs))
    patterns = lfs_patterns(attributes)
    tree = {".gitattributes": Blob(attributes)}
    tree |= {name: Blob(data, in_lfs(patterns, name, len(data), data[:512])) for name, data in files.items()}
    repo.commit("main", "initial commit", tree)
    return repo


class Accounts(Protocol):
    """Who the Hub's tokens are and what each may do."""

    @property
    def user(self) -> str:
        """The one user every known token belongs to (a repository created without an organisation is theirs)."""
        ...

    def known(self, token: str) -> bool: ...

    def whoami(self, token: str) -> dict[str, Any]:
        """The ``/api/whoami-v2`` answer for a known token."""
        ...

    def may_read(self, token: str | None, repo: Repo) -> bool: ...

    def may_write(self, token: str | None, namespace: str, repo: Repo | None = None) -> bool:
        """Whether ``token`` may write to ``repo`` (None: create a repository) under ``namespace``."""
        ...


@dataclass(frozen=True)
class StandIns:
    """The rehearsal's accounts: the read token reads what is public, the write token writes anywhere."""

    read_token: str
    write_token: str
    user: str = "tpu-rl-rehearsal"

    def known(self, token: str) -> bool:
        return token in (self.read_token, self.write_token)

    def whoami(self, token: str) -> dict[str, Any]:
        role = "write" if token == self.write_token else "read"
        access = {"displayName": f"rehearsal-{role}", "role": role}
        return {"type": "user", "name": self.user, "orgs": [], "auth": {"type": "access_token", "accessToken": access}}

    def may_read(self, token: str | None, repo: Repo) -> bool:
        return not repo.private or token == self.write_token

    def may_write(self, token: str | None, namespace: str, repo: Repo | None = None) -> bool:
        return token == self.write_token


@dataclass
class Hub:
    """The repositories (id -> ``Repo``), the accounts, and what was asked (``"METHOD /path"``) and sent."""

    accounts: Accounts
    repos: dict[str, Repo] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)
    sent: int = 0
    lock: threading.RLock = field(default_factory=threading.RLock)

    def add(self, repo: Repo) -> None:
        self.repos[repo.id] = repo
