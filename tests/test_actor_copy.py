"""The actor copied from the reference (``tpu-rl:training.loadCheckpointOnlyOnce``, MaxText's
``load_checkpoint_only_once``) survives tunix's donations in training: real flax, optax and JAX on CPU (slow tier).

What the knob does, read from MaxText 0.2.5 (its wheel, ``maxtext/utils/model_creation_utils.py``
``create_models_and_meshes``): the reference is read from the converted checkpoint, and the actor is
``nnx.clone(reference_model.base)`` instead of a second read. flax's clone shares the reference's ``jax.Array``
buffers (flax 0.12.8 ``graphlib.clone``: "share their underlying jax.Array buffers with the original"), so the copy
is only safe while nothing donates the actor's parameters: a donated buffer is deleted, and the reference with it.

What donates, read from the sources: tunix's trainer jits its step with ``donate_argnames=("optimizer",
"grad_accumulator")`` (``tunix/sft/peft_trainer.py`` ``PeftTrainer`` ``jit_train_and_eval_step``, the same at
c4ec573, MaxText 0.2.4's pin, and at c7d8950; the RL trainer, ``tunix/rl/trainer.py``, is a ``PeftTrainer``); the
optimizer holds no model since flax 0.11 (flax 0.12.8 ``nnx.Optimizer``: "does not have attribute 'model' since
Flax 0.11.0"), its state is optax's own zeros, and tunix's ``GradientAccumulator`` holds ``zeros_like`` of the
parameters (or nothing). MaxText donates nothing on this path. A resumed attempt restores into the actor with
``nnx.update(model, restored['model_params'])`` (``tunix/sft/checkpoint_manager.py`` ``maybe_restore``).

So this test builds the same objects with the real libraries, trains the copy with tunix's donations around a
stand-in training step (not tunix's trainer: no optimizer sharding, evaluation step, checkpoint or weight sync) and
MaxText's optimizers (``utils_rl.get_optimizer``: ``inject_hyperparams`` over clipping and adamw; the program's
adafactor patch), and runs MaxText's own check (``train_rl.py``: ``to_pure_dict`` of the reference before, then
``array_equal`` after; a failure raises "Reference model parameters changed during training!"). The control donates
the model as tunix's experimental trainer does (``tunix/experimental/train/peft_trainer_v2.py``): the reference's
buffers are then deleted, which is what the knob must never meet."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.slow

jax: Any = None
jnp: Any = None
optax: Any = None
nnx: Any = None
np: Any = None


@pytest.fixture(autouse=True, scope="module")
def _libraries() -> None:
    """JAX, optax and flax, imported when a test runs, not when the fast tier collects this module (2-3 s)."""
    global jax, jnp, optax, nnx, np
    jax = pytest.importorskip("jax", reason="the slow group's JAX (pyproject.toml): make test-slow installs it")
    jnp = pytest.importorskip("jax.numpy")
    optax = pytest.importorskip("optax")
    nnx = pytest.importorskip("flax.nnx")
    np = pytest.importorskip("numpy")


TUNIX_DONATED = ("optimizer", "grad_accumulator")
"""What tunix's ``PeftTrainer`` donates to its jitted train step."""
MODEL_DONATED = ("model", "optimizer", "grad_accumulator")
"""The control: the model donated too (tunix's experimental ``peft_trainer_v2``)."""
STEPS = 3


def _base(seed: int):
    """A small stand-in for MaxText's decoder: bf16 parameters, as the converted checkpoint's."""
    rngs = nnx.Rngs(seed)
    up = nnx.Linear(8, 16, param_dtype=jnp.bfloat16, rngs=rngs)
    return nnx.Sequential(up, jax.nn.relu, nnx.Linear(16, 4, param_dtype=jnp.bfloat16, rngs=rngs))


def _gradient_accumulator(model):
    """tunix's accumulator with its grads allocated (``GradientAccumulator``): zeros like the parameters, float32."""
    return jax.tree.map(lambda x: jnp.zeros_like(x, dtype=jnp.float32), nnx.state(model, nnx.Param))


def _optimizer(name: str):
    """MaxText's ``get_optimizer``: hyperparameters injected over clipping and adamw, or the program's patch of it
    (``optax.adamw(...)`` -> ``optax.adafactor(learning_rate=learning_rate)``)."""

    def make(learning_rate):
        step = optax.adamw(learning_rate=learning_rate) if name == "adamw" else optax.adafactor(learning_rate)
        return optax.chain(optax.clip_by_global_norm(1.0), step)

    return optax.inject_hyperparams(make)(learning_rate=1e-2)


def _train_step(model, optimizer, grad_accumulator, x, y):
    """tunix's step at depth 1: value and grad, then ``optimizer.update(model, grads)``."""

    def loss(m):
        return jnp.mean((m(x).astype(jnp.float32) - y) ** 2)

    value, grads = nnx.value_and_grad(loss)(model)
    optimizer.update(model, grads)
    return value


def _params(model) -> dict:
    return nnx.to_pure_dict(nnx.state(model, nnx.Param))


def _unchanged(before: dict, after: dict) -> bool:
    """MaxText's check (``train_rl.py``, ``load_checkpoint_only_once``)."""
    return bool(jax.tree_util.tree_all(jax.tree_util.tree_map(jnp.array_equal, before, after)))


def _copy_and_train(optimizer: str, donated: tuple[str, ...], restored: bool = False):
    reference = _base(0)
    actor = nnx.clone(reference)  # MaxText: nnx.clone(reference_model.base)
    if restored:  # tunix's maybe_restore: the checkpoint's parameters into the actor
        nnx.update(actor, nnx.state(_base(1), nnx.Param))
    before = _params(reference)  # MaxText's capture: the reference's own arrays
    opt = nnx.Optimizer(actor, _optimizer(optimizer), wrt=nnx.Param)
    step = nnx.jit(_train_step, donate_argnames=donated)
    x, y = jnp.ones((2, 8), jnp.bfloat16), jnp.zeros((2, 4), jnp.float32)
    for _ in range(STEPS):
        step(actor, opt, _gradient_accumulator(actor), x, y)
    return reference, actor, before


def test_the_copy_reads_the_checkpoint_once_its_arrays_are_the_references():
    reference = _base(0)
    actor = nnx.clone(reference)
    leaves = (jax.tree.leaves(nnx.state(model, nnx.Param)) for model in (reference, actor))
    pairs = zip(*leaves, strict=True)
    assert all(r.unsafe_buffer_pointer() == a.unsafe_buffer_pointer() for r, a in pairs)
    assert actor.layers[0].kernel is not reference.layers[0].kernel, "new Variables: an update rebinds the actor's"


@pytest.mark.parametrize("optimizer", ["adafactor", "adamw"])
@pytest.mark.parametrize("restored", [False, True], ids=["first attempt", "resumed attempt"])
def test_tunix_trains_the_copy_and_the_reference_stays_the_base(optimizer, restored):
    base = jax.tree.map(np.asarray, _params(_base(0)))  # the base's values, on the host
    reference, actor, before = _copy_and_train(optimizer, TUNIX_DONATED, restored)
    assert not any(leaf.is_deleted() for leaf in jax.tree.leaves(nnx.state(reference, nnx.Param)))
    assert _unchanged(before, _params(reference)), "MaxText raises: Reference model parameters changed during training!"
    assert _unchanged(base, jax.tree.map(np.asarray, _params(reference))), "the reference holds the base's values"
    assert not _unchanged(base, jax.tree.map(np.asarray, _params(actor))), "the actor trained"


def test_a_trainer_that_donated_the_model_would_delete_the_reference():
    reference, _, before = _copy_and_train("adafactor", MODEL_DONATED)
    assert all(leaf.is_deleted() for leaf in jax.tree.leaves(nnx.state(reference, nnx.Param)))
    with pytest.raises((RuntimeError, ValueError), match="deleted"):  # MaxText's check, at the end of a run
        _unchanged(before, _params(reference))
