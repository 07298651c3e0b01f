"""``always-made`` on the program's own plans, through pulumi-policy's own analyzer configured as the engine
configures it: the plans draw nothing, at `pulumi up` and at a preview; a plan without a NetworkPolicy or the namespace
the program always makes, or with a step's pod without its step label, is refused, naming it (word
for word as tests/data/always-made-messages.tsv has it, reviewed; `TPU_RL_UPDATE_MESSAGES=1` rewrites it)."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
from collections.abc import Callable

import pytest

from core.closed_world import load
from policy.tpu_rl_policies.always_made import always_made
from tests import analyzer
from tests.conftest import plan_of
from tools.closed_world import VARIANTS
from tools.plan.offline import Plan
from tools.stack_files import ROOT

pytestmark = pytest.mark.program

MESSAGES = ROOT / "tests" / "data" / "always-made-messages.tsv"
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
EGRESS = ("kubernetes:networking.k8s.io/v1:NetworkPolicy", "network-policy-evaluation-egress")


def _findings(plan: Plan, stack: tuple[str, ...], *, preview: bool = False) -> list[str]:
    pack = analyzer.Pack(
        analyzer.policy_config_file(stack[0]),
        dry_run=preview,
        policies=[always_made],
        stack=stack[0],
        stack_config=analyzer.engine_config(*stack),
    )
    return [f.message for f in pack.analyze_stack(analyzer.resources(plan, preview=preview, stack_view=True))]


@pytest.mark.parametrize("stack", [("dev",), ("prod",)], ids=["dev", "prod"])
@pytest.mark.parametrize("preview", [False, True], ids=["up", "preview"])
def test_the_example_stacks_plans_draw_nothing(stack, preview):
    assert _findings(plan_of(*stack), stack, preview=preview) == []


@pytest.mark.slow  # every variant's plan
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_every_variants_plan_draws_nothing(variant):
    stack = VARIANTS[variant]
    assert _findings(plan_of(*stack), stack) == []


def _without(type_: str, name: str) -> Callable[[Plan], Plan]:
    def change(plan: Plan) -> Plan:
        return dataclasses.replace(
            plan, resources=[r for r in plan.resources if (r["type"], r["name"]) != (type_, name)]
        )

    return change


def _unlabelled(step: str, job: int, label: str) -> Callable[[Plan], Plan]:
    def change(plan: Plan) -> Plan:
        resources = []
        for r in plan.resources:
            if r["type"] == JOBSET and r["inputs"]["metadata"]["labels"].get("app.kubernetes.io/component") == step:
                r = copy.deepcopy(r)
                del r["inputs"]["spec"]["replicatedJobs"][job]["template"]["spec"]["template"]["metadata"]["labels"][
                    label
                ]
            resources.append(r)
        wire = {k: v for k, v in plan.wire.items() if k[0] != JOBSET}
        return dataclasses.replace(plan, resources=resources, wire=wire)

    return change


CASES = {
    "the-evaluation-egress-policy-left-out": _without(*EGRESS),
    "the-namespace-left-out": _without("kubernetes:core/v1:Namespace", "namespace"),
    "the-default-deny-left-out": _without(
        "kubernetes:networking.k8s.io/v1:NetworkPolicy", "network-policy-default-deny-ingress"
    ),
    "a-worker-pod-without-its-step-label": _unlabelled("train", 1, "app.kubernetes.io/component"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_what_the_program_always_makes_is_required(case):
    found = _findings(CASES[case](plan_of("dev")), ("dev",))
    reviewed = dict(line.split("\t", 1) for line in MESSAGES.read_text().splitlines()) if MESSAGES.exists() else {}
    if os.environ.get("TPU_RL_UPDATE_MESSAGES"):
        reviewed[case] = json.dumps(found)
        MESSAGES.write_text("".join(f"{c}\t{reviewed[c]}\n" for c in CASES if c in reviewed))
    assert len(found) == 1
    assert found == json.loads(reviewed[case])


def test_the_list_holds_the_isolation_the_program_always_makes():
    world = load()
    assert EGRESS in world.always and ("kubernetes:core/v1:Namespace", "namespace") in world.always
    assert not [t for t, _ in world.always if t == "kubernetes:core/v1:Secret"], "a Secret is made when configured"
    assert not [t for t, _ in world.always if t.startswith("tpu-rl:")], "a component makes nothing itself"
    assert "app.kubernetes.io/component" in world.pod_labels


def test_the_stacks_outputs_naming_the_steps_images_are_no_pods():
    """The stack's outputs name each step's image (``images.maxtext.image``): the real engine sends them with the
    stack's root resource, and an image there is no pod to label (the real engine found it: test_local_engine.py)."""
    plan = plan_of("dev")
    outputs = {"images": {"maxtext": {"image": "us-docker.pkg.dev/cloud-tpu-images/maxtext-images/x:0.2.5"}}}
    root = analyzer.Resource(
        "pulumi:pulumi:Stack", "tpu-rl-dev", "urn:pulumi:dev::tpu-rl::pulumi:pulumi:Stack::tpu-rl-dev", outputs
    )
    pack = analyzer.Pack(
        analyzer.policy_config_file("dev"),
        policies=[always_made],
        stack="dev",
        stack_config=analyzer.engine_config("dev"),
    )
    found = pack.analyze_stack([*analyzer.resources(plan, preview=False, stack_view=True), root])
    assert [f.message for f in found] == []
