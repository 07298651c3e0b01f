"""Edges of ``closed-world``: every image of a resource judged, whatever the images before it were; the line an
operator reads for one; the names the list's templates stand for when the configuration leaves them unset or gives
one that is no name of the stack's; and the stack's mirrors as the policy reads them. Through pulumi-policy's own
analyzer (``tests/analyzer.py``) with the dev stack's configuration as the engine sends it, unless a test says
otherwise."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from pulumi.output import Unknown

from policy.tpu_rl_policies.properties import Unseen
from policy.tpu_rl_policies.resources import Resource
from tests import analyzer
from tests.closed_world_stack import (
    CLOSED,
    JOBSET,
    MAXTEXT,
    MIRROR_PATH,
    REPOSITORY,
    ROLE_BINDING,
    UPSTREAM,
    Spec,
    mirror,
)

pytestmark = pytest.mark.pure

closed_world = importlib.import_module("policy.tpu_rl_policies.closed_world")
FIX = "remove it, or admit it with a reason in the base branch's policy/config/<stack>.json (closed-world.admit)"
CONTAINERS = "spec.replicatedJobs[0].template.spec.template.spec.containers"


def judge(
    *resources: Spec, preview: bool = False, stack_config: dict[str, str] | None = None
) -> list[analyzer.Finding]:
    """The policy, admitting nothing, on a stack of ``resources`` (type, name, props), with ``stack_config`` as the
    configuration the engine sends (the dev stack's when None)."""
    pack = analyzer.Pack(
        {"closed-world": {"enforcementLevel": "mandatory", "admit": []}},
        dry_run=preview,
        policies=[CLOSED],
        stack="dev",
        stack_config=analyzer.engine_config("dev") if stack_config is None else stack_config,
    )
    return pack.analyze_stack(
        [analyzer.Resource(t, n, f"urn:pulumi:dev::tpu-rl::{t}::{n}", p) for t, n, p in resources]
    )


def messages(*resources: Spec, **options: Any) -> list[str]:
    found = judge(*resources, **options)
    assert {f.level for f in found} <= {"mandatory"} and not any(f.unjudged for f in found)
    return [f.message for f in found]


def steps(*images: Any) -> Spec:
    """A JobSet whose one pod runs a container of each image, in order."""
    containers = [{"name": f"c{i}", "image": image} for i, image in enumerate(images)]
    pod = {"spec": {"containers": containers}}
    props = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "steps"}}
    return (JOBSET, "steps", {**props, "spec": {"replicatedJobs": [{"template": {"spec": {"template": pod}}}]}})


def refused(image: str, index: int) -> str:
    listed = ", ".join(sorted(closed_world.WORLD.images))
    return (
        f"steps: image {image} at {CONTAINERS}[{index}].image is not from a repository the program runs ({listed}; "
        f"tpu-rl:images.* moves only a tag or digest): {FIX}"
    )


def binding(namespace: str, name: str) -> Spec:
    subject = {"kind": "ServiceAccount", "namespace": namespace, "name": name}
    props = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "head"},
        "roleRef": {"kind": "Role", "name": "r"},
        "subjects": [subject],
    }
    return (ROLE_BINDING, "head", props)


# ---------------------------------------------------------------------------------------------
# Every image of a resource


@pytest.mark.parametrize(
    "before",
    [[["a"]], [None, 7], [f"{MAXTEXT}:0.2.6"], [f"{MAXTEXT}:0.2.6", "docker.io/library/ubuntu"]],
    ids=["not-text", "none-and-number", "listed", "listed-then-refused"],
)
def test_an_image_after_one_skipped_or_passed_is_still_judged(before: list[Any]) -> None:
    """An image that is not a text (no repository to judge) or one of a listed repository decides nothing for the
    containers after it: the last, of no listed repository, is refused, at its own path."""
    last = "docker.io/library/nginx"
    expected = [refused(image, i) for i, image in enumerate(before) if image == "docker.io/library/ubuntu"]
    assert messages(steps(*before, last)) == [*expected, refused(last, len(before))]


def test_an_image_a_mirror_not_known_yet_may_serve_leaves_the_next_judged() -> None:
    """At a preview where a mirror's upstream is unknown, an image of an Artifact Registry path waits for `pulumi up`;
    the container after it, of a registry no mirror can be, is refused now."""
    found = judge(steps(f"{MIRROR_PATH}/tpu_post_training:0.2.5", "ghcr.io/x/y"), mirror(mode=Unknown()), preview=True)
    assert sorted((f.level, f.unjudged) for f in found) == [("advisory", True), ("mandatory", False)]
    assert next(f.message for f in found if not f.unjudged) == refused("ghcr.io/x/y", 1)


def test_an_images_line_names_its_path_and_every_listed_repository() -> None:
    """The path as the resource spells it, only its leading dot dropped (a first key beginning with ``X`` too), and
    the repositories the program runs, each named."""
    assert len(closed_world.WORLD.images) >= 2
    runner = ("kubernetes:example.com/v1:Runner", "runner", {"XPU": {"workers": [{"image": "a.io/b:1"}]}})
    listed = ", ".join(sorted(closed_world.WORLD.images))
    assert (
        f"runner: image a.io/b:1 (repository a.io/b) at XPU.workers[0].image is not from a repository the program "
        f"runs ({listed}; tpu-rl:images.* moves only a tag or digest): {FIX}" in messages(runner)
    )
    assert f"{MAXTEXT}, us-docker.pkg.dev/cloud-tpu-v2-images/pathways/" in listed


# ---------------------------------------------------------------------------------------------
# The names the templates stand for


def test_an_unset_cluster_name_and_namespace_stand_for_their_defaults() -> None:
    """The engine sends the stack's configuration without ``tpu-rl:clusterName`` or ``tpu-rl:namespace``: the head's
    account is the defaults' (``tpu-rl-train-head`` in ``tpu-rl``), and no other stack's."""
    config = {"gcp:project": "my-tpu-dev-project", "gcp:region": "us-east5"}
    assert messages(binding("tpu-rl", "tpu-rl-train-head"), stack_config=config) == []
    (message,) = messages(binding("tpu-rl", "tpu-rl-dev-train-head"), stack_config=config)
    assert message.startswith("head: RBAC subject ServiceAccount tpu-rl/tpu-rl-dev-train-head is not one the program")


@pytest.mark.parametrize("cluster", ["Tpu-RL", "tpu-rl-", "tpu-rl-dev-with-a-long-name"])
def test_a_cluster_name_that_is_no_clusters_stands_for_nothing(cluster: str) -> None:
    """A configured cluster name the configuration's format refuses (an upper-case letter, a trailing hyphen, over
    20 characters) names no account of the stack's: a subject made from it is refused, from the configuration or, when
    the engine sends none, from the stack's cluster."""
    subject = binding("tpu-rl", f"{cluster}-train-head")
    config = analyzer.engine_config("dev", f"tpu-rl:clusterName={cluster}")
    assert len(messages(subject, stack_config=config)) == 1
    namespace = (
        "kubernetes:core/v1:Namespace",
        "ns",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tpu-rl"}},
    )
    stack = ("gcp:container/cluster:Cluster", "cluster", {"name": cluster})
    assert len(messages(subject, stack, namespace, stack_config={})) == 1
    named = ("gcp:container/cluster:Cluster", "cluster", {"name": "tpu-rl-dev"})
    assert messages(binding("tpu-rl", "tpu-rl-dev-train-head"), named, namespace, stack_config={}) == []


# ---------------------------------------------------------------------------------------------
# The stack's mirrors


def repository(**props: Any) -> Resource:
    _, name, inputs = mirror(**props)
    return Resource(REPOSITORY, inputs, f"urn:pulumi:dev::tpu-rl::{REPOSITORY}::{name}", name)


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        ([], ({}, False)),
        ([repository()], ({MIRROR_PATH: UPSTREAM.removeprefix("https://")}, False)),
        ([repository(mode="STANDARD_REPOSITORY")], ({}, False)),
        ([repository(), repository(repositoryId=Unseen(".repositoryId"))], ({MIRROR_PATH: UPSTREAM[8:]}, True)),
    ],
    ids=["none", "remote", "standard", "one-unknown"],
)
def test_the_stacks_mirrors_and_whether_one_is_not_known_yet(resources: list[Resource], expected: tuple) -> None:
    """Each remote repository's path and its upstream's, and a boolean: whether a repository's is not known yet."""
    found = closed_world._mirrors(resources)
    assert found == expected and type(found[1]) is bool
