"""Every resource the program registers for the example stacks, pinned: its type, name, URN (the parent chain),
inputs (secrets unwrapped, and as they cross the wire), options and replacement trigger, and the stack's outputs
and the lines it logs (not the SDK's debug lines, whose order follows its threads), one digest each in
``tests/data/registered-resources.tsv``. A change to how the components are cut (what each takes, how it reads the
world) must leave this file as it is; a change that means to alter the plan rewrites it (``TPU_RL_UPDATE_PLANS=1
make test``), and its diff names each resource that changed."""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

import pytest

from tests.conftest import plan_of
from tests.example_stacks import STACKS
from tools.plan.offline import Plan
from tools.stack_files import ROOT

pytestmark = pytest.mark.program

PINNED = ROOT / "tests" / "data" / "registered-resources.tsv"


def digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=repr).encode()).hexdigest()[:20]


def rows(variant: str, plan: Plan) -> list[str]:
    """One line per resource (``variant  type  name  digest``), then the outputs' and the logs' lines."""
    lines = []
    for resource in plan.resources:
        type_, name = resource["type"], resource["name"]
        options = dict(resource["options"])
        trigger = options.pop("replacementTrigger")
        whole = {
            "urn": plan.urns.get(name),
            "inputs": plan.raw_inputs.get(name),
            "wire": plan.wire.get((type_, name), ({}, {}))[0],
            "options": options,
            "trigger": trigger,
        }
        lines.append(f"{variant}\t{type_}\t{name}\t{digest(whole)}")
    lines.append(f"{variant}\t(outputs)\t-\t{digest(plan.outputs)}")
    said = sorted(plan.logs)
    assert all(level != "DEBUG" for level, _ in said), "the SDK's debug line per registration is not kept"
    lines.append(f"{variant}\t(logs)\t-\t{digest(said)}")
    return lines


def current() -> list[str]:
    return [line for variant, args in STACKS.items() for line in rows(variant, plan_of(*args))]


def test_every_registered_resource_is_as_pinned():
    found = current()
    if os.environ.get("TPU_RL_UPDATE_PLANS"):
        PINNED.write_text("\n".join(found) + "\n")
    pinned = PINNED.read_text().splitlines()
    changed = sorted(set(found) ^ set(pinned))
    assert changed == [], "the registered resources changed (TPU_RL_UPDATE_PLANS=1 rewrites the pin if meant)"
    assert len(found) == len(pinned)


def test_the_pin_sees_one_changed_input():
    """The digest covers the inputs: one changed field of one resource changes its line and only that one."""
    plan = plan_of("dev")
    before = rows("dev", plan)
    name = plan.resources[0]["name"]
    changed = Plan(
        plan.stack,
        plan.resources,
        plan.outputs,
        raw_inputs={**plan.raw_inputs, name: {**plan.raw_inputs[name], "extra": 1}},
        logs=plan.logs,
        urns=plan.urns,
        wire=plan.wire,
    )
    after = rows("dev", changed)
    assert [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b] == [0]
