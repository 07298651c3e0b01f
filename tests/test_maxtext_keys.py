"""The committed MaxText 0.2.4 key table is the pinned image's configuration, and extraArgs are read against it."""

from __future__ import annotations

import pytest

from core import maxtext_keys
from core.config import ConfigError
from core.config.load import INTERPRETED, PROGRAM_KEYS, read_extra_args
from core.knobs import TRAINING_KNOBS
from tests.conftest import shared_path

KEY = "tpu-rl:training.extraArgs"

pytestmark = pytest.mark.pure


@pytest.mark.slow
def test_the_table_is_regenerated_from_maxtext_0_2_4():
    configs = shared_path("maxtext-0.2.4", "configs")
    assert maxtext_keys.generate(configs) == maxtext_keys.known_keys(), (
        "core/data/maxtext-0.2.4-keys.json is stale: "
        "python -m core.maxtext_keys tests/data/vendor/maxtext-0.2.4/configs"
    )


def test_every_key_the_program_sets_or_reads_is_a_maxtext_key():
    table = maxtext_keys.known_keys()
    assert {k.key for k in TRAINING_KNOBS} <= set(table)
    assert set(INTERPRETED) <= set(table)
    derived = {"checkpoint_dir", "tensorboard_dir"}  # RLConfig fields derived in code, in no config file
    assert set(PROGRAM_KEYS) - derived <= set(table) and not derived & set(table)
    assert table["rl.num_generations"] == "int" and table["train_fraction"] == "float"
    assert table["async_checkpointing"] == "bool" and table["logical_axis_rules"] == "list"


@pytest.mark.parametrize(
    ("typo", "meant"),
    [
        ("rl.num_generation", "rl.num_generations"),
        ("eval_intervall", "eval_interval"),
        ("rl.grpo_betta", "rl.grpo_beta"),
    ],
)
def test_closest_key(typo, meant):
    assert maxtext_keys.closest_key(typo) == meant


def test_closest_key_stays_inside_a_nested_block():
    assert maxtext_keys.closest_key("rl.eval_interval") is None, "eval_interval is not an rl.* key"
    assert maxtext_keys.closest_key("zzzzzzzz") is None


@pytest.mark.parametrize(
    ("value", "rendered"),
    [
        ({"eval_interval": 5}, {"eval_interval": "5"}),
        ({"eval_interval": "5"}, {"eval_interval": "5"}),
        ({"rl": {"num_iterations": 2}}, {"rl.num_iterations": "2"}),
        ({"rl.grpo_beta": 0.04}, {"rl.grpo_beta": "0.04"}),
        ({"async_checkpointing": "TRUE"}, {"async_checkpointing": "true"}),
        ({"train_fraction": "0.5", "num_epoch": 2}, {"num_epoch": "2", "train_fraction": "0.5"}),
        ('{"rl.loss_algo": "gspo-token"}', {"rl.loss_algo": "gspo-token"}),
        ({}, {}),
    ],
)
def test_extra_args_are_typed_by_the_table(value, rendered):
    assert read_extra_args(KEY, value) == rendered


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ({"rl": {"num_generation": 8}}, "did you mean rl.num_generations"),
        ({"eval_interval": 2**31}, "at most 100000"),
        ({"max_num_checkpoints_to_keep": 2**31}, "at most 2147483647"),
        ({"rl.grpo_beta": "big"}, "finite number"),
        ({"rl.grpo_beta": float("nan")}, "finite number"),
        ({"eval_interval": None}, "expected a value"),
        ({"generation_configs": {"greedy": {"temperature": 0}}}, "takes an object here"),
        ({"data_sharding": "x"}, "takes a list here"),
    ],
)
def test_extra_args_refused(value, words):
    with pytest.raises(ConfigError, match=words):
        read_extra_args(KEY, value)
