"""A step's program that grades the export on held-out questions. It runs in the MaxText post-training image as a
file of the evaluation's ConfigMap, beside the files it imports (``workloads.specs.commands.program_imports``):
``hf_model.py`` (``core/hf_model.py``), the grader (``evaluate_grader.py``), what a step prints of outside text
(``shown.py``), how a run ends (``tpu_rl_program.py``) and a download's capped file (``tpu_rl_download.py``). The
exported model answers each question as training prompted it, and the step records how many answers were right.

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
   checked against those files, run unmodified (``evaluate_grader.py``, tests/test_evaluate_grader.py):

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
import shutil
import sys
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING or __package__:  # the repository's package (the tests)
    from core import hf_model
    from workloads.container import evaluate_grader as grading
    from workloads.container import shown
    from workloads.container.tpu_rl_download import CappedFile
    from workloads.container.tpu_rl_program import FAILED, REFUSED, FailedError, RefusedError
else:  # python3 /tpu-rl/evaluate_export.py: hf_model.py (core's) and its other imports are files of its ConfigMap
    import evaluate_grader as grading
    import hf_model
    import shown
    from tpu_rl_download import CappedFile
    from tpu_rl_program import FAILED, REFUSED, FailedError, RefusedError

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
    """``text`` as one printable line of at most ``limit`` characters (``shown.line``: what a terminal would act on or
    hide removed, secrets redacted, runs of whitespace one space, any other unprintable character ``?``; a longer text
    ends in ``…``)."""
    line = shown.line(text, None)
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


# ---------------------------------------------------------------------------------------------
# The grader: math-verify and sympy from the image (the matching: ``evaluate_grader.py``)


def load_grader(import_module: Any = None, version: Any = None) -> grading.Grader:
    """math-verify and sympy from the image (MaxText 0.2.5's post-training requirements pin ``math-verify>=0.9.0``
    and ``sympy>=1.14.0``, as 0.2.4's did: its ``utils_rl.py`` imports math-verify); ``RefusedError`` when the image
    has none."""
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
    return grading.Grader(
        parse=math_verify.parse,
        verify=math_verify.verify,
        targets=(parser.ExprExtractionConfig(), parser.LatexExtractionConfig()),
        sympy_types=(sympy.Basic, sympy.MatrixBase),
        parse_expr=sympy_parser.parse_expr,
        name=f"{grading.GRADER}, math-verify {installed}",
    )


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

    if isinstance(err, hf_model.ReplyTooLargeError):
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
        return f"GCS answered HTTP {err.code} for {what}: {shown.line(err.message, 120)}"
    return f"GCS failed for {what} ({type(err).__name__}: {shown.line(err, 120)}); check the network"


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
        problem = hf_model.export_file_problem(name)
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
    if hf_model.export_file_problem(name) or target.parent != folder.resolve():
        raise RefusedError(f"the export's {name[:80]!r} would be written outside {folder}")
    return target


def download(client: Any, export_uri: str, files: dict[str, int], folder: Path, seconds: float) -> None:
    """Every file of the export into ``folder``, each at most (and exactly) its listed size."""
    bucket_name, prefix = split_uri(export_uri, "EXPORT_URI", folder=True)
    bucket = client.bucket(bucket_name)
    for name, size in sorted(files.items()):
        what = f"{export_uri}{name}"
        sink = CappedFile(inside(folder, name), size, hf_model.ReplyTooLargeError)
        try:
            bucket.blob(prefix + name).download_to_file(sink, **call_options(seconds))
        except Exception as err:  # noqa: BLE001 (one line naming the URI)
            raise FailedError(f"cannot download {what}: {describe(err, what, seconds)}") from None
        finally:
            sink.close()
        if sink.written != size:
            raise FailedError(f"cannot download {what}: GCS sent {sink.written} of its {size} listed bytes")
        print(f"{PREFIX}downloaded {shown.line(name, 400)} ({size} bytes)", flush=True)


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
            f"the export does not load as a Hugging Face model ({type(err).__name__}: {shown.line(err, 200)}): "
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
    print(f"{PREFIX}(warning) {category.__name__}: {shown.line(message, 200)}", flush=True)


class LogLine(logging.Handler):
    """A library's log record (math-verify's "Timeout during parsing", google-auth's) as one line on stdout:
    stderr holds only the program's own line."""

    def emit(self, record: logging.LogRecord) -> None:
        print(f"{PREFIX}(log) {record.levelname} {record.name}: {shown.line(record.getMessage(), 200)}", flush=True)


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
                f"({type(err).__name__}: {shown.line(err, 200)})"
            ) from None
        answer = grading.extract_answer(output, spec.answer_start, spec.answer_end)
        correct = grading.is_correct(grader, answer, item.answer)
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
        print(PREFIX + shown.line(err), file=sys.stderr, flush=True)
        sys.exit(REFUSED)
    except FailedError as err:
        print(PREFIX + shown.line(err), file=sys.stderr, flush=True)
        sys.exit(FAILED)
    except Exception as err:  # noqa: BLE001 (anything else: still one line, the step runs again)
        print(f"{PREFIX}failed ({type(err).__name__}: {shown.line(err, 300)})", file=sys.stderr, flush=True)
        sys.exit(FAILED)
    print(PREFIX + summary, flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
