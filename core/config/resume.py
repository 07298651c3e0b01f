"""Settings whose resume is wrong upstream, refused at plan time.

Every training attempt after a run's first resumes from the run's newest checkpoint, whatever starts it: a JobSet
restart (``workflow.maxRestarts``, the stall watchdog's restarts among them), the restart drill
(``workflow.restartDrill``), Kueue's re-admission after an eviction, and the next ``up`` retrying a run that failed
(the same step, the same output folder). MaxText 0.2.5's train_rl hands tunix the checkpoint directory and nothing of
the data position (``trainers/post_train/rl/train_rl.py`` ``create_rl_components``:
``RLTrainingConfig(checkpoint_root_directory=..., checkpointing_options=...)``, and ``GrpoLearner`` built without
``data_shuffle_seed``); tunix restores the trainer's step (``sft/peft_trainer.py`` ``PeftTrainer.__init__``:
``_iter_steps = _train_steps * gradient_accumulation_steps``) and its RL learner fast-forwards the input iterator to
that count (``rl/rl_learner.py`` ``RLLearner.__init__`` ``_last_iter_step = actor_trainer.iter_steps``,
``_prepare_data``: ``Fast forwarded %d micro-batches.``). The trainer loops ``rl.num_iterations`` times over each
input micro-batch, so with more than one the count is of loops, not of input consumed, and a resumed attempt skips
data it never trained on: google/tunix#2290 (open). Those functions were read at tunix c7d8950, the newest commit
mirrored here; MaxText 0.2.5 pins tunix a8d7058, which is unread. So ``rl.num_iterations`` above 1 is refused outright
while the issue is open, not only where an attempt may resume on its own."""

from __future__ import annotations

from core.config.values import error
from core.settings import TrainingSettings

ISSUE = "google/tunix#2290"
READ_AT = "tunix c7d8950"
"""Where the resume code above was read (the newest commit mirrored)."""
PINNED = "a8d7058"
"""The tunix MaxText 0.2.5 pins (its wheel's ``post_train_github_deps``), not read."""


def check_resume_exact(training: TrainingSettings) -> None:
    """``rl.num_iterations`` 1: a run that trains resumes on every attempt after its first (the module's
    docstring)."""
    iterations = int(training.extra_args.get("rl.num_iterations", "1"))
    if iterations <= 1:
        return
    raise error(
        "tpu-rl:training.extraArgs.rl.num_iterations",
        iterations,
        f"must be 1 while {ISSUE} is open: every training attempt after the first resumes from the checkpoint (a "
        "JobSet restart, the restart drill, Kueue's re-admission, the next `up` retrying the run), and tunix "
        "fast-forwards a resumed run's data by the trainer's loops, num_iterations per micro-batch, so it skips data "
        f"never trained on (read at {READ_AT}; MaxText 0.2.5's pin {PINNED} is unread); set rl.num_iterations to 1",
    )
