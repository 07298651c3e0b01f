"""A step's program that grades the export on held-out questions. It runs in the MaxText post-training image as
``python3 -c`` of this file's text with ``core/hf_model.py`` inlined in place of its import
(``workloads.specs.commands._with_hf_model``, as the publish step runs ``publish_hub.py``). The exported model
answers each question as training prompted it, and the step records how many answers were right. It stays one file
past the project's 600 lines for a module (issue 42) because it is one program file of the evaluation's ConfigMap,
run by the image's python with no package around it: a part split off would have nothing to be imported from.

    python3 evaluate_export.py EXPORT_URI WORK_DIR RECORD_URI SPEC_JSON

1. ``SPEC_JSON`` is checked before anything is read: one JSON object with exactly ``system``, ``answerStart``,
   ``answerEnd`` (non-empty strings, the two markers different), ``maxNewTokens`` (1 to 4096) and ``questions``
   (1 to 20 objects with exactly a non-empty ``question`` and ``answer``). Nothing else is accepted (``parse_spec``).
2. The export's objects are listed, and every name is checked before anything is downloaded. Each must be a file
   of a model folder: one plain name whose path stays inside the folder (``core.hf_model.export_file_problem``).
   Then every object is downloaded into ``WORK_DIR/model``, which is emptied first (a restarted pod keeps its
   scratch disk). Each object holds at most its listed size, and at most ``MAX_FILES`` objects are taken.
3. The tokenizer (``AutoTokenizer``) and the model (``AutoModelForCausalLM``, ``dtype=torch.bfloat16``) are loaded
   on CPU from that folder only (``local_files_only``, ``HF_HUB_OFFLINE``), in eval mode, with no gradients.
4. Each question is prompted as MaxText's RL data pipeline prompts it (``process_data`` in its ``utils_rl.py``):
   the data template ``{system_prompt}\\n\\n{question}`` as one user turn of the tokenizer's own chat template,
   ``add_generation_prompt=True``. It is decoded greedily (``do_sample=False``, ``max_new_tokens``) and only the
   new tokens are decoded, ``skip_special_tokens=True``.
5. Each answer is graded as MaxText 0.2.5's RL evaluation grades it (``evaluate_rl.py`` ``score_responses`` with
   rl.yml's defaults: one greedy response, ``eval_mode: pass``), so the count compares with the ``Pre/Post RL
   Training: accuracy`` MaxText logs. The grader is ported from its ``utils_rl.py`` and ``math_verify_pool.py`` and
   checked against those files, run unmodified (tests/test_evaluate_grader.py):

   - extraction (``extract_answer``): in the last ``answerStart ... answerEnd`` (or the whole output without one),
     the last ``\\boxed{...}``, else a loose ``\\boxed`` number, else that last tagged text, stripped; nothing
     found grades MaxText's ``-1000000``;
   - normalization (``preprocess_math_string``, of the answer and the expected answer alike): after the last
     ``=``, units, ``$``, ``\\text{}`` and words such as ``dollars`` dropped, ``2.0`` as ``2``, ``70,000`` as
     ``70000``, ``7 3/4`` as ``7+3/4``, LaTeX escapes fixed;
   - equivalence (``verify_math``): both boxed and parsed by math-verify (its ``Expr`` and ``Latex`` extraction),
     then equal under sympy or math-verify's ``verify``. math-verify and sympy come from the image, whose MaxText
     needs them (its post-training requirements: ``math-verify>=0.9.0``, ``sympy>=1.14.0``); an image without
     them is refused before anything is read (``load_grader``). One difference: a parse or a comparison gets
     math-verify's own 5 s bound (``GRADE_SECONDS``) where MaxText waits as long as sympy takes.

   One line per question goes to stdout (``tpu-rl evaluate: question 2/5: correct``), and the model's output is
   never printed.
6. ``RECORD_URI`` gets the step record (``build_record``): ``{"title", "summary", "columns", "rows"}``. It has one
   row per question (question, expected, the extracted answer or nothing, ``yes``/``no``), and its summary names
   the grader: ``3 of 5 correct (MaxText 0.2.5 RL evaluation matching, math-verify 0.9.0)``. Every cell is one
   printable line, and the question is clipped to 300 characters, the expected answer and the answer to 100.

Every GCS request gets the library's own ``timeout`` (10 s to connect, 60 s for one read) and a ``retry`` whose
deadline is ``TPU_RL_EVALUATE_GCS_SECONDS`` (default 120 s, at most 600). The deadline counts from the request's
start, so unreachable GCS fails the step within about that long, and a download that breaks after it is not
retried (exit 1: the step runs again). Python warnings and a library's log records (math-verify's, google-auth's)
go to stdout as one line each, and transformers' own logging and progress bars are off, so stderr holds only the
program's own line.

Exit 0 when recorded. Exit 3 for a refusal, which the same input repeats: a bad argument or spec, an image without
math-verify, an empty export, or an object that is not a model folder's file. Exit 1 for anything else (GCS
failing, the model not loading, generation failing). Either way stderr gets one line, ``tpu-rl evaluate: <what
failed and the fix>``, and no traceback. A run can be repeated safely: it downloads again and overwrites the record.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import sys
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

# tpu-rl: core/hf_model.py is inlined here (workloads/specs/commands.py)
from core.hf_model import ReplyTooLargeError, export_file_problem

# tpu-rl: end of core/hf_model.py

REFUSED = 3
FAILED = 1
PREFIX = "tpu-rl evaluate: "
USAGE = "usage: evaluate_export.py EXPORT_URI WORK_DIR RECORD_URI SPEC_JSON"

SPEC_KEYS = frozenset({"system", "answerStart", "answerEnd", "maxNewTokens", "questions"})
QUESTION_KEYS = frozenset({"question", "answer"})
MAX_QUESTIONS = 20
MAX_NEW_TOKENS = 4096
MAX_SPEC_CHARS = 200_000
"""The longest ``SPEC_JSON`` read (Linux caps one argument at 128 KiB anyway)."""
MAX_TEXT = 20_000
"""The longest system prompt or question, in characters."""
MAX_MARKER = 100
MAX_EXPECTED = 1_000

MAX_FILES = 1_000
"""The most objects an export may hold (a Gemma 4 folder holds a few dozen)."""
GCS_SECONDS_ENV = "TPU_RL_EVALUATE_GCS_SECONDS"
GCS_SECONDS = 120.0
"""The default retry deadline of one GCS request."""
MAX_GCS_SECONDS = 600.0
GCS_TIMEOUT = (10.0, 60.0)
"""One connect and one socket read, in seconds (google-cloud-storage's ``timeout``)."""

TITLE = "Held-out questions"
COLUMNS = ("question", "expected", "answer", "correct")
QUESTION_CELL = 300
ANSWER_CELL = 100
GRADER_CELL = 120
"""The longest grader name in the summary (the record's summary holds at most 200 characters)."""
CLIP = "…"
HIDDEN = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]?|\x1b[]PX^_][^\n\x07\x1b\x9c]*(?:\x1b\\|\x9c|\x07)?|\x1b[ -/]*[0-~]"
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]"
    "|[\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u115f\u1160\u17b4\u17b5\u180b-\u180f"
    "\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164\ufeff\uffa0\ufff9-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e007f]"
    "|[\ufe00-\ufe0d\U000e0100-\U000e01ef]"
    "|(?<![\u00a9\u00ae\u203c\u2049\u2100-\u2bff\u3030\u303d\u3297\u3299\U0001f000-\U0001faff])[\ufe0e\ufe0f]"
    "|[\ufe0e\ufe0f](?=[\ufe00-\ufe0f\U000e0100-\U000e01ef])"
)
"""What a terminal acts on or does not draw (escapes, controls, invisible characters), removed from text from elsewhere
before it is printed: core/terminal.py's ``HIDDEN``, copied (no core here; tests/test_redact_terminal.py compares)."""


class RefusedError(Exception):
    """This input cannot be evaluated, and running it again fails the same way (exit 3)."""


class FailedError(Exception):
    """GCS, the model or generation failed (exit 1)."""


@dataclass(frozen=True)
class Question:
    question: str
    answer: str


@dataclass(frozen=True)
class Spec:
    system: str
    answer_start: str
    answer_end: str
    max_new_tokens: int
    questions: tuple[Question, ...]


@dataclass(frozen=True)
class Graded:
    question: str
    expected: str
    answer: str
    correct: bool


# ---------------------------------------------------------------------------------------------
# The spec, the answers and the record: pure


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    repeated = sorted({key for key in keys if keys.count(key) > 1})
    if repeated:
        raise RefusedError(f"SPEC_JSON names {repeated[0]!r} twice")
    return dict(pairs)


def _text(value: object, where: str, limit: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise RefusedError(f"SPEC_JSON {where} must be a non-empty string")
    if len(value) > limit:
        raise RefusedError(f"SPEC_JSON {where} is {len(value)} characters, more than {limit}")
    return value


def _keys(value: dict[str, Any], expected: frozenset[str], where: str) -> None:
    unknown, missing = sorted(set(value) - expected), sorted(expected - set(value))
    if unknown:
        takes = ", ".join(sorted(expected))
        raise RefusedError(f"SPEC_JSON {where} has the unknown key {unknown[0]!r} (it takes {takes})")
    if missing:
        raise RefusedError(f"SPEC_JSON {where} lacks {missing[0]!r}")


def parse_spec(raw: str) -> Spec:
    """The spec of ``SPEC_JSON``; ``RefusedError`` naming the field for anything else."""
    if len(raw) > MAX_SPEC_CHARS:
        raise RefusedError(f"SPEC_JSON is {len(raw)} characters, more than {MAX_SPEC_CHARS}")
    try:
        data = json.loads(raw, object_pairs_hook=_no_duplicates)
    except (ValueError, RecursionError):
        raise RefusedError("SPEC_JSON is not JSON") from None
    if not isinstance(data, dict):
        raise RefusedError("SPEC_JSON is not a JSON object")
    _keys(data, SPEC_KEYS, "(the object)")
    tokens = data["maxNewTokens"]
    if type(tokens) is not int or not 1 <= tokens <= MAX_NEW_TOKENS:
        raise RefusedError(f"SPEC_JSON maxNewTokens must be a whole number from 1 to {MAX_NEW_TOKENS}")
    start = _text(data["answerStart"], "answerStart", MAX_MARKER)
    end = _text(data["answerEnd"], "answerEnd", MAX_MARKER)
    if start == end:
        raise RefusedError("SPEC_JSON answerStart and answerEnd are the same marker: no answer could be found")
    questions = data["questions"]
    if not isinstance(questions, list) or not 1 <= len(questions) <= MAX_QUESTIONS:
        raise RefusedError(f"SPEC_JSON questions must be a list of 1 to {MAX_QUESTIONS} questions")
    parsed = []
    for number, item in enumerate(questions):
        where = f"questions[{number}]"
        if not isinstance(item, dict):
            raise RefusedError(f"SPEC_JSON {where} is not an object")
        _keys(item, QUESTION_KEYS, where)
        question = _text(item["question"], f"{where}.question", MAX_TEXT)
        parsed.append(Question(question, _text(item["answer"], f"{where}.answer", MAX_EXPECTED)))
    return Spec(_text(data["system"], "system", MAX_TEXT), start, end, tokens, tuple(parsed))


def prompt_text(spec: Spec, question: str) -> str:
    """The user turn's text: MaxText's data template ``{system_prompt}\\n\\n{question}``."""
    return f"{spec.system}\n\n{question}"


def cell(text: str, limit: int) -> str:
    """``text`` as one printable line of at most ``limit`` characters (``one_line``: what a terminal would act on or
    hide removed, runs of whitespace one space, any other unprintable character ``?``; a longer text ends in ``…``)."""
    line = one_line(text, len(text))
    return line if len(line) <= limit else line[: limit - len(CLIP)] + CLIP


def build_record(graded: list[Graded], grader: str) -> dict[str, Any]:
    """The step record: its title, ``N of M correct (grader)``, the columns and one row per question."""
    rows = [
        [cell(g.question, QUESTION_CELL), cell(g.expected, ANSWER_CELL), cell(g.answer, ANSWER_CELL)]
        + ["yes" if g.correct else "no"]
        for g in graded
    ]
    correct = sum(g.correct for g in graded)
    return {
        "title": TITLE,
        "summary": f"{correct} of {len(graded)} correct ({cell(grader, GRADER_CELL)})",
        "columns": list(COLUMNS),
        "rows": rows,
    }


def gcs_seconds(environ: Mapping[str, str]) -> float:
    """The retry deadline of one GCS request (``TPU_RL_EVALUATE_GCS_SECONDS``)."""
    raw = environ.get(GCS_SECONDS_ENV, "")
    if not raw:
        return GCS_SECONDS
    try:
        seconds = float(raw)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds <= MAX_GCS_SECONDS:  # NaN fails this too
        raise RefusedError(f"{GCS_SECONDS_ENV} is {raw[:40]!r}: give seconds above 0, at most {MAX_GCS_SECONDS:g}")
    return seconds


def split_uri(uri: str, what: str, folder: bool) -> tuple[str, str]:
    """(bucket, prefix or name) of a ``gs://`` URI; a folder ends in ``/``, an object does not."""
    bucket, _, path = uri.removeprefix("gs://").partition("/")
    if not uri.startswith("gs://") or not bucket or not path or path.endswith("/") != folder:
        shape = "gs://BUCKET/.../" if folder else "gs://BUCKET/.../record.json"
        raise RefusedError(f"{what} {uri[:200]!r} is not {shape}")
    return bucket, path


def one_line(text: str, limit: int = 400) -> str:
    """``text`` as one log line a terminal shows as written: what it would act on or hide removed (``HIDDEN``), any
    other unprintable character shown as ``?``."""
    return "".join(c if c.isprintable() else "?" for c in " ".join(HIDDEN.sub("", text).split()))[:limit]


# ---------------------------------------------------------------------------------------------
# Grading: MaxText 0.2.5's RL evaluation (``evaluate_rl.py`` ``score_responses`` with its defaults: one greedy
# response, ``eval_mode: pass``), ported from its ``utils_rl.py`` and ``math_verify_pool.py`` (Copyright Google
# LLC, Apache License 2.0) and checked against those files, run unmodified, in tests/test_evaluate_grader.py.

GRADER = "MaxText 0.2.5 RL evaluation matching"
"""What grades the answers, as the record's summary names it (with math-verify's version)."""
FALLBACK_ANSWER = "-1000000"
"""What MaxText's ``extract_answer`` returns when a response holds no answer: graded like any other."""
GRADE_SECONDS = 5
"""math-verify's own bound on one parse and one comparison (its defaults). MaxText's evaluation passes ``None``
and waits as long as sympy takes; here a comparison still running after it counts as wrong."""

SUBSTITUTIONS = [
    ("\\\\", "\\"),
    ("\\tfrac", "\\frac"),
    ("\\dfrac", "\\frac"),
    ("an ", ""),
    ("a ", ""),
    (".$", "$"),
    ("\\$", ""),
    (r"\ ", ""),
    (" or ", ","),
    (" and ", ","),
    ("million", "*10^6"),
    ("billion", "*10^9"),
    ("trillion", "*10^12"),
    (" ", ""),
    ("mbox", "text"),
    (",\\text{and}", ","),
    ("\\text{and}", ","),
    ("\\text{m}", "\\text{}"),
]
UNITS = [
    "yard",
    "foot",
    "feet",
    "mile",
    "day",
    "week",
    "month",
    "year",
    "hour",
    "minute",
    "second",
    "centimeter",
    "meter",
    "cm",
    "mm",
    "km",
    "inch",
    "degree",
    "pound",
    "cent",
    "mph",
]
REMOVED_EXPRESSIONS = [
    "\\left",
    "\\right",
    "\\!",
    "square",
    "ways",
    "integers",
    "dollars",
    "units",
    "\\ldots",
    "sue",
    "points",
    "digits",
    "gm",
    "meals",
    "edges",
    "students",
    "childrentickets",
    "multiples",
    "\\text{s}",
    "\\text{.}",
    "\\text{\ns}",
    "\\text{}^2",
    "\\text{}^3",
    "\\text{\n}",
    "\\text{}",
    r"\mathrm{th}",
    r"^\circ",
    r"^{\circ}",
    r"\;",
    r",\!",
    "{,}",
    '"',
    "\\dots",
]
ESCAPE_FIXES = [
    ("\f", "rac", r"\frac"),
    ("\n", "ewline", r"\newline"),
    ("\n", "e", r"\ne"),
    ("\t", "heta", r"\theta"),
    ("\t", "an", r"\tan"),
    ("\t", "o", r"\to"),
    ("\t", "imes", r"\times"),
    ("\t", "ext", r"\text"),
    ("\t", "extbf", r"\textbf"),
    ("\t", "extit", r"\textit"),
    ("\r", "ightarrow", r"\rightarrow"),
    ("\r", "ightarrow", r"\Rightarrow"),
    ("\b", "eta", r"\beta"),
    ("\b", "ar", r"\bar"),
    ("\b", "inom", r"\binom"),
    ("\b", "oxed", r"\boxed"),
    ("\a", "lpha", r"\alpha"),
    ("\a", "pprox", r"\approx"),
    ("\v", "ec", r"\vec"),
]
LATEX_COMMANDS = [
    "frac",
    "sqrt",
    "pi",
    "theta",
    "alpha",
    "beta",
    "gamma",
    "delta",
    "sum",
    "int",
    "infty",
    "cdot",
    "times",
    "div",
    "pm",
    "mp",
    "leq",
    "geq",
    "neq",
    "approx",
    "equiv",
    "sin",
    "cos",
    "tan",
    "log",
    "ln",
    "exp",
    "lim",
    "to",
    "rightarrow",
    "leftarrow",
    "Rightarrow",
    "Leftarrow",
    "overline",
    "underline",
    "hat",
    "bar",
    "vec",
    "dot",
    "ddot",
    "mathbb",
    "mathbf",
    "mathrm",
    "text",
    "textbf",
    "textit",
    "boxed",
    "left",
    "right",
    "choose",
    "binom",
]


def extract_answer(output: str, start: str, end: str) -> str | None:
    """The answer in ``output`` as MaxText's ``extract_answer`` finds it; None where it finds none (and grades
    ``FALLBACK_ANSWER``). In the text of the last ``start ... end`` (or all of ``output`` without one): the last
    brace-balanced ``\\boxed{...}``, else the first loose ``\\boxed`` number; else the last ``start ... end``'s
    text, stripped."""
    tagged = re.compile(rf"{re.escape(start)}(.+?){re.escape(end)}", flags=re.MULTILINE | re.DOTALL)
    found = tagged.findall(output)
    content = found[-1] if found else output
    boxes: list[str] = []
    opened: list[int] = []
    for at, char in enumerate(content):
        if char == "{":
            opened.append(at)
        elif char == "}" and opened:
            brace = opened.pop()
            if content[:brace].endswith(r"\boxed"):
                boxes.append(content[brace + 1 : at].strip())
    if boxes:
        return boxes[-1]
    loose = re.search(r"\\boxed\s*\{?\s*([a-zA-Z0-9\.,\-]+)\s*\}?", content)
    if loose:
        return loose.group(1).strip()
    return str(found[-1]).strip() if found else None


def boxed(text: str) -> str:
    return "\\boxed{" + text + "}" if not text.startswith("\\boxed{") else text


def _mixed_fraction(match: re.Match[str]) -> str:
    whole = match.group(1) or match.group(2)
    return f"${whole}{match.group(3)}$" if whole else f"${match.group(3)}$"


def normalize_final_answer(text: str) -> str:
    """MaxText's ``normalize_final_answer``: after the last ``=``; ``7 3/4`` as ``7+3/4``; its substitutions, units
    and removed words; LaTeX wrappers (``\\text``, ``\\textbf``, ``\\overline``, ``\\boxed``) unwrapped; ``$``
    dropped; a leading ``.`` given its ``0``; one pair of outer braces dropped; a whole float as an integer;
    commas dropped from digits."""
    text = text.split("=")[-1]
    text = re.sub(r"([0-9]) +([0-9])", r"\1+\2", text)
    for before, after in SUBSTITUTIONS:
        text = text.replace(before, after)
    for unit in UNITS:
        text = re.sub(rf"{unit}(es)?(s)? *(\^[0-9]+)?", "", text)
    for expression in REMOVED_EXPRESSIONS:
        text = text.replace(expression, "")
    text = re.sub(r".*?(\d+)?\s*\$\s*(\d+)?\s*(\\frac\{.*?\}\{.*?\}|\d+/\d+)\s*\$.*", _mixed_fraction, text)
    text = re.sub(r"(\\text\{)(.*?)(\})", "\\2", text)
    text = re.sub(r"(\\textbf\{)(.*?)(\})", "\\2", text)
    text = re.sub(r"(\\overline\{)(.*?)(\})", "\\2", text)
    text = re.sub(r"(\\boxed\{)(.*)(\})", "\\2", text)
    text = re.sub(r"(frac)([^{])(.)", "frac{\\2}{\\3}", text)
    text = re.sub(r"(sqrt)([^{])", "sqrt{\\2}", text)
    text = text.replace("$", "")
    if text.startswith("."):
        text = "0" + text
    text = text.replace("{.", "{0.")
    if len(text) >= 2 and text[0] == "{" and text[-1] == "}":
        text = text[1:-1]
    try:
        number = float(text)
        if abs(number - round(number)) < 1e-7:
            text = str(int(round(number)))
    except (ValueError, OverflowError):
        pass
    if text.replace(",", "").isdigit():
        text = text.replace(",", "")
    return text


def fix_latex_escaping(text: str) -> str:
    """MaxText's ``fix_latex_escaping``: a LaTeX command whose backslash became a control character, or was lost,
    gets it back."""
    for escape, suffix, command in ESCAPE_FIXES:
        if escape in text:
            text = text.replace(escape + suffix, command)
    for command in LATEX_COMMANDS:
        text = re.sub(rf"(?<!\\)\b{command}\b", rf"\\{command}", text)
    return text


def preprocess_math_string(text: str) -> str:
    """MaxText's ``preprocess_math_string``: normalized, stripped, its LaTeX escapes fixed."""
    return fix_latex_escaping(normalize_final_answer(text).strip())


@dataclass(frozen=True)
class Grader:
    """math-verify and sympy, as MaxText's ``verify_math_worker`` uses them (``load_grader``)."""

    parse: Any
    verify: Any
    targets: tuple[Any, ...]
    """``(ExprExtractionConfig(), LatexExtractionConfig())``"""
    sympy_types: tuple[type, ...]
    """sympy's ``Basic`` and ``MatrixBase``"""
    parse_expr: Any
    """sympy's ``sympy_parser.parse_expr``"""
    name: str
    """``GRADER`` and math-verify's version, as the summary says it"""


def load_grader(import_module: Any = None, version: Any = None) -> Grader:
    """math-verify and sympy from the image (MaxText 0.2.4's post-training requirements pin ``math-verify>=0.9.0``
    and ``sympy>=1.14.0``: its ``utils_rl.py`` imports math-verify); ``RefusedError`` when the image has none."""
    import importlib
    from importlib import metadata

    load = import_module or importlib.import_module
    try:
        math_verify, parser = load("math_verify"), load("math_verify.parser")
        sympy, sympy_parser = load("sympy"), load("sympy.parsing.sympy_parser")
        installed = (version or metadata.version)("math-verify")
    except ImportError as err:
        raise RefusedError(
            f"the image has no {err.name or 'math_verify'} ({type(err).__name__}): the evaluation grades as MaxText "
            "0.2.5's RL evaluation does, with math-verify and sympy; run it in MaxText's post-training image "
            "(tpu-rl:images.maxtext)"
        ) from None
    return Grader(
        parse=math_verify.parse,
        verify=math_verify.verify,
        targets=(parser.ExprExtractionConfig(), parser.LatexExtractionConfig()),
        sympy_types=(sympy.Basic, sympy.MatrixBase),
        parse_expr=sympy_parser.parse_expr,
        name=f"{GRADER}, math-verify {installed}",
    )


def _sympy_equal(grader: Grader, gold: Any, prediction: Any) -> bool:
    """MaxText's ``are_equal_under_sympy``: the same expression once both are parsed again, unevaluated."""
    try:
        return bool(grader.parse_expr(str(gold), evaluate=False) == grader.parse_expr(str(prediction), evaluate=False))
    except Exception:  # noqa: BLE001 (MaxText's: any failure is "not equal")
        return False


def verify_math(grader: Grader, golds: list[str], predictions: list[str]) -> bool:
    """MaxText's ``verify_math_worker``: some parsed gold and some parsed prediction are equal under sympy or
    math-verify's ``verify`` (which is skipped for two sympy expressions holding ``**``); any failure is False."""
    try:
        parsed = [grader.parse(p, grader.targets, parsing_timeout=GRADE_SECONDS) for p in predictions]
        predicted = [item for found in parsed for item in found]
        gold_parsed = [grader.parse(g, grader.targets, parsing_timeout=GRADE_SECONDS) for g in golds]
        expected = [item for found in gold_parsed for item in found]
        for gold in expected:
            for prediction in predicted:
                if isinstance(gold, grader.sympy_types) and isinstance(prediction, grader.sympy_types):
                    if _sympy_equal(grader, gold, prediction):
                        return True
                    if "**" in str(gold) or "**" in str(prediction):
                        continue
                if grader.verify(gold, prediction, timeout_seconds=GRADE_SECONDS):
                    return True
        return False
    except Exception:  # noqa: BLE001 (MaxText's: any failure is "not equal")
        return False


def is_correct(grader: Grader, answer: str | None, expected: str) -> bool:
    """MaxText's ``check_correctness`` of the answer against the one acceptable answer (``process_answer`` of a
    GSM8K question): both preprocessed and boxed, then ``verify_math``. No answer grades ``FALLBACK_ANSWER``."""
    try:
        prediction = preprocess_math_string(FALLBACK_ANSWER if answer is None else answer)
        gold = preprocess_math_string(expected)
    except Exception:  # noqa: BLE001 (MaxText's ``_score_single``: a failure is "not correct")
        return False
    return verify_math(grader, [boxed(gold)], [boxed(prediction)])


# ---------------------------------------------------------------------------------------------
# GCS


def call_options(seconds: float) -> dict[str, Any]:
    """``timeout`` and ``retry`` for one storage request (the library's own hooks)."""
    from google.cloud.storage.retry import DEFAULT_RETRY

    bounded = getattr(DEFAULT_RETRY, "with_timeout", None) or DEFAULT_RETRY.with_deadline  # older api-core
    return {"timeout": GCS_TIMEOUT, "retry": bounded(seconds)}


def describe(err: Exception, what: str, seconds: float) -> str:
    """One line for a failed GCS request, naming ``what`` and the fix."""
    from google.api_core import exceptions as api
    from google.auth import exceptions as auth

    if isinstance(err, ReplyTooLargeError):
        return str(err)
    if isinstance(err, auth.GoogleAuthError):
        return f"no usable Google credentials for {what}: check the step's service account (Workload Identity)"
    if isinstance(err, api.RetryError):
        cause = type(err.cause).__name__ if err.cause is not None else "no answer"
        return f"GCS did not answer {what} within the {seconds:g} s retry deadline ({cause}); check the network"
    if isinstance(err, api.Unauthorized | api.Forbidden):
        return (
            f"GCS refused {what} (HTTP {err.code}): the step's service account needs storage.objects.list, .get "
            "and .create on the bucket"
        )
    if isinstance(err, api.NotFound):
        return f"GCS found nothing for {what} (HTTP 404): does the bucket exist?"
    if isinstance(err, api.GoogleAPICallError):
        return f"GCS answered HTTP {err.code} for {what}: {one_line(str(err.message), 120)}"
    return f"GCS failed for {what} ({type(err).__name__}: {one_line(str(err), 120)}); check the network"


class CappedFile:
    """The local copy of one object, at most ``cap`` bytes (its listed size): a server that sends more stops the
    download instead of filling the disk (google-cloud-storage writes the body in chunks)."""

    def __init__(self, path: Path, cap: int) -> None:
        self.file, self.cap, self.written = path.open("wb"), cap, 0

    def write(self, chunk: bytes) -> int:
        self.written += len(chunk)
        if self.written > self.cap:
            raise ReplyTooLargeError(f"GCS sent more than its {self.cap} listed bytes")
        return self.file.write(chunk)

    def flush(self) -> None:
        self.file.flush()

    def close(self) -> None:
        self.file.close()


def list_export(client: Any, export_uri: str, seconds: float) -> dict[str, int]:
    """The export's files and their sizes, every name checked (``RefusedError`` for one that is not a model
    folder's file, or for more than ``MAX_FILES``)."""
    bucket, prefix = split_uri(export_uri, "EXPORT_URI", folder=True)
    files: dict[str, int] = {}
    try:
        listing = client.list_blobs(bucket, prefix=prefix, max_results=MAX_FILES + 2, **call_options(seconds))
        blobs = [(blob.name, int(blob.size or 0)) for blob in listing]
    except Exception as err:  # noqa: BLE001 (one line naming the URI)
        raise FailedError(f"cannot list {export_uri}: {describe(err, export_uri, seconds)}") from None
    for full, size in blobs:
        name = full[len(prefix) :]
        if not name:
            continue  # the folder's own marker
        problem = export_file_problem(name)
        if problem:
            raise RefusedError(f"{export_uri} holds an object that is not a file of a model folder: {problem}")
        files[name] = size
    if len(files) > MAX_FILES:
        raise RefusedError(f"{export_uri} holds more than {MAX_FILES} files: it is not one model folder")
    if not files:
        raise RefusedError(f"{export_uri} holds no files: is EXPORT_URI the export step's output folder?")
    return files


def inside(folder: Path, name: str) -> Path:
    """``folder / name``, refused unless it resolves to a file directly inside ``folder``."""
    target = (folder / name).resolve()
    if export_file_problem(name) or target.parent != folder.resolve():
        raise RefusedError(f"the export's {name[:80]!r} would be written outside {folder}")
    return target


def download(client: Any, export_uri: str, files: dict[str, int], folder: Path, seconds: float) -> None:
    """Every file of the export into ``folder``, each at most (and exactly) its listed size."""
    bucket_name, prefix = split_uri(export_uri, "EXPORT_URI", folder=True)
    bucket = client.bucket(bucket_name)
    for name, size in sorted(files.items()):
        what = f"{export_uri}{name}"
        sink = CappedFile(inside(folder, name), size)
        try:
            bucket.blob(prefix + name).download_to_file(sink, **call_options(seconds))
        except Exception as err:  # noqa: BLE001 (one line naming the URI)
            raise FailedError(f"cannot download {what}: {describe(err, what, seconds)}") from None
        finally:
            sink.close()
        if sink.written != size:
            raise FailedError(f"cannot download {what}: GCS sent {sink.written} of its {size} listed bytes")
        print(f"{PREFIX}downloaded {one_line(name)} ({size} bytes)", flush=True)


def write_record(client: Any, record_uri: str, record: dict[str, Any], seconds: float) -> None:
    bucket, name = split_uri(record_uri, "RECORD_URI", folder=False)
    blob = client.bucket(bucket).blob(name)
    # Overwriting with the same record is idempotent, so the upload may be retried.
    blob.upload_from_string(json.dumps(record), content_type="application/json", **call_options(seconds))


# ---------------------------------------------------------------------------------------------
# The model


def load(folder: Path) -> tuple[Any, Any, Any]:
    """(torch, tokenizer, model) from ``folder`` alone, on CPU, in bfloat16, in eval mode."""
    import importlib

    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    torch = importlib.import_module("torch")
    transformers = importlib.import_module("transformers")
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
        model = transformers.AutoModelForCausalLM.from_pretrained(
            str(folder), dtype=torch.bfloat16, local_files_only=True
        )
    except Exception as err:  # noqa: BLE001 (one line: the library's own error class and words)
        raise FailedError(
            f"the export does not load as a Hugging Face model ({type(err).__name__}: {one_line(str(err), 200)}): "
            "run the export step again"
        ) from None
    model.eval()
    return torch, tokenizer, model


def generate(torch: Any, tokenizer: Any, model: Any, spec: Spec, question: str) -> str:
    """The model's greedy answer to ``question``, as training prompted it; only the new tokens, decoded."""
    messages = [{"role": "user", "content": prompt_text(spec, question)}]
    inputs = tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=True, return_dict=True, return_tensors="pt"
    )
    with torch.no_grad():
        output = model.generate(**inputs, do_sample=False, max_new_tokens=spec.max_new_tokens)
    return str(tokenizer.decode(output[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True))


# ---------------------------------------------------------------------------------------------
# The program


def _warning_to_stdout(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """``warnings.showwarning`` that prints one line to stdout: stderr holds only the program's own line."""
    print(f"{PREFIX}(warning) {category.__name__}: {one_line(str(message), 200)}", flush=True)


class LogLine(logging.Handler):
    """A library's log record (math-verify's "Timeout during parsing", google-auth's) as one line on stdout:
    stderr holds only the program's own line."""

    def emit(self, record: logging.LogRecord) -> None:
        print(f"{PREFIX}(log) {record.levelname} {record.name}: {one_line(record.getMessage(), 200)}", flush=True)


def evaluate(argv: list[str]) -> str:
    """Run the steps; the summary written. ``RefusedError`` or ``FailedError`` for what stops it."""
    if len(argv) != 4:
        raise RefusedError(USAGE)
    export_uri, work_dir, record_uri, spec_json = argv
    split_uri(export_uri, "EXPORT_URI", folder=True)
    split_uri(record_uri, "RECORD_URI", folder=False)
    spec = parse_spec(spec_json)
    seconds = gcs_seconds(os.environ)
    grader = load_grader()
    if not work_dir:
        raise RefusedError("WORK_DIR is empty")
    folder = Path(work_dir) / "model"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("HF_HOME", str(Path(work_dir) / "hf-home"))

    from google.cloud import storage

    try:
        client = storage.Client()
    except Exception as err:  # noqa: BLE001
        raise FailedError(f"cannot read {export_uri}: {describe(err, export_uri, seconds)}") from None
    files = list_export(client, export_uri, seconds)
    download(client, export_uri, files, folder, seconds)

    torch, tokenizer, model = load(folder)
    graded = []
    total = len(spec.questions)
    for number, item in enumerate(spec.questions, 1):
        try:
            output = generate(torch, tokenizer, model, spec, item.question)
        except Exception as err:  # noqa: BLE001
            raise FailedError(
                f"generating the answer to question {number}/{total} failed "
                f"({type(err).__name__}: {one_line(str(err), 200)})"
            ) from None
        answer = extract_answer(output, spec.answer_start, spec.answer_end)
        correct = is_correct(grader, answer, item.answer)
        graded.append(Graded(item.question, item.answer, answer or "", correct))
        print(f"{PREFIX}question {number}/{total}: {'correct' if correct else 'wrong'}", flush=True)
    record = build_record(graded, grader.name)
    try:
        write_record(client, record_uri, record, seconds)
    except Exception as err:  # noqa: BLE001
        raise FailedError(
            f"evaluated ({record['summary']}) but cannot write {record_uri}: {describe(err, record_uri, seconds)}"
        ) from None
    return f"{record['summary']}, recorded in {record_uri}"


def main(argv: list[str]) -> None:
    warnings.showwarning = _warning_to_stdout
    logging.basicConfig(handlers=[LogLine()], level=logging.WARNING, force=True)
    try:
        summary = evaluate(argv)
    except RefusedError as err:
        print(PREFIX + one_line(str(err)), file=sys.stderr, flush=True)
        sys.exit(REFUSED)
    except FailedError as err:
        print(PREFIX + one_line(str(err)), file=sys.stderr, flush=True)
        sys.exit(FAILED)
    except Exception as err:  # noqa: BLE001 (anything else: still one line, the step runs again)
        print(f"{PREFIX}failed ({type(err).__name__}: {one_line(str(err), 300)})", file=sys.stderr, flush=True)
        sys.exit(FAILED)
    print(PREFIX + summary, flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
