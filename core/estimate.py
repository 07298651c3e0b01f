"""A small, documented cost and duration model for one workflow run (plain functions, no Pulumi).

Model: each step the stack runs takes an assumed wall-clock time (training by the training model below; a CPU
step, the conversion, the export, the evaluation and the publication, by its model's entry in
``core.models.MODELS``: ``step_hours``), and a chip-hour costs its TPU version's list price (its entry in
``core.tpu.CATALOGUE``) in the capacity mode. What bills, by capacity mode (``BILLING``):

- ``reservation``: the reservation itself, from its creation until it is deleted, whether or not a slice uses
  it ("You're charged for the reserved resources at the same on-demand rate as running VMs, including any
  applicable discounts, until the reservation is deleted. A VM consuming a reservation doesn't incur separate
  charges.", https://cloud.google.com/compute/docs/instances/reservations-overview). The stack does not own
  the reservation (``tpu-rl:tpu.reservation`` names one made beforehand): a run's share is every hour of the
  run, conversion and export included, and ``pulumi destroy`` removes the slice but not the reservation, which
  bills on until it is deleted (``gcloud compute reservations delete``);
- ``spot`` / ``flex-start`` / ``on-demand``: TPU VMs bill while they exist, and the pool scales from 0 to one
  slice only while training pods need it, so only training (plus scale-up/down) bills. Spot VMs are Compute
  Engine VMs at a lower price that Compute Engine may reclaim at any time
  (https://cloud.google.com/kubernetes-engine/docs/concepts/spot-vms); flex-start is "billed using Dynamic
  Workload Scheduler pricing" and GKE creates its VMs only when the capacity becomes available
  (https://cloud.google.com/kubernetes-engine/docs/concepts/dws), so nothing bills while the request waits ("You
  can delete your TPU resources at any time to stop billing", https://cloud.google.com/tpu/docs/request-using-flex-start).

The CPU steps run on the CPU pool and hold no TPU in any mode; what cpu-np's nodes cost is not modelled.

What each failure mode costs (``FailureCost``, stack output ``estimate.failureModes``), with the failure
semantics of ``workloads.specs.step_manifests`` and ``workloads.observe.waiting``:

- ``deterministicFailure``: the trainer exits non-zero at its first step (a bad flag, an OOM at
  compilation): one start-up, no restart (``failOnWorkloadExit``);
- ``preemption``: a disruption restarts the JobSet (``restartOnDisruption``): a new start-up (restore,
  compilation from the run's warm cache, no pre-RL evaluation: ``RESTART_STARTUP_MINUTES``) plus the steps since
  the last checkpoint, half a ``checkpoint_period`` on average, less the first of them, which the restart's
  start-up holds;
- ``unschedulable``: a step's pod that finds no node holds a reserved slice until `up` stops at
  ``tpu-rl:workflow.unschedulableTimeout`` (an autoscaled slice is not created for a pod that cannot start:
  the head starts first, ``startupPolicy: InOrder``);
- ``maintenance``: a TPU host maintenance event under training (no exclusion holds it back): train_rl dies of the
  lost slice and the JobSet restarts once; the restarted head waits for its workers (``workloads/container/
  slice_state.py``: no second restart, no stall) while the slice is away, for up to
  ``core.config.defaults.TPU_MAINTENANCE_SECONDS`` within ``tpu-rl:kueue.recoveryTimeout`` (Kueue's recovery and the
  head's own bound), then the restart's start-up and the steps since the last checkpoint. A reservation bills the
  wait; an autoscaled pool has no VMs while it waits. Past the budget the step fails for the next `up` to retry;
- ``nodeUpgrade``: a node upgrade under training, a restart; nothing while the standing exclusion keeps node
  upgrades away (``NO_MINOR_OR_NODE_UPGRADES``, the default: ``infra.gcp.gke_spec.maintenance_policy``).

The run's protection from maintenance is in the output too (``Maintenance``): which node upgrades can reach a
running training, and how long Kueue waits for a slice that is away.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from core.config.defaults import DEFAULT_EXCLUSION, DEFAULT_PODS_READY, RECOVERY_SECONDS, TPU_MAINTENANCE_SECONDS
from core.models import MODELS, Model
from core.steps import REQUIRED, STEPS, StepFacts, StepName
from core.tpu import CATALOGUE, Capacity, SliceShape, TpuVersionName

# What the model assumes beyond the catalogues: each TPU version's list prices are its entry's
# (``core.tpu.CATALOGUE``, ``TpuPrices``), each model's durations its entry's (``core.models.MODELS``).
# Prices: the Google Cloud TPU pricing page (https://cloud.google.com/tpu/pricing), recorded on PRICES_AS_OF.
# spot and flex-start are assumptions relative to on-demand (SPOT_FACTOR, FLEX_START_FACTOR).
SPOT_FACTOR = 0.40
FLEX_START_FACTOR = 0.60
PRICES_AS_OF = "2026-11-29"

# Assumed durations (hours) that do not depend on the model.
STARTUP_MINUTES: dict[str, int] = {
    "admission": 1,
    "nodes": 5,
    "images": 12,
    "set-up": 1,
    "Pathways": 2,
    "load": 5,
    "compile": 10,
    "restore": 2,
    "pre-RL eval": 5,
    "first step": 2,
}
"""One training attempt's start-up at the defaults, by the components `make status` and `make report` measure
(``workloads.observe.startup``), in minutes (``startup_minutes``: a run's own). Every figure is an assumption, split
so that, with the checkpoint read twice, they add up to the baseline's 0.75 h (``BASELINE_STARTUP_MINUTES``):
admission 1 min (the queue holds only this run); nodes 5 min (an autoscaled TPU pool's scale-up; a reservation's
nodes exist already); images 12 min (one reported run pulled the ~12 GB MaxText image cold in 21 min: a node that
has it already pulls nothing); set-up 1 min (the script's patch and base files); Pathways 2 min (the resource
manager meeting every worker); load 5 min (tokenizer and dataset 1, two reads of the converted checkpoint,
``CHECKPOINT_READ_MINUTES`` each: the reference's and the actor's, MaxText's default, which tpu-rl keeps until a
real run has shown the copy, docs/first-run.md "The first training run's path"; 3 with
``tpu-rl:training.loadCheckpointOnlyOnce``, which copies the actor from the reference: a 43-minute start-up);
compile 10 min (vLLM's engine on TPU, reported at 10-30 min cold); restore 2 min (a resumed attempt's checkpoint;
none for the first); pre-RL eval 5 min (5 test batches); first step 2 min (the first step whole: the training step's
compilation, the first rollout and update; ``train_hours`` counts the steps after it). 45 minutes in all (0.75 h).
Replace them with what `make report` measures on your runs."""
CHECKPOINT_READ_MINUTES = 2
"""One read of the converted checkpoint (~52 GB for gemma4-26b) into the trainer's chips, part of "load": an
assumption. MaxText reads it once more, into the actor, when ``tpu-rl:training.loadCheckpointOnlyOnce`` is false (the
default)."""
BASELINE_STARTUP_MINUTES = 45
"""The baseline start-up, the measure of the goal: cold caches and images, and two checkpoint reads (0.75 h), which
is the defaults' first attempt (``STARTUP_MINUTES``)."""
WARM_COMPILE_MINUTES = 2
"""The compile component of a restarted attempt, which finds its run's compilation cache warm (Pathways keeps it in
the training step's scratch, ``core.layout.compile_cache``, kept across attempts): vLLM on TPU is reported
compiling in "10-30 min cold against 1-3 min from a cache" (vLLM PR 7533). An assumption: the Pathways servers that
keep that cache are closed binaries, so a hit is not verified offline; `make report` measures each attempt's
compile. The first attempt of a run with a new cache key compiles cold (``STARTUP_MINUTES``)."""


def restarted(first: Mapping[str, int], *, same_nodes: bool = False) -> dict[str, int]:
    """A restarted attempt's start-up from a first attempt's (``RESTART_STARTUP_MINUTES``); with ``same_nodes``, a
    restart on the nodes the run already holds (a stalled attempt, a restart after a pod's disruption that left the
    VMs in place): no node to wait for, and no image to pull, since the kubelet keeps the digest-pinned images (no
    ``imagePullPolicy`` is set, so Kubernetes' default for an image that is not ``:latest`` applies, ``IfNotPresent``:
    https://kubernetes.io/docs/concepts/containers/images/#image-pull-policy): 32 - 5 - 12 = 15 minutes at the
    defaults. docs/cost.md "Start-up, before and after" shows it beside the other two and `make report` beside a
    restart's measure; the estimate's failure modes keep ``RESTART_STARTUP_MINUTES``, which assumes new nodes."""
    restart = {**first, "compile": WARM_COMPILE_MINUTES, "pre-RL eval": 0}
    return {**restart, "nodes": 0, "images": 0} if same_nodes else restart


RESTART_STARTUP_MINUTES: dict[str, int] = restarted(STARTUP_MINUTES)
"""A restarted attempt's start-up: the first attempt's with a warm compilation cache and no pre-RL evaluation (45 -
8 - 5 = 32 minutes at the defaults). An attempt that resumes from a checkpoint skips it (its weights are not the
base's: ``workloads/container/launch.py`` ``skip_pre_rl_evaluation``; the weight sync before it stays), and a restart
resumes from the checkpoint the failure modes count the steps since (one before the run's first checkpoint is a fresh
start and evaluates again)."""
STARTUP_GOAL_MINUTES = BASELINE_STARTUP_MINUTES / 4
"""The start-up goal of a restart with warm caches and images: a quarter of the baseline's 45 minutes (0.75 h)."""
REFERENCE_TARGET_LENGTH = 640
"""The target length a model's ``train_seconds_per_sample`` is given for."""
REFERENCE_CHIPS = 32
"""The chips a model's ``train_seconds_per_sample`` is given for."""
AUTOSCALE_OVERHEAD_HOURS = 0.25
"""TPU VMs boot before training starts and linger until scale-down after it ends."""


@dataclass(frozen=True)
class StepEstimate:
    step: StepName
    hours: float
    holds_tpu: bool
    tpu_chip_hours: float
    usd: float


@dataclass(frozen=True)
class FailureCost:
    """TPU hours one failure of a kind bills, and what they cost."""

    tpu_hours: float
    tpu_chip_hours: float
    usd: float


NODE_EXCLUDING_SCOPES = ("NO_MINOR_OR_NODE_UPGRADES",)
"""Standing exclusion scopes that keep every node upgrade away (GKE's ``MaintenanceExclusionOptions.Scope``)."""


@dataclass(frozen=True)
class Maintenance:
    """How a run is protected from maintenance (``infra.gcp.gke_spec.maintenance_policy``, Kueue's recovery)."""

    exclusion: str | None
    """The standing exclusion's scope (``tpu-rl:gke.maintenanceExclusion``), None: none."""
    recovery_hours: float
    """Kueue's recovery timeout: how long a running step's pods may be away (``tpu-rl:kueue.recoveryTimeout``)."""

    @property
    def node_upgrades_held(self) -> bool:
        return self.exclusion in NODE_EXCLUDING_SCOPES

    def to_output(self) -> dict[str, Any]:
        return {
            "nodeUpgrades": f"held off until end of support ({self.exclusion})"
            if self.node_upgrades_held
            else "let in: a node patch in the daily window ends a running training attempt, restarted from its "
            "checkpoint",
            "recoveryHours": round(self.recovery_hours, 2),
            "tpuMaintenanceHours": round(TPU_MAINTENANCE_SECONDS / 3600, 2),
        }


@dataclass(frozen=True)
class Estimate:
    capacity: Capacity
    chips: int
    usd_per_chip_hour: float
    steps: list[StepEstimate]
    total_hours: float
    total_tpu_chip_hours: float
    total_usd: float
    idle_usd_per_day: float
    """What the slice's share of the reservation costs per day when nothing runs, and after destroy until the
    reservation is deleted (reservation only; autoscaled pools scale to 0)."""
    notes: list[str] = field(default_factory=list)
    failures: dict[str, FailureCost] = field(default_factory=dict)
    """What each failure mode costs (module docstring)."""
    maintenance: Maintenance | None = None
    """The run's protection from maintenance (None: not given)."""
    startup: dict[str, int] = field(default_factory=dict)
    """One training attempt's start-up by component, minutes (``STARTUP_MINUTES``; empty: no training)."""

    def to_output(self) -> dict[str, Any]:
        """Stack-output form, camelCase and rounded."""
        return {
            "capacity": str(self.capacity),  # the mode's string, as the stack output has always held it
            "chips": self.chips,
            "usdPerChipHour": round(self.usd_per_chip_hour, 4),
            "steps": {
                s.step: {
                    "hours": round(s.hours, 2),
                    "holdsTpu": s.holds_tpu,
                    "tpuChipHours": round(s.tpu_chip_hours, 1),
                    "usd": round(s.usd, 2),
                }
                for s in self.steps
            },
            "totalHours": round(self.total_hours, 2),
            "totalTpuChipHours": round(self.total_tpu_chip_hours, 1),
            "totalUsd": round(self.total_usd, 2),
            "idleUsdPerDay": round(self.idle_usd_per_day, 2),
            "pricesAsOf": PRICES_AS_OF,
            "notes": self.notes,
            "failureModes": {
                mode: {
                    "tpuHours": round(f.tpu_hours, 2),
                    "tpuChipHours": round(f.tpu_chip_hours, 1),
                    "usd": round(f.usd, 2),
                }
                for mode, f in self.failures.items()
            },
            **({"maintenance": self.maintenance.to_output()} if self.maintenance else {}),
            **({"trainStartupMinutes": dict(self.startup)} if self.startup else {}),
        }


def usd_per_chip_hour(version: TpuVersionName, capacity: str) -> float:
    """The price of one chip-hour of a TPU version (its entry's ``prices``) in a capacity mode: a ``Capacity``, or
    its string as a run's record and ``make report --capacity`` give it (parsed here; another string raises
    ValueError)."""
    prices = CATALOGUE[version].prices
    by_capacity: dict[Capacity, float] = {
        Capacity.RESERVATION: prices.reservation,
        Capacity.ON_DEMAND: prices.on_demand,
        Capacity.SPOT: prices.on_demand * SPOT_FACTOR,
        Capacity.FLEX_START: prices.on_demand * FLEX_START_FACTOR,
    }
    return by_capacity[Capacity(capacity)]


@dataclass(frozen=True)
class TrainingRun:
    """What the length of a training run depends on (MaxText's names in the comments)."""

    model: str
    """The model's catalogue name (a key of ``core.models.MODELS``), whose entry gives its durations."""
    num_batches: int  # num_batches
    batch_size: int  # batch_size
    num_generations: int  # rl.num_generations
    max_target_length: int  # max_target_length
    checkpoint_reads: int = 2
    """How often an attempt reads the converted checkpoint: 2 (MaxText's default, tpu-rl's) or 1
    (load_checkpoint_only_once)."""


def step_seconds(run: TrainingRun, chips: int) -> float:
    """Seconds of one step of batch_size x generations samples on `chips` chips."""
    per_step = (
        MODELS[run.model].train_seconds_per_sample
        * run.batch_size
        * run.num_generations
        * (run.max_target_length / REFERENCE_TARGET_LENGTH)
    )
    return per_step * REFERENCE_CHIPS / chips


def step_hours(facts: StepFacts, model: Model) -> float | None:
    """A CPU step's assumed wall-clock hours: its catalogue entry's ``hours`` (None: not a CPU step the model
    times)."""
    return facts.hours(model) if facts.hours is not None else None


def startup_minutes(run: TrainingRun) -> dict[str, int]:
    """One training attempt's start-up by component (``STARTUP_MINUTES``, with the run's checkpoint reads)."""
    extra = (run.checkpoint_reads - 2) * CHECKPOINT_READ_MINUTES
    return {**STARTUP_MINUTES, "load": STARTUP_MINUTES["load"] + extra}


def train_hours(run: TrainingRun, chips: int) -> float:
    """The start-up, then the steps after the first: the start-up ends at the first step's ``Train step N training
    loss`` line (``workloads.observe.startup``), so its "first step" holds that step whole, and the report's step
    chip-hours start after it (``workloads.observe.run_data`` ``step_chip_hours``)."""
    return sum(startup_minutes(run).values()) / 60 + (run.num_batches - 1) * step_seconds(run, chips) / 3600


def failure_costs(
    chips: int,
    price: float,
    capacity: Capacity,
    run: TrainingRun,
    *,
    checkpoint_period: int,
    unschedulable_seconds: int,
    maintenance: Maintenance | None = None,
) -> dict[str, FailureCost]:
    """What one failure of each kind bills (module docstring)."""
    # The steps since the last checkpoint are done again; the restart's start-up holds the first of them.
    lost_steps = max(min(checkpoint_period, run.num_batches) / 2 - 1, 0)
    restart = sum(restarted(startup_minutes(run)).values()) / 60 + lost_steps * step_seconds(run, chips) / 3600
    reserved = capacity == Capacity.RESERVATION
    protection = maintenance or Maintenance(DEFAULT_EXCLUSION, (DEFAULT_PODS_READY[capacity] + RECOVERY_SECONDS) / 3600)
    away = min(TPU_MAINTENANCE_SECONDS / 3600, protection.recovery_hours)
    hours = {
        "deterministicFailure": sum(startup_minutes(run).values()) / 60,
        "preemption": restart,
        "unschedulable": unschedulable_seconds / 3600 if reserved else 0.0,
        "maintenance": (away if reserved else 0.0) + restart,
        "nodeUpgrade": 0.0 if protection.node_upgrades_held else restart,
    }
    return {mode: FailureCost(h, h * chips, h * chips * price) for mode, h in hours.items()}


def estimate_run(
    shape: SliceShape,
    slices: int,
    capacity: Capacity,
    run: TrainingRun | None,
    *,
    checkpoint_period: int = 10,
    unschedulable_seconds: int = 900,
    steps: Iterable[StepName] | None = None,
    maintenance: Maintenance | None = None,
) -> Estimate:
    """Wall-clock hours, TPU chip-hours and USD per step for one run of the workflow, and what each failure
    mode costs; with no `run` (a provision-only stack) every step takes 0 h and only a reserved slice's daily
    bill remains. `steps` are the steps the stack runs (``Settings.workflow.steps``; None: the required ones)."""
    chips = shape.chips * slices
    price = usd_per_chip_hour(shape.version, capacity)
    reserved = capacity == Capacity.RESERVATION
    runs = set(REQUIRED if steps is None else steps)
    hours: dict[StepName, float] = {}
    for facts in STEPS.values():
        if facts.name not in runs:
            continue
        if facts.holds_tpu:
            hours[facts.name] = 0.0 if run is None else train_hours(run, chips)
            continue
        assumed = None if run is None else step_hours(facts, MODELS[run.model])
        if run is None or assumed is not None:
            hours[facts.name] = assumed or 0.0
    estimates: list[StepEstimate] = []
    for step, wall in hours.items():
        holds_tpu = STEPS[step].holds_tpu
        if reserved:
            billed = wall
        elif holds_tpu and wall:
            billed = wall + AUTOSCALE_OVERHEAD_HOURS
        else:
            billed = 0.0
        estimates.append(StepEstimate(step, wall, holds_tpu, billed * chips, billed * chips * price))
    notes = [cpu_note([step for step in hours if not STEPS[step].holds_tpu]), billing_note(capacity, chips, price)]
    return Estimate(
        capacity=capacity,
        chips=chips,
        usd_per_chip_hour=price,
        steps=estimates,
        total_hours=sum(hours.values()),
        total_tpu_chip_hours=sum(s.tpu_chip_hours for s in estimates),
        total_usd=sum(s.usd for s in estimates),
        idle_usd_per_day=chips * price * 24 if reserved else 0.0,
        notes=notes,
        failures={}
        if run is None
        else failure_costs(
            chips,
            price,
            capacity,
            run,
            checkpoint_period=checkpoint_period,
            unschedulable_seconds=unschedulable_seconds,
            maintenance=maintenance,
        ),
        maintenance=maintenance,
        startup={} if run is None else startup_minutes(run),
    )


def cpu_note(steps: list[StepName]) -> str:
    """``conversion, export and evaluation run on the CPU pool and hold no TPU``: the estimate's CPU steps."""
    nouns = [STEPS[step].noun for step in steps]
    listed = nouns[0] if len(nouns) == 1 else ", ".join(nouns[:-1]) + " and " + nouns[-1]
    return (
        f"{listed} run{'s' if len(nouns) == 1 else ''} on the CPU pool and hold{'s' if len(nouns) == 1 else ''} no TPU"
    )


BILLING: dict[Capacity, str] = {
    Capacity.SPOT: (
        "the spot pool scales to zero: its TPU VMs bill at the spot price only while they exist, from the "
        "scale-up for training to the scale-down after it"
    ),
    Capacity.FLEX_START: (
        "the flex-start pool scales to zero: its TPU VMs bill from when the capacity is granted to the "
        "scale-down after training, nothing while the request waits for capacity"
    ),
    Capacity.ON_DEMAND: (
        "the on-demand pool scales to zero: its TPU VMs bill only while they exist, from the scale-up for "
        "training to the scale-down after it"
    ),
}
"""What bills in each autoscaled capacity mode (module docstring); a reservation's note is ``billing_note``'s."""


def billing_note(capacity: Capacity, chips: int, price: float) -> str:
    """The estimate's note on what bills in ``capacity`` (module docstring, with the sources)."""
    if capacity != Capacity.RESERVATION:
        return BILLING[capacity]
    return (
        f"the reservation bills from its creation until it is deleted, used or not: for this slice {chips} chips x "
        f"${price:.2f} = ${chips * price * 24:,.0f} per day, also while the CPU steps run and after "
        "`pulumi destroy` (which removes the slice, not the reservation); delete the reservation to stop it"
    )


def training_run(settings: Any) -> TrainingRun:
    """The training run of a validated ``core.settings.Settings``."""
    knobs = settings.training.knobs
    return TrainingRun(
        model=settings.model.spec.name,
        num_batches=int(knobs["num_batches"]),
        batch_size=int(knobs["batch_size"]),
        num_generations=int(knobs["rl.num_generations"]),
        max_target_length=int(knobs["max_target_length"]),
        checkpoint_reads=1 if knobs["load_checkpoint_only_once"] else 2,
    )


def estimate_for(settings: Any) -> Estimate:
    """The estimate of a validated ``core.settings.Settings``."""
    run = training_run(settings) if settings.workflow.enabled else None
    return estimate_run(
        settings.slice,
        settings.tpu.slices,
        settings.tpu.capacity,
        run,
        checkpoint_period=int(settings.training.knobs["checkpoint_period"]),
        unschedulable_seconds=settings.workflow.unschedulable_timeout,
        steps=settings.workflow.steps or REQUIRED,
        maintenance=Maintenance(settings.gke.maintenance_exclusion, settings.kueue.recovery_timeout / 3600),
    )


def step_seconds_for(settings: Any) -> float:
    """The model's seconds per training step of a validated ``Settings`` (the status tool's ETA)."""
    return step_seconds(training_run(settings), settings.total_chips)


def _restart_changes() -> str:
    """The components a restart's start-up changes, with their minutes (``RESTART_STARTUP_MINUTES``)."""
    changed = [(name, m) for name, m in RESTART_STARTUP_MINUTES.items() if m != STARTUP_MINUTES[name]]
    return ", ".join(f"{name} {minutes}" for name, minutes in changed)


def describe(output: dict[str, Any]) -> str:
    """A short table of an estimate's stack output, for the offline plan."""
    lines = [
        f"estimate ({output['capacity']}, {output['chips']} chips at ${output['usdPerChipHour']:.2f}/chip-hour, "
        f"prices as of {output['pricesAsOf']}):"
    ]
    for step, s in output["steps"].items():
        tpu = "TPU" if s["holdsTpu"] else "CPU only"
        lines.append(f"  {step:<8} {s['hours']:6.2f} h  {tpu:<8}  {s['tpuChipHours']:8.1f} chip-h  ${s['usd']:10,.2f}")
    lines.append(
        f"  {'total':<8} {output['totalHours']:6.2f} h            {output['totalTpuChipHours']:8.1f} chip-h  "
        f"${output['totalUsd']:10,.2f}"
    )
    lines += [f"  note: {n}" for n in output["notes"]]
    if output.get("trainStartupMinutes"):
        startup = output["trainStartupMinutes"]
        parts = ", ".join(f"{name} {minutes}" for name, minutes in startup.items())
        lines.append(
            f"  train start-up per attempt {sum(startup.values()) / 60:.2f} h, in minutes: {parts} (assumed; "
            f"`make report` measures them); a restart compiles from the run's cache and, resuming, skips the pre-RL "
            f"evaluation: {_restart_changes()}"
        )
    words = {
        "deterministicFailure": "a failure of the trainer (no restart)",
        "preemption": "a preemption (restart + steps since the checkpoint)",
        "unschedulable": "an unschedulable step until `up` stops",
        "maintenance": "a TPU maintenance event (the wait + a restart)",
        "nodeUpgrade": "a node upgrade under training (restart)",
    }
    for mode, f in output.get("failureModes", {}).items():
        lines.append(f"  if {words[mode]:<52} {f['tpuChipHours']:8.1f} chip-h  ${f['usd']:10,.2f}")
    if "maintenance" in output:
        m = output["maintenance"]
        lines.append(
            f"  maintenance: node upgrades {m['nodeUpgrades']}; a restarted attempt (and Kueue) waits "
            f"{m['recoveryHours']:g} h for a slice that is away (a TPU maintenance event: up to "
            f"{m['tpuMaintenanceHours']:g} h), then the step fails"
        )
    return "\n".join(lines)
