"""Training's dataset staged in the bucket once (issue 40 item 4): which keys point at the staged copy, and what
the script stages (the program itself: tests/test_base_snapshot.py, against the loopback Hub)."""

from __future__ import annotations

import pytest

from core.knobs import DATASETS, Dataset
from tests.lifecycle_walk import settings
from workloads.specs.commands import dataset_lines, staged_dataset

OUT = "gs://b/gemma4-26b/train/0123456789/"


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
    """GSM8K is read from its files too (issue 40 item 4: no attempt loads it from the Hub by name): train and
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
        "dataset_commit=$(python3 /tpu-rl/base_snapshot.py dataset openai/gsm8k main "
        f"{OUT}dataset/ 'main/train-*.parquet' 'main/test-*.parquet')"
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
        "dataset_commit=$(python3 /tpu-rl/base_snapshot.py dataset nvidia/OpenMathInstruct-2 main "
        f"{OUT}dataset/ 'data/train_1M-*.parquet')"
    )
