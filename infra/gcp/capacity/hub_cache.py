"""The shared Hub cache's bucket (``tpu-rl:model.hubCache``): the stack does not create it, it only grants its
identities roles on it bounded to the folder by IAM conditions (``infra.gcp.access``), so before anything is created
one ``buckets.get`` (google-cloud-storage ``Client.get_bucket``, bounded like every read) says whether it can serve:

- it exists (otherwise the grants' create fails after the network, the cluster and the identities exist);
- uniform bucket-level access is on: "You must enable uniform bucket-level access on the bucket before adding
  conditions." (https://cloud.google.com/storage/docs/access-control/using-iam-permissions, "Use IAM Conditions on
  buckets");
- its data is in ``gcp:region``, where the conversion that reads ~52 GB from it per new run and the training nodes
  are (``workloads/container/base_snapshot.py``): https://cloud.google.com/storage/pricing, "Data transfer within
  Google Cloud": free when "Data moves within the same location" ("A region is not considered the same location as a
  multi-region, even if the region is within the geographic limits of a multi-region") or "from a Cloud Storage
  bucket located in a dual-region to a different Google Cloud service located in one of the regions that make up the
  dual-region"; any other read is billed per GiB by the bucket's and the destination's locations;
- the account running `up` may read and set the bucket's IAM policy, where the steps' grants go
  (``gcp.storage.BucketIAMMember`` reads the policy and sets it again): the project's ``testIamPermissions`` cannot
  say it for a bucket that may live in another project or carry its own grants, so the bucket itself is asked
  (``buckets.testIamPermissions``, google-cloud-storage ``Bucket.test_iam_permissions``: "Tests a set of permissions on
  the given bucket to see which, if any, are held by the caller",
  https://cloud.google.com/storage/docs/json_api/v1/buckets/testIamPermissions). Without them the grants' create
  fails after the network, the cluster and the identities exist;
- it is no stack's artifacts bucket (its labels, ``infra.gcp.storage.bucket_args``: ``app`` and ``stack``): that
  bucket is emptied by its stack's destroy with ``forceDestroy`` and written by its steps (the stack's own bucket is
  refused with the configuration already, ``core.config.rules``);
- where this stack is the cache's one writer (``tpu-rl:model.hubCacheWriter``), no other stack's identity may write
  the folder: the bucket's IAM policy (``buckets.getIamPolicy``, version 3 for the conditions,
  https://cloud.google.com/storage/docs/json_api/v1/buckets/getIamPolicy) holds no grant of a role that creates or
  deletes objects (``infra.gcp.access.HUB_CACHE_WRITE_ROLES``) to another service account, bounded by a condition to a
  prefix that overlaps the folder (the shape of a stack's grant, ``infra.gcp.access.BucketGrant.condition``; an
  unconditioned grant is the bucket owner's or an operator's, not a stack's).

Each is one line naming the conflict and what to run, before anything is created. Without a shared cache nothing is
read."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from core import deadline
from core.names import step_account
from core.redact import scrub
from core.settings import Settings
from infra.gcp.access import HUB_CACHE_WRITE_ROLES, HUB_CACHE_WRITER
from infra.gcp.capacity.findings import Finding
from infra.gcp.capacity.reads import Clients, ReadFailedError, ReplyError, as_text, bounded_read

KEY = "tpu-rl:model.hubCache"
SOURCE = "Cloud Storage (buckets.get)"
PERMISSIONS_SOURCE = "Cloud Storage (buckets.testIamPermissions)"
POLICY_SOURCE = "Cloud Storage (buckets.getIamPolicy)"
WRITER_KEY = "tpu-rl:model.hubCacheWriter"
ON_BUCKET = ("storage.buckets.getIamPolicy", "storage.buckets.setIamPolicy")
"""What `up` does on the shared bucket besides reading it: the steps' grants (roles/storage.admin grants both)."""


@dataclass(frozen=True)
class HubBucket:
    """A bucket as the JSON API's ``buckets.get`` answers it, the fields the shared cache needs."""

    location: str
    """``US-EAST5``, ``US``, ``NAM4`` (GCS writes it upper-case)."""
    location_type: str
    """``region`` | ``dual-region`` | ``multi-region`` ("" when the reply gives none)."""
    data_locations: tuple[str, ...]
    """A configurable dual-region's regions (``customPlacementConfig.dataLocations``); () otherwise."""
    uniform: bool
    """``iamConfiguration.uniformBucketLevelAccess.enabled``."""
    labels: dict[str, str] = field(default_factory=dict)
    """The bucket's labels: a stack's artifacts bucket carries ``app`` and ``stack`` (``Settings.labels``)."""


@dataclass(frozen=True)
class WriteGrant:
    """One member of the bucket's IAM policy that may create or delete objects under ``prefixes`` (its condition's
    ``resource.name.startsWith``)."""

    member: str
    role: str
    prefixes: tuple[str, ...]


def create_command(bucket: str, region: str) -> str:
    return f"gcloud storage buckets create gs://{bucket} --location={region} --uniform-bucket-level-access"


def hub_cache_findings(bucket: str, region: str, found: HubBucket | None) -> list[Finding]:
    """Whether the bucket ``bucket`` (None: it does not exist) can hold the shared Hub cache of a stack in ``region``
    (pure)."""
    if found is None:
        return [
            Finding(
                "problem",
                f"{KEY}: bucket gs://{bucket} does not exist; create it once: {create_command(bucket, region)}",
            )
        ]
    findings: list[Finding] = []
    if not found.uniform:
        findings.append(
            Finding(
                "problem",
                f"{KEY}: bucket gs://{bucket} has uniform bucket-level access off, and the stack's grants on it carry "
                f"IAM conditions, which need it: gcloud storage buckets update gs://{bucket} "
                "--uniform-bucket-level-access",
            )
        )
    here = region.upper()
    if found.location.upper() == here or here in {place.upper() for place in found.data_locations}:
        return findings
    kind = f"{found.location_type} " if found.location_type else ""
    elsewhere = (
        f"the conversion reads ~52 GB from it per new run in {region} (gcp:region), and Cloud Storage bills reads "
        "out of a bucket's location as data transfer"
    )
    if found.location_type == "dual-region" and not found.data_locations:
        # A dual-region whose reply names no regions (no customPlacementConfig: a predefined one, NAM4, EUR4, ...).
        findings.append(
            Finding(
                "unknown",
                f"{KEY}: bucket gs://{bucket} is in dual-region {found.location}; {elsewhere}, unless {region} is one "
                f"of its two regions (https://cloud.google.com/storage/docs/locations): if it is not, use a bucket in "
                f"{region} ({create_command('NEW-BUCKET', region)})",
            )
        )
        return findings
    findings.append(
        Finding(
            "problem",
            f"{KEY}: bucket gs://{bucket} is in {kind}{found.location}, not in {region}: {elsewhere}; use a bucket "
            f"in {region} ({create_command('NEW-BUCKET', region)})",
        )
    )
    return findings


def owner_findings(bucket: str, region: str, found: HubBucket, app: str) -> list[Finding]:
    """A bucket a stack of ``app`` made for its artifacts (its labels) cannot hold a cache other stacks read (pure)."""
    stack = found.labels.get("stack")
    if found.labels.get("app") != app or not stack:
        return []
    return [
        Finding(
            "problem",
            f"{KEY}: gs://{bucket} is stack {stack}'s artifacts bucket (its labels app={app}, stack={stack}), which "
            f"that stack's steps write and its destroy may empty; create a bucket of its own for the cache: "
            f"{create_command('NEW-BUCKET', region)}, then `pulumi config set {KEY} gs://NEW-BUCKET/hub/` in every "
            "stack that shares it",
        )
    ]


def writer_findings(bucket: str, prefix: str, grants: list[WriteGrant], own: str, stack: str) -> list[Finding]:
    """Where this stack (``stack``, its conversion ``own``) writes the cache, whether another service account may write
    the folder too (pure): one writer per cache."""
    others = [
        grant
        for grant in grants
        if grant.member.startswith("serviceAccount:")
        and grant.member != own
        and any(p.startswith(prefix) or prefix.startswith(p) for p in grant.prefixes)
    ]
    if not others:
        return []
    first = sorted(others, key=lambda g: (g.member, g.role))[0]
    more = f" (and {len(others) - 1} more)" if len(others) > 1 else ""
    return [
        Finding(
            "problem",
            f"{KEY}: {first.member} holds {first.role} on gs://{bucket}/{first.prefixes[0]}{more}, so another stack "
            f"writes the cache this stack is the writer of ({WRITER_KEY} = {stack}): a cache has one writer. Set "
            f"{WRITER_KEY} to that stack here (`pulumi config set {WRITER_KEY} STACK`; this stack then only reads "
            f"it), or set it to {stack} in that stack and run its `make up` first (its conversion's grant becomes "
            "read-only)",
        )
    ]


def permission_findings(bucket: str, held: list[str]) -> list[Finding]:
    """Whether the account running `up` holds ``ON_BUCKET`` on the bucket (pure)."""
    missing = [p for p in ON_BUCKET if p not in held]
    if not missing:
        return []
    return [
        Finding(
            "problem",
            f"{KEY}: the account running `up` lacks {', '.join(missing)} on bucket gs://{bucket}, where the stack "
            "grants its conversion and export their roles on the cache's folder; grant it roles/storage.admin on the "
            f"bucket: gcloud storage buckets add-iam-policy-binding gs://{bucket} --member=user:YOU "
            "--role=roles/storage.admin",
        )
    ]


def hub_bucket_reply(reply: Any, name: str) -> HubBucket:
    """The JSON API's bucket resource (a dict) ``name`` as the check reads it."""
    if reply.get("name") != name:
        raise ReplyError(f"name is {scrub(repr(reply.get('name')), limit=80)}, not {name}")
    iam = reply.get("iamConfiguration")
    uniform = iam.get("uniformBucketLevelAccess") if isinstance(iam, dict) else None
    enabled = uniform.get("enabled") if isinstance(uniform, dict) else None
    if not isinstance(enabled, bool):
        raise ReplyError("iamConfiguration.uniformBucketLevelAccess.enabled is missing")
    placement = reply.get("customPlacementConfig") or {}
    places = (placement.get("dataLocations") or []) if isinstance(placement, dict) else None
    if not isinstance(places, list):
        raise ReplyError("customPlacementConfig.dataLocations is not a list")
    labels = reply.get("labels") or {}
    if not isinstance(labels, dict):
        raise ReplyError("labels is not a map")
    return HubBucket(
        location=as_text(reply.get("location"), "location", 60),
        location_type=as_text(reply.get("locationType") or "", "locationType", 40),
        data_locations=tuple(
            as_text(place, f"customPlacementConfig.dataLocations[{n}]", 60) for n, place in enumerate(places)
        ),
        uniform=enabled,
        labels={as_text(k, "labels", 63): as_text(v, f"labels.{k}", 63) for k, v in labels.items()},
    )


STARTS_WITH = 'resource.name.startsWith("projects/_/buckets/{bucket}/objects/'


def write_grants(bindings: Any, bucket: str) -> list[WriteGrant]:
    """The members of a policy's ``bindings`` (the JSON API's, as google-cloud-storage's ``Policy`` keeps them) whose
    role writes objects and whose condition bounds it to object-name prefixes of ``bucket``."""
    if not isinstance(bindings, list):
        raise ReplyError("bindings is not a list")
    grants: list[WriteGrant] = []
    for n, binding in enumerate(bindings):
        if not isinstance(binding, dict):
            raise ReplyError(f"bindings[{n}] is not an object")
        condition = binding.get("condition") or {}
        expression = condition.get("expression", "") if isinstance(condition, dict) else None
        if not isinstance(expression, str):
            raise ReplyError(f"bindings[{n}].condition.expression is not text")
        if binding.get("role") not in HUB_CACHE_WRITE_ROLES or not expression:
            continue
        start = re.escape(STARTS_WITH.format(bucket=bucket))
        prefixes = tuple(re.findall(start + r'([^"]*)"\)', expression))
        for member in binding.get("members") or ():
            grants.append(WriteGrant(as_text(member, f"bindings[{n}].members", 200), str(binding["role"]), prefixes))
    return grants


def check_hub_cache(settings: Settings, clients: Clients, budget: deadline.Budget) -> list[Finding]:
    """The shared Hub cache's bucket, read once (nothing without ``tpu-rl:model.hubCache``)."""
    shared = settings.shared_hub_cache
    if shared is None:
        return []
    bucket = shared[0]
    try:
        found = _read_bucket(bucket, clients, budget)
    except ReadFailedError as err:
        return [Finding("unknown", f"{err}; the shared Hub cache's bucket was not checked")]
    findings = hub_cache_findings(bucket, settings.region, found)
    if found is None:
        return findings
    from google.api_core import exceptions as api

    findings += owner_findings(bucket, settings.region, found, settings.labels["app"])
    try:
        held = _held(bucket, clients, budget)
    except (ReadFailedError, api.NotFound) as err:
        why = err if isinstance(err, ReadFailedError) else f"asking gs://{bucket} for its permissions: not found"
        return [*findings, Finding("unknown", f"{why}; whether `up` may grant on the bucket was not checked")]
    findings += permission_findings(bucket, held)
    if not settings.hub_cache_writes or ON_BUCKET[0] not in held:
        return findings
    account = step_account(settings.cluster_name, HUB_CACHE_WRITER)
    own = f"serviceAccount:{account}@{settings.project}.iam.gserviceaccount.com"
    try:
        grants = _write_grants(bucket, clients, budget)
    except (ReadFailedError, api.NotFound) as err:
        why = err if isinstance(err, ReadFailedError) else f"reading gs://{bucket}'s IAM policy: not found"
        return [*findings, Finding("unknown", f"{why}; whether another stack writes the cache was not checked")]
    return findings + writer_findings(bucket, shared[1], grants, own, settings.stack)


def _write_grants(name: str, clients: Clients, budget: deadline.Budget) -> list[WriteGrant]:
    def read(options: dict[str, Any]) -> list[WriteGrant]:
        policy = clients.storage.bucket(name).get_iam_policy(
            requested_policy_version=3, timeout=options["timeout"], retry=options["retry"]
        )
        return write_grants(policy.bindings, name)

    return bounded_read(f"reading gs://{name}'s IAM policy ({KEY})", POLICY_SOURCE, read, clients, budget)


def _held(name: str, clients: Clients, budget: deadline.Budget) -> list[str]:
    def ask(options: dict[str, Any]) -> list[str]:
        held = clients.storage.bucket(name).test_iam_permissions(
            list(ON_BUCKET), timeout=options["timeout"], retry=options["retry"]
        )
        if not isinstance(held, list) or not all(isinstance(p, str) for p in held):
            raise ReplyError("permissions is not a list of names")
        return held

    return bounded_read(
        f"asking gs://{name} which of {', '.join(ON_BUCKET)} `up` holds", PERMISSIONS_SOURCE, ask, clients, budget
    )


def _read_bucket(name: str, clients: Clients, budget: deadline.Budget) -> HubBucket | None:
    from google.api_core import exceptions as api

    def read(options: dict[str, Any]) -> HubBucket:
        bucket = clients.storage.get_bucket(name, timeout=options["timeout"], retry=options["retry"])
        # The Bucket's ``name`` is the one asked for; the reply is its ``_properties`` (``_PropertyMixin.reload``).
        return hub_bucket_reply(bucket._properties, name)

    try:
        return bounded_read(f"reading bucket gs://{name} ({KEY})", SOURCE, read, clients, budget)
    except api.NotFound:
        return None
