"""The stack's configuration as data: every key, its reader, default, samples and description.

One table, ``FIELDS``, drives parsing (``core.config.load``), the declarations in ``Pulumi.yaml`` (a test keeps them
equal), the configuration reference in docs/configuration.md (``tools.docs_tables``) and the walk of every key
(``tools.lifecycle_walk``). It is the platform's keys (``core.config.platform_keys``) then the workflow's
(``core.config.workflow_keys``), in the order the reference shows them; a key's machinery is ``core.config.fields``.
A new setting is one ``Field`` in the keys of its part plus its use in the rules of its area (``core.config.rules``).
Here are the table and its lookups: the fields under a stack-file key and what ``Pulumi.yaml`` declares.
"""

from __future__ import annotations

from typing import Any

from core.config.fields import DERIVED, REQUIRED, Field
from core.config.platform_keys import PLATFORM_FIELDS
from core.config.workflow_keys import WORKFLOW_FIELDS
from core.names import PROJECT

FIELDS: tuple[Field, ...] = (*PLATFORM_FIELDS, *WORKFLOW_FIELDS)

PROVIDER_KEYS = tuple(f.key for f in FIELDS if not f.key.startswith(f"{PROJECT}:"))
PROJECT_KEYS = tuple(dict.fromkeys(f.top.split(":", 1)[1] for f in FIELDS if f.key.startswith(f"{PROJECT}:")))
SECRET_KEYS = tuple(f.key for f in FIELDS if f.secret)
_BY_TOP = {top: tuple(f for f in FIELDS if f.top == top) for top in dict.fromkeys(f.top for f in FIELDS)}


def fields_of(top: str) -> list[Field]:
    """The fields stored under one stack-file key (``tpu-rl:tpu``)."""
    return list(_BY_TOP[top])


def is_object(top: str) -> bool:
    """Whether a stack-file key holds an object of fields."""
    return any(f.path for f in _BY_TOP[top])


def declared_default(top: str) -> Any:
    """What ``Pulumi.yaml`` declares as the default of a stack-file key (derived fields are omitted)."""
    fields = fields_of(top)
    if not is_object(top):
        return "" if fields[0].default is DERIVED else fields[0].default
    out: dict[str, Any] = {}
    for f in fields:
        default = f.shown_default if f.default is DERIVED else f.default
        if default is None or default is REQUIRED:
            continue
        cursor = out
        *parents, leaf = f.path.split(".")
        for part in parents:
            cursor = cursor.setdefault(part, {})
        cursor[leaf] = default
    return out
