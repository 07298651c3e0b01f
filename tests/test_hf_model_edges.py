"""The edges of ``core/hf_model.py`` its limits leave: a header's ``__metadata__`` and entries that are no objects,
a header Python's JSON cannot read, the names of an empty and a pathed shard, an open-ended read, a recorded Git
blob id, and the messages of a digest read back in chunks."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from core import hf_model
from core.hf_model import (
    CHUNK,
    MAX_DESCRIBED,
    Digest,
    HubFile,
    ModelFormatError,
    Tensor,
    file_problem,
    name_problem,
    parse_header,
    parse_index,
    read_object,
    recorded_file,
    shard_problem,
)

pytestmark = pytest.mark.pure

SHA = "ab" * 32
BLOB = "cd" * 20


def _refusal(raw: bytes, file_size: int) -> str:
    with pytest.raises(ModelFormatError) as refused:
        parse_header(raw, "s", file_size)
    return str(refused.value)


# ---------------------------------------------------------------------------------------------
# What a header describes


def test_metadata_describes_no_data_whatever_it_holds():
    """``__metadata__`` is a map of strings: offsets in it are refused by the library, never counted as data (were
    they counted, a header would describe more than 1 TiB and be called a shard cut short)."""
    tensor = {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}
    raw = json.dumps({"__metadata__": {"data_offsets": [0, MAX_DESCRIBED]}, "w": tensor}).encode()
    assert _refusal(raw, 8 + len(raw) + 2) == (
        "s: the safetensors library refuses its header (invalid JSON in header: invalid type: sequence, expected a "
        "string at line 1 column 34)"
    )


def test_an_entry_that_is_no_object_is_left_to_the_library():
    raw = b'{"w": [0, 2]}'
    assert _refusal(raw, 8 + len(raw)) == (
        "s: the safetensors library refuses its header (invalid JSON in header: invalid type: integer `0`, expected "
        "string or map at line 1 column 13)"
    )


@pytest.mark.parametrize("file_size", [0, 11, 20], ids=["a-shorter-file", "the-header's-size", "a-longer-file"])
def test_a_header_that_is_no_object_is_refused_for_its_json_whatever_the_files_size(file_size):
    assert _refusal(b"[1]", file_size) == (
        "s: the safetensors library refuses its header (invalid JSON in header: invalid type: sequence, expected "
        "struct HashMetadata at line 1 column 0)"
    )


@pytest.mark.parametrize(("file_size", "judged"), [(5, 11), (11, 11), (20, 20)])
def test_a_header_that_is_no_object_is_refused_even_where_the_library_would_take_it(monkeypatch, file_size, judged):
    """A header Python's JSON cannot read as an object is refused whatever the library says of it; the library
    judges a file holding the whole header, of the shard's size when that is larger."""
    asked: list[Any] = []

    def accepting(raw: bytes, size: int, file_name: str) -> dict[str, Tensor]:
        asked.append(size)
        return {}

    monkeypatch.setattr(hf_model, "_library_read", accepting)
    assert _refusal(b"[1]", file_size) == "s: its safetensors header is not a JSON object"
    assert asked == [judged]


# ---------------------------------------------------------------------------------------------
# Names


def test_an_empty_name_is_named_so():
    assert name_problem("") == "an empty name"
    assert shard_problem("") == "an empty name"


def test_a_shard_is_refused_for_its_names_first_fault():
    assert shard_problem("a/b.safetensors") == "the name 'a/b.safetensors' is a path, not a file of the folder"
    assert shard_problem(".b.safetensors") == "the name '.b.safetensors' is not a plain file name"
    index = json.dumps({"weight_map": {"w": "../w.safetensors"}}).encode()
    with pytest.raises(ModelFormatError) as refused:
        parse_index(index)
    assert str(refused.value) == (
        "model.safetensors.index.json names a shard that cannot be one: "
        "the name '../w.safetensors' is a path, not a file of the folder"
    )


# ---------------------------------------------------------------------------------------------
# Reads


class _Blob:
    """A GCS object of ``size`` bytes as ``Blob.download_to_file`` serves a range of it, each call kept."""

    def __init__(self, size: int) -> None:
        self.body = bytes(range(size))
        self.calls: list[dict[str, Any]] = []

    def download_to_file(self, sink: Any, start: int | None = None, end: int | None = None, **call: Any) -> None:
        self.calls.append({"start": start, "end": end, **call})
        sink.write(self.body[start or 0 : None if end is None else end + 1])


def test_an_open_ended_read_holds_its_cap():
    blob = _Blob(20)
    assert read_object(blob, 15, "the tail", start=5) == bytes(range(5, 20))
    assert blob.calls == [{"start": 5, "end": None, "checksum": None}]


def test_a_read_to_an_end_from_the_start_holds_its_cap():
    blob = _Blob(20)
    assert read_object(blob, 20, "the head", end=9) == bytes(range(10))
    assert blob.calls == [{"start": None, "end": 9}], "no range start: the library's checksum kept"


# ---------------------------------------------------------------------------------------------
# The Hub's digests


def test_a_recorded_file_of_git_names_its_blob_id():
    assert recorded_file({"size": 3, "blobId": BLOB}) == HubFile(3, "blobId", BLOB)
    assert recorded_file({"size": 3, "blobId": "x"}) is None


def test_a_digest_is_the_hubs_unless_told_whose():
    digest = Digest(HubFile(1, "sha256", SHA))
    assert digest.write(b"x") == 1
    found = hashlib.sha256(b"x").hexdigest()
    assert digest.problem("f") == f"f is sha256 {found}, not the Hub's 1 bytes, sha256 {SHA}"
    assert digest.problem("f", "the cache's") == f"f is sha256 {found}, not the cache's 1 bytes, sha256 {SHA}"


def test_a_file_is_read_back_in_chunks_of_1_mib(tmp_path, monkeypatch):
    """Bounded memory whatever the file's size: the hash is fed one chunk at a time."""
    path = tmp_path / "f"
    data = b"q" * (CHUNK + 1)
    path.write_bytes(data)
    fed: list[int] = []
    write = Digest.write

    def counted(self: Digest, chunk: bytes) -> int:
        fed.append(len(chunk))
        return write(self, chunk)

    monkeypatch.setattr(Digest, "write", counted)
    assert file_problem(path, HubFile(CHUNK + 1, "sha256", hashlib.sha256(data).hexdigest()), "f") is None
    assert fed == [CHUNK, 1]


def test_a_header_nested_past_pythons_limit_is_refused_by_the_library_not_a_crash():
    """A corrupt shard of deeply nested brackets (well under the header's size limit) is one refusal in the
    library's words, never a ``RecursionError`` out of the reader."""
    raw = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(hf_model.ModelFormatError):
        hf_model.parse_header(raw, "model.safetensors", 8 + len(raw))
