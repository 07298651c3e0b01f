"""A training run's files in GCS as the training container leaves them: TensorBoard event files written by
a real writer (tensorboardX), the copied logs with MaxText's evaluation lines, tunix's checkpoints."""

from __future__ import annotations

import tempfile
from pathlib import Path

START = 1_790_000_000.0
"""Wall time of the first event (2026-09-21): the test data's clock."""
STEP_SECONDS = 360.0

PRE = (
    "W1130 05:02:03.000000 1 train_rl.py:786] Pre RL Training: corr=12, total=40, accuracy=30.0%, "
    "partial_accuracy=45.0%, format_accuracy=80.0%, mean_reward=0.4500"
)
INTERMEDIATE = (
    "W1130 05:40:00.000000 1 hooks.py:98] Intermediate Eval (step={step}): corr={corr}, total=40, "
    "accuracy={accuracy}%, partial_accuracy=50.0%, format_accuracy=85.0%, mean_reward=0.5500"
)
POST = (
    "W1130 06:30:00.000000 1 train_rl.py:824] Post RL Training: corr=np.int64(21), total=40, "
    "accuracy=np.float64(52.5)%, partial_accuracy=60.0%, format_accuracy=90.0%, mean_reward=0.6500"
)


def reward(step: int) -> float:
    return round(0.40 + 0.03 * step, 4)


def write_events(folder: Path, steps: list[int], *, start_step_time: float = START) -> None:
    """Several tags, steps in the order given (out of order on purpose), wall times STEP_SECONDS apart."""
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(str(folder), flush_secs=1)
    for step in steps:
        wall = start_step_time + step * STEP_SECONDS
        writer.add_scalar("rewards/train/sum", reward(step), step, walltime=wall)
        writer.add_scalar("rewards/train/mean", reward(step) / 2, step, walltime=wall)
        writer.add_scalar("actor/train/loss", round(1.0 / step, 4), step, walltime=wall)
        writer.add_scalar("actor/train/kl", round(0.001 * step, 4), step, walltime=wall)
        writer.add_scalar("completions/train/mean_length", 200.0 + 5 * step, step, walltime=wall)
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
    """The run's TensorBoard files (two writers: an attempt and its resume), logs and checkpoints."""
    from tests.conftest import put

    bucket_name, _, prefix = output_uri.removeprefix("gs://").partition("/")
    if not client.lookup_bucket(bucket_name):
        client.create_bucket(bucket_name)
    bucket = client.bucket(bucket_name)
    with tempfile.TemporaryDirectory() as first, tempfile.TemporaryDirectory() as second:
        half = len(steps) // 2
        write_events(Path(first), steps[:half])
        write_events(Path(second), steps[half:], start_step_time=START + 60)
        files = sorted(Path(first).iterdir()) + sorted(Path(second).iterdir())
        for index, path in enumerate(files):
            data = path.read_bytes()
            if truncate_last and index == len(files) - 1:
                data = data[:-7]  # a record cut short: the writer was still running when it was copied
            bucket.blob(f"{prefix}rl/tensorboard/events.out.tfevents.{index:03d}.head").upload_from_string(data)
    if logs:
        first_attempt = "\n".join(
            [
                'tpu-rl run: {"model":"gemma4-e4b","slice":{"version":"v6e","chips":8},'
                '"argv":["num_batches=10","learning_rate=1e-5"]}',
                PRE,
                INTERMEDIATE.format(step=5, corr=16, accuracy="40.0"),
                "Killed",
            ]
        )
        second_attempt = "\n".join(
            [
                'tpu-rl run: {"model":"gemma4-e4b","slice":{"version":"v6e","chips":8},'
                '"argv":["num_batches=10","learning_rate=1e-5"]}',
                PRE.replace("corr=12", "corr=15").replace("30.0%", "37.5%"),  # a resume evaluates restored weights
                INTERMEDIATE.format(step=5, corr=17, accuracy="42.5"),
                POST,
            ]
        )
        put(client, output_uri, "logs/train-20261130T050000Z.log", data=first_attempt.encode())
        put(client, output_uri, "logs/train-20261130T060000Z.log", data=second_attempt.encode())
    for step in checkpoints:
        put(
            client,
            output_uri,
            f"rl/checkpoints/actor/{step}/commit_success.txt",
            f"rl/checkpoints/actor/{step}/model_params/x",
        )
