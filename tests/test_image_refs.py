"""Image references as data (``core.images``), called directly: how a reference splits, what it is refused for,
the digest pins written over the configured images, and the mirrors' ids, paths and repository arguments, each at
the edge of its rule (a port, ``localhost``, a tag after a port, an id cut at 63 characters)."""

from __future__ import annotations

import hashlib
import json

import pytest

from core import images
from core.settings import ImageSettings

pytestmark = pytest.mark.pure

D1 = "sha256:" + "1" * 64
D2 = "sha256:" + "2" * 64
AR = "us-docker.pkg.dev/cloud-tpu-images/maxtext-images"
MAXTEXT = f"{AR}/tpu_post_training:0.2.5"
SERVER = "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/server:latest"
PROXY = "ghcr.io/google/pathways/proxy_server:jax-0.8"
IMAGES = ImageSettings(maxtext=MAXTEXT, pathways_server=SERVER, pathways_proxy=PROXY)


@pytest.mark.parametrize(
    ("image", "split"),
    [
        (MAXTEXT, ("us-docker.pkg.dev", "cloud-tpu-images/maxtext-images/tpu_post_training", "0.2.5", None)),
        (f"{AR}/x@{D1}", ("us-docker.pkg.dev", "cloud-tpu-images/maxtext-images/x", None, D1)),
        (f"{AR}/x:v1@{D1}", ("us-docker.pkg.dev", "cloud-tpu-images/maxtext-images/x", "v1", D1)),
        ("localhost/x", ("localhost", "x", None, None)),
        ("localhost:5000/team/x:v1", ("localhost:5000", "team/x", "v1", None)),
        ("registry:5000/x", ("registry:5000", "x", None, None)),
        ("host.example/a:b/c", ("host.example", "a:b/c", None, None)),
        ("host.example/a/c:v1:v2", ("host.example", "a/c:v1", "v2", None)),
        ("host.example/x/a:b/c", ("host.example", "x/a:b/c", None, None)),
        ("host.example/x:", ("host.example", "x", None, None)),
    ],
    ids=[
        "tagged",
        "pinned",
        "tagged-and-pinned",
        "localhost",
        "a-port",
        "a-host-with-a-port",
        "a-colon-in-a-folder",
        "the-last-colon-is-the-tags",
        "a-colon-in-a-middle-folder",
        "an-empty-tag",
    ],
)
def test_a_reference_splits_into_host_name_tag_and_digest(image: str, split: tuple[object, ...]) -> None:
    ref = images.parse(image)
    assert (ref.host, ref.name, ref.tag, ref.digest) == split


@pytest.mark.parametrize(
    "image",
    ["ubuntu:22.04", "library/ubuntu", "host.example", "host.example/", "/x"],
    ids=["no-host", "a-path-with-no-host", "a-host-alone", "a-host-and-a-slash", "an-empty-host"],
)
def test_a_reference_without_a_registry_host_or_a_repository_is_refused(image: str) -> None:
    with pytest.raises(ValueError) as raised:
        images.parse(image)
    assert str(raised.value) == f"image {image!r} names no registry host"


@pytest.mark.parametrize(
    "digest", ["sha256:abc", "md5:" + "1" * 64, "sha256:" + "A" * 64], ids=["short", "md5", "upper"]
)
def test_a_digest_that_is_no_sha256_is_refused(digest: str) -> None:
    with pytest.raises(ValueError) as raised:
        images.parse(f"{AR}/x@{digest}")
    assert str(raised.value) == f"image '{AR}/x@{digest}' has a digest that is not sha256:<64 hex>"
    with pytest.raises(ValueError) as raised:
        images.parse(MAXTEXT).pinned(digest)
    assert str(raised.value) == f"not a sha256 digest: {digest!r}"


def test_a_reference_names_its_manifest_by_digest_then_tag_then_latest() -> None:
    assert images.parse(f"{AR}/x:v1@{D1}").reference == D1
    assert images.parse(f"{AR}/x:v1").reference == "v1"
    assert images.parse(f"{AR}/x").reference == "latest"
    assert images.parse(f"{AR}/x:v1").pinned(D1) == f"{AR}/x@{D1}"


@pytest.mark.parametrize(
    ("tag", "release"),
    [("0.2.5", "0.2.5"), ("maxtext-v0.2.4", "0.2.4"), ("v0.2.5-rc1", "0.2.5"), ("latest", None), ("2026-12-07", None)],
)
def test_a_tag_names_a_maxtext_release_or_none(tag: str, release: str | None) -> None:
    assert images.tag_release(f"{AR}/x:{tag}") == release
    assert images.tag_release(f"{AR}/x") is None


def test_only_the_images_named_by_tag_are_resolved_and_pinned() -> None:
    configured = ImageSettings(maxtext=MAXTEXT, pathways_server=f"{AR}/server@{D1}", pathways_proxy=PROXY)
    assert images.to_resolve(configured) == {"maxtext": MAXTEXT, "pathwaysProxy": PROXY}
    pinned = images.pin_images(configured, {"maxtext": D2})
    assert (pinned.maxtext, pinned.pathways_server, pinned.pathways_proxy) == (
        f"{AR}/tpu_post_training@{D2}",
        f"{AR}/server@{D1}",
        PROXY,
    )
    both = images.pin_images(configured, {"pathwaysServer": D2, "pathwaysProxy": D1})
    assert (both.maxtext, both.pathways_server, both.pathways_proxy) == (
        MAXTEXT,
        f"{AR}/server@{D2}",
        f"ghcr.io/google/pathways/proxy_server@{D1}",
    )
    with pytest.raises(ValueError) as raised:
        images.pin_images(configured, {"maxtext": D1, "trainer": D1, "another": D1})
    assert str(raised.value) == "no image key ['another', 'trainer']"


@pytest.mark.parametrize(
    ("value", "pins"),
    [
        (None, {}),
        ("", {}),
        ("not json", {}),
        ("[1]", {}),
        (json.dumps({MAXTEXT: D1, SERVER: "sha256:short", PROXY: 3}), {MAXTEXT: D1}),
    ],
    ids=["unset", "empty", "not-json", "a-list", "only-digests-kept"],
)
def test_the_pins_in_state_keep_only_digests(value: str | None, pins: dict[str, str]) -> None:
    assert images.recorded_pins(value) == pins


def test_the_images_output_and_the_pins_it_records() -> None:
    running = images.pin_images(IMAGES, {"maxtext": D1})
    output = images.image_outputs(IMAGES, running)
    assert output["maxtext"] == {"configured": MAXTEXT, "image": f"{AR}/tpu_post_training@{D1}", "digest": D1}
    assert output["pathwaysProxy"] == {"configured": PROXY, "image": PROXY, "digest": None}
    assert images.pins_of_outputs(output) == {MAXTEXT: D1}
    odd = {"odd": "text", "bad": {"configured": SERVER, "digest": "x"}}
    assert images.pins_of_outputs({**odd, **output}) == {MAXTEXT: D1}
    assert images.pins_of_outputs([output]) == {}


@pytest.mark.parametrize(
    ("image", "upstream"),
    [
        (MAXTEXT, AR),
        (f"{AR}/a/b:v1", AR),
        ("us-east5-docker.pkg.dev/p/r/x", "us-east5-docker.pkg.dev/p/r"),
        (f"{AR}", None),
        ("us-docker.pkg.dev/p/r", None),
        (PROXY, None),
        ("gcr.io/p/r/x", None),
    ],
    ids=["maxtext", "nested-name", "a-region", "no-image-name", "a-repository-alone", "another-registry", "gcr"],
)
def test_an_images_artifact_registry_repository(image: str, upstream: str | None) -> None:
    assert images.upstream_repository(image) == upstream


def test_a_mirrors_id_is_the_upstreams_in_the_ids_alphabet_cut_with_a_hash() -> None:
    assert images.repository_id("tpu-rl-dev", AR) == "tpu-rl-dev-cloud-tpu-images-maxtext-images"
    assert images.repository_id("--Team_", "h/My.Project/Repo--") == "team--my-project-repo"
    exactly = f"h/{'p' * 25}/{'r' * 25}"  # "a-bcdefghij-" (12), 25, "-", 25: 63 characters, kept whole
    assert images.repository_id("a-bcdefghij", exactly) == f"a-bcdefghij-{'p' * 25}-{'r' * 25}"
    one_more = f"h/{'p' * 26}/{'r' * 25}"  # 64: cut to 54 (its trailing hyphens dropped) and 8 of the hash
    digest = hashlib.sha256(one_more.encode()).hexdigest()[:8]
    assert images.repository_id("a-bcdefghij", one_more) == f"a-bcdefghij-{'p' * 26}-{'r' * 15}-{digest}"
    at_a_hyphen = f"h/{'p' * 41}/{'r' * 25}"  # the 54th character is the hyphen after the project
    digest = hashlib.sha256(at_a_hyphen.encode()).hexdigest()[:8]
    assert images.repository_id("a-bcdefghij", at_a_hyphen) == f"a-bcdefghij-{'p' * 41}-{digest}"
    with pytest.raises(ValueError) as raised:
        images.repository_id("9", "h/p/r")
    assert str(raised.value) == "no repository id can be made of '9' and 'h/p/r'"


def test_the_mirrors_of_the_images_and_the_images_named_through_them() -> None:
    mirrors = images.mirrors_for(IMAGES, "my-project", "us-east5", "tpu-rl-dev")
    assert sorted(mirrors) == [AR, "us-docker.pkg.dev/cloud-tpu-v2-images/pathways"]
    mirror = mirrors[AR]
    assert mirror.path == "us-east5-docker.pkg.dev/my-project/tpu-rl-dev-cloud-tpu-images-maxtext-images"
    assert mirror.upstream_uri == f"https://{AR}"
    through = images.mirrored(IMAGES, mirrors)
    assert through.maxtext == f"{mirror.path}/tpu_post_training:0.2.5"
    assert through.pathways_proxy == PROXY
    assert through.upstream == IMAGES
    assert images.through_mirror(through, "my-project", "us-east5", "tpu-rl-dev")
    assert not images.through_mirror(IMAGES, "my-project", "us-east5", "tpu-rl-dev")
    assert not images.through_mirror(through, "my-project", "us-east5", "tpu-rl-prod")
    local = ImageSettings(
        maxtext="us-east5-docker.pkg.dev/my-project/own/x:1", pathways_server=SERVER, pathways_proxy=PROXY
    )
    assert sorted(images.mirrors_for(local, "my-project", "us-east5", "p")) == [
        "us-docker.pkg.dev/cloud-tpu-v2-images/pathways"
    ]
    assert images.mirrored(IMAGES, {}).maxtext == MAXTEXT
    proxied = ImageSettings(maxtext=PROXY, pathways_server=PROXY, pathways_proxy=f"{AR}/proxy:1")
    assert images.mirrored(proxied, mirrors).pathways_proxy == f"{mirror.path}/proxy:1"


def test_a_mirrors_repository_arguments() -> None:
    mirror = images.Mirror("my-project", "us-east5", "tpu-rl-dev-x", AR)
    assert images.repository_args(mirror, {"stack": "dev"}) == {
        "project": "my-project",
        "location": "us-east5",
        "repository_id": "tpu-rl-dev-x",
        "format": "DOCKER",
        "mode": "REMOTE_REPOSITORY",
        "description": f"tpu-rl: pull-through copy of {AR}",
        "labels": {"stack": "dev"},
        "remote_repository_config": {
            "description": f"{AR} (Artifact Registry)",
            "common_repository": {"uri": f"https://{AR}"},
        },
    }
