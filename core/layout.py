"""Where a training run writes under its step's output path: the one home of the layout the training
step's arguments set and the program, `status` and `report` read back.

MaxText's ``RLConfig`` (0.2.4 and 0.2.5) (``configs/types.py``) derives ``checkpoint_dir`` and ``tensorboard_dir``
from ``base_output_directory`` and ``run_name``; tunix writes the actor's checkpoints under
``checkpoint_dir`` (``<checkpoint_dir>/actor/``).
"""

from __future__ import annotations

from core.steps import HUB_CACHE_FILLER

PATHWAYS_SCRATCH = "pathways/"
"""Where the Pathways servers' ``--gcs_scratch_location`` folders live under the bucket (``compile_cache``): the
prefix the node accounts may write besides training's own (``infra.gcp.access``)."""


def compile_cache(bucket: str, model: str, key: str) -> str:
    """The training step's Pathways scratch, ``gs://<bucket>/pathways/<model>/<key>/``: the servers'
    ``--gcs_scratch_location``, where Pathways keeps its compilation cache (``compilation_cache/`` below it), so
    every attempt of a run, and every later run with the same ``key``, compiles from it. ``key`` is
    ``workloads.specs.step_specs.compile_cache_key``: a changed model, image, slice or program knob is another
    folder, never a stale entry. Under ``pathways`` rather than the step's ``<model>/train/``: a GCS client that
    creates a folder looks each missing parent up as an object without its "/", which the ``pathways`` grant
    (no "/") covers and ``<model>/train/`` would not (the servers are closed binaries: how they create folders is
    not known)."""
    return f"gs://{bucket}/{PATHWAYS_SCRATCH}{model}/{key}/"


def step_prefix(model: str, step: str) -> str:
    """Where every run of one step of one model writes, under the bucket: ``<model>/<step>/`` (each run in
    ``<hash>/`` below it, ``workloads.specs.step_specs``)."""
    return f"{model}/{step}/"


def step_output(bucket: str, model: str, step: str, digest: str) -> str:
    """A step's content-addressed output path: ``gs://<bucket>/<model>/<step>/<hash>/``."""
    return f"gs://{bucket}/{step_prefix(model, step)}{digest}/"


RUN_NAME = "rl"
"""``run_name`` the training step passes (its tensorboard and checkpoints live under it)."""


def tensorboard_dir(output_uri: str) -> str:
    """MaxText's ``tensorboard_dir``: ``<base_output_directory>/<run_name>/tensorboard/``."""
    return f"{output_uri}{RUN_NAME}/tensorboard/"


def actor_checkpoints(output_uri: str) -> str:
    """tunix's actor checkpoints: ``<base_output_directory>/<run_name>/checkpoints/actor/``."""
    return f"{output_uri}{RUN_NAME}/checkpoints/actor/"


CONVERTED = "0/items/"
"""The MaxText checkpoint ``to_maxtext`` writes under the conversion's output (training's input)."""
SOURCE_RECORD = "source.json"
"""The conversion's record of the base model it converted: repo, revision, commit, files
(``workloads/container/base_snapshot.py``)."""
HUB_CACHE = "hub/"
"""The Hub cache under the conversion's prefix (``hub_cache``), and the dataset cache under training's
(``dataset_cache``)."""


def hub_cache(bucket: str, model: str) -> str:
    """Where the conversion keeps what it fetched from the Hub, one entry per base model and commit
    (``<hub cache><repo>/<commit>/``, ``workloads/container/base_snapshot.py``): ``gs://<bucket>/<model>/convert/hub/``,
    under the own prefix of the step that fills it (``core.steps.HUB_CACHE_FILLER``), so its identity writes it and
    the export's reads it with the grants they have (``infra.gcp.access``), and every later conversion of the stack
    reads it instead of the Hub."""
    return f"gs://{bucket}/{step_prefix(model, HUB_CACHE_FILLER)}{HUB_CACHE}"


STAGED_DATASET = "dataset/"
"""Where a training run keeps its copy of the dataset's files, under its output (``hf_train_files`` and
``hf_eval_files`` point there, ``workloads.specs.commands.staged_dataset``)."""
DATASET_RECORD = "dataset.json"
"""Its record, written last: ``{"repo", "revision", "commit", "files", "cache"}``
(``workloads/container/base_snapshot.py`` ``stage_dataset``)."""


def dataset_cache(bucket: str, model: str) -> str:
    """Where training keeps the datasets' files it fetched from the Hub, one entry per dataset and commit
    (``<dataset cache><repo>/<commit>/``, ``workloads/container/stage_dataset.py``):
    ``gs://<bucket>/<model>/train/hub/``, under training's own prefix, which its accounts (the node pools') write
    (``infra.gcp.access``); each run copies its dataset from there into its own output, so every later run of the
    stack reads the bucket instead of the Hub. Never in a shared Hub cache (``tpu-rl:model.hubCache``): only the
    conversion's and the export's identities are granted there."""
    return f"gs://{bucket}/{step_prefix(model, 'train')}{HUB_CACHE}"


BASE_FILES = "base/"
"""The base's files that are not weights, at that commit, under the conversion's output."""
