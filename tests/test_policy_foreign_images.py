"""How deep the pack searches a resource of another provider for the images it runs (``pods._foreign``), as
``known-workload-kinds`` refuses it through pulumi-policy's own analyzer (``tests/analyzer.py``): an image whose
mapping is ``pods.MAX_DEPTH`` levels below the properties, through mappings, lists and the YAML or JSON text of a
container definition (an ECS task's ``containerDefinitions``), is refused at its full path; one level deeper is not
searched for, and said to be unjudged. Each level counts once, the text's top as one more: counted faster, an image
the pack reaches would pass unrefused; counted slower (or not at all), the search of a hostile resource would go
unbounded."""

from __future__ import annotations

import json
from typing import Any

import pytest

from policy.tpu_rl_policies.pods import MAX_DEPTH
from tests import analyzer

pytestmark = pytest.mark.pure

ECS_TASK = "aws:ecs/taskDefinition:TaskDefinition"
PUBLIC = "docker.io/library/busybox:1.36"


def refused(props: dict[str, Any]) -> list[str]:
    """What ``known-workload-kinds`` says of an ECS task definition at `pulumi up` (each finding on that resource)."""
    task = analyzer.Resource(ECS_TASK, "task", f"urn:pulumi:dev::tpu-rl::{ECS_TASK}::task", props)
    return analyzer.found_at_up(analyzer.pack_policy("known-workload-kinds"), task)


def definitions(levels: int, container: str) -> dict[str, Any]:
    """An ECS task whose container definitions (JSON text, its top one level below the properties) hold one image
    ``levels`` mappings (``a``) or lists below their top."""
    node: Any = {"name": "web", "image": PUBLIC}
    for _ in range(levels):
        node = {"a": node} if container == "mapping" else [node]
    return {"family": "web", "containerDefinitions": json.dumps(node)}


@pytest.mark.parametrize("container", ["mapping", "list"])
def test_an_image_at_the_packs_depth_in_a_container_definition_is_refused_at_its_path(container):
    levels = MAX_DEPTH - 1  # the image's mapping: MAX_DEPTH levels below the properties
    shown = "containerDefinitions" + (".a" if container == "mapping" else "[0]") * levels + ".image"
    assert refused(definitions(levels, container)) == [
        f"{ECS_TASK} task runs images outside the cluster ({shown}): tpu-rl runs its steps as JobSets in its cluster, "
        "where the pack judges their pods' identity and host access; remove it"
    ]


@pytest.mark.parametrize("container", ["mapping", "list"])
def test_what_lies_one_level_past_the_packs_depth_is_not_searched_and_said_unjudged(container):
    """Deeper than the pack reads, a mapping or list may hold an image: it is not searched (the search stays
    bounded), and not passed over either: at `pulumi up` the policy says it cannot judge it."""
    shown = "containerDefinitions" + (".a" if container == "mapping" else "[0]") * MAX_DEPTH
    assert refused(definitions(MAX_DEPTH, container)) == [
        f"cannot judge {shown} (nested more than {MAX_DEPTH} levels): not known at `pulumi up`; give it a value the "
        "program knows"
    ]


def test_properties_nested_past_the_packs_depth_are_said_unjudged_at_the_path_they_have():
    """Not a text but the properties themselves nested deeper than the pack reads: ``plain`` made what lies there a
    value not known, at its own path, and that value (not another at the search's path) is the one the policy names."""
    node: Any = {"name": "web", "image": PUBLIC}
    for _ in range(MAX_DEPTH):
        node = {"a": node}
    assert refused({"family": "web", "spec": node}) == [
        f"cannot judge .spec{'.a' * MAX_DEPTH} (nested more than {MAX_DEPTH} levels): not known at `pulumi up`; give "
        "it a value the program knows"
    ]
