"""A Hugging Face model folder as data: its config, its tensors (name -> dtype, shape) and the shard each is
in, read from safetensors headers; a file's content as the Hub names it (``HubFile``: its LFS sha256 or Git blob
id), hashed in chunks; and how an exported model compares with the base model it came from.

The safetensors format (https://huggingface.co/docs/safetensors/index#format): 8 bytes, the length N of the
header as a little-endian unsigned 64-bit integer; N bytes of JSON, ``{name: {"dtype", "shape",
"data_offsets": [begin, end]}}`` plus an optional ``__metadata__`` of strings; then the data, whose offsets
count from the end of the header. So a shard's header tells its exact size: a shard whose object is shorter
(an upload cut short) or longer than its header says is refused.

The headers are read from byte ranges of the objects (a 26B model's shards are 50 GB, their headers a few
hundred kilobytes) and judged by the ``safetensors`` library itself (``parse_header``): the header is laid
into a sparse file of the shard's size, which ``safetensors.safe_open`` validates as it validates any file
(``SafeTensors::read_metadata`` and ``Metadata::validate`` of the Rust crate: the header JSON and its types,
``__metadata__`` a map of strings, known dtypes, offsets that start at 0 and follow each other with no gap or
overlap, each tensor's bytes what its dtype and shape need, the data ending exactly at the file's end),
reading none of the data.

Every JSON document read from outside (a header, an index, a config, a record the steps read back) is parsed by
``json_document``: at most ``MAX_JSON_DEPTH`` levels, checked on the bytes before any object is built, so no reader
meets Python's recursion limit (``core.inputs.parse_json`` is it, for the rest of the project).
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
import tempfile
from dataclasses import dataclass
from itertools import accumulate
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING or __package__:  # the project's package
    from core.errors import BadInputError, TpuRlError
else:  # a file of a step's ConfigMap, beside its programs (workloads/specs/commands.py CORE_FILES)
    from errors import BadInputError, TpuRlError

MAX_HEADER_BYTES = 100_000_000
"""The safetensors library's own limit on a header (``MAX_HEADER_SIZE``)."""
INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"
MAX_DESCRIBED = 2**40
"""The largest file a header may describe and still be validated (1 TiB, sparse): a header describing more is
a shard cut short whatever it holds (no model shard is that large)."""
LIBRARY_PREFIX = "Error while deserializing header: "
"""How ``SafetensorError`` messages of a refused header begin (the Python binding's wording)."""


class ModelFormatError(BadInputError):
    """A file of the folder is not what the safetensors or Transformers format says it is (one line)."""


MAX_JSON_DEPTH = 64
"""The deepest nesting of a JSON document from outside: a header, an index, a config or a record needs under 10
levels, a Kubernetes object or a stack file under 20."""
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_NOT_BRACKETS = bytes(range(256)).translate(None, b"[]{}")
_NESTING = [0] * 256
_NESTING[ord("[")] = _NESTING[ord("{")] = 1
_NESTING[ord("]")] = _NESTING[ord("}")] = -1


class JsonDocumentError(BadInputError):
    """A document from outside that is not JSON within the limits, one line: ``<what> is not JSON``, ``<what> is
    nested deeper than <N> levels`` or ``<what> is a number with too many digits``."""


def json_nesting(raw: bytes) -> int:
    """How deep JSON nests, counted on its brackets outside strings before any parse (exact for JSON; text that is
    not JSON may count deeper than it is, never shallower than a parser would recurse before refusing it)."""
    brackets = _JSON_STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    return max(accumulate(map(_NESTING.__getitem__, brackets), initial=0))


def json_document(data: bytes | str, what: str, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``data`` as JSON, its nesting checked first (``json_nesting``): deeper than ``max_depth`` levels is refused
    before any object is built, so neither the parser nor a reader that walks the value meets Python's recursion
    limit; integers of at most 4,300 digits (Python's own limit). ``JsonDocumentError`` otherwise."""
    raw = data.encode("utf-8", errors="surrogateescape") if isinstance(data, str) else data
    if json_nesting(raw) > max_depth:
        raise JsonDocumentError(f"{what} is nested deeper than {max_depth} levels")
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, RecursionError):
        raise JsonDocumentError(f"{what} is not JSON") from None
    except ValueError as err:
        detail = "a number with too many digits" if "digits" in str(err) else "not JSON"
        raise JsonDocumentError(f"{what} is {detail}") from None


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
    """N from a shard's first 8 bytes; refuses what the library refuses (``HeaderTooLarge``: past its limit;
    ``InvalidHeaderLength``: past the file) and a length shorter than ``{}`` (a length of 0 would make the
    ranged read of the header ``bytes=8-7``, which GCS answers with the whole object)."""
    if len(first_bytes) < 8:
        raise ModelFormatError(f"{file_name} holds {len(first_bytes)} bytes: too short for a safetensors file")
    (length,) = struct.unpack("<Q", first_bytes[:8])
    if length < 2 or length > MAX_HEADER_BYTES or 8 + length > file_size:
        raise ModelFormatError(f"{file_name}: its header length {length} does not fit the file of {file_size} bytes")
    return int(length)


def _described_size(header: dict[str, Any], length: int) -> int:
    """The file size a header of ``length`` bytes describes: 8 + ``length`` + the largest end offset."""
    end = 0
    for name, info in header.items():
        offsets = info.get("data_offsets") if name != "__metadata__" and isinstance(info, dict) else None
        if isinstance(offsets, list) and len(offsets) == 2 and all(type(n) is int and n >= 0 for n in offsets):
            end = max(end, offsets[1])
    return 8 + length + end


def _library_read(raw: bytes, size: int, file_name: str) -> dict[str, Tensor]:
    """The tensors ``safetensors.safe_open`` finds in a file of ``size`` bytes that begins with this header
    (a sparse file: the data is never written or read); ``ModelFormatError`` with the library's reason."""
    from safetensors import SafetensorError, safe_open

    with tempfile.NamedTemporaryFile(prefix="tpu-rl-header-", suffix=".safetensors") as file:
        file.write(struct.pack("<Q", len(raw)) + raw)
        file.truncate(size)
        file.flush()
        try:
            with safe_open(file.name, framework="numpy") as opened:
                found = {}
                for name in opened.keys():  # noqa: SIM118 (safe_open is no mapping)
                    part = opened.get_slice(name)
                    found[name] = Tensor(str(part.get_dtype()), tuple(int(n) for n in part.get_shape()))
                return found
        except SafetensorError as err:
            reason = " ".join(str(err).removeprefix(LIBRARY_PREFIX).split())[:200]
            raise ModelFormatError(f"{file_name}: the safetensors library refuses its header ({reason})") from None


def parse_header(raw: bytes, file_name: str, file_size: int) -> dict[str, Tensor]:
    """The tensors of one shard from its header (the ``N`` bytes after the first 8), as the safetensors library
    reads them: the header is judged by the library, then the shard's size against the size it describes. A header
    that is no JSON object is refused in the library's words where it refuses it."""
    try:
        header = json_document(raw, "its safetensors header")
        problem = None if isinstance(header, dict) else "its safetensors header is not a JSON object"
    except JsonDocumentError as err:
        problem = str(err)
    if problem is not None:  # refused: the library says why, judging a file of the shard's size (at most 1 TiB)
        _library_read(raw, min(max(file_size, 8 + len(raw)), MAX_DESCRIBED), file_name)
        raise ModelFormatError(f"{file_name}: {problem}")
    described = _described_size(header, len(raw))
    if described > MAX_DESCRIBED:
        raise ModelFormatError(
            f"{file_name} is {file_size} bytes but its header describes {described}: the shard is cut short"
        )
    tensors = _library_read(raw, described, file_name)  # a sparse file of the size the header describes
    if file_size != described:
        raise ModelFormatError(
            f"{file_name} is {file_size} bytes but its header describes {described}: "
            + ("the shard is cut short" if file_size < described else "it holds bytes no tensor accounts for")
        )
    return tensors


def parse_index(raw: bytes) -> dict[str, str]:
    """``model.safetensors.index.json``'s ``weight_map``: tensor -> shard file."""
    try:
        index = json_document(raw, INDEX_FILE)
    except JsonDocumentError as err:
        raise ModelFormatError(str(err)) from None
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not weight_map or not all(isinstance(v, str) for v in weight_map.values()):
        raise ModelFormatError(f"{INDEX_FILE} has no weight_map of tensor names to shard files")
    for shard in sorted(set(weight_map.values())):
        problem = shard_problem(shard)
        if problem:
            raise ModelFormatError(f"{INDEX_FILE} names a shard that cannot be one: {problem}")
    return {str(k): v for k, v in weight_map.items()}


def parse_config(raw: bytes) -> dict[str, Any]:
    """``config.json`` as an object."""
    try:
        config = json_document(raw, CONFIG_FILE)
    except JsonDocumentError as err:
        raise ModelFormatError(str(err)) from None
    if not isinstance(config, dict):
        raise ModelFormatError("config.json is not an object")
    return config


# ---------------------------------------------------------------------------------------------
# The files of a model folder: names from outside (a GCS listing, an index's weight_map, a Hub repository's
# files) are checked where they enter

CONFIG_FILE = "config.json"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
"""What ``to_huggingface``'s ``tokenizer.save_pretrained`` writes for Gemma 4 and a loader reads."""
MODEL_FILES = frozenset(
    (
        CONFIG_FILE,
        "generation_config.json",
        INDEX_FILE,
        SINGLE_FILE,
        *TOKENIZER_FILES,
        "tokenizer.model",
        "special_tokens_map.json",
        "added_tokens.json",
        "chat_template.jinja",
        "chat_template.json",
        "processor_config.json",
        "preprocessor_config.json",
        "video_preprocessor_config.json",
    )
)
"""The files of a Transformers model folder besides its shards: what ``save_pretrained`` of a model (config,
generation config, weights or index), its tokenizer and its processor write, and the chat template."""
COPIED_FILES = tuple(sorted(MODEL_FILES - {CONFIG_FILE, INDEX_FILE, SINGLE_FILE, *TOKENIZER_FILES}))
"""The base's files the export step copies where MaxText wrote none (``to_huggingface`` writes no generation or
processor config); the tokenizer stays MaxText's, ``config.json`` becomes the base's, the weights the index's."""
SHARD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,200}[.]safetensors")
"""A shard's name: ``model-00001-of-00018.safetensors`` (``save_pretrained``, MaxText's ``shard_checkpoint``),
the export step's ``model-base-00001-of-00001.safetensors``: one plain segment."""
MAX_NAME = 255
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def name_problem(name: str) -> str | None:
    """Why ``name`` (relative to its folder) cannot be a file of a model folder, None when it can be: one plain
    path segment (no ``/`` or backslash, not ``.``, ``..`` or hidden, no control character), so a path built
    from it stays in its folder."""
    shown = CONTROL.sub("?", name)[:80]
    if not name:
        return "an empty name"
    if CONTROL.search(name):
        return f"the name {shown!r} holds a control character"
    if "/" in name or "\\" in name:
        return f"the name {shown!r} is a path, not a file of the folder"
    if name.startswith("."):
        return f"the name {shown!r} is not a plain file name"
    if len(name) > MAX_NAME:
        return f"the name {shown!r}... is longer than {MAX_NAME} characters"
    return None


def export_file_problem(name: str) -> str | None:
    """Why ``name`` is not a file a model folder consists of (None: it is one; a shard must also be named by the
    index, which the reader checks)."""
    problem = name_problem(name)
    if problem is None and name not in MODEL_FILES and not SHARD.fullmatch(name):
        problem = f"{name!r} is not a file of a model folder"
    return problem


def shard_problem(name: str) -> str | None:
    """Why ``name``, a shard an index names, is not a plain ``.safetensors`` file of the folder."""
    problem = name_problem(name)
    if problem is None and not SHARD.fullmatch(name):
        problem = f"{name!r} is not a safetensors shard's name"
    return problem


class ReplyTooLargeError(TpuRlError):
    """A server sent more bytes than the read asked for (it ignored the byte range, or the object changed)."""


class BoundedBuffer:
    """A file-like sink that holds at most ``cap`` bytes (``Blob.download_to_file`` writes the body into it in
    8 kB chunks): the download stops with ``ReplyTooLargeError`` as soon as the server sends more, so a server
    that ignores ``Range`` cannot pull a whole shard into memory."""

    def __init__(self, cap: int, what: str) -> None:
        self.cap, self.what = cap, what
        self.data = bytearray()

    def write(self, chunk: bytes) -> int:
        if len(self.data) + len(chunk) > self.cap:
            raise ReplyTooLargeError(f"{self.what}: the server sent more than the {self.cap} bytes asked for")
        self.data += chunk
        return len(chunk)

    def flush(self) -> None:
        pass


def read_object(blob: Any, cap: int, what: str, start: int | None = None, end: int | None = None, **call: Any) -> bytes:
    """Bytes ``start``..``end`` (inclusive) of a GCS object (google-cloud-storage's ``Blob``), or the whole object,
    holding at most ``cap`` bytes (for a range, ``end - start + 1``) whatever the server sends."""
    if start is not None and end is not None:
        cap = min(cap, end - start + 1)
    sink = BoundedBuffer(cap, what)
    # A ranged read skips the checksum (GCS has none for a part); a whole read keeps the library's default.
    options = {"checksum": None} if start is not None else {}
    blob.download_to_file(sink, start=start, end=end, **options, **call)
    return bytes(sink.data)


# ---------------------------------------------------------------------------------------------
# A file's content as the Hub names it

SHA256 = "sha256"
"""A file kept in Git LFS (the weights, the tokenizer): the sha256 of its bytes, the Hub's ``lfs.sha256``."""
BLOB_ID = "blobId"
"""A file kept in Git itself (the configs): its Git blob id, the SHA-1 of ``blob <size>\\0`` then its bytes (what
``git hash-object`` prints), the Hub's ``blobId``."""
DIGEST = {SHA256: re.compile(r"[0-9a-f]{64}"), BLOB_ID: re.compile(r"[0-9a-f]{40}")}
CHUNK = 1 << 20


@dataclass(frozen=True)
class HubFile:
    """One file of a commit as the Hub describes it (``model_info(files_metadata=True)``, each sibling's ``size``,
    ``blobId`` and ``lfs.sha256``): its size and the hash that names its content, the LFS sha256 where the file is
    in LFS, else its Git blob id. A Hub cache entry records it for each file (``as_json``), and every cached copy
    is hashed and compared with it before use."""

    size: int
    kind: str
    """``SHA256`` or ``BLOB_ID``."""
    digest: str

    def as_json(self) -> dict[str, Any]:
        return {"size": self.size, self.kind: self.digest}

    def shown(self) -> str:
        return f"{self.size} bytes, {self.kind} {self.digest}"


def hub_file(size: Any, sha256: Any, blob_id: Any) -> HubFile | None:
    """The ``HubFile`` of a sibling's fields (the LFS sha256 first), None when they name no size or no hash."""
    if type(size) is not int or size < 0:
        return None
    for kind, digest in ((SHA256, sha256), (BLOB_ID, blob_id)):
        if isinstance(digest, str) and DIGEST[kind].fullmatch(digest):
            return HubFile(size, kind, digest)
    return None


def recorded_file(value: Any) -> HubFile | None:
    """A ``HubFile`` as ``as_json`` wrote it, None when ``value`` is not one."""
    if not isinstance(value, dict) or len(value) != 2 or not ({SHA256, BLOB_ID} & set(value)):
        return None
    return hub_file(value.get("size"), value.get(SHA256), value.get(BLOB_ID))


class Digest:
    """A file's content hashed as ``expected`` names it, fed in chunks: a file-like sink for
    ``Blob.download_to_file`` (bounded memory whatever the object's size) or the chunks of a file read back."""

    def __init__(self, expected: HubFile) -> None:
        self.expected, self.size = expected, 0
        self.hash = hashlib.sha256() if expected.kind == SHA256 else hashlib.sha1(b"blob %d\0" % expected.size)

    def write(self, chunk: bytes) -> int:
        self.hash.update(chunk)
        self.size += len(chunk)
        return len(chunk)

    def flush(self) -> None:
        pass

    def problem(self, what: str, whose: str = "the Hub's") -> str | None:
        """Why the bytes fed are not the file ``expected`` names (one line: ``what`` is ..., not ``whose`` ...),
        None when they are."""
        digest = self.hash.hexdigest()
        if (self.size, digest) == (self.expected.size, self.expected.digest):
            return None
        # A Git blob id hashes its size: one of another size is named by its size alone.
        found = f"{self.size} bytes" if self.size != self.expected.size else f"{self.expected.kind} {digest}"
        return f"{what} is {found}, not {whose} {self.expected.shown()}"


def file_problem(path: Any, expected: HubFile, what: str, whose: str = "the Hub's") -> str | None:
    """Why the local file ``path`` is not the file ``expected`` names (``Digest.problem``), read in 1 MiB chunks."""
    digest = Digest(expected)
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.write(chunk)
    return digest.problem(what, whose)


# ---------------------------------------------------------------------------------------------
# An export against its base model

LANGUAGE_PREFIX = "model.language_model."
"""Where a Gemma 4 checkpoint keeps its language model: MaxText's ``to_huggingface`` (0.2.4 and 0.2.5) names every
tensor it writes under it (``param_mapping.py``: ``text_base = "model.language_model"`` whenever the config has a
``vision_config``, which its Gemma 4 configs always have), as the base repositories do. It writes nothing else
(``use_multimodal=False``: no vision tower, no audio tower); the export step copies the rest from the base."""
EXPORTED_DTYPE = "BF16"
"""``weight_dtype=bfloat16``: every tensor MaxText writes (its default would be F32)."""
SHAPE_CONFIG_KEYS = (
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
"""``text_config`` fields that fix the language model's shapes: MaxText's ``config.json`` must agree with the
base's on them (and on ``architectures`` and ``model_type``) before the export step writes the base's."""


def maxtext_config_differences(maxtext: dict[str, Any], base: dict[str, Any]) -> list[str]:
    """Where the ``config.json`` MaxText wrote disagrees with the base's on what fixes the tensors' shapes (the
    export step then refuses to put the base's in its place)."""
    out = [
        f"config.json {key} is {_shown(maxtext.get(key))}, the base's {_shown(base.get(key))}"
        for key in ("architectures", "model_type")
        if maxtext.get(key) != base.get(key)
    ]
    mine, theirs = maxtext.get("text_config"), base.get("text_config")
    mine = mine if isinstance(mine, dict) else {}
    theirs = theirs if isinstance(theirs, dict) else {}
    for key in SHAPE_CONFIG_KEYS:
        found = mine.get(key)
        if key in theirs and found != theirs[key]:
            out.append(f"config.json text_config.{key} is {_shown(found)}, the base's {_shown(theirs[key])}")
    return out


KV_SHARED = re.compile(re.escape(LANGUAGE_PREFIX) + r"layers[.](\d+)[.]self_attn[.](k_proj|v_proj|k_norm|v_norm)[.]")


def unused_by_the_model(name: str, config: dict[str, Any]) -> bool:
    """Whether ``name`` is a key or value tensor of a layer that shares another layer's keys and values (Gemma 4
    E2B/E4B: the last ``text_config.num_kv_shared_layers`` layers). Transformers builds no such weights
    (``Gemma4TextAttention``: "Layers sharing kv states don't need any weight matrices") and MaxText writes none
    (``GEMMA4_SMALL_MAXTEXT_TO_HF_PARAM_MAPPING``); a base repository that still holds them gets them back in
    the export unchanged, so the export holds every tensor its base holds."""
    found = KV_SHARED.match(name)
    text = config.get("text_config")
    if found is None or not isinstance(text, dict):
        return False
    layers, shared = text.get("num_hidden_layers"), text.get("num_kv_shared_layers")
    if type(layers) is not int or type(shared) is not int or shared <= 0:
        return False
    return layers - shared <= int(found.group(1)) < layers


def copied_from_base(name: str, config: dict[str, Any]) -> bool:
    """Whether the export step copies the base's tensor ``name`` unchanged: everything outside the language model
    (vision tower, ``embed_vision``, audio tower, ``embed_audio``) and the language model's unused tensors."""
    return not name.startswith(LANGUAGE_PREFIX) or unused_by_the_model(name, config)


def compare(exported: ModelLayout, base: ModelLayout) -> list[str]:
    """How the export differs from the base model, one line each (empty: it is the whole base model: the same
    ``config.json``, every tensor of the base and no other, each with the base's shape, in the base's dtype or,
    for the language model MaxText writes, in BF16)."""
    out = _config_differences(exported.config, base.config)
    for name in sorted(set(base.tensors) - set(exported.tensors)):
        out.append(f"tensor {name} of the base is missing from the export")
    for name in sorted(set(exported.tensors) - set(base.tensors)):
        out.append(f"tensor {name} is in the export only (the base has no such tensor)")
    for name in sorted(set(exported.tensors) & set(base.tensors)):
        mine, theirs = exported.tensors[name], base.tensors[name]
        if mine.shape != theirs.shape:
            out.append(f"tensor {name} has shape {list(mine.shape)}, the base's {list(theirs.shape)}")
        if mine.dtype == theirs.dtype or (mine.dtype == EXPORTED_DTYPE and name.startswith(LANGUAGE_PREFIX)):
            continue
        if name.startswith(LANGUAGE_PREFIX):
            out.append(f"tensor {name} is {mine.dtype}, not {EXPORTED_DTYPE} (weight_dtype=bfloat16)")
        else:
            out.append(f"tensor {name} is {mine.dtype}, the base's {theirs.dtype} (copied from the base unchanged)")
    return out


def _config_differences(mine: dict[str, Any], theirs: dict[str, Any], path: str = "") -> list[str]:
    """Where ``config.json`` differs from the base's, field by field (the sub-configs' fields one by one)."""
    out = []
    for key in sorted(set(mine) | set(theirs)):
        a, b = mine.get(key), theirs.get(key)
        if not path and isinstance(b, dict):
            out += _config_differences(a if isinstance(a, dict) else {}, b, f"{key}.")
        elif a != b:
            out.append(f"config.json {path}{key} is {_shown(a)}, the base's {_shown(b)}")
    return out


def _shown(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 80 else text[:77] + "..."
