"""The config rules' boundaries (tests/test_config_boundaries.py) and the reviewed messages of the config's
refusals (tests/data/config-messages.tsv: the corpus of tests/test_config_rejections.py, then each boundary's
refused side as ``boundary:<rule>``; `TPU_RL_UPDATE_MESSAGES=1 make test` rewrites it)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from core.config import ConfigError
from core.settings import Settings
from tests.lifecycle_walk import settings

MESSAGES = Path(__file__).parent / "data" / "config-messages.tsv"
MANY_ERRORS = Path(__file__).parent / "data" / "stacks" / "Pulumi.many-errors.yaml"
"""The passphrase fixture (tests/data/stacks, the CLI's format) with ten independent mistakes."""


def read_messages() -> dict[str, str]:
    """Case -> message; a message of several problems (one line each) is one row, a tab between its lines."""
    rows = MESSAGES.read_text().splitlines() if MESSAGES.exists() else []
    return {case: "\n".join(lines) for case, *lines in (row.split("\t") for row in rows if row)}


T = "tpu-rl:training."
TWO = ["tpu-rl:tpu.slices=2", f"{T}iciExpertParallelism=1", f"{T}rolloutTensorParallelism=32"]
"""Two slices of 32 chips: the trainer's mesh FSDP x tensor, one sampler replica over the other slice."""
EVALUATE = "tpu-rl:workflow.steps.evaluate=true"
MAXTEXT_0_2_4 = "us-docker.pkg.dev/cloud-tpu-images/maxtext-images/tpu_post_training:0.2.4"
Check = Callable[[Settings], Any]


def knob(name: str) -> Check:
    return lambda s: s.training.knobs[name]


# (rule, accepted overrides, what Settings holds then, expected value, refused overrides); each refused line is
# reviewed word for word in tests/data/config-messages.tsv as `boundary:<rule>` (`TPU_RL_UPDATE_MESSAGES=1 make test`).
BOUNDARIES: list[tuple[str, list[str], Check, Any, list[str]]] = [
    (
        "slices-max",
        ["tpu-rl:tpu.slices=64", "tpu-rl:workflow.enabled=false"],
        lambda s: s.tpu.slices,
        64,
        ["tpu-rl:tpu.slices=65", "tpu-rl:workflow.enabled=false"],
    ),
    (
        "slices-train",
        [*TWO, "tpu-rl:tpu.slices=2"],
        lambda s: s.tpu.slices,
        2,
        [*TWO, "tpu-rl:tpu.slices=3"],
    ),
    (
        "two-slices-expert",
        TWO,
        knob("ici_expert_parallelism"),
        1,
        [*TWO, f"{T}iciExpertParallelism=2"],
    ),
    (
        "two-slices-fsdp",
        [*TWO, f"{T}iciFsdpParallelism=16"],
        knob("ici_fsdp_parallelism"),
        16,
        [*TWO, f"{T}iciFsdpParallelism=8"],
    ),
    (
        # Tensor parallelism 1: MaxText sets the trainer's FSDP to its slice's chips whatever the setting
        # (setup_configs_and_devices checks the setting only with tensor parallelism above 1).
        "two-slices-fsdp-overridden-at-tensor-1",
        [*TWO, f"{T}iciTensorParallelism=1", f"{T}iciFsdpParallelism=8"],
        knob("ici_fsdp_parallelism"),
        8,
        [*TWO, f"{T}iciTensorParallelism=2", f"{T}iciFsdpParallelism=8"],
    ),
    (
        # One sampler replica over the samplers' slice: rollout TP x EP is its 32 chips (4 x 8), 4 x 4 is two replicas.
        "two-slices-one-sampler-replica",
        [*TWO, f"{T}rolloutTensorParallelism=4", f"{T}rolloutExpertParallelism=8"],
        knob("rollout_expert_parallelism"),
        8,
        [*TWO, f"{T}rolloutTensorParallelism=4", f"{T}rolloutExpertParallelism=4"],
    ),
    ("slices-min", ["tpu-rl:tpu.slices=1"], lambda s: s.tpu.slices, 1, ["tpu-rl:tpu.slices=0"]),
    (
        "batches-max",  # the reader's bound (a run of them fits no deadline: check_train_deadline)
        [f"{T}numBatches=100000", "tpu-rl:workflow.enabled=false"],
        knob("num_batches"),
        100000,
        [f"{T}numBatches=100001", "tpu-rl:workflow.enabled=false"],
    ),
    (
        "top-k-is-the-vocabulary",
        [f"{T}decodeSamplingTopK=262144"],
        knob("decode_sampling_top_k"),
        262144,
        [f"{T}decodeSamplingTopK=262145"],
    ),
    (
        "hbm-max",
        [f"{T}hbmUtilizationVllm=0.95"],
        knob("hbm_utilization_vllm"),
        0.95,
        [f"{T}hbmUtilizationVllm=0.951"],
    ),
    (
        "generations-min",
        [f"{T}numGenerations=2"],
        knob("rl.num_generations"),
        2,
        [f"{T}numGenerations=1"],
    ),
    (
        "schedule-min",
        [f"{T}learningRateScheduleSteps=-1"],
        knob("learning_rate_schedule_steps"),
        -1,
        [f"{T}learningRateScheduleSteps=-2"],
    ),
    (
        "learning-rate-min",
        [f"{T}learningRate=0"],
        knob("learning_rate"),
        0.0,
        [f"{T}learningRate=-1e-12"],
    ),
    (
        "checkpoint-period-min",
        [f"{T}checkpointPeriod=1"],
        knob("checkpoint_period"),
        1,
        [f"{T}checkpointPeriod=0"],
    ),
    (
        "system-pool-min",
        ["tpu-rl:systemPool.minNodes=1"],
        lambda s: s.system_pool.min_nodes,
        1,
        ["tpu-rl:systemPool.minNodes=0"],
    ),
    (
        "pool-max",
        ["tpu-rl:cpuPool.maxNodes=1000"],
        lambda s: s.cpu_pool.max_nodes,
        1000,
        ["tpu-rl:cpuPool.maxNodes=1001"],
    ),
    (
        "min-equals-max",
        ["tpu-rl:systemPool.minNodes=3", "tpu-rl:systemPool.maxNodes=3"],
        lambda s: (s.system_pool.min_nodes, s.system_pool.max_nodes),
        (3, 3),
        ["tpu-rl:systemPool.minNodes=3", "tpu-rl:systemPool.maxNodes=2"],
    ),
    (
        "cpu-disk-min",  # the reader's bound (a stack that runs no workflow keeps no scratch there)
        ["tpu-rl:workflow.enabled=false", "tpu-rl:cpuPool.diskSizeGb=50"],
        lambda s: s.cpu_pool.disk_size_gb,
        50,
        ["tpu-rl:workflow.enabled=false", "tpu-rl:cpuPool.diskSizeGb=49"],
    ),
    (
        "restarts-max",
        ["tpu-rl:workflow.maxRestarts=10"],
        lambda s: s.workflow.max_restarts,
        10,
        ["tpu-rl:workflow.maxRestarts=11"],
    ),
    (
        # The estimate's training: 45 min of start-up and 96 s a step after the first; 872 batches are 23.98 h, 873
        # are 24.003 h, past one day: two disruptions to plan for.
        "restarts-one-per-started-day",
        [f"{T}numBatches=872", "tpu-rl:workflow.maxRestarts=1"],
        lambda s: s.workflow.max_restarts,
        1,
        [f"{T}numBatches=873", "tpu-rl:workflow.maxRestarts=1", "tpu-rl:workflow.timeouts.train=25h"],
    ),
    (
        # The attempt's deadline (tpu-rl:workflow.timeouts.train, 24h) holds the estimate's training: 872 batches are
        # 23.98 h, 873 are 24.003 h (the numbers of restarts-one-per-started-day).
        "train-fits-its-deadline",
        [f"{T}numBatches=872"],
        lambda s: s.workflow.timeouts["train"],
        24 * 3600,
        [f"{T}numBatches=873"],
    ),
    (
        "gke-version-kueue",
        ["tpu-rl:gke.versionPrefix=1.33."],
        lambda s: s.gke.version_prefix,
        "1.33.",
        ["tpu-rl:gke.versionPrefix=1.32.9"],
    ),
    (
        "gke-version-maintenance-label",
        ["tpu-rl:kueue.enabled=false", "tpu-rl:gke.versionPrefix=1.31.1-gke.2008000"],
        lambda s: s.gke.version_prefix,
        "1.31.1-gke.2008000",
        ["tpu-rl:kueue.enabled=false", "tpu-rl:gke.versionPrefix=1.31.1-gke.2007999"],
    ),
    (
        "maxtext-image-of-another-release",
        [f"tpu-rl:images.maxtext={MAXTEXT_0_2_4}", "tpu-rl:images.maxtextCheck=warn"],
        lambda s: (s.images.maxtext, s.images.maxtext_check),
        (MAXTEXT_0_2_4, "warn"),
        [f"tpu-rl:images.maxtext={MAXTEXT_0_2_4}"],
    ),
    (
        "restarts-zero",
        ["tpu-rl:workflow.maxRestarts=0"],
        lambda s: s.workflow.max_restarts,
        0,
        ["tpu-rl:workflow.maxRestarts=-1"],
    ),
    (
        "timeout-max",
        ["tpu-rl:workflow.timeouts.train=168h"],
        lambda s: s.workflow.timeouts["train"],
        168 * 3600,
        ["tpu-rl:workflow.timeouts.train=168h0m1s"],
    ),
    (
        "timeout-min",
        ["tpu-rl:workflow.timeouts.convert=1m"],
        lambda s: s.workflow.timeouts["convert"],
        60,
        ["tpu-rl:workflow.timeouts.convert=59s"],
    ),
    (
        "micro-batch-divides",
        [f"{T}trainMicroBatchSize=4"],
        knob("train_micro_batch_size"),
        4,
        [f"{T}trainMicroBatchSize=3"],
    ),
    (
        "prefill-below-target",
        [f"{T}maxPrefillPredictLength=639"],
        knob("max_prefill_predict_length"),
        639,
        [f"{T}maxPrefillPredictLength=640"],
    ),
    (
        "fractions-sum-to-one",
        [f"{T}trainerDevicesFraction=0.25", f"{T}samplerDevicesFraction=0.75"],
        lambda s: (s.training.knobs["trainer_devices_fraction"], s.training.knobs["sampler_devices_fraction"]),
        (0.25, 0.75),
        [f"{T}trainerDevicesFraction=0.25", f"{T}samplerDevicesFraction=0.75001"],
    ),
    (
        # Float sums: 0.5 + 0.500000001 is exactly 1 + 1e-9, the rule's tolerance.
        "fractions-tolerance",
        [f"{T}samplerDevicesFraction=0.500000001"],
        knob("sampler_devices_fraction"),
        0.500000001,
        [f"{T}samplerDevicesFraction=0.500000002"],
    ),
    (
        "sampler-above-zero",
        [f"{T}samplerDevicesFraction=0.001", f"{T}rolloutTensorParallelism=1", "tpu-rl:workflow.enabled=false"],
        knob("sampler_devices_fraction"),
        0.001,
        [f"{T}samplerDevicesFraction=0"],
    ),
    (
        "flex-start-gke-version",
        ["tpu-rl:tpu.capacity=flex-start", "tpu-rl:tpu.reservation=", "tpu-rl:gke.versionPrefix=1.33."],
        lambda s: (s.tpu.capacity, s.gke.version_prefix),
        ("flex-start", "1.33."),
        ["tpu-rl:tpu.capacity=flex-start", "tpu-rl:tpu.reservation=", "tpu-rl:gke.versionPrefix=1.32."],
    ),
    (
        "shared-reservation-path-is-kept",
        ["tpu-rl:tpu.reservation=projects/other-project/reservations/shared-v6e"],
        lambda s: s.tpu.reservation,
        "projects/other-project/reservations/shared-v6e",
        ["tpu-rl:tpu.reservation="],
    ),
    (
        # 32 chips x 0.125 = 4 sampler chips, rollout TP 4 x EP 1 tiles them; 0.1 gives 3 chips.
        "rollout-mesh-tiles-the-sampler",
        [f"{T}samplerDevicesFraction=0.125"],
        knob("sampler_devices_fraction"),
        0.125,
        [f"{T}samplerDevicesFraction=0.1"],
    ),
    (
        # One sampler chip is enough for TP 1; a fraction that rounds down to 0 chips is not (0 % 1 == 0).
        "sampler-has-a-chip",
        [f"{T}samplerDevicesFraction=0.03125", f"{T}rolloutTensorParallelism=1"],
        knob("sampler_devices_fraction"),
        0.03125,
        [f"{T}samplerDevicesFraction=0.03", f"{T}rolloutTensorParallelism=1"],
    ),
    (
        "trainer-has-a-chip",
        [f"{T}trainerDevicesFraction=0.03125", f"{T}iciTensorParallelism=1", f"{T}iciExpertParallelism=1"],
        knob("trainer_devices_fraction"),
        0.03125,
        [f"{T}trainerDevicesFraction=0.03", f"{T}iciTensorParallelism=1", f"{T}iciExpertParallelism=1"],
    ),
    (
        # The actor a copy of the reference: 32 chips at chips_per_vm 16 are two VMs to MaxText, the trainer's and
        # the sampler's chips apart; at 17, one VM, the same chips (model_creation_utils setup_configs_and_devices).
        "actor-copy-needs-chips-apart",
        [f"{T}loadCheckpointOnlyOnce=true", f"{T}extraArgs.chips_per_vm=16"],
        lambda s: (s.training.knobs["load_checkpoint_only_once"], s.training.extra_args["chips_per_vm"]),
        (True, "16"),
        [f"{T}loadCheckpointOnlyOnce=true", f"{T}extraArgs.chips_per_vm=17"],
    ),
    (
        # 16 trainer chips: tensor 2 x expert 4 x fsdp 2 is exactly 16; fsdp 1 leaves chips idle.
        "ici-mesh-equals-the-trainer",
        [f"{T}iciFsdpParallelism=2"],
        knob("ici_fsdp_parallelism"),
        2,
        [f"{T}iciFsdpParallelism=1"],
    ),
    (
        "ici-mesh-not-larger-than-the-trainer",
        [f"{T}iciFsdpParallelism=-1"],
        knob("ici_fsdp_parallelism"),
        -1,
        [f"{T}iciFsdpParallelism=4"],
    ),
    (
        "fsdp-fill-divides",
        [f"{T}iciExpertParallelism=8"],
        knob("ici_expert_parallelism"),
        8,
        [f"{T}iciExpertParallelism=3"],
    ),
    (
        "cluster-name-length",
        ["tpu-rl:clusterName=a" + "b" * 19],
        lambda s: len(s.cluster_name),
        20,
        ["tpu-rl:clusterName=a" + "b" * 20],
    ),
    (
        "bucket-name-length",
        ["tpu-rl:bucketName=a" + "b" * 62],
        lambda s: len(s.bucket_name),
        63,
        ["tpu-rl:bucketName=a" + "b" * 63],
    ),
    (
        "bucket-name-shortest",
        ["tpu-rl:bucketName=abc"],
        lambda s: s.bucket_name,
        "abc",
        ["tpu-rl:bucketName=ab"],
    ),
    (
        "namespace-prefixes-are-reserved-not-words",
        ["tpu-rl:namespace=kubeflow"],
        lambda s: s.namespace,
        "kubeflow",
        ["tpu-rl:namespace=kube-flow"],
    ),
    (
        "cpu-pool-fits-the-head",
        ["tpu-rl:cpuPool.machineType=n2-highmem-48"],
        lambda s: s.cpu_pool.machine_type,
        "n2-highmem-48",
        ["tpu-rl:cpuPool.machineType=n2-standard-48"],
    ),
    (
        "extra-arg-value-length",
        [f"{T}extraArgs.profiler=" + "a" * 256],
        lambda s: len(s.training.extra_args["profiler"]),
        256,
        [f"{T}extraArgs.profiler=" + "a" * 257],
    ),
    (
        "authorized-networks-limit",
        ["tpu-rl:authorizedNetworks=" + str([f"10.0.{i}.0/24" for i in range(50)]).replace("'", '"')],
        lambda s: len(s.authorized_networks),
        50,
        ["tpu-rl:authorizedNetworks=" + str([f"10.0.{i}.0/24" for i in range(51)]).replace("'", '"')],
    ),
    (
        # The conversion's 124 GiB of scratch + 20 GiB on cpu-np's boot disk (GKE: filesystem 94.25 %, less the
        # 10 % eviction threshold and min(50 %, 6 GiB + 35 %, 100 GiB) reserved): 288 GB leaves 144.3 GiB.
        "cpu-np-boot-disk-holds-the-scratch",
        ["tpu-rl:cpuPool.diskSizeGb=288"],
        lambda s: s.cpu_pool.disk_size_gb,
        288,
        ["tpu-rl:cpuPool.diskSizeGb=287"],
    ),
    # -- combinations that cannot finish (docs/configuration.md "Combinations refused because they cannot finish")
    (
        # int(50 x 1 x 0.02 x 1) = 1 step; 0.0199 gives 0 steps, so no checkpoint to export.
        "training-runs-a-step",
        [f"{T}extraArgs.train_fraction=0.02"],
        lambda s: s.training.final_step,
        1,
        [f"{T}extraArgs.train_fraction=0.0199"],
    ),
    (
        # MaxText's own arithmetic: 49 x (1/49) is 0.9999999999999999 in floating point, so int() of it is 0.
        "training-steps-are-maxtexts-arithmetic",
        [f"{T}numBatches=50", f"{T}extraArgs.train_fraction=0.02"],
        lambda s: s.training.final_step,
        1,
        [f"{T}numBatches=49", f"{T}extraArgs.train_fraction={1 / 49!r}"],
    ),
    (
        # 4352 - 256 = 4096 new tokens, the most evaluate_export.py generates; one more is refused there.
        "evaluation-generates-what-training-does-up-to-4096",
        [EVALUATE, f"{T}maxTargetLength=4352"],
        knob("max_target_length"),
        4352,
        [EVALUATE, f"{T}maxTargetLength=4353"],
    ),
    (
        "evaluation-follows-the-prefill",
        [EVALUATE, f"{T}maxTargetLength=8192", f"{T}maxPrefillPredictLength=4096"],
        knob("max_target_length"),
        8192,
        [EVALUATE, f"{T}maxTargetLength=8192", f"{T}maxPrefillPredictLength=4095"],
    ),
    (
        "training-alone-generates-more",
        [f"{T}maxTargetLength=4353"],
        knob("max_target_length"),
        4353,
        [EVALUATE, f"{T}maxTargetLength=4353"],
    ),
    (
        "evaluation-marker-length",
        [EVALUATE, f"{T}extraArgs.solution_end_token=" + "e" * 100],
        lambda s: len(s.training.extra_args["solution_end_token"]),
        100,
        [EVALUATE, f"{T}extraArgs.solution_end_token=" + "e" * 101],
    ),
    (
        "evaluation-start-marker-length",
        [EVALUATE, f"{T}extraArgs.solution_start_token=" + "s" * 100],
        lambda s: len(s.training.extra_args["solution_start_token"]),
        100,
        [EVALUATE, f"{T}extraArgs.solution_start_token=" + "s" * 101],
    ),
    (
        # MaxText's extraction (start, the shortest text, end) finds the answer with a start marker inside the end
        # marker; only equal markers are refused (the program's exit 3).
        "evaluation-start-marker-inside-the-end-is-read",
        [EVALUATE, f"{T}extraArgs.solution_start_token=answer"],
        lambda s: s.training.extra_args["solution_start_token"],
        "answer",
        [EVALUATE, f"{T}extraArgs.solution_start_token=answer", f"{T}extraArgs.solution_end_token=answer"],
    ),
    (
        "evaluation-markers-differ",
        [EVALUATE, f"{T}extraArgs.solution_start_token=ANSWER", f"{T}extraArgs.solution_end_token=ANSWEr"],
        lambda s: s.training.extra_args["solution_end_token"],
        "ANSWEr",
        [EVALUATE, f"{T}extraArgs.solution_start_token=ANSWER", f"{T}extraArgs.solution_end_token=ANSWER"],
    ),
    (
        "training-alone-may-share-markers",
        [f"{T}extraArgs.solution_start_token=ANSWER", f"{T}extraArgs.solution_end_token=ANSWER"],
        lambda s: s.workflow.steps,
        ("convert", "train", "export"),
        [EVALUATE, f"{T}extraArgs.solution_start_token=ANSWER", f"{T}extraArgs.solution_end_token=ANSWER"],
    ),
    (
        # num_epoch multiplies the steps too: int(50 x 1 x 0.007 x 3) = 1, with 0.0066 it is 0 (rl.num_iterations,
        # the other factor, is refused above 1: core/config/resume.py).
        "training-steps-count-epochs",
        [f"{T}extraArgs.num_epoch=3", f"{T}extraArgs.train_fraction=0.007"],
        lambda s: s.training.final_step,
        1,
        [f"{T}extraArgs.num_epoch=3", f"{T}extraArgs.train_fraction=0.0066"],
    ),
    (
        # The trainer's own rule comes before the meshes': 0 is refused as a fraction, not as a mesh of 0 chips.
        "trainer-above-zero",
        [f"{T}trainerDevicesFraction=0.03125", f"{T}iciTensorParallelism=1", f"{T}iciExpertParallelism=1"],
        knob("trainer_devices_fraction"),
        0.03125,
        [f"{T}trainerDevicesFraction=0", f"{T}iciTensorParallelism=1", f"{T}iciExpertParallelism=1"],
    ),
    (
        # -1 fills the chips the tensor x expert mesh leaves, a positive size fixes the mesh; 0 is neither.
        "fsdp-fill-or-positive",
        [f"{T}iciFsdpParallelism=-1"],
        knob("ici_fsdp_parallelism"),
        -1,
        [f"{T}iciFsdpParallelism=0"],
    ),
    (
        "access-members-limit",
        ["tpu-rl:access.members=" + str([f"user:ops{i}@acme.example" for i in range(50)]).replace("'", '"')],
        lambda s: len(s.access.members),
        50,
        ["tpu-rl:access.members=" + str([f"user:ops{i}@acme.example" for i in range(51)]).replace("'", '"')],
    ),
    (
        "a-host-route-is-a-network",
        ["tpu-rl:authorizedNetworks[0]=198.51.100.7/32"],
        lambda s: s.authorized_networks,
        ("198.51.100.7/32",),
        ["tpu-rl:authorizedNetworks[0]=198.51.100.7/33"],
    ),
]


def boundary_message(refused: list[str]) -> str:
    with pytest.raises(ConfigError) as caught:
        settings("prod", refused)
    return str(caught.value)


def many_errors_message() -> str:
    """What the loader says of MANY_ERRORS: every problem, one line each (tests/test_config_many_errors.py)."""
    from tools.stack_files import load_stack

    with pytest.raises(ConfigError) as caught:
        load_stack(None, MANY_ERRORS)
    assert str(caught.value) == "\n".join(caught.value.problems)
    return str(caught.value)
