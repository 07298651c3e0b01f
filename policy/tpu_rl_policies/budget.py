"""The estimated TPU cost of one workflow run, from the stack's TPU pools and every TPU workload's training command
(``tpu-budget``)."""

from __future__ import annotations

from typing import Any

from pulumi_policy import EnforcementLevel, PolicyConfigSchema, Severity, StackValidationArgs, StackValidationPolicy

from core.estimate import TrainingRun, estimate_run, usd_per_chip_hour
from core.step_config import CONFIG_PATH
from core.tpu import Capacity, SliceShape, resolve_slice

from .env import Mounts, StackObjects, _command_words, container_env
from .pods import _asks_tpu, _name, _namespace, kind_of, pod_containers, pods
from .properties import _config, _m, unseen
from .resources import NODE_POOL, Report, Resource, _guarded_stack, _machine
from .scripts import LAUNCHED_BY, trainer_runs


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
        pools.append(
            (resolve_slice(version, machine.name, topology), _capacity(node, bool(r.props.get("autoscaling"))))
        )
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


def _budget(args: StackValidationArgs, resources: list[Resource], report: Report) -> None:
    _kept_nodes(args, resources, report)
    runs, problems = _training_runs(resources)
    for problem in problems:
        report(f"{problem}: the budget gate cannot judge this stack; keep the JobSet rendered by workloads/")
    estimate = _estimate(resources, runs)
    if estimate is None:
        return
    budget = float(_config(args)["maxEstimatedUsd"])
    if estimate["totalUsd"] > budget:
        report(
            f"estimated TPU cost of one run is ${estimate['totalUsd']:,.2f} ({estimate['capacity']}, "
            f"{estimate['chips']} chips), above maxEstimatedUsd ${budget:,.2f}: use a smaller slice, fewer "
            "numBatches or spot/flex-start capacity, or raise the budget in the policy config"
        )
    # in cents, as the estimate gives the reservation's and as the finding shows it: a bound of $518.40 passes a bill
    # of $518.40 (the unrounded 518.4000000000001 of 2 x 4 chips x $2.70 x 24 h was above it)
    reserved, kept = estimate["idleUsdPerDay"], round(_idle_usd_per_day(resources), 2)
    if max(reserved, kept) > float(_config(args)["maxIdleUsdPerDay"]):
        what = "the slice's reservation bills" if reserved >= kept else "the TPU pools' kept nodes (minNodeCount) bill"
        report(
            f"{what} ${max(reserved, kept):,.2f} per day until it is deleted, used or not (`pulumi destroy` removes "
            "the slice only): delete it after the run or use autoscaled capacity"
            + ("" if reserved >= kept else " that scales to zero (minNodeCount 0)")
        )


def _kept_nodes(args: StackValidationArgs, resources: list[Resource], report: Report) -> None:
    """The machines the pools other than the TPU slices keep with nothing running (their price is not in the
    estimate): at most ``maxKeptNodes`` in all. The program keeps its system pool's few and scales the CPU pool from
    zero; a static pool of a thousand nodes bills like one."""
    kept: dict[str, int] = {}
    for r in resources:
        if r.resource_type != NODE_POOL or _machine(_m(r.props.get("nodeConfig")).get("machineType")) is not None:
            continue
        count = _kept(r)
        if count is not None:
            kept[str(r.name)] = count
    most = int(_config(args)["maxKeptNodes"])
    if sum(kept.values()) > most:
        pools = ", ".join(f"{name} {count}" for name, count in sorted(kept.items()))
        report(
            f"the node pools other than the TPU slices keep {sum(kept.values())} nodes with nothing running ({pools}), "
            f"above maxKeptNodes {most}: autoscale them with a small minNodeCount (the CPU pool from zero), or raise "
            "maxKeptNodes in the policy config"
        )


def _kept(r: Resource) -> int | None:
    """The nodes a pool keeps with nothing running: a static pool's ``nodeCount`` (1 when unset), an autoscaled
    pool's ``minNodeCount`` (0 when unset); None when not known yet, or not a count."""
    autoscaling = r.props.get("autoscaling")
    count = _m(autoscaling).get("minNodeCount", 0) if autoscaling else r.props.get("nodeCount", 1)
    if unseen(count) or isinstance(count, bool) or not isinstance(count, (int, float)):
        return None
    return max(int(count), 0)


def _idle_usd_per_day(resources: list[Resource]) -> float:
    """What every TPU pool bills per day with nothing running: the nodes it keeps (a static pool's ``nodeCount``, an
    autoscaled pool's ``minNodeCount``) at its capacity's price. A count not known yet is noted, not judged."""
    total = 0.0
    for r in resources:
        if r.resource_type != NODE_POOL:
            continue
        node = _m(r.props.get("nodeConfig"))
        found = _machine(node.get("machineType"))
        if found is None:
            continue
        version, machine = found
        kept = _kept(r)
        if kept is None:
            continue
        capacity = _capacity(node, bool(r.props.get("autoscaling")))
        total += kept * machine.chips_per_vm * usd_per_chip_hour(version, capacity) * 24
    return total


def _capacity(node: dict[str, Any], autoscaled: bool) -> Capacity:
    if node.get("spot"):
        return Capacity.SPOT
    if node.get("flexStart"):
        return Capacity.FLEX_START
    return Capacity.ON_DEMAND if autoscaled else Capacity.RESERVATION


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
            "maxKeptNodes": {"type": "integer", "default": 4},
        }
    ),
    validate=_guarded_stack(_budget),
)
