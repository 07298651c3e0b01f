"""TensorBoard scalars of a training run, read from its event files (tensorboard's reader; no TensorFlow).

MaxText's RL trainer hands ``tensorboard_dir`` (``<base_output_directory>/<run_name>/tensorboard/``) to
tunix's ``MetricsLogger``; every scalar is recorded as ``<prefix>/<mode>/<name>``
(``tunix/sft/metrics_logger.py``, ``MetricsLogger.log``), e.g. ``rewards/train/sum``,
``completions/train/mean_length``, ``actor/train/loss``, ``actor/train/kl``.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

EVENT_FILE_MARK = "tfevents"


@dataclass
class Scalars:
    """Every scalar tag of a run: tag -> [(step, value)], sorted by step (the last write of a step wins)."""

    series: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    first_wall_time: float | None = None
    last_wall_time: float | None = None
    files: int = 0
    truncated: bool = False
    """A file ended in the middle of a record (a writer that was still running, or a cut copy)."""

    @property
    def last_step(self) -> int | None:
        steps = [points[-1][0] for points in self.series.values() if points]
        return max(steps) if steps else None

    def last(self, tag: str) -> float | None:
        points = self.series.get(tag) or []
        return points[-1][1] if points else None

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
    """Scalars from local event files, in file order (a later write of the same step replaces it)."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    points: dict[str, dict[int, float]] = {}
    scalars = Scalars()
    for path in sorted(paths):
        scalars.files += 1
        loader = EventFileLoader(str(path))
        try:
            for event in loader.Load():
                for value in event.summary.value:
                    number = _value(value)
                    if number is not None and math.isfinite(number):
                        points.setdefault(value.tag, {})[int(event.step)] = number
                        if event.wall_time:  # a scalar's time (not the file header's)
                            first = scalars.first_wall_time
                            scalars.first_wall_time = event.wall_time if first is None else min(first, event.wall_time)
                            scalars.last_wall_time = max(scalars.last_wall_time or 0.0, event.wall_time)
        except Exception:  # noqa: BLE001 (a record cut short ends the file, as TensorBoard itself treats it)
            scalars.truncated = True
        if _ends_mid_record(path):
            scalars.truncated = True
    scalars.series = {tag: sorted(by_step.items()) for tag, by_step in points.items()}
    return scalars


def _ends_mid_record(path: Path) -> bool:
    """Whether the file's records do not add up to its size (TFRecord: 8-byte length, 4, data, 4)."""
    data = path.read_bytes()
    offset = 0
    while offset + 12 <= len(data):
        length = int.from_bytes(data[offset : offset + 8], "little")
        offset += 12 + length + 4
    return offset != len(data)


def download_event_files(client: Any, tensorboard_uri: str, into: Path, **call: Any) -> list[Path]:
    """Copy the event files under ``tensorboard_uri`` (recursively) into a local folder."""
    from workloads.artifacts import split_uri

    bucket, prefix = split_uri(tensorboard_uri)
    paths = []
    for index, blob in enumerate(client.list_blobs(bucket, prefix=prefix, **call)):
        name = blob.name.rsplit("/", 1)[-1]
        if EVENT_FILE_MARK not in name:
            continue
        target = into / f"{index:05d}-{name}"
        blob.download_to_filename(str(target), **call)
        paths.append(target)
    return paths


def read_run_scalars(client: Any, tensorboard_uri: str, **call: Any) -> Scalars:
    """Every scalar of a run's TensorBoard directory in GCS."""
    with tempfile.TemporaryDirectory(prefix="tpu-rl-tb-") as folder:
        return read_event_files(download_event_files(client, tensorboard_uri, Path(folder), **call))
