"""Settings whose resume is wrong upstream, refused at plan time.

An attempt of a training run resumes from the run's newest checkpoint whenever one starts after another: a JobSet
restart (``workflow.maxRestarts``, the stall watchdog's restarts among them), the restart drill
(``workflow.restartDrill``), and Kueue's re-admission after an eviction such as a TPU maintenance event (a Kueue of
the stack's own, ``kueue.enabled``, or a LocalQueue managed elsewhere, ``kueue.queue``). MaxText 0.2.5's train_rl
hands tunix the checkpoint directory and nothing of the data position (``trainers/post_train/rl/train_rl.py``
``create_rl_components``: ``RLTrainingConfig(checkpoint_root_directory=..., checkpointing_options=...)``, and
``GrpoLearner`` built without ``data_shuffle_seed``); tunix restores the trainer's step
(``sft/peft_trainer.py`` ``PeftTrainer.__init__``: ``_iter_steps = _train_steps * gradient_accumulation_steps``) and
its RL learner fast-forwards the input iterator to that count (``rl/rl_learner.py`` ``RLLearner.__init__``
``_last_iter_step = actor_trainer.iter_steps``, ``_prepare_data``: ``Fast forwarded %d micro-batches.``; tunix
c7d8950, the newest mirrored: the pin a8d7058 of MaxText 0.2.5 is not). The trainer loops ``rl.num_iterations``
times over each input micro-batch, so with more than one the count is of loops, not of input consumed, and a
resumed attempt skips data it never trained on: google/tunix#2290 (open)."""

from __future__ import annotations

from core.config.values import error
from core.settings import KueueSettings, TrainingSettings, WorkflowSettings

ISSUE = "google/tunix#2290"


def resume_paths(workflow: WorkflowSettings, kueue: KueueSettings) -> list[str]:
    """What can start a training attempt that resumes from the run's checkpoint (empty: only a retry by hand)."""
    paths = []
    if workflow.max_restarts > 0:
        paths.append(f"workflow.maxRestarts {workflow.max_restarts}")
    if workflow.restart_drill:
        paths.append("workflow.restartDrill true")
    if kueue.queue is not None:
        paths.append("Kueue re-admitting an evicted step: kueue.enabled or kueue.queue")
    return paths


def check_resume_exact(training: TrainingSettings, workflow: WorkflowSettings, kueue: KueueSettings) -> None:
    """``rl.num_iterations`` above 1 only where no attempt resumes on its own (the module's docstring), or with the
    workflow off (nothing trains)."""
    iterations = int(training.extra_args.get("rl.num_iterations", "1"))
    paths = resume_paths(workflow, kueue)
    if iterations <= 1 or not workflow.enabled or not paths:
        return
    raise error(
        "tpu-rl:training.extraArgs.rl.num_iterations",
        iterations,
        f"must be 1 while a training attempt can resume ({', '.join(paths)}): tunix fast-forwards a resumed "
        f"run's data by the trainer's loops, num_iterations per micro-batch, so it skips data never trained on "
        f"({ISSUE}); set rl.num_iterations to 1, or tpu-rl:workflow.maxRestarts 0, tpu-rl:workflow.restartDrill "
        "false and no Kueue",
    )
