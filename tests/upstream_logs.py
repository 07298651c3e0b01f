"""The lines MaxText and tunix log in a training attempt, as absl writes them, for the tests' sample logs: where each
is logged (``LOGGED``, a reviewed table) and the line absl makes of a message (``absl``).

absl names the caller's file and line (``max_logging`` passes ``stacklevel=2``), and Python names a call that spans
lines by its first (absl-py on Python 3.11, checked). MaxText's rows are MaxText 0.2.5's (``core.maxtext_keys.
MAXTEXT_VERSION``), which ``tests/test_maxtext_logs.py`` checks against the vendored source, in the order the
start-up passes them; the launcher's patches of ``train_rl.py`` keep its line numbers (the same test). tunix's rows
are tunix at c7d8950 (google/tunix, 2026-08-21, the newest commit read: MaxText 0.2.5 pins a8d7058, which is not
readable offline), read by hand: ``sft/checkpoint_manager.py`` ``CheckpointManager.maybe_restore`` and
``sft/peft_trainer.py`` ``PeftTrainer._log_metrics``. The restore runs inside MaxText's
``rl_cluster_lib.RLCluster(...)`` call: ``rl/rl_cluster.py`` ``RLEngine.__init__`` calls ``_init_engine``, which
starts the rollout engine, then makes the actor's ``rl/trainer.py`` ``Trainer``, whose ``PeftTrainer.__init__`` calls
``maybe_restore``."""

from __future__ import annotations

from dataclasses import dataclass

TRAIN_RL = "trainers/post_train/rl/train_rl.py"


@dataclass(frozen=True)
class Logged:
    """A line as its source logs it."""

    source: str
    """``maxtext`` (the path is the vendored release's) or ``tunix`` (its repository's path at c7d8950)."""
    path: str
    line: int
    """The first line of the logging call: what absl prints after the file's name."""
    function: str
    """The logging function (``max_logging.log``, ``logging.info``...): absl's level letter."""
    text: str
    """What the message begins with."""
    form: str = ""
    """tunix's format string (``%``), whole."""
    inside: str = ""
    """The call of MaxText's in which tunix logs it."""

    @property
    def level(self) -> str:
        return "W" if self.function.endswith("warning") else "I"

    @property
    def where(self) -> str:
        return f"{self.path.rsplit('/', 1)[-1]}:{self.line}"


LOGGED: tuple[Logged, ...] = (
    Logged("maxtext", "utils/max_utils.py", 835, "max_logging.log", "System Information: Jax Version: "),
    Logged("maxtext", "utils/max_utils.py", 837, "max_logging.log", "System Information: Jax Backend: "),
    Logged("maxtext", TRAIN_RL, 498, "max_logging.log", "Creating RL cluster..."),
    Logged(
        "tunix",
        "tunix/sft/checkpoint_manager.py",
        319,
        "logging.info",
        "Restored params from step: ",
        "Restored params from step: %d in %.3f seconds",
        "rl_cluster_lib.RLCluster",
    ),
    Logged("maxtext", TRAIN_RL, 533, "max_logging.log", "Setting up RL trainer..."),
    Logged("maxtext", TRAIN_RL, 743, "max_logging.warning", "Pre RL Training: "),
    Logged("maxtext", TRAIN_RL, 757, "max_logging.warning", "Starting RL training..."),
    Logged(
        "tunix",
        "tunix/sft/peft_trainer.py",
        770,
        "logging.info",
        "Train step ",
        "Train step %d training loss: %f  - training perplexity: %f",
    ),
    Logged("maxtext", "trainers/post_train/rl/hooks.py", 98, "max_logging.warning", "Intermediate Eval (step="),
    Logged("maxtext", TRAIN_RL, 768, "max_logging.warning", "RL Training Completed Successfully!"),
    Logged("maxtext", TRAIN_RL, 781, "max_logging.warning", "Post RL Training: "),
)
"""Every line the tests' sample logs carry, in the order an attempt logs them."""


def logged(message: str) -> Logged:
    """The row of the line that logs ``message``."""
    found = [row for row in LOGGED if message.startswith(row.text)]
    if len(found) != 1:
        raise KeyError(f"{len(found)} rows of LOGGED log {message[:60]!r}")
    return found[0]


def absl(when: str, message: str, thread: int = 1) -> str:
    """The line absl writes for ``message`` logged at ``when`` (``MMDD HH:MM:SS[.fraction]``, UTC) by ``thread``:
    ``I0101 00:04:30.000000 1 train_rl.py:498] Creating RL cluster...``."""
    row = logged(message)
    day, _, clock = when.partition(" ")
    seconds, _, fraction = clock.partition(".")
    return f"{row.level}{day} {seconds}.{fraction.ljust(6, '0')} {thread} {row.where}] {message}"
