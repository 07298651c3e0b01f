"""The stack's image mirrors (``tpu-rl:images.mirror``): an Artifact Registry remote repository in
the stack's project and region per upstream repository, every step's image named through it, the node accounts that
pull (cpu-np's and the TPU pools') granted the reader role on each mirror only, the pools waiting for those grants;
nothing of it when the key is off."""

from __future__ import annotations

import pytest

from core import images
from core.config.workflow_keys import DEFAULT_IMAGES
from infra.gcp import access
from tests.conftest import plan_of
from tests.lifecycle_walk import settings, workflow

REPO = "gcp:artifactregistry/repository:Repository"
REPO_MEMBER = "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember"
PROJECT_MEMBER = "gcp:projects/iAMMember:IAMMember"
MIRROR = "tpu-rl:images.mirror=true"
UPSTREAMS = {"us-docker.pkg.dev/cloud-tpu-images/maxtext-images", "us-docker.pkg.dev/cloud-tpu-v2-images/pathways"}


def _images(plan):
    return {
        c["image"]
        for step in plan
        for job in step.manifest["spec"]["replicatedJobs"]
        for c in job["template"]["spec"]["template"]["spec"]["containers"]
    }


@pytest.mark.pure
def test_the_settings_name_every_image_through_the_stacks_mirror_in_its_project_and_region():
    s = settings("prod", [MIRROR])
    local = f"{s.region}-docker.pkg.dev/{s.project}/{s.cluster_name}-"
    assert s.images.maxtext == f"{local}cloud-tpu-images-maxtext-images/tpu_post_training:0.2.5"
    assert (
        s.images.pathways_server
        == f"{local}cloud-tpu-v2-images-pathways/server@" + DEFAULT_IMAGES["pathwaysServer"].split("@")[1]
    )
    assert all(image.startswith(local) for image in _images(workflow(s)))
    off = settings("prod", [])
    assert off.images.maxtext == DEFAULT_IMAGES["maxtext"], "off by default: the images as configured"
    mirrored_plan, plain_plan = workflow(s), workflow(off)
    assert mirrored_plan is not None and plain_plan is not None
    assert {step.name for step in mirrored_plan}.isdisjoint({step.name for step in plain_plan}), (
        "a new image location: new steps"
    )


@pytest.mark.pure
def test_an_image_already_in_the_stacks_project_and_region_or_in_another_registry_is_not_mirrored():
    own = "us-east5-docker.pkg.dev/my-tpu-prod-project/mine/tpu_post_training:1"
    s = settings(
        "prod",
        [
            MIRROR,
            f"tpu-rl:images.maxtext={own}",
            'tpu-rl:images.registries=["us-east5-docker.pkg.dev/my-tpu-prod-project", "ghcr.io/me", '
            '"us-docker.pkg.dev/cloud-tpu-v2-images"]',
            "tpu-rl:images.pathwaysProxy=ghcr.io/me/proxy:1",
        ],
    )
    assert s.images.maxtext == own and s.images.pathways_proxy == "ghcr.io/me/proxy:1"
    assert "-cloud-tpu-v2-images-pathways/server@" in s.images.pathways_server


@pytest.mark.pure
@pytest.mark.parametrize(
    ("prefix", "upstream"),
    [
        ("tpu-rl-prod", "us-docker.pkg.dev/cloud-tpu-images/maxtext-images"),
        ("a" * 40, "europe-docker.pkg.dev/some-very-long-project-name-x/some_Repo.Name"),
    ],
)
def test_a_mirrors_id_is_a_valid_repository_id_and_tells_upstreams_apart(prefix, upstream):
    made = images.repository_id(prefix, upstream)
    assert images.REPOSITORY_ID.fullmatch(made) and len(made) <= 63
    assert made != images.repository_id(prefix, upstream + "2")


def test_the_plan_has_a_remote_repository_per_upstream_and_reader_grants_on_each_only():
    plan = plan_of("prod", MIRROR)
    repos = plan.find(REPO)
    assert {r["inputs"]["remoteRepositoryConfig"]["commonRepository"]["uri"] for r in repos} == {
        f"https://{u}" for u in UPSTREAMS
    }
    for repo in repos:
        inputs = repo["inputs"]
        assert (inputs["mode"], inputs["format"], inputs["location"]) == ("REMOTE_REPOSITORY", "DOCKER", "us-east5")
        assert inputs["project"] == "my-tpu-prod-project" and inputs["labels"]["stack"] == "prod"
    readers = plan.find(REPO_MEMBER)
    assert {m["inputs"]["role"] for m in readers} == {access.REGISTRY_READER_ROLE}
    assert {m["name"].split("-")[0] for m in readers} == {"cpu", "tpu"}, "the pullers only, not system or a step"
    assert len(readers) == 2 * len(repos)
    consumers = [m for m in plan.find(PROJECT_MEMBER) if m["inputs"]["role"] == access.SERVICE_USAGE_ROLE]
    assert sorted(m["name"] for m in consumers) == [
        "cpu-project-serviceUsageConsumer",
        "tpu-project-serviceUsageConsumer",
    ]
    services = {s["inputs"]["service"] for s in plan.find("gcp:projects/service:Service")}
    assert "artifactregistry.googleapis.com" in services
    for pool in plan.find("gcp:container/nodePool:NodePool"):
        waits = set(pool["options"]["dependsOn"])
        assert {r["name"] for r in repos} | {m["name"] for m in readers + consumers} <= waits, pool["name"]
    outputs = plan.outputs["images"]
    assert outputs["maxtext"]["configured"] == DEFAULT_IMAGES["maxtext"]
    assert outputs["maxtext"]["image"].startswith("us-east5-docker.pkg.dev/my-tpu-prod-project/tpu-rl-prod-")


def test_without_the_key_the_plan_has_no_mirror(prod_plan):
    assert prod_plan.find(REPO) == [] and prod_plan.find(REPO_MEMBER) == []
    assert all(m["inputs"]["role"] != access.SERVICE_USAGE_ROLE for m in prod_plan.find(PROJECT_MEMBER))
    services = {s["inputs"]["service"] for s in prod_plan.find("gcp:projects/service:Service")}
    assert "artifactregistry.googleapis.com" not in services


@pytest.mark.pure
def test_the_pullers_get_the_reader_role_on_each_mirror_and_nothing_without_one():
    grants = access.registry_grants(["m1", "m2"])
    on_repos = {(g.holder, g.repository) for g in grants if g.role == access.REGISTRY_READER_ROLE}
    assert on_repos == {(h, r) for h in ("cpu", "tpu") for r in ("m1", "m2")}
    assert all(g.repository for g in grants if g.role == access.REGISTRY_READER_ROLE), "never project-wide"
    assert access.registry_grants([]) == []


def test_up_reads_the_digest_where_the_image_is_published_and_pins_the_mirrors_name():
    from program.stack import _pinned_images

    digest = "sha256:" + "c" * 64
    read = []

    def resolve(image, *, key):
        read.append(image)
        return digest

    mirrored = settings("prod", [MIRROR])
    pinned, plan = _pinned_images(mirrored, workflow(mirrored), resolve, None)
    assert read == [DEFAULT_IMAGES["maxtext"]], "the mirror may not exist yet: the upstream is read"
    assert pinned.images.maxtext == images.parse(mirrored.images.maxtext).pinned(digest)
    assert all("@sha256:" in image for image in _images(plan))


# The policy pack follows: digests where the policy config asks for them, the mirrors by its registries.


def _pinned_jobsets(plan, digest):
    import copy

    pinned = copy.deepcopy(plan)
    for r in pinned.resources:
        if r["type"] == "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet":
            for job in r["inputs"]["spec"]["replicatedJobs"]:
                for c in job["template"]["spec"]["template"]["spec"]["containers"]:
                    if "@" not in c["image"]:
                        c["image"] = images.parse(c["image"]).pinned(digest)
    return pinned


def violations(plan, name, stack, config=None):
    """What the named resource policy of the pack reports on ``plan``, with ``policy/config/<stack>.json`` (or
    ``config`` as its properties), as the engine runs it at `up` (``tests/analyzer.py``)."""
    import json

    import policy.tpu_rl_policies as pack
    from tests import analyzer
    from tools.plan.offline import ROOT

    file = json.loads((ROOT / "policy" / "config" / f"{stack}.json").read_text())
    if config is not None:
        file = {**file, name: {"enforcementLevel": "mandatory", **config}}
    (policy,) = [p for p in pack.POLICIES if p.name == name]
    runner = analyzer.Pack(file, dry_run=False, policies=[policy])
    found = [f for r in analyzer.resources(plan, preview=False, stack_view=False) for f in runner.analyze(r)]
    return [f.message for f in found if f.policy == name]


def test_the_policy_asks_for_digests_only_where_its_config_says_so():
    from tests.pure_plan import pure_plan

    plan = pure_plan("prod")
    assert violations(plan, "pinned-images", "prod") == [], "tags pass by default (the offline plan reads no registry)"
    required = violations(plan, "pinned-images", "prod", config={"digests": True})
    assert required and all("is not pinned by digest" in v and "tpu_post_training:0.2.5" in v for v in required)
    pinned = _pinned_jobsets(plan, "sha256:" + "d" * 64)
    assert violations(pinned, "pinned-images", "prod", config={"digests": True}) == []


def test_the_policy_trusts_the_stacks_mirrors_by_their_upstream_with_no_config():
    """The mirrors are judged by their upstream, in the same stack (``trusted-registries``, a stack policy): turning
    the mirror on needs no entry in the pack's config (tests/test_policy_images.py: each rule at its boundary)."""
    import policy.tpu_rl_policies as pack
    from tests import analyzer
    from tests.pure_plan import pure_plan

    plan = pure_plan("prod", MIRROR)
    (policy,) = [p for p in pack.POLICIES if p.name == "trusted-registries"]
    runner = analyzer.Pack(analyzer.policy_config_file("prod"), policies=[policy], stack="prod")
    assert runner.analyze_stack(analyzer.resources(plan, preview=False, stack_view=True)) == []


def test_the_account_running_up_needs_artifact_registry_admin_only_with_a_mirror():
    from infra.gcp.permissions import needed

    assert "artifactregistry.repositories.create" not in needed(settings("prod", []))
    assert needed(settings("prod", [MIRROR]))["artifactregistry.repositories.setIamPolicy"] == (
        "roles/artifactregistry.admin"
    )
