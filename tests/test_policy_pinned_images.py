"""``pinned-images`` on one container's image, called as the engine calls it (``tests/policy_args.py``): which
references are pinned by a tag, which by a digest, and what each finding says."""

from __future__ import annotations

from typing import Any

import pytest
from pulumi_policy import ResourceValidationArgs

from policy.tpu_rl_policies.workloads import _pinned_images
from tests.policy_args import OPTIONS, TYPE, URN, Reports

pytestmark = pytest.mark.pure

DIGEST = "sha256:" + "0123456789abcdef" * 4
PATHWAYS = "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/server"


def findings(image: Any, digests: bool = False) -> list[str]:
    """What ``pinned-images`` says of a Job whose one container runs ``image``, with the config the engine sends
    (``digests`` as given, the schema's default false otherwise)."""
    props = {"spec": {"template": {"spec": {"containers": [{"name": "main", "image": image}]}}}}
    report = Reports()
    _pinned_images(ResourceValidationArgs(TYPE, props, URN, "step", OPTIONS, None, {"digests": digests}), props, report)
    return [message for message, _ in report.calls]


def unpinned(image: str) -> list[str]:
    return [f"container main: image {image} is not pinned; use a version tag or a digest"]


@pytest.mark.parametrize(
    "image",
    [
        "maxtext:0.2.5",
        "us-docker.pkg.dev/cloud-tpu-images/maxtext-images/tpu_post_training:0.2.5",
        "registry:5000/team/name:v1",
        "name:" + "v" * 128,
        "name:_v1.0-rc",
        f"us-docker.pkg.dev/x/y@{DIGEST}",
        f"us-docker.pkg.dev/x/y:latest@{DIGEST}",
    ],
    ids=["bare", "registry-path", "port-in-host", "longest-tag", "tag-characters", "digest", "latest-with-digest"],
)
def test_a_tag_or_a_digest_pins_an_image(image):
    assert findings(image) == []


@pytest.mark.parametrize(
    "image",
    [
        "maxtext",
        "maxtext:latest",
        "maxtext:Latest",
        "registry:5000/team/name",
        "registry:5000/name",
        "name:" + "v" * 129,
        "name:.v1",
        "name:v1:v2",
        "team:v1/name",
        "host/:v1",
        "name:v1@sha256:short",
        f"name@{DIGEST}/x",
    ],
    ids=[
        "untagged",
        "latest",
        "latest-in-any-case",
        "port-only",
        "port-only-short",
        "tag-too-long",
        "tag-starting-with-a-dot",
        "two-tags",
        "tag-in-a-middle-component",
        "no-name",
        "bad-digest",
        "digest-not-at-the-end",
    ],
)
def test_an_image_without_a_usable_tag_or_digest_is_not_pinned(image):
    """A tag is what follows the ``:`` of the last path component, after a name, up to 128 characters of
    distribution/reference's alphabet (not starting with ``.`` or ``-``), and not ``latest`` in any case; a ``:`` in
    the host is a port; a digest is ``@sha256:`` and 64 hex digits at the end."""
    assert findings(image) == unpinned(image)


@pytest.mark.parametrize(("image", "shown"), [(None, "(none)"), ("", "(none)"), (7, "7")])
def test_an_image_that_is_no_text_is_not_pinned(image, shown):
    assert findings(image) == [f"container main: image {shown} is not pinned; use a version tag or a digest"]


def test_with_digests_a_tag_is_not_enough():
    """``digests: true``: every image by digest; a tag alone is named, with why the offline plan cannot meet it."""
    assert findings(f"maxtext@{DIGEST}", digests=True) == []
    assert findings("maxtext:0.2.5", digests=True) == [
        "container main: image maxtext:0.2.5 is not pinned by digest; `pulumi up` pins each tag to its registry's "
        "digest (the offline plan does not: leave pinned-images' digests off for it)"
    ]


def test_a_pathways_image_is_pinned_by_digest_only():
    assert findings(f"{PATHWAYS}@{DIGEST}") == []
    assert findings(f"{PATHWAYS}:jax-0.5.3") == [
        f"container main: Pathways image {PATHWAYS}:jax-0.5.3 must be pinned by digest (it must match the client's "
        "JAX); set tpu-rl:images"
    ]
