"""The estimated TPU cost of one workflow run, from the stack's TPU pools and every TPU workload's training command
(``tpu-budget``; ``stack_estimate`` for the program's own estimate)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pulumi_policy import EnforcementLevel, PolicyConfigSchema, Severity, StackValidationArgs, StackValidationPolicy

from core.errors import BadInputError
from core.estimate import TrainingRun, estimate_run
from core.step_config import CONFIG_PATH
from core.tpu import Capacity, SliceShape, resolve_slice

from .env import Mounts, StackObjects, _command_words, container_env
from .pods import _asks_tpu, _name, _namespace, kind_of, pod_containers, pods
from .properties import _config, _m
from .resources import NODE_POOL, Report, Resource, _guarded_stack, _machine, _resources
from .scripts import LAUNCHED_BY, trainer_runs


class EstimateInputError(BadInputError, ValueError):
    """A TPU workload does not carry a training command the estimate can read."""


def _training_runs(resources: list[Resource]) -> tuple[list[tuple[str, TrainingRun]], list[str]]:
    """Every TPU workload's training runs (any resource whose pods ask for ``google.com/tpu``), and why one
    cannot be read."""
    objects = StackObjects(resources)
    runs: list[tuple[str, TrainingRun]] = []
    problems: list[str] = []
    for r in resources:
        found = pods(r.resource_type, r.props)
        if not any(_asks_tpu(p.spec, malformed=True) for p in found):
            continue
        label = f"{kind_of(r.resource_type)} {_name(r)}"
        namespace = _namespace(r.props)
        here: list[TrainingRun] = []
        reported = len(problems)
        for pod in found:
            for container in pod_containers(pod.spec):
                env = container_env(container, namespace, objects)
                mounts = Mounts(pod.spec, container, namespace, objects)
                started = trainer_runs(_command_words(container, env), env, mounts)
                problems += [
                    f"{label} runs {f.path} from {f.source}: this policy cannot read it, so no estimate"
                    for f in started.unread_files
                ]
                problems += [
                    f"{label} mounts {f.path} from {f.source}: this policy cannot read it, so no estimate"
                    for f in started.unread_mounts
                ]
                problems += [
                    f"{label} names the trainer in {where}, not through {LAUNCHED_BY}: this policy cannot read "
                    "that run, so no estimate"
                    for where in started.mentions
                ]
                for run in started.runs:
                    if isinstance(run, str):
                        problems.append(f"{run} for the train_rl run of {label}, so no estimate")
                    else:
                        here.append(run)
        if not here and len(problems) == reported:
            problems.append(
                f"cannot find the train_rl run ({LAUNCHED_BY} with its {CONFIG_PATH}) in {label}, whose pods ask "
                "for TPU chips, so no estimate"
            )
        runs += [(_name(r), run) for run in here]
    return runs, problems


def _pools(resources: list[Resource]) -> list[tuple[SliceShape, Capacity]]:
    pools = []
    for r in resources:
        if r.resource_type != NODE_POOL:
            continue
        node = _m(r.props.get("nodeConfig"))
        found = _machine(node.get("machineType"))
        if found is None:
            continue
        version, machine = found
        topology = _m(r.props.get("placementPolicy")).get("tpuTopology") or machine.single_host_topology
        if topology not in machine.topologies:
            continue
        capacity: Capacity
        if node.get("spot"):
            capacity = Capacity.SPOT
        elif node.get("flexStart"):
            capacity = Capacity.FLEX_START
        elif r.props.get("autoscaling"):
            capacity = Capacity.ON_DEMAND
        else:
            capacity = Capacity.RESERVATION
        pools.append((resolve_slice(version, machine.name, topology), capacity))
    return pools


def _estimate(resources: list[Resource], runs: list[tuple[str, TrainingRun]]) -> dict[str, Any] | None:
    """The stack's estimate: the workflow with the first run, every further TPU run's training added."""
    pools = _pools(resources)
    if not pools:
        return None
    shape, capacity = pools[0]
    if not runs:  # provision only: no run, but a reserved slice still bills per day
        out = estimate_run(shape, len(pools), capacity, None).to_output()
    else:
        first = estimate_run(shape, len(pools), capacity, runs[0][1])
        more = sum(
            step.usd
            for _, run in runs[1:]
            for step in estimate_run(shape, len(pools), capacity, run).steps
            if step.holds_tpu
        )
        out = first.to_output()
        out["totalUsd"] = round(first.total_usd + more, 2)
    out["runs"] = [name for name, _ in runs]
    return out


def stack_estimate(resources: Sequence[Any]) -> dict[str, Any] | None:
    """The cost estimate of a stack, from its TPU pools and every TPU workload's training command."""
    plain_resources = _resources(resources)
    runs, problems = _training_runs(plain_resources)
    if problems:
        raise EstimateInputError(problems[0])
    return _estimate(plain_resources, runs)


def _budget(args: StackValidationArgs, resources: list[Resource], report: Report) -> None:
    runs, problems = _training_runs(resources)
    for problem in problems:
        report(f"{problem}: the budget gate cannot judge this stack; keep the JobSet rendered by workloads/")
    estimate = _estimate(resources, runs)
    if estimate is None:
        return
    budget = float(_config(args).get("maxEstimatedUsd", 1000))
    if estimate["totalUsd"] > budget:
        report(
            f"estimated TPU cost of one run is ${estimate['totalUsd']:,.2f} ({estimate['capacity']}, "
            f"{estimate['chips']} chips), above maxEstimatedUsd ${budget:,.2f}: use a smaller slice, fewer "
            "numBatches or spot/flex-start capacity, or raise the budget in the policy config"
        )
    if estimate["idleUsdPerDay"] > float(_config(args).get("maxIdleUsdPerDay", 5000)):
        report(
            f"the slice's reservation bills ${estimate['idleUsdPerDay']:,.2f} per day until it is deleted, used "
            "or not (`pulumi destroy` removes the slice only): delete it after the run or use autoscaled capacity"
        )


tpu_budget = StackValidationPolicy(
    name="tpu-budget",
    description="The estimated TPU cost of one workflow run, every TPU workload's training included, is under budget.",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Shrink the run or the slice, or raise maxEstimatedUsd in policy/config/<stack>.json.",
    config_schema=PolicyConfigSchema(
        properties={
            "maxEstimatedUsd": {"type": "number", "default": 1000},
            "maxIdleUsdPerDay": {"type": "number", "default": 5000},
        }
    ),
    validate=_guarded_stack(_budget),
)
