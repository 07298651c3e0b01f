"""Edges of the model card (workloads/specs/model_card.py) the other card tests pass by: what lies past a value's
cut, an id too long to link, an image without a digest or a registry, a private card's registry paths, and the
exact line each cut table ends with."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest

from tests.card_facts import FACTS
from workloads.specs.model_card import model_card

pytestmark = pytest.mark.pure

PRIVATE_IMAGE = "europe-docker.pkg.dev/acme-project/mirror/tpu_post_training:0.2.4"
PRIVATE_DIGEST = "europe-docker.pkg.dev/acme-project/mirror/tpu_post_training@sha256:" + "ef" * 32


def card(**changes: Any) -> str:
    return model_card(dataclasses.replace(FACTS, **changes))


def section(text: str, name: str) -> list[str]:
    """The lines of the section headed ``## name``."""
    parts = re.split(r"^## (.*)$", text, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))[name].splitlines()


# ---------------------------------------------------------------------------------------------
# What is past a value's cut


@pytest.mark.parametrize("tail", ["\n", " ", "`", "\u202e"], ids=["line-break", "space", "backtick", "bidi"])
def test_what_lies_past_a_long_values_cut_does_not_change_how_it_shows(tail):
    """A value longer than the card shows is judged by what is shown (its first 200 characters, the last one
    giving way to the cut's mark): a line break, an edge space, a backtick or a control character past them is
    cut off, not a reason to quote the whole value as JSON or to leave the code span."""
    shown = "a" * 199 + "…"
    text = card(model_name="a" * 201 + tail, base_revision="a" * 201 + tail)
    assert f"# acme\\/gemma4\\-grpo: {shown} post-trained with GRPO" in text.splitlines(), "plain text, unquoted"
    assert f"- revision: `{shown}`" in section(text, "Base model"), "still a code span"


# ---------------------------------------------------------------------------------------------
# An id too long to link


def test_a_base_model_too_long_to_be_a_hub_id_is_shown_not_linked():
    repo = "org/" + "m" * 250
    lines = section(card(base_repo=repo), "Base model")
    assert f"- model: `{repo[:199]}…`" in lines, "its name, cut, as code: no link"
    assert "- commit: `0123456789abcdef0123456789abcdef01234567`" in lines, "the commit shown, not linked"


# ---------------------------------------------------------------------------------------------
# Images


def test_a_public_card_says_an_images_digest_is_not_recorded():
    """An image of another registry, tagged, its digest not resolved: its name and tag, and no digest."""
    rows = section(card(private=False, export_uri="", images={"maxtext": PRIVATE_IMAGE}), "Images")
    assert "| `maxtext` | `(a private registry)/tpu_post_training:0.2.4` | digest not recorded |" in rows


def test_a_public_card_shows_an_image_without_a_registry_path_by_its_name():
    """A reference with no ``/`` (Docker Hub's short form) is of no public TPU registry: shown as it is, after the
    same marker."""
    images = {"maxtext": "maxtext:1", "proxy": "proxy@sha256:" + "cd" * 32}
    rows = section(card(private=False, export_uri="", images=images), "Images")
    assert "| `maxtext` | `(a private registry)/maxtext:1` | digest not recorded |" in rows
    pinned = f"`(a private registry)/proxy@sha256:{'cd' * 32}`"
    assert f"| `proxy` | {pinned} | {pinned} |" in rows


def test_a_private_card_shows_a_private_registrys_reference_and_digest_whole():
    rows = section(card(images={"maxtext": PRIVATE_IMAGE}, image_digests={PRIVATE_IMAGE: PRIVATE_DIGEST}), "Images")
    assert f"| `maxtext` | `{PRIVATE_IMAGE}` | `{PRIVATE_DIGEST}` |" in rows


# ---------------------------------------------------------------------------------------------
# The line a cut table ends with


def test_each_cut_table_ends_with_its_own_line():
    """Past its cap, each table is followed, after a blank line, by exactly the line saying how many rows it left
    out and where they are."""
    text = card(
        export_uri="",
        config_diff=[{"key": f"tpu-rl:training.k{i}", "value": i, "tutorial": 0} for i in range(122)],
        images={f"image{i:02}": f"registry.example/i{i}:1" for i in range(23)},
        steps={f"step{i:02}": f"jobset-{i}" for i in range(24)},
        records=({"title": "R", "summary": "s", "columns": ["c"], "rows": [[f"v{r}"] for r in range(55)]},),
    )
    said = {
        "Training configuration": "and 2 more (the run's stack configuration has them all)",
        "Images": "and 3 more",
        "Provenance": "and 4 more",
        "R": "and 5 more, left out of the card (the step's `record.json` has them all)",
    }
    for name, last in said.items():
        assert [line for line in section(text, name) if line][-1] == last, name
