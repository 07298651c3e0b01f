"""The export step makes the export the whole base model (``workloads/container/complete_export.py``): its real
container script run through ``bash`` against fake-gcs-server, the base read from the Hub cache objects the
conversion verified (the loopback Hub asked nothing), ``to_huggingface`` stood in for by the export MaxText 0.2.5
writes, laid out first (``tests.hf_files.maxtext_files``), then the program's export check on the result; and the
hostile inputs: names, indexes, endpoints that ignore ``Range``.
"""

from __future__ import annotations

import json
import os

import pytest

from core.hf_model import Tensor, compare
from tests.conftest import slug
from tests.fake_hub import COMMIT, GOOD, REPO, FakeHub
from tests.hf_files import (
    CONFIG,
    LANG,
    LANGUAGE,
    VISION,
    RangeIgnoringProxy,
    conversion_of,
    export_step,
    lay_out,
    maxtext_files,
    model_files,
    objects,
    put_verified,
    run_export,
    tensors_of,
    values_of,
)
from tests.lifecycle_walk import settings
from tests.loopback import serve
from workloads.container.complete_export import GENERATION_VALUES, RefusedError, generation_config

pytest.importorskip("safetensors")

BASE = {**LANGUAGE, **VISION}
BASE_VALUES = values_of(BASE)
TRAINED = {n: bytes(b ^ 0x5A for b in BASE_VALUES[n]) for n in LANGUAGE}
"""The language model after training: other bytes than the base's (what MaxText writes)."""
MAXTEXT_CONFIG = {**CONFIG, "transformers_version": "5.5.0.dev0"}
"""MaxText's own copy of the config (``hf_model_configs.py``), not byte for byte the base's."""
BASE_GENERATION = {
    "bos_token_id": 2,
    "eos_token_id": [1, 106],
    "pad_token_id": 0,
    "do_sample": True,
    "temperature": 1.0,
    "top_k": 64,
    "top_p": 0.95,
    "transformers_version": "5.5.0.dev0",
}
"""Gemma's ``generation_config.json`` (tests/tiny_gemma.py ``GENERATION_CONFIG``, with the version that wrote it)."""
HOSTILE_GENERATION = {
    **BASE_GENERATION,
    "num_beams": 4,
    "max_length": 8,
    "cache_implementation": "static",
    "watermarking_config": {"greenlist_ratio": 0.25},
    "assistant_model": "evil/drafter",
    "trust_remote_code": True,
    "not\na key": 1,
}
"""A base's generation config with what would change every ``generate`` of the exported model."""


class CountingHub(FakeHub):
    """The loopback Hub, every request it receives recorded (``asked``: method and path), model info included."""

    asked: list[str] = []

    @classmethod
    def serving(cls, files: dict[str, bytes]) -> type[CountingHub]:
        return type("CountingServingHub", (cls,), {"files": files, "ranges": [], "sent": [], "asked": []})

    def do_GET(self):  # noqa: N802
        type(self).asked.append(f"GET {self.path}")
        super().do_GET()

    def do_HEAD(self):  # noqa: N802
        type(self).asked.append(f"HEAD {self.path}")
        super().do_HEAD()


@pytest.mark.parametrize("shards", [1, 3], ids=["one-file", "sharded"])
@pytest.mark.slow
def test_the_export_step_makes_the_export_the_whole_base_model(gcs, tmp_path, shards):
    """MaxText's export (one ``model.safetensors``, or shards with an index) plus the base's vision tower, the
    base's config and generation config: the export check finds nothing, the trained bytes are MaxText's and
    the copied ones the base's."""
    from workloads.observe.artifacts import storage_client
    from workloads.reader import Hub
    from workloads.workflow import export_differences

    step = export_step()
    base_files = model_files(BASE, 2, values=BASE_VALUES)
    base_files["generation_config.json"] = json.dumps(HOSTILE_GENERATION).encode()
    trained = {n: LANGUAGE[n] for n in LANGUAGE}
    limit = 10**9 if shards == 1 else 64  # MaxText's 3 GiB, or small enough for three shards of these tensors
    bucket, prefix = lay_out(gcs, step, maxtext_files(trained, TRAINED, MAXTEXT_CONFIG, limit), base_files)
    hub = CountingHub.serving(base_files)
    with serve(hub) as url:
        done = run_export(step, url, tmp_path)
        assert done.returncode == 0, done.stderr
        assert hub.asked == [], "the export asks the Hub nothing"
        assert export_differences(settings("prod", []), step.output_uri, storage_client, Hub(url, GOOD, "")) == []
        found = objects(gcs, bucket, prefix)
        assert json.loads(found["config.json"]) == CONFIG and found["config.json"] == base_files["config.json"]
        assert json.loads(found["generation_config.json"]) == BASE_GENERATION, "only the keys it means to pass on"
        assert found["generation_config.json"] == generation_config(base_files["generation_config.json"])[0]
        assert '"num_beams"' in done.stdout and "left out 7 key(s) of the base's" in done.stdout
        index = json.loads(found["model.safetensors.index.json"])
        assert set(index["weight_map"]) == set(BASE)
        assert "model.safetensors" not in found, "a loader would read it alone and ignore the index"
        values = {}
        for shard in set(index["weight_map"].values()):
            values.update(tensors_of(found[shard]))
        assert {n: values[n] for n in VISION} == {n: BASE_VALUES[n] for n in VISION}, "copied unchanged"
        assert {n: values[n] for n in LANGUAGE} == TRAINED, "the trained language model is MaxText's"
        assert index["metadata"]["total_size"] == sum(len(v) for v in values.values())
        assert f"commit {COMMIT}" in done.stdout
        headers = [r for r in hub.ranges if r.split()[0].endswith(".safetensors")]
        assert all(" bytes=" in r for r in headers), f"only ranged reads of the base's shards: {hub.ranges}"

        # The step runs again (a retry after the completion): nothing changes.
        generations = {b.name: b.generation for b in gcs.list_blobs(bucket, prefix=prefix)}
        again = run_export(step, url, tmp_path)
        assert again.returncode == 0, again.stderr
        assert {b.name: b.generation for b in gcs.list_blobs(bucket, prefix=prefix)} == generations


SHARED_ROOT = "gs://shared-hub/hub/"
"""A Hub cache several stacks share (``tpu-rl:model.hubCache``), another bucket than the stack's."""


@pytest.mark.slow
def test_the_export_reads_the_objects_the_conversion_verified_and_asks_the_hub_nothing(gcs, tmp_path):
    """The completion reads the base's tensors and files from the Hub cache objects the conversion
    hashed, at the generations it hashed (the shared cache's here), by ranged reads; the Hub (serving the same base)
    receives no request, and the pod has no token for it (``HF_HUB_OFFLINE``)."""
    step = export_step()
    base_files = model_files(BASE, 2, values=BASE_VALUES)
    base_files["generation_config.json"] = json.dumps(BASE_GENERATION).encode()
    bucket, prefix = lay_out(gcs, step, maxtext_files(LANGUAGE, TRAINED, MAXTEXT_CONFIG, 64))
    put_verified(gcs, conversion_of(step), base_files, SHARED_ROOT)
    hub = CountingHub.serving(base_files)
    with serve(hub) as url:
        done = run_export(step, url, tmp_path)
    assert done.returncode == 0, done.stderr
    assert hub.asked == [], "the Hub received no request at all"
    found = objects(gcs, bucket, prefix)
    index = json.loads(found["model.safetensors.index.json"])
    values = {}
    for shard in set(index["weight_map"].values()):
        values.update(tensors_of(found[shard]))
    assert {n: values[n] for n in VISION} == {n: BASE_VALUES[n] for n in VISION}, "the cache's, unchanged"


def replace_in_cache(gcs, name: str, data: bytes) -> str:
    """The shared cache's object ``name`` written again (a new generation) with ``data``; its URI."""
    uri = f"{SHARED_ROOT}{REPO}/{COMMIT}/{name}"
    bucket, _, object_name = uri.removeprefix("gs://").partition("/")
    gcs.bucket(bucket).blob(object_name).upload_from_string(data)
    return uri


@pytest.mark.slow
def test_a_cache_object_replaced_since_the_conversion_is_hashed_again_and_refused_if_not_the_hubs(gcs, tmp_path):
    """The cache's writer fetched a shard again after the conversion (a new generation of the same bytes): the
    export hashes the new generation whole once and reads it. A shard of the same size but other bytes: refused in
    one line naming the object and both hashes, exit 3, nothing written."""
    step = export_step()
    base_files = model_files(BASE, 2, values=BASE_VALUES)
    bucket, prefix = lay_out(gcs, step, maxtext_files(LANGUAGE, TRAINED, MAXTEXT_CONFIG, 64))
    put_verified(gcs, conversion_of(step), base_files, SHARED_ROOT)
    shards = sorted(n for n in base_files if n.endswith(".safetensors"))
    uri = replace_in_cache(gcs, shards[-1], base_files[shards[-1]])
    (tmp_path / "same").mkdir()
    (tmp_path / "swapped").mkdir()
    done = run_export(step, "http://127.0.0.1:9", tmp_path / "same")
    assert done.returncode == 0, done.stderr
    assert f"{uri} was replaced since the conversion: its sha256 checked again, read at its new generation" in (
        done.stdout
    )
    for blob in gcs.list_blobs(bucket, prefix=prefix):
        blob.delete()
    lay_out(gcs, step, maxtext_files(LANGUAGE, TRAINED, MAXTEXT_CONFIG, 64))
    put_verified(gcs, conversion_of(step), base_files, SHARED_ROOT)
    original = base_files[shards[-1]]
    swapped = original[:-4] + bytes(b ^ 0xFF for b in original[-4:])
    replace_in_cache(gcs, shards[-1], swapped)
    import hashlib

    done = run_export(step, "http://127.0.0.1:9", tmp_path / "swapped")
    assert done.returncode == 3, done.stderr
    record = f"{conversion_of(step)}source.json"
    assert done.stderr.strip().splitlines()[-1] == (
        f"tpu-rl export: {uri} is sha256 {hashlib.sha256(swapped).hexdigest()}, not the Hub's {len(original)} bytes, "
        f"sha256 {hashlib.sha256(original).hexdigest()}: the Hub cache changed since the conversion verified it; run "
        f"the conversion again: delete {record} and run `make up STACK=<stack>` again"
    )
    assert not [n for n in objects(gcs, bucket, prefix) if n.startswith("model-base-")], "no base shard written"
    replace_in_cache(gcs, shards[-1], original + b"x" * 1024)  # another size: named by it, never read
    (tmp_path / "longer").mkdir()
    done = run_export(step, "http://127.0.0.1:9", tmp_path / "longer")
    assert done.returncode == 3, done.stderr
    assert (
        done.stderr.strip()
        .splitlines()[-1]
        .startswith(
            f"tpu-rl export: {uri} is {len(original) + 1024} bytes, not the Hub's {len(original)} bytes, sha256 "
        )
    )


def test_a_record_without_the_conversions_verified_objects_is_refused_in_one_line(gcs):
    """The conversion's record is the export's only source of the base: of another commit or repository, without
    ``verified`` (an earlier version's), or with an entry that is not an object at a generation with the Hub's hash:
    refused (exit 3: the same record fails every retry), saying what to run; none at all: the conversion did not
    finish."""
    from tests.conftest import put_conversion
    from workloads.container.complete_export import verified_base

    convert = "gs://tpu-rl-test/gemma4-26b/convert/0123456789/"
    gcs.create_bucket("tpu-rl-test")
    with pytest.raises(RefusedError) as err:
        verified_base(REPO, COMMIT, convert)
    assert str(err.value) == f"{convert}source.json is missing: the conversion did not finish"
    put_conversion(gcs, convert)
    entry = put_verified(gcs, convert, {"config.json": b"{}"}, SHARED_ROOT)
    found = verified_base(REPO, COMMIT, convert)
    assert found.files == {"config.json": 2} and found.commit == COMMIT and found.file("config.json") == b"{}"
    blob = gcs.bucket("tpu-rl-test").blob("gemma4-26b/convert/0123456789/source.json")
    good = json.loads(blob.download_as_bytes())
    pin = good["verified"]["config.json"]
    line = (
        f"{convert}source.json is not a record of {REPO}@{COMMIT} with the files the conversion verified: delete "
        f"{convert}source.json and run `make up STACK=<stack>` again (the conversion runs again)"
    )
    for body in [
        {**good, "commit": "f" * 40},
        {**good, "repo": "evil/model"},
        {k: v for k, v in good.items() if k != "verified"},
        {**good, "verified": {}},
        {**good, "verified": {"config.json": {**pin, "generation": "1"}}},
        {**good, "verified": {"config.json": {**pin, "object": f"{entry}other.json"}}},
        {**good, "verified": {"config.json": {**pin, "blobId": "f00"}}},
        {**good, "verified": {"../x": pin}},
        "not json",
    ]:
        blob.upload_from_string(body if isinstance(body, str) else json.dumps(body))
        with pytest.raises(RefusedError) as err:
            verified_base(REPO, COMMIT, convert)
        assert str(err.value) == line, body


@pytest.mark.slow
def test_a_retry_after_to_huggingface_wrote_again_removes_what_the_last_attempt_left(gcs, tmp_path):
    """An earlier attempt's base shard, named differently, is deleted once the new index is written."""
    step = export_step()
    files = maxtext_files(LANGUAGE, TRAINED, MAXTEXT_CONFIG, 64)
    files["model-base-00001-of-00002.safetensors"] = b"left by an earlier attempt"
    bucket, prefix = lay_out(gcs, step, files, model_files(BASE, 2, values=BASE_VALUES))
    done = run_export(step, "http://127.0.0.1:9", tmp_path)
    assert done.returncode == 0, done.stderr
    found = objects(gcs, bucket, prefix)
    assert "model-base-00001-of-00002.safetensors" not in found
    named = set(json.loads(found["model.safetensors.index.json"])["weight_map"].values())
    assert {n for n in found if n.endswith(".safetensors")} == named


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (
            lambda t, c: t.pop(f"{LANG}norm.weight"),
            f"the export lacks tensor {LANG}norm.weight of the base's language model, which MaxText should have "
            "written (1 such): refusing to fill the trained model with the base's",
        ),
        (
            lambda t, c: t.__setitem__(f"{LANG}layers.9.mlp.weight", ("BF16", [4])),
            f"MaxText wrote tensor {LANG}layers.9.mlp.weight, which {REPO}@{COMMIT} does not have (1 such)",
        ),
        (
            lambda t, c: c["text_config"].__setitem__("num_hidden_layers", 3),
            "the config.json MaxText wrote is not google/gemma-4-26b-a4b-it's model: config.json "
            "text_config.num_hidden_layers is 3, the base's 2",
        ),
    ],
    ids=["lacks-a-trained-tensor", "an-extra-tensor", "another-architecture"],
)
@pytest.mark.slow
def test_what_cannot_be_made_whole_is_refused_in_one_line_and_not_retried(gcs, tmp_path, change, words):
    step = export_step()
    tensors, config = dict(LANGUAGE), json.loads(json.dumps(MAXTEXT_CONFIG))
    change(tensors, config)
    values = {n: TRAINED.get(n, b"\0" * 8) for n in tensors}
    bucket, prefix = lay_out(
        gcs, step, maxtext_files(tensors, values, config), model_files(BASE, 2, values=BASE_VALUES)
    )
    done = run_export(step, "http://127.0.0.1:9", tmp_path)
    assert done.returncode == 3, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("tpu-rl export:")]
    assert lines == [f"tpu-rl export: {words}"], done.stderr
    assert "model.safetensors.index.json" not in objects(gcs, bucket, prefix), "nothing was written"


# ---------------------------------------------------------------------------------------------
# Hostile names, from GCS and from the Hub


HOSTILE_NAMES = [
    "../../x.safetensors",
    "/etc/passwd",
    "sub/config.json",
    "a\nb.json",
    ".hidden",
    "notes.txt",
    "README.md",
]


@pytest.mark.slow
def test_an_export_holding_an_object_that_is_not_a_model_file_is_refused(gcs_folders, tmp_path):
    """GCS names are the listing's: each hostile name alone makes the export check name it in one line; the
    export step refuses the first before reading or writing anything (one run: each name is refused by the
    same line of the program, ``core.hf_model.export_file_problem``, pinned in test_export_check)."""
    from workloads.observe.artifacts import call_options
    from workloads.observe.exported import read_exported

    gcs = gcs_folders
    step = export_step()
    bucket, prefix = lay_out(
        gcs, step, maxtext_files(LANGUAGE, TRAINED, MAXTEXT_CONFIG), model_files(BASE, 2, values=BASE_VALUES)
    )
    for name in HOSTILE_NAMES:
        gcs.bucket(bucket).blob(prefix + name).upload_from_string(b"{}")
        found = read_exported(gcs, step.output_uri, **call_options())
        assert len(found.problems) == 1 and "holds an object that is not a file of the export" in found.problems[0]
        assert "\n" not in found.problems[0] and name not in found.files
        gcs.bucket(bucket).blob(prefix + name).delete()
    gcs.bucket(bucket).blob(prefix + HOSTILE_NAMES[0]).upload_from_string(b"{}")
    done = run_export(step, "http://127.0.0.1:9", tmp_path)
    assert done.returncode == 3 and "holds an object that is not a file of the export" in done.stderr, done.stderr
    assert "model.safetensors.index.json" not in objects(gcs, bucket, prefix), "nothing was written"


@pytest.mark.parametrize("shard", ["../../x.safetensors", "/abs.safetensors", "model.bin", "a\x00.safetensors"])
@pytest.mark.slow
def test_an_index_naming_a_shard_that_cannot_be_one_is_refused_from_either_side(gcs, tmp_path, shard):
    """The base's index (the Hub) and the export's (GCS) are inputs too: their shard names are checked before
    any URL or path is built from them (the export step run once, for the first name)."""
    from workloads.observe.artifacts import call_options
    from workloads.observe.exported import read_exported
    from workloads.preflight import PreflightError, base_model_layout

    step = export_step()
    files = maxtext_files(LANGUAGE, TRAINED, MAXTEXT_CONFIG, 64)
    index = json.loads(files["model.safetensors.index.json"])
    index["weight_map"][f"{LANG}norm.weight"] = shard
    files["model.safetensors.index.json"] = json.dumps(index).encode()
    lay_out(gcs, step, files)
    problems = read_exported(gcs, step.output_uri, **call_options()).problems
    assert len(problems) == 1 and "model.safetensors.index.json names a shard that cannot be one" in problems[0]

    base = model_files(BASE, 2, values=BASE_VALUES)
    base_index = json.loads(base["model.safetensors.index.json"])
    base_index["weight_map"][f"{LANG}norm.weight"] = shard
    base["model.safetensors.index.json"] = json.dumps(base_index).encode()
    put_verified(gcs, conversion_of(step), base, SHARED_ROOT)
    hub = FakeHub.serving(base)
    with serve(hub) as url:
        with pytest.raises(PreflightError) as err:
            base_model_layout(REPO, COMMIT, GOOD, url)
        assert "names a shard that cannot be one" in str(err.value) and "\n" not in str(err.value)
        if shard == "../../x.safetensors":
            done = run_export(step, url, tmp_path)
            assert done.returncode == 3 and "names a shard that cannot be one" in done.stderr, done.stderr
    assert not [r for r in hub.ranges if shard in r], "no request was built from the name"


# ---------------------------------------------------------------------------------------------
# Endpoints that ignore Range: every ranged read holds at most what it asked for

BIG = {**BASE, f"{LANG}layers.0.experts.big": ("BF16", [2048, 4096])}
"""A shard of 16 MiB, more than loopback socket buffers hold: a whole-file answer to an 8-byte read shows."""


@pytest.mark.slow
def test_a_hub_that_ignores_range_gets_no_whole_shard_read():
    """``parse_safetensors_file_metadata`` asks for 100 kB; the preflight's transport holds a reply to a ranged
    request to the range's length, so the whole shard is never taken in."""
    from workloads.preflight import PreflightError, base_model_layout

    hub: type[FakeHub] = type("IgnoresRange", (FakeHub.serving(model_files(BIG, 1)),), {"ignores_range": True})
    with serve(hub) as url, pytest.raises(PreflightError) as err:
        base_model_layout(REPO, COMMIT, GOOD, url)
    assert "the safetensors header of " in str(err.value), str(err.value)
    assert (
        "model-00001-of-00001.safetensors replied more than 100001 bytes (check HF_ENDPOINT or a proxy in the way)"
        in str(err.value)
    ), str(err.value)
    assert max(hub.sent) < len(hub.files["model-00001-of-00001.safetensors"]), hub.sent


@pytest.mark.slow
def test_gcs_that_ignores_range_gets_no_whole_shard_read(gcs, monkeypatch, tmp_path):
    """The export check's header reads through a proxy that drops ``Range``: the 8-byte read stops after its
    8 bytes (at the library's first 8 kB chunk), not after the 4 MiB shard, and says so in one line."""
    from core.hf_model import ReplyTooLargeError
    from workloads.observe.artifacts import call_options, storage_client
    from workloads.observe.exported import read_exported

    step = export_step()
    bucket, prefix = lay_out(
        gcs, step, maxtext_files(BIG, values_of(BIG), MAXTEXT_CONFIG), model_files(BIG, 1, values=values_of(BIG))
    )
    size = gcs.bucket(bucket).get_blob(prefix + "model.safetensors").size
    proxy = RangeIgnoringProxy(os.environ["STORAGE_EMULATOR_HOST"])
    try:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", proxy.url)
        with pytest.raises(ReplyTooLargeError) as err:
            read_exported(storage_client(), step.output_uri, **call_options())
        assert str(err.value).endswith("model.safetensors: the server sent more than the 8 bytes asked for")
        assert proxy.sent[-1] < size, proxy.sent
        done = run_export(step, "http://127.0.0.1:9", tmp_path)
        assert done.returncode == 1, done.stderr
        assert "model.safetensors: the server sent more than the 8 bytes asked for" in done.stderr
        assert proxy.sent[-1] < size, proxy.sent
    finally:
        proxy.close()


@pytest.mark.slow
def test_a_hub_cache_behind_gcs_that_ignores_range_gets_no_whole_shard_read(gcs, monkeypatch):
    """The completion's reads of the verified objects are ranged: through a proxy that drops ``Range``, a shard's
    8-byte header read stops after its 8 bytes (at the library's first 8 kB chunk), not after the 16 MiB shard, in
    one line naming the object; read straight, the same read is the shard's 8 bytes and nothing more."""
    from core.hf_model import ReplyTooLargeError
    from tests.conftest import put_conversion
    from workloads.container.complete_export import verified_base

    files = model_files(BIG, 1, values=values_of(BIG))
    shard = "model-00001-of-00001.safetensors"
    convert = "gs://tpu-rl-test/gemma4-26b/convert/0123456789/"
    gcs.create_bucket("tpu-rl-test")
    put_conversion(gcs, convert)
    uri = put_verified(gcs, convert, files, SHARED_ROOT)
    assert verified_base(REPO, COMMIT, convert).read(shard, 8, 0, 7) == files[shard][:8]
    proxy = RangeIgnoringProxy(os.environ["STORAGE_EMULATOR_HOST"])
    try:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", proxy.url)
        base = verified_base(REPO, COMMIT, convert)
        with pytest.raises(ReplyTooLargeError) as err:
            base.header(shard)
        assert str(err.value) == f"{uri}{shard}: the server sent more than the 8 bytes asked for"
        assert proxy.sent and proxy.sent[-1] < len(files[shard]), proxy.sent
    finally:
        proxy.close()


@pytest.mark.pure
def test_the_language_model_written_by_maxtext_and_the_rest_copied_compare_equal_to_the_base():
    """The comparison of a whole export: every base tensor, MaxText's in BF16, the copied ones in the base's
    dtype; the base's config."""
    from tests.hf_files import layout

    base = layout({**BASE, "model.vision_tower.std_scale": ("F32", [4])})
    whole = layout({**BASE, "model.vision_tower.std_scale": ("F32", [4])})
    assert compare(whole, base) == []
    assert compare(layout(LANGUAGE), base)[0] == (
        "tensor model.embed_vision.embedding_projection.weight of the base is missing from the export"
    )
    wrong = layout({**BASE, "model.vision_tower.std_scale": ("BF16", [4])})
    assert compare(wrong, base) == [
        "tensor model.vision_tower.std_scale is BF16, the base's F32 (copied from the base unchanged)"
    ]
    assert Tensor("BF16", (4,)) == whole.tensors[f"{LANG}norm.weight"]


# ---------------------------------------------------------------------------------------------
# The generation config: only the keys the export means to pass on


@pytest.mark.pure
def test_the_generation_config_keeps_the_tokens_and_sampling_defaults_only():
    written, left = generation_config(json.dumps(HOSTILE_GENERATION).encode())
    assert json.loads(written) == BASE_GENERATION
    assert written == (json.dumps(BASE_GENERATION, indent=2, sort_keys=True) + "\n").encode(), (
        "as transformers writes one"
    )
    assert left == [
        '"assistant_model"',
        '"cache_implementation"',
        '"max_length"',
        '"not\\na key"',
        '"num_beams"',
        '"trust_remote_code"',
        '"watermarking_config"',
    ], "named as JSON strings: one line, no control character"
    assert generation_config(written) == (written, []), "written again, unchanged"


@pytest.mark.pure
@pytest.mark.parametrize(
    ("key", "value", "kept"),
    [
        ("eos_token_id", 1, True),
        ("eos_token_id", [1, 106], True),
        ("eos_token_id", [], False),
        ("eos_token_id", [1, "x"], False),
        ("eos_token_id", True, False),
        ("pad_token_id", None, False),
        ("bos_token_id", -1, False),
        ("do_sample", 1, False),
        ("do_sample", False, True),
        ("temperature", 0, True),
        ("temperature", "1.0", False),
        ("top_k", 64.0, False),
        ("top_k", False, False),
        ("top_p", 0.95, True),
        ("top_p", -0.1, False),
        ("transformers_version", "5.24.0", True),
        ("transformers_version", "x" * 65, False),
        ("transformers_version", "5\n", False),
    ],
    ids=lambda value: slug(str(value)),
)
def test_a_kept_key_of_another_shape_is_left_out(key, value, kept):
    written, left = generation_config(json.dumps({key: value}).encode())
    assert (json.loads(written) == {key: value}) is kept and (left == [json.dumps(key)]) is not kept


@pytest.mark.pure
@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (b"nope", "generation_config.json is not JSON"),
        (b"\xff", "generation_config.json is not JSON"),
        (b"[" * 100_000, "generation_config.json is nested deeper than 64 levels"),
        (b"[1, 2]", "generation_config.json is not an object"),
    ],
    ids=["not-json", "not-utf-8", "nested-too-deeply", "a-list"],
)
def test_a_generation_config_that_is_not_one_is_refused(raw, words):
    with pytest.raises(RefusedError) as err:
        generation_config(raw)
    assert str(err.value) == words


@pytest.mark.slow  # imports transformers (the slow tier's)
def test_each_generation_key_is_one_transformers_generation_config_knows():
    """``GENERATION_VALUES`` against the installed transformers (5.24, make test-slow): each is an attribute of
    ``GenerationConfig``, and what the export writes loads as one with those values, nothing else set."""
    transformers = pytest.importorskip("transformers", reason="the slow tier needs transformers (make test-slow)")
    default = transformers.GenerationConfig()
    assert [key for key in GENERATION_VALUES if not hasattr(default, key)] == []
    loaded = transformers.GenerationConfig.from_dict(
        json.loads(generation_config(json.dumps(BASE_GENERATION).encode())[0])
    )
    assert {key: getattr(loaded, key) for key in GENERATION_VALUES} == BASE_GENERATION
    changed = {k for k, v in loaded.to_diff_dict().items() if k != "transformers_version"}
    assert changed <= set(GENERATION_VALUES), "nothing else set"
    assert default.num_beams in (None, 1) and loaded.num_beams == default.num_beams, "the default: no beam search"
