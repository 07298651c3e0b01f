"""The storage's rules: the artifacts bucket's name, the state's home apart from what the steps read or a destroy
empties, who the stack names as its own (``tpu-rl:access``), and the shared Hub cache in a bucket of its own with its
one writer."""

from __future__ import annotations

from core.config.fields import project_key as _k
from core.config.formats import BUCKET_NAME
from core.config.values import Values, error
from core.printed_commands import pulumi_config_set
from core.settings import AccessSettings


def bucket_name(v: Values, stack: str) -> str:
    """``tpu-rl:bucketName``, or its default ``<gcp:project>-<clusterName>`` when that is a valid bucket name."""
    bucket: str | None = v[_k("bucketName")]
    if bucket is not None:
        return bucket
    bucket = f"{v['gcp:project']}-{v[_k('clusterName')]}"
    if not BUCKET_NAME.matches(bucket):
        raise error(
            _k("bucketName"),
            None,
            f"required: the default {bucket} (gcp:project-tpu-rl:clusterName) is not a valid bucket name; "
            f"set one with `{pulumi_config_set(stack, _k('bucketName'), '<name>')}`",
        )
    return bucket


def check_state_backend(v: Values, bucket: str) -> None:
    """The state lives in a bucket of its own: the stack's bucket is emptied by a destroy with ``forceDestroy``,
    and its readers (the steps' identities) would read the state; a shared Hub cache is read by other stacks."""
    backend: str | None = v[_k("stateBackend")]
    held = (backend or "").removeprefix("gs://").partition("/")[0] if (backend or "").startswith("gs://") else ""
    if held and held == bucket:
        raise error(
            _k("stateBackend"),
            backend,
            "names the stack's artifacts bucket, which a destroy may empty and the steps read: keep the state in a "
            "bucket of its own (leave the key unset: `make stack` records gs://<gcp:project>-pulumi-state-<stack>)",
        )
    cache = v[_k("model.hubCache")] or ""
    if held and held == cache.removeprefix("gs://").partition("/")[0]:
        raise error(
            _k("stateBackend"),
            backend,
            "names the bucket of the shared Hub cache (tpu-rl:model.hubCache), which other stacks read: keep the state "
            "in a bucket of its own",
        )


def access_settings(v: Values) -> AccessSettings:
    """``tpu-rl:access``: its members, readers and Workload Identity pool, as read."""
    return AccessSettings(
        members=v[_k("access.members")],
        readers=v[_k("access.readers")],
        workload_identity_pool=v[_k("access.workloadIdentityPool")],
    )


def hub_cache(v: Values, bucket: str, stack: str) -> tuple[str, str]:
    """The shared Hub cache and its one writer. It lives in a bucket of its own: the stack's bucket is emptied by a
    destroy with ``forceDestroy`` (and deleted with the stack), which would take every other stack's cache with it.
    One stack writes it (``tpu-rl:model.hubCacheWriter``, the same in every stack sharing it); the others get
    read-only grants on it (``infra.gcp.access.hub_cache_grants``)."""
    folder: str = v[_k("model.hubCache")]
    writer: str = v[_k("model.hubCacheWriter")]
    if folder and folder.removeprefix("gs://").partition("/")[0] == bucket:
        raise error(
            _k("model.hubCache"),
            folder,
            "is in the stack's own bucket, which a destroy empties: leave it empty (the stack's own cache) or name a "
            "bucket the stacks share",
        )
    if folder and not writer:
        raise error(
            _k("model.hubCacheWriter"),
            writer,
            "required with tpu-rl:model.hubCache: the one stack whose conversion writes the shared cache (the others "
            f"only read it); set it in every stack that shares it, to the same stack: "
            f"`{pulumi_config_set(stack, _k('model.hubCacheWriter'), '<writer-stack>')}`",
        )
    if writer and not folder:
        raise error(
            _k("model.hubCacheWriter"),
            writer,
            "names the writer of a shared Hub cache, and tpu-rl:model.hubCache names none: set both, or neither",
        )
    return folder, writer
