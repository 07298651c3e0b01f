"""The export step's second program, run in the MaxText image after ``to_huggingface`` (``python3 -c`` of this
file's text with ``core/hf_model.py``'s in place of its import, as the step runs ``checkpoint_scan.py``): makes
the export the whole base model.

    python3 complete_export.py BASE_REPO REVISION EXPORT_URI CACHE_ROOT

MaxText's ``to_huggingface`` (0.2.4 and 0.2.5, ``use_multimodal=False``) writes the trained language model only, under
``model.language_model.``, in BF16, yet its ``config.json`` declares ``Gemma4ForConditionalGeneration`` with a
``vision_config``, and Transformers builds that whole model from it (``AutoModelForCausalLM`` maps ``gemma4``
to ``Gemma4ForConditionalGeneration``): a vision tower with no weights would be initialised at random. GRPO
trains the language model only, so the rest of the model is the base's, unchanged. This program, against the
base at ``REVISION`` (the conversion's recorded commit; read once as a commit, so every file comes from that one
commit), read from the **Hub cache** entry the conversion kept (``CACHE_ROOT``, ``CacheEntry``: the Hub is asked
nothing) when it is whole, else from the Hub (``Hub``):

1. reads the base's ``config.json``, its index (or single file) and the headers of the shards it needs
   (google-cloud-storage's ranged reads of the cache entry, or ``huggingface_hub``'s session, each read bounded, see
   ``Hub.read``), and the export's (google-cloud-storage, ``core.hf_model.read_object``); every name that comes in
   is checked (``core.hf_model``: one plain file of a model folder);
2. refuses (exit 3, the step is not retried: the same input fails the same way) when MaxText's config
   disagrees with the base's on what fixes the shapes, when MaxText wrote a tensor the base lacks, or when the
   export lacks a language-model tensor MaxText should have written; the tensors it may copy are
   ``core.hf_model.copied_from_base``: everything outside the language model (vision tower, ``embed_vision``,
   audio tower, ``embed_audio``) and the language model's unused key/value tensors of shared layers;
3. copies those tensors' bytes (ranged reads of exactly their offsets) into new shards written by the
   ``safetensors`` library, ``model-base-NNNNN-of-NNNNN.safetensors`` (at most MaxText's 3 GiB each), in the
   base's dtypes; copies the base's ``config.json`` (the whole model's, its ``vision_config`` and
   ``audio_config`` included) and the base's processor files the export lacks (``core.hf_model.COPIED_FILES``);
   writes the base's ``generation_config.json`` with only the keys it means to pass on (``GENERATION_KEYS``: the
   special tokens and the base's sampling defaults), so nothing else of it (``num_beams``, a watermark, a cache,
   an unknown key) reaches every ``generate`` of the exported model; a single ``model.safetensors`` becomes
   ``model-00001-of-00001.safetensors`` (a loader reads a ``model.safetensors`` alone and ignores an index);
4. writes ``model.safetensors.index.json`` last (every tensor, MaxText's and the base's), then deletes shards
   the index does not name (left by an earlier attempt). Run again on a whole export, it changes nothing.

Exit 0 when the export is whole; 3 for a refusal (an ``entry.json`` or an object of the cache entry that is not what
the conversion wrote too: the same input fails the same way, and the line names the entry to delete); 1 when the Hub
or GCS fails (the next ``pulumi up`` runs the step again).
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# tpu-rl: core/hf_model.py is inlined here (workloads/specs/commands.py)
from core.hf_model import (
    CONFIG_FILE,
    COPIED_FILES,
    INDEX_FILE,
    SINGLE_FILE,
    ReplyTooLargeError,
    copied_from_base,
    export_file_problem,
    header_length,
    maxtext_config_differences,
    name_problem,
    parse_config,
    parse_header,
    parse_index,
    read_object,
)

# tpu-rl: end of core/hf_model.py

REFUSED = 3
COMMIT = re.compile(r"[0-9a-f]{40}")
MAX_SHARD_BYTES = 3 * 1024**3
"""MaxText's own shard size (``utils.py``: ``DEFAULT_MAX_SHARD_SIZE``)."""
MAX_FILE_BYTES = 64 * 1024 * 1024
"""The largest config, index, generation or processor file read."""
GENERATION_FILE = "generation_config.json"
GENERATION_KEYS = (
    "bos_token_id",
    "eos_token_id",
    "pad_token_id",
    "do_sample",
    "temperature",
    "top_k",
    "top_p",
    "transformers_version",
)
"""What the export's ``generation_config.json`` keeps of the base's: the special tokens a ``generate`` starts, pads
and stops with, the base's sampling defaults (Gemma's: sample, at temperature 1, top-k 64, top-p 0.95), and the
version that wrote it; each an attribute of transformers' ``GenerationConfig``
(``transformers/generation/configuration_utils.py``; tests/test_export_complete.py checks them against the
installed transformers). Any other key of the base's would change how the exported model decodes by default
(``num_beams``, ``max_length``, ``cache_implementation``, a watermark or an assistant model) or is unknown: left
out, named in the step's log."""
BASE_SHARD = "model-base-{:05d}-of-{:05d}.safetensors"
RENAMED_SINGLE = "model-00001-of-00001.safetensors"
TIMEOUT = 60.0
"""Seconds of one connect or read (the step's own deadline bounds the whole program)."""
TRIES = 4
CONSTRUCTOR = {
    "BOOL": "bool",
    "U8": "uint8",
    "I8": "int8",
    "I16": "int16",
    "U16": "uint16",
    "I32": "int32",
    "U32": "uint32",
    "I64": "int64",
    "U64": "uint64",
    "F16": "float16",
    "BF16": "bfloat16",
    "F32": "float32",
    "F64": "float64",
    "F8_E4M3": "float8_e4m3fn",
    "F8_E5M2": "float8_e5m2",
}
"""A safetensors dtype code -> the name the library's writer takes (``parse_dtype_str``)."""


class RefusedError(Exception):
    """The export cannot be made whole from this input: the same run fails the same way (exit 3)."""


class FailedError(Exception):
    """The Hub or GCS failed (exit 1: the step runs again)."""


def one_line(text: str, limit: int = 300) -> str:
    """``text`` as one log line a terminal shows as written (names and errors come from GCS and the Hub): a character
    it would act on (an escape, a bidi control) shown as ``?``."""
    return "".join(c if c.isprintable() else "?" for c in " ".join(text.split()))[:limit]


def log(message: str) -> None:
    print(f"tpu-rl export: {one_line(message, 1000)}", flush=True)


def transient(status: int) -> bool:
    return status == 429 or status >= 500


class Base:
    """The base model's files at one commit, wherever they are read from (``Hub``, ``CacheEntry``): ``files`` maps
    each plain file name to its size; ``read`` is a whole or ranged read of one, bounded."""

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
        length = header_length(self.read(shard, 8, 0, 7), shard, size)
        raw = self.read(shard, length, 8, 8 + length - 1)
        tensors = parse_header(raw, shard, size)
        entries = {name: entry for name, entry in json.loads(raw).items() if name in tensors}
        return length, tensors, entries


class Hub(Base):
    """The base repository at one commit, through ``huggingface_hub`` (its session, its auth headers from
    ``HF_TOKEN``, ``HF_ENDPOINT``)."""

    def __init__(self, repo: str, revision: str) -> None:
        from huggingface_hub import HfApi

        self.repo = repo
        self.api = HfApi(library_name="tpu-rl")
        try:
            info = self.api.model_info(repo, revision=revision, files_metadata=True, timeout=TIMEOUT)
        except Exception as err:  # noqa: BLE001 (one line: the Hub's own error class and its status)
            raise FailedError(f"cannot read {repo}@{revision} from the Hub ({type(err).__name__}: {err})") from None
        if not isinstance(info.sha, str) or not COMMIT.fullmatch(info.sha):
            raise FailedError(f"the Hub named no commit for {repo}@{revision}")
        self.commit = info.sha
        self.where = f"{repo}@{self.commit}"
        # Only plain file names of the repository's top folder can be files of the model folder; others (a
        # subfolder's files) are never read.
        self.files = {s.rfilename: int(s.size or 0) for s in info.siblings or [] if name_problem(s.rfilename) is None}

    def read(self, name: str, cap: int, start: int | None = None, end: int | None = None) -> bytes:
        """The file ``name``, or its bytes ``start``..``end`` (inclusive), holding at most ``cap`` bytes: a ranged
        read must be answered 206 with that range (a server that ignores ``Range`` answers 200 with the whole
        file: refused unread), a whole read at most ``cap`` bytes, streamed."""
        from huggingface_hub import get_session, hf_hub_url
        from huggingface_hub.utils import build_hf_headers

        url = hf_hub_url(self.repo, name, revision=self.commit, endpoint=self.api.endpoint)
        headers = build_hf_headers(library_name="tpu-rl")
        wanted = 200
        if start is not None and end is not None:
            headers["Range"] = f"bytes={start}-{end}"
            cap, wanted = min(cap, end - start + 1), 206
        what = f"{self.repo}@{self.commit[:12]}/{name}" + (f" bytes {start}-{end}" if wanted == 206 else "")
        for attempt in range(1, TRIES + 1):
            try:
                with get_session().stream(
                    "GET", url, headers=headers, follow_redirects=True, timeout=TIMEOUT
                ) as response:
                    status = response.status_code
                    if status == wanted and (
                        wanted == 200 or response.headers.get("content-range", "").startswith(f"bytes {start}-{end}/")
                    ):
                        data = bytearray()
                        for chunk in response.iter_bytes():
                            if len(data) + len(chunk) > cap:
                                raise ReplyTooLargeError(f"{what}: the Hub sent more than the {cap} bytes asked for")
                            data += chunk
                        if wanted == 206 and len(data) != cap:
                            raise FailedError(f"{what}: the Hub sent {len(data)} of the {cap} bytes asked for")
                        return bytes(data)
            except ReplyTooLargeError as err:
                raise FailedError(str(err)) from None
            except FailedError:
                raise
            except Exception as err:  # noqa: BLE001 (a dropped connection, a timeout: tried again)
                if attempt == TRIES:
                    raise FailedError(f"{what}: {type(err).__name__}: {err}") from None
                time.sleep(2**attempt)
                continue
            if status == wanted:  # 206 without the range asked for
                raise FailedError(f"{what}: the Hub answered with another byte range than the one asked for")
            if status == 200:
                raise FailedError(f"{what}: the Hub answered a ranged read with the whole file (it ignored Range)")
            if transient(status) and attempt < TRIES:
                time.sleep(2**attempt)
                continue
            if status in (401, 403):
                raise RefusedError(
                    f"{what}: HTTP {status}: HF_TOKEN cannot read {self.repo} (a gated model's licence?)"
                )
            if status == 404:
                raise RefusedError(f"{what}: HTTP 404: {self.repo} has no {name} at {self.commit}")
            raise FailedError(f"{what}: HTTP {status}")
        raise AssertionError("unreachable")


ENTRY = "entry.json"
"""A Hub cache entry's record, written last by the conversion (``base_snapshot.py``): ``{"repo", "commit", "files":
{name: size}}``."""


class CacheEntry(Base):
    """The base at one commit as the conversion kept it in the Hub cache (``base_snapshot.py`` ``cached``):
    ``<cache root><repo>/<commit>/``, whole once its ``entry.json`` (written last) names every file and its size. The
    files the completion reads (the config, the index, the shards, the processor and generation files) are all of
    them (``base_snapshot.needed``). Read by name and by range through google-cloud-storage (``storage.objects.get``:
    the export's identity may read the cache's folder, nothing more); the Hub is asked nothing."""

    def __init__(self, repo: str, commit: str, bucket: Any, prefix: str, uri: str, files: dict[str, int]) -> None:
        self.repo, self.commit, self.files = repo, commit, files
        self.bucket, self.prefix, self.uri = bucket, prefix, uri
        self.where = f"{uri} (the Hub cache of {repo}@{commit})"
        self.checked: set[str] = set()

    def read(self, name: str, cap: int, start: int | None = None, end: int | None = None) -> bytes:
        if name not in self.checked:  # the object the entry names, at the size it names
            blob = self.bucket.blob(self.prefix + name)
            blob.reload(timeout=TIMEOUT)
            if blob.size != self.files[name]:
                raise RefusedError(
                    f"{self.uri}{name} is {blob.size} bytes, not the {self.files[name]} {ENTRY} names: delete "
                    f"{self.uri} (the export then reads the Hub) and run `pulumi up` again"
                )
            self.checked.add(name)
        # A blob of its name only, as ``Export.read`` reads: the download URL the client builds, never the
        # ``mediaLink`` a reload brought (the same endpoint on GCS; the server's own address on an emulator).
        return read_object(self.bucket.blob(self.prefix + name), cap, f"{self.uri}{name}", start, end, timeout=TIMEOUT)


def cache_entry(repo: str, revision: str, cache_root: str) -> CacheEntry | None:
    """The whole Hub cache entry of ``repo`` at the commit ``revision`` under ``cache_root``, None when there is none
    (no ``entry.json``: none yet, or one cut short) or ``revision`` is not a commit; refused when its ``entry.json``
    is not that entry's."""
    from google.cloud import storage

    if not COMMIT.fullmatch(revision):
        return None
    if not cache_root.startswith("gs://") or not cache_root.endswith("/"):
        raise RefusedError(f"{cache_root} is not a gs:// folder")
    uri = f"{cache_root}{repo}/{revision}/"
    bucket_name, _, prefix = uri[len("gs://") :].partition("/")
    bucket = storage.Client().bucket(bucket_name)
    blob = bucket.blob(prefix + ENTRY)
    if not blob.exists(timeout=TIMEOUT):
        return None
    try:
        entry = json.loads(read_object(blob, MAX_FILE_BYTES, f"{uri}{ENTRY}", timeout=TIMEOUT))
    except ValueError:
        raise RefusedError(f"{uri}{ENTRY} is not JSON: delete {uri} and run `pulumi up` again") from None
    files = entry.get("files") if isinstance(entry, dict) else None
    if not (
        isinstance(entry, dict)
        and (entry.get("repo"), entry.get("commit")) == (repo, revision)
        and isinstance(files, dict)
        and all(isinstance(n, str) and name_problem(n) is None and type(s) is int and s >= 0 for n, s in files.items())
    ):
        raise RefusedError(f"{uri}{ENTRY} is not the cache entry of {repo}@{revision}: delete {uri} and run again")
    return CacheEntry(repo, revision, bucket, prefix, uri, dict(files))


def open_base(repo: str, revision: str, cache_root: str) -> Base:
    """The base at ``revision``: its Hub cache entry when the conversion kept one whole, else the Hub."""
    found = cache_entry(repo, revision, cache_root)
    if found is not None:
        log(f"the base's files from the Hub cache {found.uri}: the Hub is asked nothing")
        return found
    where = f"{cache_root}{repo}/{revision}/"
    log(f"no whole Hub cache entry {where} (no {ENTRY}: none, or one cut short): reading the Hub")
    return Hub(repo, revision)


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
            problem = export_file_problem(name)
            if problem:
                raise RefusedError(f"{uri} holds an object that is not a file of the export: {problem}")
            self.files[name] = int(blob.size or 0)

    def read(self, name: str, cap: int, start: int | None = None, end: int | None = None) -> bytes:
        return read_object(self.bucket.blob(self.prefix + name), cap, f"{self.uri}{name}", start, end, timeout=TIMEOUT)

    def file(self, name: str) -> bytes:
        if self.files[name] > MAX_FILE_BYTES:
            raise RefusedError(f"{self.uri}{name} is {self.files[name]} bytes, more than a model's {name} holds")
        return self.read(name, self.files[name])

    def tensors(self, shard: str) -> set[str]:
        size = self.files.get(shard)
        if size is None:
            raise RefusedError(f"{self.uri}{INDEX_FILE} names {shard}, which the folder lacks")
        length = header_length(self.read(shard, 8, 0, 7), shard, size)
        return set(parse_header(self.read(shard, length, 8, 8 + length - 1), shard, size))

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
"""Each kept key's value, as ``GenerationConfig`` takes it (a token id, or a list of ids to stop at, a flag, a
number, a version): a value of another shape is left out with the unknown keys."""


def generation_config(raw: bytes) -> tuple[bytes, list[str]]:
    """A ``generation_config.json`` as the export writes it: its ``GENERATION_KEYS`` of the right shape only,
    written as transformers' ``GenerationConfig.to_json_file`` writes one (indent 2, sorted keys, a final line
    end); and what was left out (keys shown as JSON strings, at most 60 characters each)."""
    try:
        config = json.loads(raw)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise RefusedError(f"{GENERATION_FILE} is not JSON") from None
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
    base_config_raw = hub.file(CONFIG_FILE)
    base_config = parse_config(base_config_raw)
    if INDEX_FILE in hub.files:
        return base_config_raw, base_config, parse_index(hub.file(INDEX_FILE))
    if SINGLE_FILE in hub.files:
        _, found, _ = hub.header(SINGLE_FILE)
        return base_config_raw, base_config, dict.fromkeys(found, SINGLE_FILE)
    raise RefusedError(f"{repo}@{hub.commit} has no safetensors weights")


def export_weights(export: Export) -> dict[str, str]:
    """Where MaxText's tensors are in the export (tensor -> shard); refused when ``to_huggingface`` did not finish."""
    if CONFIG_FILE not in export.files:
        raise RefusedError(f"{export.uri} has no {CONFIG_FILE}: to_huggingface did not finish")
    if SINGLE_FILE in export.files:  # MaxText's single file: any index beside it is an earlier attempt's
        return dict.fromkeys(export.tensors(SINGLE_FILE), SINGLE_FILE)
    if INDEX_FILE in export.files:
        return parse_index(export.file(INDEX_FILE))
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
    differences = maxtext_config_differences(parse_config(export.file(CONFIG_FILE)), base_config)
    if differences:
        raise RefusedError(f"the config.json MaxText wrote is not {repo}'s model: {'; '.join(differences[:3])}")
    extra = sorted(set(export_map) - set(base_map))
    if extra:
        raise RefusedError(
            f"MaxText wrote tensor {extra[0]}, which {repo}@{hub.commit} does not have ({len(extra)} such)"
        )
    missing = sorted(set(base_map) - set(export_map))
    unexpected = [name for name in missing if not copied_from_base(name, base_config)]
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
                        f"{repo}@{hub.commit}: {INDEX_FILE} puts {name} in {shard}, whose header lacks it"
                    )
                entries[name] = (shard, 8 + length, found[name])
    return entries


def copy_tensors(hub: Base, export: Export, entries: Entries, export_map: dict[str, str]) -> tuple[dict[str, str], int]:
    """The base's tensors ``entries`` copied into new shards of the export (``plan``, ``write_shard``; MaxText's
    single file renamed first): the whole model's weight map, and the bytes copied."""
    sizes = {name: entry["data_offsets"][1] - entry["data_offsets"][0] for name, (_, _, entry) in entries.items()}
    shards = plan(sizes)
    weight_map = dict(export_map)
    if SINGLE_FILE in export.files:
        export.rename(SINGLE_FILE, RENAMED_SINGLE)
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
    for name in COPIED_FILES:
        if name != GENERATION_FILE and name in hub.files and name not in export.files:
            export.put(name, hub.file(name))
    generation = hub if GENERATION_FILE in hub.files else export if GENERATION_FILE in export.files else None
    if generation is not None:
        written, left = generation_config(generation.file(GENERATION_FILE))
        if left:
            log(f"{GENERATION_FILE}: left out {len(left)} key(s) of the base's: {', '.join(left[:10])}")
        if GENERATION_FILE not in export.files or export.file(GENERATION_FILE) != written:
            export.put(GENERATION_FILE, written)
    if base_config_raw != export.file(CONFIG_FILE):
        export.put(CONFIG_FILE, base_config_raw)


def write_index(export: Export, export_map: dict[str, str], weight_map: dict[str, str], copied: int) -> None:
    """The index of every tensor (written only if it differs), then the shards it does not name deleted."""
    index = {
        "metadata": {"total_size": copied + export_bytes(export, export_map, weight_map)},
        "weight_map": dict(sorted(weight_map.items())),
    }
    written = json.dumps(index, indent=2).encode()
    if INDEX_FILE not in export.files or export.file(INDEX_FILE) != written:
        export.put(INDEX_FILE, written)
    named = set(weight_map.values())
    for name in sorted(export.files):
        if name.endswith(".safetensors") and name not in named and name != RENAMED_SINGLE:
            export.delete(name)
    log(f"{export.uri} is the whole model: {len(weight_map)} tensors, {len(named)} shards")


def complete(repo: str, revision: str, export_uri: str, cache_root: str) -> None:
    """The module's steps 1 to 4, in that order: the index is written last."""
    hub = open_base(repo, revision, cache_root)
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
        length = header_length(export.read(shard, 8, 0, 7), shard, size)
        total += size - 8 - length
    return total


def main(argv: list[str]) -> None:
    if len(argv) != 4:
        print("tpu-rl export: usage: complete_export.py BASE_REPO REVISION EXPORT_URI CACHE_ROOT", file=sys.stderr)
        sys.exit(REFUSED)
    try:
        complete(*argv)
    except RefusedError as err:
        print(f"tpu-rl export: {one_line(str(err), 1000)}", file=sys.stderr, flush=True)
        sys.exit(REFUSED)
    except (FailedError, ReplyTooLargeError) as err:
        print(f"tpu-rl export: {one_line(str(err), 1000)}", file=sys.stderr, flush=True)
        sys.exit(1)
    except ValueError as err:  # ModelFormatError: a file that is not what its format says, the same next time
        print(f"tpu-rl export: {one_line(str(err), 1000)}", file=sys.stderr, flush=True)
        sys.exit(REFUSED)
    except Exception as err:  # noqa: BLE001 (GCS and anything else: one line, the step runs again)
        print(f"tpu-rl export: {type(err).__name__}: {one_line(str(err))}", file=sys.stderr, flush=True)
        sys.exit(1)


if __name__ == "__main__":
    main(sys.argv[1:])
