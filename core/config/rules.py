"""Cross-field rules and derived values: typed field values -> ``Settings``.

``build_settings`` runs every rule, each in the module of its area: the cluster (``core.config.cluster_rules``: the TPU
slice and its capacity, GKE, the node pools), the training knobs (``core.config.training_rules``), the workflow and
its restarts (``core.config.workflow_rules``), Kueue (``core.config.kueue_rules``), the combinations the steps could
never finish (``core.config.finish``) and resume (``core.config.resume``); the storage, the images and the list
readers are here.
Each rule reports the key a user would change, with the other value it conflicts with.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from core.config.cluster_rules import (
    check_flex_start_zone,
    check_gke_version,
    gke_settings,
    pool_settings,
    tpu_settings,
)
from core.config.finish import check_actor_copy, check_cpu_disk, check_cpu_pool, check_meshes, check_steps_finish
from core.config.kueue_rules import check_own_queue, kueue_settings
from core.config.resume import check_resume_exact
from core.config.training_rules import training_settings
from core.config.values import UNREADABLE, Problems, UnreadableError, Values, canonical_cidr, error
from core.config.workflow_rules import check_token, publish_settings, restarts_for_run, workflow_settings
from core.images import mirrored, mirrors_for, tag_release
from core.inputs import parse_json
from core.maxtext_keys import MAXTEXT_VERSION
from core.models import MODELS
from core.names import PROJECT
from core.printed_commands import pulumi_config_set
from core.settings import ImageSettings, ModelSettings, Settings

MAX_REGISTRIES = 20
MAX_AUTHORIZED_NETWORKS = 50
"""GKE's limit of authorized networks for a cluster with a public endpoint."""

IMAGE_NAMES = ("maxtext", "pathwaysServer", "pathwaysProxy")


def _k(path: str) -> str:
    return f"{PROJECT}:{path}"


def _config_list(
    key: str, value: Any, *, items: str, example: str, purpose: str, limit: int, counted: str, too_many: str
) -> list[Any]:
    """A non-empty JSON list (a stack file's YAML list, or the CLI's JSON text) of at most ``limit`` items."""
    if isinstance(value, str):
        if value[:1] != "[":
            raise error(key, value, f"a list of {items}, e.g. {example}")
        try:
            value = parse_json(value, "a config value")
        except ValueError:
            raise error(key, value, f"malformed JSON; expected a list of {items}") from None
    if not isinstance(value, list) or not value:
        raise error(key, value, f"a non-empty list of {items} {purpose}")
    if len(value) > limit:
        raise error(key, f"{len(value)} {counted}", too_many)
    return value


def read_networks(key: str, value: Any) -> tuple[str, ...]:
    """A non-empty list of unique canonical IPv4 CIDRs, at most GKE's limit."""
    networks = _config_list(
        key,
        value,
        items="CIDRs",
        example='["203.0.113.0/24"]',
        purpose="that may reach the control plane",
        limit=MAX_AUTHORIZED_NETWORKS,
        counted="networks",
        too_many=f"GKE allows at most {MAX_AUTHORIZED_NETWORKS} authorized networks",
    )
    problems = Problems()
    seen: dict[str, int] = {}
    for index, item in enumerate(networks):
        cidr = problems.run(canonical_cidr, f"{key}[{index}]", item)
        if cidr is UNREADABLE:
            continue
        if cidr in seen:
            problems.add(error(f"{key}[{index}]", item, f"duplicate of {key}[{seen[cidr]}]"))
        seen.setdefault(cidr, index)
    problems.check()
    return tuple(networks)


def read_registries(key: str, value: Any) -> tuple[str, ...]:
    """A non-empty list of unique registry paths (host and repository path)."""
    from core.config.formats import REGISTRY

    registries = _config_list(
        key,
        value,
        items="registry paths",
        example='["us-docker.pkg.dev/cloud-tpu-images"]',
        purpose="the images may come from",
        limit=MAX_REGISTRIES,
        counted="registries",
        too_many=f"at most {MAX_REGISTRIES}",
    )
    problems = Problems()
    for index, item in enumerate(registries):
        if problems.run(REGISTRY, f"{key}[{index}]", item) is not UNREADABLE and item in registries[:index]:
            problems.add(error(f"{key}[{index}]", item, f"duplicate of {key}[{registries.index(item)}]"))
    problems.check()
    return tuple(registries)


def _images(v: Values) -> ImageSettings:
    registries = v[_k("images.registries")]
    problems = Problems()
    images = {name: problems.run(lambda n: v[_k(f"images.{n}")], name) for name in IMAGE_NAMES}
    for name, image in images.items():
        if image is not UNREADABLE and not any(image.startswith(f"{registry}/") for registry in registries):
            problems.add(
                error(
                    _k(f"images.{name}"),
                    image,
                    f"not from an allowed registry ({', '.join(registries)}); add its registry to "
                    "tpu-rl:images.registries if you trust it",
                )
            )
    check = v[_k("images.maxtextCheck")]
    if images["maxtext"] is not UNREADABLE:
        problems.run(_maxtext_release, images["maxtext"], check)
    problems.check()
    if UNREADABLE in images.values():
        raise UnreadableError("images")
    configured = ImageSettings(
        images["maxtext"], images["pathwaysServer"], images["pathwaysProxy"], registries, maxtext_check=check
    )
    if v[_k("images.mirror")] is not True:
        return configured
    # Through the stack's own remote repositories (``core.images.mirrors_for``): step names see where nodes pull.
    mirrors = mirrors_for(configured, v["gcp:project"], v["gcp:region"], v[_k("clusterName")])
    return mirrored(configured, mirrors)


def _maxtext_release(image: str, check: str) -> None:
    """An image whose tag names another MaxText release (``core.images.tag_release``) than the one adopted: every
    MaxText step's check (``workloads/container/maxtext_check.py``) would stop it, unless told to warn."""
    release = tag_release(image)
    if release is None or release == MAXTEXT_VERSION or check == "warn":
        return
    raise error(
        _k("images.maxtext"),
        image,
        f"its tag names MaxText {release}, and tpu-rl's checks ran on {MAXTEXT_VERSION}, so every MaxText step would "
        f"stop at its image check: use the tpu_post_training image of {MAXTEXT_VERSION}, adopt {release} first (make "
        f'maxtext VERSION={release}, docs/releases.md "Adopting a MaxText release"), or set '
        "tpu-rl:images.maxtextCheck warn to run it unchecked",
    )


def build_settings(values: dict[str, Any], stack: str, problems: Problems) -> Settings:
    """Apply the cross-field rules to typed field values and assemble ``Settings``. Every rule's problem goes to
    ``problems`` (a rule that needs a value which failed is skipped: that value's problem is there already);
    with any problem the result is ``UNREADABLE`` and the caller raises them all."""
    v = values if isinstance(values, Values) else Values(values)
    run = problems.run
    run(_zone_in_region, v)
    bucket = run(_bucket, v, stack)
    tpu_and_shape = run(tpu_settings, v)
    tpu, shape = (UNREADABLE, UNREADABLE) if tpu_and_shape is UNREADABLE else tpu_and_shape
    gke = run(gke_settings, v)
    run(check_flex_start_zone, tpu, v)
    run(check_gke_version, tpu, v, gke)
    system_pool = run(pool_settings, v, "systemPool")
    cpu_pool = run(pool_settings, v, "cpuPool")
    model = run(lambda: MODELS[v[_k("model.name")]])
    training = run(training_settings, v)
    workflow = run(workflow_settings, v, tpu, model)
    if run(lambda: v[_k("workflow.enabled")]) is True:
        run(check_token, v, stack)
        run(check_cpu_pool, cpu_pool, model, run(lambda w: w.step_memory_gib, workflow))
        run(check_cpu_disk, cpu_pool, model)
        run(lambda t, s, u: check_meshes(t, s.chips, u.slices), training, shape, tpu)
        run(lambda t, s, u: check_actor_copy(t, s.chips, u.slices), training, shape, tpu)
        run(lambda t, w: check_steps_finish(t, w.steps), training, workflow)
        run(check_resume_exact, training)
    # Apart from the workflow's other settings, which the rules above read whatever the training's problems.
    restarts = run(restarts_for_run, v, tpu, training, model, shape)
    publish = run(publish_settings, v, stack)
    run(check_own_queue, v)
    kueue = run(kueue_settings, v, tpu, cpu_pool)
    images = run(_images, v)
    run(_state_backend, v, bucket)
    shared_cache = run(_hub_cache, v, bucket, stack)
    if problems.lines:
        return UNREADABLE
    return Settings(
        stack=stack,
        project=v["gcp:project"],
        region=v["gcp:region"],
        zone=v["gcp:zone"],
        cluster_name=v[_k("clusterName")],
        bucket_name=bucket,
        authorized_networks=v[_k("authorizedNetworks")],
        tpu=tpu,
        slice=shape,
        system_pool=system_pool,
        cpu_pool=cpu_pool,
        gke=gke,
        protect=v[_k("protect")],
        force_destroy=v[_k("forceDestroy")],
        bucket_versioning=v[_k("bucketVersioning")],
        namespace=v[_k("namespace")],
        hf_token_set=v["hfTokenSet"],
        model=ModelSettings(model, v[_k("model.revision")], *shared_cache),
        images=images,
        training=training,
        workflow=dataclasses.replace(workflow, max_restarts=restarts),
        kueue=kueue,
        labels={"app": PROJECT, "stack": label_value(stack), "cluster": v[_k("clusterName")], "managed-by": "pulumi"},
        publish=publish,
        hf_write_token_set=v["hfWriteTokenSet"],
        shared_project=v[_k("sharedProject")],
    )


def _zone_in_region(v: Values) -> None:
    region, zone = v["gcp:region"], v["gcp:zone"]
    if zone.rsplit("-", 1)[0] != region:
        raise error("gcp:zone", zone, f"must be a zone of gcp:region {region} (e.g. {region}-b)")


def _bucket(v: Values, stack: str) -> str:
    bucket: str | None = v[_k("bucketName")]
    if bucket is not None:
        return bucket
    from core.config.formats import BUCKET_NAME

    bucket = f"{v['gcp:project']}-{v[_k('clusterName')]}"
    if not BUCKET_NAME.matches(bucket):
        raise error(
            _k("bucketName"),
            None,
            f"required: the default {bucket} (gcp:project-tpu-rl:clusterName) is not a valid bucket name; "
            f"set one with `{pulumi_config_set(stack, _k('bucketName'), '<name>')}`",
        )
    return bucket


def _state_backend(v: Values, bucket: str) -> None:
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


def _hub_cache(v: Values, bucket: str, stack: str) -> tuple[str, str]:
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


def label_value(text: str) -> str:
    """A GCP label value: lowercase letters, digits, underscores and hyphens, at most 63."""
    return re.sub(r"[^a-z0-9_-]", "-", text.lower())[:63]
