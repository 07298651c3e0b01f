"""TensorBoard scalars of a training run, read from its event files (tensorboard's reader; no TensorFlow).

MaxText's RL trainer hands ``tensorboard_dir`` (``<base_output_directory>/<run_name>/tensorboard/``) to
tunix's ``MetricsLogger``; every scalar is recorded as ``<prefix>/<mode>/<name>`` (tunix
``sft/metrics_logger.py``, ``MetricsLogger.log``), e.g. ``rewards/train/sum``, ``actor/train/loss``.
What else is in those files, and how it is read:

- each attempt (one process) writes its own file (tensorboardX names it ``events.out.tfevents.<unix
  time>.<host>``): an attempt is a file, and its training time is the span of tunix's own events in it;
- Orbax records its scalars through the same process-wide listener, at step 0 (``jax/orbax/...``,
  ``jax/checkpoint/...``; ``metrax`` writes a step-less scalar at step 0): they are kept in the data but
  count neither as training time nor as steps;
- ``actor/*`` is logged at the optimizer step it describes (1..N: ``peft_trainer.py`` adds one "for
  logging purpose"), while the rollout's tags (``rewards/*``, ``completions/*``, ``global/*``, ...) are
  logged at the global step *before* the update (0..N-1: ``rl_cluster.py`` ``buffer_metrics``), so
  ``rewards/train/sum`` at step s is the batch ``actor/train/loss`` shows at s + 1 (``aligned``);
- a resumed attempt may log steps the dead one already logged: the newest write of a (tag, step) wins.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

EVENT_FILE_MARK = "tfevents"
FRAMEWORK_PREFIXES = ("jax/",)
"""Tags Orbax (through JAX's monitoring) records at step 0: not tunix's, not training."""
ROLLOUT_PREFIXES = ("rewards/", "completions/", "global/", "sampler_trainer/", "sampler_is/")
"""Tags logged at the global step before the optimizer update they feed (one step behind ``actor/``)."""
MAX_FILES = 1000
LAST_TIME = 253402300799.0
"""The last second a date can show (9999-12-31 23:59:59 UTC): an event's wall time is a time from the epoch to this,
else it is no time (NaN, infinite, negative, past year 9999) and the event is left out."""


def is_training_tag(tag: str) -> bool:
    return not tag.startswith(FRAMEWORK_PREFIXES)


def step_offset(tag: str) -> int:
    """What to add to a tag's step to get the optimizer step it describes."""
    return 1 if tag.startswith(ROLLOUT_PREFIXES) else 0


@dataclass
class EventAttempt:
    """One event file: an attempt of the training process."""

    file: str
    start: float
    """Wall time of its first tunix event (the process had loaded the model and started training)."""
    end: float
    first_step: int | None
    last_step: int | None
    """Optimizer steps (aligned) it logged."""

    @property
    def hours(self) -> float:
        return max(0.0, self.end - self.start) / 3600

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "start": self.start,
            "end": self.end,
            "firstStep": self.first_step,
            "lastStep": self.last_step,
            "hours": round(self.hours, 4),
        }


@dataclass
class Scalars:
    """Every scalar tag of a run: tag -> [(step, value)] by step (the newest write of a step wins)."""

    series: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    attempts: list[EventAttempt] = field(default_factory=list)
    files: int = 0
    truncated: bool = False
    """A file ended in the middle of a record (a writer that was still running, or a cut copy)."""
    untimed: int = 0
    """Events left out for a wall time that is no time (``LAST_TIME``): their step's newest write cannot be told."""

    def aligned(self, tag: str) -> list[tuple[int, float]]:
        """The tag's points at the optimizer step they describe."""
        offset = step_offset(tag)
        return [(step + offset, value) for step, value in self.series.get(tag) or []]

    @property
    def last_step(self) -> int | None:
        """The newest attempt's last optimizer step (after a resume, not the dead attempt's)."""
        for attempt in reversed(self.attempts):
            if attempt.last_step is not None:
                return attempt.last_step
        return None

    def last(self, tag: str) -> float | None:
        points = self.series.get(tag) or []
        return points[-1][1] if points else None

    @property
    def training_hours(self) -> float | None:
        """Sum over attempts of the span of tunix's own events (without start-up or the gaps between)."""
        return sum(a.hours for a in self.attempts) if self.attempts else None

    def to_json(self) -> dict[str, list[list[float]]]:
        return {tag: [[step, value] for step, value in points] for tag, points in sorted(self.series.items())}


def _value(value: Any) -> float | None:
    """A scalar summary value as a float (v1 simple_value or a v2 scalar tensor)."""
    from tensorboard.util import tensor_util

    kind = value.WhichOneof("value")
    if kind == "simple_value":
        return float(value.simple_value)
    if kind == "tensor":
        array = tensor_util.make_ndarray(value.tensor)
        if array.size != 1 or array.dtype.kind not in "fiub":
            return None
        return float(array.reshape(()))
    return None


def read_event_files(paths: Iterable[Path]) -> Scalars:
    """Scalars from local event files (one per attempt), in name order (tensorboardX names start with the
    file's creation time)."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    newest: dict[str, dict[int, tuple[float, float]]] = {}
    scalars = Scalars()
    for path in sorted(paths, key=lambda p: p.name):
        scalars.files += 1
        times: list[float] = []
        steps: list[int] = []
        try:
            for event in EventFileLoader(str(path)).Load():
                if event.summary.value and not 0.0 <= event.wall_time <= LAST_TIME:  # False for NaN too
                    scalars.untimed += 1
                    continue
                for value in event.summary.value:
                    number = _value(value)
                    if number is None or not math.isfinite(number):
                        continue
                    step, wall = int(event.step), float(event.wall_time)
                    seen = newest.setdefault(value.tag, {})
                    if step not in seen or wall >= seen[step][0]:
                        seen[step] = (wall, number)
                    if is_training_tag(value.tag):
                        times.append(wall)
                        steps.append(step + step_offset(value.tag))
        except Exception:  # noqa: BLE001 (a record cut short ends the file, as TensorBoard itself treats it)
            scalars.truncated = True
        if _ends_mid_record(path):
            scalars.truncated = True
        if times:
            scalars.attempts.append(
                EventAttempt(path.name.split("-", 1)[-1], min(times), max(times), min(steps), max(steps))
            )
    scalars.series = {tag: [(step, by_step[step][1]) for step in sorted(by_step)] for tag, by_step in newest.items()}
    scalars.attempts.sort(key=lambda a: a.start)
    return scalars


def _ends_mid_record(path: Path) -> bool:
    """Whether the file's records do not add up to its size (TFRecord: 8-byte length, 4, data, 4)."""
    size = path.stat().st_size
    offset = 0
    with path.open("rb") as handle:
        while offset + 12 <= size:
            handle.seek(offset)
            length = int.from_bytes(handle.read(8), "little")
            offset += 12 + length + 4
    return offset != size


MAX_EVENT_FILE_BYTES = 64 * 1024 * 1024
"""The most read of one event file: tunix logs scalars only (a few MB for a long run); a larger file is read to
this bound (its records up to there; the report says it was cut)."""
MAX_EVENT_BYTES = 256 * 1024 * 1024
"""The most read of a run's event files together (later files are left out, said the same way)."""


def download_event_files(client: Any, tensorboard_uri: str, into: Path, **call: Any) -> tuple[list[Path], bool]:
    """Copy the event files under ``tensorboard_uri`` (recursively) into a local folder, each read bounded
    (``core.bounded.read_object``: at most what it asked for, whatever the server sends); (the files, whether
    any was cut or left out by the bounds)."""
    from core.bounded import read_object
    from workloads.container.checkpoint_scan import split_uri

    bucket, prefix = split_uri(tensorboard_uri)
    paths, read, cut = [], 0, False
    for index, blob in enumerate(client.list_blobs(bucket, prefix=prefix, **call)):
        if index >= MAX_FILES:
            break
        name = blob.name.rsplit("/", 1)[-1]
        if EVENT_FILE_MARK not in name:
            continue
        size = int(blob.size or 0)
        allowed = min(MAX_EVENT_FILE_BYTES, MAX_EVENT_BYTES - read)
        if allowed <= 0:
            cut = True
            break
        what = f"reading {blob.name}"
        if size > allowed:
            data, cut = read_object(blob, allowed, what, 0, allowed - 1, **call), True
        else:
            data = read_object(blob, allowed, what, **call)
        target = into / f"{index:05d}-{name}"
        target.write_bytes(data)
        read += len(data)
        paths.append(target)
    return paths, cut


def read_run_scalars(client: Any, tensorboard_uri: str, **call: Any) -> Scalars:
    """Every scalar of a run's TensorBoard directory in GCS (bounded: ``download_event_files``)."""
    with tempfile.TemporaryDirectory(prefix="tpu-rl-tb-") as folder:
        paths, cut = download_event_files(client, tensorboard_uri, Path(folder), **call)
        scalars = read_event_files(paths)
        scalars.truncated = scalars.truncated or cut
        return scalars
