"""The artifacts bucket: converted model, checkpoints, exported model and Pathways scratch; and the check that
refuses, at plan time and in every stack, a change that would replace it (``BucketIdentity``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict

import pulumi
import pulumi_gcp as gcp
from pulumi import dynamic

from core.printed_commands import ANY_STACK, make_target, pulumi_command
from core.settings import Settings
from infra.options import child_options

SOFT_DELETE_SECONDS = 7 * 24 * 3600
NONCURRENT_DAYS = 7
"""With versioning, how long an overwritten or deleted object stays recoverable (as long as soft delete)."""


class BucketSpec(TypedDict):
    """``gcp.storage.Bucket``'s keyword arguments that tpu-rl sets (``bucket_args``; the provider's snake_case
    names)."""

    name: str
    project: str
    location: str
    storage_class: str
    uniform_bucket_level_access: bool
    public_access_prevention: str
    soft_delete_policy: dict[str, int]
    force_destroy: bool
    labels: dict[str, str]
    versioning: dict[str, bool]
    lifecycle_rules: list[dict[str, Any]]


def bucket_args(settings: Settings) -> BucketSpec:
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


IDENTITY_KEYS = {"name": "tpu-rl:bucketName", "location": "gcp:region", "project": "gcp:project"}
"""The bucket's arguments whose change replaces it (the google provider's ``resource_storage_bucket.go`` marks
``name``, ``location`` and ``project`` ForceNew), each with the key it comes from (``tpu-rl:bucketName``
defaults to ``<gcp:project>-<clusterName>``, so a new ``clusterName`` renames it too). A replacement creates
the new bucket before it deletes the old one (the engine's default order, ``step_generator.go``), so a new name
deletes every earlier run with the old bucket (``forceDestroy``) or fails on it, and a new location under the
same name fails with 409 (names are global)."""


def identity_problem(olds: dict[str, Any], news: dict[str, Any]) -> str | None:
    """Why the registered bucket identity ``news`` may not follow the recorded ``olds`` (None: it may): a change
    of any ``IDENTITY_KEYS`` argument of a bucket the state holds."""
    if not all(key in olds for key in IDENTITY_KEYS):
        return None  # nothing recorded yet: a new stack, or the first `up` with this check
    changed = [key for key in IDENTITY_KEYS if olds[key] != news.get(key)]
    if not changed:
        return None
    what = ", ".join(f"{IDENTITY_KEYS[key]} ({key}: {olds[key]} -> {news.get(key)})" for key in changed)
    urn = str(news.get("urn", ""))
    stack = urn.split("::", 1)[0].rpartition(":")[2] or ANY_STACK  # urn:pulumi:<stack>::<project>::...
    forget = pulumi_command(stack, "state", "delete", f"'{urn}'", "--yes")
    return (
        f"refusing to replace the artifacts bucket gs://{olds['name']}, which holds every earlier run: {what} "
        "changed. Set the old value back; or, to replace it on purpose (the old bucket and its runs are deleted "
        'with it, or its delete fails while it holds objects; docs/upgrades.md "Moving the bucket"), run '
        f"`{forget}`, then `{make_target('up', stack)}`"
    )


class BucketIdentityProvider(dynamic.ResourceProvider):
    """Records the bucket's identity and refuses a change of it in ``check``, which the engine calls on every
    registration, at a preview and at an `up`, with the state's inputs as ``olds`` (``step_generator.go``
    ``continueStepsFromImport``: ``prov.Check`` with ``Olds: oldInputs``; the dynamic provider hands them to
    ``check``, ``pulumi/dynamic/__main__.py`` ``Check``). A failure makes the resource invalid
    (``issueCheckErrors``, then "resource %s is invalid"): the deployment stops before the bucket, which depends on
    this resource, is registered: nothing is replaced, in any stack, whatever ``protect`` says.

    Pickled into the state by reference (dill: its module and name), like ``infra.gcp.kms``'s provider: keep
    ``infra.gcp.storage.BucketIdentityProvider`` importable under this name."""

    serialize_as_secret_always = False  # the pickle holds no secret: a module and a class name

    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> dynamic.CheckResult:
        problem = identity_problem(olds, news)
        return dynamic.CheckResult(news, [dynamic.CheckFailure("", problem)] if problem else [])

    def create(self, props: dict[str, Any]) -> dynamic.CreateResult:
        return dynamic.CreateResult(f"{props['project']}/{props['name']}", props)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> dynamic.DiffResult:
        changed = any(olds.get(key) != news.get(key) for key in (*IDENTITY_KEYS, "urn"))
        return dynamic.DiffResult(changes=changed, replaces=[], delete_before_replace=False)

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> dynamic.UpdateResult:
        return dynamic.UpdateResult(news)


class BucketIdentity(dynamic.Resource, module="storage", name="BucketIdentity"):
    """The bucket's identity as the state last recorded it (``BucketIdentityProvider``). No cloud object, no
    network: deleting it deletes nothing."""

    def __init__(self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(BucketIdentityProvider(), name, props, opts)


def identity_urn(stack: str, project: str, parent_type: str, name: str) -> str:
    """The URN the engine gives the ``BucketIdentity`` child ``name`` of a component of ``parent_type`` registered
    at the stack's root (``resource.NewURN``: the parent's type, ``$``, the child's)."""
    return f"urn:pulumi:{stack}::{project}::{parent_type}$pulumi-python:dynamic/storage:BucketIdentity::{name}"


@dataclass(frozen=True)
class BucketArgs:
    """What the bucket component is built from."""

    spec: BucketSpec
    """The bucket's arguments (``bucket_args``)."""
    protect: bool
    """``tpu-rl:protect``: the bucket cannot be deleted while it is set."""


TYPE = "tpu-rl:gcp:ArtifactBucket"


class ArtifactBucket(pulumi.ComponentResource):
    """One regional bucket, next to the cluster, protected per stack; a change that would replace it is refused at
    plan time in every stack (``BucketIdentity``, registered first: the bucket depends on it)."""

    bucket: gcp.storage.Bucket
    identity: BucketIdentity
    url: pulumi.Output[str]

    def __init__(self, name: str, args: BucketArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TYPE, name, None, opts)
        spec = args.spec
        identity = {key: value for key, value in spec.items() if key in IDENTITY_KEYS}
        urn = identity_urn(pulumi.get_stack(), pulumi.get_project(), TYPE, "bucket-identity")
        self.identity = BucketIdentity("bucket-identity", {**identity, "urn": urn}, child_options(self, opts))
        self.bucket = gcp.storage.Bucket(
            "bucket", **spec, opts=child_options(self, opts, protect=args.protect, depends_on=[self.identity])
        )
        self.url = self.bucket.name.apply(lambda n: f"gs://{n}")
        self.register_outputs({"name": self.bucket.name, "url": self.url})
