"""What the report knows about a run besides its files (``RunInfo``): filled by ``tools.report``, rendered by
``tools.report_html``, each of which imports it from here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class RunInfo:
    """What is known about the run besides its files: from the stack when given, else from its log."""

    output_uri: str
    stack: str | None = None
    model: str | None = None
    chips: int | None = None
    capacity: str | None = None
    version: str | None = None
    steps: dict[str, dict[str, str]] = field(default_factory=dict)
    config_diff: list[dict[str, Any]] | None = None
    estimate: dict[str, Any] | None = None
    publish_uri: str | None = None
    """The publish step's record (``published.json``) when the stack publishes."""
    published: dict[str, Any] | None = None
    """What it published (repo, branch, commit), once it has."""
    base: dict[str, str] | None = None
    """The base model the conversion converted (repo, revision, commit: ``source.json``), once it has."""
    dataset: dict[str, str] | None = None
    """The dataset the run trained on (repo, revision, commit: its ``dataset/dataset.json``), once it staged it."""
    record_uris: dict[str, str] = field(default_factory=dict)
    """Step -> its record (``core.records``), for each step of the stack whose output is one."""
    records: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    """Step -> its record as read (``StepRecord.to_json``), None while it has none."""
    startup: list[dict[str, Any]] = field(default_factory=list)
    """Each training attempt's start-up by component (``workloads.observe.startup.Startup.to_json``)."""
    billing: dict[str, Any] | None = None
    """What the slice bills (``workloads.observe.startup.Billing.to_json``), when known."""
    cluster_note: str = ""
    """Why the cluster's side of the start-up is missing (no stack given, or the cluster could not be read)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "outputUri": self.output_uri,
            "stack": self.stack,
            "model": self.model,
            "chips": self.chips,
            "capacity": self.capacity,
            "steps": self.steps,
            "published": self.published,
            "base": self.base,
            "dataset": self.dataset,
            **({"records": self.records} if self.record_uris else {}),
        }
