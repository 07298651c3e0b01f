"""The export check (issue 21): the exported model in GCS against the base model's Hub metadata.

Shards are written by the real ``safetensors`` library, served by fake-gcs-server (the export) and by a
loopback Hub that answers ``hf_hub_download`` and ``parse_safetensors_file_metadata`` as the Hub does (the
base). The tensor names are Gemma 4's: MaxText 0.2.4's ``to_huggingface`` writes the language model under
``model.language_model.`` and leaves the vision tower out (``use_multimodal=False``).
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


@pytest.mark.pure
@pytest.mark.parametrize(
    ("header", "words"),
    [
        (b"not json", "not JSON"),
        (b"[1]", "not an object"),
        (b'{"a": {"dtype": "BF16", "shape": [2]}}', "lacks dtype, shape or data_offsets"),
        (b'{"a": {"dtype": "Q4", "shape": [2], "data_offsets": [0, 4]}}', "invalid dtype"),
        (b'{"a": {"dtype": "BF16", "shape": [-2], "data_offsets": [0, 4]}}', "invalid dtype, shape"),
        (b'{"a": {"dtype": "BF16", "shape": [2], "data_offsets": [1, 4]}}', "a (BF16 [2]) is 3 bytes, not 4"),
        (b'{"a": {"dtype": "BF16", "shape": 2, "data_offsets": [0, 4]}}', "invalid dtype, shape"),
    ],
)
def test_a_header_that_breaks_the_format_is_refused_in_one_line(header, words):
    with pytest.raises(ModelFormatError) as err:
        parse_header(header, "s", 8 + len(header) + 4)
    assert words in str(err.value) and "\n" not in str(err.value)


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
    with pytest.raises(ModelFormatError, match="does not fit"):
        header_length(b"\xff" * 8, "s", 100)  # 2**64 - 1, not -1
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
    found = compare(layout(LANGUAGE, {**CONFIG, "architectures": long_arch}), layout(LANGUAGE), "gemma4-26b")
    assert found == [
        'config.json architectures is ["' + "A" * 75 + '..., the base\'s ["Gemma4ForConditionalGeneration"]'
    ]
    exact = ["A" * 76]  # json.dumps: 80 characters, shown whole
    found = compare(layout(LANGUAGE, {**CONFIG, "architectures": exact}), layout(LANGUAGE), "gemma4-26b")
    assert found[0].startswith(f"config.json architectures is {json.dumps(exact)}, the base's")
    over = ["A" * 77]  # 81 characters: cut
    found = compare(layout(LANGUAGE, {**CONFIG, "architectures": over}), layout(LANGUAGE), "gemma4-26b")
    assert found[0].startswith('config.json architectures is ["' + "A" * 75 + "..., the base's")


@pytest.mark.pure
def test_a_text_config_that_is_not_an_object_differs_in_every_field():
    found = compare(layout(LANGUAGE, {**CONFIG, "text_config": "gemma4_text"}), layout(LANGUAGE), "gemma4-26b")
    assert found[0] == 'config.json text_config.model_type is null, the base\'s "gemma4_text"' and len(found) == 4


@pytest.mark.pure
def test_a_header_length_past_the_file_is_refused():
    with pytest.raises(ModelFormatError, match="does not fit the file of 100 bytes"):
        header_length((200).to_bytes(8, "little"), "s", 100)
    with pytest.raises(ModelFormatError, match="too short"):
        header_length(b"\x01", "s", 100)
    assert header_length((92).to_bytes(8, "little"), "s", 100) == 92, "header up to the file's end"


@pytest.mark.pure
def test_an_index_without_a_weight_map_is_refused():
    assert parse_index(b'{"weight_map": {"a": "f"}}') == {"a": "f"}
    for raw in (b"{}", b'{"weight_map": {}}', b'{"weight_map": {"a": 1}}', b"[1]"):
        with pytest.raises(ModelFormatError) as err:
            parse_index(raw)
        assert str(err.value) == "model.safetensors.index.json has no weight_map of tensor names to shard files"
    with pytest.raises(ModelFormatError) as err:
        parse_index(b"nope")
    assert str(err.value) == "model.safetensors.index.json is not JSON"


# ---------------------------------------------------------------------------------------------
# The comparison


@pytest.mark.pure
def test_the_base_models_language_model_in_bf16_matches_and_its_vision_tower_is_not_expected():
    assert compare(layout(LANGUAGE), layout({**LANGUAGE, **VISION}), "gemma4-26b") == []


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
            lambda t, c: t.__setitem__(f"{LANG}norm.weight", ("F32", [4])),
            f"tensor {LANG}norm.weight is F32, not BF16 (weight_dtype=bfloat16)",
        ),
        (
            lambda t, c: t.__setitem__(f"{LANG}layers.1.experts.down_proj", ("BF16", [2, 3, 4])),
            f"tensor {LANG}layers.1.experts.down_proj has shape [2, 3, 4], the base's [2, 4, 3]",
        ),
        (lambda t, c: t.pop(f"{LANG}layers.1.self_attn.q_proj.weight"), "of the base is missing from the export"),
        (
            lambda t, c: t.__setitem__(f"{LANG}layers.2.self_attn.q_proj.weight", ("BF16", [4, 4])),
            "is in the export only (the base has no such tensor)",
        ),
        (
            lambda t, c: t.__setitem__("model.layers.0.self_attn.q_proj.weight", ("BF16", [4, 4])),
            "tensor model.layers.0.self_attn.q_proj.weight is in the export only (not a language-model tensor)",
        ),
    ],
)
def test_each_kind_of_difference_is_one_line(change, words):
    tensors, config = dict(LANGUAGE), json.loads(json.dumps(CONFIG))
    change(tensors, config)
    found = compare(layout(tensors, config), layout({**LANGUAGE, **VISION}), "gemma4-26b")
    assert len(found) == 1 and words in found[0], found


@pytest.mark.pure
def test_a_config_without_a_text_config_differs_in_every_field_the_base_sets():
    config = {k: v for k, v in CONFIG.items() if k != "text_config"}
    found = compare(layout(LANGUAGE, config), layout(LANGUAGE), "gemma4-26b")
    assert found == [
        'config.json text_config.model_type is null, the base\'s "gemma4_text"',
        "config.json text_config.hidden_size is null, the base's 4",
        "config.json text_config.num_hidden_layers is null, the base's 2",
        "config.json text_config.vocab_size is null, the base's 8",
    ]


@pytest.mark.pure
def test_e4b_may_lack_the_key_value_projections_of_its_shared_layers_and_nothing_else():
    shared = {f"{LANG}layers.{i}.self_attn.k_proj.weight": ("BF16", [4, 4]) for i in (23, 24, 41, 42)}
    found = compare(layout(LANGUAGE), layout({**LANGUAGE, **shared}), "gemma4-e4b")
    assert found == [
        f"tensor {LANG}layers.23.self_attn.k_proj.weight of the base is missing from the export",
        f"tensor {LANG}layers.42.self_attn.k_proj.weight of the base is missing from the export",
    ], "layers 24-41 share their keys and values; 23 and 42 do not exist as shared layers"
    assert len(compare(layout(LANGUAGE), layout({**LANGUAGE, **shared}), "gemma4-26b")) == 4, "26B shares none"


# ---------------------------------------------------------------------------------------------
# The export in GCS (fake-gcs-server)

HF_URI = "gs://bkt/gemma4-26b/export/0123456789/"


def upload(gcs: Any, files: dict[str, bytes]) -> None:
    put(gcs, "gs://bkt/", "unrelated")
    bucket = gcs.bucket("bkt")
    for name, data in files.items():
        bucket.blob("gemma4-26b/export/0123456789/" + name).upload_from_string(data)


def read(gcs: Any):
    from workloads.run.artifacts import call_options
    from workloads.run.exported import read_exported

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
def test_a_hub_that_stalls_on_a_header_ends_within_the_budget(shard):
    import time

    from core.deadline import Budget
    from workloads.preflight import PreflightError, base_model_layout

    files = model_files(LANGUAGE, 1)
    files["model.safetensors.index.json"] = json.dumps(
        {"weight_map": {f"{LANG}norm.weight": f"{shard}.safetensors"}}
    ).encode()
    started = time.monotonic()
    with serve(FakeHub.serving(files)) as url, pytest.raises(PreflightError) as err:
        base_model_layout(REPO, COMMIT, GOOD, url, budget=Budget(2.0, 1.0, 1.0, "test"))
    assert time.monotonic() - started < 6, "the wall clock bounds it, connect and headers included"
    assert "\n" not in str(err.value) and f"{shard}.safetensors" in str(err.value)


def test_a_file_the_bases_index_names_but_the_hub_lacks_is_named():
    from workloads.preflight import PreflightError, base_model_layout

    files = model_files({**LANGUAGE, **VISION}, 2)
    files.pop("model-00002-of-00002.safetensors")
    with serve(FakeHub.serving(files)) as url, pytest.raises(PreflightError) as err:
        base_model_layout(REPO, COMMIT, GOOD, url)
    assert str(err.value) == f"{REPO}@{COMMIT} has no model-00002-of-00002.safetensors, which its files name"


def test_a_hub_error_behind_a_download_is_retried_and_named():
    """hf_hub_download turns a failed HEAD into LocalEntryNotFoundError; the 5xx behind it is what counts."""
    from core.deadline import Budget
    from workloads.preflight import PreflightError, base_model_layout

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

    with serve(Down) as url, pytest.raises(PreflightError) as err:
        base_model_layout(REPO, COMMIT, GOOD, url, budget=Budget(1.5, 0.5, 0.5, "test"))
    assert "HTTP 500" in str(err.value) or "did not finish answering" in str(err.value), str(err.value)


def test_a_base_revision_without_safetensors_is_one_line():
    from workloads.preflight import PreflightError, base_model_layout

    hub = FakeHub.serving({"config.json": json.dumps(CONFIG).encode(), "pytorch_model.bin": b"x"})
    with serve(hub) as url, pytest.raises(PreflightError) as err:
        base_model_layout(REPO, "main", GOOD, url)
    assert str(err.value) == f"{REPO}@main has no safetensors weights to compare with"


def test_the_whole_check_passes_a_true_export_and_names_the_differences_of_a_wrong_one(gcs):
    from workloads.workflow import export_differences

    prod = settings("prod", [f"tpu-rl:model.revision={COMMIT}"])
    hub = FakeHub.serving(model_files({**LANGUAGE, **VISION}, 2))
    upload(gcs, model_files(LANGUAGE, 3))
    with serve(hub) as url:
        assert export_differences(prod, HF_URI, GOOD, url) == []
        wrong = dict(LANGUAGE)
        wrong[f"{LANG}norm.weight"] = ("F32", [4])
        upload(gcs, model_files(wrong, 3, {**CONFIG, "architectures": ["Gemma4ForCausalLM"]}))
        found = export_differences(prod, HF_URI, GOOD, url)
    assert found == [
        'config.json architectures is ["Gemma4ForCausalLM"], the base\'s ["Gemma4ForConditionalGeneration"]',
        f"tensor {LANG}norm.weight is F32, not BF16 (weight_dtype=bfloat16)",
    ]
