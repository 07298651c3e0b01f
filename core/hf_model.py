"""A Hugging Face model folder as data: its config, its tensors (name -> dtype, shape) and the shard each is
in, read from safetensors headers; and how an exported model compares with the base model it came from.

The safetensors format (https://huggingface.co/docs/safetensors/index#format): 8 bytes, the length N of the
header as a little-endian unsigned 64-bit integer; N bytes of JSON, ``{name: {"dtype", "shape",
"data_offsets": [begin, end]}}`` plus an optional ``__metadata__`` of strings; then the data, whose offsets
count from the end of the header. So a shard's header tells its exact size: a shard whose object is shorter
(an upload cut short) or longer than its header says is refused. The headers are read here from byte
ranges of the objects in GCS, which the ``safetensors`` library cannot do (it opens whole local files): a
26B model's shards are 50 GB, their headers a few hundred kilobytes.
"""

from __future__ import annotations

import json
import re
import struct
from dataclasses import dataclass
from typing import Any

MAX_HEADER_BYTES = 100_000_000
"""The safetensors library's own limit on a header (``MAX_HEADER_SIZE``)."""
DTYPES = frozenset(
    ("BOOL", "U8", "I8", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "F64", "I64", "U64", "F8_E4M3", "F8_E5M2")
)
DTYPE_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2}
DTYPE_BYTES.update({"I32": 4, "U32": 4, "F32": 4, "F64": 8, "I64": 8, "U64": 8})
INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"


class ModelFormatError(ValueError):
    """A file of the folder is not what the safetensors or Transformers format says it is (one line)."""


@dataclass(frozen=True)
class Tensor:
    dtype: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class ModelLayout:
    """What a model folder holds, as far as loading it depends on."""

    config: dict[str, Any]
    tensors: dict[str, Tensor]
    weight_map: dict[str, str]
    """Tensor -> the shard file it is in."""


def header_length(first_bytes: bytes, file_name: str, file_size: int) -> int:
    """N from a shard's first 8 bytes; refuses a length shorter than ``{}``, past the file or past the library's
    limit (a length of 0 would make the ranged read of the header ``bytes=8-7``, which GCS answers with the
    whole object)."""
    if len(first_bytes) < 8:
        raise ModelFormatError(f"{file_name} holds {len(first_bytes)} bytes: too short for a safetensors file")
    (length,) = struct.unpack("<Q", first_bytes[:8])
    if length < 2 or length > MAX_HEADER_BYTES or 8 + length > file_size:
        raise ModelFormatError(f"{file_name}: its header length {length} does not fit the file of {file_size} bytes")
    return int(length)


def parse_header(raw: bytes, file_name: str, file_size: int) -> dict[str, Tensor]:
    """The tensors of one shard from its header's JSON; checks every tensor's bytes against its offsets and the
    shard's size against the data the header describes."""
    try:
        header = json.loads(raw)
    except (UnicodeDecodeError, ValueError):
        raise ModelFormatError(f"{file_name}: its safetensors header is not JSON") from None
    if not isinstance(header, dict):
        raise ModelFormatError(f"{file_name}: its safetensors header is not an object")
    tensors: dict[str, Tensor] = {}
    end_of_data = 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise ModelFormatError(f"{file_name}: tensor {name} lacks dtype, shape or data_offsets") from None
        ints = [*shape, begin, end] if isinstance(shape, list) else None
        if dtype not in DTYPES or ints is None or not all(type(n) is int and n >= 0 for n in ints):
            raise ModelFormatError(f"{file_name}: tensor {name} has an invalid dtype, shape or data_offsets")
        count = 1
        for n in shape:
            count *= n
        size = count * DTYPE_BYTES[dtype]
        if end - begin != size:
            raise ModelFormatError(f"{file_name}: tensor {name} ({dtype} {shape}) is {end - begin} bytes, not {size}")
        tensors[name] = Tensor(dtype, tuple(shape))
        end_of_data = max(end_of_data, end)
    expected = 8 + len(raw) + end_of_data
    if file_size != expected:
        raise ModelFormatError(
            f"{file_name} is {file_size} bytes but its header describes {expected}: "
            + ("the shard is cut short" if file_size < expected else "it holds bytes no tensor accounts for")
        )
    return tensors


def parse_index(raw: bytes) -> dict[str, str]:
    """``model.safetensors.index.json``'s ``weight_map``: tensor -> shard file."""
    try:
        index = json.loads(raw)
    except (UnicodeDecodeError, ValueError):
        raise ModelFormatError(f"{INDEX_FILE} is not JSON") from None
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not weight_map or not all(isinstance(v, str) for v in weight_map.values()):
        raise ModelFormatError(f"{INDEX_FILE} has no weight_map of tensor names to shard files")
    return {str(k): v for k, v in weight_map.items()}


def parse_config(raw: bytes) -> dict[str, Any]:
    """``config.json`` as an object."""
    try:
        config = json.loads(raw)
    except (UnicodeDecodeError, ValueError):
        raise ModelFormatError("config.json is not JSON") from None
    if not isinstance(config, dict):
        raise ModelFormatError("config.json is not an object")
    return config


# ---------------------------------------------------------------------------------------------
# An export against its base model

LANGUAGE_PREFIX = "model.language_model."
"""Where a Gemma 4 checkpoint keeps its language model: MaxText 0.2.4's ``to_huggingface`` names every tensor
under it (``param_mapping.py``: ``text_base = "model.language_model"`` whenever the config has a
``vision_config``, which its Gemma 4 configs always have), as the base repositories do."""
EXPORTED_DTYPE = "BF16"
"""``weight_dtype=bfloat16``: every exported tensor (the export's default would be F32)."""
TEXT_CONFIG_KEYS = (
    "model_type",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "intermediate_size",
    "vocab_size",
    "num_experts",
    "top_k_experts",
    "moe_intermediate_size",
)
"""``text_config`` fields that fix the language model's shapes, compared where the base sets them."""
BASE_ONLY: dict[str, re.Pattern[str]] = {
    # Gemma 4 E4B shares the key/value projections of its layers 24-41 (MaxText param_mapping.py, Transformers
    # modeling_gemma4.py): the export writes none there; should the base repository still hold them, they are
    # not missing from the export.
    "gemma4-e4b": re.compile(
        re.escape(LANGUAGE_PREFIX) + r"layers\.(2[4-9]|3[0-9]|4[01])\.self_attn\.(k_proj|v_proj|k_norm|v_norm)\."
    ),
}
"""Base tensors of the language model an export of that model rightly lacks."""


def compare(exported: ModelLayout, base: ModelLayout, model: str) -> list[str]:
    """How the export differs from the base model, one line each (empty: it is the base's language model
    with the same architecture, tensor names and shapes, in BF16)."""
    out: list[str] = []
    for key in ("architectures", "model_type"):
        if exported.config.get(key) != base.config.get(key):
            out.append(
                f"config.json {key} is {_shown(exported.config.get(key))}, the base's {_shown(base.config.get(key))}"
            )
    mine, theirs = exported.config.get("text_config") or {}, base.config.get("text_config") or {}
    for key in TEXT_CONFIG_KEYS:
        if isinstance(theirs, dict) and key in theirs and (not isinstance(mine, dict) or mine.get(key) != theirs[key]):
            found = mine.get(key) if isinstance(mine, dict) else None
            out.append(f"config.json text_config.{key} is {_shown(found)}, the base's {_shown(theirs[key])}")
    allowed = BASE_ONLY.get(model)
    language = {n: t for n, t in base.tensors.items() if n.startswith(LANGUAGE_PREFIX)}
    for name in sorted(set(exported.tensors) - set(language)):
        where = "the base has no such tensor" if name.startswith(LANGUAGE_PREFIX) else "not a language-model tensor"
        out.append(f"tensor {name} is in the export only ({where})")
    for name in sorted(set(language) - set(exported.tensors)):
        if allowed is None or not allowed.match(name):
            out.append(f"tensor {name} of the base is missing from the export")
    for name in sorted(set(exported.tensors) & set(language)):
        mine_t, theirs_t = exported.tensors[name], language[name]
        if mine_t.shape != theirs_t.shape:
            out.append(f"tensor {name} has shape {list(mine_t.shape)}, the base's {list(theirs_t.shape)}")
        if mine_t.dtype != EXPORTED_DTYPE:
            out.append(f"tensor {name} is {mine_t.dtype}, not {EXPORTED_DTYPE} (weight_dtype=bfloat16)")
    return out


def _shown(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 80 else text[:77] + "..."
