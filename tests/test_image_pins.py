"""A tag's digest is read once per stack: `make up` hands the program the digests the state's last `up` pinned
(``tools.state_export.pins_in_state`` -> ``TPU_RL_IMAGES_IN_STATE`` -> ``core.images.recorded_pins``), so a tag that
moves upstream after a run renames no finished or running step (which would run hours of TPU work again), while a new
tag in the configuration is read from its registry."""

from __future__ import annotations

import dataclasses
import json

import pytest

from core.images import image_outputs, pins_of_outputs, recorded_pins
from program.stack import _pinned_images
from tests.lifecycle_walk import settings, workflow
from tools.state_export import pins_in_state

pytestmark = pytest.mark.pure

OLD = "sha256:" + "a" * 64
NEW = "sha256:" + "b" * 64
TAG = "us-docker.pkg.dev/cloud-tpu-images/maxtext-images/tpu_post_training:nightly"
"""A tag that names no MaxText release (one that names another than the adopted is refused: core/images.py)."""


def export(outputs: dict) -> str:
    """A `pulumi stack export` as the CLI writes it (apitype.UntypedDeployment of a DeploymentV3): the stack's own
    resource holds the program's outputs."""
    stack = {"urn": "urn:pulumi:prod::tpu-rl::pulumi:pulumi:Stack::tpu-rl-prod", "type": "pulumi:pulumi:Stack"}
    return json.dumps({"version": 3, "deployment": {"resources": [{**stack, "outputs": outputs}]}})


def test_the_state_records_each_tags_digest_and_nothing_else():
    s = settings("prod", [f"tpu-rl:images.maxtext={TAG}"])
    running = dataclasses.replace(s.images, maxtext=TAG.rsplit(":", 1)[0] + "@" + OLD)
    outputs = {"images": image_outputs(s.images, running)}
    pins = pins_in_state(export(outputs))
    assert pins[TAG] == OLD
    assert all(value.startswith("sha256:") for value in pins.values())
    assert pins_of_outputs(outputs["images"]) == pins


def test_a_state_without_pins_holds_none():
    assert pins_in_state(export({})) == {}
    assert pins_in_state(json.dumps({"version": 3, "deployment": None})) == {}
    assert pins_of_outputs({"maxtext": {"configured": TAG, "image": TAG, "digest": None}}) == {}


@pytest.mark.parametrize("value", [None, "", "not json", "[1]", '{"a": 1}', json.dumps({TAG: "sha256:short"})])
def test_what_is_not_a_pin_is_not_used(value):
    assert recorded_pins(value) == {}


def test_a_recorded_tag_keeps_its_digest_when_the_tag_moved():
    asked: list[str] = []

    def resolve(image: str, *, key: str = "") -> str:
        asked.append(image)
        return NEW

    s = settings("prod", [f"tpu-rl:images.maxtext={TAG}"])
    pinned, plan = _pinned_images(s, workflow(s), resolve, json.dumps({TAG: OLD}))
    assert pinned.images.maxtext.endswith("@" + OLD) and asked == []
    moved, moved_plan = _pinned_images(s, workflow(s), resolve, None)
    assert moved.images.maxtext.endswith("@" + NEW) and asked == [TAG]
    assert plan is not None and moved_plan is not None
    assert [step.name for step in plan] != [step.name for step in moved_plan], "a new digest is a new step"


def test_a_new_tag_is_read_from_its_registry():
    other = TAG.replace("nightly", "nightly-2")
    s = settings("prod", [f"tpu-rl:images.maxtext={other}"])
    pinned, _ = _pinned_images(s, workflow(s), lambda image, *, key: NEW, json.dumps({TAG: OLD}))
    assert pinned.images.maxtext.endswith("@" + NEW)
