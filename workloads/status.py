"""The check that turns a failed JobSet into an error naming it, the reason and the logs command."""

from __future__ import annotations

from typing import Any


class JobSetFailedError(Exception):
    """The JobSet reached ``terminalState: Failed``."""


def check_jobset_status(status: dict[str, Any] | None, namespace: str, name: str, logs_command: str) -> str:
    """Return the terminal state; raise ``JobSetFailedError`` naming the JobSet, the reason and the logs command."""
    state = (status or {}).get("terminalState") or ""
    if state != "Failed":
        return state
    conditions = (status or {}).get("conditions") or []
    failed = next((c for c in conditions if c.get("type") == "Failed" and c.get("status") == "True"), {})
    reason = failed.get("reason") or "Failed"
    message = failed.get("message") or "no message in the JobSet's Failed condition"
    raise JobSetFailedError(
        f"JobSet {namespace}/{name} failed ({reason}): {message}. Read the training logs with: {logs_command}"
    )
