"""The machinery of the configuration's key table (``core.config.schema``): what one key is (``Field``), the default
markers and the field a training knob makes.

The table itself, every key with its reader, default and description, is ``core.config.schema.FIELDS``;
docs/configuration.md's reference shows it (``tools.docs_tables``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.config.values import Boolean, Integer, Number, OneOf, Reader
from core.knobs import Knob
from core.names import PROJECT

REQUIRED = object()
"""No default: the key must be set."""
DERIVED = object()
"""The default is computed from other keys (documented in ``doc``)."""


@dataclass(frozen=True)
class Field:
    """One configuration key (``namespace:top.sub``), how it is read and what it defaults to."""

    key: str
    read: Reader
    default: Any
    doc: str
    samples: tuple[Any, ...] = ()
    """Other valid values: shown in docs and tried by the invariance test."""
    companions: tuple[tuple[str, Any], ...] = ()
    """Other keys a different value of this one needs (e.g. a zone for another region): (full key, value)."""
    secret: bool = False
    shown_default: Any = None
    """For a derived field: what it derives to from the other defaults (declared in Pulumi.yaml)."""

    @property
    def top(self) -> str:
        """The stack-file key: ``tpu-rl:tpu`` for ``tpu-rl:tpu.topology``."""
        return self.key.split(".", 1)[0]

    @property
    def path(self) -> str:
        """The path inside the top-level object (empty for a scalar key)."""
        return self.key.split(".", 1)[1] if "." in self.key else ""


def project_key(path: str) -> str:
    """``tpu-rl:<path>``: a key of the project's namespace."""
    return f"{PROJECT}:{path}"


def knob_field(knob: Knob) -> Field:
    """The ``tpu-rl:training.<field>`` key of a training knob (``core.knobs.TRAINING_KNOBS``): its reader from the
    knob's type and bounds, its default, samples and companions the knob's."""
    reader: Reader
    if knob.choices:
        reader = OneOf(knob.choices)
    elif isinstance(knob.default, bool):
        reader = Boolean()
    elif isinstance(knob.default, int):
        reader = Integer(int(knob.minimum), int(knob.maximum))  # type: ignore[arg-type]
    else:
        reader = Number(float(knob.minimum), float(knob.maximum))  # type: ignore[arg-type]
    origin = "the tutorial's value" if knob.tutorial else "not in the tutorial"
    return Field(
        project_key(f"training.{knob.field}"),
        reader,
        knob.default,
        f"MaxText `{knob.key}` ({origin})",
        samples=knob.samples,
        companions=tuple((project_key(f"training.{field}"), value) for field, value in knob.companions),
    )
