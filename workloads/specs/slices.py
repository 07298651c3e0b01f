"""train_rl's slice split: which MaxText keys put the trainer and the samplers on their own slices, and what a plan
with two slices is told about them."""

from __future__ import annotations


def disaggregated(slices: int) -> dict[str, int | str]:
    """train_rl's slice split: none on one slice (``-1``, its single-slice path, where the device fractions split
    the chips), and on two the trainer on the first and the samplers on the second (MaxText 0.2.5
    ``utils/model_creation_utils.py`` ``setup_configs_and_devices``: ``num_trainer_slices`` and
    ``num_samplers_slices`` both positive, the devices grouped by ``slice_index``). Without it, train_rl's single-slice
    path would use a second slice's chips as one mesh with the first's, across the data-centre network
    (``core.config.finish.check_meshes`` refuses more than two).

    Two slices also need ``inference_benchmark_test=true``: MaxText 0.2.5's ``configs/types.py``
    ``RLConfig.set_derived_values_and_validate`` sets ``num_slices = 1 if cluster.num_trainer_slices == -1 else -1``
    after every load, overriding the ``num_slices`` that ``setup_configs_and_devices`` passes each side, and
    ``utils/maxtext_utils.py`` ``create_device_mesh`` then divides the side's devices by -1 and stops. That function
    counts one slice when ``inference_benchmark_test`` is set, which is each side's truth here (the trainer has one
    whole slice, the samplers the other); the key's only other reader, ``utils/max_utils.py``
    ``maybe_initialize_jax_distributed_system``, returns before it because ``post_train/rl.yml`` sets
    ``skip_jax_distributed_system: true``. tests/test_maxtext_meshes.py builds both meshes with MaxText's code.

    The samplers run one replica over their slice (``rollout_data_parallelism=1``): MaxText's multislice RL came with
    one sampler replica (maxtext#2702: "it only supports one sampler slice with one model replica"), and the data
    parallelism added after it (maxtext#2713) was tested by hand on other slices than these; rl.yml's -1 would derive
    the slice's chips over rollout TP x EP, eight replicas of the default TP 4 on a 32-chip slice, which no run of
    this project has shown. ``model_creation_utils.get_rollout_kwargs_for_parallelism`` then needs rollout TP x
    EP to be the slice's chips (``core.config.finish`` refuses other meshes)."""
    if slices == 1:
        return {}
    return {
        "num_trainer_slices": 1,
        "num_samplers_slices": slices - 1,
        "inference_benchmark_test": "true",
        "rollout_data_parallelism": 1,
    }


def slice_warnings(slices: int) -> list[str]:
    """What a plan of ``slices`` says before anything is created (one line each): two slices are experimental, with
    what is verified of them (the meshes, built by MaxText's own code) and what is not (a training run)."""
    if slices == 1:
        return []
    return [
        "tpu-rl:tpu.slices 2 is experimental: MaxText 0.2.5's own code builds its meshes (the trainer's on one slice, "
        "one sampler replica over the other: rollout_data_parallelism 1, maxtext#2702; tests/test_maxtext_meshes.py), "
        "but no training run on two slices has been seen: watch its first run (make status) before relying on it"
    ]
