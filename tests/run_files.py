"""A training run's files in GCS as the training container leaves them, by the real writers and formats:
TensorBoard event files written by tensorboardX (one per attempt, tunix's tags at their real steps and
Orbax's step-0 scalars beside them), the attempts' logs and side files with MaxText's absl-prefixed
evaluation lines, and tunix's checkpoints."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

START = 1_790_000_000.0
"""Wall time of the first training event (2026-09-21): the test data's clock."""
STEP_SECONDS = 360.0
RESUME_GAP = 1_800.0
"""Between the first attempt's last event and the second attempt's first: the restart and its start-up."""
RESTORED = 5
"""The checkpoint step the second attempt resumes from."""

RECORD = (
    'tpu-rl run: {"model":"gemma4-e4b","slice":{"version":"v6e","chips":8},'
    '"argv":["num_batches=10","learning_rate=1e-5"]}'
)
# MaxText 0.2.4 train_rl.py 785-788 / 823-826 (0.2.5: 743-746 / 781-784, the same text) and hooks.py 98-102,
# through absl (W... prefix).
PRE = (
    "W1130 05:02:03.000000 1 train_rl.py:786] Pre RL Training: corr=12, total=40, accuracy=30.0%, "
    "partial_accuracy=45.0%, format_accuracy=80.0%, mean_reward=0.4500"
)
INTERMEDIATE = (
    "W1130 05:40:00.000000 1 hooks.py:98] Intermediate Eval (step={step}): corr={corr}, total=40, "
    "accuracy={accuracy}%, partial_accuracy=50.0%, format_accuracy=85.0%, mean_reward=0.5500"
)
POST = (
    "W1130 06:30:00.000000 1 train_rl.py:824] Post RL Training: corr=21, total=40, "
    "accuracy=52.5%, partial_accuracy=60.0%, format_accuracy=90.0%, mean_reward=0.6500"
)
# tunix c4ec573 sft/checkpoint_manager.py 292-296 and rl/rl_learner.py 400-407, through absl (I... prefix).
RESTORE = f"I1130 06:00:40.000000 1 checkpoint_manager.py:293] Restored params from step: {RESTORED} in 12.345 seconds"
FAST_FORWARD = f"I1130 06:02:00.000000 1 rl_learner.py:407] Fast forwarded {2 * RESTORED} micro-batches."


def attempt_name(seconds: float) -> str:
    """An attempt's UTC start as the training script names its files (``date -u +%Y%m%dT%H%M%SZ``)."""
    from datetime import UTC, datetime

    return datetime.fromtimestamp(seconds, UTC).strftime("%Y%m%dT%H%M%SZ")


FIRST_ATTEMPT = attempt_name(START - 600)
"""The first attempt started ten minutes before its first training event (loading, compiling)."""
SECOND_ATTEMPT = attempt_name(START + (RESTORED + 1) * STEP_SECONDS + RESUME_GAP - 900)
"""The second, after the first one's last event and fifteen minutes before its own first."""


def reward(step: int) -> float:
    """The summed reward of the batch of optimizer step ``step``."""
    return round(0.40 + 0.03 * step, 4)


def wall(step: int) -> float:
    """When optimizer step ``step`` was logged (the second attempt after the gap)."""
    return START + step * STEP_SECONDS + (RESUME_GAP if step > RESTORED else 0.0)


def summary_writer() -> Any:
    """tensorboardX's ``SummaryWriter``, imported without torch unless torch is imported already: its writer module
    imports torch when it can, only to accept torch tensors (``writer.numpy_compatible``), and importing torch takes
    seconds of a fast test's time; these event files hold Python floats only."""
    if "torch" in sys.modules or "tensorboardX" in sys.modules:
        from tensorboardX import SummaryWriter

        return SummaryWriter
    sys.modules["torch"] = None  # type: ignore[assignment]  # `import torch` raises ImportError, which tensorboardX expects
    try:
        from tensorboardX import SummaryWriter
    finally:
        del sys.modules["torch"]
    return SummaryWriter


def write_raw_events(folder: Path, events: list[tuple[str, int, float, float]]) -> None:
    """One event file of ``(tag, step, wall time, value)`` events as written, each an ``Event`` protobuf through
    tensorboardX's file writer: its ``SummaryWriter`` would clean the tag's characters (a hostile run's writer does
    not) and takes any wall time."""
    summary_writer()  # tensorboardX imported without torch
    from tensorboardX.event_file_writer import EventFileWriter
    from tensorboardX.proto import event_pb2, summary_pb2

    writer = EventFileWriter(str(folder), flush_secs=1)
    for tag, step, wall_time, value in events:
        summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)])
        writer.add_event(event_pb2.Event(wall_time=wall_time, step=step, summary=summary))
    writer.close()


def write_events(folder: Path, steps: list[int]) -> None:
    """One attempt's event file: per optimizer step s, ``actor/*`` at step s and the rollout's tags at step
    s - 1 (tunix), and Orbax's two step-0 scalars at a save (an epoch in milliseconds, a count)."""
    writer = summary_writer()(str(folder), flush_secs=1)
    for step in steps:
        at = wall(step)
        writer.add_scalar("rewards/train/sum", reward(step), step - 1, walltime=at - 1)
        writer.add_scalar("rewards/train/mean", reward(step) / 2, step - 1, walltime=at - 1)
        writer.add_scalar("completions/train/mean_length", 200.0 + 5 * step, step - 1, walltime=at - 1)
        writer.add_scalar("actor/train/loss", round(1.0 / step, 4), step, walltime=at)
        writer.add_scalar("actor/train/kl", round(0.001 * step, 4), step, walltime=at)
        if step % 5 == 0:  # a checkpoint save: Orbax's scalars, at step 0, long after the run started
            writer.add_scalar("jax/orbax/write/async/start_time", at * 1000, 0, walltime=at + 2)
            writer.add_scalar("jax/checkpoint/write/async/commit_future_count", 1.0, 0, walltime=at + 2)
    writer.close()


def upload_run(
    client,
    output_uri: str,
    *,
    steps: list[int],
    truncate_last: bool = False,
    logs: bool = True,
    checkpoints: tuple[int, ...] = (),
) -> None:
    """Two attempts: the first trains the steps up to ``RESTORED`` and is killed (its side file survives,
    its full log does not); the second resumes from the checkpoint of step ``RESTORED`` and finishes."""
    from tests.conftest import put

    bucket_name, _, prefix = output_uri.removeprefix("gs://").partition("/")
    if not client.lookup_bucket(bucket_name):
        client.create_bucket(bucket_name)
    bucket = client.bucket(bucket_name)
    with tempfile.TemporaryDirectory() as first, tempfile.TemporaryDirectory() as second:
        write_events(Path(first), [s for s in steps if s <= RESTORED])
        write_events(Path(second), [s for s in steps if s > RESTORED])
        files = sorted(Path(first).iterdir()) + sorted(Path(second).iterdir())
        for index, path in enumerate(files):
            data = path.read_bytes()
            if truncate_last and index == len(files) - 1:
                data = data[:-7]  # a record cut short: the writer was still running when it was copied
            name = f"events.out.tfevents.{int(START) + index * 3600}.head-{index}"
            bucket.blob(f"{prefix}rl/tensorboard/{name}").upload_from_string(data)
    if logs:
        first_side = "\n".join([RECORD, PRE, INTERMEDIATE.format(step=5, corr=16, accuracy="40.0")])
        second_log = [
            RECORD,
            "I1130 06:00:10.000000 1 train_rl.py:558] Creating RL cluster...",
            RESTORE,
            PRE.replace("corr=12", "corr=15").replace("30.0%", "37.5%"),  # restored weights: not the base model
            FAST_FORWARD,
            INTERMEDIATE.format(step=5, corr=17, accuracy="42.5"),
            POST,
        ]
        second_side = "\n".join(line for line in second_log if "Creating" not in line)
        put(client, output_uri, f"logs/evals-{FIRST_ATTEMPT}.txt", data=first_side.encode())
        put(client, output_uri, f"logs/train-{SECOND_ATTEMPT}.log", data="\n".join(second_log).encode())
        put(client, output_uri, f"logs/evals-{SECOND_ATTEMPT}.txt", data=second_side.encode())
    for step in checkpoints:
        put(
            client,
            output_uri,
            f"rl/checkpoints/actor/{step}/commit_success.txt",
            f"rl/checkpoints/actor/{step}/model_params/x",
        )


def write_events_with(client, output_uri: str, tag: str, values: list[float]) -> None:
    """One attempt's event file in the run's TensorBoard folder: ``tag`` at steps 0, 1, ... with ``values`` (any
    float, as tensorboardX writes it)."""
    bucket_name, _, prefix = output_uri.removeprefix("gs://").partition("/")
    if not client.lookup_bucket(bucket_name):
        client.create_bucket(bucket_name)
    with tempfile.TemporaryDirectory() as folder:
        writer = summary_writer()(folder, flush_secs=1)
        for step, value in enumerate(values):
            writer.add_scalar(tag, value, step, walltime=START + step)
        writer.close()
        for path in Path(folder).iterdir():
            client.bucket(bucket_name).blob(f"{prefix}rl/tensorboard/{path.name}").upload_from_filename(str(path))
