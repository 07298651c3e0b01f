"""The model card (``README.md``) of an exported run on the Hugging Face Hub (plain text, no Pulumi, no network).

``model_card(facts)`` is a pure function of ``CardFacts``, plain values the program gathers (the settings,
the plan, the run's summary, the images' digests): the same facts give the same text, byte for byte (no
timestamps), so an unchanged run uploads an unchanged card.

The card is YAML front matter, which the Hub validates (https://huggingface.co/docs/hub/model-cards), then
Markdown. Most values come from the stack's configuration, so neither part can be broken by what they hold:
the YAML is written by ``yaml.safe_dump`` on one line per value (a string that is not printable ASCII is
double-quoted, its line breaks escaped, so no line of it can close the front matter), and every value in the
Markdown is plain text (``_text``, or ``_code`` where a code span shows it exactly): no line break, no table-cell
``|``, no markup, link, image, autolink or HTML of its own, no invisible or bidi control character; only the links
the card makes itself, to the Hub pages of the base model and the datasets, are links.

The card is bounded (``CARD_MAX_BYTES``), whatever the facts hold: every value is cut (``MAX_VALUE_CHARS``), every
list is cut (``MAX_SETTINGS``, ``MAX_LISTED``, ``MAX_RECORDS``, ``MAX_RECORD_ROWS``, ``MAX_RECORD_COLUMNS``), and
when the whole card would still be larger, the tables' rows are cut to fit (``_fit``), each cut table saying how
many rows it left out.
"""

from __future__ import annotations

import json
import re
import string
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

import yaml

from core.config.workflow_keys import IMAGE_REGISTRIES
from core.knobs import DATASETS
from core.records import MAX_COLUMNS, MAX_ROWS
from core.tpu import Capacity

LICENSE = "gemma"
TAGS = ("tpu-rl", "grpo", "maxtext", "reinforcement-learning")
GEMMA_TERMS = "https://ai.google.dev/gemma/terms"
GEMMA_PROHIBITED_USE = "https://ai.google.dev/gemma/prohibited_use_policy"
GEMMA_NOTICE = "Gemma is provided under and subject to the Gemma Terms of Use found at ai.google.dev/gemma/terms"
"""The notice the Gemma Terms of Use (section 3.1) require with every copy of Gemma or a Model Derivative
(verbatim; also the text of a ``NOTICE`` file beside the weights)."""
NOT_RECORDED = "not recorded"
DATASET_KEYS = ("dataset_name", "eval_dataset_name")
"""The MaxText keys of ``core.knobs.DATASETS`` that name Hub datasets (the others are files and splits)."""
COMMIT = re.compile(r"[0-9a-f]{40}")
MARKDOWN_SPECIAL = frozenset(string.punctuation)
"""CommonMark's ASCII punctuation, every character of which may be backslash-escaped and is then shown as itself
(https://spec.commonmark.org/0.31.2/#backslash-escapes): escaped, each of them, wherever a value is written as
text. Not only what starts markup (``*``, ``_``, ``[``, ``<``, ``#``, ``|``, ``$``, ``~``, ``&``) but also what a
renderer would make a link of (GitHub's and markdown-it's autolinks need ``:`` of a scheme, ``.`` of ``www.`` or
a domain) or a block of at a line's start (``-``, ``+``, ``=``, ``1.``, ``>``): an escaped character splits the
text where an autolink or a block would be recognised. Except ``@``, which is shown as a code span of its own
(``AT``): GitHub's renderer (cmark-gfm) finds an e-mail address, and so ``mailto:`` and ``xmpp:`` links, in the
text after its escapes and character references are resolved, so only another kind of inline splits it."""
AT = "`@`"


@dataclass(frozen=True)
class CardFacts:
    """What the card says, as plain values."""

    repo: str
    """The Hub repository the export is uploaded to, ``org/name``."""
    branch: str
    """Its branch holding this run, ``tpu-rl-<hash>``."""
    base_repo: str
    """The base model's repository, e.g. ``google/gemma-4-26b-a4b-it``."""
    base_revision: str
    """The base model's revision as configured (a branch, tag or commit)."""
    base_commit: str | None
    """The commit that revision resolved to (40 hex digits), None when not known."""
    model_name: str
    """tpu-rl's short name of the model, e.g. ``gemma4-26b``."""
    dataset: str
    """tpu-rl's name of the dataset (a key of ``core.knobs.DATASETS``)."""
    dataset_ids: tuple[str, ...]
    """The Hub datasets it trains and evaluates on (``hub_datasets``)."""
    config_diff: Sequence[Mapping[str, Any]]
    """The settings that differ from the tutorial's, ``{"key", "value", "tutorial"}`` (``core.config.diff``)."""
    images: Mapping[str, str]
    """Image name -> reference as configured."""
    image_digests: Mapping[str, str]
    """Reference -> the image it resolved to (``...@sha256:...``); may be empty (a reference pinned by its
    digest is its own)."""
    summary: Mapping[str, Any] | None
    """``RunData.summary``: accuracyBefore, accuracyAfter, meanRewardBefore, meanRewardAfter, finalReward,
    lastStep, stepChipHours, heldChipHours, attempts (each may be None); None when the run's results are not
    known."""
    usd_per_chip_hour: float
    capacity: Capacity
    chips: int
    reward_image: str | None
    """The reward curve's file name in the repository (``reward-curve.png``), None when there is none."""
    steps: Mapping[str, str]
    """Workflow step -> its JobSet's name, in the workflow's order."""
    export_uri: str
    """Where the export is in GCS (``gs://...``); empty: not shown (a public repository's card)."""
    base_license: str | None = None
    """The base model's licence as its Hub card declares it at the revision (``license:``, e.g. ``apache-2.0``
    or ``gemma``), None when it was not read."""
    private: bool = True
    """The repository is private: a public card names no private registry, project or bucket."""
    dataset_revision: str = "main"
    """The dataset's revision as configured (``tpu-rl:training.datasetRevision``)."""
    dataset_commit: tuple[str, str] | None = None
    """(the Hub dataset whose files training staged, the commit that revision resolved to), None when not known
    (the run's ``dataset.json`` was not read, or the dataset names no files)."""
    records: Sequence[Mapping[str, Any]] = ()
    """The records of the steps before the publication whose output is one (``core.records.StepRecord.to_json``,
    checked where they were read): each a section of its own, after the evaluation."""


CARD_SETTINGS = ("tpu-rl:model.", "tpu-rl:training.", "tpu-rl:tpu.")
"""The settings a card lists when they differ from the tutorial's: what the model was trained from, how and on
what slice; not the infrastructure's (networks, bucket, cluster, keys, registries, reservation), which a
model card has no business publishing."""


def card_setting(key: str) -> bool:
    """Whether a setting belongs in the card's training configuration (``CARD_SETTINGS``)."""
    return key.startswith(CARD_SETTINGS) and key != "tpu-rl:tpu.reservation"


def hub_datasets(dataset: str) -> tuple[str, ...]:
    """The Hub datasets a dataset of ``core.knobs.DATASETS`` trains and evaluates on, once each, in key order."""
    ids = dict(DATASETS[dataset].keys)
    return tuple(dict.fromkeys(ids[key] for key in DATASET_KEYS if key in ids))


def front_matter(facts: CardFacts) -> dict[str, Any]:
    """The card's metadata, as the Hub reads it."""
    return {
        "license": _license_id(facts.base_license),
        "base_model": _bounded(facts.base_repo),
        "base_model_relation": "finetune",
        "library_name": "transformers",
        "pipeline_tag": "text-generation",
        "datasets": [_bounded(i) for i in _datasets(facts)],
        "tags": list(TAGS),
    }


def model_card(facts: CardFacts) -> str:
    """The ``README.md`` of the run's branch: front matter, then what the model is, its base model, dataset,
    configuration, evaluation, the records, compute, images, provenance and licence; at most ``CARD_MAX_BYTES``
    (``_fit``)."""
    records = list(facts.records)
    left_out: list[Sequence[str | _Rows]] = []
    if len(records) > MAX_RECORDS:
        n = len(records) - MAX_RECORDS
        left_out.append([f"and {n} more step record{'s' if n > 1 else ''}, left out of the card"])
    sections: list[Sequence[str | _Rows]] = [
        _intro(facts),
        _base_model(facts),
        _dataset(facts),
        _configuration(facts),
        _evaluation(facts),
        *(_record(record) for record in records[:MAX_RECORDS]),
        *left_out,
        _compute(facts),
        _images(facts),
        _provenance(facts),
        _licence(facts),
    ]
    lines: list[str | _Rows] = ["---", *_yaml(front_matter(facts)).splitlines(), "---"]
    for section in sections:
        lines += ["", *section]
    return _fit(lines, CARD_MAX_BYTES)


def _datasets(facts: CardFacts) -> list[str]:
    """The datasets the card names: each once, at most ``MAX_LISTED``."""
    return list(dict.fromkeys(facts.dataset_ids))[:MAX_LISTED]


# ---------------------------------------------------------------------------------------------
# The card's bound


@dataclass(frozen=True)
class _Rows:
    """A table's body: the rows (lines, every cell escaped) the card may cut to fit its bound, and what it says
    of the rows it left out."""

    rows: tuple[str, ...]
    """The rows the card would show, at most ``limit`` of the table's."""
    total: int
    """How many rows the table has (those past ``limit`` are left out whatever the room)."""
    more: str
    """The line after a cut table: ``{n}`` is the number of rows left out."""
    outside: bool = False
    """Rows of outside data (a step's record): they get what room the card's own tables leave."""


def _fit(lines: Sequence[str | _Rows], limit: int) -> str:
    """The card's text from its lines, at most ``limit`` bytes: every table whole when the whole card fits;
    else what is not a table's row first (each value is bounded, and so is how many there are), then the rows,
    the card's own tables' before those of outside data, each table a prefix of its rows and a line saying how
    many it left out. The line of a table cut to no row is no longer than its line at any other cut, so what is
    not a row plus the rows shown never exceeds ``limit``."""
    tables = {index: line for index, line in enumerate(lines) if isinstance(line, _Rows)}
    whole = _render(lines, {index: len(table.rows) for index, table in tables.items()})
    if len(whole.encode()) <= limit:
        return whole
    room = limit - len(_render(lines, dict.fromkeys(tables, 0)).encode())
    shown: dict[int, int] = {}
    for index, table in sorted(tables.items(), key=lambda item: item[1].outside):
        shown[index] = 0
        for row in table.rows:
            size = len(row.encode()) + 1  # with its line's end
            if size > room:
                break
            room -= size
            shown[index] += 1
    return _render(lines, shown)


def _render(lines: Sequence[str | _Rows], shown: Mapping[int, int]) -> str:
    """The lines as text, ``shown[i]`` rows of the table at ``i``."""
    out: list[str] = []
    for index, line in enumerate(lines):
        if isinstance(line, str):
            out.append(line)
            continue
        out += line.rows[: shown[index]]
        if line.total > shown[index]:  # after a blank line: a line right after a table is one of its rows
            out += ["", line.more.format(n=line.total - shown[index])]
    return "\n".join(out) + "\n"


def _rows(rows: Sequence[str], total: int, more: str, outside: bool = False) -> _Rows:
    """The table's rows (each caller has cut them to its cap), of ``total``, and the line saying how many more."""
    return _Rows(tuple(rows), total, more, outside)


# ---------------------------------------------------------------------------------------------
# Sections


def _intro(facts: CardFacts) -> list[str]:
    repo, branch = json.dumps(_bounded(facts.repo)), json.dumps(_bounded(facts.branch))
    return [
        f"# {_text(facts.repo)}: {_text(facts.model_name)} post-trained with GRPO",
        "",
        f"{_code(facts.base_repo)} post-trained with GRPO (Group Relative Policy Optimization), reinforcement "
        f"learning on {_code(facts.dataset)}, by tpu-rl: MaxText's RL trainer with Pathways on Cloud TPU, "
        "then exported to the Hugging Face Transformers format.",
        "",
        f"This run is the branch {_code(facts.branch)} of this repository; load it with its revision:",
        "",
        "```python",
        "from transformers import AutoModelForCausalLM, AutoTokenizer",
        "",
        f"tokenizer = AutoTokenizer.from_pretrained({repo}, revision={branch})",
        f"model = AutoModelForCausalLM.from_pretrained({repo}, revision={branch})",
        "```",
    ]


def _base_model(facts: CardFacts) -> list[str]:
    if facts.base_commit is None:
        commit = NOT_RECORDED
    elif COMMIT.fullmatch(facts.base_commit):
        commit = _hub_link(facts.base_commit, facts.base_repo, "tree", facts.base_commit)
    else:
        commit = _code(facts.base_commit)
    return [
        "## Base model",
        "",
        f"- model: {_hub_link(facts.base_repo, facts.base_repo)}",
        f"- revision: {_code(facts.base_revision)}",
        f"- commit: {commit}",
    ]


def _dataset(facts: CardFacts) -> list[str]:
    ids = _datasets(facts)
    links = ", ".join(_hub_link(i, "datasets/" + i) for i in ids) if ids else NOT_RECORDED
    more = len(dict.fromkeys(facts.dataset_ids)) - len(ids)
    commit = NOT_RECORDED
    if facts.dataset_commit is not None:
        repo, sha = facts.dataset_commit
        commit = _hub_link(sha, "datasets/" + repo, "tree", sha) if COMMIT.fullmatch(sha) else _code(sha)
    return [
        "## Dataset",
        "",
        f"- {_code(facts.dataset)}: {links}" + (f", and {more} more" if more > 0 else ""),
        f"- revision: {_code(facts.dataset_revision)}",
        f"- commit: {commit}",
    ]


def _configuration(facts: CardFacts) -> list[str | _Rows]:
    lines: list[str | _Rows] = [
        "## Training configuration",
        "",
        "The settings of this run that differ from the tpu-rl tutorial's:",
        "",
    ]
    if not facts.config_diff:
        return [*lines[:2], "none: the tutorial's settings"]
    rows = [
        _row(_code(entry["key"]), _code(_value(entry["value"])), _code(_value(entry["tutorial"])))
        for entry in facts.config_diff[:MAX_SETTINGS]
    ]
    more = "and {n} more (the run's stack configuration has them all)"
    header = [_row("setting", "this run", "tutorial"), _row("---", "---", "---")]
    return [*lines, *header, _rows(rows, len(facts.config_diff), more)]


def _evaluation(facts: CardFacts) -> list[str]:
    summary = facts.summary or {}
    lines = [
        "## Evaluation",
        "",
        f"MaxText's evaluation of the base model before training and of the trained model after it, on the "
        f"evaluation split of {_code(facts.dataset)}:",
        "",
        _row("", "before GRPO", "after GRPO"),
        _row("---", "---", "---"),
        _row("accuracy", _percent(summary.get("accuracyBefore")), _percent(summary.get("accuracyAfter"))),
        _row("mean reward", _number(summary.get("meanRewardBefore")), _number(summary.get("meanRewardAfter"))),
        "",
        f"- final training reward: {_number(summary.get('finalReward'))}",
        f"- optimizer steps: {_number(summary.get('lastStep'))}",
        f"- training attempts: {_number(summary.get('attempts'))}",
    ]
    if facts.reward_image is not None:
        lines += ["", f"![Reward per optimizer step]({urllib.parse.quote(facts.reward_image)})"]
    return lines


def _record(record: Mapping[str, Any]) -> list[str | _Rows]:
    """A step's record (``core.records``): its title, its summary and its table, every cell plain text; at most
    ``MAX_RECORD_COLUMNS`` columns and ``MAX_RECORD_ROWS`` rows, and its rows cut first when the card is too
    large (``_fit``)."""
    columns = list(record["columns"])[:MAX_RECORD_COLUMNS]
    rows = list(record["rows"])
    shown = [_row(*(_text(cell) for cell in _cells(row, len(columns)))) for row in rows[:MAX_RECORD_ROWS]]
    more = "and {n} more, left out of the card (the step's `record.json` has them all)"
    return [
        f"## {_text(record['title'])}",
        "",
        _text(record["summary"] or NOT_RECORDED),
        "",
        _row(*(_text(c) for c in columns)),
        _row(*("---" for _ in columns)),
        _rows(shown, len(rows), more, outside=True),
    ]


def _cells(row: Sequence[Any], width: int) -> list[Any]:
    """A record's row as ``width`` cells (a record's rows are as long as its header: ``core.records``)."""
    cells = list(row)[:width]
    return cells + [""] * (width - len(cells))


def _compute(facts: CardFacts) -> list[str]:
    summary = facts.summary or {}
    steps, held = summary.get("stepChipHours"), summary.get("heldChipHours")
    cost = NOT_RECORDED
    if _is_number(held):
        rate = _rate(facts.usd_per_chip_hour)
        cost = f"{_usd(held * facts.usd_per_chip_hour)} ({rate} per chip-hour, of the slice held)"
    reserved = (
        ["- a reserved slice bills every hour it exists, used or not: this counts the hours training held it"]
        if facts.capacity == Capacity.RESERVATION
        else []
    )
    return [
        "## Compute",
        "",
        f"- TPU chip-hours of the training steps (tunix's step events, every attempt): {_hours(steps)}",
        "- TPU chip-hours the slice was held by training (every attempt from its start to its exit: start-up, "
        f"compilation, evaluations and steps): {_hours(held)}",
        f"- cost: {cost}",
        *reserved,
        f"- capacity: {_text(facts.capacity)}",
        f"- chips: {_number(facts.chips)}",
    ]


def _shown_image(reference: str, private: bool) -> str:
    """An image reference as the card shows it: whole in a private card and for the public TPU image
    registries; in a public card, an image of another registry without its registry and project (the image
    name and tag or digest only)."""
    if private or any(reference.startswith(registry + "/") for registry in IMAGE_REGISTRIES):
        return reference
    return "(a private registry)/" + reference.rsplit("/", 1)[-1]


def _images(facts: CardFacts) -> list[str | _Rows]:
    if not facts.images:
        return ["## Images", "", NOT_RECORDED]
    rows = []
    for name in sorted(facts.images)[:MAX_LISTED]:
        reference = facts.images[name]
        digest = facts.image_digests.get(reference) or (reference if "@sha256:" in reference else None)
        shown_digest = _shown_image(digest, facts.private) if digest else None
        rows.append(
            _row(
                _code(name),
                _code(_shown_image(reference, facts.private)),
                _code(shown_digest) if shown_digest else "digest not recorded",
            )
        )
    header = [_row("image", "reference", "digest"), _row("---", "---", "---")]
    return ["## Images", "", *header, _rows(rows, len(facts.images), "and {n} more")]


def _provenance(facts: CardFacts) -> list[str | _Rows]:
    lines: list[str | _Rows] = ["## Provenance", ""]
    if facts.steps:
        rows = [_row(_code(step), _code(name)) for step, name in list(facts.steps.items())[:MAX_LISTED]]
        lines += [
            _row("step", "JobSet"),
            _row("---", "---"),
            _rows(rows, len(facts.steps), "and {n} more"),
        ]
    else:
        lines.append(f"steps: {NOT_RECORDED}")
    if not facts.export_uri:  # a public card does not name the bucket (its default name holds the project id)
        return lines
    return [*lines, "", f"- export: {_code(facts.export_uri)}"]


LICENSE_ID = re.compile(r"[a-z0-9][a-z0-9.-]{0,63}")
"""A Hub licence identifier (``apache-2.0``, ``gemma``, ``other``): what the front matter may say."""
APACHE = "apache-2.0"
APACHE_TEXT = "https://www.apache.org/licenses/LICENSE-2.0"


def _license_id(license: str | None) -> str:
    """The front matter's ``license``: the base model's (a derivative carries its licence), ``other`` when it is
    not known or not an identifier."""
    return license if license and LICENSE_ID.fullmatch(license) else "other"


def _licence(facts: CardFacts) -> list[str]:
    """What the base model's licence says of a derivative, by the licence the base model's card declares: the
    Gemma Terms of Use (Gemma 1-3) bind derivatives and ask for their notice; Apache 2.0 (Gemma 4) asks that the
    licence and a statement of the changes go with it; anything else points at the base model's own terms."""
    base, page = _code(facts.base_repo), _hub_link(facts.base_repo, facts.base_repo)
    license = _license_id(facts.base_license)
    if license == LICENSE:
        body = [
            f"The base model, {base}, is Gemma, distributed under the "
            f"[Gemma Terms of Use]({GEMMA_TERMS}). This model is a Model Derivative of Gemma (the base model's "
            "weights, modified by GRPO training): its use and distribution are subject to the "
            f"[Gemma Terms of Use]({GEMMA_TERMS}) and to the [Gemma Prohibited Use Policy]({GEMMA_PROHIBITED_USE}); "
            "whoever passes it on must pass on those terms, and this notice, with it.",
            "",
            "Notice:",
            "",
            GEMMA_NOTICE,
        ]
    elif license == APACHE:
        body = [
            f"The base model, {base}, is released under the [Apache License 2.0]({APACHE_TEXT}), as its card "
            f"({page}) declares at the revision trained. This model is a derivative work of it: the base model's "
            "weights, modified by GRPO training (the change this card describes). It is distributed under the same "
            "licence: whoever passes it on must give recipients a copy of the licence, keep this statement of the "
            "changes, and keep the base model's notices. The base model's own card and terms apply too.",
        ]
    else:
        shown = "could not be read" if facts.base_license is None else f"is declared as {_code(facts.base_license)}"
        body = [
            f"The base model's licence {shown}; its terms, on {page}, apply to this model, a derivative of it (the "
            "base model's weights, modified by GRPO training). Read them before sharing this model.",
        ]
    return ["## License", "", *body]


# ---------------------------------------------------------------------------------------------
# Safe YAML and Markdown


class _Dumper(yaml.SafeDumper):
    """``yaml.safe_dump`` writing a string that is not printable ASCII double-quoted, on one line."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = None if value.isascii() and value.isprintable() else '"'
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _represent_str)


def _yaml(data: dict[str, Any]) -> str:
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=False, width=1 << 30)


MAX_VALUE_CHARS = 200
"""The longest value the card shows, in characters as shown (a longer one is cut, ``…`` marking the cut)."""
CARD_MAX_BYTES = 256 * 1024
"""The card's bound (``model_card`` never exceeds it, ``_fit``): far below a ConfigMap's 1 MiB
(``card_config_map`` holds it and the reward curve)."""
ELLIPSIS = "…"
MAX_SETTINGS = 120
"""The most settings the configuration table lists (a stack has fewer keys than this)."""
MAX_LISTED = 20
"""The most datasets, images and steps the card lists (a run has a few)."""
MAX_RECORDS = 8
"""The most step records the card shows (one per step whose output is a record)."""
MAX_RECORD_COLUMNS = MAX_COLUMNS
MAX_RECORD_ROWS = MAX_ROWS
"""The most columns and rows of a record the card shows: what a record may hold (``core.records``)."""


def _bounded(value: Any) -> str:
    text = str(value)
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 1] + ELLIPSIS


def _text(value: Any) -> str:
    """A value as plain Markdown text, shown as itself whatever it holds: on one line, every ASCII punctuation
    character backslash-escaped (``MARKDOWN_SPECIAL``: no markup, link, image, autolink, HTML, entity or block of
    its own; ``@`` as a code span, ``AT``), at most ``MAX_VALUE_CHARS`` shown. A string that would not show as
    itself (a line break, an invisible format or bidi control character (Unicode's Cf: U+200B-U+200F,
    U+202A-U+202E, U+2066-U+2069, U+061C, U+FEFF...) or any other unprintable one, spaces at an edge, which a
    table cell trims, or nothing at all) is shown as its JSON string in ASCII: quotes and escapes (``\\u202e``)
    shown, not interpreted. The one helper every value the card shows goes through (``_code`` too, unless a code
    span shows the value exactly)."""
    text = str(value)[: MAX_VALUE_CHARS + 1]  # what can be shown: its last character shows that it is cut
    if not text.isprintable() or text.strip() != text or not text:
        text = json.dumps(text)  # ensure_ascii: every character that is not printable ASCII as its escape
    return "".join(AT if c == "@" else "\\" + c if c in MARKDOWN_SPECIAL else c for c in _bounded(text))


def _code(value: Any) -> str:
    """A value as inline code when that renders it exactly (printable, no backtick, backslash or ``|``, no
    edge spaces, not empty: a code span has no markup, link or HTML), else as plain text (``_text``)."""
    text = str(value)[: MAX_VALUE_CHARS + 1]
    if text and text.isprintable() and text.strip() == text and not set(text) & set("`\\|"):
        return f"`{_bounded(text)}`"
    return _text(text)


def _row(*cells: str) -> str:
    """A table row of cells already escaped."""
    return "| " + " | ".join(cells) + " |"


def _hub_link(text: str, *parts: str) -> str:
    """A link to ``https://huggingface.co/<parts>``, each part percent-encoded (its ``/`` kept), shown as ``text``
    (plain text): the card's own links, to the pages of the base model, its commit and the datasets. A path longer
    than a value the card shows is no Hub id: shown as plain text, not linked."""
    if any(len(part) > MAX_VALUE_CHARS for part in parts):
        return _code(text)
    url = "https://huggingface.co/" + "/".join(urllib.parse.quote(p, safe="/") for p in parts)
    return f"[{_text(text)}]({url})"


def _value(value: Any) -> str:
    """A configuration value as text (a list or mapping as JSON)."""
    if value is None:
        return "not set"
    if value == "":
        return '""'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, sort_keys=True)
    return str(value)


def _is_number(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _number(value: Any) -> str:
    if value is None:
        return NOT_RECORDED
    if _is_number(value):
        return f"{value:.4g}" if isinstance(value, float) else str(value)
    return _text(value)


def _percent(value: Any) -> str:
    return f"{value:.4g}%" if _is_number(value) else _number(value)


def _hours(value: Any) -> str:
    return f"{value:,.2f}" if _is_number(value) else _number(value)


def _usd(value: float) -> str:
    return f"${value:,.2f}"


def _rate(value: float) -> str:
    """A price per chip-hour: cents, and up to four decimals where it has them ($2.70, $1.375)."""
    cents, exact = f"{value:,.2f}", f"{value:,.4f}".rstrip("0")
    return f"${exact if len(exact) > len(cents) else cents}"
