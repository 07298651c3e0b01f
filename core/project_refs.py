"""The Google Cloud projects a text names (plain data): for the closed world's ``upstreamProjects`` (written by
``tools/closed_world.py`` from the program's plans) and the policy pack's ``own-projects``.

A project is named by its id where Google's names put one: ``projects/<id>/...`` (every resource name, a key, a
reservation, an image), ``<account>@<id>.iam.gserviceaccount.com``, ``<id>.svc.id.goog`` (a Workload Identity pool),
``<location>-docker.pkg.dev/<id>/...`` and ``gcr.io/<id>/...`` (an image), and, on a resource, its ``project``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

_ID = r"[a-z][a-z0-9-]{4,28}[a-z0-9]"
NAMED = re.compile(
    rf"\bprojects/(?P<a>{_ID})(?![a-z0-9-])"
    rf"|@(?P<b>{_ID})\.iam\.gserviceaccount\.com"
    rf"|\b(?P<c>{_ID})\.svc\.id\.goog"
    rf"|(?:-docker\.pkg\.dev|\bgcr\.io)/(?P<d>{_ID})(?![a-z0-9-])"
)
"""A project id where a Google name puts one (the id's own form: ``core.config.formats.PROJECT_ID``)."""


def projects_in(text: str) -> Iterator[str]:
    """Every project id ``text`` names, in order."""
    for found in NAMED.finditer(text):
        yield next(group for group in found.groups() if group)


def configured_projects(config: Mapping[str, Any]) -> set[str]:
    """The projects a stack's configuration names: ``gcp:project``, and every project a value names (an object's
    value read as its JSON text: a key of another project in ``tpu-rl:gke``, a registry of ``tpu-rl:images``)."""
    project = config.get("gcp:project")
    named = {project} if isinstance(project, str) and project else set()
    for value in config.values():
        named.update(projects_in(value if isinstance(value, str) else json.dumps(value)))
    return named


def texts_of(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """Every text of a value with its path (keys too), a resource's ``project`` among them."""
    if isinstance(value, str):
        yield path or ".", value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            here = f"{path}.{key}" if path else str(key)
            if isinstance(key, str):
                yield here, key
            yield from texts_of(item, here)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from texts_of(item, f"{path}[{index}]")


def projects_of(props: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(path, project) of every project a resource's properties name: its ``project``, and those its texts name."""
    project = props.get("project")
    if isinstance(project, str) and project:
        yield "project", project
    for path, text in texts_of(props):
        for named in projects_in(text):
            yield path, named
