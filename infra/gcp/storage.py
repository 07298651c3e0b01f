"""The artifacts bucket: converted model, checkpoints, exported model and Pathways scratch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_gcp as gcp

from core.settings import Settings
from infra.options import child_options

SOFT_DELETE_SECONDS = 7 * 24 * 3600
NONCURRENT_DAYS = 7
"""With versioning, how long an overwritten or deleted object stays recoverable (as long as soft delete)."""


def bucket_args(settings: Settings) -> dict[str, Any]:
    """Bucket settings: private, uniform access, soft delete; versioning where the stack asks for it (a
    lifecycle rule deletes noncurrent versions after a week, so Orbax's temporary objects do not pile up);
    force_destroy only if the stack allows it."""
    return {
        "name": settings.bucket_name,
        "project": settings.project,
        "location": settings.region.upper(),
        "storage_class": "STANDARD",
        "uniform_bucket_level_access": True,
        "public_access_prevention": "enforced",
        "soft_delete_policy": {"retention_duration_seconds": SOFT_DELETE_SECONDS},
        "force_destroy": settings.force_destroy,
        "labels": settings.labels,
        # Always sent, as is the rule: a bucket whose versioning is turned off keeps the versions it made, and
        # the rule still deletes them (leaving the field out would keep versioning on, without the rule).
        "versioning": {"enabled": settings.bucket_versioning},
        "lifecycle_rules": [
            {
                "action": {"type": "Delete"},
                "condition": {"days_since_noncurrent_time": NONCURRENT_DAYS, "with_state": "ARCHIVED"},
            }
        ],
    }


@dataclass(frozen=True)
class BucketArgs:
    """What the bucket component is built from."""

    spec: dict[str, Any]
    """The bucket's arguments (``bucket_args``)."""
    protect: bool
    """``tpu-rl:protect``: the bucket cannot be deleted while it is set."""


class ArtifactBucket(pulumi.ComponentResource):
    """One regional bucket, next to the cluster, protected per stack."""

    bucket: gcp.storage.Bucket
    url: pulumi.Output[str]

    def __init__(self, name: str, args: BucketArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("tpu-rl:gcp:ArtifactBucket", name, None, opts)
        self.bucket = gcp.storage.Bucket("bucket", **args.spec, opts=child_options(self, opts, protect=args.protect))
        self.url = self.bucket.name.apply(lambda n: f"gs://{n}")
        self.register_outputs({"name": self.bucket.name, "url": self.url})
