"""The Hub cache's boundaries, in process and fast (the programs run for real against fake-gcs-server and the loopback
Hub in tests/test_base_snapshot.py and tests/test_export_complete.py, the slow tier): a file's content as the Hub
names it (``core.hf_model.HubFile``), an entry's record, how the conversion takes each file (``base_snapshot.cached``:
a copy of another hash is never used), which record stands in for the Hub out of its reach (the stack's own,
``base_snapshot.recorded``), how training takes each dataset file (``stage_dataset.cache_dataset``: by its hash, never
its size), the export's pins (``complete_export.pin_of``), and which steps run with the Hub switched off."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from core.hf_model import BLOB_ID, SHA256, Digest, HubFile, file_problem, hub_file, recorded_file
from workloads.container import base_snapshot
from workloads.container.base_snapshot import (
    Entry,
    FailedError,
    cached,
    held_copy,
    own_root,
    read_model_entry,
    recorded,
)
from workloads.container.complete_export import pin_of

pytestmark = pytest.mark.pure

HELLO = b"hello world\n"
HELLO_BLOB = "3b18e512dba79e4c8300dd08aeb37f8e728b8dad"
"""``printf 'hello world\\n' | git hash-object --stdin``."""
HELLO_SHA256 = "a948904f2f0f479b8f8197694b30184b0d2ed1c1cd2a1ec0fb85d299a192a447"
"""``printf 'hello world\\n' | sha256sum``."""
SAME_SIZE = b"hello w0rld\n"


def test_a_file_is_named_by_its_lfs_sha256_else_its_git_blob_id(tmp_path):
    """The Hub's ``lfs.sha256`` first (an LFS file's ``blobId`` is its pointer file's), else the Git blob id; a sibling
    without a size or a hash names nothing. Each is computed as Git and sha256sum compute it."""
    assert hub_file(12, HELLO_SHA256, "0" * 40) == HubFile(12, SHA256, HELLO_SHA256)
    assert hub_file(12, None, HELLO_BLOB) == HubFile(12, BLOB_ID, HELLO_BLOB)
    for size, sha256, blob in [
        (None, HELLO_SHA256, None),
        (-1, HELLO_SHA256, None),
        (12, "f00", "bar"),
        (12.0, HELLO_SHA256, None),
    ]:
        assert hub_file(size, sha256, blob) is None, (size, sha256, blob)
    path = tmp_path / "f"
    path.write_bytes(HELLO)
    assert file_problem(path, HubFile(12, SHA256, HELLO_SHA256), "f") is None
    assert file_problem(path, HubFile(12, BLOB_ID, HELLO_BLOB), "f") is None
    path.write_bytes(SAME_SIZE)
    assert file_problem(path, HubFile(12, SHA256, HELLO_SHA256), "gs://b/f") == (
        f"gs://b/f is sha256 {hashlib.sha256(SAME_SIZE).hexdigest()}, not the Hub's 12 bytes, sha256 {HELLO_SHA256}"
    )
    path.write_bytes(HELLO + b"x")
    assert file_problem(path, HubFile(12, BLOB_ID, HELLO_BLOB), "f", "the recorded") == (
        f"f is 13 bytes, not the recorded 12 bytes, blobId {HELLO_BLOB}"
    )


def test_a_digest_fed_in_chunks_is_the_files():
    """``Digest`` is the sink a GCS download writes into: chunk by chunk, the same hash as the whole."""
    digest = Digest(HubFile(12, BLOB_ID, HELLO_BLOB))
    for at in range(0, len(HELLO), 5):
        assert digest.write(HELLO[at : at + 5]) == len(HELLO[at : at + 5])
    assert digest.problem("x") is None


def test_a_record_is_read_back_as_written_and_nothing_else():
    found = HubFile(12, SHA256, HELLO_SHA256)
    assert recorded_file(found.as_json()) == found
    for value in [12, {"size": 12}, {"size": 12, "sha256": HELLO_SHA256, "x": 1}, {"size": "12", "blobId": HELLO_BLOB}]:
        assert recorded_file(value) is None, value


class FakeBlob:
    """A google-cloud-storage ``Blob`` of ``FakeBucket``: read at a generation (gone: ``NotFound``), written."""

    def __init__(self, bucket: FakeBucket, name: str, generation: int | None = None) -> None:
        self.bucket, self.name, self.generation = bucket, name, generation

    @property
    def size(self) -> int:
        return len(self.bucket.objects[self.name][1])

    def exists(self, timeout: float = 0) -> bool:
        return self.name in self.bucket.objects

    def download_as_bytes(self, start: int = 0, end: int = 0, timeout: float = 0) -> bytes:
        return self.bucket.objects[self.name][1][start : end + 1]

    def _at_generation(self) -> bytes:
        from google.api_core.exceptions import NotFound

        generation, data = self.bucket.objects.get(self.name, (0, b""))
        if generation != self.generation:
            raise NotFound("gone")
        self.bucket.reads.append(self.name)
        return data

    def download_to_filename(self, path: str, timeout: float = 0) -> None:
        Path(path).write_bytes(self._at_generation())

    def download_to_file(self, sink: Any, timeout: float = 0) -> None:
        """As the library writes a download into a file object: in chunks (8 bytes here)."""
        data = self._at_generation()
        for at in range(0, len(data), 8):
            sink.write(data[at : at + 8])

    def upload_from_filename(self, path: str, timeout: float = 0) -> None:
        self.bucket.put(self.name, Path(path).read_bytes())
        self.generation = self.bucket.objects[self.name][0]

    def upload_from_string(self, data: str, content_type: str = "", timeout: float = 0) -> None:
        self.bucket.put(self.name, data.encode())


class FakeBucket:
    def __init__(self) -> None:
        self.objects: dict[str, tuple[int, bytes]] = {}
        self.reads: list[str] = []
        self.generations = 100

    def put(self, name: str, data: bytes) -> None:
        self.generations += 1
        self.objects[name] = (self.generations, data)

    def get_blob(self, name: str, timeout: float = 0) -> FakeBlob | None:
        return FakeBlob(self, name, self.objects[name][0]) if name in self.objects else None

    def blob(self, name: str, generation: int | None = None) -> FakeBlob:
        return FakeBlob(self, name, generation)


EXPECTED = HubFile(12, SHA256, HELLO_SHA256)
WHERE = "google/gemma@" + "0" * 40


def entry(bucket: FakeBucket, uri: str, writable: bool, files: dict | None) -> Entry:
    """An entry of ``bucket`` under ``e/``; ``writable``: where the test puts it (the conversion writes the last)."""
    return Entry(uri, bucket, "e/", files)


@pytest.fixture
def hub(monkeypatch, tmp_path):
    """The Hub's ``hf_hub_download``, in process: ``config.json`` as the Hub holds it; the names it was asked for."""
    import huggingface_hub

    asked: list[str] = []

    def download(repo, name, repo_type, revision, local_dir, etag_timeout):
        asked.append(name)
        path = Path(local_dir) / name
        path.write_bytes(HELLO)
        return str(path)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    return asked


def test_a_same_size_copy_is_one_line_never_used_and_the_hubs_file_goes_to_the_writable_entry(hub, tmp_path, capsys):
    """A reader's shared entry holds another file of the same size: one line, not used; its own entry lacks it: the
    Hub's, hashed, goes into the writable entry, and the object used is that one at its generation."""
    shared, own = FakeBucket(), FakeBucket()
    shared.put("e/config.json", SAME_SIZE)
    entries = [entry(shared, "gs://s/e/", False, {"config.json": EXPECTED}), entry(own, "gs://o/e/", True, None)]
    pin = cached("config.json", EXPECTED, entries, tmp_path, WHERE, online=True)
    assert hub == ["config.json"] and (tmp_path / "config.json").read_bytes() == HELLO
    assert own.objects["e/config.json"][1] == HELLO and shared.objects["e/config.json"][1] == SAME_SIZE
    assert pin == {
        "object": "gs://o/e/config.json",
        "generation": own.objects["e/config.json"][0],
        **EXPECTED.as_json(),
    }
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == (
        f"tpu-rl base: gs://s/e/config.json is sha256 {hashlib.sha256(SAME_SIZE).hexdigest()}, not the Hub's 12 bytes, "
        f"sha256 {HELLO_SHA256}: not used"
    )


def test_a_copy_as_the_hub_names_it_is_used_at_the_generation_hashed(hub, tmp_path):
    shared = FakeBucket()
    shared.put("e/config.json", HELLO)
    pin = cached("config.json", EXPECTED, [entry(shared, "gs://s/e/", True, None)], tmp_path, WHERE, online=True)
    assert hub == [] and pin["generation"] == shared.objects["e/config.json"][0]


def test_an_entry_whose_record_is_not_the_hubs_is_not_even_read(hub, tmp_path, capsys):
    shared = FakeBucket()
    shared.put("e/config.json", SAME_SIZE)
    forged = HubFile(12, SHA256, hashlib.sha256(SAME_SIZE).hexdigest())
    cached("config.json", EXPECTED, [entry(shared, "gs://s/e/", True, {"config.json": forged})], tmp_path, WHERE, True)
    assert shared.reads == [] and hub == ["config.json"]
    assert "gs://s/e/config.json: entry.json records 12 bytes, sha256 " in capsys.readouterr().err


def test_with_the_hub_out_of_reach_a_copy_of_another_hash_fails_in_one_line_naming_both(hub, tmp_path):
    own = FakeBucket()
    own.put("e/config.json", SAME_SIZE)
    with pytest.raises(FailedError) as err:
        cached(
            "config.json", EXPECTED, [entry(own, "gs://o/e/", True, {"config.json": EXPECTED})], tmp_path, WHERE, False
        )
    assert str(err.value) == (
        f"gs://o/e/config.json is sha256 {hashlib.sha256(SAME_SIZE).hexdigest()}, not the recorded 12 bytes, sha256 "
        f"{HELLO_SHA256}, and the Hub is out of reach to send it again"
    )
    assert hub == [] and not (tmp_path / "config.json").exists(), "nothing left for to_maxtext"


def test_a_file_the_hub_sends_wrong_is_never_kept(monkeypatch, tmp_path):
    import huggingface_hub

    def download(repo, name, repo_type, revision, local_dir, etag_timeout):
        (Path(local_dir) / name).write_bytes(SAME_SIZE)
        return str(Path(local_dir) / name)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    own = FakeBucket()
    with pytest.raises(FailedError) as err:
        cached("config.json", EXPECTED, [entry(own, "gs://o/e/", True, None)], tmp_path, WHERE, True)
    assert str(err.value).startswith(f"config.json of {WHERE} as the Hub sent it is sha256 ")
    assert own.objects == {}, "nothing kept in the cache"


def test_with_the_hub_out_of_reach_only_the_stacks_own_record_stands_in_and_a_size_alone_is_refused():
    """The stack's own record (``own_root``: its bucket, its conversion's prefix) stands in for the
    Hub, never a shared entry's, which any writer of the shared folder may have rewritten; no own record, or one naming
    a file by its size only (an earlier version's entry): refused, one line, whatever the objects are."""
    other = HubFile(12, BLOB_ID, HELLO_BLOB)
    own = entry(FakeBucket(), "gs://o/e/", True, {"a": other, "b": EXPECTED})
    assert recorded(own, "the Hub is down", WHERE) == {"a": other, "b": EXPECTED}
    with pytest.raises(FailedError) as err:
        recorded(entry(FakeBucket(), "gs://o/e/", True, None), "the Hub is down", WHERE)
    assert str(err.value) == (
        "the Hub is down, and gs://o/e/entry.json, the stack's own record of the Hub's hashes, names no file of "
        f"{WHERE}: offline, no other record is trusted (any writer of a shared cache's folder can rewrite its "
        "entry.json); the next `make up` runs the conversion again once the Hub answers"
    )
    with pytest.raises(FailedError) as err:
        recorded(entry(FakeBucket(), "gs://o/e/", True, {"a": EXPECTED, "b": None}), "the Hub is down", WHERE)
    assert (
        str(err.value)
        == f"the Hub is down, and gs://o/e/entry.json records b of {WHERE} by its size alone, not the Hub's hash"
    )


def test_the_stacks_own_record_is_in_its_own_cache_beside_the_conversions_output():
    """``own_root`` of a conversion's output is ``core.layout.hub_cache``: the prefix only the stack's conversion
    writes (``infra.gcp.access``), whatever folder ``tpu-rl:model.hubCache`` names."""
    from core.layout import hub_cache, step_output

    assert own_root(step_output("b-tpu-rl-prod", "gemma4-26b", "convert", "0123456789")) == hub_cache(
        "b-tpu-rl-prod", "gemma4-26b"
    )


def test_a_copy_hashed_without_a_local_file_is_read_at_one_generation():
    """``held_copy`` with no ``path`` (a dataset file: the run's copy is made inside GCS): hashed as it streams, the
    generation hashed returned; a same-size copy of another hash, or one replaced while it was read, is not used."""
    bucket = FakeBucket()
    bucket.put("e/f", HELLO)
    assert held_copy(bucket, "e/f", EXPECTED, "gs://b/e/f", "the Hub's") == (bucket.objects["e/f"][0], None)
    bucket.put("e/f", SAME_SIZE)
    generation, problem = held_copy(bucket, "e/f", EXPECTED, "gs://b/e/f", "the Hub's")
    assert generation is None and problem == (
        f"gs://b/e/f is sha256 {hashlib.sha256(SAME_SIZE).hexdigest()}, not the Hub's 12 bytes, sha256 {HELLO_SHA256}"
    )
    assert held_copy(bucket, "e/g", EXPECTED, "gs://b/e/g", "the Hub's") == (None, None), "none: nothing to say"


def test_an_entry_record_is_read_in_either_format_and_anything_else_is_not_used(capsys):
    bucket = FakeBucket()
    ids = ("google/gemma", "0" * 40)
    good = {"repo": ids[0], "commit": ids[1], "files": {"config.json": EXPECTED.as_json(), "old.json": 3}}
    bucket.put("e/entry.json", json.dumps(good).encode())
    assert read_model_entry(bucket, "e/", "gs://b/e/", ids) == {"config.json": EXPECTED, "old.json": None}
    for bad in [
        {**good, "commit": "1" * 40},
        {**good, "files": {"config.json": {"size": 12, "sha256": "f00"}}},
        {**good, "files": {"../x": 3}},
        {**good, "files": {"config.json": -1}},
        [],
    ]:
        bucket.put("e/entry.json", json.dumps(bad).encode())
        assert read_model_entry(bucket, "e/", "gs://b/e/", ids) is None, bad
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"tpu-rl base: gs://b/e/entry.json is not the cache entry of google/gemma@{ids[1]}: not used"
    )
    assert read_model_entry(FakeBucket(), "e/", "gs://b/e/", ids) is None


PARQUET = "data/train-0.parquet"


@pytest.fixture
def dataset_hub(monkeypatch):
    """The Hub's ``hf_hub_download`` of a dataset, in process (``PARQUET`` is ``HELLO``), and every cache folder the
    program names read as one ``FakeBucket`` under ``e/``; the names the Hub was asked for, and the bucket."""
    import huggingface_hub

    asked: list[str] = []
    bucket = FakeBucket()

    def download(repo, name, repo_type, revision, local_dir, etag_timeout):
        assert repo_type == "dataset"
        asked.append(name)
        path = Path(local_dir) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(HELLO)
        return str(path)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    monkeypatch.setattr(base_snapshot, "folder", lambda uri: (bucket, "e/"))
    return asked, bucket


def test_a_cached_dataset_file_is_reused_on_its_hash_and_a_same_size_one_fetched_again(dataset_hub, capsys):
    """``stage_dataset.cache_dataset`` takes a cached file on the Hub's hash, never its size: the same
    bytes are used at the generation hashed, with no call to the Hub; a same-size file of another hash is one line and
    comes from the Hub again, hashed; the entry then records each file as the Hub names it."""
    from workloads.container.stage_dataset import cache_dataset

    asked, bucket = dataset_hub
    bucket.put("e/" + PARQUET, HELLO)
    verified = cache_dataset("a/b", "0" * 40, {PARQUET: EXPECTED}, ("data/*",), "gs://c/e/")
    assert asked == [] and verified == {PARQUET: bucket.objects["e/" + PARQUET][0]}
    entry = json.loads(bucket.objects["e/entry.json"][1])
    assert entry == {"repo": "a/b", "commit": "0" * 40, "files": {PARQUET: EXPECTED.as_json()}, "patterns": ["data/*"]}
    bucket.put("e/" + PARQUET, SAME_SIZE)
    verified = cache_dataset("a/b", "0" * 40, {PARQUET: EXPECTED}, ("data/*",), "gs://c/e/")
    assert asked == [PARQUET] and bucket.objects["e/" + PARQUET][1] == HELLO
    assert verified == {PARQUET: bucket.objects["e/" + PARQUET][0]}
    assert (
        f"tpu-rl base: gs://c/e/{PARQUET} is sha256 {hashlib.sha256(SAME_SIZE).hexdigest()}, not the Hub's 12 bytes, "
        f"sha256 {HELLO_SHA256}: not used"
    ) in capsys.readouterr().err.splitlines()


def test_a_dataset_entry_stands_for_the_hub_only_with_every_files_hash():
    """A pinned run asks the Hub nothing when the stack's entry holds its patterns with each file's hash; a file
    named by its size alone (an earlier version's entry), or a pattern it does not hold, sends it to the Hub; a
    record that is not the entry's is refused naming the entry to delete."""
    from workloads.container.base_snapshot import RefusedError
    from workloads.container.stage_dataset import DatasetEntry, held_files, read_dataset_entry

    other = HubFile(12, BLOB_ID, HELLO_BLOB)
    held = DatasetEntry({PARQUET: EXPECTED, "data/x.json": other, "README.md": 9}, ("data/*",))
    assert held_files(held, ("data/*",), WHERE) == {PARQUET: EXPECTED, "data/x.json": other}
    assert held_files(held, ("data/*", "README.md"), WHERE) is None, "a pattern it does not hold whole"
    assert held_files(DatasetEntry({**held.files, "data/y": 3}, ("data/*",)), ("data/*",), WHERE) is None
    assert held_files(DatasetEntry({}, ("data/*",)), ("data/*",), WHERE) is None, "a claim with no file"
    bucket = FakeBucket()
    good = {"repo": "a/b", "commit": "0" * 40, "files": {PARQUET: EXPECTED.as_json(), "old": 3}, "patterns": ["d"]}
    bucket.put("e/entry.json", json.dumps(good).encode())
    assert read_dataset_entry(bucket, "e/", "gs://c/e/", "a/b", "0" * 40) == DatasetEntry(
        {PARQUET: EXPECTED, "old": 3}, ("d",)
    )
    for bad in [{**good, "files": {PARQUET: {"size": 12, "sha256": "f00"}}}, {**good, "files": {"x": -1}}]:
        bucket.put("e/entry.json", json.dumps(bad).encode())
        with pytest.raises(RefusedError, match="delete gs://c/e/ and run"):
            read_dataset_entry(bucket, "e/", "gs://c/e/", "a/b", "0" * 40)


def test_the_exports_pin_is_an_object_at_a_generation_with_the_hubs_hash():
    pin = pin_of("config.json", {"object": "gs://b/hub/r/c/config.json", "generation": 7, **EXPECTED.as_json()})
    assert pin is not None and (pin.uri, pin.generation, pin.expected) == ("gs://b/hub/r/c/config.json", 7, EXPECTED)
    good = {"object": "gs://b/hub/r/c/config.json", "generation": 7, **EXPECTED.as_json()}
    for bad in [
        {**good, "generation": "7"},
        {**good, "generation": 0},
        {**good, "object": "gs://b/hub/r/c/other.json"},
        {**good, "object": "gs://b/config.json"},
        {**good, "object": "/tmp/config.json"},
        {k: v for k, v in good.items() if k != "sha256"},
        "gs://b/hub/r/c/config.json",
    ]:
        assert pin_of("config.json", bad) is None, bad


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_only_the_steps_that_need_the_hub_hold_its_token_and_reach_it(stack):
    """The conversion reads the Hub (the base's files and description), training too (its dataset's first staging;
    vLLM loads the model's config through huggingface_hub), the publication writes it (its own token). The export and
    the evaluation need nothing from it: no token, and ``HF_HUB_OFFLINE=1``, with which huggingface_hub refuses every
    request (2.4.0: ``constants.is_offline_mode``, checked by ``utils/_http.py`` ``hf_request_event_hook`` on every
    request of its session; "If set, no HTTP calls will be made to the Hugging Face Hub",
    https://huggingface.co/docs/huggingface_hub/package_reference/environment_variables)."""
    from tests.lifecycle_walk import settings
    from workloads.specs.step_specs import plan_workflow

    every = ["tpu-rl:publish.repo=me/model", "tpu-rl:workflow.steps.evaluate=true"]
    seen = {}
    for step in plan_workflow(settings(stack, every)):
        pods = [job["template"]["spec"]["template"]["spec"] for job in step.manifest["spec"]["replicatedJobs"]]
        env = {e["name"]: e for pod in pods for c in pod["containers"] for e in c.get("env", [])}
        token = env.get("HF_TOKEN", {}).get("valueFrom", {}).get("secretKeyRef", {}).get("name")
        seen[step.step] = (token, env.get("HF_HUB_OFFLINE", {}).get("value"))
    assert seen == {
        "convert": ("hf-token", None),
        "train": ("hf-token", None),
        "export": (None, "1"),
        "evaluate": (None, "1"),
        "publish": ("hf-write-token", None),
    }


def test_the_conversion_reads_the_shared_cache_first_and_writes_only_where_it_is_the_writer():
    """The conversion's words: ``CACHE_URI`` (written) then ``SHARED_URI`` (read first); hashed alike whatever they
    are (``workloads.specs.step_specs.HUB_CACHE``)."""
    from tests.lifecycle_walk import settings
    from workloads.specs.step_specs import plan_workflow

    own = "gs://my-tpu-prod-project-tpu-rl-prod/gemma4-26b/convert/hub/"
    names = set()
    for overrides, written, read in [
        ([], own, own),
        (
            ["tpu-rl:model.hubCache=gs://shared-hub/hub/", "tpu-rl:model.hubCacheWriter=prod"],
            "gs://shared-hub/hub/",
            "gs://shared-hub/hub/",
        ),
        (
            ["tpu-rl:model.hubCache=gs://shared-hub/hub/", "tpu-rl:model.hubCacheWriter=dev"],
            own,
            "gs://shared-hub/hub/",
        ),
    ]:
        convert = plan_workflow(settings("prod", overrides)).steps[0]
        line = next(line for line in convert.scripts["data"]["run.sh"].splitlines() if " snapshot " in line)
        assert line.endswith(f" {written} /scratch/base-model {read})"), line
        names.add(convert.name)
    assert len(names) == 1, "neither the folder nor its writer names the step"
    assert base_snapshot.operation(["snapshot", *"abcdef"]) is not None
    with pytest.raises(base_snapshot.RefusedError):
        base_snapshot.operation(["snapshot", *"abcde"])
