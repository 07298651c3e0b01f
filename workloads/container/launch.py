"""Starts train_rl with the overrides of the training step's ``/tpu-rl/train.json`` (a file of its ConfigMap of
scripts, written by ``core.step_config.config_text``): ``python3 -m maxtext.trainers.post_train.rl.train_rl
key=value ...`` in the file's order, ``exec``\\ d in this process's place (the training script's child, its PID,
signals and output are train_rl's). The file is a JSON object of strings whose keys are dotted names, each once
(``core.step_config.read_config`` is the policy pack's reading of it); any other file stops the step with exit 3,
which no retry changes. The policy pack knows this file by its sha256 (``core.step_config.LAUNCHER_SHA256``): a
change to it is a change of that pin (``tests/test_step_config.py``).

An attempt that resumes from a checkpoint (the training script sets ``RESUMED_ENV`` to the checkpoint tunix will
restore) skips train_rl's pre-RL evaluation and keeps its weight sync (``skip_pre_rl_evaluation``). train_rl (0.2.4
and 0.2.5 ``_rl_train_impl``) evaluates on every attempt while ``num_test_batches > 0``, after pushing the actor's
weights to the rollout engine ("When resuming from an RL checkpoint ... the rollout engine would evaluate using the base
HuggingFace/SFT weights": the sync stays). A resumed attempt's evaluation is of trained weights, which the report
never takes for the base's, and it holds the whole slice for minutes. The launcher is the one file that names the
trainer (the policy pack's rule), so the patch is here; it is lenient: a train_rl that differs evaluates as before
and the log says why. Its line starts with ``SKIPPED`` or ``KEPT`` (the training script copies the first to the side
file, where `make status` reads that a resumed attempt evaluated nothing)."""

from __future__ import annotations

import json
import os
import re
import sys

TRAIN_RL = "maxtext.trainers.post_train.rl.train_rl"
CONFIG = "/tpu-rl/train.json"
KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:[.][A-Za-z_][A-Za-z0-9_]*)*")
REFUSED = 3
RESUMED_ENV = "TPU_RL_RESUMED_FROM"
SKIPPED = "tpu-rl: pre-RL evaluation skipped: "
KEPT = "tpu-rl: pre-RL evaluation kept: "
PACKAGE_DIR = "/deps/src/maxtext"
"""MaxText's package in its images, where its Dockerfiles say (maxtext_tpu_dependencies.Dockerfile, 0.2.4 to HEAD:
``ENV MAXTEXT_PKG_DIR=/deps/src/maxtext``, ``PYTHONPATH=/deps/src``) when ``MAXTEXT_PKG_DIR`` is not set."""
PATCHES = (
    (
        "  # Run evaluation before training\n  if trainer_config.num_test_batches > 0:\n",
        "  # Run evaluation before training\n"
        f"  if trainer_config.num_test_batches > 0 or os.environ.get({RESUMED_ENV!r}):\n",
    ),
    (
        "    rl_cluster.rollout.update_params(nnx.state(actor_model, nnx.Param))\n\n"
        "    (corr, total, accuracy, partial_accuracy, format_accuracy, mean_reward), _ = evaluate(\n",
        "    rl_cluster.rollout.update_params(nnx.state(actor_model, nnx.Param))\n"
        f"  if trainer_config.num_test_batches > 0 and not os.environ.get({RESUMED_ENV!r}):\n"
        "    (corr, total, accuracy, partial_accuracy, format_accuracy, mean_reward), _ = evaluate(\n",
    ),
)
"""train_rl's lines (0.2.4, 0.2.5) and what a resumed attempt runs instead, each found once: the block's weight sync
under a first condition that a resumed attempt also meets (tunix syncs the rollout engine only after a training
step, ``rl_learner.py`` ``RLLearner.train``, so without it a resumed run's first rollouts would come from the base's
weights even with ``num_test_batches=0``), and its evaluation under a second that it does not."""


def _pairs(pairs: list[tuple[str, object]]) -> dict[str, object]:
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("a key is set twice")
    return dict(pairs)


def overrides(text: str) -> list[str]:
    """train_rl's ``key=value`` arguments from the file's text; ``ValueError`` on anything but a JSON object of
    strings whose keys are dotted names, each once."""
    config = json.loads(text, object_pairs_hook=_pairs)
    if not isinstance(config, dict):
        raise ValueError("not a JSON object")
    words = []
    for key, value in config.items():
        if not KEY.fullmatch(key) or not isinstance(value, str):
            raise ValueError(f"{key[:80]!r} is not a dotted name with a string value")
        words.append(f"{key}={value}")
    return words


def train_rl_file() -> str:
    """The file ``python3 -m TRAIN_RL`` runs in the image: under ``MAXTEXT_PKG_DIR`` (``PACKAGE_DIR``)."""
    return os.path.join(os.environ.get("MAXTEXT_PKG_DIR") or PACKAGE_DIR, *TRAIN_RL.split(".")[1:]) + ".py"


def skip_pre_rl_evaluation(path: str) -> str:
    """Patch train_rl in the file ``path`` (``PATCHES``) so that a resumed attempt syncs the restored weights and does
    not evaluate them; the line to log (``SKIPPED`` or ``KEPT``). A file without each of the lines once, or that
    cannot be read or rewritten, is left as it was, and so is one patched already (the launcher run twice on one
    file). The new text goes to a file beside it, then takes its name (``os.replace``): a write cut short leaves
    train_rl as it was."""
    kept = "this attempt evaluates"
    try:
        with open(path, encoding="utf-8") as file:
            text = file.read()
        if all(new in text for _, new in PATCHES):
            return f"{SKIPPED}{path} was patched already"
        found = [text.count(old) for old, _ in PATCHES]
        if found != [1] * len(PATCHES):
            return f"{KEPT}expected train_rl's pre-RL block in {path}, found its lines {found} times: {kept}"
        for old, new in PATCHES:
            text = text.replace(old, new)
        _replace(path, text)
    except (OSError, ValueError) as err:  # UnicodeDecodeError is a ValueError
        why = err.strerror if isinstance(err, OSError) and err.strerror else type(err).__name__
        return f"{KEPT}cannot patch {path} ({why}): {kept}"
    return f"{SKIPPED}{path} patched: a resumed attempt syncs its weights and does not evaluate them"


def _replace(path: str, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all."""
    staged = path + ".tpu-rl"
    try:
        with open(staged, "w", encoding="utf-8") as file:
            file.write(text)
        os.replace(staged, path)
    except OSError:
        if os.path.exists(staged):
            os.unlink(staged)
        raise


def main() -> None:
    try:
        with open(CONFIG, encoding="utf-8") as file:
            words = overrides(file.read())
    except (OSError, ValueError) as err:
        print(f"tpu-rl: cannot start train_rl: {CONFIG}: {err}", file=sys.stderr)
        sys.exit(REFUSED)
    if os.environ.get(RESUMED_ENV):
        print(skip_pre_rl_evaluation(train_rl_file()), flush=True)
    try:
        os.execvp("python3", ["python3", "-m", TRAIN_RL, *words])
    except OSError as err:  # no python3 on PATH, an argv over execve's limits: what bash said as "cannot execute"
        print(f"tpu-rl: cannot start train_rl: python3: {err.strerror or err}", file=sys.stderr)
        sys.exit(127 if isinstance(err, FileNotFoundError) else 126)


if __name__ == "__main__":
    main()
