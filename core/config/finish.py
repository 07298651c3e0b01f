"""Combinations the steps could never finish, refused when the configuration is read (docs/configuration.md
"Combinations refused because they cannot finish"): meshes that do not tile the chips each side of train_rl gets
(one slice or two), a run that trains no step, what a step's catalogue entry refuses, and a CPU pool too small for
the Pathways head, a CPU step's memory or its scratch."""

from __future__ import annotations

from typing import Any

from core.config.values import Problems, error
from core.machines import machine_shape
from core.models import Model, boot_disk_allocatable_gib
from core.names import PROJECT
from core.pathways import head_requests
from core.settings import PoolSettings, TrainingSettings
from core.steps import STEPS, StepName, scratch_gib


def _k(path: str) -> str:
    return f"{PROJECT}:{path}"


# What the Pathways head pod requests (proxy + resource manager + workload container): 32 vCPU, 196 GiB.
HEAD_REQUEST_VCPU = int(head_requests()["cpu"])


HEAD_REQUEST_GIB = int(head_requests()["memory"] / 2**30)


NODE_RESERVED_VCPU = 2
"""kubelet, system daemons and DaemonSets take some of every node."""


MEMORY_HEADROOM = 1.1


MAX_SLICES = 2
"""The most slices train_rl is split over: the trainer on one, the samplers on the other
(``workloads.specs.commands.disaggregated``). MaxText 0.2.5 builds each side's mesh as one slice on two slices
(``utils/maxtext_utils.py`` ``create_device_mesh`` counts one slice with ``inference_benchmark_test``, which the
split needs: ``RLConfig`` sets ``num_slices`` to -1 there), so a side over more than one slice would be one ICI mesh
across the data-centre network."""


def check_meshes(training: TrainingSettings, chips: int, slices: int = 1) -> None:
    """The rollout and trainer meshes must tile the chips each side gets (MaxText 0.2.5 ``model_creation_utils``
    ``setup_configs_and_devices``): on one slice of ``chips``, the device fractions split it; on two, the trainer
    has the first slice and the samplers the second, whole (``_check_disaggregated``)."""
    knobs = training.knobs
    if slices > MAX_SLICES:
        raise error(
            _k("tpu.slices"),
            slices,
            f"at most {MAX_SLICES}: MaxText 0.2.5's train_rl builds the trainer's and the samplers' meshes as one "
            "slice each, so tpu-rl runs one slice, or two with the trainer on one and the samplers on the other (a "
            "side over more slices would be one mesh across the data-centre network)",
        )
    if slices == 2:
        _check_disaggregated(knobs, chips)
        return
    trainer_chips = int(chips * float(knobs["trainer_devices_fraction"]))
    sampler_chips = int(chips * float(knobs["sampler_devices_fraction"]))
    rollout = int(knobs["rollout_tensor_parallelism"]) * int(knobs["rollout_expert_parallelism"])
    if sampler_chips < 1 or sampler_chips % rollout:
        raise error(
            _k("training.rolloutTensorParallelism"),
            knobs["rollout_tensor_parallelism"],
            f"rollout TP x EP ({rollout}) must divide the sampler's {sampler_chips} chips "
            f"({chips} chips x samplerDevicesFraction)",
        )
    ici = int(knobs["ici_tensor_parallelism"]) * int(knobs["ici_expert_parallelism"])
    fsdp = int(knobs["ici_fsdp_parallelism"])
    if fsdp == 0:
        raise error(_k("training.iciFsdpParallelism"), fsdp, "use -1 (fill the remaining chips) or a positive size")
    # fsdp -1 fills the chips the tensor x expert mesh leaves; a positive fsdp fixes the mesh exactly.
    fits = trainer_chips >= 1 and (trainer_chips == ici * fsdp if fsdp > 0 else trainer_chips % ici == 0)
    if not fits:
        raise error(
            _k("training.iciExpertParallelism"),
            knobs["ici_expert_parallelism"],
            f"the ICI mesh tensor x expert x fsdp ({knobs['ici_tensor_parallelism']} x "
            f"{knobs['ici_expert_parallelism']} x {fsdp}) must tile the trainer's {trainer_chips} chips",
        )


RL_CHIPS_PER_VM = 4
"""MaxText 0.2.5 ``rl.yml``'s ``chips_per_vm``, by which ``setup_configs_and_devices`` counts a slice's VMs."""


def check_actor_copy(training: TrainingSettings, chips: int, slices: int) -> None:
    """``loadCheckpointOnlyOnce`` makes the actor a copy of the reference that shares its buffers until its first
    update; tunix deletes vLLM's previous copy of the weights at each weight sync (``generate/utils.py``
    ``_delete_target_buffers``), so vLLM's copy must never alias the trainer's buffers: the trainer and the sampler
    must have chips of their own. MaxText 0.2.5 ``model_creation_utils.setup_configs_and_devices`` gives them the same
    chips on one slice unless it counts at least two VMs (``chips // chips_per_vm``) and runs under Pathways
    (``use_pathways``); two slices are always apart. Only ``extraArgs`` can bring the chips together on a slice
    tpu-rl accepts (a slice smaller than 8 chips is refused before this)."""
    per_vm = int(training.extra_args.get("chips_per_vm", RL_CHIPS_PER_VM))
    if per_vm < 1:
        raise error(
            _k("training.extraArgs.chips_per_vm"), per_vm, "must be at least 1: MaxText divides the slice's chips by it"
        )
    if training.knobs["load_checkpoint_only_once"] is not True or slices > 1:
        return
    pathways = training.extra_args.get("use_pathways", "true").lower() == "true"
    if chips // per_vm < 2 or not pathways:
        raise error(
            _k("training.loadCheckpointOnlyOnce"),
            True,
            f"must be false where train_rl's trainer and sampler share their chips ({chips} chips, chips_per_vm "
            f"{per_vm}, use_pathways {str(pathways).lower()}: fewer than two VMs or no Pathways): the actor would "
            "share the reference's arrays with vLLM's copy, which tunix deletes at each weight sync",
        )


def _check_disaggregated(knobs: dict[str, Any], chips: int) -> None:
    """Two slices (MaxText 0.2.5 ``utils/model_creation_utils.py``): the samplers' slice holds one rollout replica
    (``workloads.specs.commands.disaggregated`` passes ``rollout_data_parallelism=1``, and
    ``get_rollout_kwargs_for_parallelism`` then needs tensor x data x expert to be the samplers' chips), and the
    trainer's slice is FSDP x tensor (``setup_configs_and_devices``: with tensor parallelism above 1 it refuses an
    ``ici_fsdp_parallelism`` other than -1 or the slice's chips over it; with 1 it sets FSDP to the slice's chips,
    whatever the setting)."""
    rollout = int(knobs["rollout_tensor_parallelism"]) * int(knobs["rollout_expert_parallelism"])
    if rollout != chips:
        raise error(
            _k("training.rolloutTensorParallelism"),
            knobs["rollout_tensor_parallelism"],
            f"rollout TP x EP ({rollout}) must be the samplers' slice of {chips} chips (tpu.slices is 2: the samplers "
            "run one replica over their slice, rollout_data_parallelism 1, as MaxText's multislice RL was introduced, "
            f"maxtext#2702); set rolloutTensorParallelism x rolloutExpertParallelism to {chips}",
        )
    tp, fsdp = int(knobs["ici_tensor_parallelism"]), int(knobs["ici_fsdp_parallelism"])
    if int(knobs["ici_expert_parallelism"]) != 1:
        raise error(
            _k("training.iciExpertParallelism"),
            knobs["ici_expert_parallelism"],
            "must be 1 with two slices: train_rl sets the trainer's mesh to FSDP x tensor over its whole slice",
        )
    if tp > 1 and (chips % tp or (fsdp != -1 and fsdp * tp != chips)):
        raise error(
            _k("training.iciFsdpParallelism"),
            fsdp,
            f"FSDP ({fsdp}) x tensor ({tp}) must be the trainer's slice of {chips} chips (tpu.slices is 2; -1 "
            "fills it)",
        )


def check_steps_finish(training: TrainingSettings, steps: tuple[StepName, ...]) -> None:
    """Refuse what the steps cannot finish, which would otherwise show only at run time, after the conversion and
    hours of training (docs/configuration.md "Combinations refused because they cannot finish"): a run of no
    training step (no checkpoint to export), and what each step the stack runs says it cannot finish with (its
    catalogue entry's ``refusals``: the evaluation's spec bounds and answer markers)."""
    problems = Problems()
    problems.run(_some_training, training)
    for step in steps:
        refusals = STEPS[step].refusals
        for key, value, why in refusals(training.knobs, training.extra_args) if refusals is not None else ():
            problems.add(error(_k(key), value, why))
    problems.check()


def _some_training(training: TrainingSettings) -> None:
    extra = training.extra_args
    if training.final_step < 1:
        factors = " x ".join(
            (
                str(training.knobs["num_batches"]),
                *(extra.get(k, "1") for k in ("rl.num_iterations", "train_fraction", "num_epoch")),
            )
        )
        raise error(
            _k("training.extraArgs.train_fraction"),
            float(extra["train_fraction"]),  # the only factor below 1: the others are whole numbers from 1
            f"training runs int(numBatches x rl.num_iterations x train_fraction x num_epoch) = int({factors}) = 0 "
            "steps: it would save no checkpoint, so the export could never run; raise train_fraction or numBatches",
        )


def check_cpu_pool(pool: PoolSettings, model: Model, step_memory: int) -> None:
    """cpu-np must fit the Pathways head and the CPU-only conversion and export of the model."""
    key = _k("cpuPool")
    shape = machine_shape(pool.machine_type)
    if shape is None:
        return  # custom shapes: size is not known, GKE will tell
    need_vcpu = HEAD_REQUEST_VCPU + NODE_RESERVED_VCPU
    need_gib = max(HEAD_REQUEST_GIB, step_memory) * MEMORY_HEADROOM
    if shape.vcpus < need_vcpu or shape.memory_gib < need_gib:
        raise error(
            f"{key}.machineType",
            pool.machine_type,
            f"{shape.vcpus} vCPU / {shape.memory_gib:g} GiB is too small: the Pathways head requests "
            f"{HEAD_REQUEST_VCPU} vCPU / {HEAD_REQUEST_GIB} GiB and {model.name}'s conversion and export "
            f"{step_memory} GiB (tpu-rl:workflow.stepMemoryGib); use n4-standard-64 or larger",
        )


SCRATCH_HEADROOM_GIB = 20
"""What else a CPU step's node keeps on its boot disk: the step's image layers, its logs, the system pods'."""


def check_cpu_disk(pool: PoolSettings, model: Model) -> None:
    """cpu-np's boot disk must hold the largest CPU step's scratch (an ``emptyDir`` there): a disk too small for
    it makes the kubelet evict the pod under disk pressure, which its pod failure policy re-creates until the
    deadline."""
    largest = max(STEPS, key=lambda step: scratch_gib(model, step))
    need = scratch_gib(model, largest) + SCRATCH_HEADROOM_GIB
    if boot_disk_allocatable_gib(pool.disk_size_gb) >= need:
        return
    smallest = next(gb for gb in range(pool.disk_size_gb, 65537) if boot_disk_allocatable_gib(gb) >= need)
    raise error(
        _k("cpuPool.diskSizeGb"),
        pool.disk_size_gb,
        f"{model.name}'s {STEPS[largest].noun} keeps {scratch_gib(model, largest)} GiB of scratch on cpu-np's boot "
        f"disk, which at {pool.disk_size_gb} GB leaves pods {boot_disk_allocatable_gib(pool.disk_size_gb):.0f} GiB; "
        f"use at least {smallest} GB",
    )
