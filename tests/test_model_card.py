"""The Hub model card (workloads/specs/model_card.py), the reward curve it links (workloads/observe/plots.py) and the
configuration differences it lists (core/config/diff.py)."""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import os
import re
import unicodedata
from pathlib import Path
from typing import Any

import pytest
import yaml

from core.tpu import Capacity
from tests.conftest import slug
from tests.pure_plan import per_mutant_cache
from workloads.specs.model_card import (
    GEMMA_NOTICE,
    GEMMA_PROHIBITED_USE,
    GEMMA_TERMS,
    CardFacts,
    card_setting,
    hub_datasets,
    model_card,
)

COMMIT = "0123456789abcdef0123456789abcdef01234567"
MAXTEXT = "us-docker.pkg.dev/cloud-tpu-images/maxtext-images/tpu_post_training:0.2.4"
MAXTEXT_DIGEST = "us-docker.pkg.dev/cloud-tpu-images/maxtext-images/tpu_post_training@sha256:" + "ab" * 32
PATHWAYS = "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/server@sha256:" + "cd" * 32
PROXY = "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/proxy_server:latest"
SUMMARY = {
    "accuracyBefore": 30.0,
    "accuracyAfter": 52.5,
    "meanRewardBefore": 0.45,
    "meanRewardAfter": 0.65,
    "finalReward": 0.7123456,
    "lastStep": 50,
    "stepChipHours": 18.5,
    "heldChipHours": 21.33,
    "attempts": 2,
}
DATASET_COMMIT = "f0e1d2c3b4a5968778695a4b3c2d1e0f1a2b3c4d"
"""The dataset's commit the run's record names (``<train output>dataset/dataset.json``)."""
FACTS = CardFacts(
    repo="acme/gemma4-grpo",
    branch="tpu-rl-0f1e2d3c4b",
    base_repo="google/gemma-4-26b-a4b-it",
    base_revision="main",
    base_commit=COMMIT,
    model_name="gemma4-26b",
    dataset="openmathinstruct2",
    dataset_ids=("nvidia/OpenMathInstruct-2", "nvidia/OpenMathInstruct-2"),
    dataset_commit=("nvidia/OpenMathInstruct-2", DATASET_COMMIT),
    config_diff=[
        {"key": "tpu-rl:training.numBatches", "value": 10, "tutorial": 50},
        {"key": "tpu-rl:forceDestroy", "value": True, "tutorial": False},
        {"key": "tpu-rl:authorizedNetworks", "value": ("198.51.100.7/32",), "tutorial": ("0.0.0.0/0",)},
    ],
    images={"pathwaysServer": PATHWAYS, "maxtext": MAXTEXT, "pathwaysProxy": PROXY},
    image_digests={MAXTEXT: MAXTEXT_DIGEST},
    summary=SUMMARY,
    usd_per_chip_hour=2.7,
    capacity=Capacity.SPOT,
    chips=8,
    reward_image="reward-curve.png",
    steps={"convert": "convert-1a2b3c4d5e", "train": "train-0f1e2d3c4b", "export": "export-9a8b7c6d5e"},
    export_uri="gs://my-bucket/gemma4-26b/export/9a8b7c6d5e/",
    base_license="gemma",
)
FRONT_MATTER = {
    "license": "gemma",
    "base_model": "google/gemma-4-26b-a4b-it",
    "base_model_relation": "finetune",
    "library_name": "transformers",
    "pipeline_tag": "text-generation",
    "datasets": ["nvidia/OpenMathInstruct-2"],
    "tags": ["tpu-rl", "grpo", "maxtext", "reinforcement-learning"],
}
BASE_LINK = r"[google\/gemma\-4\-26b\-a4b\-it](https://huggingface.co/google/gemma-4-26b-a4b-it)"
"""The card's link to the base model: its text plain (every ASCII punctuation escaped), its address the Hub's."""
SECTIONS = [
    "Base model",
    "Dataset",
    "Training configuration",
    "Evaluation",
    "Compute",
    "Images",
    "Provenance",
    "License",
]


def card(**changes) -> str:
    return model_card(dataclasses.replace(FACTS, **changes))


def split(text: str) -> tuple[dict, str]:
    """The front matter, parsed, and the Markdown after it (as the Hub splits them)."""
    assert text.startswith("---\n")
    front, body = _split(text)
    return copy.deepcopy(front), body


@functools.lru_cache(maxsize=256)
def _split(text: str) -> tuple[dict, str]:
    """``split``, parsed once per text (a card is split by several checks; each caller gets its own copy)."""
    end = text.index("\n---\n", 3)
    return yaml.safe_load(text[4:end]), text[end + 5 :]


def sections(text: str) -> dict[str, str]:
    """The Markdown by ``## `` heading (the part before the first one under "")."""
    parts: dict[str, str] = {}
    name = ""
    for line in split(text)[1].splitlines():
        if line.startswith("## "):
            name = line[3:]
            parts[name] = ""
        else:
            parts[name] = parts.get(name, "") + line + "\n"
    return parts


def cells(line: str) -> list[str]:
    """A table row's cells, split where GitHub and markdown-it split them: at a ``|`` after an even number of
    backslashes (outer pipes dropped)."""
    found, current, backslashes = [], "", 0
    for char in line.strip()[1:-1]:
        if char == "|" and backslashes % 2 == 0:
            found.append(current.strip())
            current = ""
        else:
            current += char
        backslashes = backslashes + 1 if char == "\\" else 0
    return [*found, current.strip()]


def render(text: str) -> str:
    """The card's Markdown as HTML, by markdown-it with GitHub's tables and strikethrough (raw HTML on) and
    linkify-it's autolinks, which find more than GitHub's (``evil.example`` as well as ``www.``, schemes and
    e-mail addresses)."""
    return _rendered(text)


@functools.lru_cache(maxsize=256)
def _rendered(text: str) -> str:
    return markdown("linkify").render(split(text)[1])


@functools.cache
def markdown(kind: str) -> Any:
    """A markdown-it parser, made once: ``"linkify"``, the renderer ``render`` describes; ``"table"``, CommonMark with
    GitHub's tables (a parser keeps no state from one text to the next)."""
    markdown_it = pytest.importorskip("markdown_it")
    if kind == "table":
        return markdown_it.MarkdownIt("commonmark").enable("table")
    pytest.importorskip("linkify_it")
    md = markdown_it.MarkdownIt("commonmark", {"linkify": True}).enable(["table", "strikethrough", "linkify"])
    md.linkify.set({"fuzzy_email": True, "fuzzy_link": True})
    return md


@functools.lru_cache(maxsize=256)
def tokens_of(text: str) -> list[Any]:
    """The card's Markdown as markdown-it with GitHub's tables parses it, once per text (read, never changed)."""
    return markdown("table").parse(split(text)[1])


TAGS = (
    *("<a ", "<img", "<em>", "<strong>", "<del>", "<script", "<h1", "<h2", "<h3", "<hr", "<table", "<tr", "<td"),
    *("<li", "<blockquote", "<p>", "<br", "<!--", "<b>", "<span", "<pre"),
)
"""What a value must never add to the rendered card."""


def blocks(text: str) -> list[tuple[str, str]]:
    """The card's Markdown as markdown-it reads it: each block's tag and its inline text (code spans' content
    included), in order."""
    tokens = tokens_of(text)
    found: list[tuple[str, str]] = []
    for index, token in enumerate(tokens):
        if token.type == "inline":
            found.append((tokens[index - 1].tag, "".join(c.content for c in token.children or [])))
    return found


def rendered_tables(text: str) -> list[list[list[str]]]:
    """Every table as a real Markdown renderer (markdown-it, with GitHub's tables) reads it: rows of cell texts."""
    tokens = tokens_of(text)
    tables: list[list[list[str]]] = []
    in_cell = False
    for token in tokens:
        if token.type == "table_open":
            tables.append([])
        elif token.type == "tr_open":
            tables[-1].append([])
        elif token.type in ("th_open", "td_open", "th_close", "td_close"):
            in_cell = token.type.endswith("_open")
        elif token.type == "inline" and in_cell:
            tables[-1][-1].append("".join(c.content for c in token.children or []))
    return tables


# ---------------------------------------------------------------------------------------------
# Front matter


@pytest.mark.pure
def test_the_front_matter_is_what_the_hub_reads():
    front, body = split(model_card(FACTS))
    assert front == FRONT_MATTER, "the dataset named twice (train and eval) is listed once"
    assert list(front) == list(FRONT_MATTER), "in this order"
    repocard = pytest.importorskip("huggingface_hub.repocard")
    parsed = repocard.ModelCard(model_card(FACTS))
    assert parsed.data.to_dict() == FRONT_MATTER and parsed.text == body


@pytest.mark.pure
def test_hub_datasets_are_the_keys_that_name_hub_datasets():
    assert hub_datasets("openmathinstruct2") == ("nvidia/OpenMathInstruct-2",), "not its parquet files or split"
    assert hub_datasets("gsm8k") == ("openai/gsm8k",)
    two = split(card(dataset_ids=("org/train", "org/eval")))[0]["datasets"]
    assert two == ["org/train", "org/eval"]
    assert split(card(dataset_ids=()))[0]["datasets"] == []


@pytest.mark.pure
@pytest.mark.parametrize(
    "hostile",
    [
        "evil\n---\nlicense: mit",
        "x\r\n---\r\nlicense: mit",
        "---",
        "...",
        "a: b",
        "# comment",
        "'quoted\" \\ [flow] {map}",
        "line\u2028separator\u0085next",
        "caf\u00e9",
        " padded ",
    ],
    ids=lambda value: slug(value),
)
def test_no_value_can_break_the_front_matter(hostile):
    text = card(base_repo=hostile, dataset_ids=(hostile, "ok/data"))
    front, body = split(text)
    assert front == {**FRONT_MATTER, "base_model": hostile, "datasets": [hostile, "ok/data"]}
    end = text.index("\n---\n", 3)
    assert all(line.isascii() and line.isprintable() for line in text[4:end].split("\n")), "one line per value"
    assert [line for line in text.splitlines() if line.strip() in ("---", "...")] == ["---", "---"]
    repocard = pytest.importorskip("huggingface_hub.repocard")
    assert repocard.ModelCard(text).data.to_dict()["base_model"] == hostile, "the Hub's own split agrees"


# ---------------------------------------------------------------------------------------------
# Each fact in its place


@pytest.mark.pure
def test_the_sections_in_order_and_what_the_model_is():
    text = model_card(FACTS)
    assert [line[3:] for line in text.splitlines() if line.startswith("## ")] == SECTIONS
    intro = sections(text)[""]
    assert intro.startswith("\n# acme\\/gemma4\\-grpo: gemma4\\-26b post-trained with GRPO\n")
    assert "`google/gemma-4-26b-a4b-it` post-trained with GRPO" in intro and "`openmathinstruct2`" in intro
    assert "MaxText" in intro and "Pathways on Cloud TPU" in intro and "branch `tpu-rl-0f1e2d3c4b`" in intro
    load = 'AutoModelForCausalLM.from_pretrained("acme/gemma4-grpo", revision="tpu-rl-0f1e2d3c4b")'
    assert load in intro and 'AutoTokenizer.from_pretrained("acme/gemma4-grpo", revision="tpu-rl-0f1e2d3c4b")' in intro
    assert model_card(FACTS) == text, "deterministic"


@pytest.mark.pure
def test_the_base_model_its_revision_and_commit():
    base = sections(model_card(FACTS))["Base model"]
    assert f"- model: {BASE_LINK}\n" in base
    assert "- revision: `main`\n" in base
    assert f"- commit: [{COMMIT}](https://huggingface.co/google/gemma-4-26b-a4b-it/tree/{COMMIT})\n" in base
    assert "- commit: not recorded\n" in sections(card(base_commit=None))["Base model"]
    short = sections(card(base_commit=COMMIT[:39]))["Base model"]
    assert f"- commit: `{COMMIT[:39]}`\n" in short and "/tree/" not in short, "only a full commit is linked"
    upper = sections(card(base_commit=COMMIT.upper()))["Base model"]
    assert "/tree/" not in upper, "the Hub's commits are lowercase hex"
    odd = sections(card(base_repo="org/a b(c)"))["Base model"]
    assert "[org\\/a b\\(c\\)](https://huggingface.co/org/a%20b%28c%29)" in odd, "the URL percent-encoded"


@pytest.mark.pure
def test_the_dataset_links():
    dataset = sections(model_card(FACTS))["Dataset"]
    assert dataset == (
        "\n- `openmathinstruct2`: [nvidia\\/OpenMathInstruct\\-2](https://huggingface.co/datasets/nvidia/OpenMathInstruct-2)\n"
        "- revision: `main`\n"
        f"- commit: [{DATASET_COMMIT}](https://huggingface.co/datasets/nvidia/OpenMathInstruct-2/tree/{DATASET_COMMIT})\n\n"
    )
    two = sections(card(dataset_ids=("a/b", "c/d")))["Dataset"]
    assert "[a\\/b](https://huggingface.co/datasets/a/b), [c\\/d](https://huggingface.co/datasets/c/d)" in two
    assert "- `openmathinstruct2`: not recorded" in sections(card(dataset_ids=()))["Dataset"]
    unread = sections(card(dataset_commit=None, dataset_revision="v1.0"))["Dataset"]
    assert "- revision: `v1.0`\n- commit: not recorded\n" in unread, "a run whose dataset record was not read"
    short = sections(card(dataset_commit=("nvidia/OpenMathInstruct-2", DATASET_COMMIT[:12])))["Dataset"]
    assert f"- commit: `{DATASET_COMMIT[:12]}`\n" in short and "/tree/" not in short, "only a full commit is linked"


@pytest.mark.pure
def test_the_configuration_table():
    config = sections(model_card(FACTS))["Training configuration"]
    rows = [line for line in config.splitlines() if line.startswith("|")]
    assert rows == [
        "| setting | this run | tutorial |",
        "| --- | --- | --- |",
        "| `tpu-rl:training.numBatches` | `10` | `50` |",
        "| `tpu-rl:forceDestroy` | `true` | `false` |",
        '| `tpu-rl:authorizedNetworks` | `["198.51.100.7/32"]` | `["0.0.0.0/0"]` |',
    ]
    assert "none: the tutorial's settings" not in config
    empty = sections(card(config_diff=[]))["Training configuration"]
    assert empty == "\nnone: the tutorial's settings\n\n" and "|" not in empty
    unset = sections(card(config_diff=[{"key": "tpu-rl:k", "value": None, "tutorial": ""}]))
    assert '| `tpu-rl:k` | `not set` | `""` |' in unset["Training configuration"]


@pytest.mark.pure
def test_the_evaluation_before_and_after():
    evaluation = sections(model_card(FACTS))["Evaluation"]
    assert "| accuracy | 30% | 52.5% |\n" in evaluation
    assert "| mean reward | 0.45 | 0.65 |\n" in evaluation
    assert "- final training reward: 0.7123\n" in evaluation
    assert "- optimizer steps: 50\n" in evaluation and "- training attempts: 2\n" in evaluation
    assert rendered_tables(model_card(FACTS))[1] == [
        ["", "before GRPO", "after GRPO"],
        ["accuracy", "30%", "52.5%"],
        ["mean reward", "0.45", "0.65"],
    ]


@pytest.mark.pure
def test_what_was_not_recorded_says_so():
    partly = sections(card(summary={**SUMMARY, "accuracyBefore": None, "meanRewardAfter": None, "attempts": 0}))
    assert "| accuracy | not recorded | 52.5% |\n" in partly["Evaluation"]
    assert "| mean reward | 0.45 | not recorded |\n" in partly["Evaluation"]
    assert "- training attempts: 0\n" in partly["Evaluation"], "zero is a value, not a missing one"
    unknown = sections(card(summary=None, base_commit=None, image_digests={}))
    assert "| accuracy | not recorded | not recorded |\n" in unknown["Evaluation"]
    assert "| mean reward | not recorded | not recorded |\n" in unknown["Evaluation"]
    for line in ("final training reward", "optimizer steps", "training attempts"):
        assert f"- {line}: not recorded\n" in unknown["Evaluation"]
    assert (
        "- TPU chip-hours of the training steps (tunix's step events, every attempt): not recorded\n"
        in unknown["Compute"]
    )
    assert "compilation, evaluations and steps): not recorded\n" in unknown["Compute"]
    assert "- cost: not recorded\n" in unknown["Compute"]
    assert "- commit: not recorded\n" in unknown["Base model"]
    assert f"| `maxtext` | `{MAXTEXT}` | digest not recorded |" in unknown["Images"]
    assert "None" not in model_card(dataclasses.replace(FACTS, summary=None, base_commit=None))


@pytest.mark.pure
@pytest.mark.parametrize(
    ("hours", "rate", "cost"),
    [
        (21.33, 2.7, "$57.59 ($2.70 per chip-hour)"),
        (21.33, 1.375, "$29.33 ($1.375 per chip-hour)"),
        (1000.0, 4.2, "$4,200.00 ($4.20 per chip-hour)"),
        (0.0, 2.7, "$0.00 ($2.70 per chip-hour)"),
        (3, 0.5, "$1.50 ($0.50 per chip-hour)"),
    ],
)
def test_the_cost_is_the_held_chip_hours_times_the_rate_and_both_counts_are_labelled(hours, rate, cost):
    """What the slice bills (the attempts held it from start-up to exit) is the cost; the steps' own chip-hours
    (tunix's events: no start-up, compilation or evaluations) are shown beside it, each labelled."""
    compute = sections(card(summary={**SUMMARY, "heldChipHours": hours}, usd_per_chip_hour=rate))["Compute"]
    assert f"- cost: {cost.replace(' per chip-hour)', ' per chip-hour, of the slice held)')}\n" in compute
    assert (
        "- TPU chip-hours the slice was held by training (every attempt from its start to its exit: start-up, "
        f"compilation, evaluations and steps): {hours:,.2f}\n"
    ) in compute
    assert "- TPU chip-hours of the training steps (tunix's step events, every attempt): 18.50\n" in compute
    assert "- capacity: spot\n" in compute and "- chips: 8\n" in compute
    assert "reserved slice" not in compute
    reserved = sections(card(capacity=Capacity.RESERVATION))["Compute"]
    assert "- a reserved slice bills every hour it exists, used or not: this counts the hours training held it\n" in (
        reserved
    )


@pytest.mark.pure
def test_the_images_with_their_digests():
    images = sections(model_card(FACTS))["Images"]
    rows = [line for line in images.splitlines() if line.startswith("|")]
    assert rows == [
        "| image | reference | digest |",
        "| --- | --- | --- |",
        f"| `maxtext` | `{MAXTEXT}` | `{MAXTEXT_DIGEST}` |",
        f"| `pathwaysProxy` | `{PROXY}` | digest not recorded |",
        f"| `pathwaysServer` | `{PATHWAYS}` | `{PATHWAYS}` |",
    ], "by name; a reference pinned by its digest is its own"
    reordered = dict(reversed(list(FACTS.images.items())))
    assert card(images=reordered) == model_card(FACTS), "the same images in another order: the same card"
    assert sections(card(images={}))["Images"] == "\nnot recorded\n\n"


@pytest.mark.pure
def test_the_provenance():
    provenance = sections(model_card(FACTS))["Provenance"]
    rows = [line for line in provenance.splitlines() if line.startswith("|")]
    assert rows[2:] == [
        "| `convert` | `convert-1a2b3c4d5e` |",
        "| `train` | `train-0f1e2d3c4b` |",
        "| `export` | `export-9a8b7c6d5e` |",
    ], "in the workflow's order"
    assert "- export: `gs://my-bucket/gemma4-26b/export/9a8b7c6d5e/`\n" in provenance
    assert "steps: not recorded" in sections(card(steps={}))["Provenance"]


@pytest.mark.pure
def test_the_licence_and_the_notice_the_gemma_terms_require():
    text = model_card(FACTS)
    licence = sections(text)["License"]
    assert GEMMA_NOTICE == (
        "Gemma is provided under and subject to the Gemma Terms of Use found at ai.google.dev/gemma/terms"
    )
    assert GEMMA_NOTICE in text.splitlines(), "verbatim, a line of its own"
    assert text.endswith(f"\n\n{GEMMA_NOTICE}\n")
    assert "[Gemma Terms of Use](https://ai.google.dev/gemma/terms)" in licence
    assert "[Gemma Prohibited Use Policy](https://ai.google.dev/gemma/prohibited_use_policy)" in licence
    assert "Model Derivative" in licence and "`google/gemma-4-26b-a4b-it`, is Gemma" in licence
    assert split(text)[0]["license"] == "gemma"


@pytest.mark.pure
def test_an_apache_base_model_passes_its_licence_on():
    """Gemma 4 is released under Apache 2.0 (its Hub card says ``license: apache-2.0``): the card says what
    that licence asks of a derivative, and no Gemma Terms of Use are claimed for it."""
    text = card(base_license="apache-2.0")
    licence = sections(text)["License"]
    assert split(text)[0]["license"] == "apache-2.0"
    assert "[Apache License 2.0](https://www.apache.org/licenses/LICENSE-2.0)" in licence
    assert "copy of the licence" in licence and "statement of the changes" in licence
    assert "modified by GRPO training" in licence
    assert "Gemma Terms" not in text and GEMMA_NOTICE not in text


@pytest.mark.pure
@pytest.mark.parametrize(
    ("declared", "shown", "front"),
    [(None, "could not be read", "other"), ("llama3", "`llama3`", "llama3"), ("Bad Id", "`Bad Id`", "other")],
)
def test_another_or_unknown_licence_points_at_the_base_models_terms(declared, shown, front):
    text = card(base_license=declared)
    licence = sections(text)["License"]
    assert shown in licence and BASE_LINK in licence
    assert split(text)[0]["license"] == front, "the front matter holds a licence identifier or other"
    assert "Gemma Terms" not in text and "Apache" not in text


@pytest.mark.pure
def test_the_reward_curve_is_linked_only_when_there_is_one():
    evaluation = sections(model_card(FACTS))["Evaluation"]
    assert evaluation.endswith("\n\n![Reward per optimizer step](reward-curve.png)\n\n")
    without = card(reward_image=None)
    assert "![" not in without and ".png" not in without
    assert "](plots/reward%20curve.png)" in card(reward_image="plots/reward curve.png"), "relative, encoded"


# ---------------------------------------------------------------------------------------------
# Values from the configuration cannot break the Markdown

HOSTILE = [
    "a|b",
    "a\\|b",
    "ends\\",
    "two\nlines",
    "cr\rlf\r\n",
    "---",
    "\n---\n",
    "`code` and ``more``",
    "<script>alert(1)</script>",
    "*em* _em_ [link](https://x) ![img](y) $x$ ~~s~~ &amp; #h",
    "line\u2028separator",
    "",
    " padded ",
    "http://evil.example/x www.evil.example me@evil.example",
    "safe\u202egnp.exe",
]


@pytest.mark.pure
@pytest.mark.parametrize("value", HOSTILE, ids=[f"{i}-{slug(v)}" for i, v in enumerate(HOSTILE)])
def test_no_config_value_can_break_the_table(value):
    diff = [
        {"key": "tpu-rl:training.extraArgs", "value": {"k": value}, "tutorial": {}},
        {"key": "tpu-rl:clusterName", "value": value, "tutorial": value},
        {"key": "tpu-rl:namespace", "value": "after", "tutorial": "tpu-rl"},
    ]
    text = card(config_diff=diff, capacity=value)
    config = sections(text)["Training configuration"]
    rows = [line for line in config.splitlines() if line.strip()][1:]
    assert len(rows) == 5 and all(cells(row) and len(cells(row)) == 3 for row in rows), rows
    assert cells(rows[-1]) == ["`tpu-rl:namespace`", "`after`", "`tpu-rl`"], "the row after is intact"
    assert [line for line in text.splitlines() if line.strip() in ("---", "...")] == ["---", "---"]
    assert "\u2028" not in text and "\r" not in text
    assert split(text)[0] == FRONT_MATTER
    shown = value if value.isprintable() and value.strip() == value and value else json.dumps(value)
    table = rendered_tables(text)[0]
    assert len(table) == 4 and table[2] == ["tpu-rl:clusterName", shown, shown], (
        "rendered, the cell shows the value itself (in JSON when a table cell could not)"
    )
    assert table[1][1] == json.dumps({"k": value}) and table[3] == ["tpu-rl:namespace", "after", "tpu-rl"]
    assert re.search(r"^- capacity: .*$", sections(text)["Compute"], re.M), "on its own line"
    plain = [{**d, "value": "plain", "tutorial": "plain"} if d["value"] == value else d for d in diff]
    page, baseline = render(text), render(card(config_diff=plain, capacity=Capacity.SPOT))
    for tag in TAGS:
        assert page.count(tag) == baseline.count(tag), f"{tag}: no markup of its own"


# ---------------------------------------------------------------------------------------------
# The reward curve (workloads/observe/plots.py)


def _run_data(tmp_path, steps, **evaluations):
    """A run's data from an event file tensorboardX wrote as tunix does (tests/run_files.py)."""
    from tests.run_files import write_events
    from workloads.observe.evaluations import Evaluations
    from workloads.observe.run_data import RunData
    from workloads.observe.scalars import read_event_files

    write_events(tmp_path, steps)
    scalars = read_event_files(sorted(tmp_path.iterdir()))
    return RunData("gs://b/m/train/h/", scalars, Evaluations(**evaluations), checkpoint_step=None)


@pytest.mark.slow
def test_the_reward_curve_is_a_png_of_the_reward_tag(tmp_path):
    from tests.run_files import reward
    from workloads.observe.plots import plot, render_png, reward_curve_png

    data = _run_data(tmp_path, [1, 2, 3, 4, 5], intermediate=[{"step": 3}])
    png = reward_curve_png(data)
    assert png is not None and png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000
    assert data.scalars.aligned("rewards/train/sum") == [(s, pytest.approx(reward(s))) for s in range(1, 6)]
    assert png == render_png("Reward", {"rewards/train/sum": data.scalars.aligned("rewards/train/sum")}, [3]), (
        "the summed reward alone (the tag the final reward is read from), the evaluation marked"
    )
    report_plot = dict((name, image) for _, name, image in plot(data))["reward.png"]
    assert report_plot != png, "the report's reward plot draws the mean beside the sum"


@pytest.mark.slow
def test_no_reward_scalar_no_curve(tmp_path):
    from workloads.observe.evaluations import Evaluations
    from workloads.observe.plots import reward_curve_png
    from workloads.observe.run_data import RunData
    from workloads.observe.scalars import Scalars

    def run(series):
        return RunData("gs://b/m/train/h/", Scalars(series=series), Evaluations(), checkpoint_step=None)

    assert reward_curve_png(_run_data(tmp_path, [])) is None, "an event file with no scalars yet"
    assert reward_curve_png(run({"actor/train/loss": [(1, 2.0)], "actor/train/kl": [(1, 0.1)]})) is None
    assert reward_curve_png(run({"rewards/train/sum": [], "actor/train/loss": [(1, 2.0)]})) is None
    mean_only = reward_curve_png(run({"rewards/train/mean": [(0, 0.2), (1, 0.3)]}))
    assert mean_only is not None and mean_only.startswith(b"\x89PNG"), "the mean when the sum is not logged"


# ---------------------------------------------------------------------------------------------
# The configuration differences (core/config/diff.py)


@pytest.mark.pure
def test_config_diff_lists_what_differs_and_never_a_secret():
    from core.config.diff import config_diff
    from core.config.schema import FIELDS
    from tools.stack_files import ROOT, load_stack_config

    raw, secret_keys, _ = load_stack_config(ROOT / "Pulumi.dev.yaml", [])
    secrets = [f.key for f in FIELDS if f.secret]
    assert "tpu-rl:hfToken" in secrets
    for index, key in enumerate(secrets):
        raw[key] = f"hf_SECRETvalueNUMBER{index}forTHEdiffTEST0123456789"
    diff = config_diff(raw, frozenset(secret_keys) | set(secrets))
    keys = [d["key"] for d in diff]
    assert {"key": "tpu-rl:training.numBatches", "value": 10, "tutorial": 50} in diff
    assert {"key": "tpu-rl:tpu.capacity", "value": "spot", "tutorial": "reservation"} in diff
    assert not set(keys) & set(secrets) and "hf_SECRET" not in repr(diff)
    assert not [k for k in keys if not k.startswith("tpu-rl:")], "provider keys left out"
    assert "tpu-rl:authorizedNetworks" not in keys and "tpu-rl:images.registries" not in keys, (
        "a list at the tutorial's value is no difference"
    )
    images = json.loads(raw["tpu-rl:images"]) if isinstance(raw.get("tpu-rl:images"), str) else {}
    raw["tpu-rl:images"] = json.dumps({**images, "registries": ["us-docker.pkg.dev/my-project/mirror"]})
    raw["tpu-rl:authorizedNetworks"] = json.dumps(["198.51.100.7/32"])
    changed = {d["key"]: d for d in config_diff(raw, frozenset(secret_keys) | set(secrets))}
    assert changed["tpu-rl:images.registries"]["value"] == ("us-docker.pkg.dev/my-project/mirror",)
    assert changed["tpu-rl:authorizedNetworks"] == {
        "key": "tpu-rl:authorizedNetworks",
        "value": ("198.51.100.7/32",),
        "tutorial": ("0.0.0.0/0",),
    }


@pytest.mark.pure
@pytest.mark.parametrize(
    ("key", "listed"),
    [
        ("tpu-rl:training.numBatches", True),
        ("tpu-rl:model.revision", True),
        ("tpu-rl:tpu.topology", True),
        ("tpu-rl:tpu.reservation", False),  # a reservation's path names the project
        ("tpu-rl:authorizedNetworks", False),
        ("tpu-rl:bucketName", False),
        ("tpu-rl:gke.secretsEncryptionKey", False),
        ("tpu-rl:images.registries", False),
        ("tpu-rl:publish.repo", False),
        ("tpu-rl:workflow.preflight", False),
        ("gcp:project", False),
    ],
)
def test_the_card_lists_training_settings_not_the_infrastructure(key, listed):
    assert card_setting(key) is listed


@pytest.mark.pure
def test_a_card_without_the_export_path_names_no_bucket():
    text = card(export_uri="")
    assert "gs://" not in text and "- export:" not in text
    assert "`export-9a8b7c6d5e`" in sections(text)["Provenance"], "the steps are still named"


# ---------------------------------------------------------------------------------------------
# The whole card, as reviewed (tests/data/model-card-*.md; TPU_RL_UPDATE_MESSAGES=1 rewrites them)

GOLDEN = Path(__file__).parent / "data"
ODD = dataclasses.replace(
    FACTS,
    dataset_ids=(
        "nvidia/OpenMathInstruct-2",
        "some-org/" + "a-very-long-dataset-name-" * 5 + "v2",
        "org/données",
        "org/" + "données-" * 12 + "fin",
    ),
    config_diff=[
        {"key": "tpu-rl:training.extraArgs", "value": {"b": 1, "a": 2}, "tutorial": {}},
        {"key": "tpu-rl:model.revision", "value": "X-branch-é", "tutorial": "main"},
    ],
    summary={**SUMMARY, "lastStep": 12345, "heldChipHours": "n/a", "accuracyBefore": "unknown"},
    usd_per_chip_hour=2.705,
)
CARDS = {
    "gemma-terms": FACTS,
    "apache": dataclasses.replace(FACTS, base_license="apache-2.0"),
    "unknown-licence": dataclasses.replace(FACTS, base_license=None, reward_image=None, summary=None),
    "odd-values": ODD,
}


@pytest.mark.pure
@pytest.mark.parametrize("name", sorted(CARDS))
def test_the_card_is_the_reviewed_one(name):
    path = GOLDEN / f"model-card-{name}.md"
    text = model_card(CARDS[name])
    if os.environ.get("TPU_RL_UPDATE_MESSAGES"):
        path.write_text(text)
    assert text == path.read_text(), f"the card changed: review it, then TPU_RL_UPDATE_MESSAGES=1 rewrites {path.name}"


@pytest.mark.pure
def test_a_public_card_names_no_private_registry_or_project():
    """A private registry's path holds its project (us-docker.pkg.dev/<project>/...): a public card shows only the
    image's name and tag or digest for it; Google's public TPU image registries are shown whole."""
    private = "us-docker.pkg.dev/acme-secret-project/images/tpu_post_training:0.2.4"
    private_digest = "us-docker.pkg.dev/acme-secret-project/images/tpu_post_training@sha256:" + "ef" * 32
    images, digests = {"maxtext": private, "pathwaysServer": PATHWAYS}, {private: private_digest}
    public = model_card(dataclasses.replace(FACTS, private=False, export_uri="", images=images, image_digests=digests))
    assert "acme-secret-project" not in public
    shown = f"`(a private registry)/tpu_post_training@sha256:{'ef' * 32}`"
    assert f"| `maxtext` | `(a private registry)/tpu_post_training:0.2.4` | {shown} |" in public
    assert f"| `pathwaysServer` | `{PATHWAYS}` | `{PATHWAYS}` |" in public
    private_card = model_card(dataclasses.replace(FACTS, images=images, image_digests=digests))
    assert "acme-secret-project" in private_card, "a private card shows it whole"


def _record(rows, title="Rows", columns=8, summary="s"):
    return {"title": title, "summary": summary, "columns": [f"c{i}" for i in range(columns)], "rows": rows}


LONG_CELLS = ("😀" * 500, ("@\u202e|`\\*" * 84)[:500])
"""A model's output at its longest (``core.records.MAX_CELL_CHARS``, 500), of what takes the most bytes in the card:
4-byte characters; ``@`` (a code span), a bidi override (JSON), markup to escape."""


@pytest.mark.pure
def test_the_card_always_fits_its_config_map():
    """Every value is cut at 200 characters, the lists at their caps and, when the whole card would be larger, the
    tables' rows: a hostile base card's licence of 1.5 MB, huge setting values and names, and records that hold
    the most a record may (``core.records``), each cell at its longest, in more records than the card shows, leave
    the card under its 256 KiB bound (with the largest reward curve kept, base64, under a ConfigMap's 1 MiB)."""
    from core.records import MAX_CELL_CHARS, MAX_COLUMNS, MAX_ROWS
    from workloads.specs.card_config import REWARD_IMAGE_MAX_BYTES
    from workloads.specs.model_card import CARD_MAX_BYTES, MAX_RECORDS, MAX_VALUE_CHARS

    assert all(len(cell) == MAX_CELL_CHARS for cell in LONG_CELLS)
    huge = "x" * 1_500_000
    diff = [{"key": f"tpu-rl:training.k{i}", "value": huge, "tutorial": huge} for i in range(500)]
    full = tuple(
        _record([[cell] * MAX_COLUMNS] * MAX_ROWS, title=cell, columns=MAX_COLUMNS, summary=cell)
        for cell in LONG_CELLS * 6
    )
    facts = dataclasses.replace(
        FACTS,
        base_license=huge,
        config_diff=diff,
        images={f"image{i}": huge for i in range(5)},
        summary={key: huge for key in SUMMARY},
        steps={f"step{i}": huge for i in range(8)},
        export_uri="gs://" + huge,
        base_revision=huge,
        base_commit=huge,
        records=full,
    )
    text = model_card(facts)
    assert len(text.encode()) <= CARD_MAX_BYTES
    assert "x" * MAX_VALUE_CHARS not in text and "x" * (MAX_VALUE_CHARS - 1) + "…" in text
    assert "and 380 more (the run's stack configuration has them all)" in text
    assert f"and {len(full) - MAX_RECORDS} more step records, left out of the card" in text
    assert "left out of the card (the step's `record.json` has them all)" in text
    assert CARD_MAX_BYTES + (REWARD_IMAGE_MAX_BYTES + 2) // 3 * 4 < 1024 * 1024, "card + base64 curve < 1 MiB"

    records_only = model_card(dataclasses.replace(FACTS, records=full))
    assert len(records_only.encode()) <= CARD_MAX_BYTES
    shown = rendered_tables(records_only)[2]
    assert 10 < len(shown) - 1 < MAX_ROWS, "the first record's rows fill what room there is"
    assert sections(records_only)["Images"] == sections(model_card(FACTS))["Images"], "the card's own tables whole"
    split(records_only)  # the front matter intact

    worst = "😀" * 1_500  # 4 bytes a character: the most a shown value takes
    strings: dict[str, Any] = {
        f.name: worst for f in dataclasses.fields(CardFacts) if isinstance(getattr(FACTS, f.name), str)
    }
    everything = dataclasses.replace(
        facts,
        **strings,
        dataset_ids=tuple(f"{worst}{i}" for i in range(30)),
        config_diff=[{"key": f"{worst}{i}", "value": worst, "tutorial": worst} for i in range(500)],
        images={f"{worst}{i}": worst for i in range(30)},
        image_digests={worst: worst},
        summary={key: worst for key in SUMMARY},
        steps={f"{worst}{i}": worst for i in range(30)},
    )
    assert len(model_card(everything).encode()) <= CARD_MAX_BYTES, "every value and list at its worst"


@pytest.mark.pure
@pytest.mark.parametrize("extra", [0, 1])
def test_the_card_at_its_bound_is_whole_and_one_byte_over_cuts_rows(monkeypatch, extra):
    """A card of exactly ``CARD_MAX_BYTES`` is the card with every row; a byte over, the records' rows are cut
    (the card's own tables are not), the card fits, and says how many rows it left out."""
    from workloads.specs import model_card as module

    rows = [[f"row {i}", "x" * 150] for i in range(20)]
    facts = dataclasses.replace(FACTS, records=(_record(rows, columns=2),))
    whole = model_card(facts)
    monkeypatch.setattr(module, "CARD_MAX_BYTES", len(whole.encode()) - extra)
    text = model_card(facts)
    if not extra:
        assert text == whole and "left out" not in text
        return
    assert len(text.encode()) <= len(whole.encode()) - 1
    table = rendered_tables(text)[2]
    assert [row[0] for row in table[1:]] == [f"row {i}" for i in range(len(table) - 1)], "the first rows, in order"
    left = 20 - (len(table) - 1)
    assert left >= 1 and f"and {left} more, left out of the card (the step's `record.json` has them all)" in text
    for name in ("Training configuration", "Images", "Provenance"):
        assert sections(text)[name] == sections(whole)[name], f"{name}: the card's own table is whole"


@pytest.mark.pure
@pytest.mark.parametrize("count", [50, 51])
def test_a_record_shows_at_most_its_rows(count):
    from workloads.specs.model_card import MAX_RECORD_ROWS

    assert MAX_RECORD_ROWS == 50
    text = card(records=(_record([[str(i), "y"] for i in range(count)], columns=2),))
    assert len(rendered_tables(text)[2]) == 1 + 50
    assert ("and 1 more, left out of the card" in text) is (count == 51)


@pytest.mark.pure
@pytest.mark.parametrize("count", [8, 9])
def test_the_card_shows_at_most_eight_records(count):
    from workloads.specs.model_card import MAX_RECORDS

    assert MAX_RECORDS == 8
    text = card(records=tuple(_record([["a"]], title=f"Record {i}", columns=1) for i in range(count)))
    assert [name for name in sections(text) if name.startswith("Record")] == [f"Record {i}" for i in range(8)]
    assert ("and 1 more step record, left out of the card" in text) is (count == 9)


EVALUATION_RECORD = {
    "title": "Held-out questions",
    "summary": "1 of 2 correct",
    "columns": ["question", "expected", "answer", "correct"],
    "rows": [["What is 2 + 2?", "4", "4", "yes"], ["A | B <script>", "3", "*7*", "no"]],
}
"""A step record (``core.records``) as the evaluation step writes it, a model's text among it."""


@pytest.mark.pure
def test_the_model_card_shows_each_record_after_the_evaluation():
    without = card()
    text = card(records=(EVALUATION_RECORD,))
    found = sections(text)
    title = r"Held\-out questions"
    assert list(found).index(title) == list(found).index("Evaluation") + 1
    part = found[title]
    assert "| question | expected | answer | correct |" in part
    assert r"| A \| B \<script\> | 3 | \*7\* | no |" in part, "every cell plain: no markup, no table break"
    assert rendered_tables(text)[2] == [EVALUATION_RECORD["columns"], *EVALUATION_RECORD["rows"]]
    assert "Held" not in without


OUTSIDE = [
    "http://evil.example/x",
    "see https://evil.example/p?q=1 now",
    "HTTPS://EVIL.EXAMPLE",
    "ftp://evil.example/f",
    "www.evil.example",
    "WWW.Evil.Example/path",
    "evil.example",
    "me@evil.example",
    "mailto:me@evil.example",
    "xmpp:me@evil.example",
    "<http://evil.example>",
    "<me@evil.example>",
    "[click](http://evil.example)",
    '[click](http://evil.example "title")',
    "![x](http://evil.example/i.png)",
    "[x][1] and [1]: http://evil.example",
    "[1]: http://evil.example",
    "<img src=x onerror=alert(1)>",
    "<a href='http://evil.example'>x</a>",
    "<!-- hidden -->",
    "&lt;b&gt; &#64; &amp; &#x3C;",
    "back\\slash \\* \\_ \\` \\| \\\\ \\n",
    "`code` ``more``",
    "a | b",
    "*em* _em_ **strong** __strong__ ~~del~~",
    "# heading",
    "- item",
    "+ item",
    "1. item",
    "2) item",
    "---",
    "===",
    "> quote",
    "$x$ $$y$$",
    "safe\u202egnp.exe",
    "\u2066isolate\u2069 \u2067r\u2069 \u2068f\u2069",
    "embed\u202a\u202b\u202c\u202d",
    "marks\u200e\u200f\u061c",
    "zero\u200bwidth\u200cjoiner\u200d",
    "\ufeffbom",
    "soft\u00adhyphen",
    "tag\U000e0041\U000e007f",
    "two\nlines",
    " padded ",
    "",
]
"""A model's output and other run data as hostile as it gets: links, images, autolinks and bare addresses, raw HTML,
entities, escapes, markup, blocks at a line's start, bidi controls and other invisible format characters (Unicode
category Cf)."""


def shown(value: str) -> str:
    """What the card shows for ``value``: itself, or its JSON string when a line could not show it."""
    return value if value.isprintable() and value.strip() == value and value else json.dumps(value)


@per_mutant_cache
def plain_record_card() -> str:
    """The card with a record of plain values, which each hostile one is compared with."""
    return card(records=({"title": "t", "summary": "s", "columns": ["q", "c"], "rows": [["a", "b"], ["c", "d"]]},))


@pytest.mark.pure
@pytest.mark.parametrize("value", OUTSIDE, ids=[f"{i}-{slug(v)}" for i, v in enumerate(OUTSIDE)])
def test_run_data_reaches_the_card_as_plain_text(value):
    """A record's title, summary, column and cells (a model's answers) reach the card as plain text: rendered by
    markdown-it with linkify (more autolinks than GitHub's), they add no link, image, markup or block, the text
    shown is the value (escapes shown, not interpreted), and no invisible format or bidi control character is in
    the card at all. ``@`` is a code span of its own: GitHub's renderer finds e-mail addresses in text whatever
    its escapes, so no text of the card may hold one."""
    record = {"title": value, "summary": value, "columns": ["q", value], "rows": [[value, "plain"], ["plain", value]]}
    text = card(records=(record,))
    plain = plain_record_card()
    assert not [c for c in text if unicodedata.category(c) == "Cf"], "no invisible format or bidi character"
    page, baseline = render(text), render(plain)
    for tag in TAGS:
        assert page.count(tag) == baseline.count(tag), f"{tag}: no markup of its own"
    assert rendered_tables(text)[2] == [["q", shown(value)], [shown(value), "plain"], ["plain", shown(value)]]
    found = blocks(text)
    at = found.index(("h2", shown(value)))
    assert found[at + 1] == ("p", shown(value) if value else "not recorded"), "the summary, a paragraph of its own"
    assert found[at - 1][0] != "h2" and found[at + 2][0] == "th", "the blocks around it intact"
    tokens = tokens_of(text)
    texts = [c.content for t in tokens if t.type == "inline" for c in t.children or [] if c.type == "text"]
    assert not [t for t in texts if "@" in t], "an @ is never in text, where GitHub would find an e-mail address"
    assert split(text)[0] == FRONT_MATTER


@pytest.mark.pure
def test_the_cards_own_links_stay_links():
    """The links the card makes itself, from trusted values (the base model's and the datasets' Hub pages, the
    commit, the licence's terms), are links; no other."""
    tokens = tokens_of(card(records=(EVALUATION_RECORD,)))
    links = [c.attrs["href"] for t in tokens if t.type == "inline" for c in t.children or [] if c.type == "link_open"]
    assert links == [
        "https://huggingface.co/google/gemma-4-26b-a4b-it",
        f"https://huggingface.co/google/gemma-4-26b-a4b-it/tree/{COMMIT}",
        "https://huggingface.co/datasets/nvidia/OpenMathInstruct-2",
        f"https://huggingface.co/datasets/nvidia/OpenMathInstruct-2/tree/{DATASET_COMMIT}",
        GEMMA_TERMS,
        GEMMA_TERMS,
        GEMMA_PROHIBITED_USE,
    ]
    long = "org/" + "x" * 300
    text = card(base_repo=long, dataset_ids=(long,), base_commit=COMMIT, dataset_commit=(long, DATASET_COMMIT))
    assert "](https://huggingface.co/org/" not in text and "](https://huggingface.co/datasets/org/" not in text, (
        "an id longer than a value the card shows is no Hub id: not linked"
    )
