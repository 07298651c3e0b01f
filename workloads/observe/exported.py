"""The exported model as GCS holds it: its config, its index, every shard's safetensors header and size
(google-cloud-storage, each request bounded by the caller's options; headers read as byte ranges, each read
holding at most the bytes it asked for, ``core.bounded.read_object``).

What it checks on its own, before the comparison with the base model (``core.hf_model.compare``): every object
is a file a model folder consists of, named as one plain file (``core.hf_model.export_file_problem``: no
``..``, no path, no control character), the files a Transformers loader needs are there (``config.json``,
the tokenizer's, the weights), every shard the index names exists and every shard is named by the index,
each shard's object is exactly as long as its header says (a shard cut short or padded is named), and the
index and the headers agree on where each tensor is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from core.bounded import read_object
from core.hf_model import (
    CONFIG_FILE,
    INDEX_FILE,
    SINGLE_FILE,
    TOKENIZER_FILES,
    ModelFormatError,
    ModelLayout,
    Tensor,
    export_file_problem,
    header_length,
    parse_config,
    parse_header,
    parse_index,
)
from workloads.container.checkpoint_scan import split_uri

MAX_LISTED = 10_000
"""Objects the exported folder may hold (a 26B export has about 25)."""
MAX_JSON_BYTES = 64 * 1024 * 1024
"""The largest ``config.json`` or index read (a 26B index is about 60 kB)."""


@dataclass(frozen=True)
class Exported:
    """The layout found (None when the folder lacks what a layout needs) and what is wrong with it."""

    layout: ModelLayout | None
    problems: list[str]
    files: dict[str, int] = field(default_factory=dict)
    """Every file of the folder and its size in bytes (what a publication must hold)."""


@dataclass(frozen=True)
class _Folder:
    """The exported folder's files (``sizes``: name -> bytes), each read a bounded request (``core.bounded``)."""

    bucket: Any
    prefix: str
    uri: str
    sizes: dict[str, int]
    call: dict[str, Any]

    def read(self, name: str, cap: int, start: int | None = None, end: int | None = None) -> bytes:
        blob = self.bucket.blob(self.prefix + name)
        return read_object(blob, cap, f"reading {self.uri}{name}", start, end, **self.call)

    def json_file(self, name: str) -> bytes | None:
        """A JSON file of the folder (``config.json``, the index), None when it has none; a larger one than a model
        has is refused."""
        if name not in self.sizes:
            return None
        if self.sizes[name] > MAX_JSON_BYTES:
            raise ModelFormatError(f"{name} is {self.sizes[name]} bytes, more than a model's {name} holds")
        return self.read(name, self.sizes[name])


def _model_files(listed: dict[str, int], hf_uri: str) -> tuple[dict[str, int], list[str]]:
    """The listed objects that are files of a model folder (name -> size), and one problem per other object."""
    problems = []
    sizes: dict[str, int] = {}
    for name, size in sorted(listed.items()):
        if not name:
            continue  # the folder's own marker
        problem = export_file_problem(name)
        if problem:
            problems.append(f"{hf_uri} holds an object that is not a file of the export: {problem}")
        else:
            sizes[name] = size
    return sizes, problems


def _weights(sizes: dict[str, int], raw_index: bytes | None) -> tuple[dict[str, str], list[str]]:
    """The index's tensor -> shard map and its shards, or (no index) the single file's empty map: the shards to
    read. A folder with neither is refused."""
    if raw_index is not None:
        weight_map = parse_index(raw_index)
        return weight_map, sorted(set(weight_map.values()))
    if SINGLE_FILE in sizes:
        return {}, [SINGLE_FILE]
    raise ModelFormatError(f"no weights: neither {INDEX_FILE} nor {SINGLE_FILE}")


def _tensors(
    folder: _Folder, shards: list[str], weight_map: dict[str, str], indexed: bool
) -> tuple[dict[str, Tensor], list[str]]:
    """Every shard's tensors from its header (two ranged reads), and where the shards and the index disagree;
    without an index (``indexed`` False) the headers fill ``weight_map``."""
    sizes, problems = folder.sizes, []
    tensors: dict[str, Tensor] = {}
    parsed: set[str] = set()
    for shard in shards:
        if shard not in sizes:
            problems.append(f"{shard}, named by {INDEX_FILE}, is missing")
            continue
        if sizes[shard] < 8:
            problems.append(f"{shard} holds {sizes[shard]} bytes: too short for a safetensors file")
            continue
        try:
            length = header_length(folder.read(shard, 8, 0, 7), shard, sizes[shard])
            found = parse_header(folder.read(shard, length, 8, 8 + length - 1), shard, sizes[shard])
        except ModelFormatError as err:
            problems.append(str(err))
            continue
        parsed.add(shard)
        for name, tensor in found.items():
            if not indexed:
                weight_map[name] = shard
            elif weight_map.get(name) != shard:
                problems.append(f"tensor {name} is in {shard} but {INDEX_FILE} puts it in {weight_map.get(name)}")
            tensors[name] = tensor
    for name, shard in sorted(weight_map.items()):
        if shard in parsed and name not in tensors:
            problems.append(f"{INDEX_FILE} puts tensor {name} in {shard}, whose header lacks it")
    return tensors, problems


def read_exported(client: Any, hf_uri: str, **call: Any) -> Exported:
    """Read the exported folder ``hf_uri`` (``gs://bucket/.../``): one listing, the JSON files, two ranged
    reads per shard."""
    bucket_name, prefix = split_uri(hf_uri)
    bucket = client.bucket(bucket_name)
    listed = {
        blob.name[len(prefix) :]: int(blob.size or 0)
        for blob in client.list_blobs(bucket_name, prefix=prefix, max_results=MAX_LISTED + 1, **call)
    }
    if len(listed) > MAX_LISTED:
        return Exported(None, [f"{hf_uri} holds more than {MAX_LISTED} objects; expected a model folder"])
    sizes, problems = _model_files(listed, hf_uri)
    files = dict(sizes)
    folder = _Folder(bucket, prefix, hf_uri, sizes, call)
    problems += [f"{name} is missing" for name in (CONFIG_FILE, *TOKENIZER_FILES) if name not in sizes]
    try:
        raw_config = folder.json_file(CONFIG_FILE)
        config = parse_config(raw_config) if raw_config is not None else {}
        raw_index = folder.json_file(INDEX_FILE)
        weight_map, shards = _weights(sizes, raw_index)
    except ModelFormatError as err:
        return Exported(None, [*problems, str(err)], files)
    if raw_index is not None and SINGLE_FILE in sizes:
        problems.append(f"{SINGLE_FILE} is beside {INDEX_FILE}: a loader reads it alone and ignores the index")
    for name in sorted(set(sizes) - set(shards) - {SINGLE_FILE}):
        if name.endswith(".safetensors"):
            problems.append(f"{name} is not named by {INDEX_FILE}")
    tensors, found = _tensors(folder, shards, weight_map, indexed=raw_index is not None)
    return Exported(ModelLayout(config, tensors, weight_map), problems + found, files)
