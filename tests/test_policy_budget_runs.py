"""``tpu-budget`` on the training runs of a stack's TPU workloads, called as the engine calls the stack policy
(``StackValidationArgs`` with the policy's config, every schema default filled in, at `pulumi up`) on small stacks built
by hand: a v6e pool (a ct6e-standard-4t node, 4 chips) and Jobs that start tpu-rl's launcher from a ConfigMap volume.

- which pods ask for TPU chips: a chip count that is not a quantity is read as asking (it would cost money), so a Job
  whose count cannot be read, and that starts no readable run, is a finding that the gate cannot judge the stack;
- where a run's files and variables come from: the ConfigMap of the workload's own namespace, never a same-named one
  of another namespace (the cost is of the run the pods start);
- the totals compared in the cents the finding shows: the estimate with a second run's training added, and what the
  TPU pools' kept nodes bill a day, each passing a bound equal to its cents however the unrounded sum strays.

Each finding is the exact line an operator reads, on the stack (no one resource: no URN)."""

from __future__ import annotations

from typing import Any

import pytest
from pulumi_policy import StackValidationArgs

from core.step_config import CONFIG_FILE, LAUNCHER, config_text
from policy.tpu_rl_policies.budget import tpu_budget
from policy.tpu_rl_policies.resources import DEPLOYMENT
from tests.launcher_stack import LAUNCHER_TEXT, NAMESPACE, RUN
from tests.pack_estimate import stack_estimate
from tests.policy_args import Reports, policy_resource

pytestmark = pytest.mark.pure

JOB = "kubernetes:batch/v1:Job"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
NODE_POOL = "gcp:container/nodePool:NodePool"
TPU = {"machineType": "ct6e-standard-4t"}
DEFAULTS = {"maxEstimatedUsd": 1000.0, "maxIdleUsdPerDay": 5000.0, "maxKeptNodes": 4.0}
"""The policy's config as the engine sends it with nothing set: its schema's defaults, as doubles."""
GATE_CANNOT_JUDGE = ": the budget gate cannot judge this stack; keep the JobSet rendered by workloads/"


@pytest.fixture(autouse=True)
def at_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine's ``ConfigureStack`` at `pulumi up`, restored after the test."""
    monkeypatch.setattr(DEPLOYMENT, "dry_run", False)


def resource(type_: str, name: str, props: dict[str, Any]) -> Any:
    """A resource as ``StackValidationArgs`` holds it."""
    return policy_resource(type_, name, props)


def pool(**props: Any) -> Any:
    return resource(NODE_POOL, "tpu-pool", {"nodeConfig": TPU, **props})


def config_map(name: str, data: dict[str, str], namespace: str = NAMESPACE) -> Any:
    return resource(
        CONFIG_MAP, f"{name}-{namespace}", {"metadata": {"name": name, "namespace": namespace}, "data": data}
    )


def scripts(**run: str) -> dict[str, str]:
    """The launcher beside its overrides file, ``run`` its overrides (``RUN``'s where not given; ``""``: unset)."""
    overrides = {**RUN, **run}
    return {LAUNCHER: LAUNCHER_TEXT, CONFIG_FILE: config_text(f"{k}={v}" for k, v in overrides.items() if v)}


def job(name: str, chips: Any = 4, **container: Any) -> Any:
    """A Job in ``NAMESPACE`` whose pod asks for ``chips`` TPU chips and starts the launcher of the ConfigMap
    ``scripts``, mounted at /tpu-rl."""
    main = {
        "name": "main",
        "image": "x",
        "command": ["python3", f"/tpu-rl/{LAUNCHER}"],
        "resources": {"limits": {"google.com/tpu": chips}},
        "volumeMounts": [{"name": "scripts", "mountPath": "/tpu-rl"}],
        **container,
    }
    spec = {"containers": [main], "volumes": [{"name": "scripts", "configMap": {"name": "scripts"}}]}
    return resource(
        JOB, name, {"metadata": {"name": name, "namespace": NAMESPACE}, "spec": {"template": {"spec": spec}}}
    )


def sleeper(name: str, chips: Any) -> Any:
    """A Job in ``NAMESPACE`` whose pod asks for ``chips`` TPU chips and starts no training run."""
    main = {"name": "main", "image": "x", "command": ["sleep", "1"], "resources": {"limits": {"google.com/tpu": chips}}}
    props = {"metadata": {"name": name, "namespace": NAMESPACE}, "spec": {"template": {"spec": {"containers": [main]}}}}
    return resource(JOB, name, props)


def found(*resources: Any, **config: float) -> list[tuple[str, str | None]]:
    """(message, URN) of each finding on the stack of ``resources``, the policy config ``config`` over the
    defaults."""
    report = Reports()
    tpu_budget.validate(StackValidationArgs(list(resources), {**DEFAULTS, **config}), report)
    return report.calls


def over_budget(usd: str, budget: str) -> str:
    return (
        f"estimated TPU cost of one run is ${usd} (reservation, 4 chips), above maxEstimatedUsd ${budget}: use a "
        "smaller slice, fewer numBatches or spot/flex-start capacity, or raise the budget in the policy config"
    )


@pytest.mark.parametrize(
    ("chips", "expected"),
    [
        (
            "lots",
            [
                (
                    "cannot find the train_rl run (tpu-rl's launcher (launch.py, known by its sha256: "
                    "core/step_config.py) with its /tpu-rl/train.json) in Job idle, whose pods ask for TPU chips, so "
                    f"no estimate{GATE_CANNOT_JUDGE}",
                    None,
                )
            ],
        ),
        ("0", []),
    ],
    ids=["a-count-that-is-no-quantity", "no-chips"],
)
def test_a_tpu_count_that_is_no_quantity_is_read_as_asking_for_chips(chips: str, expected: list[Any]) -> None:
    """A Job that starts no training run and asks for ``lots`` TPU chips may cost money, so the gate says it cannot
    find its run and cannot judge the stack; one that asks for none is no TPU workload, and passes."""
    assert found(sleeper("idle", chips)) == expected


def own_and_other(name: str, own: dict[str, str], other: dict[str, str]) -> list[Any]:
    """A ConfigMap ``name`` in the workload's namespace and one of the same name in another namespace."""
    return [config_map(name, own), config_map(name, other, namespace="other")]


NAMESPACE_CASES = [
    # (id, the Job's container beyond the launcher, the ConfigMaps: scripts and others)
    (
        "variables-from-its-namespace",
        {"envFrom": [{"configMapRef": {"name": "train-env"}}]},
        [
            config_map("scripts", scripts(num_batches="")),
            *own_and_other("train-env", {"M_NUM_BATCHES": "7"}, {"M_NUM_BATCHES": "70"}),
        ],
    ),
    (
        "files-from-its-namespace",
        {},
        own_and_other("scripts", scripts(), scripts(num_batches="70")),
    ),
]


@pytest.mark.parametrize(("container", "maps"), [c[1:] for c in NAMESPACE_CASES], ids=[c[0] for c in NAMESPACE_CASES])
def test_a_run_is_read_from_the_config_maps_of_its_own_namespace(container: dict[str, Any], maps: list[Any]) -> None:
    """The run's ``num_batches`` (7: $26.64 on the reserved slice) comes from the ConfigMap of the Job's namespace,
    through its ``M_NUM_BATCHES`` variable or its overrides file, while a ConfigMap of the same name in another
    namespace says 70: the estimate is of the run the pods start, passing a budget of its cents and refused a cent
    under."""
    stack = [pool(nodeCount=1), *maps, job("train", **container)]
    assert found(*stack, maxEstimatedUsd=26.64) == []
    assert found(*stack, maxEstimatedUsd=26.63) == [(over_budget("26.64", "26.63"), None)]


def test_a_second_runs_training_is_added_and_the_total_compared_in_cents() -> None:
    """Two Jobs each start ``RUN``: the estimate is the first's workflow with the second's training added, $40.05288,
    shown and compared as $40.05: a budget of $40.05 passes it, one of $40.04 refuses it; the estimate the policy
    compares gives that total and names both runs."""
    stack = [pool(nodeCount=1), config_map("scripts", scripts()), job("train-a"), job("train-b")]
    assert found(*stack, maxEstimatedUsd=40.05) == []
    assert found(*stack, maxEstimatedUsd=40.04) == [(over_budget("40.05", "40.04"), None)]
    estimate = stack_estimate(stack)
    assert (estimate["totalUsd"], estimate["runs"]) == (40.05, ["train-a", "train-b"])


KEPT = 100_000_000_000.0
"""Nodes an autoscaled pool keeps: at $259.20 a node-day on demand, $25,920,000,000,000 a day, which the unrounded
product gives as 25920000000000.004 (a float this large holds no finer than ~0.004)."""


@pytest.mark.parametrize(
    ("bound", "expected"),
    [
        (25_920_000_000_000.0, []),
        (
            25_919_999_999_999.99,
            [
                (
                    "the TPU pools' kept nodes (minNodeCount) bill $25,920,000,000,000.00 per day until it is deleted, "
                    "used or not (`pulumi destroy` removes the slice only): delete it after the run or use autoscaled "
                    "capacity that scales to zero (minNodeCount 0)",
                    None,
                )
            ],
        ),
    ],
    ids=["at-the-bound", "a-cent-over"],
)
def test_what_kept_nodes_bill_a_day_is_compared_in_the_cents_shown(bound: float, expected: list[Any]) -> None:
    """The kept nodes' bill is compared in cents, as the finding shows it: a bound equal to it passes even where the
    unrounded product strays above it, and a bound a cent under is refused showing the bill."""
    stack = [pool(autoscaling={"minNodeCount": KEPT, "maxNodeCount": KEPT})]
    assert found(*stack, maxIdleUsdPerDay=bound) == expected
