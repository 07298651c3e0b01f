"""Generate ``tests/data/orbax-step-names.txt``: the object names one Orbax RL actor step leaves.

What it writes
    ``tests/data/orbax-step-names.txt``: every file name of ONE saved step (step 10), relative to the
    checkpoint root (the ``.../checkpoints/actor/`` folder), so each line starts with ``10/``. The names
    are sorted, one per line, after a few ``#`` comment lines (generator, versions, step, layout).

What it reproduces
    The actor checkpoint tunix (commit c4ec573, the RL library MaxText 0.2.4 pinned) writes on GCS under
    Pathways (see /work/notes/maxtext-tunix.md section 4, "Checkpoint layout"):

    * Orbax **v1** ``ocp.training.Checkpointer`` (tunix ``sft/checkpoint_manager.py:93-99``) with
      ``standard_name_format()`` (bare integer step folders), ``FixedIntervalPolicy`` / ``LatestN`` and an
      async save, ``custom_metadata={"global_step": ..., "role": "actor"}`` (peft_trainer.py, rl_cluster.py).
    * two checkpointables, ``model_params`` and ``optimizer_state`` (tunix ``sft/checkpoint_manager.py``
      ``save()``), here small pytrees shaped like a MaxText NNX model's ``nnx.state(model)``
      (``{"base": {"decoder": ..., "token_embedder": ...}}`` with ``"value"`` leaves) and an
      adafactor-like optimizer state (``v_row`` / ``v_col`` / ``v`` per param plus a ``count``);
    * zarr v2 WITHOUT OCDBT: tunix sets ``ctx.array.saving.use_ocdbt = False`` and
      ``ctx.array.saving.use_zarr3 = False`` when ``'proxy' in JAX_PLATFORMS``
      (``sft/checkpoint_manager.py:115-133``); the script sets the same two options;
    * ``commit_success.txt`` finalization. On gs:// paths Orbax picks ``atomicity.CommitFileTemporaryPath``
      (``orbax/checkpoint/_src/path/atomicity_defaults.py``, ``get_default_temporary_path_class`` and
      ``get_item_default_temporary_path_class``: ``if gcs_utils.is_gcs_path(path): return
      atomicity.CommitFileTemporaryPath``): no tmp folder, files written in place, then
      ``<dir>/commit_success.txt`` (``_src/path/atomicity.py``, ``CommitFileTemporaryPath.finalize``). On a
      local path the default would be ``AtomicRenameTemporaryPath`` (``<step>.orbax-checkpoint-tmp`` then a
      rename). The installed Orbax (>= 0.12.5 or so) has ``AtomicityOptions(mode=AtomicityMode.COMMIT_FILE)``
      (``orbax/checkpoint/options.py``; v1 ``ctx.atomicity.mode``,
      ``experimental/v1/_src/context/options.py``), which ``atomicity_defaults._ATOMICITY_MODE_TO_PATH_CLASS``
      maps to ``CommitFileTemporaryPath`` for the step folder and for each item folder alike. The script
      uses it, so every ``commit_success.txt`` in the output was written by Orbax itself, not added here
      (with absl INFO logging the save says ``Creating tmp directory .../actor/10``, i.e. tmp == final).
      Since Orbax 0.12.3 ``AtomicRenameTemporaryPath.finalize`` writes ``commit_success.txt`` too, so the
      final names would match either way; the option matters for what an unfinished step looks like.

    Differences from a real run, all left as they are: the arrays are tiny and live on 2 CPU devices
    (so a sharded array has 2 chunk files, ``0.0`` and ``1.0``; on a TPU slice there is one per distinct
    shard; small replicated arrays are also split in 2 chunks by Orbax's replica-parallel save, except the
    1-element ones), and the standard ``ArrayHandler`` is used, not ``CloudPathwaysArrayHandler`` (with the
    Pathways persistence handler ``_sharding`` / ``array_metadatas/process_0`` may be absent, NOT VERIFIED).
    The optimizer-state key path (``opt_state.0.v_row...``) is an illustration, NOT VERIFIED against
    ``nnx.state(optimizer, nnx.optimizer.OptState)``.

Why a committed fixture
    CI does not install jax or orbax (they are heavy and only needed to regenerate this list), so the
    tests read the committed text file; rerun this script by hand when the Orbax / tunix pins move.

How to run (from the project root; the venv is a scratch one outside the project)::

    python -m venv /tmp/orbax-venv && /tmp/orbax-venv/bin/pip install orbax-checkpoint jax \
        && /tmp/orbax-venv/bin/python tests/make_orbax_fixture.py

Last run with: orbax-checkpoint 0.12.8, jax 0.10.2 (jaxlib 0.10.2), numpy 2.4.6, tensorstore 0.1.86,
Python 3.11.7.
"""

from __future__ import annotations

import importlib.metadata
import sys
import tempfile
from pathlib import Path

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from orbax.checkpoint import v1 as ocp

STEP = 10
N_DEVICES = 2
OUT = Path(__file__).resolve().parent / "data" / "orbax-step-names.txt"


def _version(dist: str) -> str:
    return importlib.metadata.version(dist)


def _mesh() -> Mesh:
    devices = np.array(jax.devices()[:N_DEVICES])
    return Mesh(devices, ("fsdp",))


def _put(arr: np.ndarray, mesh: Mesh, spec: PartitionSpec) -> jax.Array:
    return jax.device_put(arr, NamedSharding(mesh, spec))


def model_params(mesh: Mesh) -> dict:
    """A tiny MaxText-NNX-shaped ``nnx.state(model)``: ``{"base": {"decoder": ..., "token_embedder": ...}}``."""
    rng = np.random.default_rng(0)
    emb, mlp, vocab = 8, 16, 32

    def w(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)

    sharded = PartitionSpec("fsdp")  # first axis split over the 2 devices
    replicated = PartitionSpec()
    layers = {}
    for i in range(2):
        layers[f"layers_{i}"] = {
            "mlp": {
                "wi_0": {"kernel": {"value": _put(w(emb, mlp), mesh, sharded)}},
                "wi_1": {"kernel": {"value": _put(w(emb, mlp), mesh, sharded)}},
                "wo": {"kernel": {"value": _put(w(mlp, emb), mesh, sharded)}},
            },
            "pre_self_attention_norm": {"scale": {"value": _put(w(emb), mesh, replicated)}},
        }
    return {
        "base": {
            "decoder": {**layers, "decoder_norm": {"scale": {"value": _put(w(emb), mesh, replicated)}}},
            "token_embedder": {"embedding": {"value": _put(w(vocab, emb), mesh, sharded)}},
        }
    }


def optimizer_state(params: dict, mesh: Mesh) -> dict:
    """An adafactor-like state: factored ``v_row`` / ``v_col`` (and ``v``) per param plus a ``count``."""
    replicated = PartitionSpec()

    def zeros(shape: tuple[int, ...]) -> jax.Array:
        return _put(np.zeros(shape, np.float32), mesh, replicated)

    v_row = jax.tree.map(lambda x: zeros(x.shape[:-1] if x.ndim > 1 else (1,)), params)
    v_col = jax.tree.map(lambda x: zeros(x.shape[-1:] if x.ndim > 1 else (1,)), params)
    v = jax.tree.map(lambda x: zeros((1,) if x.ndim > 1 else x.shape), params)
    count = _put(np.asarray(STEP, np.int32), mesh, replicated)
    return {"opt_state": {"0": {"count": {"value": count}, "v_row": v_row, "v_col": v_col, "v": v}}}


def context() -> ocp.Context:
    """The tunix Pathways context (zarr v2, no OCDBT) plus commit-file atomicity as on gs:// paths."""
    ctx = ocp.Context()
    ctx.atomicity.mode = ocp.options.AtomicityMode.COMMIT_FILE  # what gs:// paths get by default
    ctx.asynchronous.timeout_secs = 1200  # tunix checkpoint_options.py DEFAULT_CHECKPOINTING_OPTIONS
    ctx.array.saving.use_ocdbt = False
    ctx.array.saving.use_zarr3 = False
    return ctx


def save_step(root: Path) -> None:
    mesh = _mesh()
    params = model_params(mesh)
    checkpointables = {"model_params": params, "optimizer_state": optimizer_state(params, mesh)}
    checkpointer = ocp.training.Checkpointer(
        root,
        context=context(),
        save_decision_policy=ocp.training.save_decision_policies.FixedIntervalPolicy(STEP),
        preservation_policy=ocp.training.preservation_policies.LatestN(3),
        step_name_format=ocp.path.step.standard_name_format(),
    )
    response = checkpointer.save_checkpointables_async(
        STEP, checkpointables, custom_metadata={"global_step": STEP + 1, "role": "actor"}
    )
    if response is None:
        raise SystemExit(f"the save policy skipped step {STEP}")
    response.result()
    checkpointer.close()


def list_names(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def check(names: list[str]) -> None:
    step = f"{STEP}/"
    stray = [n for n in names if not n.startswith(step)]
    if stray:
        raise SystemExit(f"files outside {step}: {stray}")
    for required in ("_CHECKPOINT_METADATA", "commit_success.txt"):
        if step + required not in names:
            raise SystemExit(f"missing {step}{required}")
    for item in ("model_params", "optimizer_state"):
        if f"{step}{item}/commit_success.txt" not in names:
            raise SystemExit(f"missing {step}{item}/commit_success.txt")
    bad = [n for n in names if "ocdbt" in n or "zarr.json" in n or ".orbax-checkpoint-tmp" in n]
    if bad:
        raise SystemExit(f"unexpected OCDBT / zarr3 / tmp names: {bad}")


def main() -> None:
    if len(jax.devices()) < N_DEVICES:
        raise SystemExit(f"need {N_DEVICES} CPU devices, got {jax.devices()}")
    with tempfile.TemporaryDirectory(prefix="orbax-fixture-") as tmp:
        root = Path(tmp) / "checkpoints" / "actor"
        save_step(root)
        names = list_names(root)
    check(names)
    header = [
        "# generated by tests/make_orbax_fixture.py: do not edit, rerun the script",
        f"# orbax-checkpoint {_version('orbax-checkpoint')}, jax {_version('jax')}, "
        f"jaxlib {_version('jaxlib')}, Python {sys.version.split()[0]}",
        f"# one step ({STEP}) of an actor checkpoint, names relative to the checkpoint root (.../checkpoints/actor/)",
        "# layout: orbax v1 training.Checkpointer, items model_params + optimizer_state, zarr v2, no OCDBT",
        "# commit_success.txt finalization (CommitFileTemporaryPath, as on gs://), no tmp folders",
    ]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(header + names) + "\n")
    print(f"wrote {len(names)} names to {OUT}")


if __name__ == "__main__":
    # Two CPU devices so that sharded arrays get more than one chunk file; must precede backend init.
    jax.config.update("jax_platforms", "cpu")
    jax.config.update("jax_num_cpu_devices", N_DEVICES)
    main()
