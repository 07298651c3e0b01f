"""The evaluation step's grader (``workloads/container/evaluate_grader.py``, with math-verify and sympy as
``evaluate_export.load_grader`` loads them) against MaxText 0.2.5's own RL evaluation, run unmodified:
``evaluate_rl.py``, ``utils_rl.py`` and ``math_verify_pool.py`` of the 0.2.5 wheel, vendored byte for byte
(tests/data/vendor/README.md, SHA256SUMS) and imported as MaxText imports them, with stub
modules standing in for what the grading never calls (jax's optax, tunix, etils, tqdm, MaxText's logging).

On one table of model outputs (boxed, tagged, fractions, commas, units, negative numbers, trailing periods,
several answers, no answer, ...):

- fast tier, standard library only: the answer extracted and the strings normalized are MaxText's, and a
  recording math-verify shows both graders hand it the same strings the same way (``verify_math_worker``);
- slow tier, with math-verify installed (the image's grader: pyproject's group slow), the verdict of MaxText's
  ``score_responses`` (``eval_mode: pass``, one response) and the program's ``is_correct`` are the same, and the
  table's.
"""

from __future__ import annotations

import importlib.util
import multiprocessing.pool  # noqa: F401 (math_verify_pool.py annotates with it unimported, as MaxText's imports leave it)
import sys
import types
from typing import Any

import pytest

from tests.conftest import shared_path, slug
from workloads.container import evaluate_export
from workloads.container import evaluate_grader as program

RL = ("maxtext-0.2.5", "trainers", "post_train", "rl")
PACKAGE = "maxtext.trainers.post_train.rl"
START, END = "<answer>", "</answer>"

CONFIG = types.SimpleNamespace(
    reasoning_start_token="<reasoning>",
    reasoning_end_token="</reasoning>",
    reasoning_start_token_in_prompt=False,
    solution_start_token=START,
    solution_end_token=END,
    eval_mode="pass",
    debug=False,
)
"""The settings ``score_responses`` reads: rl.yml's (MaxText 0.2.5), as the tutorial runs it."""


# ---------------------------------------------------------------------------------------------
# MaxText's files, imported as MaxText imports them


class _Stub:
    """Whatever a name of a stubbed library must be (a base class, an annotation): never called by the grading."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass


class _StubModule(types.ModuleType):
    """A stand-in module: any public name is ``_Stub`` (MaxText's annotations, ``optax.GradientTransformation`` or
    ``np.ndarray``, are evaluated when its functions are defined)."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Stub


def _module(name: str, **attributes: Any) -> types.ModuleType:
    module = _StubModule(name)
    module.__dict__.update(attributes)
    return module


def _stubs() -> dict[str, types.ModuleType]:
    """The modules MaxText's three files import that grading never calls, as empty stand-ins; math-verify is the
    real one when installed (it is looked up again at each call: ``verify_math_worker`` imports it inside)."""
    log = _module("maxtext.utils.max_logging", log=lambda *_: None, warning=lambda *_: None)
    chat = _module("tunix.rl.agentic.parser.chat_template_parser", DefaultChatTemplateParser=_Stub)
    modules = {
        "etils": _module("etils", epath=_module("etils.epath")),
        "optax": _module("optax"),
        "numpy": _module("numpy"),
        "tqdm": _module("tqdm"),
        "tqdm.auto": _module("tqdm.auto", tqdm=lambda items: items),
        "tunix": _module("tunix"),
        "tunix.rl": _module("tunix.rl"),
        "tunix.rl.agentic": _module("tunix.rl.agentic"),
        "tunix.rl.agentic.parser": _module("tunix.rl.agentic.parser", chat_template_parser=chat),
        "tunix.rl.agentic.parser.chat_template_parser": _module(chat.__name__, parser=chat),
        "tunix.rl.rollout": _module("tunix.rl.rollout"),
        "tunix.rl.rollout.base_rollout": _module("tunix.rl.rollout.base_rollout", RolloutConfig=_Stub),
        "maxtext": _module("maxtext"),
        "maxtext.utils": _module("maxtext.utils", max_logging=log),
        "maxtext.utils.max_logging": log,
        "maxtext.trainers": _module("maxtext.trainers"),
        "maxtext.trainers.post_train": _module("maxtext.trainers.post_train"),
        PACKAGE: _module(PACKAGE),
    }
    if importlib.util.find_spec("math_verify") is None:
        parser = _module("math_verify.parser", ExprExtractionConfig=_Stub, LatexExtractionConfig=_Stub)
        modules["math_verify"] = _module("math_verify", parse=_Stub, verify=_Stub, parser=parser)
        modules["math_verify.parser"] = parser
    return modules


def _import_as_maxtext() -> dict[str, types.ModuleType]:
    """MaxText's three files as ``maxtext.trainers.post_train.rl.*``, the stubs in ``sys.modules`` only while they
    load (restored after: no test sees them, and math-verify is looked up where each call imports it)."""
    saved = dict(sys.modules)
    try:
        sys.modules.update(_stubs())
        loaded = {}
        for name in ("math_verify_pool", "utils_rl", "evaluate_rl"):  # each imports the one before it
            spec = importlib.util.spec_from_file_location(f"{PACKAGE}.{name}", shared_path(*RL, f"{name}.py"))
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            setattr(sys.modules[PACKAGE], name, module)
            spec.loader.exec_module(module)
            loaded[name] = module
        return loaded
    finally:
        sys.modules.clear()
        sys.modules.update(saved)


@pytest.fixture(scope="module")
def maxtext() -> types.SimpleNamespace:
    return types.SimpleNamespace(**_import_as_maxtext())


# ---------------------------------------------------------------------------------------------
# The table: a model's output, the expected answer, MaxText's verdict

TABLE: list[tuple[str, str, bool]] = [
    # The tutorial's format, and GSM8K's held-out answers as a model may write them.
    ("<reasoning>16 - 3 - 4 = 9; 9 * 2 = 18</reasoning><answer>18</answer>", "18", True),
    ("<reasoning>...</reasoning><answer>\\boxed{18}</answer>", "18", True),
    ("<reasoning>...</reasoning>The answer is \\boxed{18}.", "18", True),  # boxed, no tags
    ("<answer>The answer is \\boxed{3} bolts</answer>", "3", True),
    ("<answer>$70,000</answer>", "70000", True),
    ("<answer>70,000</answer>", "70000", True),
    ("<answer>70000.00</answer>", "70000", True),
    ("<answer>$70000.</answer>", "70000", True),  # a trailing period
    ("<answer>540 meters</answer>", "540", True),
    ("<answer>20 cups</answer>", "20", False),  # "cups" is not among its units
    ("<answer>18 dollars</answer>", "18", True),
    ("<answer>x = 18</answer>", "18", True),  # after the last "="
    ("<answer>18.</answer>", "18", True),
    ("<answer>17</answer>", "18", False),
    ("<answer>-18</answer>", "18", False),
    ("<answer>-3</answer>", "-3", True),
    ("<answer>\\boxed{-3}</answer>", "-3", True),
    ("<answer>0.5</answer>", "1/2", True),
    ("<answer>\\frac{1}{2}</answer>", "0.5", True),
    ("<answer>\\dfrac{3}{4}</answer>", "3/4", True),
    ("<answer>7 3/4</answer>", "31/4", True),  # a mixed number
    ("<answer>50%</answer>", "50", True),
    ("<answer>1e3</answer>", "1000", True),
    ("<answer>18</answer> no, wait: <answer>19</answer>", "19", True),  # the last tagged answer
    ("<answer>18</answer> no, wait: <answer>19</answer>", "18", False),
    ("\\boxed{17} then \\boxed{18}", "18", True),  # the last boxed answer
    ("<answer>\\boxed{\\frac{1}{2}}</answer>", "1/2", True),  # nested braces
    ("\\boxed 42", "42", True),  # a loose boxed number
    ("<answer>\\boxed{}</answer>", "0", False),
    ("<answer>18 or 19</answer>", "18", False),
    ("<answer>forty</answer>", "forty", True),
    ("<answer></answer>", "0", False),
    ("<answer>3", "3", False),  # no end tag: no answer
    ("The answer is 18.", "18", False),  # no tag, no box: no answer
    ("", "-1000000", True),  # no answer grades MaxText's fallback, whatever the expected answer
    ("<answer>NaN</answer>", "1", False),
    ("<answer>\\text{18 apples}</answer>", "18", True),  # math-verify parses the normalized "18apples" as 18
    ("<answer>2^{10}</answer>", "1024", False),  # "**": no verify, and unevaluated it is not 1024
    ("<answer>\\sqrt{4}</answer>", "2", True),
    ("<answer>1,234.5</answer>", "1234.5", True),
]


def _ids(row: tuple[str, str, bool]) -> str:
    return slug(f"{row[0][-40:]} vs {row[1]}")


# ---------------------------------------------------------------------------------------------
# Fast tier: MaxText's extraction and normalization, and what reaches math-verify


@pytest.mark.pure
@pytest.mark.parametrize("row", TABLE, ids=_ids)
def test_the_answer_extracted_is_maxtexts(maxtext, row):
    output = row[0]
    ours = program.extract_answer(output, START, END)
    assert (program.FALLBACK_ANSWER if ours is None else ours) == maxtext.utils_rl.extract_answer(output, CONFIG)


@pytest.mark.pure
@pytest.mark.parametrize(
    "output",
    [
        "[answer]7[/answer]",
        "[answer]a[/answer] [answer]\\boxed{b}[/answer]",
        "[answer]\n 7 \n[/answer]",
        "[answer][/answer]",
        "[answer]1 [answer]2[/answer]",
        "[answer]7[/answer][/answer]",
        "[/answer]7[answer]",
    ],
    ids=slug,
)
def test_other_markers_are_matched_as_maxtext_matches_its_tokens(maxtext, output):
    """Markers are the stack's solution tokens (``answerStart``/``answerEnd``), escaped in the pattern."""
    tokens = {"solution_start_token": "[answer]", "solution_end_token": "[/answer]"}
    config = types.SimpleNamespace(**{**vars(CONFIG), **tokens})
    ours = program.extract_answer(output, "[answer]", "[/answer]")
    assert (program.FALLBACK_ANSWER if ours is None else ours) == maxtext.utils_rl.extract_answer(output, config)


@pytest.mark.pure
@pytest.mark.parametrize(
    "text",
    sorted({row[1] for row in TABLE} | {a for row in TABLE if (a := program.extract_answer(row[0], START, END))})
    + ["\ffrac{1}{2}", "\\tfrac12", "5 \\text{ cm}^2", "\\$5", "2 million", "a 5", "{.5}", "\\left(1,2\\right)", "x"],
    ids=slug,
)
def test_the_strings_normalized_are_maxtexts(maxtext, text):
    assert program.preprocess_math_string(text) == maxtext.utils_rl.preprocess_math_string(text)
    assert program.normalize_final_answer(text) == maxtext.utils_rl.normalize_final_answer(text)
    assert program.boxed(text) == maxtext.utils_rl.boxed(text)


class RecordingMathVerify:
    """A math-verify that records what it is handed: ``parse`` finds the text inside ``\\boxed{}``, ``verify``
    compares two strings (so grading takes math-verify's string branch), every call logged."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def parse(self, text: str, targets: Any, parsing_timeout: Any = None) -> list[str]:
        self.calls.append(("parse", (text, tuple(type(t).__name__ for t in targets))))
        return [text.removeprefix("\\boxed{").removesuffix("}")] if text else []

    def verify(self, gold: str, prediction: str, timeout_seconds: Any = None) -> bool:
        self.calls.append(("verify", (gold, prediction)))
        return gold == prediction

    def modules(self) -> dict[str, types.ModuleType]:
        """math-verify's modules, and sympy's two types ``verify_math_worker`` imports (none of them found here:
        the fast tier may have no sympy)."""
        configs = {name: type(name, (), {}) for name in ("ExprExtractionConfig", "LatexExtractionConfig")}
        parser = _module("math_verify.parser", **configs)
        sympy = _module("sympy", Basic=type("Basic", (), {}), MatrixBase=type("MatrixBase", (), {}))
        verifier = _module("math_verify", parse=self.parse, verify=self.verify)
        return {"math_verify": verifier, "math_verify.parser": parser, "sympy": sympy}


@pytest.mark.pure
@pytest.mark.parametrize("row", TABLE, ids=_ids)
def test_both_graders_hand_math_verify_the_same_strings(maxtext, row, monkeypatch):
    """MaxText's ``verify_math_worker`` and the program's ``verify_math``, each with a recording math-verify, on the
    boxed, normalized answer and expected answer as ``check_correctness`` builds them: the same calls, the same
    verdict."""
    output, expected, _ = row
    theirs, ours = RecordingMathVerify(), RecordingMathVerify()
    for name, module in theirs.modules().items():
        monkeypatch.setitem(sys.modules, name, module)
    extracted = maxtext.utils_rl.extract_answer(output, CONFIG)
    golds = [maxtext.utils_rl.boxed(maxtext.utils_rl.preprocess_math_string(expected))]
    predictions = [maxtext.utils_rl.boxed(maxtext.utils_rl.preprocess_math_string(extracted))]
    verdict = maxtext.math_verify_pool.verify_math_worker(golds, predictions)

    parser = ours.modules()["math_verify.parser"]
    grader = program.Grader(
        parse=ours.parse,
        verify=ours.verify,
        targets=(parser.ExprExtractionConfig(), parser.LatexExtractionConfig()),
        sympy_types=(),
        parse_expr=None,
        name="recording",
    )
    found = program.extract_answer(output, START, END)
    mine = program.is_correct(grader, found, expected)
    assert ours.calls == theirs.calls
    assert mine is (verdict > 0.0)


@pytest.mark.pure
def test_the_table_covers_every_way_maxtext_finds_an_answer(maxtext):
    """Each row's path through MaxText's ``extract_answer``: balanced box, loose box, tagged text, nothing."""
    paths = set()
    for output, _, _ in TABLE:
        tagged = START in output and END in output.split(START)[-1]
        if program.extract_answer(output, START, END) is None:
            paths.add("none")
        elif "\\boxed{" in output:
            paths.add("box")
        elif "\\boxed" in output:
            paths.add("loose box")
        elif tagged:
            paths.add("tagged")
    assert paths == {"box", "loose box", "tagged", "none"}
    assert any(correct for *_, correct in TABLE) and not all(correct for *_, correct in TABLE)


# ---------------------------------------------------------------------------------------------
# With math-verify: the verdicts


@pytest.fixture(scope="module")
def grader() -> program.Grader:
    pytest.importorskip("math_verify", reason="math-verify is the image's grader: make test-slow")
    return evaluate_export.load_grader()


@pytest.mark.slow
@pytest.mark.parametrize("row", TABLE, ids=_ids)
def test_the_verdict_is_maxtexts_rl_evaluation(maxtext, grader, row):
    output, expected, correct = row
    is_correct, _, _ = maxtext.evaluate_rl.score_responses(CONFIG, "a question", [output], [expected])
    assert is_correct is correct, "the table's verdict is MaxText's"
    assert program.is_correct(grader, program.extract_answer(output, START, END), expected) is correct


@pytest.mark.slow
def test_the_grader_names_maxtext_and_math_verify(grader):
    from importlib.metadata import version

    assert grader.name == f"MaxText 0.2.5 RL evaluation matching, math-verify {version('math-verify')}"


@pytest.mark.pure
def test_an_image_without_math_verify_is_refused_naming_it():
    def missing(name: str) -> types.ModuleType:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    with pytest.raises(evaluate_export.RefusedError) as refused:
        evaluate_export.load_grader(import_module=missing)
    assert str(refused.value) == (
        "the image has no math_verify (ModuleNotFoundError): the evaluation grades as MaxText 0.2.5's RL evaluation "
        "does, with math-verify and sympy; run it in MaxText's post-training image (tpu-rl:images.maxtext)"
    )
