"""``least-privilege-pods`` on one volume (``workloads._volume``): a source no step uses, or a projection of one,
is named with every such source, sorted, and the fix; a host path is the TPU workers' ``/tmp`` only."""

from __future__ import annotations

from typing import Any

import pytest

from policy.tpu_rl_policies.workloads import _volume
from tests.policy_args import Reports

pytestmark = pytest.mark.pure

FIX = (
    "a source no step uses (it may reach the node, another pod's storage or an image of its own): mount emptyDir, "
    "ConfigMap, Secret, projected or downward API volumes, or a claim the stack declares"
)


def found(volume: dict[str, Any], tpu: bool = False) -> list[str]:
    report = Reports()
    _volume(volume, tpu, report)
    return [message for message, _ in report.calls]


@pytest.mark.parametrize(
    ("volume", "expected"),
    [
        ({"name": "v", "nfs": {"server": "s"}}, [f"volume v is a nfs volume, {FIX}"]),
        (
            {"name": "v", "nfs": {}, "gcePersistentDisk": {}, "emptyDir": {}},
            [f"volume v is a gcePersistentDisk, nfs volume, {FIX}"],
        ),
        ({"name": "v", "emptyDir": {}}, []),
        ({"name": "v", "persistentVolumeClaim": {"claimName": "c"}}, []),
    ],
    ids=["one-source", "two-sources-sorted", "empty-dir", "claim"],
)
def test_a_volume_of_a_source_no_step_uses_is_named_with_every_such_source(volume, expected):
    assert found(volume) == expected


@pytest.mark.parametrize(
    ("sources", "expected"),
    [
        (
            [{"configMap": {}}, {"secret": {}, "podCertificate": {}, "clusterTrustBundle": {}}],
            ["volume v projects podCertificate, a source no step uses: project ConfigMaps or Secrets"],
        ),
        (
            [{"zeta": {}, "alpha": {}}],
            ["volume v projects alpha, zeta, a source no step uses: project ConfigMaps or Secrets"],
        ),
        ([{"serviceAccountToken": {"path": "t"}}, {"downwardAPI": {}}], []),
    ],
    ids=["one-unknown", "two-unknown-sorted", "known"],
)
def test_a_projection_of_a_source_no_step_uses_is_named(sources, expected):
    assert found({"name": "v", "projected": {"sources": sources}}) == expected


@pytest.mark.parametrize(
    ("path", "tpu", "expected"),
    [
        ("/tmp", True, []),
        (
            "/tmp",
            False,
            ["volume v mounts the node's /tmp: only the Pathways workers on TPU hosts mount a host path (/tmp)"],
        ),
        ("/", True, ["volume v mounts the node's /: only the Pathways workers on TPU hosts mount a host path (/tmp)"]),
    ],
    ids=["tpu-tmp", "cpu-tmp", "tpu-root"],
)
def test_a_host_path_is_the_tpu_workers_tmp_only(path, tpu, expected):
    assert found({"name": "v", "hostPath": {"path": path}}, tpu) == expected
