"""Every bound ``core/hf_model.py`` enforces, at its limit (taken) and one past it (refused or cut): a safetensors
header's length and the size it describes, a shard's size against its header, the library's reason shown, a file's
and a shard's name, the bytes a read holds, the Hub's sizes and digests, the kv-shared layers, the values shown."""

from __future__ import annotations

import hashlib
import json
import struct
import tempfile
from typing import Any

import pytest

from core import hf_model
from core.hf_model import (
    CHUNK,
    MAX_DESCRIBED,
    MAX_HEADER_BYTES,
    BoundedBuffer,
    HubFile,
    ModelFormatError,
    ReplyTooLargeError,
    Tensor,
    export_file_problem,
    file_problem,
    header_length,
    hub_file,
    maxtext_config_differences,
    name_problem,
    parse_header,
    read_object,
    recorded_file,
    shard_problem,
    unused_by_the_model,
)

pytestmark = pytest.mark.pure

AT_LIMIT_AND_PAST = pytest.mark.parametrize("past", [0, 1], ids=["at-limit", "one-past"])


# ---------------------------------------------------------------------------------------------
# A header's length


@AT_LIMIT_AND_PAST
def test_a_shard_of_8_bytes_has_a_length_and_one_shorter_has_none(past):
    first = struct.pack("<Q", 2)[: 8 - past]
    if past:
        with pytest.raises(ModelFormatError, match=r"^s holds 7 bytes: too short for a safetensors file$"):
            header_length(first, "s", 100)
    else:
        assert header_length(first + b"{}", "s", 100) == 2


@AT_LIMIT_AND_PAST
def test_a_header_of_2_bytes_is_read_and_one_shorter_is_refused(past):
    length = 2 - past
    if past:
        with pytest.raises(ModelFormatError, match=r"^s: its header length 1 does not fit the file of 100 bytes$"):
            header_length(struct.pack("<Q", length), "s", 100)
    else:
        assert header_length(struct.pack("<Q", length), "s", 100) == 2


@AT_LIMIT_AND_PAST
def test_a_header_at_the_librarys_limit_is_read_and_one_byte_more_is_refused(past):
    length = MAX_HEADER_BYTES + past
    size = 8 + MAX_HEADER_BYTES + 10
    if past:
        with pytest.raises(ModelFormatError, match=rf"header length {length} does not fit the file of {size} bytes"):
            header_length(struct.pack("<Q", length), "s", size)
    else:
        assert header_length(struct.pack("<Q", length), "s", size) == length


@AT_LIMIT_AND_PAST
def test_a_header_that_ends_at_the_files_end_is_read_and_one_byte_past_is_refused(past):
    size = 8 + 50 - past
    if past:
        with pytest.raises(ModelFormatError, match=rf"header length 50 does not fit the file of {size} bytes"):
            header_length(struct.pack("<Q", 50), "s", size)
    else:
        assert header_length(struct.pack("<Q", 50), "s", size) == 50


# ---------------------------------------------------------------------------------------------
# The size a header describes, against the shard's


def _header(end: int) -> bytes:
    """A header of one tensor of F32 values, its data ending at ``end`` (a multiple of 4)."""
    info = {"dtype": "F32", "shape": [end // 4], "data_offsets": [0, end]}
    return json.dumps({"__metadata__": {"format": "pt"}, "w": info}).encode()


@pytest.mark.parametrize("delta", [-1, 0, 1], ids=["a-byte-short", "exact", "a-byte-over"])
def test_a_shard_is_exactly_the_size_its_header_describes(delta):
    raw = _header(16)
    described = 8 + len(raw) + 16
    if not delta:
        assert parse_header(raw, "s", described) == {"w": Tensor("F32", (4,))}
        return
    why = "the shard is cut short" if delta < 0 else "it holds bytes no tensor accounts for"
    with pytest.raises(ModelFormatError) as refused:
        parse_header(raw, "s", described + delta)
    assert str(refused.value) == f"s is {described + delta} bytes but its header describes {described}: {why}"


@AT_LIMIT_AND_PAST
def test_a_header_may_describe_a_file_of_1_tib_and_no_more(monkeypatch, past):
    """A header describing exactly ``MAX_DESCRIBED`` bytes is judged by the library (here a stand-in: a sparse file of
    1 TiB is not what a test should make); one byte more is a shard cut short, and the library is not asked."""
    asked: list[int] = []

    def library(raw: bytes, size: int, file_name: str) -> dict[str, Tensor]:
        asked.append(size)
        return {"w": Tensor("U8", (1,))}

    monkeypatch.setattr(hf_model, "_library_read", library)

    def header(end: int) -> bytes:
        return json.dumps({"w": {"dtype": "U8", "shape": [end], "data_offsets": [0, end]}}).encode()

    end = MAX_DESCRIBED + past - 8 - len(header(MAX_DESCRIBED))  # the header's length as the end's digits make it
    raw = header(end)
    described = 8 + len(raw) + end
    assert described == MAX_DESCRIBED + past
    if past:
        with pytest.raises(ModelFormatError, match=rf"^s is 10 bytes but its header describes {described}: the shard"):
            parse_header(raw, "s", 10)
        assert asked == []
    else:
        assert parse_header(raw, "s", described) == {"w": Tensor("U8", (1,))}
        assert asked == [MAX_DESCRIBED]


def _library_reason(raw: bytes, size: int) -> str:
    """What the safetensors library says of a file of ``size`` bytes with this header, one line."""
    from safetensors import SafetensorError, safe_open

    with tempfile.NamedTemporaryFile(suffix=".safetensors") as file:
        file.write(struct.pack("<Q", len(raw)) + raw)
        file.truncate(size)
        file.flush()
        with pytest.raises(SafetensorError) as refused:
            safe_open(file.name, framework="numpy")
    return " ".join(str(refused.value).removeprefix(hf_model.LIBRARY_PREFIX).split())


@AT_LIMIT_AND_PAST
def test_the_librarys_reason_is_shown_in_200_characters(past):
    """The library names the value it refuses: a shape of a string of 116 characters makes its reason 200 characters
    long, shown whole; one more makes it 201, of which 200 are shown."""
    raw = json.dumps({"w": {"dtype": "F32", "shape": ["s" * (116 + past)], "data_offsets": [0, 4]}}).encode()
    reason = _library_reason(raw, 8 + len(raw) + 4)
    assert len(reason) == 200 + past, "the library's wording moved the boundary: pick the string's length again"
    with pytest.raises(ModelFormatError) as refused:
        parse_header(raw, "s", 8 + len(raw) + 4)
    assert str(refused.value) == f"s: the safetensors library refuses its header ({reason[:200]})"


def test_an_offset_of_0_counts_and_a_negative_one_does_not():
    raw = json.dumps({"w": {"dtype": "U8", "shape": [0], "data_offsets": [0, 0]}, "v": {"data_offsets": [-1, 9]}})
    assert hf_model._described_size(json.loads(raw), len(raw)) == 8 + len(raw)
    assert hf_model._described_size(json.loads(_header(8)), len(_header(8))) == 8 + len(_header(8)) + 8


# ---------------------------------------------------------------------------------------------
# Names


@AT_LIMIT_AND_PAST
def test_a_name_of_255_characters_is_a_file_and_one_longer_is_not(past):
    name = "n" * (255 + past)
    expected = f"the name {'n' * 80!r}... is longer than 255 characters" if past else None
    assert name_problem(name) == expected


def test_a_name_is_shown_in_80_characters_its_control_characters_as_question_marks():
    shown = "?" + "c" * 79
    assert name_problem("\x01" + "c" * 100) == f"the name {shown!r} holds a control character"
    assert name_problem("d/" + "e" * 78) == f"the name {'d/' + 'e' * 78!r} is a path, not a file of the folder"
    assert name_problem("d/" + "e" * 79) == f"the name {'d/' + 'e' * 78!r} is a path, not a file of the folder"


@AT_LIMIT_AND_PAST
def test_a_shards_name_has_at_most_201_characters_before_its_suffix(past):
    name = "m" + "x" * (200 + past) + ".safetensors"
    assert len(name) <= 255, "within a file's name"
    expected = f"{name!r} is not a safetensors shard's name" if past else None
    assert shard_problem(name) == expected
    assert export_file_problem(name) == (f"{name!r} is not a file of a model folder" if past else None)


# ---------------------------------------------------------------------------------------------
# What a read holds


@AT_LIMIT_AND_PAST
def test_a_buffer_holds_its_cap_and_refuses_a_byte_more(past):
    sink = BoundedBuffer(10, "the header")
    assert sink.write(b"x" * 4) == 4
    if past:
        with pytest.raises(ReplyTooLargeError, match=r"^the header: the server sent more than the 10 bytes asked for$"):
            sink.write(b"y" * 7)
        assert bytes(sink.data) == b"xxxx", "nothing of the chunk kept"
    else:
        assert sink.write(b"y" * 6) == 6 and bytes(sink.data) == b"xxxxyyyyyy"


class _Blob:
    """A GCS object as ``Blob.download_to_file`` serves it: ``sent`` bytes whatever the range asked, in 3-byte
    chunks, each call's arguments kept."""

    def __init__(self, sent: int) -> None:
        self.sent = sent
        self.calls: list[dict[str, Any]] = []

    def download_to_file(self, sink, **call):
        self.calls.append(call)
        body = bytes(range(self.sent))
        for at in range(0, len(body), 3):
            sink.write(body[at : at + 3])


@pytest.mark.parametrize(("start", "end", "cap"), [(5, 14, 100), (0, 99, 10)], ids=["the-range", "the-cap"])
@AT_LIMIT_AND_PAST
def test_a_ranged_read_holds_the_smaller_of_its_range_and_its_cap(start, end, cap, past):
    blob = _Blob(10 + past)
    if past:
        with pytest.raises(ReplyTooLargeError, match=r"the server sent more than the 10 bytes asked for"):
            read_object(blob, cap, "the header", start, end)
    else:
        assert read_object(blob, cap, "the header", start, end, timeout=3) == bytes(range(10))
        assert blob.calls == [{"start": start, "end": end, "checksum": None, "timeout": 3}]


@AT_LIMIT_AND_PAST
def test_a_whole_read_holds_its_cap(past):
    blob = _Blob(7 + past)
    if past:
        with pytest.raises(ReplyTooLargeError, match=r"^the index: the server sent more than the 7 bytes asked for$"):
            read_object(blob, 7, "the index")
    else:
        assert read_object(blob, 7, "the index") == bytes(range(7))
        assert blob.calls == [{"start": None, "end": None}], "the library's checksum kept"


# ---------------------------------------------------------------------------------------------
# The Hub's sizes and digests


SHA = "ab" * 32
BLOB = "cd" * 20


@pytest.mark.parametrize(
    ("size", "sha256", "blob_id", "found"),
    [
        (0, SHA, None, HubFile(0, "sha256", SHA)),
        (-1, SHA, None, None),
        (1, SHA[:-1], BLOB, HubFile(1, "blobId", BLOB)),
        (1, SHA + "a", None, None),
        (1, None, BLOB[:-1], None),
        (1, None, BLOB + "a", None),
        (True, SHA, None, None),
    ],
)
def test_a_hub_file_has_a_size_from_0_and_a_digest_of_its_length(size, sha256, blob_id, found):
    assert hub_file(size, sha256, blob_id) == found


def test_a_recorded_file_has_its_two_fields_and_no_third():
    assert recorded_file({"size": 3, "sha256": SHA}) == HubFile(3, "sha256", SHA)
    assert recorded_file({"size": 3, "sha256": SHA, "blobId": BLOB}) is None
    assert recorded_file({"size": 3}) is None


@pytest.mark.parametrize("size", [CHUNK - 1, CHUNK, CHUNK + 1])
def test_a_file_is_hashed_whole_across_its_chunks(tmp_path, size):
    path = tmp_path / "f"
    data = bytes(range(256)) * (size // 256) + b"z" * (size % 256)
    path.write_bytes(data)
    assert file_problem(path, HubFile(size, "sha256", hashlib.sha256(data).hexdigest()), "f") is None
    blob = hashlib.sha1(b"blob %d\0" % size + data).hexdigest()
    assert file_problem(path, HubFile(size, "blobId", blob), "f") is None
    assert file_problem(path, HubFile(size + 1, "sha256", SHA), "f") == (
        f"f is {size} bytes, not the Hub's {size + 1} bytes, sha256 {SHA}"
    )


# ---------------------------------------------------------------------------------------------
# The layers that share keys and values


@pytest.mark.parametrize(("layer", "shared"), [(6, False), (7, True), (9, True), (10, False)])
def test_the_last_kv_shared_layers_are_unused(layer, shared):
    config = {"text_config": {"num_hidden_layers": 10, "num_kv_shared_layers": 3}}
    name = f"model.language_model.layers.{layer}.self_attn.k_proj.weight"
    assert unused_by_the_model(name, config) is shared


@pytest.mark.parametrize(("count", "unused"), [(0, False), (1, True)])
def test_one_shared_layer_is_the_least(count, unused):
    config = {"text_config": {"num_hidden_layers": 4, "num_kv_shared_layers": count}}
    assert unused_by_the_model("model.language_model.layers.3.self_attn.v_norm.weight", config) is unused


# ---------------------------------------------------------------------------------------------
# A value shown


@AT_LIMIT_AND_PAST
def test_a_config_value_is_shown_in_80_characters(past):
    value = "v" * (78 + past)  # its JSON: 80 + past characters
    shown = json.dumps(value) if not past else json.dumps(value)[:77] + "..."
    assert maxtext_config_differences({"model_type": value}, {"model_type": "gemma4"}) == [
        f'config.json model_type is {shown}, the base\'s "gemma4"'
    ]
