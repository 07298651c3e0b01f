"""A step record: what a step whose output is a ``record`` (``core.steps.Output``) leaves, a titled table the status,
the report and the model card show as it is, whatever the step (plain data, parsed where it is read).

The step's program writes ``<output>record.json``, one JSON object of these four keys (any other is ignored,
as at every boundary)::

    {"title": "Held-out questions", "summary": "3 of 5 correct",
     "columns": ["question", "expected", "answer", "correct"],
     "rows": [["Janet's ducks lay 16 eggs ...", "18", "18", "yes"], ...]}

Everything in it is outside text (a model's answers among it), so it is parsed once, here, into a frozen
``StepRecord``: bounded sizes, printable one-line text, every row as long as the header. Whoever shows it escapes
it for where it goes (HTML, Markdown); nothing else is done with it.
"""

from __future__ import annotations

from typing import Annotated, Self

from pydantic import Field, StringConstraints, model_validator

from core.boundary import BoundaryError, Model, Text, parse
from core.inputs import InputError, parse_json

RECORD = "record.json"
"""The record's name in its step's output folder (the step's artifact)."""
MAX_RECORD_BYTES = 256 * 1024
"""The most a record may hold (50 rows of 8 cells of 500 characters fit; a reader reads no more)."""
MAX_ROWS = 50
MAX_COLUMNS = 8
MAX_CELL_CHARS = 500

Title = Annotated[Text, StringConstraints(min_length=1, max_length=80)]
Summary = Annotated[Text, StringConstraints(max_length=200)]
Column = Annotated[Text, StringConstraints(min_length=1, max_length=40)]
Cell = Annotated[Text, StringConstraints(max_length=MAX_CELL_CHARS)]


class StepRecord(Model):
    """A step's record: its title, a one-line summary and a table (``columns``, then ``rows``)."""

    title: Title
    summary: Summary
    columns: list[Column] = Field(min_length=1, max_length=MAX_COLUMNS)
    rows: list[list[Cell]] = Field(max_length=MAX_ROWS)

    @model_validator(mode="after")
    def _rows_fit_the_header(self) -> Self:
        for index, row in enumerate(self.rows):
            if len(row) != len(self.columns):
                raise ValueError(f"row {index} has {len(row)} cells for {len(self.columns)} columns")
        return self

    def to_json(self) -> dict[str, object]:
        """The record as its program wrote it (what the stack output and the report carry)."""
        return {"title": self.title, "summary": self.summary, "columns": self.columns, "rows": self.rows}


def parse_record(data: bytes) -> StepRecord | None:
    """The record in ``data``, None when it is not one (not JSON, nested too deeply, another shape, more than
    ``MAX_RECORD_BYTES``); its text is made printable on one line (``core.boundary.Text``)."""
    if len(data) > MAX_RECORD_BYTES:
        return None
    try:
        return parse(StepRecord, parse_json(data, RECORD), RECORD)  # the reason is not shown: it is only left out
    except (InputError, BoundaryError):
        return None
