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
  fails after the network, the cluster and the identities exist.

Without a shared cache nothing is read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core import deadline
from core.redact import scrub
from core.settings import Settings
from infra.gcp.capacity.findings import Finding
from infra.gcp.capacity.reads import Clients, ReadFailedError, ReplyError, as_text, bounded_read

KEY = "tpu-rl:model.hubCache"
SOURCE = "Cloud Storage (buckets.get)"
PERMISSIONS_SOURCE = "Cloud Storage (buckets.testIamPermissions)"
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
    return HubBucket(
        location=as_text(reply.get("location"), "location", 60),
        location_type=as_text(reply.get("locationType") or "", "locationType", 40),
        data_locations=tuple(
            as_text(place, f"customPlacementConfig.dataLocations[{n}]", 60) for n, place in enumerate(places)
        ),
        uniform=enabled,
    )


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

    try:
        return findings + permission_findings(bucket, _held(bucket, clients, budget))
    except (ReadFailedError, api.NotFound) as err:
        why = err if isinstance(err, ReadFailedError) else f"asking gs://{bucket} for its permissions: not found"
        return [*findings, Finding("unknown", f"{why}; whether `up` may grant on the bucket was not checked")]


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
