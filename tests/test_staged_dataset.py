"""Training's dataset staged in the bucket once: which keys point at the staged copy, and what
the script stages (the program itself, ``stage_dataset.py``: tests/test_base_snapshot.py, against the loopback Hub;
each file checked against the Hub's hash of it, tests/test_hub_cache.py)."""

from __future__ import annotations

import pytest

from core.knobs import DATASETS, Dataset
from core.layout import dataset_cache
from tests.lifecycle_walk import settings
from workloads.specs.commands import staged_dataset
from workloads.specs.train_script import dataset_lines

OUT = "gs://b/gemma4-26b/train/0123456789/"
CACHE = "gs://my-tpu-prod-project-tpu-rl-prod/gemma4-26b/train/hub/"
"""The prod stack's dataset cache (``core.layout.dataset_cache``: its bucket, training's prefix)."""


@pytest.mark.pure
def test_hub_files_become_the_staged_copy_and_every_other_key_stays():
    keys, staged = staged_dataset(DATASETS["openmathinstruct2"], OUT)
    assert keys == [
        ("dataset_name", "nvidia/OpenMathInstruct-2"),
        ("eval_dataset_name", "nvidia/OpenMathInstruct-2"),
        ("hf_train_files", f"{OUT}dataset/data/train_1M-*.parquet"),
        ("train_split", "train_1M"),
    ]
    assert staged == ("nvidia/OpenMathInstruct-2", ["data/train_1M-*.parquet"])


@pytest.mark.pure
def test_gsm8k_stages_its_train_and_test_files_and_names_its_splits():
    """GSM8K is read from its files too (no attempt loads it from the Hub by name): train and
    test of the ``main`` configuration, in the splits ``get_dataset`` loads them as."""
    keys, staged = staged_dataset(DATASETS["gsm8k"], OUT)
    assert dict(keys) == {
        "dataset_name": "openai/gsm8k",
        "eval_dataset_name": "openai/gsm8k",
        "hf_train_files": f"{OUT}dataset/main/train-*.parquet",
        "train_split": "train",
        "hf_eval_files": f"{OUT}dataset/main/test-*.parquet",
        "eval_split": "test",
    }
    assert staged == ("openai/gsm8k", ["main/train-*.parquet", "main/test-*.parquet"])
    assert dataset_lines(settings("prod", ["tpu-rl:training.dataset=gsm8k"]), OUT)[0] == (
        "dataset_commit=$(python3 /tpu-rl/stage_dataset.py openai/gsm8k main "
        f"{OUT}dataset/ {CACHE} 'main/train-*.parquet' 'main/test-*.parquet')"
    )


@pytest.mark.pure
def test_a_dataset_that_names_no_files_is_not_staged():
    """A catalogue entry that names no files (``datasets`` would load it by name) stages nothing."""
    by_name = Dataset("by-name", "t.json", (("dataset_name", "a/b"),))
    assert staged_dataset(by_name, OUT) == ([("dataset_name", "a/b")], None)


@pytest.mark.pure
def test_files_of_two_repositories_are_a_catalogue_bug():
    two = Dataset(
        "two",
        "t.json",
        (("hf_train_files", "hf://datasets/a/b/x-*.parquet"), ("hf_eval_files", "hf://datasets/c/d/y-*.parquet")),
    )
    with pytest.raises(ValueError, match="names files of 2 repositories"):
        staged_dataset(two, OUT)


@pytest.mark.pure
def test_the_script_stages_before_train_rl_and_quotes_the_pattern():
    lines = dataset_lines(settings("prod", []), OUT)
    assert lines[0] == (
        "dataset_commit=$(python3 /tpu-rl/stage_dataset.py nvidia/OpenMathInstruct-2 main "
        f"{OUT}dataset/ {CACHE} 'data/train_1M-*.parquet')"
    )


@pytest.mark.pure
def test_the_dataset_revision_is_the_stacks_and_a_commit_is_passed_as_is():
    """``tpu-rl:training.datasetRevision`` is what the script resolves (a commit pins the data every run trains on,
    and with the cache's entry whole, asks the Hub nothing: tests/test_base_snapshot.py)."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    (line, _) = dataset_lines(settings("prod", [f"tpu-rl:training.datasetRevision={commit}"]), OUT)
    assert f"stage_dataset.py nvidia/OpenMathInstruct-2 {commit} {OUT}dataset/ {CACHE} " in line


@pytest.mark.pure
def test_the_dataset_cache_is_trainings_to_write_and_no_cpu_steps():
    """The script that fills the cache runs in the Pathways head, as cpu-np's account: the node accounts' writer
    grant covers the entry (``infra.gcp.access``), and no CPU step's identity (the Hub token holders) writes it (the
    export reads training's prefix, the checkpoint, and with it this public data)."""
    from infra.gcp.access import NODE_ACCOUNTS, WRITER_ROLE, bucket_grants
    from tests.iam_conditions import covers

    prod = settings("prod", [])
    bucket = prod.bucket_name
    assert dataset_cache(bucket, "gemma4-26b") == CACHE
    name = CACHE.removeprefix(f"gs://{bucket}/") + "nvidia/OpenMathInstruct-2/" + "0" * 40 + "/entry.json"
    for grant in bucket_grants("gemma4-26b", running=prod.workflow.steps):
        if grant.role == WRITER_ROLE and grant.holder not in NODE_ACCOUNTS:
            assert not covers(grant, bucket, name), grant
    writers = [g for g in bucket_grants("gemma4-26b") if g.holder in NODE_ACCOUNTS and g.role == WRITER_ROLE]
    assert len(writers) == len(NODE_ACCOUNTS) and all(covers(g, bucket, name) for g in writers)


@pytest.mark.pure
def test_the_record_the_program_reads_is_the_one_the_container_writes():
    """``stage_dataset.py`` is a file of the step's ConfigMap (it imports nothing of tpu-rl's but ``base_snapshot.py``
    beside it): its record's name is pinned to ``core.layout``'s, which the program's reader uses
    (``artifacts.dataset_record``)."""
    from core.layout import DATASET_RECORD, STAGED_DATASET
    from workloads.container import stage_dataset

    assert stage_dataset.DATASET_RECORD == DATASET_RECORD
    assert f" {OUT}{STAGED_DATASET} " in dataset_lines(settings("prod", []), OUT)[0], "where the script stages"


@pytest.mark.pure
def test_one_rule_selects_the_files_training_stages_and_the_preflight_checks():
    """``base_snapshot.selected``: what each pattern matches (plain paths only), refused when a pattern matches
    nothing or the selection is past ``MAX_FILES`` files or holds a huge one; training and `up`'s preflight share
    it (``workloads.preflight.check_dataset_access``)."""
    from workloads.container.base_snapshot import MAX_DATASET_FILE_BYTES, MAX_FILES, RefusedError, selected

    names = {"data/train_1M-0.parquet": 3, "data/train_1M-1.parquet": 4, "data/../x.parquet": 1, "README.md": 9}
    assert selected(names, ("data/*.parquet",), "a/b@c") == {"data/train_1M-0.parquet": 3, "data/train_1M-1.parquet": 4}
    with pytest.raises(RefusedError, match="dataset a/b@c has no file matching main/test-"):
        selected(names, ("data/*.parquet", "main/test-*"), "a/b@c")
    many = {f"data/{i}.parquet": 1 for i in range(MAX_FILES + 1)}
    with pytest.raises(RefusedError, match=f"match over {MAX_FILES} files or a huge one"):
        selected(many, ("data/*",), "a/b@c")
    with pytest.raises(RefusedError, match="a huge one"):
        selected({"data/big.parquet": MAX_DATASET_FILE_BYTES + 1}, ("data/*",), "a/b@c")
