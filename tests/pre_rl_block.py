"""Runs MaxText's own pre-RL evaluation block (``train_rl.py`` ``rl_train``, from ``# Run evaluation before
training`` to ``# Start training``) with stand-ins for what it calls, and says what it did: ``synced`` (the actor's
weights pushed to the rollout engine) and ``evaluated`` (the evaluation ran and ``Pre RL Training:`` was logged).

The tests judge ``workloads.specs.commands.PRE_EVAL_PATCH`` by what the patched code does, not by its text: in
process (``calls``), and as train_rl's stand-in under the training script (``python3 pre_rl_block.py``, the
``train_rl.py`` to read in ``PRE_RL_BLOCK_FILE``, the calls printed one per line).
"""

from __future__ import annotations

import os
import sys
import textwrap
import types

START = "  # Run evaluation before training\n"
END = "  # Start training\n"


def block(text: str) -> str:
    """The pre-RL evaluation block of ``train_rl.py``'s text, dedented to run at module level."""
    begin = text.index(START)
    return textwrap.dedent(text[begin : text.index(END, begin)])


def calls(text: str, num_test_batches: int = 5) -> list[str]:
    """What the block of ``text`` does with ``num_test_batches``, in order (the environment is the process's)."""
    done: list[str] = []
    config = types.SimpleNamespace(
        num_test_batches=num_test_batches, num_eval_passes=1, eval_corr_lst=False, eval_make_lst=False
    )
    rollout = types.SimpleNamespace(update_params=lambda state: done.append("synced"))

    def evaluate(*args: object, **kwargs: object) -> tuple[tuple[int, int, float, float, float, float], None]:
        done.append("evaluated")
        return (3, 4, 75.0, 80.0, 95.0, 0.7), None

    scope = {
        "os": os,
        "trainer_config": config,
        "rl_cluster": types.SimpleNamespace(rollout=rollout),
        "nnx": types.SimpleNamespace(state=lambda model, kind: (model, kind), Param="Param"),
        "actor_model": "actor",
        "evaluate": evaluate,
        "test_dataset": [],
        "reward_fns": [],
        "max_logging": types.SimpleNamespace(warning=lambda line: done.append(line.split(":")[0])),
    }
    exec(compile(block(text), "train_rl.py (pre-RL evaluation block)", "exec"), scope)  # noqa: S102 - MaxText's own code
    return done


if __name__ == "__main__":
    with open(os.environ["PRE_RL_BLOCK_FILE"], encoding="utf-8") as file:
        print("\n".join(calls(file.read())), flush=True)
    sys.exit(0)
