"""``core.boundary``, called directly: how outside data becomes a frozen model, and the one line a reply of another
shape is refused with (the source, the first field that does not fit, why), on models made here for each rule."""

from __future__ import annotations

import datetime
from typing import Any

import pydantic
import pytest

from core.boundary import MAX_TEXT, BoundaryError, Count, Model, Text, Time, parse

pytestmark = pytest.mark.pure


class Object(Model):
    """What a reader declares: a camelCase key read by its snake_case field, a time, a count, a text."""

    creation_timestamp: Time | None = None
    ready_replicas: Count = 0
    message: Text = ""
    labels: dict[str, Count] = {}


def refused(data: Any, model: type[Model] = Object) -> str:
    with pytest.raises(BoundaryError) as raised:
        parse(model, data, "the reply")
    return str(raised.value)


def test_a_reply_is_read_by_the_sources_keys_ignoring_what_is_not_declared() -> None:
    read = parse(Object, {"readyReplicas": 3, "message": "ok", "spec": {"more": 1}}, "the reply")
    assert (read.ready_replicas, read.message, read.creation_timestamp) == (3, "ok", None)
    with pytest.raises(pydantic.ValidationError):
        read.message = "changed"  # frozen


@pytest.mark.parametrize("data", [[1], "text", None, 3], ids=["a-list", "a-text", "null", "a-number"])
def test_what_is_not_an_object_is_refused_naming_its_type(data: Any) -> None:
    assert refused(data) == f"the reply: expected an object, got {type(data).__name__}"


def test_a_time_is_read_with_its_zone_in_utc_and_one_without_a_zone_is_refused() -> None:
    read = parse(Object, {"creationTimestamp": "2026-12-07T04:00:00+02:00"}, "the reply")
    assert read.creation_timestamp == datetime.datetime(2026, 12, 7, 2, tzinfo=datetime.UTC)
    assert read.creation_timestamp is not None and read.creation_timestamp.tzinfo is datetime.UTC
    assert refused({"creationTimestamp": "2026-12-07T04:00:00"}) == (
        "the reply: creationTimestamp: Value error, a time without a zone"
    )


@pytest.mark.parametrize(
    ("given", "read"), [(0, 0), (3.0, 3), (2**31 - 1, 2**31 - 1)], ids=["zero", "an-integral-float", "the-int32-max"]
)
def test_a_count_is_a_non_negative_int32_and_an_integral_float_is_one(given: Any, read: int) -> None:
    counted = parse(Object, {"readyReplicas": given}, "the reply").ready_replicas
    assert counted == read and type(counted) is int


@pytest.mark.parametrize(
    ("given", "why"),
    [
        (-1, "Input should be greater than or equal to 0"),
        (2**31, "Input should be less than or equal to 2147483647"),
        (2.5, "Input should be a valid integer"),
        ("3", "Input should be a valid integer"),
        (True, "Input should be a valid integer"),
    ],
    ids=["negative", "past-int32", "a-fraction", "a-text", "a-boolean"],
)
def test_a_count_out_of_range_or_of_another_type_is_refused(given: Any, why: str) -> None:
    assert refused({"readyReplicas": given}) == f"the reply: readyReplicas: {why}"


def test_a_text_is_one_printable_line_cut_at_its_bound() -> None:
    assert parse(Object, {"message": "two\nlines\x1b[31m red"}, "the reply").message == "two lines red"
    assert parse(Object, {"message": "x" * MAX_TEXT}, "the reply").message == "x" * MAX_TEXT
    assert parse(Object, {"message": "x" * (MAX_TEXT + 1)}, "the reply").message == "x" * MAX_TEXT


def test_the_field_is_named_by_its_path_cut_at_120_characters() -> None:
    assert refused({"labels": {"app": -1}}) == "the reply: labels.app: Input should be greater than or equal to 0"
    long = "k" * 200
    assert refused({"labels": {long: -1}}) == (
        f"the reply: labels.{long[: 120 - len('labels.')]}: Input should be greater than or equal to 0"
    )


class Checked(Model):
    value: int = 0

    @pydantic.model_validator(mode="after")
    def _refuse(self) -> Checked:
        raise ValueError("w" * 300)


def test_a_refusal_of_the_whole_reply_says_so_and_its_reason_is_cut_at_120_characters() -> None:
    reason = ("Value error, " + "w" * 300)[:120]
    assert refused({}, Checked) == f"the reply: (the whole reply): {reason}"


class Endless(Model):
    value: int = 0

    @pydantic.field_validator("value")
    @classmethod
    def _endless(cls, value: int) -> int:
        return cls._endless(value)


def test_a_reply_nested_past_the_interpreters_depth_is_one_line() -> None:
    assert refused({"value": 1}, Endless) == "the reply: nested too deeply"
