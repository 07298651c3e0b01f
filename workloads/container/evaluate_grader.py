"""The evaluation step's grader (its program imports it from its ConfigMap's folder): an answer graded as
MaxText 0.2.5's RL evaluation grades it (``evaluate_rl.py`` ``score_responses`` with its defaults: one greedy response,
``eval_mode: pass``), ported from its ``utils_rl.py`` and ``math_verify_pool.py`` (Copyright Google LLC, Apache
License 2.0) and checked against those files, run unmodified, in tests/test_evaluate_grader.py. Pure: math-verify and
sympy come in a ``Grader`` (the evaluation's program loads them from the image: ``load_grader``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

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
