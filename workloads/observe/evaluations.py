"""The evaluations MaxText's RL trainer logs, per attempt, from the training container's output.

``train_rl.py`` (MaxText 0.2.5, lines 743-746 and 781-784; 0.2.4 logs the same text) and ``hooks.py`` (98-102) log,
through absl, when ``num_test_batches > 0``::

    W1130 05:02:03.000000 1 train_rl.py:744] Pre RL Training: corr=12, total=40, accuracy=30.0%,
        partial_accuracy=45.0%, format_accuracy=80.0%, mean_reward=0.4500        (one line in the log)
    ... Intermediate Eval (step=10): corr=..., ...
    ... Post RL Training: corr=..., ...

The fields are Python ``repr``s (``f"{x=}"``): ``corr`` is an int, or a float with
``eval_mode=pass_at_1`` (``evaluate_rl.py`` 174-181). An attempt that resumes a run restores the newest
checkpoint first and logs ``Restored params from step: N in X seconds`` (tunix ``sft/checkpoint_manager.py``
``maybe_restore``, 292-296 at c4ec573, 319-323 at c7d8950) before its ``Pre RL Training:`` line, which therefore
evaluates trained weights (``train_rl.py`` 724-746): only an attempt that restored nothing evaluates the base model.
tests/test_maxtext_logs.py formats these lines from the pinned release's source and parses them here.

Each attempt of the training script leaves ``<output>logs/train-<UTC start>.log`` (the whole output,
copied when it exits, whatever ends it) and ``<output>logs/evals-<UTC start>.txt`` (the run record and
the evaluation and restore lines, copied as each one appears, so a killed attempt keeps them).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field

from core.boundary import BoundaryError, Count, Model, Text, parse
from core.inputs import InputError, parse_json
from workloads.specs.train_script import RUN_LINE

# A value as f"{x=}" prints it (numpy's repr, np.float64(30.0), is accepted too).
_NUMBER = r"(?:np\.\w+\()?(-?[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|nan|inf|-inf)\)?"
_FIELDS = (
    rf"corr={_NUMBER}, total={_NUMBER}, accuracy={_NUMBER}%, partial_accuracy={_NUMBER}%, "
    rf"format_accuracy={_NUMBER}%, mean_reward={_NUMBER}"
)
PRE = re.compile(rf"Pre RL Training: {_FIELDS}")
POST = re.compile(rf"Post RL Training: {_FIELDS}")
INTERMEDIATE = re.compile(rf"Intermediate Eval \(step=([0-9]+)\): {_FIELDS}")
RESTORED = re.compile(r"Restored params from step: ([0-9]{1,12})")
FAST_FORWARDED = re.compile(r"Fast forwarded ([0-9]{1,15}) micro-batches\.")
"""Where a resumed attempt's data starts: tunix's ``RLLearner._prepare_data`` (``rl/rl_learner.py``, c7d8950 line
407) skips that many of the input iterator's items before its first rollout and logs this once through absl
(``logging.info("Fast forwarded %d micro-batches.", self._iter_steps)``); the count is the restored trainer's
``iter_steps`` (``sft/peft_trainer.py``: step x gradient accumulation). Each item is a micro-batch of
``train_micro_batch_size`` prompts of MaxText's batches of ``batch_size`` (``train_rl.py`` ``prepare_datasets``:
``.batch(batch_size)``; tunix ``RLLearner.train`` splits them when the two differ), so the position in prompts is the
count times that size, in MaxText's seeded order (``grain.MapDataset.shuffle(seed=data_shuffle_seed)``, the same
in every attempt)."""
STALLED = re.compile(r"tpu-rl: (stalled: [^;\n]{1,200})")
"""The line the training script's watchdog writes when it ends an attempt
(``workloads/container/stall_watchdog.py``)."""
SLICE_SAID = re.compile(r"tpu-rl: ((?:waiting for the slice |the slice |cannot read the slice's workers )[^\n]{0,400})")
"""What the attempt's wait for its slice said (``workloads/container/slice_state.py``): waiting (until when), the
slice up, not back within the budget, or its workers unread."""
WAITING = "waiting for the slice "
GAVE_UP = "the slice did not come back "
KEYS = ("corr", "total", "accuracy", "partial_accuracy", "format_accuracy", "mean_reward")
ATTEMPT = re.compile(r"(?:train|evals)-([0-9]{8}T[0-9]{6}Z)\.(?:log|txt)")
MAX_RECORD_CHARS = 100_000


class RunSlice(Model):
    """The slice a run record names (``commands.run_record``)."""

    version: Text = ""
    machine_type: Text = ""
    topology: Text = ""
    slices: Count = 0
    chips: Count = 0


class RunRecord(Model):
    """What the training script wrote as its log's first line (``RUN_LINE`` + ``commands.run_record``): text
    from the run, parsed here; a record of another shape is no record (``Attempt.run`` None)."""

    model: Text = ""
    hf_repo: Text = ""
    slice: RunSlice = Field(default_factory=RunSlice)
    optimizer: Text = ""
    dataset: Text = ""
    argv: list[Text] = Field(default_factory=list, max_length=1000)


def _number(text: str) -> float | int:
    return int(text) if re.fullmatch(r"-?[0-9]+", text) else float(text)


def _values(groups: tuple[str, ...]) -> dict[str, float] | None:
    """An evaluation's numbers; None when its count of questions is not a count (inf, nan, a fraction: not a
    line MaxText writes; the rates may be nan, as a division by zero questions prints them)."""
    values: dict[str, Any] = {key: float(text) for key, text in zip(KEYS, groups, strict=True)}
    total = values["total"]
    if not (math.isfinite(total) and total.is_integer() and 0 <= total <= 2**63):
        return None
    values["corr"] = _number(groups[0])  # a float with eval_mode=pass_at_1
    values["total"] = int(total)
    return values


@dataclass
class Attempt:
    """One run of the training container, from its log and its side file."""

    name: str
    """The attempt's UTC start (``20261130T050000Z``), from the file names."""
    files: list[str] = field(default_factory=list)
    restored_step: int | None = None
    """The checkpoint step it resumed from (``Restored params from step:``), None for a fresh start."""
    fast_forwarded: int | None = None
    """The input micro-batches tunix skipped before its first rollout (``Fast forwarded N micro-batches.``), None when
    it logged none (a fresh start, or an attempt that ended before its data was read)."""
    pre: dict[str, float] | None = None
    post: dict[str, float] | None = None
    intermediate: dict[int, dict[str, float]] = field(default_factory=dict)
    run: RunRecord | None = None
    stalled: str | None = None
    """Why the stall watchdog ended it (``stalled: no training progress ... for 2h00m``), None when it did not."""
    slice_said: str | None = None
    """The last line its wait for the slice said (``SLICE_SAID``), None when it said none."""
    ended: float | None = None
    """When its files were last written (a Unix time: the log is copied when train_rl exits, the side file as
    each line appears), None when not known."""

    @property
    def started(self) -> float | None:
        """Its UTC start (from the file names) as a Unix time, None when the name is not a start."""
        from datetime import UTC, datetime

        try:
            return datetime.strptime(self.name, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC).timestamp()
        except ValueError:
            return None

    def held_hours(self, now: float | None = None) -> float | None:
        """How long the attempt held the slice, from its start to its last file (or ``now`` while it runs)."""
        start, end = self.started, now if now is not None else self.ended
        if start is None or end is None:
            return None
        return max(0.0, end - start) / 3600

    def data_position(self) -> dict[str, int | None] | None:
        """Where its data resumed: tunix's micro-batches skipped and, when its run record names the batch sizes, the
        prompts they hold (``FAST_FORWARDED``); None when it logged no fast-forward."""
        if self.fast_forwarded is None:
            return None
        sizes = {}
        for word in self.run.argv if self.run is not None else []:
            key, _, value = word.partition("=")
            if key in ("batch_size", "train_micro_batch_size") and re.fullmatch(r"-?[0-9]{1,9}", value):
                sizes[key] = int(value)
        micro = sizes.get("train_micro_batch_size", -1)
        per_item = sizes.get("batch_size") if micro < 1 else micro  # -1: MaxText hands tunix whole batches
        prompts = self.fast_forwarded * per_item if per_item is not None and per_item > 0 else None
        return {"microBatches": self.fast_forwarded, "prompts": prompts}

    def to_json(self) -> dict[str, Any]:
        return {
            "start": self.name,
            "files": self.files,
            "restoredStep": self.restored_step,
            "dataPosition": self.data_position(),
            "pre": self.pre,
            "post": self.post,
            "intermediateSteps": sorted(self.intermediate),
            "stalled": self.stalled,
            "slice": self.slice_said,
            "heldHours": None if (hours := self.held_hours()) is None else round(hours, 4),
        }


@dataclass
class Evaluations:
    pre: dict[str, float] | None = None
    """The base model's evaluation: the ``Pre RL Training:`` line of the first attempt that restored nothing."""
    pre_unknown: str | None = None
    """Why the base model's accuracy is unknown, when it is."""
    post: dict[str, float] | None = None
    intermediate: list[dict[str, float]] = field(default_factory=list)
    """``{"step": N, ...}`` in step order (a re-evaluated step keeps its latest values)."""
    run: RunRecord | None = None
    """What the training script recorded about the run (model, slice, argv), if any log has it."""
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def logs(self) -> list[str]:
        return [name for attempt in self.attempts for name in attempt.files]

    def to_json(self) -> dict[str, Any]:
        return {
            "pre": self.pre,
            "preUnknown": self.pre_unknown,
            "post": self.post,
            "intermediate": self.intermediate,
            "attempts": [a.to_json() for a in self.attempts],
        }


def _read_attempt(attempt: Attempt, text: str) -> None:
    for line in text.splitlines():
        if line.startswith(RUN_LINE) and attempt.run is None:
            try:
                raw = parse_json(line[len(RUN_LINE) : len(RUN_LINE) + MAX_RECORD_CHARS], "the run record")
                attempt.run = parse(RunRecord, raw, "the run record")
            except (InputError, BoundaryError):
                pass  # not a record tpu-rl writes: the run is known from the stack, or not at all
            continue
        if (stalled := STALLED.search(line)) and attempt.stalled is None:
            attempt.stalled = stalled.group(1)
        elif said := SLICE_SAID.search(line):
            attempt.slice_said = said.group(1)
        elif (restored := RESTORED.search(line)) and attempt.restored_step is None:
            attempt.restored_step = int(restored.group(1))
        elif (skipped := FAST_FORWARDED.search(line)) and attempt.fast_forwarded is None:
            attempt.fast_forwarded = int(skipped.group(1))
        elif (pre := PRE.search(line)) and attempt.pre is None:
            if (values := _values(pre.groups())) is not None:
                attempt.pre = {**values, "afterRestore": attempt.restored_step is not None}
        elif post := POST.search(line):
            attempt.post = _values(post.groups()) or attempt.post
        elif (step := INTERMEDIATE.search(line)) and (values := _values(step.groups()[1:])) is not None:
            attempt.intermediate[int(step.group(1))] = {"step": int(step.group(1)), **values}


def parse_logs(logs: list[tuple[str, str]], written: dict[str, float] | None = None) -> Evaluations:
    """Evaluations from ``(file name, text)``: a log and a side file of the same attempt (same UTC start)
    are read together; attempts in time order. ``written``: file name -> when it was last written."""
    attempts: dict[str, Attempt] = {}
    for name, text in sorted(logs):
        match = ATTEMPT.search(name)
        key = match.group(1) if match else name
        attempt = attempts.setdefault(key, Attempt(key))
        attempt.files.append(name)
        when = (written or {}).get(name)
        if when is not None:
            attempt.ended = max(attempt.ended or when, when)
        _read_attempt(attempt, text)
    ordered = [attempts[key] for key in sorted(attempts)]
    result = Evaluations(attempts=ordered)
    base = next((a for a in ordered if a.pre is not None and a.restored_step is None), None)
    if base is not None and base.pre is not None:  # the search required pre: said again for mypy
        result.pre = {k: v for k, v in base.pre.items() if k != "afterRestore"}
    elif ordered:
        resumed = [a for a in ordered if a.restored_step is not None]
        if resumed:
            result.pre_unknown = (
                f"every surviving log is of an attempt that resumed from a checkpoint (step "
                f"{resumed[0].restored_step} first), whose pre-RL evaluation is of trained weights; the first "
                "attempt's log did not survive"
            )
        else:
            result.pre_unknown = "no attempt logged a pre-RL evaluation (MaxText logs it when num_test_batches > 0)"
    else:
        result.pre_unknown = "the run left no logs"
    result.post = next((a.post for a in reversed(ordered) if a.post is not None), None)
    steps: dict[int, dict[str, float]] = {}
    for attempt in ordered:
        steps.update(attempt.intermediate)
    result.intermediate = [steps[step] for step in sorted(steps)]
    result.run = next((a.run for a in reversed(ordered) if a.run is not None), None)
    return result


HEAD_BYTES = TAIL_BYTES = 4 * 1024 * 1024
"""What is read of a large log: its head (the run record, the pre-RL evaluation) and its tail (the post-RL
one); every evaluation line of the middle is in the side file."""
MAX_FILES = 1000


def _download(blob: Any, **call: Any) -> str:
    """A log's text, at most its head and tail, each read holding at most the bytes it asked for
    (``core.bounded.read_object``: a server that ignores ``Range``, or an object larger than listed, stops)."""
    from core.bounded import read_object

    size = blob.size or 0
    what = f"reading {blob.name}"
    if size <= HEAD_BYTES + TAIL_BYTES:
        data = read_object(blob, HEAD_BYTES + TAIL_BYTES, what, **call)
    else:
        head = read_object(blob, HEAD_BYTES, what, 0, HEAD_BYTES - 1, **call)
        tail = read_object(blob, TAIL_BYTES, what, size - TAIL_BYTES, size - 1, **call)
        head = head[: head.rfind(b"\n") + 1]  # whole lines only
        tail = tail[tail.find(b"\n") + 1 :]
        data = head + b"\n" + tail
    return data.decode("utf-8", errors="replace")


def read_run_logs(client: Any, output_uri: str, **call: Any) -> Evaluations:
    """The evaluations of a run's logs and side files (``<output>logs/``) in GCS; a log of any size costs at
    most its head and tail."""
    from workloads.container.checkpoint_scan import split_uri

    bucket, prefix = split_uri(output_uri + "logs/")
    logs = []
    written: dict[str, float] = {}
    for index, blob in enumerate(client.list_blobs(bucket, prefix=prefix, **call)):
        if index >= MAX_FILES:
            break
        name = blob.name.rsplit("/", 1)[-1]
        if name.endswith((".log", ".txt")):
            logs.append((name, _download(blob, **call)))
            if blob.updated is not None:
                written[name] = blob.updated.timestamp()
    return parse_logs(logs, written)
