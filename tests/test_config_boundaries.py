"""Every validation rule at both sides of its boundary: the last accepted value reaches Settings, the
first refused value gets its one-line message (ranges, cross-field rules, meshes, names, pools)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from core.config import ConfigError
from core.config import finish as config_finish
from core.config import rules as config_rules
from core.config.workflow_keys import IMAGE_REGISTRIES
from core.machines import MachineShape
from core.models import MODELS
from core.printed_commands import pulumi_config_set
from core.settings import PoolSettings, Settings
from tests.lifecycle_walk import settings

pytestmark = pytest.mark.pure

T = "tpu-rl:training."
TWO = ["tpu-rl:tpu.slices=2", f"{T}iciExpertParallelism=1", f"{T}rolloutTensorParallelism=32"]
"""Two slices of 32 chips: the trainer's mesh FSDP x tensor, one sampler replica over the other slice."""
EVALUATE = "tpu-rl:workflow.steps.evaluate=true"
MAXTEXT_0_2_4 = "us-docker.pkg.dev/cloud-tpu-images/maxtext-images/tpu_post_training:0.2.4"
Check = Callable[[Settings], Any]


def knob(name: str) -> Check:
    return lambda s: s.training.knobs[name]


# (rule, accepted overrides, what Settings holds then, expected value, refused overrides, message after "is invalid: ")
BOUNDARIES: list[tuple[str, list[str], Check, Any, list[str], str]] = [
    (
        "slices-max",
        ["tpu-rl:tpu.slices=64", "tpu-rl:workflow.enabled=false"],
        lambda s: s.tpu.slices,
        64,
        ["tpu-rl:tpu.slices=65", "tpu-rl:workflow.enabled=false"],
        "must be at most 64",
    ),
    (
        "slices-train",
        [*TWO, "tpu-rl:tpu.slices=2"],
        lambda s: s.tpu.slices,
        2,
        [*TWO, "tpu-rl:tpu.slices=3"],
        "at most 2: MaxText 0.2.5's train_rl builds the trainer's and the samplers' meshes as one slice each, so "
        "tpu-rl runs one slice, or two with the trainer on one and the samplers on the other (a side over more slices "
        "would be one mesh across the data-centre network)",
    ),
    (
        "two-slices-expert",
        TWO,
        knob("ici_expert_parallelism"),
        1,
        [*TWO, f"{T}iciExpertParallelism=2"],
        "must be 1 with two slices: train_rl sets the trainer's mesh to FSDP x tensor over its whole slice",
    ),
    (
        "two-slices-fsdp",
        [*TWO, f"{T}iciFsdpParallelism=16"],
        knob("ici_fsdp_parallelism"),
        16,
        [*TWO, f"{T}iciFsdpParallelism=8"],
        "FSDP (8) x tensor (2) must be the trainer's slice of 32 chips (tpu.slices is 2; -1 fills it)",
    ),
    (
        # Tensor parallelism 1: MaxText sets the trainer's FSDP to its slice's chips whatever the setting
        # (setup_configs_and_devices checks the setting only with tensor parallelism above 1).
        "two-slices-fsdp-overridden-at-tensor-1",
        [*TWO, f"{T}iciTensorParallelism=1", f"{T}iciFsdpParallelism=8"],
        knob("ici_fsdp_parallelism"),
        8,
        [*TWO, f"{T}iciTensorParallelism=2", f"{T}iciFsdpParallelism=8"],
        "FSDP (8) x tensor (2) must be the trainer's slice of 32 chips (tpu.slices is 2; -1 fills it)",
    ),
    (
        # One sampler replica over the samplers' slice: rollout TP x EP is its 32 chips (4 x 8), 4 x 4 is two replicas.
        "two-slices-one-sampler-replica",
        [*TWO, f"{T}rolloutTensorParallelism=4", f"{T}rolloutExpertParallelism=8"],
        knob("rollout_expert_parallelism"),
        8,
        [*TWO, f"{T}rolloutTensorParallelism=4", f"{T}rolloutExpertParallelism=4"],
        "rollout TP x EP (16) must be the samplers' slice of 32 chips (tpu.slices is 2: the samplers run one replica "
        "over their slice, rollout_data_parallelism 1, as MaxText's multislice RL was introduced, maxtext#2702); set "
        "rolloutTensorParallelism x rolloutExpertParallelism to 32",
    ),
    ("slices-min", ["tpu-rl:tpu.slices=1"], lambda s: s.tpu.slices, 1, ["tpu-rl:tpu.slices=0"], "must be at least 1"),
    (
        "batches-max",  # the reader's bound (a run of them fits no deadline: check_train_deadline)
        [f"{T}numBatches=100000", "tpu-rl:workflow.enabled=false"],
        knob("num_batches"),
        100000,
        [f"{T}numBatches=100001", "tpu-rl:workflow.enabled=false"],
        "must be at most 100000",
    ),
    (
        "top-k-is-the-vocabulary",
        [f"{T}decodeSamplingTopK=262144"],
        knob("decode_sampling_top_k"),
        262144,
        [f"{T}decodeSamplingTopK=262145"],
        "must be at most 262144",
    ),
    (
        "hbm-max",
        [f"{T}hbmUtilizationVllm=0.95"],
        knob("hbm_utilization_vllm"),
        0.95,
        [f"{T}hbmUtilizationVllm=0.951"],
        "must be at most 0.95",
    ),
    (
        "generations-min",
        [f"{T}numGenerations=2"],
        knob("rl.num_generations"),
        2,
        [f"{T}numGenerations=1"],
        "must be at least 2",
    ),
    (
        "schedule-min",
        [f"{T}learningRateScheduleSteps=-1"],
        knob("learning_rate_schedule_steps"),
        -1,
        [f"{T}learningRateScheduleSteps=-2"],
        "must be at least -1",
    ),
    (
        "learning-rate-min",
        [f"{T}learningRate=0"],
        knob("learning_rate"),
        0.0,
        [f"{T}learningRate=-1e-12"],
        "must be at least 0",
    ),
    (
        "checkpoint-period-min",
        [f"{T}checkpointPeriod=1"],
        knob("checkpoint_period"),
        1,
        [f"{T}checkpointPeriod=0"],
        "must be at least 1",
    ),
    (
        "system-pool-min",
        ["tpu-rl:systemPool.minNodes=1"],
        lambda s: s.system_pool.min_nodes,
        1,
        ["tpu-rl:systemPool.minNodes=0"],
        "must be at least 1",
    ),
    (
        "pool-max",
        ["tpu-rl:cpuPool.maxNodes=1000"],
        lambda s: s.cpu_pool.max_nodes,
        1000,
        ["tpu-rl:cpuPool.maxNodes=1001"],
        "must be at most 1000",
    ),
    (
        "min-equals-max",
        ["tpu-rl:systemPool.minNodes=3", "tpu-rl:systemPool.maxNodes=3"],
        lambda s: (s.system_pool.min_nodes, s.system_pool.max_nodes),
        (3, 3),
        ["tpu-rl:systemPool.minNodes=3", "tpu-rl:systemPool.maxNodes=2"],
        "must be at least minNodes (3)",
    ),
    (
        "cpu-disk-min",  # the reader's bound (a stack that runs no workflow keeps no scratch there)
        ["tpu-rl:workflow.enabled=false", "tpu-rl:cpuPool.diskSizeGb=50"],
        lambda s: s.cpu_pool.disk_size_gb,
        50,
        ["tpu-rl:workflow.enabled=false", "tpu-rl:cpuPool.diskSizeGb=49"],
        "must be at least 50",
    ),
    (
        "restarts-max",
        ["tpu-rl:workflow.maxRestarts=10"],
        lambda s: s.workflow.max_restarts,
        10,
        ["tpu-rl:workflow.maxRestarts=11"],
        "must be at most 10",
    ),
    (
        # The estimate's training: 45 min of start-up and 96 s a step after the first; 872 batches are 23.98 h, 873
        # are 24.003 h, past one day: two disruptions to plan for.
        "restarts-one-per-started-day",
        [f"{T}numBatches=872", "tpu-rl:workflow.maxRestarts=1"],
        lambda s: s.workflow.max_restarts,
        1,
        [f"{T}numBatches=873", "tpu-rl:workflow.maxRestarts=1", "tpu-rl:workflow.timeouts.train=25h"],
        "each disruption of a training run (a lost slice, a maintenance event, a stalled attempt) costs one counted "
        "JobSet restart, and the estimate's training takes 24.003 h: at least 2, one per started 24 h; raise it to 2 "
        "or more, or set 0 to fail the run at its first disruption (the tutorial's behaviour)",
    ),
    (
        # The attempt's deadline (tpu-rl:workflow.timeouts.train, 24h) holds the estimate's training: 872 batches are
        # 23.98 h, 873 are 24.003 h (the numbers of restarts-one-per-started-day).
        "train-fits-its-deadline",
        [f"{T}numBatches=872"],
        lambda s: s.workflow.timeouts["train"],
        24 * 3600,
        [f"{T}numBatches=873"],
        "it is each training attempt's deadline, and the estimate's training (873 batches) takes 24.003 h, past it: "
        "the run would fail when the deadline passes; raise it to at least 25h, or lower tpu-rl:training.numBatches",
    ),
    (
        "gke-version-kueue",
        ["tpu-rl:gke.versionPrefix=1.33."],
        lambda s: s.gke.version_prefix,
        "1.33.",
        ["tpu-rl:gke.versionPrefix=1.32.9"],
        'the Kueue tpu-rl installs (tpu-rl:kueue.version) is tested on Kubernetes 1.33 to 1.35: pin "1.33." or '
        'later (the prod example pins "1.35."), or leave it empty for the channel\'s default',
    ),
    (
        "gke-version-maintenance-label",
        ["tpu-rl:kueue.enabled=false", "tpu-rl:gke.versionPrefix=1.31.1-gke.2008000"],
        lambda s: s.gke.version_prefix,
        "1.31.1-gke.2008000",
        ["tpu-rl:kueue.enabled=false", "tpu-rl:gke.versionPrefix=1.31.1-gke.2007999"],
        'GKE labels a TPU node with its scheduled maintenance from 1.31.1-gke.2008000 only: pin "1.31." or later, '
        "or leave it empty for the channel's default",
    ),
    (
        "maxtext-image-of-another-release",
        [f"tpu-rl:images.maxtext={MAXTEXT_0_2_4}", "tpu-rl:images.maxtextCheck=warn"],
        lambda s: (s.images.maxtext, s.images.maxtext_check),
        (MAXTEXT_0_2_4, "warn"),
        [f"tpu-rl:images.maxtext={MAXTEXT_0_2_4}"],
        "its tag names MaxText 0.2.4, and tpu-rl's checks ran on 0.2.5, so every MaxText step would stop at its image "
        "check: use the tpu_post_training image of 0.2.5, adopt 0.2.4 first (make maxtext VERSION=0.2.4, "
        'docs/releases.md "Adopting a MaxText release"), or set tpu-rl:images.maxtextCheck warn to run it unchecked',
    ),
    (
        "restarts-zero",
        ["tpu-rl:workflow.maxRestarts=0"],
        lambda s: s.workflow.max_restarts,
        0,
        ["tpu-rl:workflow.maxRestarts=-1"],
        "must be at least 0",
    ),
    (
        "timeout-max",
        ["tpu-rl:workflow.timeouts.train=168h"],
        lambda s: s.workflow.timeouts["train"],
        168 * 3600,
        ["tpu-rl:workflow.timeouts.train=168h0m1s"],
        "a duration such as 90m, 4h or 1h30m, from 1m to 168h",
    ),
    (
        "timeout-min",
        ["tpu-rl:workflow.timeouts.convert=1m"],
        lambda s: s.workflow.timeouts["convert"],
        60,
        ["tpu-rl:workflow.timeouts.convert=59s"],
        "a duration such as 90m, 4h or 1h30m, from 1m to 168h",
    ),
    (
        "micro-batch-divides",
        [f"{T}trainMicroBatchSize=4"],
        knob("train_micro_batch_size"),
        4,
        [f"{T}trainMicroBatchSize=3"],
        "must divide batchSize (4)",
    ),
    (
        "prefill-below-target",
        [f"{T}maxPrefillPredictLength=639"],
        knob("max_prefill_predict_length"),
        639,
        [f"{T}maxPrefillPredictLength=640"],
        "must be below maxTargetLength (640)",
    ),
    (
        "fractions-sum-to-one",
        [f"{T}trainerDevicesFraction=0.25", f"{T}samplerDevicesFraction=0.75"],
        lambda s: (s.training.knobs["trainer_devices_fraction"], s.training.knobs["sampler_devices_fraction"]),
        (0.25, 0.75),
        [f"{T}trainerDevicesFraction=0.25", f"{T}samplerDevicesFraction=0.75001"],
        "must be above 0, and trainer and sampler fractions sum to at most 1 (trainer is 0.25)",
    ),
    (
        # Float sums: 0.5 + 0.500000001 is exactly 1 + 1e-9, the rule's tolerance.
        "fractions-tolerance",
        [f"{T}samplerDevicesFraction=0.500000001"],
        knob("sampler_devices_fraction"),
        0.500000001,
        [f"{T}samplerDevicesFraction=0.500000002"],
        "must be above 0, and trainer and sampler fractions sum to at most 1 (trainer is 0.5)",
    ),
    (
        "sampler-above-zero",
        [f"{T}samplerDevicesFraction=0.001", f"{T}rolloutTensorParallelism=1", "tpu-rl:workflow.enabled=false"],
        knob("sampler_devices_fraction"),
        0.001,
        [f"{T}samplerDevicesFraction=0"],
        "must be above 0, and trainer and sampler fractions sum to at most 1 (trainer is 0.5)",
    ),
    (
        "flex-start-gke-version",
        ["tpu-rl:tpu.capacity=flex-start", "tpu-rl:tpu.reservation=", "tpu-rl:gke.versionPrefix=1.33."],
        lambda s: (s.tpu.capacity, s.gke.version_prefix),
        ("flex-start", "1.33."),
        ["tpu-rl:tpu.capacity=flex-start", "tpu-rl:tpu.reservation=", "tpu-rl:gke.versionPrefix=1.32."],
        "TPU flex-start needs GKE 1.33.0-gke.1712000 or later",
    ),
    (
        "shared-reservation-path-is-kept",
        ["tpu-rl:tpu.reservation=projects/other-project/reservations/shared-v6e"],
        lambda s: s.tpu.reservation,
        "projects/other-project/reservations/shared-v6e",
        ["tpu-rl:tpu.reservation="],
        "required with capacity reservation (the name of a specific reservation)",
    ),
    (
        # 32 chips x 0.125 = 4 sampler chips, rollout TP 4 x EP 1 tiles them; 0.1 gives 3 chips.
        "rollout-mesh-tiles-the-sampler",
        [f"{T}samplerDevicesFraction=0.125"],
        knob("sampler_devices_fraction"),
        0.125,
        [f"{T}samplerDevicesFraction=0.1"],
        "rollout TP x EP (4) must divide the sampler's 3 chips (32 chips x samplerDevicesFraction)",
    ),
    (
        # One sampler chip is enough for TP 1; a fraction that rounds down to 0 chips is not (0 % 1 == 0).
        "sampler-has-a-chip",
        [f"{T}samplerDevicesFraction=0.03125", f"{T}rolloutTensorParallelism=1"],
        knob("sampler_devices_fraction"),
        0.03125,
        [f"{T}samplerDevicesFraction=0.03", f"{T}rolloutTensorParallelism=1"],
        "rollout TP x EP (1) must divide the sampler's 0 chips (32 chips x samplerDevicesFraction)",
    ),
    (
        "trainer-has-a-chip",
        [f"{T}trainerDevicesFraction=0.03125", f"{T}iciTensorParallelism=1", f"{T}iciExpertParallelism=1"],
        knob("trainer_devices_fraction"),
        0.03125,
        [f"{T}trainerDevicesFraction=0.03", f"{T}iciTensorParallelism=1", f"{T}iciExpertParallelism=1"],
        "the ICI mesh tensor x expert x fsdp (1 x 1 x -1) must tile the trainer's 0 chips",
    ),
    (
        # The actor a copy of the reference: 32 chips at chips_per_vm 16 are two VMs to MaxText, the trainer's and
        # the sampler's chips apart; at 17, one VM, the same chips (model_creation_utils setup_configs_and_devices).
        "actor-copy-needs-chips-apart",
        [f"{T}loadCheckpointOnlyOnce=true", f"{T}extraArgs.chips_per_vm=16"],
        lambda s: (s.training.knobs["load_checkpoint_only_once"], s.training.extra_args["chips_per_vm"]),
        (True, "16"),
        [f"{T}loadCheckpointOnlyOnce=true", f"{T}extraArgs.chips_per_vm=17"],
        "must be false where train_rl's trainer and sampler share their chips (32 chips, chips_per_vm 17, "
        "use_pathways true: fewer than two VMs or no Pathways): the actor would share the reference's arrays with "
        "vLLM's copy, which tunix deletes at each weight sync",
    ),
    (
        # 16 trainer chips: tensor 2 x expert 4 x fsdp 2 is exactly 16; fsdp 1 leaves chips idle.
        "ici-mesh-equals-the-trainer",
        [f"{T}iciFsdpParallelism=2"],
        knob("ici_fsdp_parallelism"),
        2,
        [f"{T}iciFsdpParallelism=1"],
        "the ICI mesh tensor x expert x fsdp (2 x 4 x 1) must tile the trainer's 16 chips",
    ),
    (
        "ici-mesh-not-larger-than-the-trainer",
        [f"{T}iciFsdpParallelism=-1"],
        knob("ici_fsdp_parallelism"),
        -1,
        [f"{T}iciFsdpParallelism=4"],
        "the ICI mesh tensor x expert x fsdp (2 x 4 x 4) must tile the trainer's 16 chips",
    ),
    (
        "fsdp-fill-divides",
        [f"{T}iciExpertParallelism=8"],
        knob("ici_expert_parallelism"),
        8,
        [f"{T}iciExpertParallelism=3"],
        "the ICI mesh tensor x expert x fsdp (2 x 3 x -1) must tile the trainer's 16 chips",
    ),
    (
        "cluster-name-length",
        ["tpu-rl:clusterName=a" + "b" * 19],
        lambda s: len(s.cluster_name),
        20,
        ["tpu-rl:clusterName=a" + "b" * 20],
        "a lowercase letter first, then lowercase letters, digits or hyphens, at most 20 characters, "
        "no trailing hyphen",
    ),
    (
        "bucket-name-length",
        ["tpu-rl:bucketName=a" + "b" * 62],
        lambda s: len(s.bucket_name),
        63,
        ["tpu-rl:bucketName=a" + "b" * 63],
        "3-63 lowercase letters, digits, hyphens or underscores, starting and ending with a letter or digit, "
        'not starting with "goog" and not containing "google"',
    ),
    (
        "bucket-name-shortest",
        ["tpu-rl:bucketName=abc"],
        lambda s: s.bucket_name,
        "abc",
        ["tpu-rl:bucketName=ab"],
        "3-63 lowercase letters, digits, hyphens or underscores, starting and ending with a letter or digit, "
        'not starting with "goog" and not containing "google"',
    ),
    (
        "namespace-prefixes-are-reserved-not-words",
        ["tpu-rl:namespace=kubeflow"],
        lambda s: s.namespace,
        "kubeflow",
        ["tpu-rl:namespace=kube-flow"],
        "a DNS-1123 label of our own (not default, jobset-system or a GKE-owned kube-*, gke-*, gmp-* namespace)",
    ),
    (
        "cpu-pool-fits-the-head",
        ["tpu-rl:cpuPool.machineType=n2-highmem-48"],
        lambda s: s.cpu_pool.machine_type,
        "n2-highmem-48",
        ["tpu-rl:cpuPool.machineType=n2-standard-48"],
        "48 vCPU / 192 GiB is too small: the Pathways head requests 32 vCPU / 196 GiB and gemma4-26b's conversion "
        "and export 168 GiB (tpu-rl:workflow.stepMemoryGib); use n4-standard-64 or larger",
    ),
    (
        "extra-arg-value-length",
        [f"{T}extraArgs.profiler=" + "a" * 256],
        lambda s: len(s.training.extra_args["profiler"]),
        256,
        [f"{T}extraArgs.profiler=" + "a" * 257],
        "values may use letters, digits and _ . , : / = + @ % * - only (at most 256)",
    ),
    (
        "authorized-networks-limit",
        ["tpu-rl:authorizedNetworks=" + str([f"10.0.{i}.0/24" for i in range(50)]).replace("'", '"')],
        lambda s: len(s.authorized_networks),
        50,
        ["tpu-rl:authorizedNetworks=" + str([f"10.0.{i}.0/24" for i in range(51)]).replace("'", '"')],
        "GKE allows at most 50 authorized networks",
    ),
    (
        # The conversion's 124 GiB of scratch + 20 GiB on cpu-np's boot disk (GKE: filesystem 94.25 %, less the
        # 10 % eviction threshold and min(50 %, 6 GiB + 35 %, 100 GiB) reserved): 288 GB leaves 144.3 GiB.
        "cpu-np-boot-disk-holds-the-scratch",
        ["tpu-rl:cpuPool.diskSizeGb=288"],
        lambda s: s.cpu_pool.disk_size_gb,
        288,
        ["tpu-rl:cpuPool.diskSizeGb=287"],
        "gemma4-26b's conversion keeps 124 GiB of scratch on cpu-np's boot disk, which at 287 GB leaves pods 143 "
        "GiB; use at least 288 GB",
    ),
    # -- combinations that cannot finish (docs/configuration.md "Combinations refused because they cannot finish")
    (
        # int(50 x 1 x 0.02 x 1) = 1 step; 0.0199 gives 0 steps, so no checkpoint to export.
        "training-runs-a-step",
        [f"{T}extraArgs.train_fraction=0.02"],
        lambda s: s.training.final_step,
        1,
        [f"{T}extraArgs.train_fraction=0.0199"],
        "training runs int(numBatches x rl.num_iterations x train_fraction x num_epoch) = int(50 x 1 x 0.0199 x 1) "
        "= 0 steps: it would save no checkpoint, so the export could never run; raise train_fraction or numBatches",
    ),
    (
        # MaxText's own arithmetic: 49 x (1/49) is 0.9999999999999999 in floating point, so int() of it is 0.
        "training-steps-are-maxtexts-arithmetic",
        [f"{T}numBatches=50", f"{T}extraArgs.train_fraction=0.02"],
        lambda s: s.training.final_step,
        1,
        [f"{T}numBatches=49", f"{T}extraArgs.train_fraction={1 / 49!r}"],
        f"training runs int(numBatches x rl.num_iterations x train_fraction x num_epoch) = int(49 x 1 x {1 / 49!r} "
        "x 1) = 0 steps: it would save no checkpoint, so the export could never run; raise train_fraction or "
        "numBatches",
    ),
    (
        # 4352 - 256 = 4096 new tokens, the most evaluate_export.py generates; one more is refused there.
        "evaluation-generates-what-training-does-up-to-4096",
        [EVALUATE, f"{T}maxTargetLength=4352"],
        knob("max_target_length"),
        4352,
        [EVALUATE, f"{T}maxTargetLength=4353"],
        "the evaluation (tpu-rl:workflow.steps.evaluate) generates as many new tokens as training, maxTargetLength - "
        "maxPrefillPredictLength (4353 - 256 = 4097), and at most 4096; use at most 4352 or turn the evaluation off",
    ),
    (
        "evaluation-follows-the-prefill",
        [EVALUATE, f"{T}maxTargetLength=8192", f"{T}maxPrefillPredictLength=4096"],
        knob("max_target_length"),
        8192,
        [EVALUATE, f"{T}maxTargetLength=8192", f"{T}maxPrefillPredictLength=4095"],
        "the evaluation (tpu-rl:workflow.steps.evaluate) generates as many new tokens as training, maxTargetLength - "
        "maxPrefillPredictLength (8192 - 4095 = 4097), and at most 4096; use at most 8191 or turn the evaluation off",
    ),
    (
        "training-alone-generates-more",
        [f"{T}maxTargetLength=4353"],
        knob("max_target_length"),
        4353,
        [EVALUATE, f"{T}maxTargetLength=4353"],
        "the evaluation (tpu-rl:workflow.steps.evaluate) generates as many new tokens as training, maxTargetLength - "
        "maxPrefillPredictLength (4353 - 256 = 4097), and at most 4096; use at most 4352 or turn the evaluation off",
    ),
    (
        "evaluation-marker-length",
        [EVALUATE, f"{T}extraArgs.solution_end_token=" + "e" * 100],
        lambda s: len(s.training.extra_args["solution_end_token"]),
        100,
        [EVALUATE, f"{T}extraArgs.solution_end_token=" + "e" * 101],
        "the evaluation (tpu-rl:workflow.steps.evaluate) takes answer markers of at most 100 characters, not 101; "
        "use a shorter one or turn the evaluation off",
    ),
    (
        "evaluation-start-marker-length",
        [EVALUATE, f"{T}extraArgs.solution_start_token=" + "s" * 100],
        lambda s: len(s.training.extra_args["solution_start_token"]),
        100,
        [EVALUATE, f"{T}extraArgs.solution_start_token=" + "s" * 101],
        "the evaluation (tpu-rl:workflow.steps.evaluate) takes answer markers of at most 100 characters, not 101; "
        "use a shorter one or turn the evaluation off",
    ),
    (
        # MaxText's extraction (start, the shortest text, end) finds the answer with a start marker inside the end
        # marker; only equal markers are refused (the program's exit 3).
        "evaluation-start-marker-inside-the-end-is-read",
        [EVALUATE, f"{T}extraArgs.solution_start_token=answer"],
        lambda s: s.training.extra_args["solution_start_token"],
        "answer",
        [EVALUATE, f"{T}extraArgs.solution_start_token=answer", f"{T}extraArgs.solution_end_token=answer"],
        "the evaluation (tpu-rl:workflow.steps.evaluate) needs an answer end marker other than its start marker "
        '"answer" (its program stops with exit 3 on equal ones, after training); use different start and end markers',
    ),
    (
        "evaluation-markers-differ",
        [EVALUATE, f"{T}extraArgs.solution_start_token=ANSWER", f"{T}extraArgs.solution_end_token=ANSWEr"],
        lambda s: s.training.extra_args["solution_end_token"],
        "ANSWEr",
        [EVALUATE, f"{T}extraArgs.solution_start_token=ANSWER", f"{T}extraArgs.solution_end_token=ANSWER"],
        "the evaluation (tpu-rl:workflow.steps.evaluate) needs an answer end marker other than its start marker "
        '"ANSWER" (its program stops with exit 3 on equal ones, after training); use different start and end markers',
    ),
    (
        "training-alone-may-share-markers",
        [f"{T}extraArgs.solution_start_token=ANSWER", f"{T}extraArgs.solution_end_token=ANSWER"],
        lambda s: s.workflow.steps,
        ("convert", "train", "export"),
        [EVALUATE, f"{T}extraArgs.solution_start_token=ANSWER", f"{T}extraArgs.solution_end_token=ANSWER"],
        "the evaluation (tpu-rl:workflow.steps.evaluate) needs an answer end marker other than its start marker "
        '"ANSWER" (its program stops with exit 3 on equal ones, after training); use different start and end markers',
    ),
    (
        # num_epoch multiplies the steps too: int(50 x 1 x 0.007 x 3) = 1, with 0.0066 it is 0 (rl.num_iterations,
        # the other factor, is refused above 1: core/config/resume.py).
        "training-steps-count-epochs",
        [f"{T}extraArgs.num_epoch=3", f"{T}extraArgs.train_fraction=0.007"],
        lambda s: s.training.final_step,
        1,
        [f"{T}extraArgs.num_epoch=3", f"{T}extraArgs.train_fraction=0.0066"],
        "training runs int(numBatches x rl.num_iterations x train_fraction x num_epoch) = int(50 x 1 x 0.0066 x 3) "
        "= 0 steps: it would save no checkpoint, so the export could never run; raise train_fraction or numBatches",
    ),
    (
        # The trainer's own rule comes before the meshes': 0 is refused as a fraction, not as a mesh of 0 chips.
        "trainer-above-zero",
        [f"{T}trainerDevicesFraction=0.03125", f"{T}iciTensorParallelism=1", f"{T}iciExpertParallelism=1"],
        knob("trainer_devices_fraction"),
        0.03125,
        [f"{T}trainerDevicesFraction=0", f"{T}iciTensorParallelism=1", f"{T}iciExpertParallelism=1"],
        "must be above 0",
    ),
    (
        # -1 fills the chips the tensor x expert mesh leaves, a positive size fixes the mesh; 0 is neither.
        "fsdp-fill-or-positive",
        [f"{T}iciFsdpParallelism=-1"],
        knob("ici_fsdp_parallelism"),
        -1,
        [f"{T}iciFsdpParallelism=0"],
        "use -1 (fill the remaining chips) or a positive size",
    ),
    (
        "access-members-limit",
        ["tpu-rl:access.members=" + str([f"user:ops{i}@acme.example" for i in range(50)]).replace("'", '"')],
        lambda s: len(s.access.members),
        50,
        ["tpu-rl:access.members=" + str([f"user:ops{i}@acme.example" for i in range(51)]).replace("'", '"')],
        "at most 50",
    ),
    (
        "a-host-route-is-a-network",
        ["tpu-rl:authorizedNetworks[0]=198.51.100.7/32"],
        lambda s: s.authorized_networks,
        ("198.51.100.7/32",),
        ["tpu-rl:authorizedNetworks[0]=198.51.100.7/33"],
        "an IPv4 CIDR block a.b.c.d/n such as 203.0.113.0/24 (prefix 0-32, no leading zeros, host bits zero)",
    ),
]


# What each refused value's line names before " is invalid: ": the key to change and the value shown.
REFUSED_AS = {
    "slices-max": 'tpu-rl:tpu.slices = "65"',
    "slices-train": "tpu-rl:tpu.slices = 3",
    "two-slices-expert": "tpu-rl:training.iciExpertParallelism = 2",
    "two-slices-fsdp": "tpu-rl:training.iciFsdpParallelism = 8",
    "two-slices-fsdp-overridden-at-tensor-1": "tpu-rl:training.iciFsdpParallelism = 8",
    "two-slices-one-sampler-replica": "tpu-rl:training.rolloutTensorParallelism = 4",
    "slices-min": 'tpu-rl:tpu.slices = "0"',
    "batches-max": 'tpu-rl:training.numBatches = "100001"',
    "top-k-is-the-vocabulary": 'tpu-rl:training.decodeSamplingTopK = "262145"',
    "hbm-max": 'tpu-rl:training.hbmUtilizationVllm = "0.951"',
    "generations-min": 'tpu-rl:training.numGenerations = "1"',
    "schedule-min": 'tpu-rl:training.learningRateScheduleSteps = "-2"',
    "learning-rate-min": 'tpu-rl:training.learningRate = "-1e-12"',
    "checkpoint-period-min": 'tpu-rl:training.checkpointPeriod = "0"',
    "system-pool-min": 'tpu-rl:systemPool.minNodes = "0"',
    "pool-max": 'tpu-rl:cpuPool.maxNodes = "1001"',
    "min-equals-max": "tpu-rl:systemPool.maxNodes = 2",
    "cpu-disk-min": 'tpu-rl:cpuPool.diskSizeGb = "49"',
    "restarts-max": 'tpu-rl:workflow.maxRestarts = "11"',
    "restarts-one-per-started-day": "tpu-rl:workflow.maxRestarts = 1",
    "train-fits-its-deadline": 'tpu-rl:workflow.timeouts.train = "24h"',
    "gke-version-kueue": 'tpu-rl:gke.versionPrefix = "1.32.9"',
    "gke-version-maintenance-label": 'tpu-rl:gke.versionPrefix = "1.31.1-gke.2007999"',
    "maxtext-image-of-another-release": f'tpu-rl:images.maxtext = "{MAXTEXT_0_2_4[:55]}..."',
    "restarts-zero": 'tpu-rl:workflow.maxRestarts = "-1"',
    "timeout-max": 'tpu-rl:workflow.timeouts.train = "168h0m1s"',
    "timeout-min": 'tpu-rl:workflow.timeouts.convert = "59s"',
    "micro-batch-divides": "tpu-rl:training.trainMicroBatchSize = 3",
    "prefill-below-target": "tpu-rl:training.maxPrefillPredictLength = 640",
    "fractions-sum-to-one": "tpu-rl:training.samplerDevicesFraction = 0.75001",
    "fractions-tolerance": "tpu-rl:training.samplerDevicesFraction = 0.500000002",
    "sampler-above-zero": "tpu-rl:training.samplerDevicesFraction = 0.0",
    "flex-start-gke-version": 'tpu-rl:gke.versionPrefix = "1.32."',
    "shared-reservation-path-is-kept": "tpu-rl:tpu.reservation = null",
    "rollout-mesh-tiles-the-sampler": "tpu-rl:training.rolloutTensorParallelism = 4",
    "sampler-has-a-chip": "tpu-rl:training.rolloutTensorParallelism = 1",
    "trainer-has-a-chip": "tpu-rl:training.iciExpertParallelism = 1",
    "actor-copy-needs-chips-apart": "tpu-rl:training.loadCheckpointOnlyOnce = true",
    "ici-mesh-equals-the-trainer": "tpu-rl:training.iciExpertParallelism = 4",
    "ici-mesh-not-larger-than-the-trainer": "tpu-rl:training.iciExpertParallelism = 4",
    "fsdp-fill-divides": "tpu-rl:training.iciExpertParallelism = 3",
    "cluster-name-length": 'tpu-rl:clusterName = "abbbbbbbbbbbbbbbbbbbb"',
    "bucket-name-length": 'tpu-rl:bucketName = "abbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb..."',
    "bucket-name-shortest": 'tpu-rl:bucketName = "ab"',
    "namespace-prefixes-are-reserved-not-words": 'tpu-rl:namespace = "kube-flow"',
    "cpu-pool-fits-the-head": 'tpu-rl:cpuPool.machineType = "n2-standard-48"',
    "extra-arg-value-length": 'tpu-rl:training.extraArgs.profiler = "' + "a" * 55 + '..."',
    "authorized-networks-limit": 'tpu-rl:authorizedNetworks = "51 networks"',
    "cpu-np-boot-disk-holds-the-scratch": "tpu-rl:cpuPool.diskSizeGb = 287",
    "training-runs-a-step": "tpu-rl:training.extraArgs.train_fraction = 0.0199",
    "training-steps-are-maxtexts-arithmetic": "tpu-rl:training.extraArgs.train_fraction = 0.02040816326530612",
    "evaluation-generates-what-training-does-up-to-4096": "tpu-rl:training.maxTargetLength = 4353",
    "evaluation-follows-the-prefill": "tpu-rl:training.maxTargetLength = 8192",
    "training-alone-generates-more": "tpu-rl:training.maxTargetLength = 4353",
    "evaluation-marker-length": 'tpu-rl:training.extraArgs.solution_end_token = "' + "e" * 55 + '..."',
    "evaluation-start-marker-length": 'tpu-rl:training.extraArgs.solution_start_token = "' + "s" * 55 + '..."',
    "evaluation-start-marker-inside-the-end-is-read": 'tpu-rl:training.extraArgs.solution_start_token = "answer"',
    "evaluation-markers-differ": 'tpu-rl:training.extraArgs.solution_start_token = "ANSWER"',
    "training-alone-may-share-markers": 'tpu-rl:training.extraArgs.solution_start_token = "ANSWER"',
    "training-steps-count-epochs": "tpu-rl:training.extraArgs.train_fraction = 0.0066",
    "trainer-above-zero": "tpu-rl:training.trainerDevicesFraction = 0.0",
    "fsdp-fill-or-positive": "tpu-rl:training.iciFsdpParallelism = 0",
    "access-members-limit": 'tpu-rl:access.members = "51 members"',
    "a-host-route-is-a-network": 'tpu-rl:authorizedNetworks[0] = "198.51.100.7/33"',
}


@pytest.mark.parametrize(
    ("rule", "accepted", "check", "value", "refused", "message"),
    BOUNDARIES,
    ids=[b[0] for b in BOUNDARIES],
)
def test_each_rule_at_both_sides_of_its_boundary(rule, accepted, check, value, refused, message):
    """The last accepted value reaches Settings; the first refused one gets its whole line: the key to change, the
    value shown and what is allowed."""
    assert check(settings("prod", accepted)) == value
    with pytest.raises(ConfigError) as caught:
        settings("prod", refused)
    assert str(caught.value) == f"{REFUSED_AS[rule]} is invalid: {message}"


def test_every_boundary_names_its_refused_line():
    assert list(REFUSED_AS) == [b[0] for b in BOUNDARIES]


def test_the_prod_stack_reads_as_written():
    """Every value of Pulumi.prod.yaml (the tutorial's run) and every default it relies on, as Settings holds
    them (the training knobs are pinned through the rendered argv in test_commands)."""
    values = dataclasses.asdict(settings("prod", []))
    assert values.pop("training") == {
        "knobs": values_of_knobs(),
        "optimizer": "adafactor",
        "dataset": "openmathinstruct2",
        "extra_args": {},
        "dataset_revision": "main",
    }
    assert values == {
        "stack": "prod",
        "project": "my-tpu-prod-project",
        "region": "us-east5",
        "zone": "us-east5-b",
        "cluster_name": "tpu-rl-prod",
        "bucket_name": "my-tpu-prod-project-tpu-rl-prod",
        "authorized_networks": ("203.0.113.0/24",),
        "tpu": {
            "version": "v6e",
            "machine_type": "ct6e-standard-4t",
            "topology": "4x8",
            "slices": 1,
            "capacity": "reservation",
            "reservation": "projects/my-tpu-prod-project/reservations/my-v6e-32-reservation",
        },
        "slice": {
            "version": "v6e",
            "machine_type": "ct6e-standard-4t",
            "topology": "4x8",
            "chips_per_vm": 4,
            "gke_accelerator": "tpu-v6e-slice",
            "pathways_type": "tpuv6e",
            "boot_disk_type": "hyperdisk-balanced",
        },
        "system_pool": {
            "machine_type": "e2-standard-8",
            "min_nodes": 2,
            "max_nodes": 10,
            "disk_size_gb": 200,
            "disk_type": "pd-balanced",
            "boot_disk_image": "",
        },
        "cpu_pool": {
            "machine_type": "n4-standard-64",
            "min_nodes": 0,
            "max_nodes": 4,
            "disk_size_gb": 500,
            "disk_type": "hyperdisk-balanced",
            "boot_disk_image": "",
        },
        "gke": {
            "release_channel": "REGULAR",
            "version_prefix": "1.35.",
            "maintenance_exclusion": "NO_MINOR_OR_NODE_UPGRADES",
            "maintenance_window": "09:00",
            "hold_upgrades": None,
            "secrets_key": "create",
        },
        "protect": True,
        "force_destroy": False,
        "bucket_versioning": True,
        "namespace": "tpu-rl",
        "hf_token_set": True,
        "model": {
            "spec": {
                "name": "gemma4-26b",
                "hf_repo": "google/gemma-4-26b-a4b-it",
                "maxtext_name": "gemma4-26b",
                "weights_gib": 52,
                "convert_hours": 1.0,
                "export_hours": 0.75,
                "train_seconds_per_sample": 6.0,
                "evaluate_hours": 1.5,
                "publish_hours": 0.5,
            },
            "revision": "main",
            "hub_cache": "",
            "hub_cache_writer": "",
        },
        "images": {
            "maxtext": "us-docker.pkg.dev/cloud-tpu-images/maxtext-images/tpu_post_training:0.2.5",
            "pathways_server": "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/server@sha256:"
            "d03068b39a8a2fab0621086ccb7c9445ce17ad34f1520159ca4ecd395346a162",
            "pathways_proxy": "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/proxy_server@sha256:"
            "6342a3cae2818d2f887d396e9ae4156b3316f79fef186d71ff16d535b44e1724",
            "registries": ("us-docker.pkg.dev/cloud-tpu-images", "us-docker.pkg.dev/cloud-tpu-v2-images"),
            "upstream": None,
            "maxtext_check": "refuse",
        },
        "workflow": {
            "enabled": True,
            "preflight": True,
            "capacity_check": True,
            "max_restarts": 1,
            "timeouts": {
                "convert": 4 * 3600,
                "train": 24 * 3600,
                "export": 4 * 3600,
                "evaluate": 3 * 3600,
                "publish": 4 * 3600,
            },
            "jobset_version": "0.10.1",
            "unschedulable_timeout": 15 * 60,
            "step_memory_gib": 168,
            "verify_export": True,
            "stall_timeout": 2 * 3600,
            "restart_drill": False,
            "steps": ("convert", "train", "export"),
        },
        "kueue": {
            "install": True,
            "queue": "tpu-rl",
            "version": "0.17.8",
            "pods_ready_timeout": 30 * 60,
            "admission_timeout": 15 * 60,
            # podsReadyTimeout + a TPU host maintenance event ("up to a few hours", read as 4 h)
            "recovery_timeout": 30 * 60 + 4 * 3600,
        },
        "labels": {"app": "tpu-rl", "stack": "prod", "cluster": "tpu-rl-prod", "managed-by": "pulumi"},
        "publish": {"repo": None, "private": True},
        "shared_project": False,
        "access": {"members": (), "readers": (), "workload_identity_pool": ""},
    }


def values_of_knobs() -> dict[str, Any]:
    from core.knobs import TRAINING_KNOBS

    return {knob.key: knob.default for knob in TRAINING_KNOBS}


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["tpu-rl:workflow.preflight=false"], {"workflow.preflight": False}),
        (["tpu-rl:workflow.jobsetVersion=0.12.0"], {"workflow.jobset_version": "0.12.0"}),
        (["tpu-rl:gke.maintenanceExclusion=none"], {"gke.maintenance_exclusion": None}),
        (
            ["tpu-rl:gke.maintenanceExclusion=NO_MINOR_OR_NODE_UPGRADES"],
            {"gke.maintenance_exclusion": "NO_MINOR_OR_NODE_UPGRADES"},
        ),
        # GKE's longest NO_UPGRADES exclusion: 30 days are accepted (31 are refused, test_config_rejections).
        (["tpu-rl:gke.holdUpgrades=2026-12-01/2026-12-31"], {"gke.hold_upgrades": ("2026-12-01", "2026-12-31")}),
        (["tpu-rl:gke.holdUpgrades=2026-12-01/2026-12-02"], {"gke.hold_upgrades": ("2026-12-01", "2026-12-02")}),
        (["tpu-rl:gke.secretsEncryptionKey="], {"gke.secrets_key": None}),
        (
            ["tpu-rl:gke.secretsEncryptionKey=projects/other-project/locations/us-east5/keyRings/r/cryptoKeys/k"],
            {"gke.secrets_key": "projects/other-project/locations/us-east5/keyRings/r/cryptoKeys/k"},
        ),
        (["tpu-rl:bucketVersioning=false"], {"bucket_versioning": False}),
        (["tpu-rl:workflow.verifyExport=false"], {"workflow.verify_export": False}),
        (
            [
                "tpu-rl:images.registries=["
                + ", ".join([*(f'"r.io/r{i}"' for i in range(18)), '"us-docker.pkg.dev/cloud-tpu-images"'])
                + ', "us-docker.pkg.dev/cloud-tpu-v2-images"]'
            ],
            {"images.registries": (*(f"r.io/r{i}" for i in range(18)), *IMAGE_REGISTRIES)},
        ),
        (
            [
                'tpu-rl:images.registries=["us-docker.pkg.dev/cloud-tpu-images", '
                '"us-docker.pkg.dev/cloud-tpu-v2-images", "europe-docker.pkg.dev/my-project/mirror"]',
                "tpu-rl:images.maxtext=europe-docker.pkg.dev/my-project/mirror/maxtext:0.2.5",
            ],
            {"images.maxtext": "europe-docker.pkg.dev/my-project/mirror/maxtext:0.2.5"},
        ),
        (["tpu-rl:forceDestroy=true"], {"force_destroy": True}),
        (
            [
                'tpu-rl:access.members=["user:ops@acme.example", "principalSet://iam.googleapis.com/projects/1/'
                'locations/global/workloadIdentityPools/github/attribute.environment/deploy-prod"]',
                "tpu-rl:access.readers[0]=serviceAccount:preview-prod@acme-tpu.iam.gserviceaccount.com",
                "tpu-rl:access.workloadIdentityPool=projects/1/locations/global/workloadIdentityPools/github",
            ],
            {
                "access.members": (
                    "user:ops@acme.example",
                    "principalSet://iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/github/"
                    "attribute.environment/deploy-prod",
                ),
                "access.readers": ("serviceAccount:preview-prod@acme-tpu.iam.gserviceaccount.com",),
                "access.workload_identity_pool": "projects/1/locations/global/workloadIdentityPools/github",
            },
        ),
        (["tpu-rl:bucketName=my-bucket"], {"bucket_name": "my-bucket"}),
        (["tpu-rl:tpu.reservation=r2"], {"tpu.reservation": "projects/my-tpu-prod-project/reservations/r2"}),
        (["tpu-rl:cpuPool.machineType=n4-standard-64"], {"cpu_pool.disk_type": "hyperdisk-balanced"}),
        (["tpu-rl:workflow.enabled=false"], {"workflow.enabled": False, "hf_token_set": True}),
    ],
)
def test_each_setting_reaches_settings(overrides, expected):
    values = dataclasses.asdict(settings("prod", overrides))
    for path, value in expected.items():
        node: Any = values
        for part in path.split("."):
            node = node[part]
        assert node == value, path


def test_a_workflow_needs_the_token_but_provisioning_does_not():
    assert settings("prod", ["tpu-rl:workflow.enabled=false"], token=None).hf_token_set is False
    with pytest.raises(ConfigError) as caught:
        settings("prod", [], token=None)
    assert str(caught.value) == (
        "tpu-rl:hfToken = null is invalid: required while tpu-rl:workflow.enabled is true; set it with "
        f"`{pulumi_config_set('prod', 'tpu-rl:hfToken', secret=True)}` (a Hugging Face read token)"
    )


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["gcp:project=googler-123"],
            "tpu-rl:bucketName = null is invalid: required: the default googler-123-tpu-rl-prod "
            "(gcp:project-tpu-rl:clusterName) is not a valid bucket name; set one with "
            f"`{pulumi_config_set('prod', 'tpu-rl:bucketName', '<name>')}`",
        ),
        (
            ["tpu-rl:tpu.capacity=flex-start", "tpu-rl:tpu.reservation=", "tpu-rl:gke.versionPrefix=1.32."],
            'tpu-rl:gke.versionPrefix = "1.32." is invalid: TPU flex-start needs GKE 1.33.0-gke.1712000 or later',
        ),
    ],
    ids=["derived-bucket", "flex-start-version"],
)
def test_whole_messages_of_derived_and_cross_field_rules(overrides, message):
    with pytest.raises(ConfigError) as caught:
        settings("prod", overrides)
    assert str(caught.value) == message


def test_the_mesh_rules_apply_only_when_the_workflow_runs():
    """A provision-only stack (workflow.enabled false) is not refused for a mesh it never uses."""
    s = settings("prod", ["tpu-rl:workflow.enabled=false", f"{T}iciFsdpParallelism=1"])
    assert s.workflow.enabled is False and s.training.knobs["ici_fsdp_parallelism"] == 1


@pytest.mark.parametrize(
    ("vcpus", "memory_gib", "step_memory", "fits"),
    [
        (34, 196 * 1.1, 168, True),  # 32 vCPU head + 2 reserved; 196 GiB x 1.1 headroom
        (33, 196 * 1.1, 168, False),
        (34, 196 * 1.1 - 0.01, 168, False),
        (64, 256.0, 168, True),
        (64, 232 * 1.1, 232, True),  # a raised tpu-rl:workflow.stepMemoryGib, x 1.1 headroom
        (64, 232 * 1.1 - 0.01, 232, False),
    ],
)
def test_the_cpu_pool_rule_at_its_exact_boundary(vcpus, memory_gib, step_memory, fits, monkeypatch):
    """No catalogue machine sits on the boundary, so the rule is checked with a made-up shape."""
    monkeypatch.setattr(config_finish, "machine_shape", lambda name: MachineShape(name, vcpus, memory_gib))
    pool = PoolSettings("n2-custom", 0, 4, 500, "pd-balanced")
    if fits:
        config_finish.check_cpu_pool(pool, MODELS["gemma4-26b"], step_memory)
    else:
        with pytest.raises(ConfigError, match="is too small"):
            config_finish.check_cpu_pool(pool, MODELS["gemma4-26b"], step_memory)


@pytest.mark.parametrize(("disk_gb", "refused"), [(244, None), (243, "use at least 244 GB")])
def test_the_cpu_disk_rule_at_its_exact_boundary(disk_gb, refused, monkeypatch):
    """No real disk size leaves pods exactly the scratch a step needs (gemma4-26b: 124 + 20 GiB), so the rule is
    checked with a made-up allocatable: a disk that leaves exactly what is needed is enough, and the size the message
    asks for is the first that is."""
    monkeypatch.setattr(config_finish, "boot_disk_allocatable_gib", lambda gb: float(gb - 100))
    pool = PoolSettings("n4-standard-64", 0, 4, disk_gb, "hyperdisk-balanced")
    if refused is None:
        config_finish.check_cpu_disk(pool, MODELS["gemma4-26b"])
    else:
        with pytest.raises(ConfigError) as caught:
            config_finish.check_cpu_disk(pool, MODELS["gemma4-26b"])
        assert str(caught.value).endswith(f"at {disk_gb} GB leaves pods 143 GiB; {refused}")


def test_a_machine_of_unknown_size_is_left_to_gke():
    config_finish.check_cpu_pool(
        PoolSettings("n2-custom-64-262144", 0, 4, 500, "pd-balanced"), MODELS["gemma4-26b"], 168
    )


@pytest.mark.parametrize(
    ("stack", "label"),
    [("prod", "prod"), ("Dev.Team_1", "dev-team_1"), ("x" * 70, "x" * 63)],
)
def test_the_stack_label_is_a_gcp_label_value(stack, label):
    assert config_rules.label_value(stack) == label


SHARED_LINE = (
    "stacks dev and prod both name project acme-tpu: in one project dev's deploy identity administers prod, and "
    "prod's administers dev (roles/container.admin reaches every cluster of the project and its Secrets; "
    "roles/resourcemanager.projectIamAdmin and roles/iam.serviceAccountAdmin let it grant itself any role, the other "
    'stack\'s state key and deploy account included: docs/security.md "Two stacks in one project"); give each stack '
    "a project of its own, or set tpu-rl:sharedProject: true in both stack files to accept that ({} not)"
)


@pytest.mark.parametrize(
    ("own", "other", "other_project", "refused"),
    [
        (True, "true", "acme-tpu", None),
        (True, True, "acme-tpu", None),
        (False, "false", "acme-other", None),
        (False, "", "my-tpu-prod-project", None),
        (True, "false", "acme-tpu", "Pulumi.prod.yaml does"),
        (False, "true", "acme-tpu", "Pulumi.dev.yaml does"),
        (False, "", "acme-tpu", "Pulumi.dev.yaml and Pulumi.prod.yaml do"),
    ],
    ids=["both", "both-yaml-bool", "apart", "placeholder", "only-dev", "only-prod", "neither"],
)
def test_a_project_another_stack_file_names_is_accepted_only_in_both(own, other, other_project, refused):
    """core.config.projects: the last accepted pair (both set tpu-rl:sharedProject) and the first refused (one
    does not), word for word."""
    from core.config.projects import problem

    mine = settings("dev", ["gcp:project=acme-tpu", f"tpu-rl:sharedProject={str(own).lower()}"])
    assert mine.shared_project is own
    others = {"prod": {"gcp:project": other_project, "tpu-rl:sharedProject": other}, "dev": {"gcp:project": "x"}}
    found = problem("dev", mine, others)
    assert found == (None if refused is None else SHARED_LINE.format(refused))
