"""What a bucket grant's IAM condition allows, read the way IAM reads it (``resource.name.startsWith``)."""

from __future__ import annotations

import re

from infra.gcp.access import BucketGrant


def covers(grant: BucketGrant, bucket: str, name: str) -> bool:
    """Whether the grant's IAM condition holds for the object ``name`` of ``bucket``."""
    condition = grant.condition(bucket)
    assert condition is not None
    prefixes = re.findall(r'startsWith\("projects/_/buckets/[^/]+/objects/([^"]*)"\)', condition["expression"])
    return any(name.startswith(prefix) for prefix in prefixes)
