"""The Secrets key, and the key ring and key a destroy leaves.

- a Secrets key the stack is given (``tpu-rl:gke.secretsEncryptionKey`` naming a key),
  ``kms_v1.KeyManagementServiceClient.get_crypto_key``: it exists, encrypts and decrypts, and has an enabled
  primary version; otherwise GKE would refuse the cluster after the network, the bucket and the identities exist;
- the names a destroy does not free (``SURVIVORS``): with ``gke.secretsEncryptionKey: create``, the key ring and
  key of the stack's names (``get_key_ring``, ``get_crypto_key``). Cloud KMS keeps both after a destroy (the
  provider never deletes a ring; its delete of the key schedules the key's versions for destruction and turns its
  rotation off, and leaves the key), and neither name can be created again, so a later `up` would fail at the
  KeyRing create after the network and the identities exist. A survivor the cluster can use is *reused*: the
  finding carries its id and the program imports it (``Finding.reuse``), and the update that follows the import
  sets the key's rotation again. A surviving key whose primary version is not enabled (what a destroy leaves) stops
  `up` with the one gcloud command that makes it usable (``key_version_fix``); one GKE can never use (another
  purpose) stops it with the key to set instead."""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass
from typing import Any

from core import deadline
from core.redact import scrub
from core.settings import Settings
from infra.gcp.capacity.findings import Finding
from infra.gcp.capacity.reads import (
    Clients,
    ReadFailedError,
    ReplyError,
    as_enum,
    as_text,
    bounded_read,
    require_name,
)
from infra.gcp.naming import crypto_key_id, key_ring_id, names_for

KEY = "tpu-rl:gke.secretsEncryptionKey"


@dataclass(frozen=True)
class CryptoKey:
    """A Cloud KMS key as ``cryptoKeys.get`` answers it, the fields GKE's Secrets encryption needs."""

    purpose: str
    primary_state: str | None
    """The primary version's state; None without a primary."""
    primary_version: str = ""
    """The primary version's id (the ``N`` of ``.../cryptoKeyVersions/N``); "" without a primary."""
    destroy_time: str = ""
    """When a primary DESTROY_SCHEDULED is destroyed (``2026-12-31T09:00Z``); "" when the reply gives no time."""
    rotates: bool = True
    """The key has a rotation period (a destroy by the provider removes it: ``disableCryptoKeyRotation``)."""


def key_findings(name: str, key: CryptoKey | None) -> list[Finding]:
    """Whether GKE can encrypt Secrets with the key ``name``, one of one's own (None: not found); a surviving key of
    the stack's own name is ``surviving_key_findings``'."""
    if key is None:
        return [
            Finding(
                "problem",
                f"{KEY}: key {name} was not found; create it (gcloud kms keys create) or set the key to `create`",
            )
        ]
    found: list[Finding] = []
    if key.purpose != "ENCRYPT_DECRYPT":
        found.append(Finding("problem", f"{KEY}: key {name} is for {key.purpose}; GKE needs an ENCRYPT_DECRYPT key"))
    if key.primary_state != "ENABLED":
        state = f"{key.primary_state} as its primary version" if key.primary_state else "no primary version"
        found.append(Finding("problem", f"{KEY}: key {name} has {state}; GKE needs an enabled one"))
    return found


_KEY_NAME = re.compile(r"projects/([^/]+)/locations/([^/]+)/keyRings/([^/]+)/cryptoKeys/([^/]+)")


def key_version_fix(key_id: str, key: CryptoKey) -> str:
    """The gcloud command that gives the key ``key_id`` (a full name) an enabled primary version, from the state of its
    primary (pure; ``key.primary_state`` is not ENABLED). Cloud KMS (https://cloud.google.com/kms/docs/key-states,
    https://cloud.google.com/kms/docs/destroy-restore): a version DESTROY_SCHEDULED is restored to DISABLED
    (``cryptoKeyVersions.restore``) within the key's scheduled-destruction duration, then enabled (``patch`` of its
    state to ENABLED); a DISABLED one is enabled; a DESTROYED one never leaves that state, so a new version is created
    and made primary (``cryptoKeyVersions.create``, ``updatePrimaryVersion``: ``--primary``), as with no primary or a
    state no command turns into ENABLED."""
    match = _KEY_NAME.fullmatch(key_id)
    if match is None:
        raise ValueError(f"not a Cloud KMS key name: {key_id}")
    project, location, ring, name = match.groups()
    where = f"--key {name} --keyring {ring} --location {location} --project {project}"
    version = key.primary_version
    if version and key.primary_state == "DESTROY_SCHEDULED":
        return (
            f"gcloud kms keys versions restore {version} {where} && gcloud kms keys versions enable {version} {where}"
        )
    if version and key.primary_state == "DISABLED":
        return f"gcloud kms keys versions enable {version} {where}"
    return f"gcloud kms keys versions create {where} --primary"


_OPERATION = (
    "the provider's delete waits for the operation to finish (magic-modules mmv1/products/compute/*.yaml "
    "`async: OpAsync`; container resource_container_*.go wait on the cluster operation), and Compute Engine and "
    "GKE document no retention of a deleted name"
)
SURVIVORS: dict[str, tuple[bool, str]] = {
    "gcp:kms/keyRing:KeyRing": (
        False,
        "the provider never deletes a key ring (resourceKMSKeyRingDelete only drops it from the state), and its name "
        "is taken while it exists (https://cloud.google.com/kms/docs/delete-kms-resources): found before anything "
        "is created and imported",
    ),
    "gcp:kms/cryptoKey:CryptoKey": (
        False,
        "the provider's delete (deletion_policy DELETE) schedules its versions for destruction and turns its rotation "
        "off but leaves the key (resourceKMSCryptoKeyDelete), and 'the names of deleted CryptoKeys can't be reused' "
        "(the same page): imported when its primary version is enabled (the update after the import sets its "
        "rotation again), else `up` stops before anything is created with the gcloud command that restores or "
        "replaces that version",
    ),
    "gcp:storage/bucket:Bucket": (
        True,
        "'After a bucket is deleted, anyone can reuse the bucket's name for a new bucket' "
        "(https://cloud.google.com/storage/docs/deleting-buckets), a soft-deleted one included (which then cannot be "
        "restored until the new one is deleted); with forceDestroy false a bucket with objects is not deleted at all, "
        "and stays in the state",
    ),
    "gcp:serviceaccount/account:Account": (
        True,
        "'If you delete a service account, then create a new service account with the same name, the new service "
        "account is treated as a separate identity' (https://cloud.google.com/iam/docs/service-accounts-delete-"
        "undelete): the stack grants the new one its roles again",
    ),
    "gcp:compute/network:Network": (True, _OPERATION),
    "gcp:compute/subnetwork:Subnetwork": (True, _OPERATION),
    "gcp:compute/router:Router": (True, _OPERATION),
    "gcp:compute/routerNat:RouterNat": (True, "part of the router (a field of it, deleted with it)"),
    "gcp:compute/firewall:Firewall": (True, _OPERATION),
    "gcp:container/cluster:Cluster": (True, _OPERATION),
    "gcp:container/nodePool:NodePool": (True, _OPERATION),
    "gcp:projects/iAMMember:IAMMember": (True, "a binding, not a name: added again"),
    "gcp:serviceaccount/iAMMember:IAMMember": (True, "a binding, not a name: added again"),
    "gcp:storage/bucketIAMMember:BucketIAMMember": (True, "a binding on the new bucket"),
    "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember": (True, "a binding, added again (and waited for again)"),
    "gcp:artifactregistry/repository:Repository": (
        True,
        "an image mirror (a remote repository) and its cached images, deleted with it; no page read says its id "
        "stays taken",
    ),
    "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember": (True, "a binding on the new mirror"),
    "gcp:projects/service:Service": (True, "never disabled on destroy (disable_on_destroy false): nothing to free"),
    "gcp:projects/serviceIdentity:ServiceIdentity": (
        True,
        "the project's GKE service agent: generated again, the same",
    ),
    "pulumi-python:dynamic/kms:GrantPropagation": (True, "state only (a wait)"),
    "pulumi-python:dynamic/storage:BucketIdentity": (True, "state only (the bucket's identity as last recorded)"),
    "pulumi:providers:kubernetes": (True, "state only"),
}
"""Every GCP resource type the stack registers -> (whether `pulumi destroy` frees its name for the next `up`,
why). The two that do not are handled by the check (``surviving_key_findings``); Kubernetes objects go with the
cluster (docs/operations.md "Destroy, and up again")."""


def surviving_key_findings(
    ring_id: str, ring: bool | None, key_id: str, key: CryptoKey | None, *, ring_error: str = "", key_error: str = ""
) -> list[Finding]:
    """With ``gke.secretsEncryptionKey: create``: what to do with a key ring and key of the stack's names that
    exist already (pure). ``ring``: the ring exists (None: it could not be read, ``ring_error`` says why); ``key``:
    the key as read, None when it does not exist (or, with ``key_error``, could not be read)."""
    if ring is None:
        return [
            Finding(
                "unknown",
                f"{ring_error}; if an earlier destroy left key ring {ring_id}, its create fails with 409 (already "
                f"exists): then set {KEY} to its key {key_id}",
            )
        ]
    if not ring:
        return []
    reused = [
        Finding(
            "note",
            f"key ring {ring_id} exists (Cloud KMS keeps it after a destroy): this `up` adopts it",
            reuse=ring_id,
        )
    ]
    if key_error:
        return [
            *reused,
            Finding(
                "unknown",
                f"{key_error}; if the key exists, its create fails with 409 (a key's name is never free again): "
                f"then set {KEY} to {key_id}",
            ),
        ]
    if key is None:
        return reused
    if key.purpose != "ENCRYPT_DECRYPT":
        # A purpose never changes: no version makes this key usable (one line, whatever its primary's state).
        return [
            Finding(
                "problem",
                f"{KEY}: key {key_id} is for {key.purpose}; GKE needs an ENCRYPT_DECRYPT key; Cloud KMS never frees a "
                f"key's name, so set {KEY} to another ENCRYPT_DECRYPT key in the cluster's region (gcloud kms keys "
                "create ...), or change tpu-rl:clusterName",
            )
        ]
    if key.primary_state != "ENABLED":
        # What a destroy leaves (the provider schedules every version for destruction): the key is the stack's own
        # and was last used by a cluster the destroy deleted first, so bringing its primary version back is safe.
        primary = f"its primary version {key.primary_version}".rstrip()
        if key.primary_state == "DESTROY_SCHEDULED":
            state = f"{primary} scheduled for destruction" + (
                f" on {key.destroy_time} (until then it can be restored)" if key.destroy_time else ""
            )
        elif key.primary_state == "DESTROYED":
            state = f"{primary} DESTROYED (its key material is gone for good)"
        elif key.primary_state:
            state = f"{primary} {key.primary_state}"
        else:
            state = "no primary version"
        return [
            Finding(
                "problem",
                f"{KEY}: key {key_id}, which Cloud KMS keeps after a destroy, has {state}; GKE needs an enabled one: "
                f"run `{key_version_fix(key_id, key)}`, then `pulumi up` again (it adopts the key)",
            )
        ]
    rotation = "" if key.rotates else " and turns its rotation back on (the destroy turned it off)"
    return [
        *reused,
        Finding(
            "note",
            f"key {key_id} exists (Cloud KMS keeps a key after a destroy): this `up` adopts it{rotation}",
            reuse=key_id,
        ),
    ]


_VERSION_ID = re.compile(r"[a-zA-Z0-9_-]{1,63}")
"""A CryptoKeyVersion's id (terraform-provider-google ``parseKmsCryptoKeyVersionId``; Cloud KMS numbers them)."""


def crypto_key_reply(message: Any, name: str) -> CryptoKey:
    """``kms_v1.CryptoKey`` ``name`` as the check reads it."""
    require_name(message, name)
    rotates = "rotation_period" in message
    if "primary" not in message:
        return CryptoKey(
            purpose=as_enum(message.purpose, "purpose", required=True), primary_state=None, rotates=rotates
        )
    primary = message.primary
    version = as_text(primary.name, "primary.name", 400)
    prefix = f"{name}/cryptoKeyVersions/"
    if not version.startswith(prefix) or not _VERSION_ID.fullmatch(version[len(prefix) :]):
        raise ReplyError(f"primary.name is {scrub(repr(version), limit=80)}, not a version of this key")
    destroy_time = ""
    if "destroy_time" in primary:
        when = primary.destroy_time
        if not isinstance(when, datetime.datetime) or when.tzinfo is None:
            raise ReplyError(f"primary.destroyTime is {scrub(repr(when), limit=40)}, not a time")
        destroy_time = when.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%MZ")
    return CryptoKey(
        purpose=as_enum(message.purpose, "purpose", required=True),
        primary_state=as_enum(primary.state, "primary.state", required=True),
        primary_version=version[len(prefix) :],
        destroy_time=destroy_time,
        rotates=rotates,
    )


def check_secrets_key(settings: Settings, clients: Clients, budget: deadline.Budget, kms: bool = True) -> list[Finding]:
    """The Secrets key: one of one's own is read; with ``create``, a ring and key of the stack's names that
    survived a destroy are found (reused, or a stop naming the key to set). ``kms``: the Cloud KMS API may be
    enabled in the stack's project (False: it is not; no ring of the stack's can exist there)."""
    key = settings.gke.secrets_key
    if not key or (key == "create" and not kms):
        return []
    if key != "create":
        try:
            return key_findings(key, _crypto_key(key, clients, budget))
        except ReadFailedError as err:
            return [Finding("unknown", f"{err}; the Secrets key was not checked")]
    names = names_for(settings)
    ring_id = key_ring_id(settings.project, settings.region, names.key_ring)
    key_id = crypto_key_id(settings.project, settings.region, names.key_ring, names.crypto_key)
    try:
        ring = _key_ring_exists(ring_id, clients, budget)
    except ReadFailedError as err:
        return surviving_key_findings(ring_id, None, key_id, None, ring_error=str(err))
    if not ring:
        return []
    try:
        found = _crypto_key(key_id, clients, budget)
    except ReadFailedError as err:
        return surviving_key_findings(ring_id, True, key_id, None, key_error=str(err))
    return surviving_key_findings(ring_id, True, key_id, found)


def _crypto_key(name: str, clients: Clients, budget: deadline.Budget) -> CryptoKey | None:
    from google.api_core import exceptions as api

    try:
        return bounded_read(
            f"reading Cloud KMS key {name}",
            "Cloud KMS (cryptoKeys.get)",
            lambda options: crypto_key_reply(clients.kms.get_crypto_key(name=name, **options), name),
            clients,
            budget,
        )
    except api.NotFound:
        return None


def _key_ring_exists(name: str, clients: Clients, budget: deadline.Budget) -> bool:
    from google.api_core import exceptions as api

    def read(options: dict[str, Any]) -> bool:
        require_name(clients.kms.get_key_ring(name=name, **options), name)
        return True

    try:
        return bounded_read(f"reading Cloud KMS key ring {name}", "Cloud KMS (keyRings.get)", read, clients, budget)
    except api.NotFound:
        return False
