"""One commit of the base model for every step (``workloads/container/base_snapshot.py``) and training's dataset
(``workloads/container/stage_dataset.py``): the programs the conversion, training and the export run, as their pods run
them (``python3 /tpu-rl/<file>``, the files of the step's ConfigMap in one folder), against fake-gcs-server and the
loopback Hub; what they write is read back by the program's own readers (``artifacts.source_record``,
``artifacts.dataset_record``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.names import SETUP_FAILURE_EXIT
from tests.conftest import SENTINEL_TOKEN, put
from tests.fake_hub import COMMIT, MOVED, REPO, FakeHub, sibling
from tests.fake_hub_datasets import DATASET, DATASET_FILES, DatasetHub
from tests.loopback import serve
from workloads.observe.artifacts import converted_problem, dataset_record, source_record
from workloads.specs.commands import program_files

# The whole module is the slow tier (`make test-slow`, in CI; docs/testing.md "Timings"): each test runs the
# program or a step for real against loopback servers, seconds apiece. The fast tier keeps the same boundaries
# in pure form (the builders' and readers' own tests).
pytestmark = pytest.mark.slow

BUCKET = "tpu-rl-test"
OUTPUT = f"gs://{BUCKET}/gemma4-26b/convert/0123456789/"
TOKENIZER = b'{"version": "1.0", "model": {"type": "BPE"}}' * 100
FILES = {
    "config.json": b'{"architectures": ["Gemma4ForConditionalGeneration"], "model_type": "gemma4"}',
    "tokenizer.json": TOKENIZER,
    "tokenizer_config.json": b'{"chat_template": "{{ messages }}"}',
    "generation_config.json": b'{"eos_token_id": [1, 106]}',
    "model-00001-of-00002.safetensors": b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ",
    "model-00002-of-00002.safetensors": b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ",
    "model.safetensors.index.json": b'{"metadata": {}, "weight_map": {}}',
}
"""The base repository at ``COMMIT``: configs, the tokenizer, the weights (never copied) and their index."""
COPIED = sorted(n for n in FILES if not n.endswith(".safetensors"))


CACHE = f"gs://{BUCKET}/gemma4-26b/convert/hub/"
"""The stack's Hub cache (``core.layout.hub_cache``)."""
ENTRY = f"gemma4-26b/convert/hub/{REPO}/{COMMIT}/"
"""The cache entry of the base at ``COMMIT``."""


def described(files: dict[str, bytes]) -> dict[str, dict[str, object]]:
    """What a cache entry's ``entry.json`` records of ``files``: the Hub's size and hash of each (its LFS sha256, else
    its Git blob id), as the loopback Hub lists them."""
    found = {name: sibling(name, data) for name, data in files.items()}
    return {
        name: {"size": s["size"], **({"sha256": s["lfs"]["sha256"]} if "lfs" in s else {"blobId": s["blobId"]})}
        for name, s in sorted(found.items())
    }


PROGRAMS = ("base_snapshot.py", "stage_dataset.py")
"""The programs, as training's ConfigMap holds them with what they import (``program_files``: ``stage_dataset.py``
imports ``base_snapshot.py`` beside it, and both ``shown.py``)."""


def run(tmp_path: Path, hub: str, *args: str, program: str = "base_snapshot.py") -> subprocess.CompletedProcess:
    """``program`` as a step's pod runs it (``python3 /tpu-rl/<file>``, the files of its ConfigMap in one folder; its
    environment: the token from the Secret, the emulator); a ``snapshot REPO REVISION OUTPUT`` goes through the stack's
    Hub cache ``CACHE`` into ``tmp_path/base-model``."""
    scripts = tmp_path / "tpu-rl"
    scripts.mkdir(parents=True, exist_ok=True)
    for name, text in program_files(*PROGRAMS).items():
        (scripts / name).write_text(text)
    if args[:1] == ("snapshot",) and len(args) == 4:
        args = (*args, CACHE, str(tmp_path / "base-model"), CACHE)
    env = {
        "PATH": "/usr/bin:/bin",
        "HF_TOKEN": SENTINEL_TOKEN,
        "HF_HOME": str(tmp_path / "hf-home"),
        "HF_ENDPOINT": hub,
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "STORAGE_EMULATOR_HOST": os.environ["STORAGE_EMULATOR_HOST"],
        "NO_GCE_CHECK": "True",
        "NO_PROXY": "127.0.0.1,localhost",
        "TMPDIR": str(tmp_path),
        "TPU_RL_RETRY_WAITS": "0,0",  # three tries, no wait (tests/test_base_snapshot_retry.py has the clock)
    }
    return subprocess.run(
        [sys.executable, str(scripts / program), *args], env=env, capture_output=True, text=True, timeout=60
    )


def one_line(done: subprocess.CompletedProcess) -> str:
    """The script's own message (the library's warnings left out): one line, never the token."""
    lines = [line for line in done.stderr.splitlines() if line.startswith("tpu-rl base: ")]
    assert SENTINEL_TOKEN not in done.stderr + done.stdout
    return lines[-1]


def objects(gcs, prefix: str) -> dict[str, bytes]:
    return {
        b.name.removeprefix(prefix): b.download_as_bytes()
        for b in gcs.list_blobs(BUCKET, prefix=prefix)
        if b.name != prefix
    }


@pytest.fixture
def bucket(gcs):
    gcs.create_bucket(BUCKET)
    return gcs


def test_the_conversion_records_the_commit_and_the_base_files_at_it(bucket, tmp_path):
    with serve(FakeHub.serving(FILES)) as hub:
        done = run(tmp_path, hub, "snapshot", REPO, "main", OUTPUT)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{COMMIT}\n", "the commit, alone on stdout: the script's ${commit}"
    found = objects(bucket, "gemma4-26b/convert/0123456789/")
    assert {n.removeprefix("base/"): d for n, d in found.items() if n.startswith("base/")} == {
        n: FILES[n] for n in COPIED
    }, "every file but the weights, byte for byte"
    record = source_record(bucket, OUTPUT)
    assert record is not None, "the program reads what the step writes"
    assert (record.repo, record.revision, record.commit, record.files) == (REPO, "main", COMMIT, COPIED)
    assert converted_problem(bucket, OUTPUT + "0/items/") is not None, "no checkpoint yet: not a finished conversion"
    put(bucket, OUTPUT, "0/items/_METADATA")
    assert converted_problem(bucket, OUTPUT + "0/items/") is None


def test_a_retried_conversion_keeps_its_commit_when_the_branch_has_moved(bucket, tmp_path):
    """The first attempt recorded ``COMMIT``; ``main`` moved before the retry: the retry converts the same
    commit (the checkpoint it resumes is of it), and never copies the moved branch's files."""
    moved = {**FILES, "config.json": b'{"architectures": ["Gemma5"], "model_type": "gemma5"}'}
    with serve(FakeHub.serving(FILES)) as hub:
        assert run(tmp_path, hub, "snapshot", REPO, "main", OUTPUT).returncode == 0
    with serve(FakeHub.moving(FILES, moved)) as hub:
        fresh = run(tmp_path, hub, "snapshot", REPO, "main", f"gs://{BUCKET}/another/")
        again = run(tmp_path, hub, "snapshot", REPO, "main", OUTPUT)
    assert fresh.stdout == f"{MOVED}\n", "a new conversion resolves the branch where it points now"
    assert again.returncode == 0 and again.stdout == f"{COMMIT}\n", again.stderr
    assert objects(bucket, "gemma4-26b/convert/0123456789/")["base/config.json"] == FILES["config.json"]


def test_training_and_the_export_read_the_recorded_files_and_commit(bucket, tmp_path):
    with serve(FakeHub.serving(FILES)) as hub:
        assert run(tmp_path, hub, "snapshot", REPO, "main", OUTPUT).returncode == 0
        local = tmp_path / "base"
        done = run(tmp_path, "http://127.0.0.1:9", "fetch", OUTPUT, str(local))  # never the Hub
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{COMMIT}\n"
    assert {p.name: p.read_bytes() for p in local.iterdir()} == {n: FILES[n] for n in COPIED}


def test_a_fetch_before_the_conversion_finished_is_refused(bucket, tmp_path):
    done = run(tmp_path, "http://127.0.0.1:9", "fetch", OUTPUT, str(tmp_path / "base"))
    assert done.returncode == SETUP_FAILURE_EXIT
    assert one_line(done) == f"tpu-rl base: {OUTPUT}source.json is missing: the conversion did not finish"


@pytest.mark.parametrize(
    ("record", "words"),
    [
        (b"{not json", "is not JSON"),
        (json.dumps({"repo": REPO, "commit": "main", "files": []}).encode(), "is not a record of this step"),
        (json.dumps({"repo": REPO, "commit": COMMIT, "files": ["../../etc/passwd"]}).encode(), "is not a record"),
        (json.dumps({"repo": REPO, "commit": COMMIT, "files": ["sub/config.json"]}).encode(), "is not a record"),
        (json.dumps({"repo": REPO, "commit": COMMIT, "files": [".bashrc"]}).encode(), "is not a record"),
    ],
    ids=["not-json", "a-branch", "a-path-out", "a-path-in", "hidden"],
)
def test_a_record_that_is_not_a_conversions_is_refused_and_nothing_is_written(bucket, tmp_path, record, words):
    put(bucket, OUTPUT, "source.json", data=record)
    done = run(tmp_path, "http://127.0.0.1:9", "fetch", OUTPUT, str(tmp_path / "base"))
    assert done.returncode == SETUP_FAILURE_EXIT and words in one_line(done)
    assert not (tmp_path / "base").exists() or not any((tmp_path / "base").iterdir())
    assert source_record(bucket, OUTPUT) is None, "the program's reader refuses it too"


def test_a_record_of_another_repository_is_refused(bucket, tmp_path):
    with serve(FakeHub.serving(FILES)) as hub:
        assert run(tmp_path, hub, "snapshot", REPO, "main", OUTPUT).returncode == 0
        done = run(tmp_path, hub, "snapshot", "google/gemma-4-31b-it", "main", OUTPUT)
    assert done.returncode == SETUP_FAILURE_EXIT
    assert one_line(done) == f"tpu-rl base: {OUTPUT}source.json records {REPO}, not google/gemma-4-31b-it"


def test_hub_file_names_that_are_not_a_folders_are_never_copied(bucket, tmp_path):
    hostile = {**FILES, "../escape.json": b"{}", "sub/nested.json": b"{}", ".hidden": b"x"}
    with serve(FakeHub.serving(hostile)) as hub:
        done = run(tmp_path, hub, "snapshot", REPO, "main", OUTPUT)
    assert done.returncode == 0, done.stderr
    record = source_record(bucket, OUTPUT)
    assert record is not None and record.files == COPIED
    assert not (tmp_path / "escape.json").exists()


@pytest.mark.parametrize(
    ("repo", "revision", "code", "words"),
    [
        (REPO, "no-such-branch", 3, f"cannot read {REPO}@no-such-branch from the Hub (RevisionNotFoundError: "),
        ("google/no-such-model", "main", 3, "cannot read google/no-such-model@main from the Hub (RepositoryNotFound"),
        (REPO, "main", 1, f"cannot read {REPO}@main from the Hub ("),
    ],
    ids=["unknown-revision", "unknown-repo", "unreachable"],
)
def test_a_hub_error_is_one_line_refused_or_run_again(bucket, tmp_path, repo, revision, code, words):
    """What a retry reads the same (no such repository or revision) is refused (exit 3, not retried); a Hub
    that cannot be reached is tried three times, then fails the attempt (exit 1: the next `up` retries the step)."""
    with serve(FakeHub.serving(FILES)) as hub:
        url = hub if code == 3 else "http://127.0.0.1:9"
        done = run(tmp_path, url, "snapshot", repo, revision, OUTPUT)
    assert done.returncode == code and words in one_line(done), done.stderr
    assert one_line(done).endswith(" (tried 3 times)") == (code == 1)
    assert source_record(bucket, OUTPUT) is None, "nothing recorded"


def test_a_base_without_a_config_is_refused(bucket, tmp_path):
    with serve(FakeHub.serving({k: v for k, v in FILES.items() if k != "config.json"})) as hub:
        done = run(tmp_path, hub, "snapshot", REPO, "main", OUTPUT)
    assert done.returncode == SETUP_FAILURE_EXIT
    assert one_line(done) == f"tpu-rl base: {REPO}@{COMMIT} has no config.json"


def local_files(folder: Path) -> dict[str, bytes]:
    """The files ``to_maxtext`` finds in its ``--hf_model_path`` (``huggingface_hub``'s own ``.cache`` left out)."""
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


def test_the_hub_sends_each_file_once_per_commit_and_the_bucket_the_rest(bucket, tmp_path):
    """The first conversion fetches every file of the commit from the Hub once (the weights into
    the local folder ``to_maxtext`` reads, the rest into ``base/`` too) and keeps each in the cache entry with the
    Hub's hashes; a retry of it, a later conversion of the same commit (pinned, with the Hub closed: the hashes the
    entry records stand in; by branch: the Hub describes the commit and sends no file) read the bucket, each file
    hashed. The Hub's bytes are counted by the loopback Hub itself."""
    served = FakeHub.serving(FILES)
    with serve(served) as hub:
        first = run(tmp_path / "first", hub, "snapshot", REPO, "main", OUTPUT)
    assert first.returncode == 0, first.stderr
    assert sum(served.sent) == sum(len(data) for data in FILES.values()), "each file once, whole"
    assert local_files(tmp_path / "first" / "base-model") == FILES, "what to_maxtext reads, weights included"
    assert objects(bucket, ENTRY) == {**FILES, "entry.json": objects(bucket, ENTRY)["entry.json"]}
    assert json.loads(objects(bucket, ENTRY)["entry.json"]) == {
        "repo": REPO,
        "commit": COMMIT,
        "files": described(FILES),
    }
    closed = "http://127.0.0.1:9"  # no Hub at all: a call to it fails the step
    retry = run(tmp_path / "retry", closed, "snapshot", REPO, "main", OUTPUT)
    pinned = run(tmp_path / "pinned", closed, "snapshot", REPO, COMMIT, f"gs://{BUCKET}/gemma4-26b/convert/1111111111/")
    for done, name in ((retry, "retry"), (pinned, "pinned")):
        assert done.returncode == 0 and done.stdout == f"{COMMIT}\n", done.stderr
        assert local_files(tmp_path / name / "base-model") == FILES
    again = FakeHub.serving(FILES)
    with serve(again) as hub:
        branch = run(
            tmp_path / "branch", hub, "snapshot", REPO, "main", f"gs://{BUCKET}/gemma4-26b/convert/2222222222/"
        )
    assert branch.returncode == 0 and branch.stdout == f"{COMMIT}\n", branch.stderr
    assert again.sent == [] and again.ranges == [], "asked which commit main is, sent no file"
    assert local_files(tmp_path / "branch" / "base-model") == FILES
    record = source_record(bucket, f"gs://{BUCKET}/gemma4-26b/convert/2222222222/")
    assert record is not None and (record.revision, record.commit, record.files) == ("main", COMMIT, COPIED)


def test_a_stack_reading_a_shared_cache_takes_its_checked_files_and_writes_nothing_there(bucket, tmp_path):
    """``tpu-rl:model.hubCache`` with ``tpu-rl:model.hubCacheWriter``: the writer's conversion fills the shared entry
    (``CACHE_URI`` and ``SHARED_URI`` both the shared folder) and keeps its own record of the Hub's hashes in its own
    bucket. A reader's (``CACHE_URI`` its own cache, ``SHARED_URI`` the shared one) takes every file from it, each
    hashed against the Hub's value, and writes nothing there: its own bucket gets its own record and no file. With the
    Hub closed, a reader with no record of its own is refused in one line (offline, the shared entry.json is no
    stack's record: any writer of the shared folder may have rewritten it), and the writer checks the shared files
    against its own record."""
    shared, other, third = "shared-hub", "other-stack-bucket", "third-stack-bucket"
    for name in (shared, other, third):
        bucket.create_bucket(name)
    cache = f"gs://{shared}/tpu-rl/hub/"
    served = FakeHub.serving(FILES)
    with serve(served) as hub:
        first = run(tmp_path / "a", hub, "snapshot", REPO, COMMIT, OUTPUT, cache, str(tmp_path / "a" / "base"), cache)
    assert first.returncode == 0, first.stderr
    assert sum(served.sent) == sum(len(data) for data in FILES.values())
    kept = {b.name: b.generation for b in bucket.list_blobs(shared)}
    assert set(kept) == {f"tpu-rl/hub/{REPO}/{COMMIT}/{n}" for n in [*FILES, "entry.json"]}
    assert objects(bucket, ENTRY) == {
        "entry.json": objects_of(bucket, shared, f"tpu-rl/hub/{REPO}/{COMMIT}/")["entry.json"]
    }, "the writer's own record of the Hub's hashes, in its own bucket, no file"
    own = f"gs://{other}/gemma4-26b/convert/hub/"
    output = f"gs://{other}/gemma4-26b/convert/3333333333/"
    again = FakeHub.serving(FILES)
    with serve(again) as hub:
        second = run(tmp_path / "b", hub, "snapshot", REPO, COMMIT, output, own, str(tmp_path / "b" / "base"), cache)
    assert second.returncode == 0 and second.stdout == f"{COMMIT}\n", second.stderr
    assert again.sent == [], "the Hub's description, no file"
    assert local_files(tmp_path / "b" / "base") == FILES
    assert {b.name: b.generation for b in bucket.list_blobs(shared)} == kept, "nothing written in the shared folder"
    assert [b.name for b in bucket.list_blobs(other, prefix="gemma4-26b/convert/hub/")] == [
        f"gemma4-26b/convert/hub/{REPO}/{COMMIT}/entry.json"
    ], "its own record of the Hub's hashes, no file"
    record = json.loads(objects_of(bucket, other, "gemma4-26b/convert/3333333333/")["source.json"])
    assert {name: pin["object"] for name, pin in record["verified"].items()} == {
        name: f"{cache}{REPO}/{COMMIT}/{name}" for name in FILES
    }, "the export reads the objects the conversion hashed"
    closed = "http://127.0.0.1:9"  # no Hub at all: its description fails
    offline = run(
        tmp_path / "c",
        closed,
        *("snapshot", REPO, COMMIT, f"gs://{third}/gemma4-26b/convert/4444444444/"),
        *(f"gs://{third}/gemma4-26b/convert/hub/", str(tmp_path / "c" / "base"), cache),
    )
    assert offline.returncode == 1 and one_line(offline).endswith(
        f", and gs://{third}/gemma4-26b/convert/hub/{REPO}/{COMMIT}/entry.json, the stack's own record of the Hub's "
        f"hashes, names no file of {REPO}@{COMMIT}: offline, no other record is trusted (any writer of a shared "
        "cache's folder can rewrite its entry.json); the next `make up` runs the conversion again once the Hub answers"
        " (tried 3 times)"
    ), offline.stderr
    assert list(bucket.list_blobs(third)) == [], "nothing fetched, nothing kept, nothing recorded"
    writer = f"gs://{BUCKET}/gemma4-26b/convert/5555555555/"
    closed_run = run(
        tmp_path / "d", closed, "snapshot", REPO, COMMIT, writer, cache, str(tmp_path / "d" / "base"), cache
    )
    assert closed_run.returncode == 0, closed_run.stderr
    assert local_files(tmp_path / "d" / "base") == FILES, "the shared files, each hashed against its own record"


def objects_of(gcs, bucket_name: str, prefix: str) -> dict[str, bytes]:
    return {b.name.removeprefix(prefix): b.download_as_bytes() for b in gcs.list_blobs(bucket_name, prefix=prefix)}


SHARD = "model-00002-of-00002.safetensors"
SWAPPED = b"\x08\x00\x00\x00\x00\x00\x00\x00{}  evil"
"""Another shard of the same size as ``FILES[SHARD]``: what a size check would take for it."""


def sha256(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def test_a_same_size_file_swapped_into_the_cache_is_one_line_and_fetched_again(bucket, tmp_path):
    """A shard of the entry replaced by another of the same size (its ``entry.json`` untouched): the next conversion
    hashes it, says so in one line, never uses it, and takes the Hub's shard into the entry again; its record pins
    the new object."""
    assert len(SWAPPED) == len(FILES[SHARD])
    with serve(FakeHub.serving(FILES)) as hub:
        assert run(tmp_path / "first", hub, "snapshot", REPO, "main", OUTPUT).returncode == 0
    put(bucket, f"gs://{BUCKET}/{ENTRY}", SHARD, data=SWAPPED)
    served = FakeHub.serving(FILES)
    output = f"gs://{BUCKET}/gemma4-26b/convert/5555555555/"
    with serve(served) as hub:
        done = run(tmp_path / "next", hub, "snapshot", REPO, COMMIT, output)
    assert done.returncode == 0, done.stderr
    assert (
        f"tpu-rl base: gs://{BUCKET}/{ENTRY}{SHARD} is sha256 {sha256(SWAPPED)}, not the Hub's 16 bytes, sha256 "
        f"{sha256(FILES[SHARD])}: not used"
    ) in done.stderr.splitlines()
    assert served.sent == [len(FILES[SHARD])], "that shard alone, from the Hub"
    assert local_files(tmp_path / "next" / "base-model") == FILES, "what to_maxtext reads is the Hub's"
    assert objects(bucket, ENTRY)[SHARD] == FILES[SHARD], "the entry holds the Hub's shard again"
    pin = json.loads(objects(bucket, "gemma4-26b/convert/5555555555/")["source.json"])["verified"][SHARD]
    now = bucket.bucket(BUCKET).get_blob(ENTRY + SHARD)
    assert pin == {
        "object": f"gs://{BUCKET}/{ENTRY}{SHARD}",
        "generation": now.generation,
        "size": 16,
        "sha256": sha256(FILES[SHARD]),
    }


def test_a_swapped_file_with_the_hub_out_of_reach_fails_in_one_line_and_records_nothing(bucket, tmp_path):
    """The same swap with the Hub closed: the entry's record of the Hub's hash stands in, the shard does not match
    it, and nothing else can send it: one line naming the object and both hashes, exit 1 (the next `up` tries
    again), no record, no shard left for ``to_maxtext``."""
    with serve(FakeHub.serving(FILES)) as hub:
        assert run(tmp_path / "first", hub, "snapshot", REPO, "main", OUTPUT).returncode == 0
    put(bucket, f"gs://{BUCKET}/{ENTRY}", SHARD, data=SWAPPED)
    output = f"gs://{BUCKET}/gemma4-26b/convert/6666666666/"
    done = run(tmp_path / "next", "http://127.0.0.1:9", "snapshot", REPO, COMMIT, output)
    assert done.returncode == 1, done.stderr
    assert one_line(done) == (
        f"tpu-rl base: gs://{BUCKET}/{ENTRY}{SHARD} is sha256 {sha256(SWAPPED)}, not the recorded 16 bytes, sha256 "
        f"{sha256(FILES[SHARD])}, and the Hub is out of reach to send it again (tried 3 times)"
    )
    assert source_record(bucket, output) is None, "nothing recorded"
    assert not (tmp_path / "next" / "base-model" / SHARD).exists()


def test_an_entry_that_records_sizes_only_is_trusted_on_the_hubs_hashes_alone(bucket, tmp_path):
    """An entry of an earlier version names each file by its size: with the Hub closed it is refused (a size proves
    nothing); with the Hub open each file is hashed against the Hub's value and the entry records the hashes."""
    with serve(FakeHub.serving(FILES)) as hub:
        assert run(tmp_path / "first", hub, "snapshot", REPO, "main", OUTPUT).returncode == 0
    sizes = {"repo": REPO, "commit": COMMIT, "files": {n: len(d) for n, d in FILES.items()}}
    put(bucket, f"gs://{BUCKET}/{ENTRY}", "entry.json", data=json.dumps(sizes).encode())
    output = f"gs://{BUCKET}/gemma4-26b/convert/7777777777/"
    done = run(tmp_path / "closed", "http://127.0.0.1:9", "snapshot", REPO, COMMIT, output)
    assert done.returncode == 1 and source_record(bucket, output) is None
    assert one_line(done).startswith(f"tpu-rl base: cannot read {REPO}@{COMMIT} from the Hub (")
    assert one_line(done).endswith(
        f", and gs://{BUCKET}/{ENTRY}entry.json records config.json of {REPO}@{COMMIT} by its size alone, not the "
        "Hub's hash (tried 3 times)"
    )
    served = FakeHub.serving(FILES)
    with serve(served) as hub:
        done = run(tmp_path / "open", hub, "snapshot", REPO, COMMIT, output)
    assert done.returncode == 0 and served.sent == [], done.stderr
    assert json.loads(objects(bucket, ENTRY)["entry.json"])["files"] == described(FILES)


def test_an_entry_whose_record_was_swapped_with_its_file_is_not_used(bucket, tmp_path):
    """A writer gone bad swaps a shard and writes its hash into ``entry.json``: the Hub's own value differs, so the
    object is not even read; the Hub's shard replaces it and the entry records the Hub's hash again."""
    with serve(FakeHub.serving(FILES)) as hub:
        assert run(tmp_path / "first", hub, "snapshot", REPO, "main", OUTPUT).returncode == 0
    forged = {**described(FILES), SHARD: {"size": 16, "sha256": sha256(SWAPPED)}}
    put(
        bucket,
        f"gs://{BUCKET}/{ENTRY}",
        "entry.json",
        data=json.dumps({"repo": REPO, "commit": COMMIT, "files": forged}).encode(),
    )
    put(bucket, f"gs://{BUCKET}/{ENTRY}", SHARD, data=SWAPPED)
    served = FakeHub.serving(FILES)
    with serve(served) as hub:
        done = run(tmp_path / "next", hub, "snapshot", REPO, COMMIT, f"gs://{BUCKET}/gemma4-26b/convert/8888888888/")
    assert done.returncode == 0, done.stderr
    assert (
        f"tpu-rl base: gs://{BUCKET}/{ENTRY}{SHARD}: entry.json records 16 bytes, sha256 {sha256(SWAPPED)}, not the "
        f"Hub's 16 bytes, sha256 {sha256(FILES[SHARD])}: not used"
    ) in done.stderr.splitlines()
    assert served.sent == [16] and objects(bucket, ENTRY)[SHARD] == FILES[SHARD]
    assert json.loads(objects(bucket, ENTRY)["entry.json"])["files"] == described(FILES)


def test_a_shared_entry_another_writer_rewrote_is_refused_offline_and_rehashed_online(bucket, tmp_path):
    """Another writer of the shared folder (any deploy account that administers its bucket) swaps a
    shard and writes its hash into the shared ``entry.json``. Offline, that entry is no stack's record: a reader with
    no record of its own is refused in one line, and the writer stack, whose own record (its own bucket) names the
    Hub's hash, uses no forged byte (one line, nothing recorded). Online, the forged shard is not even read (its
    record is not the Hub's); every other shared file is used only once hashed against the Hub's value; the reader
    keeps the Hub's shard and its own record of the Hub's hashes in its own bucket, which then stand in offline."""
    shared, other = "shared-hub", "other-stack-bucket"
    bucket.create_bucket(shared)
    bucket.create_bucket(other)
    cache, own = f"gs://{shared}/hub/", f"gs://{other}/gemma4-26b/convert/hub/"
    where = f"{cache}{REPO}/{COMMIT}/"
    with serve(FakeHub.serving(FILES)) as hub:
        first = run(tmp_path / "a", hub, "snapshot", REPO, COMMIT, OUTPUT, cache, str(tmp_path / "a" / "base"), cache)
    assert first.returncode == 0, first.stderr
    forged = {
        "repo": REPO,
        "commit": COMMIT,
        "files": {**described(FILES), SHARD: {"size": 16, "sha256": sha256(SWAPPED)}},
    }
    put(bucket, where, "entry.json", data=json.dumps(forged).encode())
    put(bucket, where, SHARD, data=SWAPPED)

    def reader(name: str, hub: str, output: str) -> subprocess.CompletedProcess:
        words = ("snapshot", REPO, COMMIT, f"gs://{other}/gemma4-26b/convert/{output}/", own)
        return run(tmp_path / name, hub, *words, str(tmp_path / name / "base"), cache)

    closed = "http://127.0.0.1:9"
    refused = reader("b", closed, "1111111111")
    assert refused.returncode == 1 and one_line(refused).endswith(
        f"names no file of {REPO}@{COMMIT}: offline, no other record is trusted (any writer of a shared cache's folder "
        "can rewrite its entry.json); the next `make up` runs the conversion again once the Hub answers (tried 3 times)"
    ), refused.stderr
    output = f"gs://{BUCKET}/gemma4-26b/convert/2222222222/"
    writer = run(tmp_path / "c", closed, "snapshot", REPO, COMMIT, output, cache, str(tmp_path / "c" / "base"), cache)
    assert writer.returncode == 1 and one_line(writer) == (
        f"tpu-rl base: {where}{SHARD}: entry.json records 16 bytes, sha256 {sha256(SWAPPED)}, not the recorded 16 "
        f"bytes, sha256 {sha256(FILES[SHARD])}, and the Hub is out of reach to send it again (tried 3 times)"
    ), writer.stderr
    assert source_record(bucket, output) is None and not (tmp_path / "c" / "base" / SHARD).exists()
    served = FakeHub.serving(FILES)
    with serve(served) as hub:
        online = reader("d", hub, "3333333333")
    assert online.returncode == 0, online.stderr
    assert served.sent == [16], "the forged shard alone, from the Hub"
    lines = online.stderr.splitlines()
    assert (
        f"tpu-rl base: {where}{SHARD}: entry.json records 16 bytes, sha256 {sha256(SWAPPED)}, not the Hub's 16 bytes, "
        f"sha256 {sha256(FILES[SHARD])}: not used"
    ) in lines
    kinds = described(FILES)
    for name in sorted(set(FILES) - {SHARD}):
        kind = "sha256" if "sha256" in kinds[name] else "blobId"
        assert f"tpu-rl base: {name} of {REPO}@{COMMIT} from {where}, its {kind} checked" in lines, name
    assert local_files(tmp_path / "d" / "base") == FILES
    mine = objects_of(bucket, other, f"gemma4-26b/convert/hub/{REPO}/{COMMIT}/")
    assert mine[SHARD] == FILES[SHARD] and json.loads(mine["entry.json"])["files"] == described(FILES)
    assert objects_of(bucket, shared, f"hub/{REPO}/{COMMIT}/")[SHARD] == SWAPPED, "a reader writes nothing there"
    again = reader("e", closed, "4444444444")
    assert again.returncode == 0 and local_files(tmp_path / "e" / "base") == FILES, again.stderr


def test_a_reader_whose_shared_file_was_swapped_fetches_it_into_its_own_cache(bucket, tmp_path):
    """A reader of a shared cache finds one of its files swapped: one line, and the Hub's file goes into the reader's
    own cache, never the shared folder (its identity may not write there: ``infra.gcp.access.hub_cache_grants``); its
    record pins its own object for that file and the shared ones for the rest."""
    shared, other = "shared-hub", "other-stack-bucket"
    bucket.create_bucket(shared)
    bucket.create_bucket(other)
    cache, own = f"gs://{shared}/hub/", f"gs://{other}/gemma4-26b/convert/hub/"
    with serve(FakeHub.serving(FILES)) as hub:
        first = run(tmp_path / "a", hub, "snapshot", REPO, COMMIT, OUTPUT, cache, str(tmp_path / "a" / "base"), cache)
    assert first.returncode == 0, first.stderr
    put(bucket, f"{cache}{REPO}/{COMMIT}/", SHARD, data=SWAPPED)
    served = FakeHub.serving(FILES)
    output = f"gs://{other}/gemma4-26b/convert/9999999999/"
    with serve(served) as hub:
        done = run(tmp_path / "b", hub, "snapshot", REPO, COMMIT, output, own, str(tmp_path / "b" / "base"), cache)
    assert done.returncode == 0, done.stderr
    assert f"tpu-rl base: {cache}{REPO}/{COMMIT}/{SHARD} is sha256 {sha256(SWAPPED)}" in done.stderr
    assert served.sent == [16] and local_files(tmp_path / "b" / "base") == FILES
    assert objects_of(bucket, shared, f"hub/{REPO}/{COMMIT}/")[SHARD] == SWAPPED, "the shared folder untouched"
    mine = objects_of(bucket, other, f"gemma4-26b/convert/hub/{REPO}/{COMMIT}/")
    assert mine[SHARD] == FILES[SHARD] and json.loads(mine["entry.json"])["files"] == described(FILES)
    verified = json.loads(objects_of(bucket, other, "gemma4-26b/convert/9999999999/")["source.json"])["verified"]
    assert verified[SHARD]["object"] == f"{own}{REPO}/{COMMIT}/{SHARD}"
    assert verified["config.json"]["object"] == f"{cache}{REPO}/{COMMIT}/config.json"


def test_an_entry_cut_short_is_completed_with_only_what_it_lacks(bucket, tmp_path):
    """A conversion killed while it filled the cache left files but no ``entry.json``: the next one takes the whole
    files from the bucket and only the missing (or short) ones from the Hub, then writes the entry."""
    with serve(FakeHub.serving(FILES)) as hub:
        assert run(tmp_path / "first", hub, "snapshot", REPO, "main", OUTPUT).returncode == 0
    shard = "model-00002-of-00002.safetensors"
    bucket.bucket(BUCKET).blob(ENTRY + "entry.json").delete()
    bucket.bucket(BUCKET).blob(ENTRY + shard).delete()
    put(bucket, f"gs://{BUCKET}/{ENTRY}", "tokenizer.json", data=TOKENIZER[:100])  # an upload cut short
    served = FakeHub.serving(FILES)
    with serve(served) as hub:
        done = run(tmp_path / "next", hub, "snapshot", REPO, "main", f"gs://{BUCKET}/gemma4-26b/convert/3333333333/")
    assert done.returncode == 0, done.stderr
    assert sorted(served.sent) == sorted([len(FILES[shard]), len(TOKENIZER)])
    assert local_files(tmp_path / "next" / "base-model") == FILES
    assert "entry.json" in objects(bucket, ENTRY) and objects(bucket, ENTRY)["tokenizer.json"] == TOKENIZER


def test_an_entry_that_claims_a_pattern_without_its_files_asks_the_hub(bucket, tmp_path):
    """An entry edited by hand to claim a pattern it holds no file of: the Hub says what the pattern matches, and
    the run stages those files (an empty glob would fail MaxText much later)."""
    claim = {"repo": DATASET, "commit": COMMIT, "files": {}, "patterns": [TRAIN_1M]}
    put(bucket, f"gs://{BUCKET}/{DATASET_ENTRY}", "entry.json", data=json.dumps(claim).encode())
    served = DatasetHub.serving_dataset()
    with serve(served) as hub:
        done = stage(tmp_path, hub, COMMIT)
    assert done.returncode == 0, done.stderr
    assert sum(served.sent) == sum(len(d) for d in WANTED.values())
    staged = objects(bucket, STAGED.removeprefix(f"gs://{BUCKET}/"))
    assert {n: d for n, d in staged.items() if n != "dataset.json"} == WANTED


@pytest.mark.parametrize(
    "entry",
    [
        b"{not json",
        json.dumps({"repo": REPO, "commit": MOVED, "files": {}}).encode(),
        json.dumps({"repo": REPO, "commit": COMMIT, "files": {"../x": 1}}).encode(),
        json.dumps({"repo": REPO, "commit": COMMIT, "files": {"config.json": {"size": 1, "sha256": "f00"}}}).encode(),
    ],
    ids=["not-json", "another-commit", "a-path-out", "not-a-hash"],
)
def test_a_cache_entry_that_is_not_one_is_one_line_and_not_used(bucket, tmp_path, entry):
    """An ``entry.json`` that is not this entry's: one line, and nothing it says is taken (the Hub closed: nothing
    is recorded; open: each file is hashed against the Hub's value and the entry written again)."""
    put(bucket, f"gs://{BUCKET}/{ENTRY}", "entry.json", data=entry)
    done = run(tmp_path, "http://127.0.0.1:9", "snapshot", REPO, COMMIT, OUTPUT)
    line = f"tpu-rl base: gs://{BUCKET}/{ENTRY}entry.json is not the cache entry of {REPO}@{COMMIT}: not used"
    assert done.returncode == 1 and line in done.stderr.splitlines(), done.stderr
    assert one_line(done).endswith(
        f", and gs://{BUCKET}/{ENTRY}entry.json, the stack's own record of the Hub's hashes, names no file of "
        f"{REPO}@{COMMIT}: offline, no other record is trusted (any writer of a shared cache's folder can rewrite its "
        "entry.json); the next `make up` runs the conversion again once the Hub answers (tried 3 times)"
    )
    assert source_record(bucket, OUTPUT) is None
    with serve(FakeHub.serving(FILES)) as hub:
        done = run(tmp_path, hub, "snapshot", REPO, COMMIT, OUTPUT)
    assert done.returncode == 0, done.stderr
    assert json.loads(objects(bucket, ENTRY)["entry.json"]) == {
        "repo": REPO,
        "commit": COMMIT,
        "files": described(FILES),
    }


STAGED = f"gs://{BUCKET}/gemma4-26b/train/0123456789/dataset/"
"""A training run's staged dataset (its output's ``dataset/``)."""
DATASET_CACHE = f"gs://{BUCKET}/gemma4-26b/train/hub/"
"""The stack's dataset cache (``core.layout.dataset_cache``)."""
DATASET_ENTRY = f"gemma4-26b/train/hub/{DATASET}/{COMMIT}/"
"""Its entry of the dataset at ``COMMIT``."""
TRAIN_1M = "data/train_1M-*.parquet"
WANTED = {n: d for n, d in DATASET_FILES.items() if n.startswith("data/train_1M-")}
"""What ``TRAIN_1M`` matches at ``COMMIT``."""


def stage(tmp_path: Path, hub: str, revision: str = "main", staged: str = STAGED, *patterns: str):
    """``stage_dataset.py`` as training's script runs it: the run's folder and the stack's dataset cache."""
    words = (DATASET, revision, staged, DATASET_CACHE, *(patterns or (TRAIN_1M,)))
    return run(tmp_path, hub, *words, program="stage_dataset.py")


def test_a_dataset_is_staged_in_the_bucket_once_and_every_later_attempt_reads_it_there(bucket, tmp_path):
    """The first training attempt takes the files of the dataset that match its patterns (and
    only those) from the Hub into the stack's dataset cache, copies them into its run's folder, its record last;
    a restart (the record is there) asks the Hub nothing."""
    served = DatasetHub.serving_dataset()
    with serve(served) as hub:
        first = stage(tmp_path, hub)
    assert first.returncode == 0 and first.stdout == f"{COMMIT}\n", first.stderr
    assert sum(served.sent) == sum(len(d) for d in WANTED.values()), "only the matching files, once"
    staged = objects(bucket, STAGED.removeprefix(f"gs://{BUCKET}/"))
    record = json.loads(staged.pop("dataset.json"))
    assert staged == WANTED
    generations = {n: bucket.bucket(BUCKET).get_blob(DATASET_ENTRY + n).generation for n in WANTED}
    assert record == {
        "repo": DATASET,
        "revision": "main",
        "commit": COMMIT,
        "files": {n: len(d) for n, d in WANTED.items()},
        "cache": f"gs://{BUCKET}/{DATASET_ENTRY}",
        "verified": {
            n: {"object": f"gs://{BUCKET}/{DATASET_ENTRY}{n}", "generation": generations[n], **hashed}
            for n, hashed in described(WANTED).items()
        },
    }
    read = dataset_record(bucket, STAGED.removesuffix("dataset/"))
    assert read is not None and read.commit == COMMIT, "the program reads what the step writes"
    cached = objects(bucket, DATASET_ENTRY)
    entry = json.loads(cached.pop("entry.json"))
    assert cached == WANTED
    assert entry == {"repo": DATASET, "commit": COMMIT, "files": described(WANTED), "patterns": [TRAIN_1M]}
    restart = stage(tmp_path, "http://127.0.0.1:9")  # any call to the Hub fails
    assert restart.returncode == 0 and restart.stdout == f"{COMMIT}\n", restart.stderr


def test_a_later_run_takes_the_dataset_from_the_cache_and_no_file_from_the_hub(bucket, tmp_path):
    """A re-run (another training run, another output): the branch costs one API call and no
    file; a commit whose entry holds the pattern costs no call at all. Each run gets its own copy."""
    with serve(DatasetHub.serving_dataset()) as hub:
        assert stage(tmp_path, hub).returncode == 0
    generation = bucket.bucket(BUCKET).get_blob(DATASET_ENTRY + "entry.json").generation
    again = DatasetHub.serving_dataset()
    rerun = STAGED.replace("0123456789", "abcdef0123")
    with serve(again) as hub:
        done = stage(tmp_path, hub, "main", rerun)
    assert done.returncode == 0 and done.stdout == f"{COMMIT}\n", done.stderr
    assert again.sent == [] and again.ranges == [], "which commit main names, and no file"
    assert f"copied from gs://{BUCKET}/{DATASET_ENTRY}" in one_line(done)
    pinned = STAGED.replace("0123456789", "fedcba9876")
    done = stage(tmp_path, "http://127.0.0.1:9", COMMIT, pinned)
    assert done.returncode == 0 and done.stdout == f"{COMMIT}\n", done.stderr
    for uri in (rerun, pinned):
        staged = objects(bucket, uri.removeprefix(f"gs://{BUCKET}/"))
        assert json.loads(staged.pop("dataset.json"))["commit"] == COMMIT
        assert staged == WANTED, "the run's own copy, byte for byte"
    entry = bucket.bucket(BUCKET).get_blob(DATASET_ENTRY + "entry.json")
    assert entry.generation == generation, "nothing new in the entry: its record is not written again"


PARQUET = "data/train_1M-00000-of-00002.parquet"
SAME_SIZE_PARQUET = b"PAR1" + b"z" * 3000
"""Another file of ``PARQUET``'s size: what a size check would take for it."""


@pytest.mark.parametrize("revision", ["main", COMMIT], ids=["branch", "pinned"])
def test_a_same_size_dataset_file_swapped_into_the_cache_is_one_line_and_fetched_again(bucket, tmp_path, revision):
    """A cached dataset file replaced by another of the same size is hashed before any run uses it
    (against the Hub's hash: asked for a branch, as the stack's own entry records it for a pinned commit), said in one
    line, never copied, and taken from the Hub again (hashed) into the entry; the run's copy is the Hub's file."""
    assert len(SAME_SIZE_PARQUET) == len(DATASET_FILES[PARQUET])
    with serve(DatasetHub.serving_dataset()) as hub:
        assert stage(tmp_path, hub).returncode == 0
    put(bucket, f"gs://{BUCKET}/{DATASET_ENTRY}", PARQUET, data=SAME_SIZE_PARQUET)
    served = DatasetHub.serving_dataset()
    rerun = STAGED.replace("0123456789", "abcdef0123")
    with serve(served) as hub:
        done = stage(tmp_path, hub, revision, rerun)
    assert done.returncode == 0, done.stderr
    assert (
        f"tpu-rl base: gs://{BUCKET}/{DATASET_ENTRY}{PARQUET} is sha256 {sha256(SAME_SIZE_PARQUET)}, not the Hub's "
        f"3004 bytes, sha256 {sha256(DATASET_FILES[PARQUET])}: not used"
    ) in done.stderr.splitlines()
    assert served.sent == [len(DATASET_FILES[PARQUET])], "that file alone, from the Hub"
    staged = objects(bucket, rerun.removeprefix(f"gs://{BUCKET}/"))
    assert {n: d for n, d in staged.items() if n != "dataset.json"} == WANTED
    assert objects(bucket, DATASET_ENTRY)[PARQUET] == DATASET_FILES[PARQUET], "the entry holds the Hub's file again"
    pin = json.loads(staged["dataset.json"])["verified"][PARQUET]
    assert pin["generation"] == bucket.bucket(BUCKET).get_blob(DATASET_ENTRY + PARQUET).generation


def test_a_dataset_entry_of_sizes_alone_is_checked_against_the_hubs_hashes(bucket, tmp_path):
    """An entry an earlier version wrote names each file by its size: a pinned run asks the Hub for the hashes
    (a size proves nothing), hashes every cached file against them, fetches none that matches, and records them."""
    with serve(DatasetHub.serving_dataset()) as hub:
        assert stage(tmp_path, hub).returncode == 0
    sizes = {"repo": DATASET, "commit": COMMIT, "files": {n: len(d) for n, d in WANTED.items()}, "patterns": [TRAIN_1M]}
    put(bucket, f"gs://{BUCKET}/{DATASET_ENTRY}", "entry.json", data=json.dumps(sizes).encode())
    assert stage(tmp_path, "http://127.0.0.1:9", COMMIT, STAGED.replace("0123456789", "1111111111")).returncode == 1
    served = DatasetHub.serving_dataset()
    with serve(served) as hub:
        done = stage(tmp_path, hub, COMMIT, STAGED.replace("0123456789", "2222222222"))
    assert done.returncode == 0 and served.sent == [], done.stderr
    assert json.loads(objects(bucket, DATASET_ENTRY)["entry.json"])["files"] == described(WANTED)


def test_an_object_missing_from_a_whole_entry_is_fetched_again(bucket, tmp_path):
    """An entry that names a pattern but lost one of its objects (deleted by hand): a pinned re-run takes that file
    alone from the Hub, and nobody needs to delete the entry."""
    with serve(DatasetHub.serving_dataset()) as hub:
        assert stage(tmp_path, hub).returncode == 0
    lost = "data/train_1M-00000-of-00002.parquet"
    bucket.bucket(BUCKET).blob(DATASET_ENTRY + lost).delete()
    served = DatasetHub.serving_dataset()
    rerun = STAGED.replace("0123456789", "abcdef0123")
    with serve(served) as hub:
        done = stage(tmp_path, hub, COMMIT, rerun)
    assert done.returncode == 0, done.stderr
    assert sum(served.sent) == len(DATASET_FILES[lost]), "that file alone"
    staged = objects(bucket, rerun.removeprefix(f"gs://{BUCKET}/"))
    assert {n: d for n, d in staged.items() if n != "dataset.json"} == WANTED


def test_an_entry_takes_from_the_hub_only_the_files_it_lacks(bucket, tmp_path):
    """A run with another pattern of a cached commit (or an entry a killed run left short) fetches only what the
    entry does not hold whole, and the entry then names both patterns."""
    with serve(DatasetHub.serving_dataset()) as hub:
        assert stage(tmp_path, hub).returncode == 0
    put(bucket, f"gs://{BUCKET}/{DATASET_ENTRY}", "data/train_1M-00001-of-00002.parquet", data=b"PAR1 cut short")
    served = DatasetHub.serving_dataset()
    rerun = STAGED.replace("0123456789", "abcdef0123")
    with serve(served) as hub:
        done = stage(tmp_path, hub, COMMIT, rerun, TRAIN_1M, "data/train_5M-*.parquet")
    assert done.returncode == 0, done.stderr
    fetched = ("data/train_1M-00001-of-00002.parquet", "data/train_5M-00000-of-00001.parquet")
    assert sum(served.sent) == sum(len(DATASET_FILES[n]) for n in fetched), "the short one and the new one"
    entry = json.loads(objects(bucket, DATASET_ENTRY)["entry.json"])
    assert entry["patterns"] == sorted([TRAIN_1M, "data/train_5M-*.parquet"]) and len(entry["files"]) == 3
    staged = objects(bucket, rerun.removeprefix(f"gs://{BUCKET}/"))
    assert {n: d for n, d in staged.items() if n != "dataset.json"} == {
        n: d for n, d in DATASET_FILES.items() if n.startswith("data/")
    }


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        (b"{not json", "is not JSON"),
        (json.dumps({"repo": DATASET, "commit": MOVED, "files": {}, "patterns": []}).encode(), "is not the cache"),
        (json.dumps({"repo": DATASET, "commit": COMMIT, "files": {"../x": 1}, "patterns": []}).encode(), "is not"),
    ],
    ids=["not-json", "another-commit", "a-path-out"],
)
def test_a_dataset_cache_entry_that_is_not_one_is_refused_in_one_line(bucket, tmp_path, entry, words):
    put(bucket, f"gs://{BUCKET}/{DATASET_ENTRY}", "entry.json", data=entry)
    done = stage(tmp_path, "http://127.0.0.1:9", COMMIT)
    assert done.returncode == SETUP_FAILURE_EXIT and words in one_line(done), done.stderr
    assert f"delete gs://{BUCKET}/{DATASET_ENTRY}" in one_line(done), "the line names the fix"
    assert objects(bucket, STAGED.removeprefix(f"gs://{BUCKET}/")) == {}, "nothing staged"


@pytest.mark.parametrize(
    ("dataset", "pattern", "words"),
    [
        (DATASET, "data/train_9M-*.parquet", f"dataset {DATASET}@{COMMIT} has no file matching data/train_9M-*"),
        ("nvidia/no-such-dataset", "data/*.parquet", "cannot read dataset nvidia/no-such-dataset@main (Repository"),
    ],
    ids=["no-match", "unknown"],
)
def test_a_dataset_that_cannot_be_staged_is_refused_in_one_line(bucket, tmp_path, dataset, pattern, words):
    served = DatasetHub.serving_dataset()
    with serve(served) as hub:
        done = run(tmp_path, hub, dataset, "main", STAGED, DATASET_CACHE, pattern, program="stage_dataset.py")
    assert done.returncode == SETUP_FAILURE_EXIT and words in one_line(done), done.stderr
    assert objects(bucket, STAGED.removeprefix(f"gs://{BUCKET}/")) == {}, "nothing staged, nothing recorded"
    assert objects(bucket, "gemma4-26b/train/hub/") == {}, "nothing cached"
