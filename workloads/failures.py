"""Turn a step that ended Failed into an error naming it, the reason and the logs command."""

from __future__ import annotations

from typing import Any

from core.redact import scrub
from workloads.live_state import live_step


class StepFailedError(Exception):
    """The step's JobSet ended Failed."""


def check_step_status(kind: str, status: dict[str, Any] | None, namespace: str, name: str, logs_command: str) -> str:
    """Return the state; raise ``StepFailedError`` naming the object, the reason and the logs command."""
    live = live_step({"kind": "JobSet", "status": status or {}})
    if live.state != "failed":
        return live.state
    reason = scrub(live.reason, limit=60) or "Failed"  # the controller's text: one line, no escapes, no tokens
    message = (scrub(live.message, limit=300) or f"no message in the {kind}'s Failed condition").rstrip(".")
    raise StepFailedError(f"{kind} {namespace}/{name} failed ({reason}): {message}. Read the logs with: {logs_command}")
