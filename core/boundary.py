"""How outside data becomes typed values: one validation library (pydantic 2), used the same way at every
boundary (plain functions and models, no network).

Whatever comes from outside (a Kubernetes object, a Google API reply, a Hub reply, a run's files) is parsed
once, where it enters, into a frozen model of the fields the program reads. The code past the boundary trusts
the types; a reply of any other shape is one ``BoundaryError`` line naming the source and the field.

Why pydantic: it is the well-kept, typed validation library of the Python ecosystem (the ``kubernetes`` client
this project pins already installs it, so it adds no dependency), its models are plain classes mypy checks,
and its errors carry the exact location of the field that failed (``status.conditions.0.type``), which is
what a one-line message needs. Models here ignore fields they do not declare (the world adds fields), coerce
nothing silently (``strict``: a number is not a string), and make outside text printable once: ``Text`` is a
string scrubbed of control characters, escapes and anything token-like (``core.redact.scrub``) and cut to a
bound, so no later message has to scrub it again.

The one exception, on purpose: the Google clients' replies (``infra.gcp.capacity``). Those clients already
parse the JSON into typed protobuf messages (a field of another type is the protobuf parser's error, which
names the field; the check reports it as one line naming the API), so a second model of the same fields would
only copy the library's types; what protobuf cannot say (a field present, a count in range, the object asked
for) is checked where the message is read, into frozen dataclasses, with the same one-line errors and the same
``scrub``.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from core.errors import BAD_INPUT, TpuRlError
from core.redact import scrub

MAX_TEXT = 4096
"""The longest outside text kept (a Kubernetes condition's message is at most 32 KiB; what a line shows is far
less): longer text is cut, its end marked."""
MAX_ITEMS = 10_000
"""The most items of a list kept from outside (a reply's lists are bounded by its size cap)."""


class BoundaryError(TpuRlError):
    """Outside data has a shape the program does not read: one line, ``<source>: <field>: <why>``. Exit 2, as for a
    service that answers what no such service would (docs/troubleshooting.md "`make status`, `make logs` and `make
    report`"): a retry reads the same object again."""

    exit_code = BAD_INPUT


def _printable(value: str) -> str:
    return scrub(value, limit=MAX_TEXT)


Text = Annotated[str, AfterValidator(_printable)]
"""Outside text, printable: one line, no escapes, nothing token-like, at most ``MAX_TEXT`` characters."""


def _aware(value: datetime.datetime) -> datetime.datetime:
    if value.tzinfo is None:
        raise ValueError("a time without a zone")
    return value.astimezone(datetime.UTC)


Time = Annotated[datetime.datetime, Field(strict=False), AfterValidator(_aware)]
"""An RFC 3339 time with its zone (as Kubernetes writes ``creationTimestamp``), in UTC."""


def _whole(value: Any) -> Any:
    """An integral float as an int (Pulumi's engine hands recorded outputs over as protobuf doubles)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


Count = Annotated[int, BeforeValidator(_whole), Field(ge=0, le=2**31 - 1)]
"""A count an API reports (replicas, restarts): a non-negative int32 (an integral float is one)."""


class Model(BaseModel):
    """A boundary model: frozen, strict, unknown fields ignored; a field named in snake_case reads the source's
    camelCase key (``creation_timestamp`` is ``creationTimestamp``), and errors name the source's key."""

    model_config = ConfigDict(
        frozen=True, strict=True, extra="ignore", str_max_length=1 << 20, alias_generator=to_camel
    )


M = TypeVar("M", bound=Model)


def _where(location: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in location) or "(the whole reply)"


def parse(model: type[M], data: Any, source: str) -> M:
    """``data`` (a decoded JSON or YAML document) as ``model``; ``BoundaryError`` naming ``source`` and the first
    field that does not fit."""
    try:
        if not isinstance(data, Mapping):
            raise BoundaryError(f"{source}: expected an object, got {type(data).__name__}")
        return model.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        raise BoundaryError(
            f"{source}: {scrub(_where(first['loc']), limit=120)}: {scrub(first['msg'], limit=120)}"
        ) from None
    except RecursionError:
        raise BoundaryError(f"{source}: nested too deeply") from None
