"""``tpu-budget``'s bounds on what a stack keeps and bills with nothing running, judged through pulumi-policy's own
analyzer (``tests/analyzer.py``: the policy config as the engine reconciles it, every schema default filled in) on
small stacks of node pools built by hand.

- ``maxKeptNodes``: the nodes the pools other than the TPU slices keep, a static pool's ``nodeCount`` (1 when unset),
  an autoscaled pool's ``minNodeCount`` (0 when unset); a value that is not a count (``true``) is not counted.
- ``maxIdleUsdPerDay``: what the TPU pools bill per day, the slice's reservation or the nodes every TPU pool keeps at
  its capacity's price (a static pool's at the reservation price, an autoscaled pool's at the on-demand price), summed
  over the pools; a count not known yet is noted and the pools after it still summed.

Each bound at its value and one step over it (a node; a cent, where the prices give whole cents: the reservation
price), each finding the exact line an operator reads, on the stack (no one resource: the URN is empty). The prices are
v6e's (``core/tpu.py``): a ct6e-standard-4t node holds 4 chips, $1.89 a chip-hour reserved ($181.44 a day) and $2.70
on demand ($259.20 a day)."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from pulumi.output import Unknown

from tests import analyzer

pytestmark = pytest.mark.pure

policies = importlib.import_module("policy.tpu_rl_policies")
BUDGET = analyzer.pack_policy("tpu-budget")
NODE_POOL = "gcp:container/nodePool:NodePool"
TPU = {"machineType": "ct6e-standard-4t"}
CPU = {"machineType": "e2-standard-4"}


def pool(name: str, node: dict[str, Any], **props: Any) -> analyzer.Resource:
    urn = f"urn:pulumi:dev::tpu-rl::{NODE_POOL}::{name}"
    return analyzer.Resource(NODE_POOL, name, urn, {"nodeConfig": node, **props})


def autoscaled(name: str, node: dict[str, Any], **autoscaling: Any) -> analyzer.Resource:
    return pool(name, node, autoscaling={"maxNodeCount": 8, **autoscaling})


def judge(*resources: analyzer.Resource, preview: bool = False, **config: Any) -> list[analyzer.Finding]:
    pack = analyzer.Pack({"all": "mandatory", "tpu-budget": config}, dry_run=preview, policies=[BUDGET])
    return pack.analyze_stack(list(resources))


def found(*resources: analyzer.Resource, **config: Any) -> list[tuple[str, str]]:
    """(URN, message) of each finding at `pulumi up`, every one mandatory and judged."""
    findings = judge(*resources, **config)
    assert all(f.level == "mandatory" and not f.unjudged for f in findings), findings
    return [(f.urn, f.message) for f in findings]


def too_many(nodes: int, pools: str, most: int) -> str:
    return (
        f"the node pools other than the TPU slices keep {nodes} nodes with nothing running ({pools}), above "
        f"maxKeptNodes {most}: autoscale them with a small minNodeCount (the CPU pool from zero), or raise "
        "maxKeptNodes in the policy config"
    )


def reservation_bills(usd: str) -> str:
    return (
        f"the slice's reservation bills ${usd} per day until it is deleted, used or not (`pulumi destroy` removes the "
        "slice only): delete it after the run or use autoscaled capacity"
    )


def kept_nodes_bill(usd: str) -> str:
    return (
        f"the TPU pools' kept nodes (minNodeCount) bill ${usd} per day until it is deleted, used or not "
        "(`pulumi destroy` removes the slice only): delete it after the run or use autoscaled capacity that scales to "
        "zero (minNodeCount 0)"
    )


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (2, []),
        (3, [too_many(4, "cpu-pool 0, extra-pool 3, system-pool 1", 3)]),
    ],
    ids=["at-the-bound", "a-node-over"],
)
def test_the_other_pools_keep_at_most_max_kept_nodes(extra: int, expected: list[str]) -> None:
    """A static pool without ``nodeCount`` keeps 1 node, an autoscaled one without ``minNodeCount`` none (listed as
    0): with a pool of ``extra`` nodes beside them, 3 nodes pass ``maxKeptNodes`` 3 and 4 are refused, every pool
    named with its count, sorted by name."""
    stack = (pool("system-pool", CPU), autoscaled("cpu-pool", CPU), pool("extra-pool", CPU, nodeCount=extra))
    assert found(*stack, maxKeptNodes=3) == [("", message) for message in expected]


@pytest.mark.parametrize(
    ("static", "expected"),
    [
        (3, []),
        (4, [too_many(4, "system-pool 4", 3)]),
    ],
    ids=["at-the-bound", "a-node-over"],
)
def test_a_flag_where_a_count_belongs_is_not_counted(static: int, expected: list[str]) -> None:
    """``nodeCount: true`` and ``minNodeCount: true`` are no counts (not one node each): the pools that hold them are
    neither counted nor listed."""
    stack = (
        pool("system-pool", CPU, nodeCount=static),
        pool("flag-pool", CPU, nodeCount=True),
        autoscaled("cpu-pool", CPU, minNodeCount=True),
    )
    assert found(*stack, maxKeptNodes=3) == [("", message) for message in expected]


IDLE_CASES = [
    # (id, the TPU pools, maxIdleUsdPerDay, the messages of the findings)
    ("reservation-at-the-bound", [pool("tpu-pool", TPU, nodeCount=1)], 181.44, []),
    ("reservation-a-cent-over", [pool("tpu-pool", TPU, nodeCount=1)], 181.43, [reservation_bills("181.44")]),
    ("kept-nodes-at-the-bound", [pool("tpu-pool", TPU, nodeCount=2)], 362.88, []),
    ("kept-nodes-a-cent-over", [pool("tpu-pool", TPU, nodeCount=2)], 362.87, [kept_nodes_bill("362.88")]),
    (
        "two-pools-summed-at-the-bound",
        [pool("tpu-a", TPU, nodeCount=2), pool("tpu-b", TPU, nodeCount=2)],
        725.76,
        [],
    ),
    (
        "two-pools-summed-a-cent-over",
        [pool("tpu-a", TPU, nodeCount=2), pool("tpu-b", TPU, nodeCount=2)],
        725.75,
        [kept_nodes_bill("725.76")],
    ),
    ("autoscaled-on-demand", [autoscaled("tpu-pool", TPU, minNodeCount=2)], 500, [kept_nodes_bill("518.40")]),
    ("autoscaled-from-zero", [autoscaled("tpu-pool", TPU)], 0, []),
    (
        "autoscaled-pools-summed",
        [autoscaled("tpu-a", TPU, minNodeCount=1), autoscaled("tpu-b", TPU, minNodeCount=1)],
        500,
        [kept_nodes_bill("518.40")],
    ),
    (
        "after-a-count-that-is-not-one",
        [autoscaled("tpu-a", TPU, minNodeCount="two"), autoscaled("tpu-b", TPU, minNodeCount=2)],
        500,
        [kept_nodes_bill("518.40")],
    ),
]


@pytest.mark.parametrize(("case", "pools", "most", "expected"), IDLE_CASES, ids=[c[0] for c in IDLE_CASES])
def test_what_the_tpu_pools_bill_idle_is_at_most_max_idle_usd_per_day(
    case: str, pools: list[analyzer.Resource], most: float, expected: list[str]
) -> None:
    """One static node is the slice's reservation ($181.44 a day: the reservation's line, with no word of scaling to
    zero); two are more than the slice, so it is the kept nodes' line, which says to scale to zero; two pools' kept
    nodes are summed; an autoscaled pool's kept nodes bill at the on-demand price ($259.20 a node), none when it
    scales from zero; a count that is not one is skipped and the pools after it still summed."""
    assert found(*pools, maxIdleUsdPerDay=most) == [("", message) for message in expected]


def test_a_kept_count_not_known_is_noted_and_the_pools_after_it_still_summed() -> None:
    """At `pulumi up` the unknown ``minNodeCount`` cannot be judged, and the next pool's kept nodes are still refused;
    at a preview the refusal waits for the value, and the advisory says what it would report."""
    stack = (autoscaled("tpu-a", TPU, minNodeCount=Unknown()), autoscaled("tpu-b", TPU, minNodeCount=2))
    not_known = "NodePool tpu-a: .autoscaling.minNodeCount"
    assert found(*stack, maxIdleUsdPerDay=500) == [
        ("", kept_nodes_bill("518.40")),
        ("", f"cannot judge {not_known}: not known at `pulumi up`; give it a value the program knows"),
    ]
    assert [(f.level, f.unjudged, f.urn, f.message) for f in judge(*stack, preview=True, maxIdleUsdPerDay=500)] == [
        (
            "advisory",
            True,
            "",
            f"can't run policy 'tpu-budget' from policy pack 'tpu-rl-guardrails@v0.0.1' during preview: {not_known} "
            "not known until what they come from exists; judged at `pulumi up`; reading them as unset it would "
            f"report: {kept_nodes_bill('518.40')}",
        )
    ]
