"""Edges of who may touch what (``infra.gcp.access``): the node accounts are no step's identity, a shared Hub
cache's grants are bound to its folder and named for its bucket, and the image pullers' project grant. Pure."""

from __future__ import annotations

import pytest

from infra.gcp.access import (
    READER_ROLE,
    SERVICE_USAGE_ROLE,
    WRITER_ROLE,
    Access,
    BucketGrant,
    access,
    hub_cache_grants,
    registry_grants,
    step_identities,
)

pytestmark = pytest.mark.pure

CACHE = "hub/gemma4-26b/"
"""A shared Hub cache's folder in its bucket."""


def test_the_node_accounts_write_training_and_the_scratch_and_are_no_step_identity():
    """cpu-np's and the TPU pools' accounts run training (the Pathways head and workers use the node's account): they
    hold what training writes and reads, and no Kubernetes service account maps to them."""
    nodes = Access(write=("train", "scratch"), read=("convert",), step=False)
    assert access() == {
        "convert": Access(write=("convert",)),
        "export": Access(write=("export",), read=("train", "convert")),
        "publish": Access(write=("publish",), read=("export",)),
        "cpu": nodes,
        "tpu": nodes,
    }
    assert step_identities() == ("convert", "export", "publish")
    assert step_identities(("convert", "train", "export", "evaluate")) == ("convert", "export", "evaluate", "publish")


@pytest.mark.parametrize(("writes", "fills"), [(True, WRITER_ROLE), (False, READER_ROLE)])
def test_a_shared_hub_cache_is_granted_only_under_its_folder(writes, fills):
    """The writer's conversion fills the cache, every other stack's only reads it, the export reads it everywhere;
    each grant is conditioned on the folder, and named for the cache's bucket, beside the stack bucket's own."""
    grants = hub_cache_grants(CACHE, writes)
    assert grants == [
        BucketGrant("convert", fills, (CACHE,), "hubcache"),
        BucketGrant("export", READER_ROLE, (CACHE,), "hubcache"),
    ]
    role = fills.removeprefix("roles/storage.")
    assert [g.resource_name for g in grants] == [f"convert-hubcache-{role}", "export-hubcache-objectViewer"]
    for grant in grants:
        assert grant.condition("shared-cache") == {
            "title": f"{grant.holder} {grant.role_name} prefixes",
            "description": f"tpu-rl: only under {CACHE}",
            "expression": f'resource.name.startsWith("projects/_/buckets/shared-cache/objects/{CACHE}")',
        }


def test_each_image_puller_reads_each_mirror_and_consumes_the_project_services():
    """Artifact Registry Reader on each mirror, Service Usage Consumer on the project (Image streaming asks it of
    the node's own account): both node accounts, each under a resource name of its own."""
    grants = registry_grants(["docker-hub", "ghcr"])
    assert [(g.holder, g.role, g.repository) for g in grants] == [
        ("cpu", "roles/artifactregistry.reader", "docker-hub"),
        ("tpu", "roles/artifactregistry.reader", "docker-hub"),
        ("cpu", "roles/artifactregistry.reader", "ghcr"),
        ("tpu", "roles/artifactregistry.reader", "ghcr"),
        ("cpu", SERVICE_USAGE_ROLE, None),
        ("tpu", SERVICE_USAGE_ROLE, None),
    ]
    assert [g.resource_name for g in grants][-2:] == [
        "cpu-project-serviceUsageConsumer",
        "tpu-project-serviceUsageConsumer",
    ]
    assert registry_grants([]) == [], "nothing without a mirror"
