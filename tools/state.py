"""Where a stack's Pulumi state lives, its bucket and key, and the locks a killed `pulumi` leaves (the Makefile's
one place that decides; docs/state.md "Where the state lives").

    python -m tools.state select   --stack NAME [--access read|write]   the home, for every Pulumi command
    python -m tools.state record   --stack NAME                          write the home into the stack file
    python -m tools.state new      --stack NAME                          before `pulumi stack init`
    python -m tools.state create   --stack NAME [--members M] [--readers R]   make state-bucket
    python -m tools.state move     --stack NAME [--from URL]             make state-move (tools/state_move.py)
    python -m tools.state locks    --stack NAME                          the stack's locks (exit 1 when there is one)
    python -m tools.state unlock   --stack NAME                          refused while a lock's process runs here
    python -m tools.state releases --stack NAME [--pins FILE] [--keys FILE] [--steps FILE]  before `up`

Every command takes ``--backend`` (``STATE_BACKEND``), ``--organization`` (``STATE_ORG``), ``--secrets-provider``
(``SECRETS_PROVIDER``), ``--local-ok`` (``LOCAL_STATE=1``) and ``--allow-passphrase`` (``ALLOW_PASSPHRASE=1``) and
decides the stack's home first (``tools.state_home.decide``), with ``PULUMI_BACKEND_URL`` from the environment: a
conflict is one line, exit 2, nothing written.

``select`` prints three lines: the URL every Pulumi command of the stack gets as ``PULUMI_BACKEND_URL`` (the Makefile
exports it for the recipe; no `pulumi login` ever runs, so the operator's own login and every other project keep
theirs), the secrets provider a new stack is created with (empty: the backend's default), and a Pulumi Cloud home's
organization, which every command gets as ``PULUMI_DEFAULT_ORGANIZATION`` (empty for a self-managed backend); a key
still in the shared key ring of earlier versions is one warning line (a protected stack's is refused). With
``--access`` it tests the permissions the command needs on the stack's bucket and key first (``tools.state_access``;
skipped with ``tpu-rl:workflow.capacityCheck: false``): a missing one is one line, exit 1; a test that cannot be
made, a warning.
``record`` writes ``tpu-rl:stateBackend`` (and a Cloud home's ``tpu-rl:stateOrganization``) into
``Pulumi.<stack>.yaml`` when it records none. ``new`` runs when the stack is not in its home: it refuses (exit 2)
when another backend the project knows holds the stack (``tools.state_lookup``) or when the stack shares its cluster
name, artifacts bucket or Hub cache writer with another stack file of its project (``tools.shared_names``;
``releases`` refuses it too, before every `up` and preview), or (exit 1) when one cannot be asked or the home's
bucket does not exist or cannot be read (a 403 to both ``buckets.get`` and ``objects.list``: it cannot tell). ``locks``,
``unlock``: ``tools.state_locks``. ``releases`` prints the names of the Helm releases the stack's state holds,
comma-separated, from ``pulumi stack export`` (which takes no lock), for ``make up`` to hand the program
(``infra.k8s.manifests.RELEASES_IN_STATE``); when the state holds the cluster but not one of the program's releases
and Helm's storage in that cluster holds it (a destroy whose cluster delete failed), one line naming the command
that clears it and exit 1, before `pulumi up` creates anything; when the state cannot be read, one warning line and
exit 3 (``make up`` then leaves the variable unset: nothing is compared).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any

from core.errors import TpuRlError
from core.redact import scrub
from infra.client_errors import client_errors, translated
from tools.process import entry_point, report
from tools.shared_names import refuse_shared
from tools.stack_files import ROOT, StackFileError
from tools.state_export import (
    StateError,
    export_state,
    keys_in_state,
    pins_in_state,
    platform_releases,
    releases_in_state,
    state_cluster,
    steps_in_state,
    stranded_release,
)
from tools.state_home import STACK_NAME, Home, StateRefusedError, decide, read_stack_file, record, ring_warning
from tools.state_locks import lock_lines, read_locks
from workloads.container.tpu_rl_watch import alive

# google-api-core's notice about Python 3.11's end of life (2027) is not the operator's business on every `make up`.
warnings.filterwarnings("ignore", category=FutureWarning, module=r"google\.api_core\.")
warnings.filterwarnings("ignore", category=FutureWarning, module=r"google\.cloud\.")

COMMANDS = ("select", "record", "new", "create", "move", "locks", "unlock", "releases")


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tools.state", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=COMMANDS)
    parser.add_argument("--stack", required=True)
    parser.add_argument("--backend", default="", help="STATE_BACKEND: the stack's home, when it records none")
    parser.add_argument("--organization", default="", help="STATE_ORG: a Pulumi Cloud home's organization")
    parser.add_argument("--secrets-provider", default="", help="SECRETS_PROVIDER: a new stack's secrets provider")
    parser.add_argument("--local-ok", action="store_true", help="LOCAL_STATE=1: allow a file backend in the checkout")
    parser.add_argument("--allow-passphrase", action="store_true", help="ALLOW_PASSPHRASE=1: for a protected stack")
    parser.add_argument("--access", choices=("read", "write"), default="", help="select: test these permissions")
    parser.add_argument("--members", default="", help="create: MEMBERS, who may run the stack's commands")
    parser.add_argument("--readers", default="", help="create: READERS, who may preview the stack")
    parser.add_argument("--from", dest="source", default="", help="move: FROM, where the stack lives now")
    parser.add_argument("--pins", default="", help="releases: a file to write the state's image pins to (JSON)")
    parser.add_argument("--keys", default="", help="releases: a file to write the state's Cloud KMS keys to")
    parser.add_argument("--steps", default="", help="releases: a file to write the state's version and steps to")
    parser.add_argument("--root", default=str(ROOT), help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def home_of_args(args: argparse.Namespace, *, moving: bool = False) -> Home:
    """The stack's home (``moving``: a key another stack holds, or a passphrase, is what `make state-bucket` and
    `make state-move` end, so neither refuses it)."""
    return decide(
        args.stack,
        Path(args.root),
        env_url=os.environ.get("PULUMI_BACKEND_URL", ""),
        explicit=args.backend,
        secrets_provider=args.secrets_provider,
        local_ok=args.local_ok,
        allow_passphrase=args.allow_passphrase or moving,
        shared_key_ok=moving,
        organization=args.organization,
    )


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    try:
        if not STACK_NAME.fullmatch(args.stack):
            raise StateRefusedError(
                f"{scrub(args.stack, limit=40)!r} is not a stack name (letters, digits, '-', '_', '.')"
            )
        if args.command == "releases":
            refuse_shared(args.stack, Path(args.root))
            return _releases(args.stack, args.pins, args.keys, args.steps)
        if args.command == "move":
            from tools.state_move import move

            return move(home_of_args(args, moving=True), Path(args.root), args.source)
        if args.command == "select":
            home = selected(args)
            print(home.backend, home.secrets_provider, home.organization, sep="\n")
            return 0
        home = home_of_args(args, moving=args.command == "create")
        if args.command == "record":
            record(home, Path(args.root))
            return 0
        if args.command == "new":
            refuse_shared(args.stack, Path(args.root))
            return _new(home, Path(args.root))
        if args.command == "create":
            return _create(home, Path(args.root), args.members, args.readers)
        return _locks(home, args.command)
    except TpuRlError as err:  # a refusal (StateRefusedError) exits 2, a state that cannot be read 1
        return report(err)


def selected(args: argparse.Namespace) -> Home:
    """``select``'s home, as every Pulumi command of the stack gets it (``make``'s recipes, ``tpu-rl pulumi``): decided
    (a refusal: ``StateRefusedError``, exit 2), a key in the shared ring of earlier versions said in one warning line,
    and with ``--access`` the permissions tested (``StateError``, exit 1)."""
    home = home_of_args(args)
    warning = ring_warning(home)
    if warning:
        print(warning, file=sys.stderr)
    if args.access:
        _access(home, args.access, Path(args.root))
    return home


def _access(home: Home, access: str, root: Path) -> None:
    """The permissions check before the command (StateError: one line, exit 1; a warning when it cannot tell)."""
    from tools.state_access import UntestedError, check, clients

    if not read_stack_file(home.stack, root).capacity_check or not (home.bucket or home.key):
        return
    try:
        storage, kms = clients()
        problem = check(home, access, storage=storage, kms=kms)
    except UntestedError as err:
        print(
            f"warning: cannot test your permissions on stack {home.stack}'s state ({err}); pulumi goes on",
            file=sys.stderr,
        )
        return
    except client_errors() as err:  # credentials: a warning; pulumi meets the same and says so
        print(
            f"warning: cannot test your permissions on stack {home.stack}'s state ({_why(err)}); pulumi goes on",
            file=sys.stderr,
        )
        return
    if problem:
        raise StateError(problem)


def _why(err: Exception) -> str:
    """A failure to reach Google as one short clause (no credentials is the usual one)."""
    if type(err).__name__ == "DefaultCredentialsError":
        return "no Google credentials: gcloud auth application-default login"
    return scrub(str(err), limit=160)


def _new(home: Home, root: Path) -> int:
    """Before `pulumi stack init`: the stack in no other backend the project knows, and its home's bucket there."""
    from tools.state_lookup import found_elsewhere, known

    lookup = known(home, root)
    for warning in lookup.warnings:
        print(warning, file=sys.stderr)
    buckets = home.bucket or any(k.url.startswith("gs://") for k in lookup.backends)
    storage = _storage() if buckets else None
    found, failures = found_elsewhere(home, lookup, storage)
    if found is not None:
        move = f"make state-move STACK={home.stack} FROM={found.url}"
        record = f"make stack STACK={home.stack} STATE_BACKEND={found.url}"
        fix = found.fix or (
            move if home.origin == "recorded" else f"record where it lives ({record}), or move it to its home ({move})"
        )
        raise StateRefusedError(
            f"stack {home.stack} already exists in {found.url}, {found.why}; creating it again in {home.backend} "
            f"would make a second, empty stack whose `up` creates everything again beside the first: {fix} "
            "(docs/state.md#where-the-state-lives)"
        )
    if failures:
        raise StateError(
            f"cannot tell whether stack {home.stack} already exists elsewhere: {failures[0]}; run it again when that "
            "backend answers (or log out of a backend the stack cannot be in: pulumi logout <url>)"
        )
    if home.bucket and storage is not None and not _bucket_exists(storage, home.bucket, home.stack):
        raise StateError(
            f"stack {home.stack}'s state bucket gs://{home.bucket} does not exist: create it, with its key, once: "
            f"make state-bucket STACK={home.stack}"
        )
    return 0


def _storage() -> Any:
    """A storage client, or None when there are no credentials (a gs:// backend is then not looked in)."""
    try:
        from workloads.observe.artifacts import storage_client

        return storage_client()
    except client_errors(ValueError):  # no credentials (or a bad emulator URL): the lookups fail one by one
        return None


def _bucket_exists(storage: Any, bucket: str, stack: str) -> bool:
    """Whether the home's bucket exists: ``buckets.get``, else (an account with object roles alone, a deploy
    account's, may not get the bucket) a one-object ``objects.list``. When neither may be asked it cannot tell, as
    Cloud Storage answers 403 for a bucket that does not exist too (the name may be another project's): StateError,
    exit 1, and nothing is created."""
    from google.api_core import exceptions

    try:
        return storage.lookup_bucket(bucket, timeout=(5.0, 20.0)) is not None
    except exceptions.Forbidden:
        pass
    except client_errors() as err:
        raise translated(err, f"reading gs://{bucket}", StateError, "GCS") from None
    try:
        list(storage.list_blobs(bucket, max_results=1, timeout=(5.0, 20.0)))
        return True
    except exceptions.NotFound:
        return False
    except exceptions.Forbidden:
        raise StateError(
            f"cannot tell whether stack {stack}'s state bucket gs://{bucket} exists: this account may neither get it "
            "nor list its objects (HTTP 403); the stack's commands need roles/storage.objectUser on it, which whoever "
            f"administers the state grants: make state-bucket STACK={stack} MEMBERS=user:YOU"
        ) from None
    except client_errors() as err:
        raise translated(err, f"listing gs://{bucket}", StateError, "GCS") from None


def _create(home: Home, root: Path, members: str, readers: str) -> int:
    """`make state-bucket`: the project's permissions first, then ``tools.state_bucket.create`` for the caller, the
    stack file's ``tpu-rl:access`` and ``MEMBERS``/``READERS``, then the home and those not in ``tpu-rl:access`` yet
    recorded in the stack file."""
    from tools import stack_access
    from tools.state_bucket import caller_of, create, parse_members, project_number, setup_missing

    named = parse_members(members, "MEMBERS")
    viewers = parse_members(readers, "READERS")
    access = stack_access.declared(home.stack, root)  # its problems: a line each, exit 2
    writers = tuple(dict.fromkeys([*access.members, *named]))
    everyone = tuple(dict.fromkeys([*access.readers, *viewers]))
    if not home.bucket:
        create(home, writers=writers, readers=everyone, storage=None, kms=None, services=None)
    credentials = _credentials()
    caller = caller_of(credentials)
    named = tuple(dict.fromkeys([*([caller] if caller else []), *named]))
    writers = tuple(dict.fromkeys([*named, *writers]))
    storage, kms, services, projects = _admin_clients(credentials, home.project)
    _setup_permissions(home, projects, setup_missing)
    number = project_number(projects, home.project)
    try:
        lines = create(
            home, writers=writers, readers=everyone, storage=storage, kms=kms, services=services, project_number=number
        )
    except client_errors() as err:
        raise translated(err, f"make state-bucket STACK={home.stack}", StateError) from None
    for line in lines:
        print(line)
    record(home, root)
    stack_access.record(home.stack, root, access, named, viewers)
    return 0


def _credentials() -> Any:
    """Application Default Credentials, refreshed (a user's ID token names the caller); StateError without."""
    try:
        import google.auth
        from google.auth.transport.requests import Request

        credentials, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
        credentials.refresh(Request())
    except client_errors() as err:
        raise translated(err, "make state-bucket (it needs Google credentials)", StateError) from None
    return credentials


def _admin_clients(credentials: Any, project: str) -> tuple[Any, Any, Any, Any]:
    """Storage, Cloud KMS, Service Usage and Resource Manager (``projects.testIamPermissions`` and ``projects.get``)
    clients, every reply through the one bounded read."""
    from google.cloud import kms_v1, service_usage_v1, storage

    from infra.gcp.capacity.reads import cap_replies
    from tools.state_bucket import ProjectRecord
    from workloads.observe.artifacts import capped

    kms = kms_v1.KeyManagementServiceClient(transport="rest", credentials=credentials)
    services = service_usage_v1.ServiceUsageClient(transport="rest", credentials=credentials)
    permissions = ProjectRecord(credentials=credentials)
    clients: tuple[Any, ...] = (kms, services, permissions)
    for client in clients:
        cap_replies(client.transport._session)
    return capped(storage.Client(project=project, credentials=credentials)), kms, services, permissions


def _setup_permissions(home: Home, permissions: Any, setup_missing: Any) -> None:
    """What `make state-bucket` needs in the project, asked of Resource Manager before anything is made."""
    from infra.gcp.permissions import STATE_SETUP

    wanted = [p for grant in STATE_SETUP for p in grant.permissions]
    try:
        held = permissions.test(home.project, wanted, {"timeout": 20.0, "retry": lambda f: f})
    except client_errors() as err:  # the API off, no answer: a warning
        print(f"warning: cannot test your permissions in project {home.project} ({_why(err)})", file=sys.stderr)
        return
    problem = setup_missing(home.project, held)
    if problem:
        raise StateError(problem)


def _locks(home: Home, command: str) -> int:
    import socket  # here: only the lock commands ask for the host's name

    locks = read_locks(home.backend, home.stack)
    hostname = socket.gethostname()
    if command == "locks":
        for line in lock_lines(home.stack, locks, hostname, alive):
            print(line, file=sys.stderr)
        return 1 if locks else 0
    live = [lock for lock in locks if lock.alive_here(hostname, alive)]
    if live:
        for line in lock_lines(home.stack, live, hostname, alive):
            print(line, file=sys.stderr)
        return 1
    for lock in locks:
        print(f"clearing the lock of {lock.username}@{lock.hostname} (pid {lock.pid or '?'}) since {lock.timestamp}")
    return 0


def _releases(stack: str, pins: str = "", keys: str = "", steps: str = "") -> int:
    """`make up`'s look at the state before `pulumi up`: the state's Helm releases on stdout (exit 0); a release the
    state lost while the cluster keeps it, one line (exit 1); a state it cannot read, one warning (exit 3: the
    check is left out, `up` goes on, and Helm's own refusal stands). A cluster it cannot
    read is a warning too: the program reads it again before each release's install. ``pins``: a file to write the
    state's image pins to (``pins_in_state``), ``keys``: a file to write the Cloud KMS keys the state holds to,
    comma-separated (``keys_in_state``, for ``core.names.KEYS_IN_STATE``), ``steps``: a file to write the
    version that wrote the state and its steps' names to (``steps_in_state``, for ``core.version.STEPS_IN_STATE``);
    each left empty when the state cannot be read."""
    try:
        export = export_state(stack)
        held = releases_in_state(export)
        if pins:
            Path(pins).write_text(json.dumps(pins_in_state(export), sort_keys=True))
        if keys:
            Path(keys).write_text(",".join(keys_in_state(export)))
        if steps:
            Path(steps).write_text(json.dumps(steps_in_state(export), sort_keys=True))
    except StateError as err:
        said = f"{err}; `pulumi up` goes on without comparing the cluster's Helm releases with the state"
        report(StateError(said), prefix="warning")
        return 3
    problem = None if state_cluster(export) is None else _stranded(stack, export, held)
    if problem:
        report(StateError(problem))  # the state's and the cluster's names: scrubbed as every error line is
        return 1
    print(",".join(held))
    return 0


def _stranded(stack: str, export: str, held: list[str]) -> str | None:
    """``stranded_release`` for the stack's settings (None: the configuration cannot be read, which `pulumi up`
    reports itself, or the cluster cannot be read, a warning). Only a state that holds a cluster gets here: without
    one no release can be stranded, and the settings are not loaded."""
    from core.config import ConfigError
    from infra.k8s import live  # which stranded_release reads the cluster with
    from tools.stack_files import load_stack

    try:
        settings = load_stack(stack)[0]
        releases = platform_releases(settings.kueue.install)
        return stranded_release(stack, export, held, releases, context=settings.kube_context)
    except (ConfigError, StackFileError):
        return None
    except live.ClusterReadError as err:
        report(
            StateError(f"cannot read the cluster's Helm releases ({err}); `pulumi up` reads them again"),
            prefix="warning",
        )
        return None


if __name__ == "__main__":
    entry_point(main)
