"""What a step's ``python3 -m <MaxText module> ...`` runs in the rehearsal (the rehearsal's ``python3`` sends it here;
run by MaxText's Python, the rehearsal's venv; it imports nothing of tpu-rl):

    python stand_in.py SMALL_JSON MODULE WORD...

- the converters (``checkpoint_conversion.to_maxtext``, ``to_huggingface``) run as MaxText runs them (the module as
  ``__main__``, its argv the step's words), on the rehearsal's small model: MaxText's Hugging Face config of the model
  is the small one (``SMALL_JSON``'s ``hf``) and its MaxText config gets the small sizes (``SMALL_JSON``'s ``maxtext``,
  with ``override_model_config=True``, the key MaxText asks for to override a model's sizes);
- the RL trainer (``trainers.post_train.rl.train_rl``) runs what its ``_rl_train_impl`` does before its first call
  to a device: its config from the step's words by MaxText's own loader (``pyconfig.initialize_pydantic`` with
  ``RLConfig``, argv[0] the module's file, as ``absl.app.run`` hands it), the tokenizer from ``tokenizer_path`` (the
  staged snapshot), ``prepare_datasets`` on the staged files (``datasets`` through gcsfs, the data template, the
  long prompts filtered), and the reward functions of ``build_reward_fns`` on completions written in the template's
  format; it says what it counted and stops before ``jax.devices()``. vLLM and tpu-inference (not installable here:
  the rollout engine's accelerator code) are modules train_rl imports when it loads; they are stood in for by modules
  that raise if called.

Each line it prints starts with ``tpu-rl rehearse: ``; a failure is its exception's one line, exit 1.
"""

import json
import os
import runpy
import sys
import time
import types

SAYS = "tpu-rl rehearse: "
TRAINER = "maxtext.trainers.post_train.rl.train_rl"
STOOD_IN = ("maxtext.integration.vllm.maxtext_vllm_adapter", "maxtext.integration.vllm.maxtext_vllm_rollout")
"""train_rl's module-level imports that need vLLM and tpu-inference."""


def say(text: str) -> None:
    print(SAYS + text, flush=True)


class _Unavailable:
    """What the stood-in modules hold: refuses to be made or called (the rollout engine needs an accelerator)."""

    def __init__(self, *args, **kwargs):
        raise RuntimeError("vLLM's rollout engine needs vLLM and tpu-inference (an accelerator): not in the rehearsal")


def stand_in_rollout() -> None:
    """train_rl's imports of the vLLM integration (``adapter.register()`` at its import registers MaxText's model
    with vLLM: nothing to register without vLLM)."""
    import maxtext.integration.vllm as package

    adapter = types.ModuleType(STOOD_IN[0])
    setattr(adapter, "register", lambda: None)  # noqa: B010 (a module made here)
    rollout = types.ModuleType(STOOD_IN[1])
    setattr(rollout, "MaxTextVllmRollout", _Unavailable)  # noqa: B010
    for module in (adapter, rollout):
        sys.modules[module.__name__] = module
        setattr(package, module.__name__.rsplit(".", 1)[1], module)


def small_model(small: dict, model_name: str) -> list:
    """MaxText's Hugging Face config of ``model_name`` made the small one; the MaxText words that match it."""
    import transformers
    from maxtext.checkpoint_conversion.utils import hf_model_configs

    hf_model_configs.HF_MODEL_CONFIGS[model_name] = transformers.Gemma4Config(**small["hf"])
    return ["override_model_config=True", *small["maxtext"]]


def convert(small: dict, module: str, words: list) -> int:
    model = next((w.split("=", 1)[1] for w in words if w.startswith("model_name=")), "")
    added = small_model(small, model)
    say(f"{module.rsplit('.', 1)[1]} on the small {model} ({' '.join(added[1:4])} ...)")
    sys.argv = [module.replace(".", "/") + ".py", *words, *added]
    started = time.monotonic()
    runpy.run_module(module, run_name="__main__", alter_sys=True)
    say(f"{module.rsplit('.', 1)[1]} done in {time.monotonic() - started:.0f} s")
    return 0


def train(words: list) -> int:
    stand_in_rollout()
    from maxtext.configs import pyconfig
    from maxtext.configs import types as config_types
    from maxtext.trainers.post_train.rl import train_rl, utils_rl
    from transformers import AutoTokenizer

    say(f"vLLM and tpu-inference stood in for ({', '.join(STOOD_IN)}): the rollout engine needs an accelerator")
    config = pyconfig.initialize_pydantic([train_rl.__file__, *words], config_class=config_types.RLConfig)
    say(
        f"MaxText's loader took the {len(words)} overrides (RLConfig: model {config.model_name}, "
        f"{config.num_batches} batches of {config.batch_size}, checkpoint_dir {config.checkpoint_dir})"
    )
    tokenizer = AutoTokenizer.from_pretrained(config.tokenizer_path, token=config.hf_access_token or None)
    train_rl.configure_tokenizer_chat_template(tokenizer, config)
    say(f"tokenizer from {config.tokenizer_path}: {type(tokenizer).__name__}, {len(tokenizer)} tokens")
    rows, long = count_rows(train_rl, utils_rl, config, tokenizer)
    say(
        f"dataset {config.dataset_name}: {rows} rows in {config.hf_train_files}, {long} over "
        f"max_prefill_predict_length={config.max_prefill_predict_length} (filtered out)"
    )
    train_data, test_data = train_rl.prepare_datasets(config, tokenizer)
    batches = list(train_data)
    wanted = int(config.num_batches * config.train_fraction)
    tests = sum(1 for _ in test_data) if test_data is not None else 0
    taken = min(wanted * config.batch_size, rows)
    say(
        f"prepare_datasets: {len(batches)} training batches of {config.batch_size} where the run asks for {wanted} "
        f"(MaxText takes the first {taken} shuffled rows and then drops the long prompts among them: a run whose rows "
        f"hold long prompts ends early, and `up` says so when it verifies the run); {tests} test batches"
    )
    if not batches:
        raise ValueError("the staged dataset gives no training batch: every prompt is over the prefill limit")
    rewards(train_rl, utils_rl, config, batches[0])
    say(
        "stopped before jax.devices(): the trainer's and the sampler's meshes, the models and the rollout engine "
        "need the slice"
    )
    return 0


def count_rows(train_rl, utils_rl, config, tokenizer) -> tuple:
    """The staged training rows and those whose prompt, as process_data makes it, is over the prefill limit."""
    data = train_rl.get_dataset(
        config, split=config.train_split, data_files=config.hf_train_files, dataset_name=config.dataset_name
    )
    template = train_rl.load_data_template_from_file(config.data_template_path)  # as prepare_datasets reads it
    long = 0
    for row in data:
        prompt = utils_rl.process_data(config.dataset_name, tokenizer, template, config, row)["prompts"]
        long += len(tokenizer.tokenize(prompt)) > config.max_prefill_predict_length
    return len(data), long


def rewards(train_rl, utils_rl, config, batch) -> None:
    """The reward stack on a right and a wrong completion of the batch's first question, in the template's format."""
    functions = train_rl.build_reward_fns(config, lambda fn: train_rl._RewardFn(fn, config))
    answer = json.loads(batch["answer"][0])[0]

    def completion(value: str) -> str:
        return (
            f"{config.reasoning_start_token}Adding the two.{config.reasoning_end_token}"
            f"{config.solution_start_token}{value}{config.solution_end_token}"
        )

    prompts = [batch["prompts"][0]] * 2
    completions = [completion(answer), completion(f"{answer}1")]
    given = {"answer": [batch["answer"][0]] * 2, "question": [batch["question"][0]] * 2}
    scores = [0.0, 0.0]
    try:
        for function in functions:
            for n, score in enumerate(function(prompts=prompts, completions=completions, **given)):
                scores[n] += float(score)
    finally:
        pool = getattr(sys.modules.get("maxtext.trainers.post_train.rl.math_verify_pool"), "_shutdown_pool", None)
        if pool is not None:
            pool()  # its worker pool would hold the interpreter's exit
    names = ", ".join(getattr(f, "__name__", "?") for f in functions)
    say(f"rewards ({names}): the right answer {scores[0]:g}, a wrong one {scores[1]:g}")
    if scores[0] <= scores[1]:
        raise ValueError(f"the reward functions score a right answer ({scores[0]:g}) no higher than a wrong one")


def main(argv: list) -> int:
    small_file, module, words = argv[0], argv[1], argv[2:]
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    try:
        if module == TRAINER:
            return train(words)
        with open(small_file) as file:
            small = json.load(file)
        return convert(small, module, words)
    except Exception as err:  # noqa: BLE001 (the step's one line)
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        print(f"{SAYS}failed: {type(err).__name__}: {first[:400]}", file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
