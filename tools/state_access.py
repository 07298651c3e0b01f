"""Before a Pulumi command runs: does the account hold what the command needs on the stack's state bucket and key?

The permissions are ``infra.gcp.permissions.STATE_WRITE`` (up, refresh, destroy, unlock, a new stack) or
``STATE_READ`` (a preview), tested on the bucket itself (Cloud Storage ``buckets.testIamPermissions``,
google-cloud-storage ``Bucket.test_iam_permissions``: "Tests a set of permissions on this bucket",
https://cloud.google.com/storage/docs/json_api/v1/buckets/testIamPermissions) and on the key itself (Cloud KMS
``cryptoKeys.testIamPermissions``, https://cloud.google.com/kms/docs/reference/rest/v1/projects.locations.keyRings.cryptoKeys/testIamPermissions):
each answers the subset the caller holds, grants inherited from the project, folder and organization included, and
needs no permission itself. A missing one stops the command in one line naming each permission and the grant; a test
that cannot be made (no credentials, no answer in time) is one warning, and Pulumi goes on and says what it meets.
"""

from __future__ import annotations

from typing import Any

from core.errors import TpuRlError
from core.redact import scrub
from infra.client_errors import client_errors
from infra.gcp.permissions import state_permissions, state_role
from tools.state_export import StateError
from tools.state_home import Home

TIMEOUT = (5.0, 20.0)
"""Connect and read timeout of each test, in seconds."""
GRANTS_HELP = "docs/permissions.md#each-stacks-state"


class UntestedError(TpuRlError):
    """The permissions could not be tested (one line; a warning)."""


def held_on_bucket(storage: Any, bucket: str, wanted: tuple[str, ...]) -> set[str]:
    """The permissions of ``wanted`` the caller holds on ``bucket``; StateError when the bucket does not exist."""
    from google.api_core import exceptions

    try:
        return set(storage.bucket(bucket).test_iam_permissions(list(wanted), timeout=TIMEOUT))
    except exceptions.NotFound:
        raise StateError(f"the state bucket gs://{bucket} does not exist") from None
    except client_errors() as err:  # credentials, network: a warning
        raise UntestedError(f"gs://{bucket}: {scrub(str(err), limit=160)}") from None


def held_on_key(kms: Any, key: str, wanted: tuple[str, ...]) -> set[str]:
    """The permissions of ``wanted`` the caller holds on the Cloud KMS key ``key``; StateError when it does not
    exist or its API is off."""
    from google.api_core import exceptions

    try:
        answer = kms.test_iam_permissions(request={"resource": key, "permissions": list(wanted)}, timeout=TIMEOUT[1])
        return set(answer.permissions)
    except exceptions.NotFound:
        raise StateError(f"the state key {key} does not exist") from None
    except exceptions.Forbidden as err:
        if "SERVICE_DISABLED" in str(err) or "has not been used" in str(err):
            raise StateError(f"the Cloud KMS API is off in the key's project ({key})") from None
        raise UntestedError(f"{key}: {scrub(str(err), limit=160)}") from None
    except client_errors() as err:  # credentials, network: a warning
        raise UntestedError(f"{key}: {scrub(str(err), limit=160)}") from None


def check(home: Home, access: str, *, storage: Any, kms: Any) -> str | None:
    """One line naming every permission ``access`` needs that the caller lacks on the stack's bucket and key (None:
    nothing missing, or nothing to test: a Pulumi Cloud or file home, a provider that is not Cloud KMS).
    StateError when the bucket or key is missing (``make state-bucket`` makes them); ``UntestedError`` when it cannot
    tell."""
    wanted = state_permissions(access)
    missing: list[str] = []
    fix = f"make state-bucket STACK={home.stack}"
    try:
        if home.bucket:
            held = held_on_bucket(storage, home.bucket, wanted["bucket"])
            lacking = [p for p in wanted["bucket"] if p not in held]
            if lacking:
                missing.append(f"{', '.join(lacking)} on gs://{home.bucket} ({state_role(access, 'bucket')})")
        if home.key:
            held = held_on_key(kms, home.key, wanted["key"])
            lacking = [p for p in wanted["key"] if p not in held]
            if lacking:
                missing.append(f"{', '.join(lacking)} on the key {home.key} ({state_role(access, 'key')})")
    except StateError as err:
        raise StateError(f"{err}: create it with `{fix}` ({GRANTS_HELP})") from None
    if not missing:
        return None
    return (
        f"the account running `make` lacks {'; '.join(missing)}, which stack {home.stack}'s "
        f"{'preview needs' if access == 'read' else 'commands need'}: whoever administers the state grants them with "
        f"`{fix} {'READERS' if access == 'read' else 'MEMBERS'}=user:YOU` (or gcloud, {GRANTS_HELP})"
    )


def clients() -> tuple[Any, Any]:
    """A storage client (``workloads.observe.artifacts.storage_client``: ADC, or the emulator) and a Cloud KMS client
    (REST), every reply through the one bounded read."""
    from google.cloud import kms_v1

    from infra.gcp.capacity.reads import cap_replies
    from workloads.observe.artifacts import storage_client

    kms: Any = kms_v1.KeyManagementServiceClient(transport="rest")
    cap_replies(kms.transport._session)
    return storage_client(), kms
