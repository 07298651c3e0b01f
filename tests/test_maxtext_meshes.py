"""Every slice count, mesh and model the config accepts builds train_rl's meshes in MaxText's own code (slow tier).

tools/maxtext_mesh.py, run by the Python of the venv with MaxText's wheel (``python -m tools.adopt_maxtext VERSION
--loader PYTHON3.12``; skipped without it, as tests/test_maxtext_pyconfig.py is), does what train_rl does before it
loads a weight: ``setup_configs_and_devices`` (the config read and, on two slices, its two re-reads with the
trainer's and the sampler's kwargs) and ``create_device_mesh`` for the trainer's and the sampler's devices, on as many
fake CPU devices as the run's slices have chips. The cases are every combination of the TPU catalogue's versions,
machine types and topologies, ``tpu.slices`` 1 to 4, every model of the catalogue and a grid of the mesh knobs that
the config accepts (what it refuses is never run), each distinct argv once."""

from __future__ import annotations

import functools
import json
import os
import subprocess
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from core.config import ConfigError
from core.maxtext_keys import MAXTEXT_VERSION
from core.models import MODELS
from core.tpu import CATALOGUE, chips_in
from tests.lifecycle_walk import settings
from tools.adopt_maxtext import ROOT, loader_dir
from workloads.specs.commands import train_argv

pytestmark = pytest.mark.slow

MESH = ROOT / "tools" / "maxtext_mesh.py"
RUN_SECONDS = 900
SLICES = (1, 2, 3, 4)
MESH_KNOBS = ((1, 1), (2, 1), (2, 4), (4, 1))
"""(iciTensorParallelism, iciExpertParallelism): the expert axis only where a model and a slice count take it."""


def _python() -> Path:
    given = os.environ.get("TPU_RL_MAXTEXT_PYTHON")
    python = Path(given) if given else loader_dir(MAXTEXT_VERSION) / "bin" / "python"
    if not python.exists():
        pytest.skip(
            f"no Python with MaxText {MAXTEXT_VERSION}'s loader at {python}: "
            f"python -m tools.adopt_maxtext {MAXTEXT_VERSION} --loader python3.12 makes it"
        )
    return python


def _case(overrides: list[str], stack: str = "dev") -> tuple[list[str], int, int] | None:
    """The train argv, the chips of one slice and the slice count the config makes of ``overrides``, or None."""
    try:
        s = settings(stack, overrides)
    except ConfigError:
        return None
    return train_argv(s, "gs://b/convert/0/items/", "gs://b/train/"), chips_in(s.tpu.topology), s.tpu.slices


@functools.cache
def accepted() -> dict[str, dict[str, Any]]:
    """Every distinct case the config accepts: name -> argv, slices, chips of one slice."""
    cases: dict[str, dict[str, Any]] = {}
    seen: set[tuple[str, ...]] = set()
    for version in CATALOGUE.values():
        for machine in version.machine_types:
            for topology in machine.topologies:
                for slices in SLICES:
                    for model in MODELS:
                        for tp, ep in MESH_KNOBS:
                            overrides = [
                                f"tpu-rl:tpu.version={version.name}",
                                f"tpu-rl:tpu.machineType={machine.name}",
                                f"tpu-rl:tpu.topology={topology}",
                                f"tpu-rl:tpu.slices={slices}",
                                f"tpu-rl:model.name={model}",
                                f"tpu-rl:training.iciTensorParallelism={tp}",
                                f"tpu-rl:training.iciExpertParallelism={ep}",
                            ]
                            if slices == 2:  # one sampler replica over its slice (core/config/finish.py)
                                overrides.append(f"tpu-rl:training.rolloutTensorParallelism={chips_in(topology)}")
                            made = _case(overrides)
                            if made is None:
                                continue
                            argv, chips, count = made
                            key = (str(chips * count), *argv)
                            if key in seen:
                                continue
                            seen.add(key)
                            name = f"{version.name}-{topology}x{slices}-{model}-tp{tp}-ep{ep}"
                            cases[name] = {"argv": argv, "slices": count, "chips": chips}
    for stack in ("dev", "prod"):
        made = _case([], stack)
        assert made is not None, f"the {stack} example stack"
        cases[f"{stack}-stack"] = {"argv": made[0], "chips": made[1], "slices": made[2]}
    return cases


def controls() -> dict[str, dict[str, Any]]:
    """Two slices without the key that makes MaxText count each side's mesh as one slice: MaxText's own failure."""
    two = next(c for c in accepted().values() if c["slices"] == 2)
    argv = [a for a in two["argv"] if a != "inference_benchmark_test=true"]
    assert argv != two["argv"], "two slices pass inference_benchmark_test=true"
    return {"control-two-slices-as-maxtext-defaults": {**two, "argv": argv}}


@functools.cache
def _built(tmp: str) -> dict[str, dict[str, Any]]:
    python = _python()
    groups: dict[int, dict[str, dict[str, Any]]] = defaultdict(dict)
    for name, case in {**accepted(), **controls()}.items():
        groups[case["chips"] * case["slices"]][name] = case
    results: dict[str, dict[str, Any]] = {}
    for devices, cases in sorted(groups.items()):
        path = Path(tmp) / f"cases-{devices}.json"
        path.write_text(json.dumps(cases))
        done = subprocess.run(
            [str(python), str(MESH), str(path), str(devices)],
            capture_output=True,
            text=True,
            timeout=RUN_SECONDS,
            check=False,
        )
        assert done.returncode == 0 and done.stdout.strip(), f"{devices} devices: {done.stderr[-2000:]}"
        results.update(json.loads(done.stdout.strip().splitlines()[-1]))
    return results


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, dict[str, Any]]:
    return _built(str(tmp_path_factory.mktemp("meshes")))


def test_the_grid_reaches_every_slice_count_the_config_accepts_and_both_models():
    cases = accepted()
    assert {c["slices"] for c in cases.values()} == {1, 2}, "tpu.slices 3 and 4 are refused at plan time"
    for model in MODELS:
        assert any(f"model_name={MODELS[model].maxtext_name}" in c["argv"] for c in cases.values()), model
    assert len({c["chips"] for c in cases.values()}) >= 8, "every slice size of the catalogue"


def test_every_accepted_case_builds_both_meshes_in_maxtexts_code(built):
    failed = {name: r["error"] for name, r in built.items() if not name.startswith("control-") and not r["ok"]}
    assert not failed, f"MaxText's setup_configs_and_devices / create_device_mesh refused: {failed}"


def test_each_mesh_covers_its_sides_chips_and_two_slices_are_apart(built):
    for name, case in accepted().items():
        result = built[name]
        chips, slices = case["chips"], case["slices"]
        for side in ("trainer", "sampler"):
            size = 1
            for axis in result[side].values():
                size *= axis
            assert size == result[f"{side}_devices"], (name, side)
        if slices == 2:
            assert result["trainer_devices"] == result["sampler_devices"] == chips, name
            assert result["apart"], f"{name}: the trainer's and the samplers' slices share devices"
        else:
            assert result["trainer_devices"] <= chips and result["sampler_devices"] <= chips, name


def test_two_slices_fail_in_maxtext_without_the_programs_key(built):
    """Why the program passes ``inference_benchmark_test=true`` on two slices: RLConfig sets num_slices to -1 and
    create_device_mesh divides each side's devices by it."""
    (result,) = (r for name, r in built.items() if name.startswith("control-"))
    assert not result["ok"]
    assert "Number of devices per slice -" in result["error"], result["error"]
