"""Where a training run writes under its step's output path: the one home of the layout the training
step's arguments set and the program, `status` and `report` read back.

MaxText 0.2.4's ``RLConfig`` (``configs/types.py``) derives ``checkpoint_dir`` and ``tensorboard_dir``
from ``base_output_directory`` and ``run_name``; tunix writes the actor's checkpoints under
``checkpoint_dir`` (``<checkpoint_dir>/actor/``).
"""

from __future__ import annotations

RUN_NAME = "rl"
"""``run_name`` the training step passes (its tensorboard and checkpoints live under it)."""


def tensorboard_dir(output_uri: str) -> str:
    """MaxText's ``tensorboard_dir``: ``<base_output_directory>/<run_name>/tensorboard/``."""
    return f"{output_uri}{RUN_NAME}/tensorboard/"


def actor_checkpoints(output_uri: str) -> str:
    """tunix's actor checkpoints: ``<base_output_directory>/<run_name>/checkpoints/actor/``."""
    return f"{output_uri}{RUN_NAME}/checkpoints/actor/"
