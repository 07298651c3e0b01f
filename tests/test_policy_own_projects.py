"""``own-projects`` and ``own-names`` on the program's own plans, through pulumi-policy's own analyzer configured as
the engine configures it: every variant's plan draws nothing (a Cloud KMS key of another project its configuration
names included); a change that points a resource at another project, or names one of the stack's Google Cloud
resources as another stack's, is refused, naming the resource, the path and the project or name (word for word as
tests/data/own-projects-messages.tsv has it, reviewed; `TPU_RL_UPDATE_MESSAGES=1` rewrites it)."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
from collections.abc import Callable
from typing import Any

import pytest

from core.project_refs import projects_in
from policy.tpu_rl_policies.own_projects import own_names, own_projects
from tests import analyzer
from tests.conftest import plan_of
from tools.closed_world import VARIANTS
from tools.plan.offline import Plan
from tools.stack_files import ROOT

pytestmark = pytest.mark.program

MESSAGES = ROOT / "tests" / "data" / "own-projects-messages.tsv"
NODE_POOL = "gcp:container/nodePool:NodePool"
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
EVERY_OPTION = VARIANTS["dev-every-option"]


def _findings(plan: Plan, stack: tuple[str, ...]) -> list[str]:
    pack = analyzer.Pack(
        analyzer.policy_config_file(stack[0]),
        policies=[own_projects, own_names],
        stack=stack[0],
        stack_config=analyzer.engine_config(*stack),
    )
    return [f.message for f in pack.analyze_stack(analyzer.resources(plan, preview=False, stack_view=True))]


@pytest.mark.parametrize("stack", [("dev",), ("prod",), EVERY_OPTION], ids=["dev", "prod", "every-option"])
def test_the_programs_plans_draw_nothing(stack):
    assert _findings(plan_of(*stack), stack) == []


@pytest.mark.slow  # every variant's plan
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_every_variants_plan_draws_nothing(variant):
    assert _findings(plan_of(*VARIANTS[variant]), VARIANTS[variant]) == []


def _changed(stack: tuple[str, ...], type_: str, name: str, change: Callable[[dict[str, Any]], None]) -> Plan:
    plan = plan_of(*stack)
    (target,) = [r for r in plan.resources if r["type"] == type_ and r["name"] == name]
    inputs = copy.deepcopy(target["inputs"])
    change(inputs)
    resources = [{**r, "inputs": inputs} if r is target else r for r in plan.resources]
    wire = {key: sent for key, sent in plan.wire.items() if key != (type_, name)}
    return dataclasses.replace(plan, resources=resources, wire=wire)


def _image_cache(image: str) -> Callable[[dict[str, Any]], None]:
    return lambda inputs: inputs["nodeConfig"].__setitem__(
        "secondaryBootDisks", [{"mode": "CONTAINER_IMAGE_CACHE", "diskImage": image}]
    )


def _worker_image(image: str) -> Callable[[dict[str, Any]], None]:
    def change(inputs: dict[str, Any]) -> None:
        pod = inputs["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]
        pod["containers"][0]["image"] = image

    return change


CASES: dict[str, tuple[tuple[str, ...], str, str, Callable[[dict[str, Any]], None]]] = {
    "an-image-cache-of-another-project": (
        ("dev",),
        NODE_POOL,
        "cpu-pool",
        _image_cache("projects/someone-else/global/images/tpu-rl-images-0-2-5"),
    ),
    "a-node-account-of-another-project": (
        ("dev",),
        NODE_POOL,
        "tpu-pool-0",
        lambda inputs: inputs["nodeConfig"].__setitem__(
            "serviceAccount", "tpu-rl-dev-tpu-np@my-tpu-prod-project.iam.gserviceaccount.com"
        ),
    ),
    "a-node-pool-in-another-project": (
        ("dev",),
        NODE_POOL,
        "system-pool",
        lambda inputs: inputs.__setitem__("project", "someone-else"),
    ),
    "an-account-named-as-the-other-stacks": (
        ("dev",),
        "gcp:serviceaccount/account:Account",
        "convert-sa",
        lambda inputs: inputs.__setitem__("accountId", "tpu-rl-prod-convert"),
    ),
    "a-network-named-as-no-stacks": (
        ("dev",),
        "gcp:compute/network:Network",
        "vpc",
        lambda inputs: inputs.__setitem__("name", "default"),
    ),
    "an-account-acting-as-another-steps": (
        ("dev",),
        "kubernetes:core/v1:ServiceAccount",
        "convert-ksa",
        lambda inputs: inputs["metadata"]["annotations"].__setitem__(
            "iam.gke.io/gcp-service-account", "tpu-rl-dev-publish@my-tpu-dev-project.iam.gserviceaccount.com"
        ),
    ),
    "a-worker-image-from-another-project": (
        ("dev",),
        JOBSET,
        "gemma4-e4b-train-b15ce3fb3f",
        _worker_image("us-docker.pkg.dev/someone-else/pathways/server:latest"),
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_reference_to_another_project_is_refused(case):
    stack, type_, name, change = CASES[case]
    found = _findings(_changed(stack, type_, name, change), stack)
    reviewed = dict(line.split("\t", 1) for line in MESSAGES.read_text().splitlines()) if MESSAGES.exists() else {}
    if os.environ.get("TPU_RL_UPDATE_MESSAGES"):
        reviewed[case] = json.dumps(found)
        MESSAGES.write_text("".join(f"{c}\t{reviewed[c]}\n" for c in CASES if c in reviewed))
    assert len(found) == 1
    assert found == json.loads(reviewed[case])


def test_the_own_image_cache_passes():
    """The program's own form (``global/images/<name>``, the stack's project) and the stack's project spelled out."""
    for image in ("global/images/tpu-rl-images-0-2-5", "projects/my-tpu-dev-project/global/images/x"):
        assert _findings(_changed(("dev",), NODE_POOL, "cpu-pool", _image_cache(image)), ("dev",)) == []


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("projects/my-proj/zones/z/reservations/r", ["my-proj"]),
        ("a@b-project.iam.gserviceaccount.com", ["b-project"]),
        ("p-roject1.svc.id.goog[ns/ksa]", ["p-roject1"]),
        ("europe-docker.pkg.dev/my-mirror/r/i:1 gcr.io/old-proj/i", ["my-mirror", "old-proj"]),
        ("projects/123456789012/serviceAccounts/x", []),
        ("projects/-/serviceAccounts/x projects/_/buckets/b", []),
    ],
)
def test_a_project_is_read_where_a_google_name_puts_one(text, named):
    assert list(projects_in(text)) == named
