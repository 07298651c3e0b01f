"""Build train_rl's trainer and sampler meshes with MaxText's own code on fake CPU devices (run by MaxText's Python).

    <maxtext venv>/bin/python tools/maxtext_mesh.py CASES.json DEVICES
        # CASES.json: {"name": {"argv": ["-m", "maxtext...train_rl", ...], "slices": 2}, ...}

It imports nothing of the project: the interpreter is the venv ``python -m tools.adopt_maxtext VERSION --loader
PYTHON3.12`` makes (``build/maxtext-<version>/venv``). JAX runs on CPU with ``DEVICES`` host devices
(``--xla_force_host_platform_device_count``), every case of the file with that many chips in all its slices.

For each case it does what ``trainers/post_train/rl/train_rl.py`` ``_rl_train_impl`` does before it loads a
weight: ``utils/model_creation_utils.py`` ``setup_configs_and_devices`` (``pyconfig.initialize_pydantic`` with
``RLConfig``, and on two slices its two re-reads with the trainer's and the sampler's kwargs), then
``utils/maxtext_utils.py`` ``create_device_mesh`` for the trainer's devices (what ``from_pretrained`` ->
``from_config`` -> ``get_mesh_from_config`` builds) and for the sampler's (``create_models_and_meshes``' rollout
mesh), each made a ``jax.sharding.Mesh`` over the config's ``mesh_axes`` as those functions do.

The two functions are MaxText's own source, read from the installed wheel and run as written: their modules
import the whole TPU stack at the top (tunix, qwix, transformers), which this venv does not hold, so each function
is compiled from its module's file with the module's imports that this venv can satisfy (the ones the function
uses all are: a name it lacks fails the case). CPU devices have no ``slice_index``, which a multislice TPU
device has and ``setup_configs_and_devices`` groups by: ``jax.devices()`` gives each device the index of the slice
it would be on (the first ``DEVICES / slices`` on slice 0), and the meshes are made of the real devices.

Prints one JSON object, name -> {"ok": true, "trainer": shape, "sampler": shape, "trainer_devices": n,
"sampler_devices": n, "apart": bool} or {"ok": false, "error": "..."}; exits 0 (each case's result is its line).
"""

from __future__ import annotations

import ast
import functools
import importlib
import json
import os
import sys
from pathlib import Path
from typing import Any

DEVICES = int(sys.argv[2]) if len(sys.argv) > 2 else 1
os.environ["JAX_PLATFORMS"] = "cpu"
os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={DEVICES}"

import jax  # noqa: E402 (after XLA_FLAGS, which JAX reads when its backend starts)
import numpy as np  # noqa: E402

TRAINER = "maxtext.trainers.post_train.rl.train_rl"
PLACEHOLDERS = {"${checkpoint}": "gs://tpu-rl-mesh-check/checkpoint/0/items", "${commit}": "0" * 40}


class SliceDevice:
    """A CPU device with the ``slice_index`` a TPU device of a multislice run has (everything else the device's)."""

    def __init__(self, device: Any, slice_index: int) -> None:
        self.device = device
        self.slice_index = slice_index

    def __getattr__(self, name: str) -> Any:
        return getattr(self.device, name)

    def __repr__(self) -> str:
        return f"SliceDevice({self.device.id}, slice {self.slice_index})"


def maxtext_function(module: str, name: str) -> Any:
    """``module``'s top-level function ``name`` compiled from the wheel's file, with the module's importable imports."""
    package = Path(importlib.import_module("maxtext").__file__ or "").parent
    path = package.joinpath(*module.split(".")[1:]).with_suffix(".py")
    tree = ast.parse(path.read_text(), str(path))
    namespace: dict[str, Any] = {"__name__": module, "__file__": str(path)}
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            try:
                exec(compile(ast.Module([node], []), str(path), "exec"), namespace)  # noqa: S102 (MaxText's own import)
            except ImportError:
                continue  # a module of the TPU stack this venv lacks; the function fails if it needs it
    found: list[ast.stmt] = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
    if len(found) != 1:
        raise LookupError(f"{path}: no single top-level function {name}")
    exec(compile(ast.Module(found, []), str(path), "exec"), namespace)  # noqa: S102 (MaxText's own function)
    return namespace[name]


def _real(array: Any) -> Any:
    return np.vectorize(lambda d: d.device if isinstance(d, SliceDevice) else d, otypes=[object])(array)


def _devices(fake: list[Any], backend: Any = None) -> list[Any]:
    """``jax.devices`` as a multislice TPU run gives them: ``fake``, whatever the backend asked for."""
    return list(fake)


def run(argv: list[str], slices: int, setup: Any, create_device_mesh: Any) -> dict[str, Any]:
    """One case: train_rl's configs and devices, then its two meshes (see the module's docstring)."""
    types = importlib.import_module("maxtext.configs.types")
    package = Path(importlib.import_module("maxtext").__file__ or "").parent
    if argv[:2] != ["-m", TRAINER]:
        raise ValueError(f"not train_rl's argv: {argv[:2]}")
    words = list(argv[2:])
    for ref, value in PLACEHOLDERS.items():
        words = [w.replace(ref, value) for w in words]
    path = str(package.joinpath(*TRAINER.split(".")[1:])) + ".py"
    trainer_config, sampler_config, trainer_devices, sampler_devices = setup(
        [path, *words], {}, config_class=types.RLConfig
    )
    meshes = {}
    for side, config, devices in (
        ("trainer", trainer_config, trainer_devices),
        ("sampler", sampler_config, sampler_devices),
    ):
        array = create_device_mesh(config, devices)
        meshes[side] = jax.sharding.Mesh(_real(array), config.mesh_axes)
    trainer_ids = {d.id for d in meshes["trainer"].devices.flat}
    sampler_ids = {d.id for d in meshes["sampler"].devices.flat}
    return {
        "ok": True,
        "trainer": dict(meshes["trainer"].shape),
        "sampler": dict(meshes["sampler"].shape),
        "trainer_devices": len(trainer_ids),
        "sampler_devices": len(sampler_ids),
        "apart": not trainer_ids & sampler_ids,
        "slices": slices,
    }


def main(path: str) -> int:
    cases: dict[str, dict[str, Any]] = json.loads(Path(path).read_text())
    real = jax.devices()
    if len(real) != DEVICES:
        raise SystemExit(f"JAX has {len(real)} CPU devices, not {DEVICES}: XLA_FLAGS was not read")
    setup = maxtext_function("maxtext.utils.model_creation_utils", "setup_configs_and_devices")
    create_device_mesh = maxtext_function("maxtext.utils.maxtext_utils", "create_device_mesh")
    results: dict[str, dict[str, Any]] = {}
    for name, case in cases.items():
        slices = int(case["slices"])
        fake = [SliceDevice(d, i * slices // len(real)) for i, d in enumerate(real)]
        jax.devices = functools.partial(_devices, fake)  # what a multislice TPU run's jax.devices() gives
        try:
            results[name] = run(case["argv"], slices, setup, create_device_mesh)
        except (Exception, SystemExit) as err:  # noqa: BLE001 (MaxText's refusal is the result)
            text = " ".join(line.strip() for line in str(err).splitlines() if line.strip())
            results[name] = {"ok": False, "error": f"{type(err).__name__}: {text[:500]}"}
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
