"""The GRPO training knobs: config field, MaxText key, type and tutorial default.

One table drives three things: parsing ``tpu-rl:training``, rendering the
``train_rl`` argv in the tutorial's order, and the tests that check every key
against MaxText 0.2.5's configs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

KnobValue = int | float | bool | str


@dataclass(frozen=True)
class Knob:
    """One typed training setting that maps to one MaxText ``key=value`` argument."""

    field: str
    key: str
    default: KnobValue
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    bool_text: tuple[str, str] = ("True", "False")
    """How the tutorial spells true/false for this key (MaxText accepts either case)."""
    tutorial: bool = True
    """Whether the tutorial's command passes this key (others are appended after its argv)."""
    samples: tuple[KnobValue, ...] = ()
    """Other valid values where the simple ones break a cross-field rule (docs and the invariance test)."""
    companions: tuple[tuple[str, KnobValue], ...] = ()
    """Other training fields a different value needs: (field, value)."""
    maxtext_default: bool = False
    """The default is MaxText's own (``rl.yml``): the argv names the key only when it is set otherwise, so a run at
    the defaults keeps the tutorial's argv (a knob the tutorial does not pass, ``tutorial=False``)."""
    maxtext_value: KnobValue | None = None
    """MaxText's own default where this knob's differs (a knob the tutorial does not pass): the argv leaves the key
    out at that value, so setting it keeps the argv of a version before the knob."""

    @property
    def omitted(self) -> KnobValue | None:
        """The value at which the argv leaves the key out (MaxText's own default), None: never left out."""
        return self.default if self.maxtext_default else self.maxtext_value

    @property
    def kind(self) -> type:
        return type(self.default)

    def render(self, value: KnobValue) -> str:
        """The argv text for ``value``, spelled as the tutorial spells it."""
        if isinstance(value, bool):
            return self.bool_text[0] if value else self.bool_text[1]
        if isinstance(value, float):
            return format_float(value)
        return str(value)


def format_float(value: float) -> str:
    """``2e-05`` -> ``2e-5``; ``0.5`` -> ``0.5``: the shortest exact spelling."""
    text = repr(value)
    return re.sub(r"e([+-])0*(\d)", lambda m: "e" + ("-" if m[1] == "-" else "") + m[2], text)


REMAT_POLICIES = (
    "full",
    "minimal",
    "minimal_with_context",
    "minimal_offloaded",
    "save_dot_with_context_except_mlp",
    "save_dot_except_mlpwi",
    "save_dot_except_mlp",
    "save_qkv_proj",
    "qkv_proj_offloaded",
    "save_out_proj",
    "custom",
)

# Order: the tutorial's argv order; knobs the tutorial does not pass come last (``tutorial=False``).
# Every number has documented, finite bounds (MaxText's own limits where it has them, else a
# sanity cap far above any run this program can afford).
TRAINING_KNOBS: tuple[Knob, ...] = (
    Knob("numBatches", "num_batches", 50, minimum=1, maximum=100_000),
    Knob("batchSize", "batch_size", 4, minimum=1, maximum=4096),
    Knob("trainMicroBatchSize", "train_micro_batch_size", 2, minimum=1, maximum=4096),
    Knob("maxTargetLength", "max_target_length", 640, minimum=2, maximum=131_072),
    Knob("maxPrefillPredictLength", "max_prefill_predict_length", 256, minimum=1, maximum=131_072),
    Knob("muDtype", "mu_dtype", "bfloat16", choices=("bfloat16", "float32")),
    Knob("gradDtype", "grad_dtype", "bfloat16", choices=("bfloat16", "float32")),
    Knob("rolloutTensorParallelism", "rollout_tensor_parallelism", 4, minimum=1, maximum=256),
    Knob(
        "rolloutExpertParallelism",
        "rollout_expert_parallelism",
        1,
        minimum=1,
        maximum=256,
        companions=(("rolloutTensorParallelism", 2),),
    ),
    Knob("trainerDevicesFraction", "trainer_devices_fraction", 0.5, minimum=0.0, maximum=1.0),
    Knob(
        "samplerDevicesFraction",
        "sampler_devices_fraction",
        0.5,
        minimum=0.0,
        maximum=1.0,
        companions=(("rolloutTensorParallelism", 2),),
    ),
    # tokenizer_path is derived from the model and rendered here (see workloads.specs.commands).
    Knob("iciTensorParallelism", "ici_tensor_parallelism", 2, minimum=1, maximum=256),
    Knob("iciExpertParallelism", "ici_expert_parallelism", 4, minimum=1, maximum=256),
    Knob("iciFsdpParallelism", "ici_fsdp_parallelism", -1, minimum=-1, maximum=256, samples=(2,)),
    Knob("hbmUtilizationVllm", "hbm_utilization_vllm", 0.7, minimum=0.05, maximum=0.95),
    Knob("remat", "remat_policy", "full", choices=REMAT_POLICIES),
    Knob("asyncScheduling", "async_scheduling", False),
    Knob("allowSplitPhysicalAxes", "allow_split_physical_axes", True, bool_text=("true", "false")),
    Knob("raggedGatherReduceFallback", "ragged_gather_reduce_fallback", True),
    Knob("enableDpAttention", "enable_dp_attention", False),
    Knob("decodeSamplingTemperature", "decode_sampling_temperature", 0.8, minimum=0.0, maximum=5.0),
    Knob("decodeSamplingTopK", "decode_sampling_top_k", 50, minimum=0, maximum=262_144),
    Knob("decodeSamplingNucleusP", "decode_sampling_nucleus_p", 0.95, minimum=0.0, maximum=1.0),
    Knob("learningRate", "learning_rate", 2e-5, minimum=0.0, maximum=1.0),
    Knob("learningRateScheduleSteps", "learning_rate_schedule_steps", 100, minimum=-1, maximum=10_000_000),
    Knob("numGenerations", "rl.num_generations", 4, minimum=2, maximum=256),
    Knob("reshardChunkSize", "rl.reshard_chunk_size", 4, minimum=1, maximum=1_000_000),
    Knob("debug", "debug", True),
    # Not in the tutorial (rl.yml saves every 50 steps, i.e. only at the end of its 50-step run): a
    # failure then loses the whole run. Every 10 steps bounds the loss at 10 steps plus start-up.
    Knob("checkpointPeriod", "checkpoint_period", 10, minimum=1, maximum=100_000, tutorial=False),
    # Not in the tutorial; MaxText's default, false, kept: every attempt reads the converted checkpoint twice, into the
    # reference and again into the actor (0.2.5 model_creation_utils.py create_models_and_meshes). true reads it once
    # and makes the actor a copy of the reference (nnx.clone, sharing its buffers until the first update): one read of
    # the ~52 GB less per attempt, safe while nothing donates the actor's parameters (tests/test_actor_copy.py, with
    # the real flax and optax) and vLLM's copy never aliases them (core.config.finish.check_actor_copy). Off until a
    # real run with it logs train_rl's reference-parameters check passing ("Reference model parameters verified to be
    # unchanged during training.", 0.2.5 train_rl.py): no MaxText recipe sets it, and the tunix MaxText 0.2.5 pins
    # (a8d7058), which decides what the weight sync donates, is unread. An operator may set it (docs/first-run.md
    # "The first training run's path").
    Knob(
        "loadCheckpointOnlyOnce",
        "load_checkpoint_only_once",
        False,
        bool_text=("true", "false"),
        tutorial=False,
        maxtext_default=True,
    ),
    # MaxText 0.2.5's tunix runtime knobs (rl.yml, "Tunix runtime knobs" and the vLLM rollout block; configs/types.py):
    # speed for HBM headroom, MaxText's defaults kept (each default is tunix's behaviour without the knob: a
    # gc.collect() after every weight sync, the KV cache freed around it, rewards evaluated in the trainer process).
    # train_rl passes each only to a tunix that declares it, else logs that it is ignored (train_rl.py
    # _kwargs_supported_by).
    # false saves about 1 s a step, but the weights' copies each sync leaves on HBM then accumulate (OOM risk).
    Knob(
        "gcCollectAfterWeightSync",
        "gc_collect_after_weight_sync",
        True,
        bool_text=("true", "false"),
        tutorial=False,
        maxtext_default=True,
    ),
    # false keeps vLLM's KV-cache pool across the weight sync (about 2 s a step saved); the sync then needs HBM for a
    # second copy of the sampler's weights beside the pool: out of memory unless hbmUtilizationVllm leaves room.
    Knob(
        "freeKvCacheDuringWeightSync",
        "free_kv_cache_during_weight_sync",
        True,
        bool_text=("true", "false"),
        tutorial=False,
        maxtext_default=True,
    ),
    # Processes evaluating the reward functions (math-verify's grading) over a batch: 0 in the trainer process,
    # -1 one per CPU of the head pod.
    Knob("rewardNumWorkers", "reward_num_workers", 0, minimum=-1, maximum=256, tutorial=False, maxtext_default=True),
)

OPTIMIZERS = ("adafactor", "adamw")


@dataclass(frozen=True)
class Dataset:
    """A training dataset and the MaxText keys that really select it."""

    name: str
    template: str
    keys: tuple[tuple[str, str], ...]


PLAIN_TEMPLATE = "maxtext/examples/chat_templates/openmathinstruct2_rl.json"
"""The data template with no turn markers (``{system_prompt}\\n\\n{question}``). MaxText's ``process_data``
(``utils_rl.py`` 765-769) wraps every prompt in the tokenizer's own chat template, so a template that
carries turn markers itself nests them: ``gsm8k_rl.json`` hard-codes Gemma 3's ``<start_of_turn>``, which
Gemma 4 (``<|turn>user``, ``processor_gemma4.py`` 97) then wraps again (MaxText's own
``rl_gemma4_e4b.md`` warns of it). The tutorial runs GSM8K with this template and no dataset keys, so
rl.yml's ``openai/gsm8k`` is what it trains on; both choices here use it."""

DATASETS: dict[str, Dataset] = {
    "openmathinstruct2": Dataset(
        "openmathinstruct2",
        PLAIN_TEMPLATE,
        (
            ("dataset_name", "nvidia/OpenMathInstruct-2"),
            ("eval_dataset_name", "nvidia/OpenMathInstruct-2"),
            ("hf_train_files", "hf://datasets/nvidia/OpenMathInstruct-2/data/train_1M-*.parquet"),
            ("train_split", "train_1M"),
        ),
    ),
    "gsm8k": Dataset(
        "gsm8k",
        PLAIN_TEMPLATE,
        (
            ("dataset_name", "openai/gsm8k"),  # rl.yml's own defaults, and the splits' names
            ("eval_dataset_name", "openai/gsm8k"),
            ("hf_train_files", "hf://datasets/openai/gsm8k/main/train-*.parquet"),
            ("train_split", "train"),
            ("hf_eval_files", "hf://datasets/openai/gsm8k/main/test-*.parquet"),
            ("eval_split", "test"),
        ),
    ),
}
"""The datasets ``tpu-rl:training.dataset`` chooses. Each names its Hub files (``hf_train_files``, and
``hf_eval_files`` where evaluation reads another split), so training stages them in the bucket on its first attempt
and every later attempt reads them there (``workloads.specs.commands.staged_dataset``); MaxText's ``get_dataset``
(0.2.4 and 0.2.5 ``train_rl.py``) then loads ``datasets.load_dataset("parquet", data_files={split: files})``, the
rows the Hub's own parquet conversion holds, instead of the repository by name. GSM8K's files are the Hub's
``main/train-00000-of-00001.parquet`` and ``main/test-00000-of-00001.parquet`` (its dataset page's pandas snippet,
https://huggingface.co/datasets/openai/gsm8k); ``dataset_name`` stays ``openai/gsm8k``, which MaxText's
``process_data`` reads to pick the question and answer columns."""
