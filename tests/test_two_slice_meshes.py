"""Two slices build their meshes in MaxText 0.2.5 (fast tier; tests/test_maxtext_meshes.py builds them with MaxText's
own code): the program passes ``inference_benchmark_test=true`` with ``tpu.slices: 2`` only, since RLConfig sets
``num_slices`` to -1 whenever ``num_trainer_slices`` is positive and ``create_device_mesh`` counts one slice per side
only with that key; the key is the program's, refused in ``extraArgs``."""

from __future__ import annotations

import pytest

from core.config import ConfigError
from tests.lifecycle_walk import settings
from workloads.specs.commands import disaggregated, train_argv

pytestmark = pytest.mark.pure

TWO = ["tpu-rl:tpu.slices=2", "tpu-rl:training.iciExpertParallelism=1", "tpu-rl:training.rolloutTensorParallelism=32"]
KEY = "inference_benchmark_test"


def _keys(overrides: list[str]) -> dict[str, str]:
    argv = train_argv(settings("prod", overrides), "gs://b/in/", "gs://b/out/")
    return dict(a.split("=", 1) for a in argv[2:] if "=" in a)


def test_two_slices_make_maxtext_count_one_slice_per_side():
    assert _keys(TWO)[KEY] == "true"
    assert disaggregated(2) == {
        "num_trainer_slices": 1,
        "num_samplers_slices": 1,
        KEY: "true",
        "rollout_data_parallelism": 1,
    }


def test_one_slice_leaves_maxtexts_slice_count_alone():
    assert KEY not in _keys([])
    assert disaggregated(1) == {}


def test_the_key_is_the_programs():
    with pytest.raises(ConfigError) as caught:
        settings("prod", [*TWO, f'tpu-rl:training.extraArgs={{"{KEY}": "false"}}'])
    assert "set by the program with tpu-rl:tpu.slices 2" in str(caught.value)
    assert "\n" not in str(caught.value)
