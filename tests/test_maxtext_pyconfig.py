"""MaxText's own config loader takes each step's argv (slow tier): tools/maxtext_loader.py, run by the Python of a venv
with the pinned release's wheel and the JAX it imports, loads every argv the steps pass as the module it runs loads it
(``pyconfig.initialize_pydantic``, pydantic's ``RLConfig``/``MaxTextConfig`` with ``extra="forbid"`` and its
validators), and the sampler's config vLLM's MaxText model makes of ``vllm_additional_config``.

The venv is made by ``python -m tools.adopt_maxtext VERSION --loader PYTHON3.12`` (``build/maxtext-VERSION/venv``;
``TPU_RL_MAXTEXT_PYTHON`` names another interpreter); without it these tests skip, saying so, as the export's
torch tests do without pyproject.toml's group slow. tests/test_maxtext_keys.py checks the same argv in the fast tier
against the key table, short of the loader."""

from __future__ import annotations

import functools
import json
import os
import subprocess
from pathlib import Path

import pytest

from core.config import ConfigError
from core.config.load import read_extra_args
from core.knobs import TRAINING_KNOBS
from core.maxtext_keys import MAXTEXT_VERSION
from tools.adopt_maxtext import ROOT, loader_dir

pytestmark = pytest.mark.slow

LOADER = ROOT / "tools" / "maxtext_loader.py"
LOAD_SECONDS = 600


def _python() -> Path:
    given = os.environ.get("TPU_RL_MAXTEXT_PYTHON")
    python = Path(given) if given else loader_dir(MAXTEXT_VERSION) / "bin" / "python"
    if not python.exists():
        pytest.skip(
            f"no Python with MaxText {MAXTEXT_VERSION}'s loader at {python}: "
            f"python -m tools.adopt_maxtext {MAXTEXT_VERSION} --loader python3.12 makes it"
        )
    return python


def _steps() -> dict[str, list[str]]:
    """Every step's argv of both example stacks; dev's with the knobs 0.2.5 added changed and the two-slice keys;
    then three controls that show what the loader refuses and what it does not."""
    from tests.lifecycle_walk import settings
    from workloads.specs.commands import convert_argv, disaggregated, export_argv, train_argv

    changed = [
        f"tpu-rl:training.{k.field}={-1 if not isinstance(k.default, bool) else str(not k.default).lower()}"
        for k in TRAINING_KNOBS
        if k.maxtext_default
    ]
    extra = ["tpu-rl:training.extraArgs.eval_interval=5"]
    steps: dict[str, list[str]] = {}
    for stack, overrides in (("prod", []), ("dev", [*changed, *extra])):
        s = settings(stack, overrides)
        steps[f"{stack}-convert"] = convert_argv(s, "gs://b/convert/")
        steps[f"{stack}-train"] = train_argv(s, "gs://b/convert/0/items/", "gs://b/train/")
        steps[f"{stack}-export"] = export_argv(s, "gs://b/export/")
    steps["dev-train-two-slices"] = steps["dev-train"] + [f"{k}={v}" for k, v in disaggregated(2).items()]
    steps["control-top-level-typo"] = steps["prod-train"] + ["eval_intervall=5"]
    steps["control-wrong-type"] = steps["prod-train"] + ["eval_interval=often"]
    steps["control-nested-typo"] = steps["prod-train"] + ["rl.num_generation=8"]
    steps["control-sampler-typo"] = steps["prod-train"] + [
        "vllm_additional_config={'maxtext_config': {'model_name': 'gemma4-26b', 'use_ragged_sortt': false}}"
    ]
    return steps


@functools.cache
def _loaded(tmp: str) -> dict[str, dict]:
    path = Path(tmp) / "argv.json"
    path.write_text(json.dumps(_steps()))
    done = subprocess.run(
        [str(_python()), str(LOADER), str(path)], capture_output=True, text=True, timeout=LOAD_SECONDS, check=False
    )
    assert done.stdout.strip(), f"the loader printed nothing: {done.stderr[-2000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def output(tmp_path_factory) -> dict[str, dict]:
    return _loaded(str(tmp_path_factory.mktemp("loader")))


@pytest.fixture(scope="module")
def loaded(output) -> dict[str, str]:
    return output["results"]


@pytest.mark.parametrize(
    "step",
    ["prod-convert", "prod-train", "prod-export", "dev-convert", "dev-train", "dev-export", "dev-train-two-slices"],
)
def test_maxtexts_loader_takes_the_steps_argv(loaded, step):
    assert loaded[step] == "ok", f"MaxText {MAXTEXT_VERSION}'s pyconfig refused {step}: {loaded[step]}"


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_paths_maxtext_derives_are_the_ones_the_program_reads(output, stack):
    """``RLConfig`` derives checkpoint_dir and tensorboard_dir from base_output_directory and run_name; status,
    report and the export read them at core.layout's paths (tunix puts the actor's checkpoints in ``actor/``)."""
    from core.layout import actor_checkpoints, tensorboard_dir

    derived = output["derived"][f"{stack}-train"]
    assert derived["tensorboard_dir"] == tensorboard_dir("gs://b/train/")
    assert derived["checkpoint_dir"] + "actor/" == actor_checkpoints("gs://b/train/")


def test_the_loader_refuses_an_unknown_key_and_a_wrong_type(loaded):
    assert loaded["control-top-level-typo"] != "ok" and "eval_intervall" in loaded["control-top-level-typo"]
    assert loaded["control-wrong-type"] != "ok"
    assert loaded["control-sampler-typo"] != "ok" and "use_ragged_sortt" in loaded["control-sampler-typo"], (
        "the sampler's config (vllm_additional_config's maxtext_config) is loaded too"
    )


def test_the_loader_takes_a_nested_typo_silently_which_extra_args_refuses(loaded):
    """Why the key table exists: pyconfig merges ``rl.num_generation`` into the rl block and trains with the
    default; the program refuses it before any TPU starts."""
    assert loaded["control-nested-typo"] == "ok"
    with pytest.raises(ConfigError, match="did you mean rl.num_generations"):
        read_extra_args("tpu-rl:training.extraArgs", {"rl.num_generation": 8})
