"""Where a stack's Pulumi state lives, the bucket that holds it, and the locks a killed `pulumi` leaves.

    python -m tools.state select --stack NAME [--current WHOAMI_JSON] [--backend URL] [--local-ok]
    python -m tools.state create --stack NAME [--bucket NAME]
    python -m tools.state locks  --stack NAME --current WHOAMI_JSON
    python -m tools.state unlock --stack NAME --current WHOAMI_JSON
    python -m tools.state releases --stack NAME

``select`` prints three lines for the Makefile: the URL to ``pulumi login`` to (empty: keep the login), the
backend the stack's commands will use, and the secrets provider a new stack is created with (empty: the backend's
default). The choice, first that applies: ``PULUMI_BACKEND_URL`` (the CLI's own override), ``--backend``
(``STATE_BACKEND=``), a Pulumi Cloud login, else the project's state bucket ``gs://<gcp:project>-pulumi-state``
with the Cloud KMS key ``pulumi-state/pulumi-secrets`` (``global``). A file backend inside this checkout is
refused unless ``--local-ok`` (``LOCAL_STATE=1``): deleting or re-cloning the folder would lose the state of
resources that keep billing (docs/operations.md "Where the state lives").

``create`` makes that bucket (versioned, uniform bucket-level access, public access prevention enforced) and the
key, or brings an existing bucket to those settings (``make state-bucket``). ``locks`` names every lock a
self-managed backend holds for the stack, the way the Pulumi CLI writes them (pulumi/pulumi
``pkg/backend/diy/lock.go``: ``.pulumi/locks/organization/<project>/<stack>/<uuid>.json``, holding the pid,
user, host and time of the ``pulumi`` that took it); exit 1 when there is one. ``unlock`` refuses while a lock's
process is alive on this machine, then prints what ``pulumi cancel`` will clear. ``releases`` prints the names of
the Helm releases the stack's state holds, comma-separated, from ``pulumi stack export`` (which takes no lock), for
``make up`` to hand the program (``infra.k8s.manifests.RELEASES_IN_STATE``); when the state holds the cluster but
not one of the program's releases and Helm's storage in that cluster holds it (a destroy whose cluster delete
failed), one line naming the command that clears it and exit 1, before `pulumi up` creates anything; when the
state cannot be read, one warning line and exit 3 (``make up`` then leaves the variable unset: nothing is
compared). Bad input: one line, exit 2.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from core.config.placeholders import EXAMPLE_PROJECTS
from core.names import PROJECT
from core.redact import scrub
from tools.process import exit_now
from tools.stack_files import ROOT, StackFileError, read_yaml
from tools.state_export import (
    StateError,
    export_state,
    pins_in_state,
    platform_releases,
    releases_in_state,
    stranded_release,
)

# google-api-core's notice about Python 3.11's end of life (2027) is not the operator's business on every `make up`.
warnings.filterwarnings("ignore", category=FutureWarning, module=r"google\.api_core\.")

KEY_RING = "pulumi-state"
KEY = "pulumi-secrets"
KEY_LOCATION = "global"
"""One key per Google project, whatever a stack's region: every stack of the project finds the same URL."""
BUCKET_SUFFIX = "-pulumi-state"
NONCURRENT_DAYS = 90
"""A checkpoint's older versions are kept this long after a newer one replaced them (a lifecycle rule)."""
TIMEOUT = (5.0, 20.0)
"""Connect and read timeout of every GCS and Cloud KMS request, in seconds."""
MAX_LOCK_BYTES = 65536
"""The most of one lock file read (a lock is a few hundred bytes)."""
RETRY_SECONDS = 30.0
"""How long the GCS library retries a transient failure of one call (its default: 120 s)."""
LOCK_HELP = "docs/operations.md#a-locked-stack"


@dataclass(frozen=True)
class Choice:
    login: str
    """The URL to `pulumi login` to; empty: keep the current login (Pulumi Cloud, or PULUMI_BACKEND_URL)."""
    backend: str
    secrets_provider: str
    """`--secrets-provider` of a new stack; empty: the backend's default (Pulumi Cloud's)."""


@dataclass(frozen=True)
class Lock:
    url: str
    pid: int | None
    username: str
    hostname: str
    timestamp: str

    def alive_here(self, hostname: str, alive: Callable[[int], bool]) -> bool:
        return self.hostname == hostname and self.pid is not None and alive(self.pid)


# ---------------------------------------------------------------------------------------------
# Pure: which backend, which bucket, which key


def stack_project(stack: str, root: Path = ROOT) -> tuple[str, str]:
    """`gcp:project` and `gcp:region` of `Pulumi.<stack>.yaml`, or StateError naming what is missing."""
    path = root / f"Pulumi.{stack}.yaml"
    if not path.is_file():
        raise StateError(f"no stack file {path.name}: the state bucket is named after its gcp:project")
    try:
        document = read_yaml(path)
    except StackFileError as err:
        raise StateError(str(err)) from None
    config = (document or {}).get("config") if isinstance(document, dict) else None
    config = config if isinstance(config, dict) else {}
    project, region = config.get("gcp:project"), config.get("gcp:region")
    if not isinstance(project, str) or not project:
        raise StateError(f"{path.name} has no gcp:project: set it (`pulumi config set gcp:project ...`)")
    if project in EXAMPLE_PROJECTS:
        raise StateError(
            f"{path.name}: gcp:project is the example's placeholder {project}; set your project id in the file first"
        )
    if not isinstance(region, str) or not region:
        region = "us-east5"
    return project, region


def state_bucket(project: str) -> str:
    name = project.split(":")[-1] + BUCKET_SUFFIX  # a domain-scoped project (example.com:p) keeps its last part
    return name


def key_name(project: str) -> str:
    return f"projects/{project}/locations/{KEY_LOCATION}/keyRings/{KEY_RING}/cryptoKeys/{KEY}"


def inside(url: str, root: Path) -> Path | None:
    """The folder of a `file://` backend when it is inside `root` (the checkout), else None."""
    folder = file_folder(url)
    if folder is None:
        return None
    folder = folder.resolve()
    return folder if folder == root.resolve() or root.resolve() in folder.parents else None


def file_folder(url: str) -> Path | None:
    """The folder of a `file://` backend URL (`file://~` is the home folder), else None."""
    parsed = urlparse(url)
    if parsed.scheme != "file":
        return None
    folder = Path(os.path.expanduser(unquote(parsed.netloc + parsed.path) or "~"))
    return folder if folder.is_absolute() else Path.cwd() / folder


def current_url(whoami: str, env: dict[str, str] | None = None) -> str:
    """The backend URL of `pulumi whoami --json`; when that gave nothing (not logged in, or Pulumi Cloud not
    answering), the login the CLI would use without the network: Pulumi Cloud when ``PULUMI_ACCESS_TOKEN`` is set,
    else ``current`` of ``$PULUMI_HOME/credentials.json`` (pulumi/pulumi sdk/go/common/workspace/creds.go), so that
    a Cloud user whose network failed is never sent to create an empty stack in the bucket."""
    env = dict(os.environ) if env is None else env
    try:
        parsed = json.loads(whoami) if whoami.strip() else {}
    except json.JSONDecodeError:
        parsed = {}
    url = parsed.get("url") if isinstance(parsed, dict) else None
    if isinstance(url, str) and url:
        return url
    if env.get("PULUMI_ACCESS_TOKEN"):
        return "https://api.pulumi.com"
    home = Path(env.get("PULUMI_HOME") or Path(env.get("HOME", "~")).expanduser() / ".pulumi")
    try:
        current = json.loads((home / "credentials.json").read_text()[:1_000_000]).get("current")
    except (OSError, ValueError, AttributeError):
        return ""
    return current if isinstance(current, str) and current.startswith(("https://", "http://")) else ""


def choose(
    stack: str,
    *,
    env_url: str,
    explicit: str,
    current: str,
    local_ok: bool,
    root: Path = ROOT,
    secrets_provider: str = "",
) -> Choice:
    """The backend of `make`'s Pulumi commands (the module's docstring gives the order)."""

    def refuse_local(url: str, source: str) -> None:
        folder = inside(url, root)
        if folder is not None and not local_ok:
            raise StateError(
                f"{source} is {url}, a file backend inside this checkout ({folder.relative_to(root.resolve())}/): "
                "deleting or re-cloning the folder would lose the stack's state while its cluster and TPU pool "
                "keep billing; use the project's state bucket (make state-bucket STACK="
                f"{stack}), or accept it with LOCAL_STATE=1"
            )

    if env_url:
        refuse_local(env_url, "PULUMI_BACKEND_URL")
        backend = env_url
        login = ""
    elif explicit:
        refuse_local(explicit, "STATE_BACKEND")
        backend = login = explicit
    elif current.startswith(("https://", "http://")):
        return Choice(login="", backend=current, secrets_provider=secrets_provider)
    else:
        legacy = root / ".pulumi-state" / ".pulumi" / "stacks" / PROJECT
        if any(legacy.glob(f"{stack}.json*")) and not local_ok:
            raise StateError(
                f"stack {stack} has state in .pulumi-state/ inside this checkout (the earlier default); move it to "
                f"the state bucket before anything else (docs/operations.md#moving-a-stack-out-of-the-checkout), "
                "or keep using it with LOCAL_STATE=1"
            )
        if local_ok and any(legacy.glob(f"{stack}.json*")):
            backend = login = f"file://{root.resolve() / '.pulumi-state'}"
            return Choice(login=login, backend=backend, secrets_provider=secrets_provider)
        project, _ = stack_project(stack, root)
        backend = login = f"gs://{state_bucket(project)}"
        secrets_provider = secrets_provider or f"gcpkms://{key_name(project)}"
        return Choice(login=login, backend=backend, secrets_provider=secrets_provider)
    if not secrets_provider and backend.startswith("gs://"):
        # A bucket of one's own choosing (`make state-bucket BUCKET=...`) takes the project's key too.
        try:
            project, _ = stack_project(stack, root)
            secrets_provider = f"gcpkms://{key_name(project)}"
        except StateError:
            pass
    return Choice(login=login, backend=backend, secrets_provider=secrets_provider)


def lock_prefix(stack: str) -> str:
    """Where the Pulumi CLI keeps a self-managed stack's locks (pkg/backend/diy/lock.go ``stackLockDir``:
    ``.pulumi/locks/`` + the stack's fully qualified name, ``organization/<project>/<stack>``)."""
    return f".pulumi/locks/organization/{PROJECT}/{stack}/"


def parse_lock(url: str, data: bytes) -> Lock:
    """A lock file's JSON (lock.go ``lockContent``): pid, username, hostname, timestamp; anything else is shown
    as unknown rather than trusted."""
    try:
        content = json.loads(data.decode("utf-8", "replace"))
    except json.JSONDecodeError:
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
# The world: the backend's lock files, the bucket, the key


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
    except Exception as err:  # noqa: BLE001 (credentials, network, permissions: one line)
        raise StateError(f"cannot read the locks in gs://{bucket}/{full}: {scrub(str(err), limit=200)}") from None


def create(project: str, region: str, bucket_name: str, *, storage: Any, kms: Any) -> list[str]:
    """Create (or bring to its settings) the state bucket and the secrets key; the lines saying what was done."""
    from google.api_core import exceptions
    from google.cloud.storage.retry import DEFAULT_RETRY

    retry = DEFAULT_RETRY.with_timeout(RETRY_SECONDS)
    done = []
    bucket = storage.lookup_bucket(bucket_name, timeout=TIMEOUT, retry=retry)
    if bucket is None:
        bucket = storage.bucket(bucket_name)
        _settings(bucket)
        try:
            bucket = storage.create_bucket(bucket, project=project, location=region, timeout=TIMEOUT, retry=retry)
        except exceptions.Conflict:
            raise StateError(
                f"the bucket name {bucket_name} is taken by another project (bucket names are global); choose "
                f"another: make state-bucket STACK=<stack> BUCKET=<name>, then STATE_BACKEND=gs://<name>"
            ) from None
        done.append(f"created gs://{bucket_name} in {region} (versioned, uniform access, public access prevented)")
    else:
        _settings(bucket)
        bucket.patch(timeout=TIMEOUT, retry=retry)
        done.append(f"gs://{bucket_name} exists; versioning, uniform access and public access prevention set")
    ring = f"projects/{project}/locations/{KEY_LOCATION}/keyRings/{KEY_RING}"
    try:
        kms.get_key_ring(name=ring, timeout=TIMEOUT[1])
    except exceptions.NotFound:
        kms.create_key_ring(
            request={"parent": f"projects/{project}/locations/{KEY_LOCATION}", "key_ring_id": KEY_RING, "key_ring": {}},
            timeout=TIMEOUT[1],
        )
        done.append(f"created the key ring {ring}")
    try:
        kms.get_crypto_key(name=f"{ring}/cryptoKeys/{KEY}", timeout=TIMEOUT[1])
        done.append(f"the key {ring}/cryptoKeys/{KEY} exists")
    except exceptions.NotFound:
        kms.create_crypto_key(
            request={"parent": ring, "crypto_key_id": KEY, "crypto_key": {"purpose": "ENCRYPT_DECRYPT"}},
            timeout=TIMEOUT[1],
        )
        done.append(f"created the key {ring}/cryptoKeys/{KEY} (no rotation: each version bills)")
    return done


def _settings(bucket: Any) -> None:
    bucket.versioning_enabled = True
    bucket.iam_configuration.uniform_bucket_level_access_enabled = True
    bucket.iam_configuration.public_access_prevention = "enforced"
    rules = [rule for rule in bucket.lifecycle_rules if rule.get("condition", {}).get("isLive") is not False]
    bucket.lifecycle_rules = rules
    bucket.add_lifecycle_delete_rule(days_since_noncurrent_time=NONCURRENT_DAYS, is_live=False)
    bucket.labels = {**(bucket.labels or {}), "purpose": "pulumi-state"}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# ---------------------------------------------------------------------------------------------
# The command line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.state", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["select", "create", "locks", "unlock", "releases"])
    parser.add_argument("--stack", required=True)
    parser.add_argument("--current", default="", help="the output of `pulumi whoami --json` (empty: not logged in)")
    parser.add_argument("--backend", default="", help="STATE_BACKEND: the backend URL to use")
    parser.add_argument("--secrets-provider", default="", help="SECRETS_PROVIDER: a new stack's secrets provider")
    parser.add_argument("--local-ok", action="store_true", help="LOCAL_STATE=1: allow a file backend in the checkout")
    parser.add_argument("--bucket", default="", help="create: the bucket's name (default <gcp:project>-pulumi-state)")
    parser.add_argument("--pins", default="", help="releases: a file to write the state's image pins to (JSON)")
    args = parser.parse_args(argv)
    if not args.stack.replace("-", "").replace("_", "").replace(".", "").isalnum():
        print(f"error: {scrub(args.stack, limit=40)!r} is not a stack name", file=sys.stderr)
        return 2
    try:
        if args.command == "select":
            choice = choose(
                args.stack,
                env_url=os.environ.get("PULUMI_BACKEND_URL", ""),
                explicit=args.backend,
                current=current_url(args.current),
                local_ok=args.local_ok,
                secrets_provider=args.secrets_provider,
            )
            print(choice.login, choice.backend, choice.secrets_provider, sep="\n")
            return 0
        if args.command == "create":
            return _create(args.stack, args.bucket)
        if args.command == "releases":
            return _releases(args.stack, args.pins)
        backend = os.environ.get("PULUMI_BACKEND_URL", "") or current_url(args.current)
        locks = read_locks(backend, args.stack)
        hostname = socket.gethostname()
        if args.command == "locks":
            for line in lock_lines(args.stack, locks, hostname, _alive):
                print(line, file=sys.stderr)
            return 1 if locks else 0
        live = [lock for lock in locks if lock.alive_here(hostname, _alive)]
        if live:
            for line in lock_lines(args.stack, live, hostname, _alive):
                print(line, file=sys.stderr)
            return 1
        for lock in locks:
            print(
                f"clearing the lock of {lock.username}@{lock.hostname} (pid {lock.pid or '?'}) since {lock.timestamp}"
            )
        return 0
    except StateError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


def _releases(stack: str, pins: str = "") -> int:
    """`make up`'s look at the state before `pulumi up`: the state's Helm releases on stdout (exit 0); a release the
    state lost while the cluster keeps it, one line (exit 1); a state it cannot read, one warning (exit 3: the
    check is left out, `up` goes on, and Helm's own refusal is what it was before the check). A cluster it cannot
    read is a warning too: the program reads it again before each release's install. ``pins``: a file to write the
    state's image pins to (``pins_in_state``), left empty when the state cannot be read."""
    try:
        export = export_state(stack)
        held = releases_in_state(export)
        if pins:
            Path(pins).write_text(json.dumps(pins_in_state(export), sort_keys=True))
    except StateError as err:
        print(
            f"warning: {err}; `pulumi up` goes on without comparing the cluster's Helm releases with the state",
            file=sys.stderr,
        )
        return 3
    from core.config import ConfigError
    from infra.k8s import live
    from tools.stack_files import load_stack

    try:
        settings = load_stack(stack)[0]
        problem = stranded_release(stack, export, held, platform_releases(settings.kueue.install))
    except (ConfigError, StackFileError):
        problem = None  # `pulumi up` reports the configuration's problems itself
    except live.ClusterReadError as err:
        print(
            f"warning: cannot read the cluster's Helm releases ({err}); `pulumi up` reads them again", file=sys.stderr
        )
        problem = None
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 1
    print(",".join(held))
    return 0


def _create(stack: str, bucket: str) -> int:
    project, region = stack_project(stack)
    name = bucket or state_bucket(project)
    from google.cloud import kms_v1

    from workloads.observe.artifacts import storage_client

    try:
        lines = create(
            project,
            region,
            name,
            storage=storage_client(),
            kms=kms_v1.KeyManagementServiceClient(transport="rest"),
        )
    except StateError:
        raise
    except Exception as err:  # noqa: BLE001 (credentials, permissions, network: one line)
        raise StateError(f"creating the state of project {project}: {scrub(str(err), limit=300)}") from None
    for line in lines:
        print(line)
    print(f"state: gs://{name}  secrets: gcpkms://{key_name(project)}")
    if bucket:
        print(f"use it with STATE_BACKEND=gs://{name} (make up STACK={stack} STATE_BACKEND=gs://{name})")
    return 0


if __name__ == "__main__":
    exit_now(main())
