"""What the live object of a step says, and what the next `pulumi up` does about it (plain functions).

Pulumi cannot tell a *failed* step from a finished one: an awaited JobSet that ended
Failed was created, so the next `up` sees no diff. Before registering a step the program reads
its live object and passes a *retry marker* as the step's ``replacement_trigger``:

- it ended Failed (or Completed with incomplete output): its UID is the marker, so Pulumi replaces
  it: a retry, resuming from the checkpoints in the same output path. The engine compares the
  stored and the new trigger and replaces when they differ (pulumi ``step_generator.go``,
  ``shouldTriggerReplace``); a replacement takes the program's current inputs (``continueStepsFromDiff``
  re-runs ``Check`` on them), so a retry gets the configured deadline and restarts;
- the retry records the marker in its ``tpu-rl/retry-of`` annotation, so while it runs and after it
  completed the marker stays the same and the following `up` is a no-op;
- a run that failed while no `pulumi up` watched it and was then *adopted* by a create
  (``upsertExistingObjects``: pulumi-kubernetes ``await.go`` ``Creation`` applies the manifest, with
  ``retry-of: <its own UID>``, to the existing object, and the await sees Failed at once) stored its
  own UID as the trigger: its marker is ``<UID>/adopted``, so the next `up` still retries it;
- it is still running (a Ctrl-C, a dropped connection or a Pulumi timeout interrupted the last
  `up`): nothing changes, and the engine's update of a resource with init errors re-attaches to it
  (``continueStepsFromDiff``: "generate an empty update step to attempt to continue awaiting
  initialization"; the provider's ``await.Update`` awaits it again);
- it does not exist: it is created.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

RETRY_ANNOTATION = "tpu-rl/retry-of"
ADOPTED = "/adopted"


@dataclass(frozen=True)
class LiveStep:
    """The parts of a live JobSet the program decides on."""

    state: str
    """absent | running | succeeded | failed."""
    name: str = ""
    uid: str = ""
    retry_of: str = ""
    reason: str = ""
    message: str = ""


ABSENT = LiveStep("absent")


def condition(status: dict[str, Any], kind: str) -> dict[str, Any] | None:
    """The object's condition of type `kind` when it is True."""
    for entry in status.get("conditions") or []:
        if isinstance(entry, dict) and entry.get("type") == kind and entry.get("status") == "True":
            return entry
    return None


def live_step(obj: dict[str, Any] | None) -> LiveStep:
    """Interpret a live JobSet (None = it does not exist); its ``status.terminalState`` is set once it
    has the Completed or Failed condition (JobSet ``jobset_controller.go``)."""
    if not obj:
        return ABSENT
    metadata = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    status = obj.get("status") if isinstance(obj.get("status"), dict) else {}
    annotations = metadata.get("annotations") if isinstance(metadata.get("annotations"), dict) else {}
    failed = condition(status, "Failed") or {}
    terminal = status.get("terminalState") or ""
    state = {"Failed": "failed", "Completed": "succeeded"}.get(terminal, "running")
    return LiveStep(
        state=state,
        name=str(metadata.get("name") or ""),
        uid=str(metadata.get("uid") or ""),
        retry_of=str(annotations.get(RETRY_ANNOTATION) or ""),
        reason=str(failed.get("reason") or ""),
        message=str(failed.get("message") or ""),
    )


def retry_marker(live: LiveStep, *, retry: bool) -> str:
    """The step's ``replacement_trigger``: a new value for a run to retry (``retry``: it failed, or its
    output is incomplete), else the marker the live run was created with ("" if none)."""
    if not retry:
        return live.retry_of
    if live.retry_of == live.uid:  # adopted after it failed: its own UID is already the stored trigger
        return live.uid + ADOPTED
    return live.uid


def running_elsewhere(items: list[dict[str, Any]], current: str) -> list[str]:
    """Names of other training runs of this cluster still running (they hold the TPU slice)."""
    names = []
    for item in items:
        live = live_step(item)
        if live.name and live.name != current and live.state == "running":
            names.append(live.name)
    return sorted(names)
