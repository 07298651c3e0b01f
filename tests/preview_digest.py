"""Preview digests written as ``pulumi preview --json --show-sames`` writes them, from a plan (``digest``, ``written``),
and the hostile changes a preview is judged on (``HOSTILE``, ``hostile``): ``tests/test_judge_preview.py`` judges them
against the pack as the engine runs it, a scenario judges its own stack's preview as the PR workflow does.

A digest is built here from a plan with the field names of pulumi's Go structs (pulumi/pulumi at 1b59498:
``pkg/display/json.go`` ``PreviewDigest``, ``PreviewStep``; ``sdk/go/common/apitype/core.go`` ``ResourceV3``) and
the values ``pkg/backend/display/json.go`` writes: ``getPreviewMetadataStep`` serialises a step's states with
``stateForJSONOutput`` (every secret the string ``[secret]``: ``massagePropertyValue``) and
``stack.SerializeResource`` (an unknown the ``computedValuePlaceholder`` string, empty maps and false flags left out:
``omitempty``), and ``json.MarshalIndent`` prints it (numbers as Go prints a float64: ``8``, not ``8.0``; ``<``,
``>``, ``&`` escaped).
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from pulumi.output import Unknown

from policy import judge_preview
from tests import analyzer
from tools.plan.offline import SECRET_SIG, SECRET_SIG_KEY, UNKNOWN, Plan

SERVICE = "kubernetes:core/v1:Service"
JOBSET = analyzer.JOBSET


def _massaged(value: Any) -> Any:
    """``massagePropertyValue`` without ``--show-secrets``, then the JSON Go writes of a float64."""
    if isinstance(value, analyzer.Secret):
        return judge_preview.SECRET
    if isinstance(value, dict):
        if value.get(SECRET_SIG_KEY) == SECRET_SIG:
            return judge_preview.SECRET
        return {k: _massaged(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_massaged(v) for v in value]
    if isinstance(value, Unknown):
        return UNKNOWN
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return int(value)
    return value


def _state(urn: str, type_: str, inputs: Mapping[str, Any], outputs: Mapping[str, Any], *, custom: bool = True,
           parent: str = "", protect: bool = False) -> dict[str, Any]:  # fmt: skip
    """An ``apitype.ResourceV3`` as ``SerializeResource`` fills it (``omitempty`` fields left out when empty)."""
    state: dict[str, Any] = {"urn": urn, "custom": custom, "type": type_}
    if inputs:
        state["inputs"] = _massaged(dict(inputs))
    if outputs:
        state["outputs"] = _massaged(dict(outputs))
    if parent:
        state["parent"] = parent
    if protect:
        state["protect"] = True
    return state


def _wire_inputs(plan: Plan, r: Mapping[str, Any]) -> Any:
    """What the engine holds of the resource's inputs: the program's own Struct where the plan ran it."""
    sent = plan.wire.get((r["type"], r["name"]))
    return sent[0] if sent is not None else r["inputs"]


def _urn(plan: Plan, type_: str, name: str) -> str:
    """The resource's URN (the mock monitor's, keyed by name: a component and its provider may share one)."""
    urn = analyzer._urn(plan, type_, name)
    if urn.split("::")[2].rsplit("$", 1)[-1] == type_:
        return urn
    return f"urn:pulumi:{plan.stack}::tpu-rl::{type_}::{name}"


def digest(plan: Plan, op: str = "create", ops: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The ``PreviewDigest`` of a preview of ``plan``: every resource a ``create`` (a stack with nothing created), or
    ``same`` (a stack already up to date: the old state's outputs are the live objects); ``ops``: URN -> the step the
    engine took for that resource instead (a preview of a change to a stack that exists: ``tests.engine.Run``'s
    ``resources``)."""
    stack_urn = f"urn:pulumi:{plan.stack}::tpu-rl::pulumi:pulumi:Stack::tpu-rl-{plan.stack}"
    root = _state(stack_urn, "pulumi:pulumi:Stack", {}, {}, custom=False)
    steps: list[dict[str, Any]] = [
        {"op": op, "urn": stack_urn, **({"oldState": root} if op == "same" else {}), "newState": root}
    ]
    for r in plan.resources:
        urn = _urn(plan, r["type"], r["name"])
        taken = (ops or {}).get(urn, op)
        o = r["options"]
        parent = analyzer._urn(plan, "", o["parent"]) if o.get("parent") else stack_urn
        inputs = _wire_inputs(plan, r)
        new = _state(urn, r["type"], inputs, {}, parent=parent, protect=bool(o.get("protect")))
        step: dict[str, Any] = {"op": taken, "urn": urn, "provider": "", "newState": new, "detailedDiff": None}
        if taken == "same":
            live = analyzer.outputs(plan, r, preview=False)
            step["oldState"] = _state(urn, r["type"], inputs, live, parent=parent, protect=bool(o.get("protect")))
        steps.append({k: v for k, v in step.items() if v != ""})
    return {
        "config": {"tpu-rl:hfToken": judge_preview.SECRET, "tpu-rl:project": "p"},
        "steps": steps,
        "duration": 4_200_000_000,
        "changeSummary": dict(Counter(step["op"] for step in steps)),
    }


def written(document: Mapping[str, Any]) -> str:
    """The text ``json.MarshalIndent(&digest, "", "    ")`` prints (HTML characters escaped, as Go's encoder does)."""
    text = json.dumps(document, indent=4, ensure_ascii=False)
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028")):
        text = text.replace(char, escaped)
    return text + "\n"


# ---------------------------------------------------------------------------------------------
# Hostile changes


def hostile(plan: Plan, change: Callable[[Plan], None]) -> Plan:
    """``plan`` with ``change`` made to what the engine holds of it: each resource's inputs as they crossed the wire
    (the program's own Struct where the plan ran the program, ``plan.wire``), copied, then changed (``plan`` itself is
    left as it was)."""
    resources = [{**r, "inputs": copy.deepcopy(_wire_inputs(plan, r))} for r in plan.resources]
    changed = dataclasses.replace(plan, resources=resources, wire={})
    change(changed)
    return changed


def image(value: Any) -> Callable[[Plan], None]:
    """The first JobSet's first container runs ``value`` as its image."""

    def change(plan: Plan) -> None:
        jobset = next(r for r in plan.resources if r["type"] == JOBSET)
        spec = jobset["inputs"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        spec["containers"][0]["image"] = value

    return change


def load_balancer(plan: Plan) -> None:
    """A Service of type LoadBalancer in the stack's namespace."""
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "exposed", "namespace": "tpu-rl"},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 443}], "selector": {"app": "tpu-rl"}},
    }
    plan.resources.append(
        {"type": SERVICE, "name": "exposed", "inputs": service, "options": {"protect": False, "parent": None}}
    )


HOSTILE = {
    "a JobSet with an image from Docker Hub": (image("docker.io/library/python:3.12"), {"trusted-registries"}),
    "a JobSet with an unpinned image": (image("us-docker.pkg.dev/cloud-tpu-images/inference/x:latest"), None),
    "a LoadBalancer Service": (load_balancer, {"no-exposed-services"}),
}
"""Case -> (the change, the policies whose mandatory finding it must add; None: any)."""
