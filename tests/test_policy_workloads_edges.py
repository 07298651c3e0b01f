"""``trusted-registries`` on an image named through one of the stack's own Artifact Registry repositories: trusted
only through a remote repository whose upstream (``commonRepository.uri``, ``dockerRepository.customRepository.uri``
or ``dockerRepository.publicRepository``) is a trusted registry; the refusal names the repository's mode or its
upstream as the operator configured it, on the pod that runs the image; what is not known yet is judged at `up`.
Judged on a two-resource stack (the repository and a Pod) through pulumi-policy's analyzer, as the engine runs it."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from tests import analyzer
from tools.plan.offline import UNKNOWN

pytestmark = pytest.mark.pure

policies = importlib.import_module("policy.tpu_rl_policies")
TRUSTED = analyzer.pack_policy("trusted-registries")
REPO = "gcp:artifactregistry/repository:Repository"
POD = "kubernetes:core/v1:Pod"
PROJECT, LOCATION, REPOSITORY_ID = "my-tpu-prod-project", "us-east5", "tpu-rl-prod-mirror"
PATH = f"{LOCATION}-docker.pkg.dev/{PROJECT}/{REPOSITORY_ID}"
IMAGE = f"{PATH}/tpu_post_training:0.2.5"
POD_URN = f"urn:pulumi:prod::tpu-rl::{POD}::step"
REGISTRIES = "us-docker.pkg.dev/cloud-tpu-images, us-docker.pkg.dev/cloud-tpu-v2-images"
TRUSTED_URI = "https://us-docker.pkg.dev/cloud-tpu-images"
CONFIG = ".remoteRepositoryConfig"


def judge(repository: dict[str, Any], *, preview: bool = False) -> list[analyzer.Finding]:
    """The policy's findings on a stack of the repository (these props) and a Pod running an image through it."""
    repo = analyzer.Resource(
        REPO,
        REPOSITORY_ID,
        f"urn:pulumi:prod::tpu-rl::{REPO}::{REPOSITORY_ID}",
        {"project": PROJECT, "location": LOCATION, "repositoryId": REPOSITORY_ID, **repository},
    )
    spec = {"containers": [{"name": "main", "image": IMAGE}]}
    pod = analyzer.Resource(POD, "step", POD_URN, {"metadata": {"name": "step", "namespace": "tpu-rl"}, "spec": spec})
    pack = analyzer.Pack({"all": "mandatory"}, dry_run=preview, policies=[TRUSTED], stack="prod")
    return pack.analyze_stack([repo, pod])


def remote(config: dict[str, Any]) -> dict[str, Any]:
    return {"mode": "REMOTE_REPOSITORY", "remoteRepositoryConfig": config}


@pytest.mark.parametrize(
    ("mode", "shown"),
    [(None, "STANDARD_REPOSITORY"), ("STANDARD_REPOSITORY", "STANDARD_REPOSITORY"), ("VIRTUAL_REPOSITORY", None)],
)
def test_a_repository_of_the_stack_that_is_not_remote_is_refused_naming_its_mode(mode, shown):
    """Its writers decide what it holds. Without a mode it is the provider's default, a standard repository."""
    (found,) = judge({} if mode is None else {"mode": mode})
    assert (found.level, found.urn, found.unjudged) == ("mandatory", POD_URN, False)
    assert found.message == (
        f"Pod step: container main: image {IMAGE} comes from the stack's repository {REPOSITORY_ID} ({PATH}), "
        f"a {shown or mode} whose writers decide what runs: name images through a remote repository of a trusted "
        "upstream (tpu-rl:images.mirror)"
    )


@pytest.mark.parametrize(
    "config",
    [
        {"commonRepository": {"uri": TRUSTED_URI}},
        {"commonRepository": {"uri": f"{TRUSTED_URI}/maxtext-images/"}},
        {"commonRepository": {"uri": "http://us-docker.pkg.dev/cloud-tpu-v2-images/pathways"}},
        {"dockerRepository": {"customRepository": {"uri": TRUSTED_URI}}},
        {"commonRepository": {"uri": ""}, "dockerRepository": {"customRepository": {"uri": TRUSTED_URI}}},
    ],
    ids=["common", "trailing-slash", "http", "custom", "empty-common-then-custom"],
)
def test_a_remote_repository_of_a_trusted_upstream_is_trusted(config):
    """The upstream is the first URI set (common, then a Docker custom repository), with or without its scheme
    (``https://`` or ``http://``) and a trailing slash."""
    assert judge(remote(config)) == []


@pytest.mark.parametrize(
    ("config", "upstream"),
    [
        ({}, "(none)"),
        ({"dockerRepository": {}}, "(none)"),
        ({"dockerRepository": {"publicRepository": "DOCKER_HUB"}}, "docker.io"),
        ({"commonRepository": {"uri": "https://registry-1.docker.io/"}}, "registry-1.docker.io"),
        ({"dockerRepository": {"customRepository": {"uri": "http://quay.io/ACME-BOX/"}}}, "quay.io/ACME-BOX"),
        ({"commonRepository": {"uri": f"{TRUSTED_URI}X"}}, "us-docker.pkg.dev/cloud-tpu-imagesX"),
    ],
    ids=["no-config", "no-docker-upstream", "docker-hub", "trailing-slash", "http-custom", "a-longer-name"],
)
def test_a_remote_repository_of_another_upstream_is_refused_naming_it(config, upstream):
    """The refusal shows the upstream without its scheme or trailing slash (``(none)`` where none is set: a remote
    repository pulls from nothing the pack can trust), and the trusted registries it is not among."""
    (found,) = judge(remote(config))
    assert (found.level, found.urn, found.unjudged) == ("mandatory", POD_URN, False)
    assert found.message == (
        f"Pod step: container main: image {IMAGE} comes through the stack's mirror {REPOSITORY_ID} ({PATH}), whose "
        f"upstream {upstream} is not a trusted registry ({REGISTRIES}): point the mirror at a trusted upstream"
    )


@pytest.mark.parametrize(
    ("repository", "path"),
    [
        ({"mode": UNKNOWN}, ".mode"),
        (remote({"dockerRepository": {"publicRepository": UNKNOWN}}), f"{CONFIG}.dockerRepository.publicRepository"),
    ],
    ids=["mode", "public-repository"],
)
def test_a_mode_or_upstream_not_known_yet_is_judged_at_up(repository, path):
    """At a preview the policy cannot judge it (advisory, naming the value); at `up` a value still unknown is refused.
    Never judged as a standard repository or a mirror of nothing."""
    (preview,) = judge(repository, preview=True)
    assert (preview.level, preview.unjudged) == ("advisory", True)
    assert preview.message.endswith(
        f"Repository {REPOSITORY_ID}: {path} not known until what they come from exists; judged at `pulumi up`"
    )
    (up,) = judge(repository)
    assert (up.level, up.message) == (
        "mandatory",
        f"cannot judge Repository {REPOSITORY_ID}: {path}: not known at `pulumi up`; give it a value the program knows",
    )
