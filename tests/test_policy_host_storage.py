"""Where an object names the node's storage outside its pod volumes (``pods.host_storage``, the walk behind
``least-privilege-pods``' host path finding on any Kubernetes object): each ``hostPath`` and ``local`` volume path
with the property path the finding names, through lists and mappings down to the walk's depth limit (64 levels), and
nothing for another volume that merely has a ``path``."""

from __future__ import annotations

from typing import Any

import pytest

from policy.tpu_rl_policies.pods import host_storage

pytestmark = pytest.mark.pure


def _found(props: Any) -> list[tuple[str, str, Any]]:
    return list(host_storage(props, "", set(), 0))


def _nested_in_dicts(levels: int) -> dict[str, Any]:
    """A mapping whose ``hostPath`` key is on a mapping ``levels`` levels down."""
    node: dict[str, Any] = {"hostPath": {"path": "/var"}}
    for _ in range(levels):
        node = {"a": node}
    return node


def _nested_in_lists(levels: int) -> Any:
    """A ``hostPath`` mapping inside ``levels`` lists."""
    node: Any = {"hostPath": {"path": "/var"}}
    for _ in range(levels):
        node = [node]
    return node


@pytest.mark.parametrize(
    ("levels", "expected"),
    [
        (64, [(".".join(["a"] * 64 + ["hostPath"]), "hostPath", "/var")]),
        (65, []),
    ],
    ids=["at the depth limit", "below the depth limit"],
)
def test_a_host_path_in_nested_mappings_is_found_down_to_the_depth_limit(levels: int, expected: list[Any]) -> None:
    assert _found(_nested_in_dicts(levels)) == expected


@pytest.mark.parametrize(
    ("levels", "expected"),
    [
        (64, [("items" + "[0]" * 63 + ".hostPath", "hostPath", "/var")]),
        (65, []),
    ],
    ids=["at the depth limit", "below the depth limit"],
)
def test_a_host_path_in_nested_lists_is_found_down_to_the_depth_limit(levels: int, expected: list[Any]) -> None:
    """The mapping with the ``hostPath`` is ``levels`` levels down: in ``items``, then ``levels - 1`` more lists."""
    assert _found({"items": _nested_in_lists(levels - 1)}) == expected


def test_a_host_path_in_a_list_is_named_by_its_index() -> None:
    props = {"spec": {"volumes": [{"name": "a", "emptyDir": {}}, {"name": "b", "hostPath": {"path": "/tmp"}}]}}
    assert _found(props) == [("spec.volumes[1].hostPath", "hostPath", "/tmp")]


def test_a_local_volume_is_node_storage_and_another_volume_with_a_path_is_not() -> None:
    props = {
        "spec": {
            "local": {"path": "/mnt/disks/ssd0"},
            "nfs": {"server": "filer", "path": "/exports"},
            "csi": {"driver": "d", "volumeAttributes": {"path": "/x"}},
        }
    }
    assert _found(props) == [("spec.local", "local", "/mnt/disks/ssd0")]
