"""``secret-holders`` on the program's own plans, through pulumi-policy's own analyzer configured as the engine
configures it at `pulumi up` (``ConfigureStack`` with the configured secrets and ``config_secret_keys``): the plans
draw nothing; a configured secret is found by its value wherever a change puts it (as written, in base64, nested, in
a Secret of another name or the other token's Secret); a Secret the program does not make is refused. Each finding is
compared word for word with tests/data/secret-holders-messages.tsv (reviewed; `TPU_RL_UPDATE_MESSAGES=1` rewrites
it), and none shows any part of a secret. The readers' cases (a route to the write token, a relabelled pod) are
``tests/test_policy.py``'s, on the builders' plans."""

from __future__ import annotations

import base64
import copy
import dataclasses
import json
import os
from collections.abc import Callable
from typing import Any

import pytest

from core.config.values import UNSET_SECRET
from core.secret_search import holds
from core.secret_use import secret_reads
from policy.tpu_rl_policies.secret_holders import secret_holders
from tests import analyzer
from tests.conftest import SENTINEL_TOKEN, plan_of
from tools.plan.offline import Plan
from tools.stack_files import ROOT

pytestmark = pytest.mark.program

MESSAGES = ROOT / "tests" / "data" / "secret-holders-messages.tsv"
SECRET = "kubernetes:core/v1:Secret"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
RELEASE = "kubernetes:helm.sh/v3:Release"
PUBLISHING = ("prod", "tpu-rl:publish.repo=acme/gemma4-grpo")
SECRETS = {"tpu-rl:hfToken": SENTINEL_TOKEN, "tpu-rl:hfWriteToken": UNSET_SECRET}
"""The configured secrets as the engine sends them: the values the test plans are made with (the write token is the
offline plan's placeholder for one the stack file does not set)."""


def _findings(plan: Plan, stack: tuple[str, ...], *, preview: bool = False) -> list[str]:
    config = {**analyzer.engine_config(*stack), **SECRETS}
    pack = analyzer.Pack(
        analyzer.policy_config_file(stack[0]),
        dry_run=preview,
        policies=[secret_holders],
        stack=stack[0],
        stack_config=config,
        secret_keys=list(SECRETS),
    )
    return [f.message for f in pack.analyze_stack(analyzer.resources(plan, preview=preview, stack_view=True))]


def _changed(stack: tuple[str, ...], type_: str, name: str, change: Callable[[dict[str, Any]], None]) -> Plan:
    """The program's plan with one resource changed, from its inputs as the program sent them (secrets' values
    included); the rest the plan's own."""
    plan = plan_of(*stack)
    (target,) = [r for r in plan.resources if r["type"] == type_ and r["name"] == name]
    inputs = copy.deepcopy(plan.raw_inputs.get(name, target["inputs"]))
    change(inputs)
    resources = [{**r, "inputs": inputs} if r is target else r for r in plan.resources]
    wire = {key: sent for key, sent in plan.wire.items() if key != (type_, name)}
    return dataclasses.replace(plan, resources=resources, wire=wire)


@pytest.mark.parametrize("stack", [("dev",), ("prod",), PUBLISHING], ids=["dev", "prod", "publishing"])
@pytest.mark.parametrize("preview", [False, True], ids=["up", "preview"])
def test_the_programs_plans_draw_nothing(stack, preview):
    assert _findings(plan_of(*stack), stack, preview=preview) == []


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _data(key: str, value: str) -> Callable[[dict[str, Any]], None]:
    return lambda inputs: inputs.setdefault("data", {}).__setitem__(key, value)


def _renamed_with_data(name: str, data: dict[str, str]) -> Callable[[dict[str, Any]], None]:
    def change(inputs: dict[str, Any]) -> None:
        inputs["metadata"]["name"] = name
        inputs.pop("stringData")
        inputs["data"] = data

    return change


CASES: list[tuple[str, tuple[str, ...], str, str, Callable[[dict[str, Any]], None]]] = [
    (
        "the-read-token-in-a-config-map",
        ("dev",),
        CONFIG_MAP,
        "gemma4-e4b-convert-f3aea0590f-scripts",
        _data("token.txt", SENTINEL_TOKEN),
    ),
    (
        "the-read-token-nested-base64-in-an-annotation",
        ("dev",),
        CONFIG_MAP,
        "gemma4-e4b-convert-f3aea0590f-scripts",
        lambda inputs: (
            inputs["metadata"]
            .setdefault("annotations", {})
            .__setitem__("note", "x" + _b64(_b64("id=" + SENTINEL_TOKEN)))
        ),
    ),
    (
        "the-read-token-as-a-label-key",
        ("dev",),
        CONFIG_MAP,
        "gemma4-e4b-convert-f3aea0590f-scripts",
        lambda inputs: inputs["metadata"].setdefault("labels", {}).__setitem__(SENTINEL_TOKEN, "x"),
    ),
    (
        "the-read-token-in-a-helm-value",
        ("dev",),
        RELEASE,
        "kueue",
        lambda inputs: inputs.setdefault("values", {}).__setitem__(
            "extraEnv", [{"name": "T", "value": SENTINEL_TOKEN}]
        ),
    ),
    (
        "the-read-token-in-a-secret-of-another-name",
        ("dev",),
        SECRET,
        "hf-token",
        _renamed_with_data("hub-credentials", {"token": _b64(SENTINEL_TOKEN)}),
    ),
    (
        "the-read-token-in-the-write-tokens-secret",
        PUBLISHING,
        SECRET,
        "hf-write-token",
        lambda inputs: inputs["stringData"].__setitem__("token", SENTINEL_TOKEN),
    ),
    (
        "a-key-the-program-does-not-write",
        ("dev",),
        SECRET,
        "hf-token",
        lambda inputs: inputs["stringData"].__setitem__("netrc", "machine huggingface.co"),
    ),
]


def _case_findings(case: str) -> list[str]:
    _, stack, type_, name, change = next(c for c in CASES if c[0] == case)
    return _findings(_changed(stack, type_, name, change), stack)


@pytest.mark.parametrize("case", [c[0] for c in CASES])
def test_a_configured_secret_is_found_by_its_value_and_named_by_its_key(case):
    found = _case_findings(case)
    assert found, case
    reviewed = dict(line.split("\t", 1) for line in MESSAGES.read_text().splitlines()) if MESSAGES.exists() else {}
    if os.environ.get("TPU_RL_UPDATE_MESSAGES"):
        reviewed[case] = json.dumps(found)
        MESSAGES.write_text("".join(f"{c[0]}\t{reviewed[c[0]]}\n" for c in CASES if c[0] in reviewed))
    assert found == json.loads(reviewed[case])
    parts = {SENTINEL_TOKEN[i : i + 6] for i in range(len(SENTINEL_TOKEN) - 5)}
    assert not [m for m in found if any(part in m for part in parts)], "a message shows part of the token"


UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
"""What the engine sends for a value it does not know yet (``rpc.go`` ``UnknownStringValue``)."""


def test_a_secrets_value_not_known_is_judged_at_up():
    """A Secret's value not known at a preview is judged by its name and keys there, and by its value at `pulumi up`
    (where one still unknown is a finding)."""
    stack = PUBLISHING
    plan = _changed(stack, SECRET, "hf-write-token", lambda inputs: inputs["stringData"].__setitem__("token", UNKNOWN))
    (noted,) = _findings(plan, stack, preview=True)
    assert noted.endswith(
        "Secret hf-write-token: .stringData.token not known until what they come from exists; judged at `pulumi up`"
    )
    (found,) = _findings(plan, stack)
    assert "not known at `pulumi up`" in found


def test_every_route_to_a_secret_is_read_and_named():
    """An env ``secretKeyRef``, an ``envFrom`` ``secretRef``, a mounted ``secret`` or ``projected`` volume, in any
    container list; a volume the container does not mount gives it nothing."""
    spec = {
        "volumes": [
            {"name": "a", "secret": {"secretName": "s-volume"}},
            {"name": "b", "projected": {"sources": [{"configMap": {"name": "c"}}, {"secret": {"name": "s-proj"}}]}},
            {"name": "unmounted", "secret": {"secretName": "s-unmounted"}},
        ],
        "initContainers": [{"name": "i", "envFrom": [{"configMapRef": {"name": "c"}}, {"secretRef": {"name": "s"}}]}],
        "containers": [
            {
                "name": "m",
                "env": [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "s-env", "key": "k"}}}],
                "volumeMounts": [{"name": "a", "mountPath": "/a"}, {"name": "b", "mountPath": "/b"}],
            }
        ],
    }
    assert [(c["name"], secret, route) for c, secret, route in secret_reads(spec)] == [
        ("i", "s", "envFrom"),
        ("m", "s-env", "env T"),
        ("m", "s-volume", "volume a"),
        ("m", "s-proj", "volume b"),
    ]


def _nested(text: str, times: int) -> str:
    for _ in range(times):
        text = _b64(text)
    return text


@pytest.mark.parametrize(
    ("text", "held"),
    [
        pytest.param(f"x={SENTINEL_TOKEN}", True, id="as-written"),
        pytest.param(f"t: |\n  {SENTINEL_TOKEN[:20]}\n  {SENTINEL_TOKEN[20:]}\n", True, id="wrapped-across-lines"),
        pytest.param(json.dumps({"t": f'a"{SENTINEL_TOKEN}'}), True, id="in-json"),
        pytest.param(base64.urlsafe_b64encode(("ab" + SENTINEL_TOKEN).encode()).decode(), True, id="url-safe-offset-2"),
        pytest.param(_b64("a" + SENTINEL_TOKEN).rstrip("="), True, id="last-partial-group"),
        pytest.param(_nested(SENTINEL_TOKEN, 3), True, id="three-encodings"),
        pytest.param(_nested(SENTINEL_TOKEN, 4), False, id="four-encodings"),
        pytest.param(_b64(SENTINEL_TOKEN[:-1]), False, id="all-but-its-last-letter"),
    ],
)
def test_a_secret_is_held_as_the_redaction_finds_it(text, held):
    assert holds(text, SENTINEL_TOKEN) is held
