"""The export step's second program, run in the MaxText image after ``to_huggingface`` (a file of its ConfigMap, with
``hf_model.py``, ``core/hf_model.py``, ``shown.py`` and ``tpu_rl_program.py`` beside it): makes the export the whole
base model.

    python3 complete_export.py BASE_REPO REVISION EXPORT_URI CONVERT_URI

MaxText's ``to_huggingface`` (0.2.4 and 0.2.5, ``use_multimodal=False``) writes the trained language model only, under
``model.language_model.``, in BF16, yet its ``config.json`` declares ``Gemma4ForConditionalGeneration`` with a
``vision_config``, and Transformers builds that whole model from it (``AutoModelForCausalLM`` maps ``gemma4``
to ``Gemma4ForConditionalGeneration``): a vision tower with no weights would be initialised at random. GRPO
trains the language model only, so the rest of the model is the base's, unchanged. This program, against the
base at ``REVISION`` (the conversion's recorded commit), read from the **Hub cache** objects the conversion hashed
against the Hub's values, at the generations it hashed (``CONVERT_URI``'s ``source.json``, ``Verified``): the Hub is
asked nothing, and the step runs with it switched off (``HF_HUB_OFFLINE``):

1. reads the base's ``config.json``, its index (or single file) and the headers of the shards it needs
   (google-cloud-storage's ranged reads, each bounded: ``core.hf_model.read_object``), and the export's; every name
   that comes in is checked (``core.hf_model``: one plain file of a model folder);
2. refuses (exit 3, the step is not retried: the same input fails the same way) when MaxText's config
   disagrees with the base's on what fixes the shapes, when MaxText wrote a tensor the base lacks, or when the
   export lacks a language-model tensor MaxText should have written; the tensors it may copy are
   ``core.hf_model.copied_from_base``: everything outside the language model (vision tower, ``embed_vision``,
   audio tower, ``embed_audio``) and the language model's unused key/value tensors of shared layers;
3. copies those tensors' bytes (ranged reads of exactly their offsets) into new shards written by the
   ``safetensors`` library, ``model-base-NNNNN-of-NNNNN.safetensors`` (at most MaxText's 3 GiB each), in the
   base's dtypes; copies the base's ``config.json`` (the whole model's, its ``vision_config`` and
   ``audio_config`` included) and the base's processor files the export lacks (``core.hf_model.COPIED_FILES``);
   writes the base's ``generation_config.json`` with only the keys it means to pass on (``GENERATION_VALUES``: the
   special tokens and the base's sampling defaults), so nothing else of it (``num_beams``, a watermark, a cache,
   an unknown key) reaches every ``generate`` of the exported model; a single ``model.safetensors`` becomes
   ``model-00001-of-00001.safetensors`` (a loader reads a ``model.safetensors`` alone and ignores an index);
4. writes ``model.safetensors.index.json`` last (every tensor, MaxText's and the base's), then deletes shards
   the index does not name (left by an earlier attempt). Run again on a whole export, it changes nothing.

Exit 0 when the export is whole; 3 for a refusal (a record that is not the conversion's, or a cache object that is no
longer the file the conversion verified: the same input fails the same way, and the line says what to run); 1 when
GCS fails (the next ``make up`` runs the step again).
"""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING or __package__:  # the repository's package (the tests)
    from core import hf_model
    from workloads.container import shown
    from workloads.container.tpu_rl_program import FAILED, REFUSED, FailedError, RefusedError
else:  # python3 /tpu-rl/complete_export.py: hf_model.py (core's) and its other imports are files of its ConfigMap
    import hf_model
    import shown
    from tpu_rl_program import FAILED, REFUSED, FailedError, RefusedError

MAX_SHARD_BYTES = 3 * 1024**3
"""MaxText's own shard size (``utils.py``: ``DEFAULT_MAX_SHARD_SIZE``)."""
MAX_FILE_BYTES = 64 * 1024 * 1024
"""The largest config, index, generation or processor file read."""
GENERATION_FILE = "generation_config.json"
BASE_SHARD = "model-base-{:05d}-of-{:05d}.safetensors"
RENAMED_SINGLE = "model-00001-of-00001.safetensors"
TIMEOUT = 60.0
"""Seconds of one connect or read (the step's own deadline bounds the whole program)."""
CONSTRUCTOR = {"BOOL": "bool", "BF16": "bfloat16", "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2"} | {
    f"{code}{bits}": f"{name}{bits}"
    for code, name in (("U", "uint"), ("I", "int"), ("F", "float"))
    for bits in (8, 16, 32, 64)
    if (code, bits) != ("F", 8)
}
"""A safetensors dtype code -> the name the library's writer takes (``parse_dtype_str``)."""


def log(message: str) -> None:
    """One line of the step's log; names and errors come in it from GCS and the Hub (``shown.line``)."""
    print(f"tpu-rl export: {shown.line(message, 1000)}", flush=True)


class Base:
    """The base model's files at one commit (``Verified``): ``files`` maps each plain file name to its size; ``read`` is
    a whole or ranged read of one, bounded."""

    repo: str
    commit: str
    files: dict[str, int]
    where: str

    def read(self, name: str, cap: int, start: int | None = None, end: int | None = None) -> bytes:
        raise NotImplementedError

    def file(self, name: str) -> bytes:
        """A small file of the base (a config, the index)."""
        size = self.files.get(name)
        if size is None:
            raise RefusedError(f"{self.where} has no {name}")
        if size > MAX_FILE_BYTES:
            raise RefusedError(f"{self.where}: {name} is {size} bytes, more than a model's {name} holds")
        return self.read(name, size)

    def header(self, shard: str) -> tuple[int, dict[str, Any], dict[str, Any]]:
        """A shard's header length N, its tensors (``core.hf_model.parse_header``: as the safetensors library
        reads them) and their header entries (dtype, shape, data_offsets)."""
        size = self.files.get(shard)
        if size is None:
            raise RefusedError(f"{self.where} has no {shard}, which its index names")
        length = hf_model.header_length(self.read(shard, 8, 0, 7), shard, size)
        raw = self.read(shard, length, 8, 8 + length - 1)
        tensors = hf_model.parse_header(raw, shard, size)
        entries = {name: entry for name, entry in hf_model.json_document(raw, shard).items() if name in tensors}
        return length, tensors, entries


RECORD = "source.json"
VERIFIED = "verified"
"""The conversion's record (``base_snapshot.py``: ``RECORD``, ``VERIFIED``): for each file of the base, the Hub cache
object the conversion took it from and hashed, at that object's generation, and the Hub's size and hash of it."""


@dataclass(frozen=True)
class Pin:
    """One file of the base as the conversion verified it: its object, the generation hashed, the Hub's hash."""

    bucket: str
    name: str
    generation: int
    expected: hf_model.HubFile

    @property
    def uri(self) -> str:
        return f"gs://{self.bucket}/{self.name}"


def pin_of(name: str, value: Any) -> Pin | None:
    """A ``VERIFIED`` entry of the file ``name`` as the conversion wrote it, None when it is not one."""
    if not isinstance(value, dict):
        return None
    obj, generation = value.get("object"), value.get("generation")
    expected = hf_model.recorded_file({k: v for k, v in value.items() if k not in ("object", "generation")})
    if not (isinstance(obj, str) and obj.startswith("gs://") and obj.endswith(f"/{name}") and expected is not None):
        return None
    bucket, _, object_name = obj.removeprefix("gs://").partition("/")
    if type(generation) is not int or generation <= 0 or not bucket or not object_name.removesuffix(name):
        return None
    return Pin(bucket, object_name, generation, expected)


class Verified(Base):
    """The base at the converted commit as the conversion verified it (``VERIFIED``): each file the Hub cache object
    the conversion hashed, read by name and by range at that generation (a generation's bytes never change: GCS
    serves it or answers 404, ``generation`` of the JSON API's ``objects.get``) through google-cloud-storage (the
    export's identity may read the conversion's output and the cache's folder, nothing more). The Hub is asked
    nothing: the step runs with ``HF_HUB_OFFLINE``. An object replaced since (its generation gone: the cache's writer
    fetched it again) is hashed whole once (``core.hf_model.Digest``, bounded memory) and read at its new generation
    only if it is still the file the Hub names."""

    def __init__(self, repo: str, commit: str, pins: dict[str, Pin], record: str) -> None:
        from google.cloud import storage

        self.repo, self.commit, self.pins, self.record = repo, commit, pins, record
        self.files = {name: pin.expected.size for name, pin in pins.items()}
        self.where = f"{repo}@{commit} as the conversion verified it"
        self.client = storage.Client()

    def read(self, name: str, cap: int, start: int | None = None, end: int | None = None) -> bytes:
        from google.api_core.exceptions import NotFound

        pin = self.pins[name]
        blob = self.client.bucket(pin.bucket).blob(pin.name, generation=pin.generation)
        try:
            return hf_model.read_object(blob, cap, pin.uri, start, end, timeout=TIMEOUT)
        except NotFound:
            self.pins[name] = pin = self.again(pin)
        blob = self.client.bucket(pin.bucket).blob(pin.name, generation=pin.generation)
        return hf_model.read_object(blob, cap, pin.uri, start, end, timeout=TIMEOUT)

    def again(self, pin: Pin) -> Pin:
        """The object of ``pin`` at its current generation, once its bytes hash to the Hub's value (refused else)."""
        bucket = self.client.bucket(pin.bucket)
        found = bucket.get_blob(pin.name, timeout=TIMEOUT)
        again = f"run the conversion again: delete {self.record} and run `make up STACK=<stack>` again"
        if found is None:
            raise RefusedError(f"{pin.uri}, which the conversion verified, is gone from the Hub cache: {again}")
        digest = hf_model.Digest(pin.expected)
        if found.size == pin.expected.size:  # else named by its size, unread
            bucket.blob(pin.name, generation=found.generation).download_to_file(digest, timeout=TIMEOUT)
        else:
            digest.size = int(found.size or 0)
        problem = digest.problem(pin.uri)
        if problem is not None:
            raise RefusedError(f"{problem}: the Hub cache changed since the conversion verified it; {again}")
        log(
            f"{pin.uri} was replaced since the conversion: its {pin.expected.kind} checked again, read at its new "
            "generation"
        )
        return Pin(pin.bucket, pin.name, int(found.generation), pin.expected)


def verified_base(repo: str, revision: str, convert_uri: str) -> Verified:
    """The base at ``revision`` as the conversion under ``convert_uri`` verified it (its record's ``VERIFIED``);
    refused (exit 3: the same record fails every retry) when the record is not of ``repo`` at that commit or names
    no verified object of a file."""
    from google.api_core.exceptions import NotFound
    from google.cloud import storage

    if not convert_uri.startswith("gs://") or not convert_uri.endswith("/"):
        raise RefusedError(f"{convert_uri} is not a gs:// folder")
    uri = convert_uri + RECORD
    bucket_name, _, prefix = convert_uri.removeprefix("gs://").partition("/")
    again = f"delete {uri} and run `make up STACK=<stack>` again (the conversion runs again)"
    try:
        record = hf_model.json_document(
            hf_model.read_object(
                storage.Client().bucket(bucket_name).blob(prefix + RECORD), MAX_FILE_BYTES, uri, timeout=TIMEOUT
            ),
            uri,
        )
    except NotFound:
        raise RefusedError(f"{uri} is missing: the conversion did not finish") from None
    except (hf_model.JsonDocumentError, hf_model.ReplyTooLargeError):
        record = None
    verified = record.get(VERIFIED) if isinstance(record, dict) else None
    pins = {n: pin_of(n, v) for n, v in verified.items()} if isinstance(verified, dict) else {}
    if not (
        isinstance(record, dict)
        and (record.get("repo"), record.get("commit")) == (repo, revision)
        and pins
        and all(hf_model.name_problem(n) is None and pin is not None for n, pin in pins.items())
    ):
        raise RefusedError(
            f"{uri} is not a record of {repo}@{revision} with the files the conversion verified: {again}"
        )
    return Verified(repo, revision, {n: pin for n, pin in pins.items() if pin is not None}, uri)


class Export:
    """The exported folder in GCS (google-cloud-storage)."""

    def __init__(self, uri: str) -> None:
        from google.cloud import storage

        if not uri.startswith("gs://") or not uri.endswith("/"):
            raise RefusedError(f"{uri} is not a gs:// folder")
        self.uri = uri
        bucket_name, _, self.prefix = uri[len("gs://") :].partition("/")
        self.client = storage.Client()
        self.bucket = self.client.bucket(bucket_name)
        self.files: dict[str, int] = {}
        for blob in self.client.list_blobs(bucket_name, prefix=self.prefix, timeout=TIMEOUT):
            name = blob.name[len(self.prefix) :]
            if not name:
                continue  # the folder's own marker
            problem = hf_model.export_file_problem(name)
            if problem:
                raise RefusedError(f"{uri} holds an object that is not a file of the export: {problem}")
            self.files[name] = int(blob.size or 0)

    def read(self, name: str, cap: int, start: int | None = None, end: int | None = None) -> bytes:
        return hf_model.read_object(
            self.bucket.blob(self.prefix + name), cap, f"{self.uri}{name}", start, end, timeout=TIMEOUT
        )

    def file(self, name: str) -> bytes:
        if self.files[name] > MAX_FILE_BYTES:
            raise RefusedError(f"{self.uri}{name} is {self.files[name]} bytes, more than a model's {name} holds")
        return self.read(name, self.files[name])

    def tensors(self, shard: str) -> set[str]:
        size = self.files.get(shard)
        if size is None:
            raise RefusedError(f"{self.uri}{hf_model.INDEX_FILE} names {shard}, which the folder lacks")
        length = hf_model.header_length(self.read(shard, 8, 0, 7), shard, size)
        return set(hf_model.parse_header(self.read(shard, length, 8, 8 + length - 1), shard, size))

    def put(
        self, name: str, data: bytes | None = None, path: str | None = None, kind: str = "application/json"
    ) -> None:
        blob = self.bucket.blob(self.prefix + name)
        if path is not None:
            blob.upload_from_filename(path, content_type="application/octet-stream", timeout=TIMEOUT * 10)
        else:
            blob.upload_from_string(data or b"", content_type=kind, timeout=TIMEOUT)
        log(f"wrote {self.uri}{name}")

    def rename(self, old: str, new: str) -> None:
        blob = self.bucket.blob(self.prefix + old)
        self.bucket.copy_blob(blob, self.bucket, self.prefix + new, timeout=TIMEOUT * 10)
        blob.delete(timeout=TIMEOUT)
        self.files[new] = self.files.pop(old)
        log(f"renamed {old} to {new}")

    def delete(self, name: str) -> None:
        self.bucket.blob(self.prefix + name).delete(timeout=TIMEOUT)
        log(f"deleted {self.uri}{name}, which the index does not name")


def write_shard(path: str, tensors: dict[str, tuple[str, list[int], bytearray]]) -> None:
    """One safetensors file written by the library: ``serialize_file`` with ``TensorSpec`` buffers (0.8) or
    with the ``{"dtype", "shape", "data"}`` dictionaries of earlier releases."""
    import ctypes

    import safetensors

    for name, (dtype, _shape, _data) in tensors.items():
        if dtype not in CONSTRUCTOR:
            raise RefusedError(f"tensor {name} is {dtype}, which this program cannot copy")
    spec = getattr(safetensors, "TensorSpec", None)
    if spec is None:
        flat = {n: {"dtype": CONSTRUCTOR[d], "shape": s, "data": bytes(b)} for n, (d, s, b) in tensors.items()}
        safetensors.serialize_file(flat, path, metadata={"format": "pt"})  # type: ignore[arg-type]
        return
    keep, specs = [], {}
    for name, (dtype, shape, data) in tensors.items():
        buffer = (ctypes.c_char * len(data)).from_buffer(data) if data else None
        keep.append(buffer)
        address = ctypes.addressof(buffer) if buffer is not None else 0
        specs[name] = spec(dtype=CONSTRUCTOR[dtype], shape=shape, data_ptr=address, data_len=len(data))
    safetensors.serialize_file(specs, path, metadata={"format": "pt"})
    del keep


def _token_ids(value: Any) -> bool:
    ids = value if isinstance(value, list) and value else [value]
    return all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in ids)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0


GENERATION_VALUES = {
    "bos_token_id": _token_ids,
    "eos_token_id": _token_ids,
    "pad_token_id": _token_ids,
    "do_sample": lambda value: isinstance(value, bool),
    "temperature": _number,
    "top_k": lambda value: isinstance(value, int) and not isinstance(value, bool) and value >= 0,
    "top_p": _number,
    "transformers_version": lambda value: isinstance(value, str) and len(value) <= 64 and value.isprintable(),
}
"""What the export's ``generation_config.json`` keeps of the base's: the special tokens a ``generate`` starts, pads
and stops with, the base's sampling defaults (Gemma's: sample, at temperature 1, top-k 64, top-p 0.95), and the
version that wrote it; each an attribute of transformers' ``GenerationConfig``
(``transformers/generation/configuration_utils.py``; tests/test_export_complete.py checks them against the
installed transformers). Any other key of the base's would change how the exported model decodes by default
(``num_beams``, ``max_length``, ``cache_implementation``, a watermark or an assistant model) or is unknown: left
out, named in the step's log.

Each value as ``GenerationConfig`` takes it (a token id, or a list of ids to stop at, a flag, a number, a version): a
value of another shape is left out with the unknown keys."""


def generation_config(raw: bytes) -> tuple[bytes, list[str]]:
    """A ``generation_config.json`` as the export writes it: its ``GENERATION_VALUES`` keys of the right shape only,
    written as transformers' ``GenerationConfig.to_json_file`` writes one (indent 2, sorted keys, a final line
    end); and what was left out (keys shown as JSON strings, at most 60 characters each)."""
    try:
        config = hf_model.json_document(raw, GENERATION_FILE)
    except hf_model.JsonDocumentError as err:
        raise RefusedError(str(err)) from None
    if not isinstance(config, dict):
        raise RefusedError(f"{GENERATION_FILE} is not an object")
    kept = {key: value for key, value in config.items() if key in GENERATION_VALUES and GENERATION_VALUES[key](value)}
    left = [json.dumps(key)[:60] for key in sorted(set(config) - set(kept))]
    return (json.dumps(kept, indent=2, sort_keys=True) + "\n").encode(), left


def plan(sizes: dict[str, int]) -> list[list[str]]:
    """Tensors into shards of at most ``MAX_SHARD_BYTES`` each, in name order (MaxText's ``shard_checkpoint``)."""
    shards: list[list[str]] = [[]]
    used = 0
    for name in sorted(sizes):
        if shards[-1] and used + sizes[name] > MAX_SHARD_BYTES:
            shards.append([])
            used = 0
        shards[-1].append(name)
        used += sizes[name]
    return shards if shards[0] else []


Entries = dict[str, tuple[str, int, dict[str, Any]]]
"""A base tensor -> (its shard, where the shard's data starts, its header entry: dtype, shape, data offsets)."""


def base_weights(hub: Base, repo: str) -> tuple[bytes, dict[str, Any], dict[str, str]]:
    """The base's ``config.json`` (as written and parsed) and where its tensors are (tensor -> shard)."""
    base_config_raw = hub.file(hf_model.CONFIG_FILE)
    base_config = hf_model.parse_config(base_config_raw)
    if hf_model.INDEX_FILE in hub.files:
        return base_config_raw, base_config, hf_model.parse_index(hub.file(hf_model.INDEX_FILE))
    if hf_model.SINGLE_FILE in hub.files:
        _, found, _ = hub.header(hf_model.SINGLE_FILE)
        return base_config_raw, base_config, dict.fromkeys(found, hf_model.SINGLE_FILE)
    raise RefusedError(f"{repo}@{hub.commit} has no safetensors weights")


def export_weights(export: Export) -> dict[str, str]:
    """Where MaxText's tensors are in the export (tensor -> shard); refused when ``to_huggingface`` did not finish."""
    if hf_model.CONFIG_FILE not in export.files:
        raise RefusedError(f"{export.uri} has no {hf_model.CONFIG_FILE}: to_huggingface did not finish")
    if hf_model.SINGLE_FILE in export.files:  # MaxText's single file: any index beside it is an earlier attempt's
        return dict.fromkeys(export.tensors(hf_model.SINGLE_FILE), hf_model.SINGLE_FILE)
    if hf_model.INDEX_FILE in export.files:
        return hf_model.parse_index(export.file(hf_model.INDEX_FILE))
    raise RefusedError(f"{export.uri} has no weights: to_huggingface did not finish")


def missing_tensors(
    repo: str,
    hub: Base,
    export: Export,
    base_config: dict[str, Any],
    base_map: dict[str, str],
    export_map: dict[str, str],
) -> list[str]:
    """The base's tensors the export lacks, each one the export may copy (``copied_from_base``); refused when
    MaxText's config is not the base's model, when MaxText wrote a tensor the base lacks or left one out."""
    differences = hf_model.maxtext_config_differences(
        hf_model.parse_config(export.file(hf_model.CONFIG_FILE)), base_config
    )
    if differences:
        raise RefusedError(f"the config.json MaxText wrote is not {repo}'s model: {'; '.join(differences[:3])}")
    extra = sorted(set(export_map) - set(base_map))
    if extra:
        raise RefusedError(
            f"MaxText wrote tensor {extra[0]}, which {repo}@{hub.commit} does not have ({len(extra)} such)"
        )
    missing = sorted(set(base_map) - set(export_map))
    unexpected = [name for name in missing if not hf_model.copied_from_base(name, base_config)]
    if unexpected:
        raise RefusedError(
            f"the export lacks tensor {unexpected[0]} of the base's language model, which MaxText should have "
            f"written ({len(unexpected)} such): refusing to fill the trained model with the base's"
        )
    return missing


def base_entries(repo: str, hub: Base, base_map: dict[str, str], missing: list[str]) -> Entries:
    """Where each missing tensor's bytes are in the base: the headers of the shards that hold them."""
    entries: Entries = {}
    for shard in sorted({base_map[name] for name in missing}):
        length, _tensors, found = hub.header(shard)
        for name in missing:
            if base_map[name] == shard:
                if name not in found:
                    raise RefusedError(
                        f"{repo}@{hub.commit}: {hf_model.INDEX_FILE} puts {name} in {shard}, whose header lacks it"
                    )
                entries[name] = (shard, 8 + length, found[name])
    return entries


def copy_tensors(hub: Base, export: Export, entries: Entries, export_map: dict[str, str]) -> tuple[dict[str, str], int]:
    """The base's tensors ``entries`` copied into new shards of the export (``plan``, ``write_shard``; MaxText's
    single file renamed first): the whole model's weight map, and the bytes copied."""
    sizes = {name: entry["data_offsets"][1] - entry["data_offsets"][0] for name, (_, _, entry) in entries.items()}
    shards = plan(sizes)
    weight_map = dict(export_map)
    if hf_model.SINGLE_FILE in export.files:
        export.rename(hf_model.SINGLE_FILE, RENAMED_SINGLE)
        weight_map = dict.fromkeys(export_map, RENAMED_SINGLE)
    with tempfile.TemporaryDirectory(prefix="tpu-rl-export-") as work:
        for number, names in enumerate(shards, 1):
            target = BASE_SHARD.format(number, len(shards))
            tensors = {}
            for name in names:
                shard, start, entry = entries[name]
                begin, end = entry["data_offsets"]
                data = hub.read(shard, end - begin, start + begin, start + end - 1) if end > begin else b""
                tensors[name] = (str(entry["dtype"]), [int(n) for n in entry["shape"]], bytearray(data))
            path = str(Path(work) / target)
            write_shard(path, tensors)
            del tensors
            export.put(target, path=path)
            Path(path).unlink()
            weight_map.update(dict.fromkeys(names, target))
    log(f"copied {len(entries)} tensors of the base ({sum(sizes.values())} bytes) into {len(shards)} shard(s)")
    return weight_map, sum(sizes.values())


def copy_files(hub: Base, export: Export, base_config_raw: bytes) -> None:
    """The base's processor files the export lacks, its ``generation_config.json`` as ``generation_config`` keeps
    it (or the export's own, when the base has none) and its ``config.json``, each written only if it differs."""
    for name in hf_model.COPIED_FILES:
        if name != GENERATION_FILE and name in hub.files and name not in export.files:
            export.put(name, hub.file(name))
    generation = hub if GENERATION_FILE in hub.files else export if GENERATION_FILE in export.files else None
    if generation is not None:
        written, left = generation_config(generation.file(GENERATION_FILE))
        if left:
            log(f"{GENERATION_FILE}: left out {len(left)} key(s) of the base's: {', '.join(left[:10])}")
        if GENERATION_FILE not in export.files or export.file(GENERATION_FILE) != written:
            export.put(GENERATION_FILE, written)
    if base_config_raw != export.file(hf_model.CONFIG_FILE):
        export.put(hf_model.CONFIG_FILE, base_config_raw)


def write_index(export: Export, export_map: dict[str, str], weight_map: dict[str, str], copied: int) -> None:
    """The index of every tensor (written only if it differs), then the shards it does not name deleted."""
    index = {
        "metadata": {"total_size": copied + export_bytes(export, export_map, weight_map)},
        "weight_map": dict(sorted(weight_map.items())),
    }
    written = json.dumps(index, indent=2).encode()
    if hf_model.INDEX_FILE not in export.files or export.file(hf_model.INDEX_FILE) != written:
        export.put(hf_model.INDEX_FILE, written)
    named = set(weight_map.values())
    for name in sorted(export.files):
        if name.endswith(".safetensors") and name not in named and name != RENAMED_SINGLE:
            export.delete(name)
    log(f"{export.uri} is the whole model: {len(weight_map)} tensors, {len(named)} shards")


def complete(repo: str, revision: str, export_uri: str, convert_uri: str) -> None:
    """The module's steps 1 to 4, in that order: the index is written last."""
    hub = verified_base(repo, revision, convert_uri)
    log(f"the base is {repo}@{revision} (commit {hub.commit})")
    base_config_raw, base_config, base_map = base_weights(hub, repo)
    export = Export(export_uri)
    export_map = export_weights(export)
    missing = missing_tensors(repo, hub, export, base_config, base_map, export_map)
    entries = base_entries(repo, hub, base_map, missing)
    weight_map, copied = copy_tensors(hub, export, entries, export_map)
    copy_files(hub, export, base_config_raw)
    write_index(export, export_map, weight_map, copied)


def export_bytes(export: Export, export_map: dict[str, str], weight_map: dict[str, str]) -> int:
    """The bytes of MaxText's tensors (its shards' data, headers left out: what ``total_size`` counts)."""
    total = 0
    for shard in sorted({weight_map[name] for name in export_map}):
        size = export.files[shard]
        length = hf_model.header_length(export.read(shard, 8, 0, 7), shard, size)
        total += size - 8 - length
    return total


def main(argv: list[str]) -> None:
    if len(argv) != 4:
        print("tpu-rl export: usage: complete_export.py BASE_REPO REVISION EXPORT_URI CONVERT_URI", file=sys.stderr)
        sys.exit(REFUSED)
    try:
        complete(*argv)
    except RefusedError as err:
        print(f"tpu-rl export: {shown.line(err, 1000)}", file=sys.stderr, flush=True)
        sys.exit(REFUSED)
    except (FailedError, hf_model.ReplyTooLargeError) as err:
        print(f"tpu-rl export: {shown.line(err, 1000)}", file=sys.stderr, flush=True)
        sys.exit(FAILED)
    except (hf_model.ModelFormatError, ValueError) as err:  # a file not what its format says: the same next time
        print(f"tpu-rl export: {shown.line(err, 1000)}", file=sys.stderr, flush=True)
        sys.exit(REFUSED)
    except Exception as err:  # noqa: BLE001 (GCS and anything else: one line, the step runs again)
        print(f"tpu-rl export: {type(err).__name__}: {shown.line(err)}", file=sys.stderr, flush=True)
        sys.exit(FAILED)


if __name__ == "__main__":
    main(sys.argv[1:])
