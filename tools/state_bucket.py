"""`make state-bucket STACK=<stack>`: the stack's own state bucket and secrets key, and who may use them.

In order, each step safe to run again:

1. the permissions it needs in the project (``infra.gcp.permissions.STATE_SETUP``), asked of Resource Manager
   (``projects.testIamPermissions``): a missing one stops it before anything is made;
2. the Cloud Storage and Cloud KMS APIs, enabled when they are not (Service Usage ``services.get`` and
   ``services.enable``, google-cloud-service-usage; the operation waited for, bounded);
3. the bucket, made or brought to its settings: versioned (older checkpoints kept 90 days), uniform bucket-level
   access, public access prevention enforced, labelled with its stack. Refused before anything changes: a bucket of
   the name in another project (its ``projectNumber`` against the project's, Resource Manager ``projects.get``:
   bucket names are global and this one is predictable), one another stack's label names or that holds another
   stack's state, and for a home in a folder of the bucket (``gs://bucket/folder``), a bucket holding anything
   outside that folder (the grants are on the bucket, so they would reach it); a bucket this account may not read
   (403) is one line saying it cannot tell;
4. the stack's key ring ``pulumi-state-<stack>`` (global) and its key ``state`` (``ENCRYPT_DECRYPT``, no rotation:
   each version bills and a wrapped data key needs only the version that wrapped it), labelled with its stack: a ring
   of its own, as a grant on a ring reaches every key in it; another stack's key is refused;
5. the IAM policy of the bucket and of the key, set here: every project convenience member (``projectOwner:``,
   ``projectEditor:``, ``projectViewer:``, which the default bucket policy grants) and every public member
   (``allUsers``, ``allAuthenticatedUsers``) removed from every binding; the writers (the caller, the stack file's
   ``tpu-rl:access.members`` and ``MEMBERS``: ``tools/state.py``) get ``roles/storage.objectUser`` on the bucket and
   ``roles/cloudkms.cryptoKeyEncrypterDecrypter`` on the key, the readers (``tpu-rl:access.readers`` and
   ``READERS``, a preview's account) ``roles/storage.objectViewer`` and ``roles/cloudkms.cryptoKeyDecrypter``;
   members already granted on purpose stay (remove one with gcloud);
6. the check: both policies read back (no convenience or public member, each named member in its role), and the
   caller's own permissions tested on the bucket and the key (``tools.state_access``), waited for while IAM
   propagates, bounded.

Project-level grants (a project's ``roles/storage.objectViewer``, ``roles/viewer``'s convenience access is gone
with the binding) still reach every bucket of the project: docs/permissions.md says which not to grant.
"""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from core.config.formats import IAM_MEMBER
from core.names import PROJECT
from core.redact import scrub
from core.state_names import legacy_bucket, ring_of
from infra.client_errors import client_errors, exit_code_of
from infra.gcp.capacity.reads import ProjectPermissions
from infra.gcp.permissions import STATE_SETUP, state_role
from tools.state_access import check as check_access
from tools.state_export import StateError
from tools.state_grants import STACK_LABEL, bucket_policy, key_policy, label
from tools.state_home import Home, StateRefusedError, target_key
from tools.state_lookup import STACKS, listed, stacks

APIS = ("storage.googleapis.com", "cloudkms.googleapis.com")
NONCURRENT_DAYS = 90
"""A checkpoint's older versions are kept this long after a newer one replaced them (a lifecycle rule)."""
TIMEOUT = (5.0, 20.0)
"""Connect and read timeout of every request, in seconds."""
RETRY_SECONDS = 30.0
"""How long the GCS library retries a transient failure of one call (its default: 120 s)."""
ENABLE_SECONDS = 180.0
"""How long enabling an API may take (Service Usage's operation), in seconds."""
PROPAGATION_SECONDS = 120.0
"""How long the check waits for a new grant to reach the caller ("usually within 60 seconds", at most about
7 minutes: https://cloud.google.com/iam/docs/access-change-propagation), then says to run it again."""
WAIT_SECONDS = 10.0


def parse_members(text: str, name: str) -> tuple[str, ...]:
    """``MEMBERS``/``READERS``: comma-separated IAM members (``IAM_MEMBER``, the grammar of ``tpu-rl:access``);
    StateRefusedError (exit 2) naming one that is not an account, group, domain or principal (a convenience or public
    member above all)."""
    members = tuple(dict.fromkeys(m.strip() for m in text.split(",") if m.strip()))
    for member in members:
        if not IAM_MEMBER.matches(member):
            raise StateRefusedError(
                f"{name} names {scrub(member, limit=80)!r}, which is no account, group, domain or principal (e.g. "
                "user:ops@example.com, serviceAccount:deploy-prod@PROJECT.iam.gserviceaccount.com); project and "
                "public members are never granted a stack's state"
            )
    return members


def caller_of(credentials: Any) -> str | None:
    """The IAM member of the credentials `make` runs with: a service account's email (a key, impersonation, the
    metadata server once refreshed, Workload Identity Federation with impersonation), else the ``email`` claim of
    the ID token Google's token endpoint gave a user's Application Default Credentials (gcloud asks for the
    ``openid`` and ``userinfo.email`` scopes); None when neither says."""
    email = getattr(credentials, "service_account_email", None)
    if isinstance(email, str) and "@" in email:
        return f"serviceAccount:{email}"
    token = getattr(credentials, "id_token", None)
    if isinstance(token, str) and token.count(".") == 2:
        payload = token.split(".")[1]
        try:
            claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        except (ValueError, UnicodeDecodeError):
            return None
        email = claims.get("email") if isinstance(claims, dict) else None
        if isinstance(email, str) and "@" in email:
            return f"user:{email}"
    return None


# ---------------------------------------------------------------------------------------------
# 1-2. The project: permissions, APIs


def setup_missing(project: str, held: Iterable[str]) -> str | None:
    """One line naming every permission of ``STATE_SETUP`` not in ``held``, by its role; None when none is."""
    have = set(held)
    by_role = {g.role: [p for p in g.permissions if p not in have] for g in STATE_SETUP}
    by_role = {role: missing for role, missing in by_role.items() if missing}
    if not by_role:
        return None
    roles = "; ".join(f"{role}: {', '.join(missing)}" for role, missing in by_role.items())
    return (
        f"the account running `make state-bucket` lacks, in project {project}: {roles}; grant it those roles "
        f"(docs/permissions.md#each-stacks-state), e.g. gcloud projects add-iam-policy-binding {project} "
        f"--member=user:YOU --role={next(iter(by_role))}"
    )


class ProjectRecord(ProjectPermissions):
    """Resource Manager's ``projects.testIamPermissions`` and ``projects.get`` (v3, REST,
    https://cloud.google.com/resource-manager/reference/rest/v3/projects/get): the project's ``name`` is
    ``projects/<number>``, the number a bucket's ``projectNumber`` names its project by."""

    def number(self, project: str, options: dict[str, Any]) -> str:
        """The project number of ``project`` (retried and bounded as every read)."""
        from google.api_core import exceptions as api

        def once() -> str:
            response = self._session.get(f"{self.url}/v3/projects/{project}", timeout=options["timeout"])
            if response.status_code >= 400:
                raise api.from_http_response(response)
            name = json.loads(response.content).get("name")
            if not isinstance(name, str) or not re.fullmatch(r"projects/[0-9]{1,20}", name):
                raise StateError(f"Resource Manager's project {project} has no number in its name ({name!r})")
            return name.removeprefix("projects/")

        return str(options["retry"](once)())


def project_number(projects: Any, project: str) -> str:
    """The project's number, or StateError (one line): without it, no bucket of the stack's name can be told to be
    the project's."""
    try:
        return str(projects.number(project, {"timeout": TIMEOUT[1], "retry": lambda f: f}))
    except client_errors() as err:
        raise StateError(
            f"cannot read project {project}'s number (Resource Manager projects.get, resourcemanager.projects.get: "
            f"roles/browser), so no bucket can be told to be the project's: {said(err)}",
            exit_code=exit_code_of(err),
        ) from None


def said(err: Exception) -> str:
    """What a Google API's error body says (its first ``errors[].message``), without the request's URL."""
    errors = getattr(err, "errors", None) or []
    first = errors[0] if errors and isinstance(errors[0], dict) else {}
    message = first.get("message") if isinstance(first.get("message"), str) else None
    code = getattr(err, "code", None)
    return scrub(f"{code} {message}" if message and code else message or str(err), limit=160)


def disabled_apis(services: Any, project: str) -> list[str]:
    """The APIs of ``APIS`` not enabled in ``project`` (a read: nothing changes)."""
    from google.cloud import service_usage_v1

    off = []
    for api in APIS:
        service = services.get_service(request={"name": f"projects/{project}/services/{api}"}, timeout=TIMEOUT[1])
        if service.state != service_usage_v1.State.ENABLED:
            off.append(api)
    return off


def enable_apis(services: Any, project: str, apis: list[str]) -> list[str]:
    """Enable ``apis``, each operation waited for (bounded); the lines saying which."""
    for api in apis:
        name = f"projects/{project}/services/{api}"
        services.enable_service(request={"name": name}, timeout=TIMEOUT[1]).result(timeout=ENABLE_SECONDS)
    return [f"enabled {api} in project {project}" for api in apis]


# ---------------------------------------------------------------------------------------------
# 3-4. The bucket and the key


def other_stacks(names: Iterable[str], stack: str) -> list[str]:
    """The stacks other than ``stack`` of this project whose state ``names`` hold (any project's, by
    ``<project>/<stack>``; the legacy layout's by name)."""
    return sorted(
        (s if p in ("", PROJECT) else f"{p}/{s}") for p, s in stacks(names) if not (p in ("", PROJECT) and s == stack)
    )


def inspect_bucket(storage: Any, home: Home, number: str | None) -> Any:
    """The stack's bucket as it is (None: there is none); StateRefusedError when it is another project's (``number``:
    the stack's project's), another stack's label names it, it holds another stack's state, or (a home in a folder)
    it holds anything outside that folder; StateError when it cannot be read."""
    from google.api_core import exceptions
    from google.cloud.storage.retry import DEFAULT_RETRY

    name = home.bucket
    elsewhere = _elsewhere(home)
    try:
        bucket = storage.lookup_bucket(name, timeout=TIMEOUT, retry=DEFAULT_RETRY.with_timeout(RETRY_SECONDS))
    except exceptions.Forbidden as err:
        raise StateError(
            f"cannot tell whether gs://{name} is stack {home.stack}'s: this account may not read the bucket "
            f"({said(err)}); if it is another project's (bucket names are global), {elsewhere}; "
            f"if it is project {home.project}'s, grant the account roles/storage.admin there and run it again"
        ) from None
    if bucket is None:
        return None
    if number is None:
        raise StateError(
            f"cannot tell whether gs://{name} is project {home.project}'s: the project's number was not read, so its "
            f"bucket of that name is not adopted; run make state-bucket STACK={home.stack}, which reads it"
        )
    if str(bucket.project_number) != number:
        raise StateRefusedError(
            f"gs://{name} is the bucket of another project (number {bucket.project_number}, not project "
            f"{home.project}'s {number}): bucket names are global and this one is predictable, so it is never "
            f"adopted; {elsewhere}"
        )
    owner = (bucket.labels or {}).get(STACK_LABEL)
    if owner and owner != label(home.stack):
        raise StateRefusedError(
            f"gs://{name} is stack {owner}'s state bucket (its label {STACK_LABEL}): keep stack {home.stack} in a "
            "bucket of its own (docs/state.md#where-the-state-lives)"
        )
    others = other_stacks(listed(home.backend, storage) or [], home.stack)
    if others:
        shared = " (the project's shared bucket of earlier versions)" if name == legacy_bucket(home.project) else ""
        raise StateRefusedError(
            f"gs://{name}{shared} holds the state of stack{'s' if len(others) > 1 else ''} {', '.join(others)} too: "
            "whoever may read one stack's "
            f"state there reads the other's; keep stack {home.stack} in a bucket of its own "
            f"(docs/state.md#moving-a-stack-to-a-home-of-its-own)"
        )
    stray = outside(storage, name, home.prefix) if home.prefix else None
    if stray is not None:
        raise StateRefusedError(
            f"gs://{name} holds {stray}, outside stack {home.stack}'s folder {home.prefix}/: the grants on the "
            "bucket would reach it, and whoever is granted on the bucket for it reaches the state; keep stack "
            f"{home.stack} in a bucket that holds nothing else: {elsewhere}"
        )
    return bucket


def _elsewhere(home: Home) -> str:
    """How to give the stack another bucket."""
    if home.origin == "recorded":
        return f"name one of the project's own in Pulumi.{home.stack}.yaml ({PROJECT}:stateBackend)"
    return f"name one of the project's own: make state-bucket STACK={home.stack} STATE_BACKEND=gs://<bucket>"


def outside(storage: Any, bucket: str, prefix: str) -> str | None:
    """An object or folder of ``bucket`` outside the folder ``prefix`` (None: nothing), read level by level down the
    folder's path (``objects.list`` with ``delimiter="/"``: the objects and the folders, ``prefixes``, of a level)."""
    parts = prefix.strip("/").split("/")
    for depth in range(len(parts)):
        level = "".join(f"{part}/" for part in parts[:depth])
        inside = f"{level}{parts[depth]}/"
        listing = storage.list_blobs(bucket, prefix=level, delimiter="/", timeout=TIMEOUT, max_results=100)
        for blob in listing:
            if blob.name != level:
                return f"gs://{bucket}/{blob.name}"
        stray = sorted(p for p in listing.prefixes if p != inside)
        if stray:
            return f"gs://{bucket}/{stray[0]}"
    return None


def make_bucket(storage: Any, home: Home, bucket: Any) -> list[str]:
    """Make the stack's bucket, or bring ``bucket`` (it, as it is) to its settings; StateRefusedError (nothing made)
    when its name is taken by another project."""
    from google.api_core import exceptions
    from google.cloud.storage.retry import DEFAULT_RETRY

    retry = DEFAULT_RETRY.with_timeout(RETRY_SECONDS)
    name = home.bucket
    if bucket is not None:
        _settings(bucket, home.stack)
        bucket.patch(timeout=TIMEOUT, retry=retry)
        return [f"gs://{name} exists; versioning, uniform access, public access prevention and its label set"]
    bucket = storage.bucket(name)
    _settings(bucket, home.stack)
    try:
        storage.create_bucket(bucket, project=home.project, location=home.region, timeout=TIMEOUT, retry=retry)
    except exceptions.Conflict:
        raise StateRefusedError(
            f"the bucket name {name} is taken by another project (bucket names are global): name another, "
            f"`make state-bucket STACK={home.stack} STATE_BACKEND=gs://<name>` (recorded in Pulumi.{home.stack}.yaml)"
        ) from None
    return [f"created gs://{name} in {home.region} (versioned, uniform access, public access prevented)"]


def _settings(bucket: Any, stack: str) -> None:
    bucket.versioning_enabled = True
    bucket.iam_configuration.uniform_bucket_level_access_enabled = True
    bucket.iam_configuration.public_access_prevention = "enforced"
    rules = [rule for rule in bucket.lifecycle_rules if rule.get("condition", {}).get("isLive") is not False]
    bucket.lifecycle_rules = rules
    bucket.add_lifecycle_delete_rule(days_since_noncurrent_time=NONCURRENT_DAYS, is_live=False)
    bucket.labels = {**(bucket.labels or {}), "purpose": "pulumi-state", STACK_LABEL: label(stack)}


def inspect_key(kms: Any, key: str, stack: str) -> Any:
    """The key as it is (None: there is none); StateRefusedError when another stack's label names it."""
    from google.api_core import exceptions

    try:
        found = kms.get_crypto_key(name=key, timeout=TIMEOUT[1])
    except exceptions.NotFound:
        return None
    owner = dict(found.labels).get(STACK_LABEL)
    if owner and owner != label(stack):
        raise StateRefusedError(
            f"the key {key} is stack {owner}'s (its label {STACK_LABEL}): give stack {stack} a key of its own "
            f"(SECRETS_PROVIDER=gcpkms://{ring_of(key).rsplit('/', 1)[0]}/<ring>/cryptoKeys/state for a new stack, "
            "in a ring of its own)"
        )
    return found


def make_key(kms: Any, key: str, stack: str, found: Any) -> list[str]:
    """Make the key ring and the key, or label ``found`` (the key, as it is) when it has no stack's label."""
    from google.api_core import exceptions

    ring = key.rsplit("/cryptoKeys/", 1)[0]
    labels = {"purpose": "pulumi-state", STACK_LABEL: label(stack)}
    if found is not None:
        if dict(found.labels).get(STACK_LABEL) != label(stack):
            kms.update_crypto_key(
                request={
                    "crypto_key": {"name": key, "labels": {**dict(found.labels), **labels}},
                    "update_mask": {"paths": ["labels"]},
                },
                timeout=TIMEOUT[1],
            )
        return [f"the key {key} exists; its label set"]
    done = []
    try:
        kms.get_key_ring(name=ring, timeout=TIMEOUT[1])
    except exceptions.NotFound:
        parent, ring_id = ring.rsplit("/keyRings/", 1)
        kms.create_key_ring(request={"parent": parent, "key_ring_id": ring_id, "key_ring": {}}, timeout=TIMEOUT[1])
        done.append(f"created the key ring {ring}")
    crypto_key = {"purpose": "ENCRYPT_DECRYPT", "labels": labels}
    kms.create_crypto_key(
        request={"parent": ring, "crypto_key_id": key.rsplit("/", 1)[1], "crypto_key": crypto_key},
        timeout=TIMEOUT[1],
    )
    return [*done, f"created the key {key} (no rotation: each version bills)"]


# ---------------------------------------------------------------------------------------------
# 5-6. Who may use them


def wait_for_access(
    home: Home,
    storage: Any,
    kms: Any,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """The caller's own permissions on the bucket and key (``tools.state_access.check``), asked again while new
    grants propagate, bounded by ``PROPAGATION_SECONDS``; StateError when they are still missing then."""
    deadline = clock() + PROPAGATION_SECONDS
    while True:
        missing = check_access(home, "write", storage=storage, kms=kms)
        if missing is None:
            return
        if clock() + WAIT_SECONDS > deadline:
            raise StateError(
                f"{missing}; if you are among MEMBERS, IAM may not have applied the grant yet (it can take a few "
                "minutes): run make state-bucket again to check"
            )
        sleep(WAIT_SECONDS)


def create(
    home: Home,
    *,
    writers: tuple[str, ...],
    readers: tuple[str, ...],
    storage: Any,
    kms: Any,
    services: Any,
    wait: Callable[..., None] = wait_for_access,
    project_number: str | None = None,
) -> list[str]:
    """Steps 2 to 6 of the module's docstring (step 1 is the caller's, before any client is made): the lines
    saying what was done. ``project_number``: the project's (``project_number``); without it a bucket of the name
    that exists is refused, as it cannot be told to be the project's."""
    if not home.bucket:
        raise StateRefusedError(
            f"stack {home.stack}'s state lives in {home.backend}, not in a bucket: `make state-bucket` makes a "
            f"bucket and key of the stack's own (leave {PROJECT}:stateBackend unset, or name a gs:// bucket)"
        )
    if not writers:
        raise StateRefusedError(
            "cannot tell which account runs this (its credentials name no email): name it, and whoever else may "
            f"run the stack's commands: make state-bucket STACK={home.stack} MEMBERS=user:YOU@example.com"
        )
    target = replace(home, secrets_provider=f"gcpkms://{target_key(home)}")
    off = disabled_apis(services, home.project)
    # Another stack's bucket or key is refused before anything changes, APIs included; an API that is off is
    # enabled first, as nothing can be read through it.
    bucket = inspect_bucket(storage, home, project_number) if APIS[0] not in off else None
    key = inspect_key(kms, target.key, home.stack) if APIS[1] not in off else None
    lines = enable_apis(services, home.project, off)
    if APIS[0] in off:
        bucket = inspect_bucket(storage, home, project_number)
    if APIS[1] in off:
        key = inspect_key(kms, target.key, home.stack)
    lines += make_bucket(storage, home, bucket)
    lines += make_key(kms, target.key, home.stack, key)
    lines += bucket_policy(
        storage, home.bucket, {state_role("write", "bucket"): writers, state_role("read", "bucket"): readers}
    )
    lines += key_policy(kms, target.key, {state_role("write", "key"): writers, state_role("read", "key"): readers})
    wait(target, storage, kms)
    lines.append(f"state: {home.backend}  secrets: {target.secrets_provider}")
    if target.secrets_provider != home.secrets_provider and home.secrets_provider:
        lines.append(
            f"stack {home.stack}'s secrets are still encrypted by {home.secrets_provider}: make state-move "
            f"STACK={home.stack} moves them to {target.key}"
        )
    return lines


__all__ = ["STACKS", "caller_of", "create", "parse_members", "project_number", "setup_missing"]
