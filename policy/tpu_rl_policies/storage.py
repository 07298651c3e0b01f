"""The artifacts bucket and the Cloud KMS key: grants bounded to prefixes (``scoped-bucket-grants``), a hardened
bucket (``bucket-hardening``) that survives destroy and overwrites (``bucket-deletion-guard``), and Secrets encrypted
with the stack's key where the config requires it (``secrets-encryption``)."""

from __future__ import annotations

from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
)

from core.printed_commands import ANY_STACK, pulumi_config_set

from .properties import _config, _m
from .resources import BUCKET, CLUSTER, Report, _guarded_resource

BUCKET_IAM = ("gcp:storage/bucketIAMMember:BucketIAMMember", "gcp:storage/bucketIAMBinding:BucketIAMBinding")
OBJECT_ROLES = ("roles/storage.objectUser", "roles/storage.objectViewer", "roles/storage.objectCreator")
"""Object roles a bucket grant must bound to prefixes (``infra.gcp.access``)."""
WHOLE_BUCKET_ROLES = ("roles/storage.objectAdmin", "roles/storage.admin", "roles/storage.legacyBucketOwner")


def _secrets_encryption(args: ResourceValidationArgs, props: dict[str, Any], report: Report) -> None:
    if args.resource_type != CLUSTER or not _config(args)["required"]:
        return
    encryption = _m(props.get("databaseEncryption"))
    if encryption.get("state") != "ENCRYPTED" or not encryption.get("keyName"):
        report(
            "Secrets, the Hugging Face token among them, are stored without application-layer encryption: set "
            "tpu-rl:gke.secretsEncryptionKey (create, or a Cloud KMS key in gcp:region)"
        )


secrets_encryption = ResourceValidationPolicy(
    name="secrets-encryption",
    description="Where the stack's policy config requires it, GKE encrypts Secrets with a Cloud KMS key.",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps=pulumi_config_set(ANY_STACK, "tpu-rl:gke.secretsEncryptionKey", "create"),
    config_schema=PolicyConfigSchema(properties={"required": {"type": "boolean", "default": False}}),
    validate=_guarded_resource(_secrets_encryption),
)


def _scoped_bucket_grants(args: ResourceValidationArgs, props: dict[str, Any], report: Report) -> None:
    if args.resource_type not in BUCKET_IAM:
        return
    role = props.get("role")
    if role in WHOLE_BUCKET_ROLES:
        report(f"bucket-level {role} manages the whole bucket; grant object roles on the step's prefixes")
    elif role in OBJECT_ROLES and not _m(props.get("condition")).get("expression"):
        report(
            f"{role} on the whole bucket lets one step's identity read or delete every run; bound it to the "
            "prefixes its step uses with an IAM condition (infra/gcp/access.py)"
        )


scoped_bucket_grants = ResourceValidationPolicy(
    name="scoped-bucket-grants",
    description="Object access on the bucket is bounded by IAM conditions to the prefixes each identity uses.",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Keep the grants of infra/gcp/access.py: each identity's roles on its steps' prefixes.",
    validate=_guarded_resource(_scoped_bucket_grants),
)


def _bucket(args: ResourceValidationArgs, props: dict[str, Any], report: Report) -> None:
    if args.resource_type != BUCKET:
        return
    if not props.get("uniformBucketLevelAccess"):
        report("enable uniform bucket-level access (uniformBucketLevelAccess: true)")
    if props.get("publicAccessPrevention") != "enforced":
        report("enforce public access prevention (publicAccessPrevention: enforced)")
    soft_delete = _m(props.get("softDeletePolicy")).get("retentionDurationSeconds")
    if not soft_delete and not _m(props.get("versioning")).get("enabled"):
        report("keep deleted checkpoints recoverable: enable soft delete or versioning")


bucket_hardening = ResourceValidationPolicy(
    name="bucket-hardening",
    description="Buckets use uniform access, enforce public access prevention and keep deleted objects recoverable.",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Keep the bucket settings of infra/gcp/storage.py.",
    validate=_guarded_resource(_bucket),
)


def _bucket_deletion(args: ResourceValidationArgs, props: dict[str, Any], report: Report) -> None:
    if args.resource_type != BUCKET:
        return
    if props.get("forceDestroy"):
        report("forceDestroy deletes every checkpoint on destroy: set tpu-rl:forceDestroy false")
    if not (args.opts and args.opts.protect):
        report("the artifacts bucket is not protected: set tpu-rl:protect true")
    if not _m(props.get("versioning")).get("enabled"):
        report(
            "bucket versioning is off: an overwritten checkpoint cannot be recovered, a deleted one for the "
            "soft-delete week only: set tpu-rl:bucketVersioning true"
        )


bucket_deletion_guard = ResourceValidationPolicy(
    name="bucket-deletion-guard",
    description="Finished runs' artifacts survive destroy and overwrites: no forceDestroy, protect on, versioning.",
    severity=Severity.MEDIUM,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="; ".join(
        pulumi_config_set(ANY_STACK, f"tpu-rl:{key}", value)
        for key, value in (("protect", "true"), ("forceDestroy", "false"), ("bucketVersioning", "true"))
    ),
    validate=_guarded_resource(_bucket_deletion),
)
