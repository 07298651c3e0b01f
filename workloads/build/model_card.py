"""The model card (``README.md``) of an exported run on the Hugging Face Hub (plain text, no Pulumi, no network).

``model_card(facts)`` is a pure function of ``CardFacts``, plain values the program gathers (the settings,
the plan, the run's summary, the images' digests): the same facts give the same text, byte for byte (no
timestamps), so an unchanged run uploads an unchanged card.

The card is YAML front matter, which the Hub validates (https://huggingface.co/docs/hub/model-cards), then
Markdown. Most values come from the stack's configuration, so neither part can be broken by what they hold:
the YAML is written by ``yaml.safe_dump`` on one line per value (a string that is not printable ASCII is
double-quoted, its line breaks escaped, so no line of it can close the front matter), and every value in the
Markdown is escaped (``_text``, ``_code``): no line break, no table-cell ``|``, no markup or HTML of its own.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

import yaml

from core.config.schema import IMAGE_REGISTRIES
from core.knobs import DATASETS
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
MARKDOWN_SPECIAL = frozenset("\\`*_{}[]<>()#+!|~&$")
"""ASCII punctuation that can start markup in (GitHub-flavoured) Markdown, a table cell's ``|`` or a Hub
math span (``$``): escaped with a backslash wherever a value is written as text."""


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
        "base_model": facts.base_repo,
        "base_model_relation": "finetune",
        "library_name": "transformers",
        "pipeline_tag": "text-generation",
        "datasets": list(dict.fromkeys(facts.dataset_ids)),
        "tags": list(TAGS),
    }


def model_card(facts: CardFacts) -> str:
    """The ``README.md`` of the run's branch: front matter, then what the model is, its base model, dataset,
    configuration, evaluation, compute, images, provenance and licence."""
    sections = [
        _intro(facts),
        _base_model(facts),
        _dataset(facts),
        _configuration(facts),
        _evaluation(facts),
        *(_record(record) for record in facts.records),
        _compute(facts),
        _images(facts),
        _provenance(facts),
        _licence(facts),
    ]
    return f"---\n{_yaml(front_matter(facts))}---\n\n" + "\n\n".join(sections) + "\n"


# ---------------------------------------------------------------------------------------------
# Sections


def _intro(facts: CardFacts) -> str:
    repo, branch = json.dumps(facts.repo), json.dumps(facts.branch)
    return "\n".join(
        [
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
    )


def _base_model(facts: CardFacts) -> str:
    if facts.base_commit is None:
        commit = NOT_RECORDED
    elif COMMIT.fullmatch(facts.base_commit):
        commit = _link(facts.base_commit, _hub_url(facts.base_repo, "tree", facts.base_commit))
    else:
        commit = _code(facts.base_commit)
    return "\n".join(
        [
            "## Base model",
            "",
            f"- model: {_link(facts.base_repo, _hub_url(facts.base_repo))}",
            f"- revision: {_code(facts.base_revision)}",
            f"- commit: {commit}",
        ]
    )


def _dataset(facts: CardFacts) -> str:
    ids = list(dict.fromkeys(facts.dataset_ids))
    links = ", ".join(_link(i, _hub_url("datasets/" + i)) for i in ids) if ids else NOT_RECORDED
    return "\n".join(["## Dataset", "", f"- {_code(facts.dataset)}: {links}"])


def _configuration(facts: CardFacts) -> str:
    lines = ["## Training configuration", "", "The settings of this run that differ from the tpu-rl tutorial's:", ""]
    if not facts.config_diff:
        return "\n".join([*lines[:2], "none: the tutorial's settings"])
    lines += [_row("setting", "this run", "tutorial"), _row("---", "---", "---")]
    for entry in facts.config_diff[:MAX_SETTINGS]:
        lines.append(_row(_code(entry["key"]), _code(_value(entry["value"])), _code(_value(entry["tutorial"]))))
    if len(facts.config_diff) > MAX_SETTINGS:
        lines += ["", f"and {len(facts.config_diff) - MAX_SETTINGS} more (the run's stack configuration has them all)"]
    return "\n".join(lines)


def _evaluation(facts: CardFacts) -> str:
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
    return "\n".join(lines)


def _record(record: Mapping[str, Any]) -> str:
    """A step's record (``core.records``): its title, its summary and its table, every cell escaped."""
    columns = list(record["columns"])
    lines = [f"## {_text(record['title'])}", "", _text(record["summary"] or NOT_RECORDED), ""]
    lines += [_row(*(_text(c) for c in columns)), _row(*("---" for _ in columns))]
    lines += [_row(*(_text(cell) for cell in row)) for row in record["rows"]]
    return "\n".join(lines)


def _compute(facts: CardFacts) -> str:
    summary = facts.summary or {}
    steps, held = summary.get("stepChipHours"), summary.get("heldChipHours")
    cost = NOT_RECORDED
    if _is_number(held):
        rate = _rate(facts.usd_per_chip_hour)
        cost = f"{_usd(held * facts.usd_per_chip_hour)} ({rate} per chip-hour, of the slice held)"
    reserved = (
        ["- a reserved slice bills every hour it exists, used or not: this counts the hours training held it"]
        if facts.capacity == "reservation"
        else []
    )
    return "\n".join(
        [
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
    )


def _shown_image(reference: str, private: bool) -> str:
    """An image reference as the card shows it: whole in a private card and for the public TPU image
    registries; in a public card, an image of another registry without its registry and project (the image
    name and tag or digest only)."""
    if private or any(reference.startswith(registry + "/") for registry in IMAGE_REGISTRIES):
        return reference
    return "(a private registry)/" + reference.rsplit("/", 1)[-1]


def _images(facts: CardFacts) -> str:
    if not facts.images:
        return f"## Images\n\n{NOT_RECORDED}"
    lines = ["## Images", "", _row("image", "reference", "digest"), _row("---", "---", "---")]
    for name in sorted(facts.images):
        reference = facts.images[name]
        digest = facts.image_digests.get(reference) or (reference if "@sha256:" in reference else None)
        shown_digest = _shown_image(digest, facts.private) if digest else None
        lines.append(
            _row(
                _code(name),
                _code(_shown_image(reference, facts.private)),
                _code(shown_digest) if shown_digest else "digest not recorded",
            )
        )
    return "\n".join(lines)


def _provenance(facts: CardFacts) -> str:
    lines = ["## Provenance", ""]
    if facts.steps:
        lines += [_row("step", "JobSet"), _row("---", "---")]
        lines += [_row(_code(step), _code(name)) for step, name in facts.steps.items()]
    else:
        lines.append(f"steps: {NOT_RECORDED}")
    if not facts.export_uri:  # a public card does not name the bucket (its default name holds the project id)
        return "\n".join(lines)
    return "\n".join([*lines, "", f"- export: {_code(facts.export_uri)}"])


LICENSE_ID = re.compile(r"[a-z0-9][a-z0-9.-]{0,63}")
"""A Hub licence identifier (``apache-2.0``, ``gemma``, ``other``): what the front matter may say."""
APACHE = "apache-2.0"
APACHE_TEXT = "https://www.apache.org/licenses/LICENSE-2.0"


def _license_id(license: str | None) -> str:
    """The front matter's ``license``: the base model's (a derivative carries its licence), ``other`` when it is
    not known or not an identifier."""
    return license if license and LICENSE_ID.fullmatch(license) else "other"


def _licence(facts: CardFacts) -> str:
    """What the base model's licence says of a derivative, by the licence the base model's card declares: the
    Gemma Terms of Use (Gemma 1-3) bind derivatives and ask for their notice; Apache 2.0 (Gemma 4) asks that the
    licence and a statement of the changes go with it; anything else points at the base model's own terms."""
    base, page = _code(facts.base_repo), _link(_text(facts.base_repo), _hub_url(facts.base_repo))
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
    return "\n".join(["## License", "", *body])


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
"""The longest value the card shows (a longer one is cut, ``…`` marking the cut): every part of the card is
bounded, so the card (``CARD_MAX_BYTES``) always fits its ConfigMap."""
CARD_MAX_BYTES = 256 * 1024
"""The card's bound: far below a ConfigMap's 1 MiB (``card_config_map`` holds it and the reward curve)."""
ELLIPSIS = "…"
MAX_SETTINGS = 120
"""The most settings the configuration table lists (a stack has fewer keys than this)."""


def _bounded(value: Any) -> str:
    text = str(value)
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 1] + ELLIPSIS


def _text(value: Any) -> str:
    """A value as Markdown text that renders as itself: on one line, markup characters escaped, at most
    ``MAX_VALUE_CHARS`` of it. A string that would not show as itself (a line break or another unprintable
    character, spaces at an edge, which a table cell trims, or nothing at all) is shown as its JSON string,
    quotes and escapes included."""
    text = _bounded(value)
    if not text.isprintable() or text.strip() != text or not text:
        text = json.dumps(text)
    return "".join("\\" + c if c in MARKDOWN_SPECIAL else c for c in text)


def _code(value: Any) -> str:
    """A value as inline code when that renders it exactly (printable, no backtick, backslash or ``|``, no
    edge spaces, not empty), else as escaped text."""
    text = _bounded(value)
    if text and text.isprintable() and text.strip() == text and not set(text) & set("`\\|"):
        return f"`{text}`"
    return _text(text)


def _row(*cells: str) -> str:
    """A table row of cells already escaped."""
    return "| " + " | ".join(cells) + " |"


def _link(text: str, url: str) -> str:
    return f"[{_text(text)}]({url})"


def _hub_url(*parts: str) -> str:
    """``https://huggingface.co/<parts>``, each part percent-encoded (its ``/`` kept)."""
    return "https://huggingface.co/" + "/".join(urllib.parse.quote(p, safe="/") for p in parts)


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
