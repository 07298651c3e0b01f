"""Hugging Face model folders for tests, written the way ``save_pretrained`` and MaxText's ``to_huggingface``
write them: ``config.json``, safetensors shards written by the real ``safetensors`` library, the index and
the tokenizer's files. Gemma 4's names: the language model under ``model.language_model.``, a vision tower the
export leaves out."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np

from core.hf_model import ModelLayout, Tensor

LANG = "model.language_model."
CONFIG = {
    "architectures": ["Gemma4ForConditionalGeneration"],
    "model_type": "gemma4",
    "text_config": {"model_type": "gemma4_text", "hidden_size": 4, "num_hidden_layers": 2, "vocab_size": 8},
    "vision_config": {"model_type": "gemma4_vision"},
}
LANGUAGE = {
    f"{LANG}embed_tokens.weight": ("BF16", [8, 4]),
    f"{LANG}norm.weight": ("BF16", [4]),
    **{f"{LANG}layers.{i}.self_attn.q_proj.weight": ("BF16", [4, 4]) for i in range(2)},
    **{f"{LANG}layers.{i}.experts.gate_up_proj": ("BF16", [2, 6, 4]) for i in range(2)},
    **{f"{LANG}layers.{i}.experts.down_proj": ("BF16", [2, 4, 3]) for i in range(2)},
}
VISION = {
    "model.vision_tower.encoder.layers.0.self_attn.q_proj.linear.weight": ("BF16", [4, 4]),
    "model.embed_vision.embedding_projection.weight": ("BF16", [4, 4]),
}
BYTES = {"BF16": 2, "F32": 4}


def shard_bytes(tensors: dict[str, tuple[str, list[int]]]) -> bytes:
    """A safetensors file, as the library writes it (zeros: the check reads headers only)."""
    import safetensors

    keep = []
    specs = {}
    for name, (dtype, shape) in tensors.items():
        data = np.zeros(int(np.prod(shape)) * BYTES[dtype], dtype=np.uint8)
        keep.append(data)
        specs[name] = safetensors.TensorSpec(
            dtype={"BF16": "bfloat16", "F32": "float32"}[dtype],
            shape=shape,
            data_ptr=data.ctypes.data,
            data_len=data.nbytes,
        )
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "shard.safetensors"
        safetensors.serialize_file(specs, str(path), metadata={"format": "pt"})
        return path.read_bytes()


def model_files(tensors: dict[str, tuple[str, list[int]]], shards: int, config: dict | None = None) -> dict[str, bytes]:
    """A model folder as ``save_pretrained`` and ``to_huggingface`` write it: config, shards, index, tokenizer."""
    names = sorted(tensors)
    groups = [names[i::shards] for i in range(shards)]
    files: dict[str, bytes] = {}
    weight_map = {}
    for i, group in enumerate(groups, 1):
        file = f"model-{i:05d}-of-{shards:05d}.safetensors"
        files[file] = shard_bytes({n: tensors[n] for n in group})
        weight_map.update(dict.fromkeys(group, file))
    total = sum(int(np.prod(shape)) * BYTES[dtype] for dtype, shape in tensors.values())
    files["model.safetensors.index.json"] = json.dumps(
        {"metadata": {"total_size": total}, "weight_map": weight_map}
    ).encode()
    files["config.json"] = json.dumps(config or CONFIG).encode()
    files["tokenizer.json"] = b'{"version": "1.0"}'
    files["tokenizer_config.json"] = b'{"tokenizer_class": "GemmaTokenizer"}'
    files["chat_template.jinja"] = b"{{ messages }}"
    return files


def layout(tensors: dict[str, tuple[str, list[int]]], config: dict | None = None) -> ModelLayout:
    return ModelLayout(
        config or CONFIG, {n: Tensor(d, tuple(s)) for n, (d, s) in tensors.items()}, dict.fromkeys(tensors, "m")
    )
