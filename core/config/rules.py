"""Cross-field rules and derived values: typed field values -> ``Settings``.

``build_settings`` runs every rule in order, each in the module of its area: the cluster (``core.config.cluster_rules``:
the TPU slice and its capacity, GKE, the node pools), the storage (``core.config.storage_rules``: the bucket, the
state's home, the shared Hub cache), the training knobs (``core.config.training_rules``), the workflow and its
restarts (``core.config.workflow_rules``), Kueue (``core.config.kueue_rules``), the images
(``core.config.image_rules``), the combinations the steps could never finish (``core.config.finish``) and resume
(``core.config.resume``); the zone's region and the stack's labels are here.
Each rule reports the key a user would change, with the other value it conflicts with.
"""

from __future__ import annotations

import dataclasses
import re

from core.config.cluster_rules import (
    check_flex_start_zone,
    check_gke_version,
    existing_cluster,
    gke_settings,
    pool_settings,
    tpu_settings,
)
from core.config.fields import project_key as _k
from core.config.finish import check_actor_copy, check_cpu_disk, check_cpu_pool, check_meshes, check_steps_finish
from core.config.image_rules import image_settings
from core.config.kueue_rules import check_own_queue, kueue_settings
from core.config.resume import check_resume_exact
from core.config.storage_rules import access_settings, bucket_name, check_state_backend, hub_cache
from core.config.training_rules import training_settings
from core.config.values import UNREADABLE, Problems, Values, error
from core.config.workflow_rules import (
    check_token,
    check_train_deadline,
    publish_settings,
    restarts_for_run,
    workflow_settings,
)
from core.models import MODELS
from core.names import PROJECT
from core.settings import ModelSettings, Settings


def build_settings(v: Values, stack: str, problems: Problems) -> Settings:
    """Apply the cross-field rules to typed field values and assemble ``Settings``. Every rule's problem goes to
    ``problems`` (a rule that needs a value which failed is skipped: that value's problem is there already);
    with any problem the result is ``UNREADABLE`` and the caller raises them all."""
    run = problems.run
    run(_zone_in_region, v)
    bucket = run(bucket_name, v, stack)
    tpu_and_shape = run(tpu_settings, v)
    tpu, shape = (UNREADABLE, UNREADABLE) if tpu_and_shape is UNREADABLE else tpu_and_shape
    gke = run(gke_settings, v)
    existing = run(existing_cluster, v)
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
    run(check_train_deadline, v, training, model, shape, tpu)
    publish = run(publish_settings, v, stack)
    run(check_own_queue, v)
    kueue = run(kueue_settings, v, tpu, cpu_pool)
    images = run(image_settings, v)
    run(check_state_backend, v, bucket)
    shared_cache = run(hub_cache, v, bucket, stack)
    access = run(access_settings, v)
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
        shared_project=v[_k("sharedProject")],
        access=access,
        existing=existing,
    )


def _zone_in_region(v: Values) -> None:
    region, zone = v["gcp:region"], v["gcp:zone"]
    if zone.rsplit("-", 1)[0] != region:
        raise error("gcp:zone", zone, f"must be a zone of gcp:region {region} (e.g. {region}-b)")


def label_value(text: str) -> str:
    """A GCP label value: lowercase letters, digits, underscores and hyphens, at most 63."""
    return re.sub(r"[^a-z0-9_-]", "-", text.lower())[:63]
