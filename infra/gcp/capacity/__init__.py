"""Capacity preflight: before any resource is created, is there a slice to run on? (no Pulumi)

Cluster Toolkit fails at plan time when the reservation is missing, not specific, or in another zone
(``reservation_definitions.tf`` preconditions); without a check here the first sign would be GKE failing to create
the TPU pool, after the network, the cluster and the other pools exist. So before registering anything the program
calls ``check_capacity``, which reads, through the official clients and bounded (``core.deadline`` ``compute``
budget), one module per thing it checks:

- ``apis``: the permissions the stack's resources need (Resource Manager ``projects.testIamPermissions``,
  ``infra.gcp.permissions``) and the APIs (Service Usage);
- ``offers``: the machine, accelerator and disk types ``gcp:zone`` offers (an accelerator type it does not list is a
  warning where it offers the slice's machine type);
- ``reservations``: the reservation (capacity ``reservation``), specific, ready, with the slices free;
- ``quotas``: the region's CPU and disk quotas and the project's across all regions (``CPUS_ALL_REGIONS``, the
  network's objects) against what a run and the pools at their maximum draw, and for capacity that is not reserved
  the TPU chips' limit (Cloud Quotas);
- ``keys``: the Secrets key, and the key ring and key a destroy leaves (``SURVIVORS``), reused or a stop naming the
  fix, and a key of the stack's names another stack's cluster uses (GKE ``clusters.list``), a stop naming it;
- ``boot_disk``: cpu-np's secondary boot disk image (``tpu-rl:cpuPool.bootDiskImage``, Compute Engine ``images.get``):
  it exists, is READY and not OBSOLETE or DELETED (DEPRECATED: a warning); its size counts against the disk quota;
- ``hub_cache``: a shared Hub cache's bucket (``tpu-rl:model.hubCache``, through google-cloud-storage): it exists, has
  uniform bucket-level access (its IAM conditions need it) and is in ``gcp:region``;

over ``needs`` (what the stack needs and already holds, pure), ``reads`` (the clients, the size cap, the retry and
budget, a reply's fields read with limits, ``ReadFailedError``) and ``findings`` (``Finding``); ``check`` runs them
in order.

Each finding is one line: a *problem* stops `pulumi up` (and a preview) before anything is created; an *unknown*
(no permission, no answer, an unreadable reply, a quota metric this project does not list, a quota rule the sources
do not settle) is a warning, since the check cannot decide; so are the pools' maximum beyond the quotas and a
permission test that cannot be made. ``tpu-rl:workflow.capacityCheck: false`` skips it all.

Tests that replace the clients patch them where the check reads them (``infra.gcp.capacity.check.make_clients``):
it is not re-exported here, so a patch of the package's name fails instead of silently doing nothing. The size cap
is the one bounded read of every client (``core.bounded``; ``ReplyTooLargeError`` and ``ReplyEncodingError`` are
its classes, re-exported)."""

from infra.gcp.capacity.apis import api_findings
from infra.gcp.capacity.boot_disk import BootDiskImage, boot_disk_findings, image_reply
from infra.gcp.capacity.check import check_capacity
from infra.gcp.capacity.findings import Finding
from infra.gcp.capacity.hub_cache import HubBucket, hub_bucket_reply, hub_cache_findings
from infra.gcp.capacity.keys import (
    KEY,
    SURVIVORS,
    CryptoKey,
    key_findings,
    key_version_fix,
    surviving_key_findings,
)
from infra.gcp.capacity.needs import CPU_STEPS_NODES, Held, Need, Pool, held, needs
from infra.gcp.capacity.offers import Offer, accelerator_findings, offer_findings, offers
from infra.gcp.capacity.quotas import (
    QuotaLimit,
    global_quota_findings,
    quota_findings,
    tpu_quota_findings,
    tpu_quota_id,
)
from infra.gcp.capacity.reads import (
    MAX_REPLY_BYTES,
    Clients,
    ReadFailedError,
    ReplyEncodingError,
    ReplyError,
    ReplyTooLargeError,
    json_object,
    parse_failure,
)
from infra.gcp.capacity.reservations import Reservation, reservation_findings

__all__ = [
    "CPU_STEPS_NODES",
    "KEY",
    "MAX_REPLY_BYTES",
    "SURVIVORS",
    "BootDiskImage",
    "Clients",
    "CryptoKey",
    "Finding",
    "Held",
    "HubBucket",
    "Need",
    "Offer",
    "Pool",
    "QuotaLimit",
    "ReadFailedError",
    "ReplyEncodingError",
    "ReplyError",
    "ReplyTooLargeError",
    "Reservation",
    "accelerator_findings",
    "api_findings",
    "boot_disk_findings",
    "check_capacity",
    "global_quota_findings",
    "held",
    "hub_bucket_reply",
    "hub_cache_findings",
    "image_reply",
    "json_object",
    "key_findings",
    "key_version_fix",
    "needs",
    "offer_findings",
    "offers",
    "parse_failure",
    "quota_findings",
    "reservation_findings",
    "surviving_key_findings",
    "tpu_quota_findings",
    "tpu_quota_id",
]
