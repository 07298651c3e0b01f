"""The Secrets key, and the key ring and key a destroy leaves.

- a Secrets key the stack is given (``tpu-rl:gke.secretsEncryptionKey`` naming a key),
  ``kms_v1.KeyManagementServiceClient.get_crypto_key``: it exists, encrypts and decrypts, and has an enabled
  primary version; otherwise GKE would refuse the cluster after the network, the bucket and the identities exist;
- the names a destroy does not free (``SURVIVORS``): with ``gke.secretsEncryptionKey: create``, the key ring and
  key of the stack's names (``get_key_ring``, ``get_crypto_key``). Cloud KMS keeps both after a destroy (the
  provider never deletes a ring; its delete of the key schedules the key's versions for destruction and turns its
  rotation off, and leaves the key), and neither name can be created again, so a later `up` would fail at the
  KeyRing create after the network and the identities exist.

A key of the stack's names is *adopted* (the finding carries its id, ``Finding.reuse``, and the program imports it)
only when it is a destroy's leftover, since a stack that imports a key owns it: its destroy schedules every version
for destruction and deletes its grants. What marks a leftover (``judge_key``): the provider's delete turns rotation
off and schedules every version for destruction (terraform-provider-google ``resourceKMSCryptoKeyDelete``:
``clearCryptoKeyVersions``, ``disableCryptoKeyRotation``), while a stack's live key rotates every 90 days with an
enabled primary (``infra.gcp.kms.ROTATION_PERIOD``); a key whose labels (``Settings.labels``: every `up` writes them)
name this stack and cluster is the stack's own record. A key that encrypts a GKE cluster's Secrets (GKE
``clusters.list``: ``databaseEncryption.keyName`` or ``decryptionKeys``) is in use and never adopted: one of another
stack, or of an unlabelled cluster, stops `up` before anything is created, naming it; this stack's own cluster's key
is left as the stack's state records it (not imported: the state holds it, and a stack whose state does not fails at
its create with 409, changing nothing of it). ``make up`` can hand the program the keys the state holds
(``core.names.KEYS_IN_STATE``): a key the state holds is the stack's own whatever uses it, and one it does not hold
that a cluster uses stops `up`. A key whose primary version is not enabled stops `up` with the one gcloud command that
makes it usable (``key_version_fix``); one GKE can never use (another purpose) stops it with the key to set instead."""

from __future__ import annotations

import dataclasses
import datetime
import re
from dataclasses import dataclass
from typing import Any

from core import deadline
from core.printed_commands import ANY_STACK, make_target
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
    stack: str = ""
    """Its ``stack`` label: the stack that last ran `up` with it ("" without one)."""
    cluster: str = ""
    """Its ``cluster`` label: that stack's ``tpu-rl:clusterName`` ("" without one)."""


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
        "(the same page): imported when a destroy left it and no cluster uses it (``judge_key``; the update after "
        "the import sets its rotation again), once its primary version is enabled (until then `up` stops before "
        "anything is created with the gcloud command that restores or replaces that version); a key another "
        "stack's cluster uses stops `up`",
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
    "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember": (
        True,
        "a binding, added again (and waited for again); on a key the stack is given, never deleted "
        "(retain_on_delete): every stack of the project given that key holds the same binding",
    ),
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
cluster (docs/destroy.md "Destroy, and up again")."""


def keys_in_state(value: str | None) -> frozenset[str] | None:
    """The key ids of ``KEYS_IN_STATE``'s value (None: unset, unknown)."""
    if value is None:
        return None
    return frozenset(key.strip() for key in value.split(",") if key.strip())


@dataclass(frozen=True)
class Claim:
    """What tells this stack's key from another stack's: this stack's labels and cluster, the GKE clusters that use
    the key (``clusters_reply``), and whether the stack's state holds it."""

    stack: str
    """This stack's ``stack`` label (``Settings.labels``)."""
    cluster: str
    """This stack's cluster name (``tpu-rl:clusterName``, its ``cluster`` label)."""
    location: str
    """Where this stack's cluster is (``gcp:region``)."""
    users: tuple[str, ...] | None = ()
    """``<location>/<name>`` of every cluster of the project whose Secrets the key encrypts (None: not read)."""
    users_error: str = ""
    """Why ``users`` could not be read."""
    held: bool | None = None
    """The stack's state holds the key (None: unknown, ``KEYS_IN_STATE`` unset)."""

    def labelled(self, key: CryptoKey) -> bool:
        """The key's labels name this stack and its cluster: the record every `up` of this stack writes on its key."""
        return bool(self.stack) and (key.stack, key.cluster) == (self.stack, self.cluster)

    def own_cluster(self) -> str:
        return f"{self.location}/{self.cluster}"


def _owner(key: CryptoKey) -> str:
    if key.stack:
        return f"the key's labels name stack {key.stack} and cluster {key.cluster or '(none)'}"
    return "the key has no stack label"


def _instead(key_id: str) -> str:
    project = key_id.split("/")[1]
    return (
        f"set tpu-rl:clusterName to a name no other stack of project {project} uses (its key ring and key are then "
        f"new), or {KEY} to another key"
    )


def judge_key(key_id: str, key: CryptoKey, claim: Claim) -> tuple[list[Finding], bool]:
    """Whether this stack adopts the ENCRYPT_DECRYPT key ``key_id`` of its names (pure): (what to say, adopt).

    In order: a key the stack's state holds is its own (adopted: the import is a no-op, ``step_generator.go`` imports
    only when the old id differs). A key a cluster uses is never adopted: this stack's cluster's, by its name and the
    key's labels, is left as the state records it; any other use stops `up`. A primary version that is not enabled
    stops `up` with the command that makes it usable. Rotation off is what the provider's delete leaves: adopted.
    A key that rotates with an enabled primary is adopted only by the stack's own record (its labels), and only once
    no cluster is known to use it; otherwise it is another stack's (a stop). Clusters that cannot be read are a
    warning, and then only what a destroy leaves is adopted."""
    if claim.held:
        if key.primary_state != "ENABLED":
            return [Finding("problem", _not_enabled(key_id, key, claim.stack))], False
        return [Finding("note", f"key {key_id}: the stack's state holds it", reuse=key_id)], True
    if claim.users:
        return [_in_use(key_id, key, claim)], False
    unread = []
    if claim.users is None:
        unread = [
            Finding(
                "unknown",
                f"{claim.users_error}; whether a GKE cluster uses key {key_id} is unknown, so this `up` adopts it only "
                "as a destroy leaves it (its rotation off): otherwise, if the stack's state does not hold it, its "
                "create fails with 409 (already exists)",
            )
        ]
    if key.primary_state != "ENABLED":
        return [*unread, Finding("problem", _not_enabled(key_id, key, claim.stack))], False
    if not key.rotates:
        return [
            *unread,
            _adopted(key_id, "its rotation is off, as a destroy leaves it; this `up` turns it back on"),
        ], True
    if unread:
        return unread, False
    if claim.labelled(key):
        return [_adopted(key_id, "its labels name this stack and cluster")], True
    return [
        Finding(
            "problem",
            f"{KEY}: key {key_id} rotates with an enabled primary version, which no destroy leaves ({_owner(key)}), "
            f"so this stack does not adopt it: {_instead(key_id)}",
        )
    ], False


def _in_use(key_id: str, key: CryptoKey, claim: Claim) -> Finding:
    """A key the clusters ``claim.users`` encrypt their Secrets with: this stack's own, by its cluster's name and the
    key's labels, while the state's keys are unknown (a note: not imported), else a stop."""
    named = ", ".join(claim.users or ())
    if claim.held is None and claim.labelled(key) and claim.own_cluster() in (claim.users or ()):
        return Finding(
            "note",
            f"key {key_id} encrypts the Secrets of cluster {named}, this stack's by its name and the key's labels: "
            "this `up` takes it as the stack's state records it, without importing it (a stack whose state does "
            "not hold it fails at its create with 409, changing nothing of it)",
        )
    twin = (
        f"; stack {claim.stack}'s state does not hold it: if this is that stack, run `up` against the backend that "
        "holds its state"
        if claim.held is False and claim.labelled(key)
        else ""
    )
    return Finding(
        "problem",
        f"{KEY}: key {key_id} encrypts the Secrets of GKE cluster {named} ({_owner(key)}), so this stack does not "
        f"adopt it: {_instead(key_id)}{twin}",
    )


def _adopted(key_id: str, why: str) -> Finding:
    return Finding(
        "note",
        f"key {key_id} exists (Cloud KMS keeps a key after a destroy) and no cluster is known to use it ({why}): this "
        "`up` adopts it",
        reuse=key_id,
    )


def _not_enabled(key_id: str, key: CryptoKey, stack: str) -> str:
    """What a destroy leaves (the provider schedules every version for destruction): the key was last used by a
    cluster the destroy deleted first and none uses it now, so bringing its primary version back is safe."""
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
    up = make_target("up", stack or ANY_STACK)
    return (
        f"{KEY}: key {key_id}, which Cloud KMS keeps after a destroy, has {state}; GKE needs an enabled one: "
        f"run `{key_version_fix(key_id, key)}`, then `{up}` again (it adopts the key)"
    )


def surviving_key_findings(
    ring_id: str,
    ring: bool | None,
    key_id: str,
    key: CryptoKey | None,
    claim: Claim,
    *,
    ring_error: str = "",
    key_error: str = "",
) -> list[Finding]:
    """With ``gke.secretsEncryptionKey: create``: what to do with a key ring and key of the stack's names that
    exist already (pure). ``ring``: the ring exists (None: it could not be read, ``ring_error`` says why); ``key``:
    the key as read, None when it does not exist (or, with ``key_error``, could not be read); ``claim``: whose the key
    is (``judge_key``). The ring is adopted with its key, or when it holds none (the provider never deletes a ring)."""
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
    findings, adopt = judge_key(key_id, key, claim)
    return [*(reused if adopt else []), *findings]


def clusters_reply(reply: Any, key_id: str) -> tuple[str, ...]:
    """GKE's ``ListClustersResponse`` (``clusters``, ``missingZones``) as the check reads it: ``<location>/<name>`` of
    every cluster whose ``databaseEncryption`` names ``key_id``, as the key it encrypts with (``keyName``) or one it
    still decrypts existing objects with (``decryptionKeys``). A reply that lists missing zones may lack their
    clusters: a ``ReplyError``."""
    if not isinstance(reply, dict):
        raise ReplyError("not a JSON object")
    missing = reply.get("missingZones") or []
    if missing:
        zones = ", ".join(as_text(z, "missingZones[]", 60) for z in list(missing)[:5])
        raise ReplyError(f"missingZones lists {zones} (their clusters are not in the list)")
    clusters = reply.get("clusters") or []
    if not isinstance(clusters, list):
        raise ReplyError(f"clusters is {type(clusters).__name__}, not a list")
    users = []
    for n, cluster in enumerate(clusters):
        if not isinstance(cluster, dict):
            raise ReplyError(f"clusters[{n}] is {type(cluster).__name__}, not an object")
        encryption = cluster.get("databaseEncryption") or {}
        if not isinstance(encryption, dict):
            raise ReplyError(f"clusters[{n}].databaseEncryption is not an object")
        keys = [encryption.get("keyName") or "", *(encryption.get("decryptionKeys") or [])]
        if key_id in keys:
            name = as_text(cluster.get("name"), f"clusters[{n}].name", 100)
            location = as_text(cluster.get("location"), f"clusters[{n}].location", 60)
            users.append(f"{location}/{name}")
    return tuple(sorted(users))


_VERSION_ID = re.compile(r"[a-zA-Z0-9_-]{1,63}")
"""A CryptoKeyVersion's id (terraform-provider-google ``parseKmsCryptoKeyVersionId``; Cloud KMS numbers them)."""


def crypto_key_reply(message: Any, name: str) -> CryptoKey:
    """``kms_v1.CryptoKey`` ``name`` as the check reads it."""
    require_name(message, name)
    rotates = "rotation_period" in message
    labels = {
        "stack": as_text(message.labels.get("stack", ""), "labels.stack", 63),
        "cluster": as_text(message.labels.get("cluster", ""), "labels.cluster", 63),
    }
    if "primary" not in message:
        return CryptoKey(
            purpose=as_enum(message.purpose, "purpose", required=True), primary_state=None, rotates=rotates, **labels
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
        **labels,
    )


def check_secrets_key(
    settings: Settings,
    clients: Clients,
    budget: deadline.Budget,
    kms: bool = True,
    gke: bool = True,
    held_keys: str | None = None,
) -> list[Finding]:
    """The Secrets key: one of one's own is read; with ``create``, a ring and key of the stack's names that exist are
    found: adopted when a destroy left them, else a stop naming the key to set (``surviving_key_findings``). ``kms``:
    the Cloud KMS API may be enabled in the stack's project (False: it is not; no ring of the stack's can exist there);
    ``gke``: the GKE API may be (False: no cluster can use the key); ``held_keys``: ``KEYS_IN_STATE``'s text, as
    `make up` handed it over (None: unset)."""
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
    held = keys_in_state(held_keys)
    claim = Claim(
        settings.labels.get("stack", ""),
        settings.cluster_name,
        settings.region,
        held=None if held is None else key_id in held,
    )
    try:
        ring = _key_ring_exists(ring_id, clients, budget)
    except ReadFailedError as err:
        return surviving_key_findings(ring_id, None, key_id, None, claim, ring_error=str(err))
    if not ring:
        return []
    try:
        found = _crypto_key(key_id, clients, budget)
    except ReadFailedError as err:
        return surviving_key_findings(ring_id, True, key_id, None, claim, key_error=str(err))
    if found is not None and found.purpose == "ENCRYPT_DECRYPT" and not claim.held and gke:
        try:
            claim = dataclasses.replace(claim, users=_key_users(settings.project, key_id, clients, budget))
        except ReadFailedError as err:
            claim = dataclasses.replace(claim, users=None, users_error=str(err))
    return surviving_key_findings(ring_id, True, key_id, found, claim)


def _key_users(project: str, key_id: str, clients: Clients, budget: deadline.Budget) -> tuple[str, ...]:
    from google.api_core import exceptions as api

    what = f"listing the GKE clusters of project {project}"
    try:
        return bounded_read(
            what,
            "GKE (clusters.list)",
            lambda options: clusters_reply(clients.clusters.list(project, options), key_id),
            clients,
            budget,
        )
    except api.NotFound:
        raise ReadFailedError(f"{what}: HTTP 404") from None


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
