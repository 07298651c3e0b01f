"""The evaluations MaxText's RL trainer logs, parsed from the training container's output.

``train_rl.py`` (MaxText 0.2.4) logs, when ``num_test_batches > 0``::

    Pre RL Training: corr=12, total=40, accuracy=30.0%, partial_accuracy=45.0%,
        format_accuracy=80.0%, mean_reward=0.4500       (one line in the log)
    Post RL Training: corr=..., total=..., accuracy=...%, ...

and ``hooks.py`` logs ``Intermediate Eval (step=N): ...`` every ``eval_interval`` steps. The training
script tees that output to a log it copies to ``<output>logs/train-<UTC time>.log`` (one per attempt):
the earliest attempt's pre-RL line is the base model (a resumed attempt evaluates restored weights),
the latest attempt's post-RL line is the result.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

# A value as f"{x=}" prints it: a Python number, or numpy's repr (np.float64(30.0)) for numpy scalars.
_NUMBER = r"(?:np\.\w+\()?(-?[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|nan|inf|-inf)\)?"
_FIELDS = (
    rf"corr={_NUMBER}, total={_NUMBER}, accuracy={_NUMBER}%, partial_accuracy={_NUMBER}%, "
    rf"format_accuracy={_NUMBER}%, mean_reward={_NUMBER}"
)
PRE = re.compile(rf"Pre RL Training: {_FIELDS}")
POST = re.compile(rf"Post RL Training: {_FIELDS}")
INTERMEDIATE = re.compile(rf"Intermediate Eval \(step=([0-9]+)\): {_FIELDS}")
RUN_LINE = "tpu-rl run: "
"""The first line of each training log: what the run is (written by the training script)."""
KEYS = ("corr", "total", "accuracy", "partial_accuracy", "format_accuracy", "mean_reward")


def _values(groups: tuple[str, ...]) -> dict[str, float]:
    values = {key: float(text) for key, text in zip(KEYS, groups, strict=True)}
    values["corr"], values["total"] = int(values["corr"]), int(values["total"])
    return values


@dataclass
class Evaluations:
    pre: dict[str, float] | None = None
    post: dict[str, float] | None = None
    intermediate: list[dict[str, float]] = field(default_factory=list)
    """``{"step": N, ...}`` in step order (a re-evaluated step keeps its latest values)."""
    run: dict[str, Any] | None = None
    """What the training script recorded about the run (model, slice, argv), if any log has it."""
    logs: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"pre": self.pre, "post": self.post, "intermediate": self.intermediate}


def parse_logs(logs: list[tuple[str, str]]) -> Evaluations:
    """Evaluations from ``(name, text)`` logs; names sort in time order (``train-<UTC time>.log``)."""
    result = Evaluations()
    by_step: dict[int, dict[str, float]] = {}
    for name, text in sorted(logs):
        result.logs.append(name)
        pre = PRE.search(text)
        if pre and result.pre is None:
            result.pre = _values(pre.groups())
        posts = POST.findall(text)
        if posts:
            result.post = _values(posts[-1])
        for match in INTERMEDIATE.finditer(text):
            by_step[int(match.group(1))] = {"step": int(match.group(1)), **_values(match.groups()[1:])}
        for line in text.splitlines():
            if line.startswith(RUN_LINE):
                try:
                    record = json.loads(line[len(RUN_LINE) :])
                except ValueError:
                    continue
                if isinstance(record, dict):
                    result.run = record
                break
    result.intermediate = [by_step[step] for step in sorted(by_step)]
    return result


def read_run_logs(client: Any, output_uri: str, limit_bytes: int = 64 * 1024 * 1024, **call: Any) -> Evaluations:
    """The evaluations of a run's copied logs (``<output>logs/train-*.log``) in GCS."""
    from workloads.artifacts import split_uri

    bucket, prefix = split_uri(output_uri + "logs/")
    logs = []
    for blob in client.list_blobs(bucket, prefix=prefix, **call):
        if blob.name.endswith(".log"):
            data = (
                blob.download_as_bytes(end=limit_bytes - 1, **call)
                if blob.size and blob.size > limit_bytes
                else (blob.download_as_bytes(**call))
            )
            logs.append((blob.name.rsplit("/", 1)[-1], data.decode("utf-8", errors="replace")))
    return parse_logs(logs)
