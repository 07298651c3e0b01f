"""The rehearsal's Hub content, made by MaxText's own Python (the rehearsal's venv; it imports nothing of tpu-rl):

    python assets.py OUT MAXTEXT_MODEL

- ``OUT/model/``: a small model of the base's structure: MaxText's own Hugging Face config of the model
  (``checkpoint_conversion.utils.hf_model_configs.HF_MODEL_CONFIGS``) with every size made small (``SMALL``: the
  layer pattern kept, one period of it), its weights random BF16 safetensors of exactly the names and shapes
  MaxText's converter expects of that config (``hf_shape.HF_SHAPE``), in two shards with an index, as the Hub's
  repositories hold them; Gemma 4's tokenizer (MaxText's own ``assets/tokenizers/tokenizer_gemma4.model``, Gemma 4's
  262,144-token vocabulary, loaded by transformers' ``GemmaTokenizer`` and saved as ``tokenizer.json``) with a chat
  template of Gemma 4's turns; a generation config;
- ``OUT/datasets/<owner>__<name>/``: small datasets of the real schemas, in the files and folders of the Hub's
  repositories (``DATASETS``): OpenMathInstruct-2 (``problem``, ``generated_solution``, ``expected_answer``,
  ``problem_source``) and GSM8K (``question``, ``answer`` ending ``#### <number>``), each with a few prompts longer
  than any training's prefill limit and a file no pattern of training's takes;
- ``OUT/small.json``: the MaxText overrides that give the model's MaxText config the small sizes (what the
  rehearsal adds to the converters' argv) and the small Hugging Face config.
"""

import copy
import json
import os
import random
import sys

import numpy as np

SMALL_TEXT = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 16,
    "global_head_dim": 32,
    "sliding_window": 64,
}
"""The small text model's sizes (every model)."""
SMALL_OPTIONAL = {
    "num_global_key_value_heads": 1,
    "num_experts": 4,
    "top_k_experts": 2,
    "moe_intermediate_size": 32,
    "hidden_size_per_layer_input": 8,
}
"""Sizes set only where the model has the feature (a value in its config that is not empty)."""
SMALL_VISION = {
    "hidden_size": 16,
    "intermediate_size": 32,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "head_dim": 8,
    "global_head_dim": 8,
    "position_embedding_size": 64,
}
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "<|turn>{{ 'model' if message['role'] == 'assistant' else message['role'] }}\n"
    "{{ message['content'] }}<turn|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|turn>model\n{% endif %}"
)
"""Gemma 4's turns (``<|turn>`` and ``<turn|>`` are ids 105 and 106 of its vocabulary)."""
DATASETS = {
    "nvidia/OpenMathInstruct-2": {
        "data/train_1M-00000-of-00002.parquet": "openmath",
        "data/train_1M-00001-of-00002.parquet": "openmath",
        "data/train_5M-00000-of-00001.parquet": "openmath",
    },
    "openai/gsm8k": {
        "main/train-00000-of-00001.parquet": "gsm8k",
        "main/test-00000-of-00001.parquet": "gsm8k",
        "socratic/train-00000-of-00001.parquet": "gsm8k",
    },
}
"""Each dataset's files (as the Hub's repository names them) and their schema."""
ROWS = 240
LONG_ROWS = 6
"""Rows per file (the example stacks' runs take at most 200), of which this many have a question of some 2,000 words
(over any prefill limit)."""


def small_config(model: str) -> dict:
    from maxtext.checkpoint_conversion.utils.hf_model_configs import HF_MODEL_CONFIGS

    config = copy.deepcopy(HF_MODEL_CONFIGS[model].to_dict())
    text = config["text_config"]
    period = _period(text.get("layer_types") or [])
    text.update(SMALL_TEXT)
    for key, value in SMALL_OPTIONAL.items():
        if text.get(key):
            text[key] = value
    # One period of the layer pattern; two where layers share another's keys and values, the second sharing (a
    # shared layer takes them from the last unshared layer of its kind, so both kinds come before).
    periods = 2 if text.get("num_kv_shared_layers") else 1
    text["layer_types"] = text["layer_types"][:period] * periods
    text["num_hidden_layers"] = period * periods
    if text.get("num_kv_shared_layers"):
        text["num_kv_shared_layers"] = period
    vision = config.get("vision_config")
    if vision:
        vision.update(SMALL_VISION)
    return config


def _period(layer_types: list) -> int:
    """The length of the layer pattern (one sliding run and its global layer)."""
    return layer_types.index("full_attention") + 1 if "full_attention" in layer_types else 6


def maxtext_overrides(config: dict) -> list:
    """MaxText's keys that give its model config the small sizes (``configs/models/<model>.yml``'s keys)."""
    text, vision = config["text_config"], config.get("vision_config") or {}
    words = {
        "base_num_decoder_layers": text["num_hidden_layers"],
        "base_emb_dim": text["hidden_size"],
        "base_num_query_heads": text["num_attention_heads"],
        "base_num_kv_heads": text["num_key_value_heads"],
        "base_mlp_dim": text["intermediate_size"],
        "head_dim": text["head_dim"],
        "global_head_dim": text["global_head_dim"],
        "sliding_window_size": text["sliding_window"],
    }
    if text.get("num_experts"):
        words |= {
            "num_experts": text["num_experts"],
            "num_experts_per_tok": text["top_k_experts"],
            "base_moe_mlp_dim": text["moe_intermediate_size"],
        }
    if text.get("num_global_key_value_heads"):
        words["global_num_kv_heads"] = text["num_global_key_value_heads"]
    if text.get("hidden_size_per_layer_input"):
        words["hidden_size_per_layer_input"] = text["hidden_size_per_layer_input"]
    if "num_kv_shared_layers" in text:
        words["num_kv_shared_layers"] = text["num_kv_shared_layers"]
    if vision:
        words |= {
            "hidden_size_for_vit": vision["hidden_size"],
            "intermediate_size_for_vit": vision["intermediate_size"],
            "num_hidden_layers_for_vit": vision["num_hidden_layers"],
            "num_attention_heads_for_vit": vision["num_attention_heads"],
            "num_position_embeddings_for_vit": vision["position_embedding_size"],
        }
    return [f"{key}={value}" for key, value in words.items()]


def weights(model: str, config: dict, out: str) -> None:
    """Random BF16 tensors of MaxText's expected names and shapes, in two shards and an index."""
    import ml_dtypes
    from maxtext.checkpoint_conversion.utils.hf_shape import HF_SHAPE
    from safetensors.numpy import save_file

    mapped = read_names(model, config)
    language = "model.language_model." if config.get("vision_config") else "model."
    # The base's language model is what MaxText reads and writes back (its param mapping; the shape table also lists
    # names it never reads, v_norm's scale where the model has none); the towers besides it are the export's copies.
    shapes = {n: s for n, s in HF_SHAPE[model](config).items() if n in mapped or not n.startswith(language)}
    rng = np.random.default_rng(0)
    names = sorted(shapes)
    halves = (names[: len(names) // 2], names[len(names) // 2 :])
    total = 0
    weight_map: dict = {}
    for n, part in enumerate(halves, 1):
        shard = f"model-{n:05d}-of-00002.safetensors"
        tensors = {}
        for name in part:
            array = (rng.standard_normal(shapes[name], dtype=np.float32) * 0.02).astype(ml_dtypes.bfloat16)
            tensors[name] = array
            total += array.nbytes
            weight_map[name] = shard
        save_file(tensors, os.path.join(out, shard), metadata={"format": "pt"})
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as file:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, file, indent=2)


def read_names(model: str, config: dict) -> set:
    """The Hugging Face names MaxText's converter reads for the small model (its ``PARAM_MAPPING``)."""
    from maxtext.checkpoint_conversion.utils.param_mapping import PARAM_MAPPING
    from maxtext.configs import pyconfig
    from maxtext.utils.globals import MAXTEXT_CONFIGS_DIR

    words = [f"model_name={model}", "scan_layers=False", "use_multimodal=False", "skip_jax_distributed_system=true"]
    words += ["override_model_config=True", *maxtext_overrides(config)]
    maxtext_config = pyconfig.initialize(["", os.path.join(MAXTEXT_CONFIGS_DIR, "base.yml"), *words])
    names: set = set()

    def collect(value) -> None:
        if isinstance(value, str):
            names.add(value)
        elif isinstance(value, (list, tuple)):
            for item in value:
                collect(item)

    for value in PARAM_MAPPING[model](config, maxtext_config, False).values():
        collect(value)
    return names


def tokenizer(out: str) -> None:
    import shutil
    import tempfile

    import maxtext
    from transformers import GemmaTokenizer

    model = os.path.join(os.path.dirname(maxtext.__file__), "assets", "tokenizers", "tokenizer_gemma4.model")
    with tempfile.TemporaryDirectory() as folder:
        shutil.copy(model, os.path.join(folder, "tokenizer.model"))
        made = GemmaTokenizer.from_pretrained(folder)
    made.chat_template = CHAT_TEMPLATE
    made.save_pretrained(out)


def _problem(rng: random.Random, long: bool) -> tuple:
    a, b = rng.randint(2, 99), rng.randint(2, 99)
    question = f"A crate holds {a} apples and another holds {b}. How many apples are there in all?"
    if long:
        question = " ".join(["Consider the following long preamble about orchards."] * 300) + " " + question
    return question, a + b


def dataset_file(schema: str, seed: int) -> bytes:
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = random.Random(seed)
    rows = [_problem(rng, n < LONG_ROWS) for n in range(ROWS)]
    if schema == "openmath":
        table = pa.table(
            {
                "problem": [q for q, _ in rows],
                "generated_solution": [f"Adding gives \\boxed{{{s}}}." for _, s in rows],
                "expected_answer": [str(s) for _, s in rows],
                "problem_source": ["augmented_math"] * len(rows),
            }
        )
    else:
        table = pa.table({"question": [q for q, _ in rows], "answer": [f"They add up.\n#### {s}" for _, s in rows]})
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    return buffer.getvalue()


def main(out: str, model: str) -> int:
    config = small_config(model)
    folder = os.path.join(out, "model")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as file:
        json.dump(config, file, indent=2)
    generation = {"bos_token_id": 2, "eos_token_id": [1, 106], "pad_token_id": 0, "do_sample": True, "top_k": 64}
    with open(os.path.join(folder, "generation_config.json"), "w") as file:
        json.dump(generation, file, indent=2)
    weights(model, config, folder)
    tokenizer(folder)
    for repo, files in DATASETS.items():
        for n, (name, schema) in enumerate(sorted(files.items())):
            path = os.path.join(out, "datasets", repo.replace("/", "__"), name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as file:
                file.write(dataset_file(schema, n))
    with open(os.path.join(out, "small.json"), "w") as file:
        json.dump({"maxtext": maxtext_overrides(config), "hf": config}, file, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
