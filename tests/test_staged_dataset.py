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
def test_a_dataset_loaded_by_name_is_not_staged():
    """GSM8K names no files (rl.yml's defaults: ``datasets`` loads ``openai/gsm8k`` by name): nothing to stage."""
    keys, staged = staged_dataset(DATASETS["gsm8k"], OUT)
    assert keys == list(DATASETS["gsm8k"].keys) and staged is None
    assert dataset_lines(settings("prod", ["tpu-rl:training.dataset=gsm8k"]), OUT) == []


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
