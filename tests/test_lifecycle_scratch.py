"""The CPU steps' scratch claims no disk: an ``emptyDir`` on cpu-np's boot disk, bounded, that goes with the pod
(``workloads.specs.step_manifests.scratch_volume`` says why). The walk that shows nothing billed outlives a stack is
``test_lifecycle_destroy.py``."""

from __future__ import annotations

import json

import pytest

from tests.lifecycle_walk import settings
from tools.lifecycle_walk import PUBLISHING
from workloads.specs.step_manifests import scratch_volume
from workloads.specs.step_specs import plan_workflow

pytestmark = pytest.mark.pure

SCRATCH_GIB = {
    "dev": {"convert": 52, "export": 36, "publish": 36},
    "prod": {"convert": 124, "export": 72, "publish": 72},
}
"""The steps' scratch: the conversion holds the download and the converted copy (2 x the bf16 weights + 20),
the export and the publication the exported model (1 x + 20); gemma4-e4b's weights are 16 GiB, gemma4-26b's 52."""


def pods(manifest: dict) -> list[dict]:
    return [r["template"]["spec"]["template"]["spec"] for r in manifest["spec"]["replicatedJobs"]]


def test_the_scratch_volume_is_a_bounded_emptydir():
    assert scratch_volume(124) == {"name": "scratch", "emptyDir": {"sizeLimit": "124Gi"}}


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_cpu_step_scratches_on_the_nodes_disk_and_no_step_claims_one(stack):
    workflow = plan_workflow(settings(stack, PUBLISHING))
    for step in workflow.steps:
        text = json.dumps(step.manifest)
        assert '"ephemeral"' not in text and "persistentVolumeClaim" not in text and "storageClassName" not in text, (
            f"{step.step} claims a disk"
        )
        for pod in pods(step.manifest):
            for container in pod["containers"]:
                asked = {**container["resources"].get("requests", {}), **container["resources"].get("limits", {})}
                # Kueue 0.17.1 admits a pod set only if its ClusterQueue covers every resource it requests.
                assert "ephemeral-storage" not in asked, (step.step, container["name"])
        if step.step == "train":
            continue
        (pod,) = pods(step.manifest)
        scratch = next(v for v in pod["volumes"] if v["name"] == "scratch")
        assert scratch == scratch_volume(SCRATCH_GIB[stack][step.step])
        (container,) = pod["containers"]
        assert {"name": "scratch", "mountPath": "/scratch"} in container["volumeMounts"]


def allocatable_gib(boot_disk_gb: int) -> float:
    """What GKE lets pods use of a node's boot disk ("Plan GKE Standard node sizes", local ephemeral storage):
    the filesystem (about 94.25 % of the disk: the page's 100 GB node shows ``ephemeral-storage: 98831908Ki``)
    less the kubelet's 10 % eviction threshold and the system reservation ``min(50 % of the disk, 6 GiB + 35 %
    of it, 100 GiB)``. The page's own node: allocatable 47060071478 bytes, 43.83 GiB; this gives 43.83."""
    filesystem = 0.9425 * boot_disk_gb
    return filesystem * 0.9 - min(0.5 * boot_disk_gb, 6 + 0.35 * boot_disk_gb, 100)


def test_the_allocatable_formula_gives_the_pages_own_node():
    assert allocatable_gib(100) == pytest.approx(47060071478 / 2**30, abs=0.05)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_cpu_np_boot_disk_holds_the_largest_scratch(stack):
    s = settings(stack, PUBLISHING)
    assert max(SCRATCH_GIB[stack].values()) <= allocatable_gib(s.cpu_pool.disk_size_gb) - 20, (
        "the largest scratch, with 20 GiB for the step's image layer and logs"
    )
