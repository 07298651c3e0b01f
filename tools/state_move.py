"""`make state-move STACK=<stack> [FROM=<url>]`: move a stack into its own home, key and key ring.

For a stack still in a backend it shares (by default the project's shared bucket of earlier versions,
``gs://<gcp:project>-pulumi-state``; ``FROM=`` names another self-managed one, such as ``.pulumi-state/`` of an old
checkout), or whose secrets are still encrypted by a key it shares: the project's shared key of earlier versions, or
its own key in the key ring every stack's key shared (``keyRings/pulumi-state/cryptoKeys/tpu-rl-<stack>``), whose
IAM policy every key in it inherits. ``make state-bucket`` first: the stack's bucket, ring and key must exist. Then,
each Pulumi command given its backend by ``PULUMI_BACKEND_URL`` (and a Pulumi Cloud home's organization by
``PULUMI_DEFAULT_ORGANIZATION``), as the Makefile gives them:

1. the stack must be in ``FROM`` or its home (nowhere: nothing to move), with no lock in ``FROM``;
2. ``pulumi stack export`` from ``FROM`` (ciphertext only; the file is in a private temporary folder, removed at the
   end), ``pulumi stack init`` in the home with the provider the stack file names, so that its wrapped data key is
   kept (pulumi/pulumi ``pkg/secrets/cloud/manager.go`` ``NewCloudSecretsManager`` makes a new data key, losing
   every ``secure:`` value of the file, when the provider differs), ``pulumi stack import``, and the home's export
   compared with ``FROM``'s: the same resources by URN;
3. ``pulumi stack change-secrets-provider`` to the stack's own key in its own ring, which re-encrypts the file's
   secrets and the state's and writes the new ``secretsprovider`` and ``encryptedkey`` into the stack file
   (``pkg/cmd/pulumi/stack/stack_change_secrets_provider.go`` ``Run``,
   ``migrateOldConfigAndCheckpointToNewSecretsProvider``: ``SaveProjectStack``, then the checkpoint re-imported);
   the file is read back: its provider must be that key;
4. ``pulumi stack rm --force --preserve-config`` in ``FROM``: no second copy stays for an old checkout to update
   (the diy backend keeps ``<stack>.json.bak`` and the backups: pkg/backend/diy/state.go ``removeStack``);
5. ``tpu-rl:stateBackend`` (and a Cloud home's ``tpu-rl:stateOrganization``) recorded in the stack file, a home in
   the shared bucket it records replaced by the stack's own (``tools.state_home.record``: that one line rewritten);
6. the grants of the state's key roles taken off the stack's old key in the shared ring
   (``tools.state_grants.release_old_key``), each removed member and every binding left named; the project's
   shared key is left as it is (other stacks may still use it).

Run again after a failure, it goes on from where it stopped: a stack in both backends with the same resources is a
copy already made, and the old key's grants are looked at again. Anyone who could decrypt the old key could read the
stack's secrets: rotate them (the last line says which).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core.names import PROJECT
from core.printed_commands import pulumi_command, pulumi_config_set
from core.redact import scrub
from core.state_names import is_legacy_key, legacy_bucket, shared_ring_key
from infra.client_errors import client_errors, exit_code_of
from tools.state_export import StateError
from tools.state_home import (
    Home,
    StateRefusedError,
    is_cloud,
    is_legacy_home,
    kms_key,
    read_stack_file,
    record,
    same,
    target_key,
)
from tools.state_locks import read_locks
from tools.state_lookup import holds_stack

COMMAND_TIMEOUT = 600.0
"""How long one Pulumi command of the move may take, in seconds."""
MOVE_HELP = "docs/state.md#moving-a-stack-to-a-home-of-its-own"


def pulumi(args: list[str], backend: str, run: Callable[..., Any] = subprocess.run, organization: str = "") -> str:
    """``pulumi <args>`` with ``PULUMI_BACKEND_URL=<backend>`` (and a Cloud home's ``PULUMI_DEFAULT_ORGANIZATION``,
    as the Makefile runs every command); its stdout, or StateError with its error line."""
    env = {**os.environ, "PULUMI_BACKEND_URL": backend}
    if organization:
        env["PULUMI_DEFAULT_ORGANIZATION"] = organization
    try:
        done = run(["pulumi", *args], env=env, capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise StateError(f"`pulumi {' '.join(args[:3])}` ({backend}): {scrub(str(err), limit=160)}") from None
    if done.returncode != 0:
        said = scrub(" ".join((done.stderr or "").split()), limit=240)
        raise StateError(f"`pulumi {' '.join(args[:3])}` in {backend} failed: {said}")
    return str(done.stdout or "")


def urns(export: str, where: str) -> list[str]:
    """The resources' URNs of a `pulumi stack export` (a new stack's deployment is null: none)."""
    try:
        deployment = (json.loads(export) or {}).get("deployment") or {}
    except (json.JSONDecodeError, AttributeError):
        raise StateError(f"the export of {where} is no deployment") from None
    return sorted(str(r.get("urn")) for r in deployment.get("resources") or [] if isinstance(r, dict))


def move(
    home: Home,
    root: Path,
    source: str = "",
    *,
    storage: Any = None,
    kms: Any = None,
    run: Callable[..., Any] = subprocess.run,
    out: Any = None,
) -> int:
    """The move of the module's docstring; the lines saying what was done on ``out`` (stdout)."""
    out = out or sys.stdout
    given = bool(source)
    if not given and home.project:  # the shared bucket of earlier versions, or the folder of it the file records
        recorded = read_stack_file(home.stack, root).recorded
        source = recorded if is_legacy_home(home.project, recorded) else f"gs://{legacy_bucket(home.project)}"
    source = source.rstrip("/")
    if not source or same(source, home.backend) or is_cloud(source):
        raise StateRefusedError(
            f"FROM={source or '(none)'} is no backend to move stack {home.stack} from: name the self-managed backend "
            f"it lives in now (gs://... or file://...), not its home {home.backend} ({MOVE_HELP})"
        )
    own = read_stack_file(home.stack, root)
    if not home.project:
        raise StateRefusedError(f"{own.name} has no gcp:project of yours: the stack's key is in that project")
    target = f"gcpkms://{target_key(home)}"
    storage = storage if storage is not None else _storage(home.backend, source)
    in_home = holds_stack(home.backend, home.stack, storage, run)
    in_source = holds_stack(source, home.stack, storage, run)
    done = []
    if in_source is None and in_home and not given:
        in_source = False  # the shared bucket of earlier versions, unreadable here: only the key moves
        done.append(
            f"could not read {source} (no storage.objects.list there): the stack is in its home, so only its key moves"
        )
    for url, found in ((source, in_source), (home.backend, in_home)):
        if found is None:
            raise StateError(f"cannot read {url} (no storage.objects.list there): nothing was moved ({MOVE_HELP})")
    if not in_source and not in_home:
        raise StateRefusedError(
            f"stack {home.stack} is in neither {source} nor its home {home.backend}: nothing to move"
        )
    if in_source and read_locks(source, home.stack):
        raise StateError(
            f"stack {home.stack} is locked in {source}: a `pulumi` may still be working on it there; once none is, "
            f"`{pulumi_command(home.stack, 'cancel', '--yes', url=source)}` clears it ({MOVE_HELP})"
        )
    before = kms_key(own.secrets_provider)
    if in_source:
        done += _copy(home, own.secrets_provider or ("passphrase" if own.salt else ""), source, bool(in_home), run)
    done += _rekey(home, root, target, run)
    if in_source:
        pulumi(["stack", "rm", home.stack, "--yes", "--force", "--preserve-config"], source, run)
        done.append(f"removed the copy in {source} (its backups stay there, as the bucket's older versions do)")
    for line in done:
        print(line, file=out)
    record(home, root, rewrite=True)
    _release(home, kms, kms_of(target), before, out)
    rotate = [pulumi_config_set(home.stack, f"{PROJECT}:{key}", secret=True) for key in ("hfToken", "hfWriteToken")]
    print(
        f"stack {home.stack} lives in {home.backend}, its secrets encrypted by {target}: commit {own.name}, and "
        f"rotate the secrets every holder of the old key could read ({PROJECT}:hfToken, {PROJECT}:hfWriteToken: "
        f"`{rotate[0]}`, `{rotate[1]}`)",
        file=out,
    )
    return 0


def _rekey(home: Home, root: Path, target: str, run: Callable[..., Any]) -> list[str]:
    """`pulumi stack change-secrets-provider` to the stack's own key when its file names another, then the file
    read back as the CLI wrote it."""
    if kms_of(read_stack_file(home.stack, root).secrets_provider) == kms_of(target):
        return []
    pulumi(["stack", "change-secrets-provider", "--stack", home.stack, target], home.backend, run, home.organization)
    written = read_stack_file(home.stack, root).secrets_provider
    if kms_of(written) != kms_of(target):
        raise StateError(
            f"`pulumi stack change-secrets-provider` ran, but Pulumi.{home.stack}.yaml's secretsprovider is "
            f"{written or '(none)'}, not {target}: run make state-move STACK={home.stack} again from the checkout "
            f"that holds the stack file ({MOVE_HELP})"
        )
    return [f"re-encrypted stack {home.stack}'s secrets (its file's and its state's) with {target}"]


def _release(home: Home, kms: Any, new: str, before: str, out: Any) -> None:
    """The grants of the state's key roles taken off the stack's old key in the shared ring; the project's shared
    key named, left as it is. StateError (exit 1, the move itself done) when the old key cannot be read."""
    from tools.state_grants import release_old_key

    old = shared_ring_key(home.project, home.stack)
    try:
        lines = release_old_key(kms if kms is not None else _kms(), old, new, home.stack)
    except client_errors() as err:
        raise StateError(
            f"stack {home.stack} moved, but its old key {old} could not be read to take the state's grants off it "
            f"({scrub(str(err), limit=160)}): run make state-move STACK={home.stack} again ({MOVE_HELP})",
            exit_code=exit_code_of(err),
        ) from None
    if before and is_legacy_key(before):
        lines.append(
            f"the key {before}: left as it is, the project's shared key of earlier versions, which other stacks may "
            "still use; once none does, take its grants away (gcloud kms keys remove-iam-policy-binding)"
        )
    for line in lines:
        print(line, file=out)


def kms_of(provider: str) -> str:
    return provider.removeprefix("gcpkms://").split("?", 1)[0].strip("/")


def _copy(home: Home, provider: str, source: str, in_home: bool, run: Callable[..., Any]) -> list[str]:
    """Export from ``source``, import into the home (unless an earlier run did), and compare the two."""
    export = pulumi(["stack", "export", "--stack", home.stack], source, run)
    wanted = urns(export, source)
    if in_home:
        there = urns(pulumi(["stack", "export", "--stack", home.stack], home.backend, run), home.backend)
        if there != wanted:
            raise StateError(
                f"stack {home.stack} is in both {source} ({len(wanted)} resources) and its home {home.backend} "
                f"({len(there)}), with different resources: keep the one `up` last wrote, remove the other with "
                f"`PULUMI_BACKEND_URL=<it> pulumi stack rm {home.stack} --force --preserve-config` ({MOVE_HELP})"
            )
        return [f"stack {home.stack} was already copied to {home.backend}"]
    with tempfile.TemporaryDirectory(prefix="tpu-rl-move-") as folder:
        path = Path(folder) / f"{home.stack}.json"
        path.write_text(export)
        path.chmod(0o600)
        init = ["stack", "init", home.stack] + ([f"--secrets-provider={provider}"] if provider else [])
        pulumi(init, home.backend, run)
        pulumi(["stack", "import", "--stack", home.stack, "--file", str(path)], home.backend, run)
    there = urns(pulumi(["stack", "export", "--stack", home.stack], home.backend, run), home.backend)
    if there != wanted:
        raise StateError(
            f"the import into {home.backend} holds {len(there)} resources, not the {len(wanted)} of {source}: "
            f"nothing was removed from {source}; compare the two exports before going on ({MOVE_HELP})"
        )
    return [f"copied stack {home.stack} from {source} to {home.backend} ({len(wanted)} resources)"]


def _storage(*urls: str) -> Any:
    if not any(u.startswith("gs://") for u in urls):
        return None
    from workloads.observe.artifacts import storage_client

    return storage_client()


def _kms() -> Any:
    """A Cloud KMS client (REST, every reply through the one bounded read), for the old key's grants."""
    from google.cloud import kms_v1

    from infra.gcp.capacity.reads import cap_replies

    kms: Any = kms_v1.KeyManagementServiceClient(transport="rest")
    cap_replies(kms.transport._session)
    return kms
