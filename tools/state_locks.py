"""The locks a killed `pulumi` leaves in a self-managed backend, read the way the Pulumi CLI writes them
(pulumi/pulumi ``pkg/backend/diy/lock.go``: ``.pulumi/locks/organization/<project>/<stack>/<uuid>.json``, holding the
pid, user, host and time of the ``pulumi`` that took it), and the lines that name them (``tools/state.py locks`` and
``unlock``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from core.inputs import InputError, parse_json
from core.names import PROJECT
from core.redact import scrub
from infra.client_errors import client_errors, translated
from tools.state_export import StateError
from tools.state_home import file_folder

TIMEOUT = (5.0, 20.0)
"""Connect and read timeout of every GCS request, in seconds."""
MAX_LOCK_BYTES = 65536
"""The most of one lock file read (a lock is a few hundred bytes)."""
LOCK_HELP = "docs/state.md#a-locked-stack"


@dataclass(frozen=True)
class Lock:
    url: str
    pid: int | None
    username: str
    hostname: str
    timestamp: str

    def alive_here(self, hostname: str, alive: Callable[[int], bool]) -> bool:
        return self.hostname == hostname and self.pid is not None and alive(self.pid)


def lock_prefix(stack: str) -> str:
    """Where the Pulumi CLI keeps a self-managed stack's locks (pkg/backend/diy/lock.go ``stackLockDir``:
    ``.pulumi/locks/`` + the stack's fully qualified name, ``organization/<project>/<stack>``)."""
    return f".pulumi/locks/organization/{PROJECT}/{stack}/"


def parse_lock(url: str, data: bytes) -> Lock:
    """A lock file's JSON (lock.go ``lockContent``): pid, username, hostname, timestamp; anything else is shown
    as unknown rather than trusted."""
    try:
        content = parse_json(data.decode("utf-8", "replace"), url)
    except InputError:
        content = {}
    content = content if isinstance(content, dict) else {}
    pid = content.get("pid")
    text = {key: scrub(str(content.get(key) or "?"), limit=80) for key in ("username", "hostname", "timestamp")}
    return Lock(
        url=url,
        pid=pid if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 else None,
        username=text["username"],
        hostname=text["hostname"],
        timestamp=text["timestamp"],
    )


def lock_lines(stack: str, locks: Iterable[Lock], hostname: str, alive: Callable[[int], bool]) -> list[str]:
    """One line per lock: whose, since when, and what to do."""
    lines = []
    for lock in locks:
        who = f"{lock.username}@{lock.hostname} (pid {lock.pid or '?'}) since {lock.timestamp}"
        if lock.alive_here(hostname, alive):
            lines.append(
                f"error: stack {stack} is locked by a `pulumi` still running on this machine, {who} ({lock.url}): "
                "wait for it to end (or stop it with Ctrl-C), then run the command again"
            )
        else:
            stale = " whose process is gone" if lock.hostname == hostname else ""
            lines.append(
                f"error: stack {stack} is locked by {who}{stale} ({lock.url}): if that `pulumi` no longer runs (a "
                f"closed laptop, a cancelled CI job), clear the lock with `make unlock STACK={stack}` and run "
                "`make up` again; the running step is adopted, not restarted "
                f"({LOCK_HELP})"
            )
    return lines


# ---------------------------------------------------------------------------------------------
# The backend's lock files


def read_locks(backend: str, stack: str) -> list[Lock]:
    """The lock files of a self-managed backend (`gs://` or `file://`); none for Pulumi Cloud, whose own
    conflict message names `pulumi cancel`."""
    parsed = urlparse(backend)
    prefix = lock_prefix(stack)
    folder = file_folder(backend)
    if folder is not None:
        # `pulumi login file://<dir>` keeps `.pulumi/` under <dir> (file://~ is ~/.pulumi/).
        found = sorted((folder / prefix).glob("*.json")) if (folder / prefix).is_dir() else []
        return [
            parse_lock(f"{backend.rstrip('/')}/{prefix}{path.name}", path.read_bytes()[:MAX_LOCK_BYTES])
            for path in found
        ]
    if parsed.scheme == "gs":
        return _gcs_locks(parsed.netloc, parsed.path.strip("/"), prefix)
    return []


def _lock_head(bucket: str, blob: Any) -> bytes:
    """A lock object's first ``MAX_LOCK_BYTES`` (a lock is a few hundred bytes; a larger one is still a lock, shown
    as far as it parses), through the one bounded read of a GCS object (``core.bounded.read_object``): the whole
    object when it is listed as small enough, else a byte range."""
    from core.bounded import read_object

    what = f"reading gs://{bucket}/{blob.name}"
    if int(blob.size or 0) <= MAX_LOCK_BYTES:
        return read_object(blob, MAX_LOCK_BYTES, what, timeout=TIMEOUT)
    return read_object(blob, MAX_LOCK_BYTES, what, 0, MAX_LOCK_BYTES - 1, timeout=TIMEOUT)


def _gcs_locks(bucket: str, subdir: str, prefix: str) -> list[Lock]:
    from google.api_core import exceptions

    from workloads.observe.artifacts import storage_client

    full = f"{subdir}/{prefix}" if subdir else prefix
    try:
        client = storage_client()
        blobs = list(client.list_blobs(bucket, prefix=full, timeout=TIMEOUT, max_results=100))
        return [
            parse_lock(f"gs://{bucket}/{blob.name}", _lock_head(bucket, blob))
            for blob in blobs
            if blob.name.endswith(".json") and "/" not in blob.name[len(full) :]
        ]
    except exceptions.NotFound:
        raise StateError(f"the state bucket gs://{bucket} does not exist: create it with `make state-bucket`") from None
    except client_errors() as err:
        raise translated(err, f"reading the locks in gs://{bucket}/{full}", StateError, "GCS") from None
