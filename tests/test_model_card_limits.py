"""Every bound of the model card (workloads/specs/model_card.py) at its limit, where it holds, and one past it, where
it cuts: the characters of a value shown, the ids linked, the rows of each table, the records and their columns, the
licence identifier and the card's bytes."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest
import yaml

from tests.card_facts import FACTS
from workloads.specs import model_card as module
from workloads.specs.model_card import ELLIPSIS, _code, _fit, _hub_link, _Rows, _text, model_card

pytestmark = pytest.mark.pure

AT_LIMIT_AND_PAST = pytest.mark.parametrize("past", [0, 1], ids=["at-limit", "one-past"])


def card(**changes: Any) -> str:
    return model_card(dataclasses.replace(FACTS, **changes))


def split(text: str) -> tuple[dict[str, Any], str]:
    """The front matter, parsed, and the Markdown after it (as the Hub splits them)."""
    end = text.index("\n---\n", 3)
    return yaml.safe_load(text[4:end]), text[end + 5 :]


def sections(text: str) -> dict[str, str]:
    """The Markdown by ``## `` heading."""
    parts = re.split(r"^## (.*)$", split(text)[1], flags=re.MULTILINE)
    return {name: body.removeprefix("\n") for name, body in zip(parts[1::2], parts[2::2], strict=True)}


def table_rows(section: str) -> list[str]:
    """A section's table rows, its header and separator left out."""
    return [line for line in section.splitlines() if line.startswith("| ")][2:]


def test_the_cards_record_bounds_are_the_records_own():
    from core.records import MAX_COLUMNS, MAX_ROWS

    assert (module.MAX_RECORD_COLUMNS, module.MAX_RECORD_ROWS) == (MAX_COLUMNS, MAX_ROWS)


# ---------------------------------------------------------------------------------------------
# A value's characters


@AT_LIMIT_AND_PAST
def test_a_text_value_is_shown_whole_at_200_characters_and_cut_past_them(past):
    value = "x" * (200 + past)
    expected = value if not past else "x" * 199 + ELLIPSIS
    assert _text(value) == expected
    found = sections(card(records=({"title": value, "summary": value, "columns": ["c"], "rows": []},)))
    assert found[expected].splitlines()[1] == expected, "the record's title and its summary"


@AT_LIMIT_AND_PAST
def test_a_value_shown_as_json_is_bounded_as_shown(past):
    """A value a line cannot show is its JSON string: the 200 characters are the JSON's, quotes and escapes
    included."""
    value = "\t" + "x" * (196 + past)  # JSON: a quote, the two characters \t, the x's, a quote: 200 + past
    shown = r"\"\\t" + "x" * 196 + (r"\"" if not past else ELLIPSIS)
    assert _text(value) == shown


@AT_LIMIT_AND_PAST
def test_a_code_value_is_a_span_of_200_characters_and_cut_past_them(past):
    value = "r" * (200 + past)
    assert _code(value) == ("`" + value + "`" if not past else "`" + "r" * 199 + ELLIPSIS + "`")
    base = sections(card(base_revision=value))["Base model"]
    assert f"- revision: {_code(value)}" in base


@AT_LIMIT_AND_PAST
def test_the_front_matter_names_the_base_model_in_200_characters(past):
    repo = "o/" + "m" * (198 + past)
    front, _ = split(card(base_repo=repo))
    assert front["base_model"] == (repo if not past else repo[:199] + ELLIPSIS)


@AT_LIMIT_AND_PAST
def test_a_hub_link_of_200_characters_is_a_link_and_one_longer_is_plain_text(past):
    """A part of the Hub's address longer than a value shown is no Hub id: the base model's page, its commit's and
    a dataset's (``datasets/`` counted in its part) are not linked."""
    repo = "o/" + "m" * (198 + past)
    assert _hub_link(repo, repo).startswith("[") is (not past)
    assert _hub_link("t", "datasets/" + "d" * (191 + past)).startswith("[") is (not past)
    base = sections(card(base_repo=repo))["Base model"]
    assert (f"](https://huggingface.co/{repo})" in base) is (not past)
    assert (f"](https://huggingface.co/{repo}/tree/" in base) is (not past), "the commit's page"
    dataset = "o/" + "d" * (189 + past)  # "datasets/" and the id: 200 + past
    found = sections(card(dataset_ids=(dataset,), dataset_commit=None))["Dataset"]
    assert (f"](https://huggingface.co/datasets/{dataset})" in found) is (not past)


# ---------------------------------------------------------------------------------------------
# The lists


@AT_LIMIT_AND_PAST
def test_the_configuration_table_lists_120_settings(past):
    diff = [{"key": f"tpu-rl:training.k{i}", "value": i, "tutorial": 0} for i in range(120 + past)]
    text = card(config_diff=diff)
    rows = table_rows(sections(text)["Training configuration"])
    assert len(rows) == 120 and rows[-1].startswith(r"| `tpu-rl:training.k119` |")
    assert ("and 1 more (the run's stack configuration has them all)" in text) is bool(past)
    assert "and 0 more" not in text


@AT_LIMIT_AND_PAST
def test_the_card_names_20_datasets(past):
    ids = tuple(f"org/d{i}" for i in range(20 + past))
    text = card(dataset_ids=ids, dataset_commit=None)
    assert split(text)[0]["datasets"] == list(ids[:20])
    line = sections(text)["Dataset"].splitlines()[1]
    assert line.count("](https://huggingface.co/datasets/") == 20
    assert line.endswith(", and 1 more") is bool(past) and not line.endswith("and 0 more")


@AT_LIMIT_AND_PAST
def test_the_images_table_lists_20_images(past):
    images = {f"image{i:02}": f"registry.example/i{i}:1" for i in range(20 + past)}
    text = card(images=images, image_digests={})
    part = sections(text)["Images"]
    rows = table_rows(part)
    assert len(rows) == 20 and rows[-1].startswith("| `image19` |")
    assert ("and 1 more" in part) is bool(past) and "and 0 more" not in part


@AT_LIMIT_AND_PAST
def test_the_provenance_table_lists_20_steps(past):
    steps = {f"step{i:02}": f"jobset-{i}" for i in range(20 + past)}
    part = sections(card(steps=steps))["Provenance"]
    rows = table_rows(part)
    assert len(rows) == 20 and rows[-1] == "| `step19` | `jobset-19` |"
    assert ("and 1 more" in part) is bool(past) and "and 0 more" not in part


def _record(title: str, columns: int = 1, rows: int = 1) -> dict:
    names = [f"c{i}" for i in range(columns)]
    cells = [[f"v{r}.{c}" for c in range(columns)] for r in range(rows)]
    return {"title": title, "summary": "s", "columns": names, "rows": cells}


@pytest.mark.parametrize("count", [8, 9, 10])
def test_the_card_shows_8_records_and_counts_the_rest(count):
    text = card(records=tuple(_record(f"Record {i}") for i in range(count)))
    assert [name for name in sections(text) if name.startswith("Record")] == [f"Record {i}" for i in range(8)]
    said = {8: None, 9: "and 1 more step record, left out of the card", 10: "and 2 more step records, left out"}
    assert all((line in text) is (line == said[count]) for line in said.values() if line)
    assert "and 0 more step" not in text


@AT_LIMIT_AND_PAST
def test_a_record_shows_8_columns(past):
    part = sections(card(records=(_record("R", columns=8 + past),)))["R"]
    header, rule, row = [line for line in part.splitlines() if line.startswith("| ")]
    assert header == "| " + " | ".join(f"c{i}" for i in range(8)) + " |"
    assert rule == "| " + " | ".join(["---"] * 8) + " |"
    assert row == "| " + " | ".join(f"v0\\.{i}" for i in range(8)) + " |", "each row cut to the columns shown"


def test_a_short_row_of_a_record_is_padded_to_its_columns():
    record = {"title": "R", "summary": "s", "columns": ["a", "b", "c"], "rows": [["x"]]}
    assert table_rows(sections(card(records=(record,)))["R"]) == [r"| x | \"\" | \"\" |"], "an empty cell as its JSON"


@AT_LIMIT_AND_PAST
def test_a_record_shows_50_rows(past):
    text = card(records=(_record("R", rows=50 + past),))
    assert len(table_rows(sections(text)["R"])) == 50
    assert ("and 1 more, left out of the card" in text) is bool(past)


# ---------------------------------------------------------------------------------------------
# The licence identifier


@AT_LIMIT_AND_PAST
def test_a_licence_identifier_of_64_characters_is_the_front_matters(past):
    license = "a" + "b" * (63 + past)
    front, _ = split(card(base_license=license))
    assert front["license"] == (license if not past else "other")


# ---------------------------------------------------------------------------------------------
# The card's bytes


def _table(*sizes: int, outside: bool = False) -> _Rows:
    return _Rows(tuple(f"{i}" + "r" * (size - 1) for i, size in enumerate(sizes)), len(sizes), "and {n} more", outside)


@AT_LIMIT_AND_PAST
def test_a_card_that_fits_exactly_is_whole(past):
    lines: list[str | _Rows] = ["head", _table(10, 10, 10), "tail"]
    whole = "head\n" + "".join(f"{i}rrrrrrrrr\n" for i in range(3)) + "tail\n"
    text = _fit(lines, len(whole) - past)
    assert (text == whole) is (not past)
    assert len(text) <= len(whole) - past


@pytest.mark.parametrize("shown", [1, 2])
@AT_LIMIT_AND_PAST
def test_a_row_is_shown_when_its_bytes_fit_the_room_exactly(shown, past):
    """Past the bound, the rows shown are those whose bytes (each with its line's end) fit what the rest leaves: a
    row that fits exactly is shown, and the card is then exactly at its bound."""
    lines: list[str | _Rows] = ["head", _table(10, 20, 30), "tail"]
    rest = len("head\n\nand 3 more\ntail\n")
    limit = rest + (11, 32)[shown - 1] - past
    text = _fit(lines, limit)
    rows = [line for line in text.splitlines() if line[:1].isdigit()]
    assert len(rows) == shown - past
    assert f"and {3 - shown + past} more" in text
    assert len(text) == limit if not past else len(text) <= limit


def test_the_cards_own_rows_come_before_the_rows_of_outside_data():
    lines: list[str | _Rows] = ["head", _table(30, 30, outside=True), "middle", _table(30, 30), "tail"]
    rest = len("head\n\nand 2 more\nmiddle\n\nand 2 more\ntail\n")
    text = _fit(lines, rest + 62)  # room for two rows of 30 bytes and their line ends, not four
    rows = "".join(f"{i}" + "r" * 29 + "\n" for i in range(2))
    assert text == f"head\n\nand 2 more\nmiddle\n{rows}tail\n"


@AT_LIMIT_AND_PAST
def test_the_model_card_is_held_to_its_bound(monkeypatch, past):
    facts = dataclasses.replace(FACTS, records=(_record("R", rows=20),))
    whole = model_card(facts)
    monkeypatch.setattr(module, "CARD_MAX_BYTES", len(whole.encode()) - past)
    text = model_card(facts)
    assert (text == whole) is (not past) and len(text.encode()) <= len(whole.encode()) - past
    assert yaml.safe_load(text.split("---\n")[1])["license"] == "gemma", "the front matter whole"
