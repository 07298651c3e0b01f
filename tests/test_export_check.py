"""The export check: the exported model in GCS against the base model's Hub metadata.

Shards are written by the real ``safetensors`` library, served by fake-gcs-server (the export) and by a
loopback Hub that answers ``hf_hub_download`` and ``parse_safetensors_file_metadata`` as the Hub does (the
base). The tensor names are Gemma 4's: MaxText's ``to_huggingface`` (0.2.4, 0.2.5) writes the language model under
``model.language_model.`` and leaves the vision tower out (``use_multimodal=False``); the export step copies it
from the base (tests/test_export_complete.py), so a checked export holds every tensor of the base.

Headers are judged by the safetensors library itself (``core.hf_model.parse_header``): each rule of
``SafeTensors::read_metadata`` / ``Metadata::validate`` is tested at both sides, with files the library wrote
and with crafted headers.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from core.hf_model import (
    ModelFormatError,
    Tensor,
    compare,
    header_length,
    parse_header,
    parse_index,
)
from tests.conftest import put
from tests.fake_hub import COMMIT, GOOD, REPO, FakeHub
from tests.hf_files import CONFIG, LANG, LANGUAGE, VISION, layout, model_files, shard_bytes
from tests.lifecycle_walk import settings
from tests.loopback import serve

pytest.importorskip("safetensors")

# ---------------------------------------------------------------------------------------------
# safetensors headers, as the library writes them


@pytest.mark.pure
def test_a_header_read_from_the_librarys_file_tells_each_tensor_and_the_files_size():
    data = shard_bytes({"a": ("BF16", [3, 4]), "b": ("F32", [5])})
    length = header_length(data[:8], "s", len(data))
    tensors = parse_header(data[8 : 8 + length], "s", len(data))
    assert tensors == {"a": Tensor("BF16", (3, 4)), "b": Tensor("F32", (5,))}


@pytest.mark.pure
@pytest.mark.parametrize(
    ("cut", "words"), [(-1, "the shard is cut short"), (+1, "it holds bytes no tensor accounts for")]
)
def test_a_shard_of_the_wrong_size_is_named(cut, words):
    data = shard_bytes({"a": ("BF16", [3, 4])})
    length = header_length(data[:8], "s", len(data))
    with pytest.raises(ModelFormatError) as err:
        parse_header(data[8 : 8 + length], "model-00001-of-00002.safetensors", len(data) + cut)
    assert str(err.value) == (
        f"model-00001-of-00002.safetensors is {len(data) + cut} bytes but its header describes {len(data)}: {words}"
    )


def entry(dtype: str, shape: object, begin: int, end: int) -> dict:
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def described(raw: bytes) -> int:
    """The size of the file a header describes (8 + N + its largest end offset)."""
    entries = [v for k, v in json.loads(raw).items() if k != "__metadata__" and "data_offsets" in v]
    return 8 + len(raw) + max([v["data_offsets"][1] for v in entries] or [0])


def judged(header: dict | bytes, size: int | None = None) -> dict[str, Tensor] | str:
    """The tensors ``parse_header`` finds in a file of ``size`` bytes (default: the size the header describes),
    or the one line it refuses it with."""
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    size = described(raw) if size is None else size
    try:
        return parse_header(raw, "s", size)
    except ModelFormatError as err:
        assert "\n" not in str(err)
        return str(err)


REFUSED = "s: the safetensors library refuses its header ("
# Each rule of the library at both sides: (header, what the library says, or None: accepted).
RULES: list[tuple[dict[str, Any] | bytes, str | None]] = [
    # offsets start at 0 and follow each other: no gap, no overlap (Metadata::validate, InvalidOffset)
    ({"a": entry("BF16", [2], 0, 4), "b": entry("BF16", [2], 4, 8)}, None),
    ({"b": entry("BF16", [2], 4, 8), "a": entry("BF16", [2], 0, 4)}, None),  # in any order in the JSON
    ({"a": entry("BF16", [2], 0, 4), "b": entry("BF16", [2], 2, 6)}, "invalid offset for tensor `b`"),
    ({"a": entry("BF16", [2], 0, 4), "b": entry("BF16", [2], 6, 10)}, "invalid offset for tensor `b`"),
    ({"a": entry("BF16", [2], 1, 5)}, "invalid offset for tensor `a`"),
    # each tensor's bytes are what its dtype and shape need (TensorInvalidInfo)
    ({"a": entry("BF16", [2, 3], 0, 12)}, None),
    ({"a": entry("BF16", [2, 3], 0, 10)}, "invalid shape, data type, or offset for tensor"),
    ({"a": entry("BF16", [], 0, 2)}, None),  # a scalar
    ({"a": entry("BF16", [0, 4], 0, 0)}, None),  # an empty tensor
    # sub-byte dtypes end on a byte (MisalignedSlice); shapes that overflow (ValidationOverflow)
    ({"a": entry("F4", [4], 0, 2)}, None),
    ({"a": entry("F4", [3], 0, 2)}, "does not end up at a byte boundary"),
    ({"a": entry("BF16", [2**40, 2**40], 0, 4)}, "overflow computing buffer size"),
    # dtypes the library knows, shapes of unsigned integers, every field present (serde: HashMetadata)
    ({"a": entry("F8_E4M3", [4], 0, 4)}, None),
    ({"a": entry("Q4", [4], 0, 2)}, "unknown variant `Q4`"),
    ({"a": entry("BF16", [-2], 0, 4)}, "invalid value: integer `-2`, expected usize"),
    ({"a": entry("BF16", 2, 0, 4)}, "invalid type: integer `2`, expected a sequence"),
    ({"a": {"dtype": "BF16", "shape": [2]}}, "missing field `data_offsets`"),
    # __metadata__ is a map of strings
    ({"__metadata__": {"format": "pt"}, "a": entry("BF16", [2], 0, 4)}, None),
    ({"__metadata__": {"format": 1}, "a": entry("BF16", [2], 0, 4)}, "invalid type: integer `1`, expected a string"),
    ({"__metadata__": {"format": None}, "a": entry("BF16", [2], 0, 4)}, "invalid type: null, expected a string"),
    ({"__metadata__": "pt", "a": entry("BF16", [2], 0, 4)}, 'invalid type: string "pt", expected a map'),
    # the header is a JSON object (read_metadata: InvalidHeaderDeserialization)
    (b"not json", "invalid JSON in header: expected ident"),
    (b"[1]", "invalid type: sequence"),
]


@pytest.mark.pure
@pytest.mark.parametrize(("header", "words"), RULES, ids=[f"rule{i}" for i in range(len(RULES))])
def test_a_header_is_judged_by_each_rule_of_the_safetensors_library(header, words):
    size = 8 + len(header) + 4 if isinstance(header, bytes) else None
    found = judged(header, size)
    if words is None:
        assert isinstance(found, dict), found
    else:
        assert isinstance(found, str) and found.startswith(REFUSED) and words in found, found


@pytest.mark.pure
def test_what_the_library_accepts_it_also_reads_back_and_what_it_refuses_the_check_refuses():
    """The same headers given to ``safetensors.safe_open`` in whole files (their data written): the check's
    answer is the library's, every time."""
    import struct
    import tempfile

    from safetensors import SafetensorError, safe_open

    for header, _words in RULES:
        raw = header if isinstance(header, bytes) else json.dumps(header).encode()
        size = 8 + len(raw) + 4 if isinstance(header, bytes) else None
        found = judged(header, size)
        with tempfile.NamedTemporaryFile() as file:
            file.write(struct.pack("<Q", len(raw)) + raw)
            file.truncate(size or described(raw))
            file.flush()
            try:
                with safe_open(file.name, framework="numpy") as opened:
                    accepted = sorted(opened.keys())
            except SafetensorError:
                accepted = None
        assert (accepted is None) == isinstance(found, str), (header, found)
        if accepted is not None:
            assert sorted(found) == accepted


@pytest.mark.pure
def test_a_file_the_library_wrote_padding_and_metadata_included_is_read_whole():
    """safetensors pads its header with spaces to 8 bytes; the padding belongs to the header."""
    data = shard_bytes({"a": ("BF16", [3]), "b": ("F32", [1]), "c": ("BF16", [0])})
    length = header_length(data[:8], "s", len(data))
    assert length % 8 == 0 and data[8 : 8 + length].endswith(b" ")
    assert parse_header(data[8 : 8 + length], "s", len(data)) == {
        "a": Tensor("BF16", (3,)),
        "b": Tensor("F32", (1,)),
        "c": Tensor("BF16", (0,)),
    }


@pytest.mark.pure
def test_a_header_describing_more_than_any_shard_is_a_shard_cut_short():
    huge = {"a": entry("BF16", [2**39], 0, 2**40)}
    size = 8 + len(json.dumps(huge)) + 2**40
    assert judged(huge, 1000) == f"s is 1000 bytes but its header describes {size}: the shard is cut short"


@pytest.mark.pure
def test_a_header_with_metadata_alone_describes_no_data():
    header = b'{"__metadata__": {"format": "pt"}}'
    assert parse_header(header, "s", 8 + len(header)) == {}
    with pytest.raises(ModelFormatError, match="holds bytes no tensor accounts for"):
        parse_header(header, "s", 9 + len(header))


@pytest.mark.pure
def test_a_header_length_is_an_unsigned_64_bit_number_from_the_first_8_bytes():
    assert header_length((92).to_bytes(8, "little") + b"{}" * 4, "s", 100) == 92, "only the first 8 bytes count"
    assert header_length((2).to_bytes(8, "little"), "s", 10) == 2, "{}: the shortest header"
    for short in (0, 1):
        with pytest.raises(ModelFormatError):
            header_length(short.to_bytes(8, "little"), "s", 100)
    with pytest.raises(ModelFormatError) as refused:
        header_length(b"\xff" * 8, "s", 100)
    assert str(refused.value) == "s: its header length 18446744073709551615 does not fit the file of 100 bytes"
    limit = 100_000_000
    assert header_length(limit.to_bytes(8, "little"), "s", 10**9) == limit, "the library's own limit is allowed"
    with pytest.raises(ModelFormatError):
        header_length((limit + 1).to_bytes(8, "little"), "s", 10**9)


@pytest.mark.pure
def test_a_config_is_a_json_object():
    from core.hf_model import parse_config

    assert parse_config(b'{"model_type": "gemma4"}') == {"model_type": "gemma4"}
    with pytest.raises(ModelFormatError) as err:
        parse_config(b"{oops")
    assert str(err.value) == "config.json is not JSON"
    with pytest.raises(ModelFormatError) as err:
        parse_config(b"[]")
    assert str(err.value) == "config.json is not an object"


@pytest.mark.pure
def test_a_long_value_is_shown_cut_to_80_characters():
    long_arch = ["A" * 100]
    found = compare(layout(WHOLE, {**CONFIG, "architectures": long_arch}), layout(WHOLE))
    assert found == [
        'config.json architectures is ["' + "A" * 75 + '..., the base\'s ["Gemma4ForConditionalGeneration"]'
    ]
    exact = ["A" * 76]  # json.dumps: 80 characters, shown whole
    found = compare(layout(WHOLE, {**CONFIG, "architectures": exact}), layout(WHOLE))
    assert found[0].startswith(f"config.json architectures is {json.dumps(exact)}, the base's")
    over = ["A" * 77]  # 81 characters: cut
    found = compare(layout(WHOLE, {**CONFIG, "architectures": over}), layout(WHOLE))
    assert found[0].startswith('config.json architectures is ["' + "A" * 75 + "..., the base's")


@pytest.mark.pure
def test_a_text_config_that_is_not_an_object_differs_in_every_field():
    found = compare(layout(WHOLE, {**CONFIG, "text_config": "gemma4_text"}), layout(WHOLE))
    assert found[-1] == "config.json text_config.vocab_size is null, the base's 8" and len(found) == 4


@pytest.mark.pure
def test_a_header_length_past_the_file_is_refused():
    with pytest.raises(ModelFormatError, match="does not fit the file of 100 bytes"):
        header_length((200).to_bytes(8, "little"), "s", 100)
    with pytest.raises(ModelFormatError, match="too short"):
        header_length(b"\x01", "s", 100)
    assert header_length((92).to_bytes(8, "little"), "s", 100) == 92, "header up to the file's end"


@pytest.mark.pure
def test_an_index_without_a_weight_map_is_refused():
    assert parse_index(b'{"weight_map": {"a": "f.safetensors"}}') == {"a": "f.safetensors"}
    for raw in (b"{}", b'{"weight_map": {}}', b'{"weight_map": {"a": 1}}', b"[1]"):
        with pytest.raises(ModelFormatError) as err:
            parse_index(raw)
        assert str(err.value) == "model.safetensors.index.json has no weight_map of tensor names to shard files"
    with pytest.raises(ModelFormatError) as err:
        parse_index(b"nope")
    assert str(err.value) == "model.safetensors.index.json is not JSON"


# ---------------------------------------------------------------------------------------------
# The names of a model folder's files (from GCS listings, indexes, the Hub)

NAMES = [
    ("config.json", None),
    ("model-00001-of-00018.safetensors", None),
    ("model-base-00001-of-00001.safetensors", None),
    ("chat_template.jinja", None),
    ("generation_config.json", None),
    ("", "an empty name"),
    ("..", "is not a plain file name"),
    ("../../x.safetensors", "is a path, not a file of the folder"),
    ("/etc/passwd", "is a path, not a file of the folder"),
    ("sub/config.json", "is a path, not a file of the folder"),
    ("a\\b.safetensors", "is a path, not a file of the folder"),
    ("a\nb.json", "holds a control character"),
    ("a\x7f.json", "holds a control character"),
    ("a\x9b.json", "holds a control character"),
    (".hidden.safetensors", "is not a plain file name"),
    ("x" * 250 + ".safetensors", "longer than 255 characters"),
    ("notes.txt", "is not a file of a model folder"),
    ("README.md", "is not a file of a model folder"),
    ("-x.safetensors", "is not a file of a model folder"),
]


@pytest.mark.pure
@pytest.mark.parametrize(("name", "words"), NAMES, ids=[f"name{i}" for i in range(len(NAMES))])
def test_only_the_files_a_model_folder_consists_of_named_as_plain_files_pass(name, words):
    from core.hf_model import export_file_problem, shard_problem

    problem = export_file_problem(name)
    assert (problem is None) == (words is None), problem
    assert words is None or (problem is not None and words in problem), problem
    if problem:
        assert "\n" not in problem and "\x9b" not in problem
        assert shard_problem(name), "what is no file of a model folder is no shard either"
    assert shard_problem("config.json") == "'config.json' is not a safetensors shard's name"


@pytest.mark.pure
@pytest.mark.parametrize(
    "shard", ["../x.safetensors", "/x.safetensors", "x.bin", ""], ids=["dotdot", "abs", "bin", "empty"]
)
def test_an_index_naming_a_shard_that_cannot_be_one_is_refused(shard):
    with pytest.raises(ModelFormatError) as err:
        parse_index(json.dumps({"weight_map": {"a": "ok.safetensors", "b": shard}}).encode())
    assert str(err.value).startswith("model.safetensors.index.json names a shard that cannot be one: ")


@pytest.mark.pure
def test_a_bounded_read_holds_at_most_what_it_asked_for():
    """``read_object``'s sink: a server that ignores the range and sends more stops the download."""
    from core.hf_model import BoundedBuffer, ReplyTooLargeError, read_object

    class Blob:
        def __init__(self, body: bytes) -> None:
            self.body = body
            self.asked: tuple[int | None, int | None, dict[str, Any]] | None = None

        def download_to_file(self, sink, start=None, end=None, **options):
            self.asked = (start, end, options)
            for at in range(0, len(self.body), 8192):
                sink.write(self.body[at : at + 8192])

    honest, ignoring = Blob(b"12345678"), Blob(b"x" * 300_000)
    assert read_object(honest, 100, "w", 0, 7, timeout=1) == b"12345678"
    assert honest.asked == (0, 7, {"checksum": None, "timeout": 1})
    with pytest.raises(ReplyTooLargeError) as err:
        read_object(ignoring, 10**9, "reading s", 0, 7)
    assert str(err.value) == "reading s: the server sent more than the 8 bytes asked for"
    whole = Blob(b"y" * 20)
    assert read_object(whole, 20, "w") == b"y" * 20 and whole.asked == (None, None, {})
    with pytest.raises(ReplyTooLargeError):
        read_object(whole, 19, "w")
    sink = BoundedBuffer(3, "w")
    assert sink.write(b"abc") == 3
    sink.flush()  # a no-op that raises nothing
    assert bytes(sink.data) == b"abc"


# ---------------------------------------------------------------------------------------------
# The comparison: the whole base model

WHOLE = {**LANGUAGE, **VISION}


@pytest.mark.pure
def test_the_whole_base_model_matches_and_its_language_model_alone_does_not():
    assert compare(layout(WHOLE), layout(WHOLE)) == []
    found = compare(layout(LANGUAGE), layout(WHOLE))
    assert found == [f"tensor {n} of the base is missing from the export" for n in sorted(VISION)]


@pytest.mark.pure
@pytest.mark.parametrize(
    ("change", "words"),
    [
        (
            lambda t, c: c.update(architectures=["Gemma4ForCausalLM"]),
            'config.json architectures is ["Gemma4ForCausalLM"], the base\'s ["Gemma4ForConditionalGeneration"]',
        ),
        (
            lambda t, c: c.update(model_type="gemma4_text"),
            'config.json model_type is "gemma4_text", the base\'s "gemma4"',
        ),
        (
            lambda t, c: c.__setitem__("text_config", {**c["text_config"], "num_hidden_layers": 1}),
            "config.json text_config.num_hidden_layers is 1, the base's 2",
        ),
        (
            lambda t, c: c.__setitem__("vision_config", {}),
            'config.json vision_config.model_type is null, the base\'s "gemma4_vision"',
        ),
        (lambda t, c: c.update(audio_config={"model_type": "gemma4_audio"}), "config.json audio_config is"),
        (lambda t, c: c.update(transformers_version="5.5.0.dev0"), "config.json transformers_version is"),
        (
            lambda t, c: t.__setitem__(f"{LANG}norm.weight", ("F32", [4])),
            f"tensor {LANG}norm.weight is F32, not BF16 (weight_dtype=bfloat16)",
        ),
        (
            lambda t, c: t.__setitem__("model.embed_vision.embedding_projection.weight", ("F32", [4, 4])),
            "tensor model.embed_vision.embedding_projection.weight is F32, the base's BF16 (copied from the base "
            "unchanged)",
        ),
        (
            lambda t, c: t.__setitem__(f"{LANG}layers.1.experts.down_proj", ("BF16", [2, 3, 4])),
            f"tensor {LANG}layers.1.experts.down_proj has shape [2, 3, 4], the base's [2, 4, 3]",
        ),
        (lambda t, c: t.pop(f"{LANG}layers.1.self_attn.q_proj.weight"), "of the base is missing from the export"),
        (
            lambda t, c: t.pop("model.vision_tower.encoder.layers.0.self_attn.q_proj.linear.weight"),
            "tensor model.vision_tower.encoder.layers.0.self_attn.q_proj.linear.weight of the base is missing",
        ),
        (
            lambda t, c: t.__setitem__(f"{LANG}layers.2.self_attn.q_proj.weight", ("BF16", [4, 4])),
            "is in the export only (the base has no such tensor)",
        ),
        (
            lambda t, c: t.__setitem__("model.layers.0.self_attn.q_proj.weight", ("BF16", [4, 4])),
            "tensor model.layers.0.self_attn.q_proj.weight is in the export only (the base has no such tensor)",
        ),
    ],
)
def test_each_kind_of_difference_is_one_line(change, words):
    tensors, config = dict(WHOLE), json.loads(json.dumps(CONFIG))
    change(tensors, config)
    found = compare(layout(tensors, config), layout(WHOLE))
    assert len(found) == 1 and words in found[0], found


@pytest.mark.pure
def test_a_config_without_a_text_config_differs_in_every_field_the_base_sets():
    config = {k: v for k, v in CONFIG.items() if k != "text_config"}
    found = compare(layout(WHOLE, config), layout(WHOLE))
    assert found == [
        "config.json text_config.hidden_size is null, the base's 4",
        'config.json text_config.model_type is null, the base\'s "gemma4_text"',
        "config.json text_config.num_hidden_layers is null, the base's 2",
        "config.json text_config.vocab_size is null, the base's 8",
    ]


@pytest.mark.pure
def test_the_key_value_tensors_of_shared_layers_are_copied_from_the_base_and_no_others():
    """Gemma 4 E2B/E4B: the last ``num_kv_shared_layers`` layers have no key/value weights of their own."""
    from core.hf_model import copied_from_base, unused_by_the_model

    config = {"text_config": {"num_hidden_layers": 42, "num_kv_shared_layers": 18}}
    cases = [(24, "k_proj", True), (41, "v_norm", True), (23, "k_proj", False), (42, "k_proj", False)]
    for layer, kind, unused in [*cases, (30, "q_proj", False)]:
        name = f"{LANG}layers.{layer}.self_attn.{kind}.weight"
        assert unused_by_the_model(name, config) is unused and copied_from_base(name, config) is unused, name
    no_sharing = {"text_config": {"num_hidden_layers": 30}}
    assert not unused_by_the_model(f"{LANG}layers.29.self_attn.k_proj.weight", no_sharing)
    assert copied_from_base("model.vision_tower.std_bias", {}) and copied_from_base("model.embed_audio.x", {})
    assert not copied_from_base(f"{LANG}norm.weight", config)


@pytest.mark.pure
def test_maxtexts_config_must_fix_the_same_shapes_as_the_bases():
    from core.hf_model import maxtext_config_differences

    assert maxtext_config_differences({**CONFIG, "transformers_version": "x", "audio_config": None}, CONFIG) == []
    text = {**CONFIG["text_config"], "vocab_size": 9}
    wrong = {**CONFIG, "architectures": ["Gemma4ForCausalLM"], "text_config": text}
    assert maxtext_config_differences(wrong, CONFIG) == [
        'config.json architectures is ["Gemma4ForCausalLM"], the base\'s ["Gemma4ForConditionalGeneration"]',
        "config.json text_config.vocab_size is 9, the base's 8",
    ]


# ---------------------------------------------------------------------------------------------
# The export in GCS (fake-gcs-server)

HF_URI = "gs://bkt/gemma4-26b/export/0123456789/"


def upload(gcs: Any, files: dict[str, bytes]) -> None:
    put(gcs, "gs://bkt/", "unrelated")
    bucket = gcs.bucket("bkt")
    for name, data in files.items():
        bucket.blob("gemma4-26b/export/0123456789/" + name).upload_from_string(data)


def read(gcs: Any):
    from workloads.observe.artifacts import call_options
    from workloads.observe.exported import read_exported

    return read_exported(gcs, HF_URI, **call_options())


def test_a_complete_export_reads_back_as_written(gcs):
    upload(gcs, model_files(LANGUAGE, 3))
    found = read(gcs)
    assert found.problems == []
    assert found.layout.config == CONFIG
    assert found.layout.tensors == {n: Tensor(d, tuple(s)) for n, (d, s) in LANGUAGE.items()}
    assert set(found.layout.weight_map.values()) == {f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)}


def test_a_single_file_export_reads_back(gcs):
    files = model_files(LANGUAGE, 1)
    files.pop("model.safetensors.index.json")
    files["model.safetensors"] = files.pop("model-00001-of-00001.safetensors")
    upload(gcs, files)
    found = read(gcs)
    assert found.problems == [] and set(found.layout.weight_map.values()) == {"model.safetensors"}


@pytest.mark.parametrize(
    ("change", "problems"),
    [
        (lambda f: f.pop("model-00002-of-00003.safetensors"), ["model-00002-of-00003.safetensors, named by"]),
        (
            lambda f: f.__setitem__("model-00003-of-00003.safetensors", f["model-00003-of-00003.safetensors"][:-2]),
            ["model-00003-of-00003.safetensors is", "the shard is cut short"],
        ),
        (lambda f: f.pop("tokenizer.json"), ["tokenizer.json is missing"]),
        (lambda f: f.pop("config.json"), ["config.json is missing"]),
        (
            lambda f: f.__setitem__(
                "model.safetensors.index.json",
                json.dumps(
                    {
                        "weight_map": {
                            **json.loads(f["model.safetensors.index.json"])["weight_map"],
                            "extra": "model-00001-of-00003.safetensors",
                        }
                    }
                ).encode(),
            ),
            ["puts tensor extra in model-00001-of-00003.safetensors, whose header lacks it"],
        ),
    ],
)
@pytest.mark.slow
def test_what_an_export_lacks_is_named(gcs, change, problems):
    files = model_files(LANGUAGE, 3)
    change(files)
    upload(gcs, files)
    found = read(gcs)
    assert len(found.problems) == 1 and all(p in found.problems[0] for p in problems), found.problems


def test_an_export_of_real_size_is_read_from_its_headers_alone(gcs):
    """gemma4-26b's export: 657 tensors in 18 shards (MaxText's 3 GiB shards); tiny shapes, real counts."""
    tensors = {f"{LANG}layers.{i // 22}.t{i % 22}.weight": ("BF16", [2, 2]) for i in range(657)}
    upload(gcs, model_files(tensors, 18))
    found = read(gcs)
    assert (
        found.problems == [] and len(found.layout.tensors) == 657 and len(set(found.layout.weight_map.values())) == 18
    )


def test_an_empty_shard_is_a_problem_not_a_failed_read(gcs):
    files = model_files(LANGUAGE, 2)
    files["model-00002-of-00002.safetensors"] = b""
    upload(gcs, files)
    assert read(gcs).problems == ["model-00002-of-00002.safetensors holds 0 bytes: too short for a safetensors file"]


def test_an_export_without_weights_says_so(gcs):
    files = {k: v for k, v in model_files(LANGUAGE, 2).items() if not k.startswith("model")}
    upload(gcs, files)
    found = read(gcs)
    assert found.layout is None
    assert found.problems == ["no weights: neither model.safetensors.index.json nor model.safetensors"]


# ---------------------------------------------------------------------------------------------
# The base model on the Hub (loopback), and the whole check


@pytest.mark.slow
def test_the_base_models_layout_comes_from_the_hubs_headers_not_its_weights():
    from workloads.preflight import base_model_layout

    # A shard far larger than the client's first header read (100 kB): a whole-file GET would show.
    big = {**LANGUAGE, **VISION, f"{LANG}layers.0.experts.big": ("BF16", [256, 1024])}
    hub = FakeHub.serving(model_files(big, 2))
    with serve(hub) as url:
        base = base_model_layout(REPO, COMMIT, GOOD, url)
    assert base.config == CONFIG
    assert base.tensors == {n: Tensor(d, tuple(s)) for n, (d, s) in big.items()}
    shards = [r for r in hub.ranges if r.split()[0].endswith(".safetensors")]
    assert len(shards) == 2 and all(" bytes=0-" in r for r in shards), f"one ranged read per header: {hub.ranges}"
    assert len(hub.files["model-00001-of-00002.safetensors"] + hub.files["model-00002-of-00002.safetensors"]) > 500_000


@pytest.mark.parametrize("shard", ["hang", "drip"])
@pytest.mark.slow
def test_a_hub_that_stalls_on_a_header_ends_within_the_budget(shard):
    import time

    from core.deadline import Budget
    from workloads.preflight import HubUnavailableError, base_model_layout

    files = model_files(LANGUAGE, 1)
    files["model.safetensors.index.json"] = json.dumps(
        {"weight_map": {f"{LANG}norm.weight": f"{shard}.safetensors"}}
    ).encode()
    started = time.monotonic()
    with serve(FakeHub.serving(files)) as url, pytest.raises(HubUnavailableError) as err:
        base_model_layout(REPO, COMMIT, GOOD, url, budget=Budget(2.0, 1.0, 1.0, "test"))
    assert time.monotonic() - started < 6, "the wall clock bounds it, connect and headers included"
    assert "\n" not in str(err.value) and f"{shard}.safetensors" in str(err.value)


@pytest.mark.slow
def test_a_file_the_bases_index_names_but_the_hub_lacks_is_named():
    from workloads.preflight import PreflightError, base_model_layout

    files = model_files({**LANGUAGE, **VISION}, 2)
    files.pop("model-00002-of-00002.safetensors")
    with serve(FakeHub.serving(files)) as url, pytest.raises(PreflightError) as err:
        base_model_layout(REPO, COMMIT, GOOD, url)
    assert str(err.value) == f"{REPO}@{COMMIT} has no model-00002-of-00002.safetensors, which its files name"


@pytest.mark.slow
def test_a_hub_error_behind_a_download_is_retried_and_named():
    """hf_hub_download turns a failed HEAD into LocalEntryNotFoundError; the 5xx behind it is what counts."""
    from core.deadline import Budget
    from workloads.preflight import HubUnavailableError, base_model_layout

    class Flaky(FakeHub):
        files = model_files(LANGUAGE, 1)
        ranges: list[str] = []
        heads = 0

        def do_HEAD(self):  # noqa: N802
            type(self).heads += 1
            if type(self).heads == 1:
                self._error(503, None, "overloaded")
            else:
                super().do_HEAD()

    with serve(Flaky) as url:
        base = base_model_layout(REPO, COMMIT, GOOD, url)
    assert Flaky.heads >= 2 and len(base.tensors) == len(LANGUAGE), "the 503 was retried"

    class Down(Flaky):
        def do_HEAD(self):  # noqa: N802
            self._error(500, None, "internal")

    with serve(Down) as url, pytest.raises(HubUnavailableError) as err:
        base_model_layout(REPO, COMMIT, GOOD, url, budget=Budget(1.5, 0.5, 0.5, "test"))
    assert "HTTP 500" in str(err.value) or "did not finish answering" in str(err.value), str(err.value)


def test_a_base_revision_without_safetensors_is_one_line():
    from workloads.preflight import PreflightError, base_model_layout

    hub = FakeHub.serving({"config.json": json.dumps(CONFIG).encode(), "pytorch_model.bin": b"x"})
    with serve(hub) as url, pytest.raises(PreflightError) as err:
        base_model_layout(REPO, "main", GOOD, url)
    assert str(err.value) == f"{REPO}@main has no safetensors weights to compare with"


@pytest.mark.slow
def test_the_whole_check_passes_a_true_export_and_names_the_differences_of_a_wrong_one(gcs):
    from workloads.observe.artifacts import storage_client
    from workloads.reader import Hub
    from workloads.workflow import export_differences

    prod = settings("prod", [f"tpu-rl:model.revision={COMMIT}"])
    hub = FakeHub.serving(model_files({**LANGUAGE, **VISION}, 2))
    upload(gcs, model_files({**LANGUAGE, **VISION}, 3))
    with serve(hub) as url:
        assert export_differences(prod, HF_URI, storage_client, Hub(url, GOOD, "")) == []
        assert export_differences(prod, HF_URI, storage_client, Hub(url, GOOD, ""), revision=COMMIT) == [], (
            "the revision as a parameter"
        )
        wrong = {**LANGUAGE, **VISION}
        wrong[f"{LANG}norm.weight"] = ("F32", [4])
        upload(gcs, model_files(wrong, 3, {**CONFIG, "architectures": ["Gemma4ForCausalLM"]}))
        found = export_differences(prod, HF_URI, storage_client, Hub(url, GOOD, ""))
    assert found == [
        'config.json architectures is ["Gemma4ForCausalLM"], the base\'s ["Gemma4ForConditionalGeneration"]',
        f"tensor {LANG}norm.weight is F32, not BF16 (weight_dtype=bfloat16)",
    ]
