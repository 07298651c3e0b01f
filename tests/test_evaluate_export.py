"""The evaluation program (``workloads/container/evaluate_export.py``): the export answers held-out questions and the
step records how many it got right.

Fast tier (``pure``, no torch or transformers): the spec's checks, answer extraction, grading, the cells and the
record's shape within the bounds the step-record parser enforces, the GCS deadline's setting, and a refusal
through ``main`` before any GCS request. The import stays light: the module imports no torch, transformers or
google-cloud-storage when it loads.

Slow tier (torch, transformers, tokenizers: pyproject's group slow; fake-gcs-server): the program's real text and the
files shipped beside it (``workloads.specs.commands.program_files``) run through a real ``bash`` as the pod runs it,
against a tiny Gemma 4 folder in fake-gcs-server (``tests/tiny_gemma.py``). Cases: a random model, a model rigged to
answer, and hostile exports: a name that leaves the folder, an empty export, GCS unreachable, and a folder that does
not load.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import slug
from workloads.container.evaluate_export import (
    ANSWER_CELL,
    COLUMNS,
    GCS_SECONDS,
    GCS_SECONDS_ENV,
    MAX_FILES,
    MAX_NEW_TOKENS,
    MAX_QUESTIONS,
    QUESTION_CELL,
    TITLE,
    FailedError,
    Graded,
    RefusedError,
    Spec,
    build_record,
    cell,
    download,
    gcs_seconds,
    inside,
    list_export,
    main,
    parse_spec,
    prompt_text,
    split_uri,
)
from workloads.container.evaluate_grader import FALLBACK_ANSWER, GRADER, Grader, extract_answer, is_correct

ROOT = Path(__file__).resolve().parents[1]


def spec_of(**changes: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "system": "Place the final answer between <answer> and </answer>.",
        "answerStart": "<answer>",
        "answerEnd": "</answer>",
        "maxNewTokens": 16,
        "questions": [{"question": "What is 3 + 4?", "answer": "7"}],
    }
    spec.update(changes)
    return spec


# ---------------------------------------------------------------------------------------------
# The record as the step-record parser will read it (its bounds, as its author gave them)


def record_problems(record: object) -> list[str]:
    """Why ``record`` would not pass the generic step-record parser: exactly ``title`` (at most 80 characters),
    ``summary`` (200), ``columns`` (1 to 8, each at most 40) and ``rows`` (at most 50, each as many cells as
    columns, each at most 500), all of it printable text on one line."""
    if not isinstance(record, dict) or set(record) != {"title", "summary", "columns", "rows"}:
        return [f"not the four-key object: {sorted(record) if isinstance(record, dict) else type(record)}"]
    problems = []

    def text(value: object, where: str, limit: int) -> None:
        if not isinstance(value, str) or len(value) > limit or not value.isprintable():
            problems.append(f"{where} is not one printable line of at most {limit} characters: {value!r:.80}")

    text(record["title"], "title", 80)
    text(record["summary"], "summary", 200)
    columns, rows = record["columns"], record["rows"]
    if not isinstance(columns, list) or not 1 <= len(columns) <= 8:
        return [*problems, "columns is not a list of 1 to 8"]
    for i, column in enumerate(columns):
        text(column, f"columns[{i}]", 40)
    if not isinstance(rows, list) or len(rows) > 50:
        return [*problems, "rows is not a list of at most 50"]
    for i, row in enumerate(rows):
        if not isinstance(row, list) or len(row) != len(columns):
            problems.append(f"rows[{i}] does not have {len(columns)} cells")
            continue
        for j, value in enumerate(row):
            text(value, f"rows[{i}][{j}]", 500)
    return problems


# ---------------------------------------------------------------------------------------------
# Fast tier


@pytest.mark.pure
@pytest.mark.parametrize(
    ("output", "answer"),
    [
        ("<reasoning>3 + 4</reasoning><answer>7</answer>", "7"),
        ("<answer>\n  42 \n</answer>", "42"),
        ("<answer>1</answer> no, wait: <answer>2</answer>", "2"),  # the last answer counts
        ("<answer>The answer is \\boxed{7} apples</answer>", "7"),  # a box inside the tags
        ("<reasoning>...</reasoning> so \\boxed{\\frac{1}{2}}.", "\\frac{1}{2}"),  # a box without tags
        ("<answer>3", None),  # no end
        ("the answer is 7", None),
        ("<answer></answer>", None),
        ("", None),
    ],
    ids=slug,
)
def test_the_answer_is_found_as_maxtext_finds_it(output, answer):
    """A few of MaxText's cases, readable here; tests/test_evaluate_grader.py holds the table checked against
    MaxText's own ``extract_answer``."""
    assert extract_answer(output, "<answer>", "</answer>") == answer


@pytest.mark.pure
def test_markers_may_be_any_text():
    assert extract_answer("Answer: 5. Final: 6.", "Final:", ".") == "6"
    assert extract_answer("ANSWER: 5 END ANSWER: 6 END", "ANSWER:", "END") == "6"
    assert extract_answer("(a+b) [x] 7 [/x]", "[x]", "[/x]") == "7", "a marker is text, not a pattern"


@pytest.mark.pure
def test_no_answer_is_graded_as_maxtexts_fallback_and_recorded_empty():
    seen: list[str] = []

    def parse(text: str, targets: Any, parsing_timeout: int) -> list[str]:
        seen.append(text)
        return [text]

    grader = Grader(
        parse=parse,
        verify=lambda gold, prediction, timeout_seconds: gold == prediction,
        targets=(),
        sympy_types=(),
        parse_expr=None,
        name="test",
    )
    assert is_correct(grader, None, "18") is False
    assert seen == ["\\boxed{-1000000}", "\\boxed{18}"], "the prediction first, as MaxText parses them"
    assert is_correct(grader, None, FALLBACK_ANSWER) is True, "MaxText's, whatever it means"
    assert is_correct(grader, "$18.00", "18") is True, "both normalized before the comparison"


@pytest.mark.pure
def test_a_cell_is_one_printable_line_clipped_with_an_ellipsis():
    assert cell("two\nlines\tand  spaces\r\n", 100) == "two lines and spaces"
    assert cell("nbsp\u00a0and\u2028line separator", 100) == "nbsp and line separator"
    assert cell("bell\x07, escape \x1b[31mred\x1b[0m, zero-width\u200b", 100) == "bell, escape red, zero-width"
    assert cell("private use \ue000", 100) == "private use ?", "what a terminal cannot draw as written: ?"
    assert cell("x" * 100, 100) == "x" * 100, "a text of the limit is kept whole"
    clipped = cell("x" * 101, 100)
    assert len(clipped) == 100 and clipped == "x" * 99 + "…"
    assert cell("é" * 400, QUESTION_CELL) == "é" * (QUESTION_CELL - 1) + "…", "characters, not bytes"


def valid() -> str:
    return json.dumps(spec_of())


@pytest.mark.pure
def test_a_valid_spec_is_read_as_given():
    spec = parse_spec(json.dumps(spec_of(maxNewTokens=MAX_NEW_TOKENS, questions=[{"question": "q", "answer": " 7 "}])))
    assert spec == Spec(
        "Place the final answer between <answer> and </answer>.",
        "<answer>",
        "</answer>",
        MAX_NEW_TOKENS,
        (spec.questions[0],),
    )
    assert (spec.questions[0].question, spec.questions[0].answer) == ("q", " 7 ")
    twenty = [{"question": f"q{i}", "answer": str(i)} for i in range(MAX_QUESTIONS)]
    assert len(parse_spec(json.dumps(spec_of(questions=twenty, maxNewTokens=1))).questions) == MAX_QUESTIONS


@pytest.mark.pure
def test_the_prompt_is_maxtexts_data_template():
    spec = parse_spec(valid())
    assert prompt_text(spec, "What is 3 + 4?") == f"{spec.system}\n\nWhat is 3 + 4?"


REFUSED_SPECS = [
    ("not json", "{", "is not JSON"),
    ("too long", json.dumps(spec_of(system="s" * 200_000)), "SPEC_JSON is 200"),
    ("nested deep", "[" * 100_000 + "]" * 100_000, "is not JSON"),
    ("objects nested deep", '{"a":' * 30_000 + "1" + "}" * 30_000, "is not JSON"),
    ("a list", "[]", "is not a JSON object"),
    ("a string", '"spec"', "is not a JSON object"),
    ("duplicate key", '{"system": "a", "system": "b"}', "names 'system' twice"),
    ("unknown key", json.dumps(spec_of(maxNewToken=5)), "unknown key 'maxNewToken'"),
    ("missing key", json.dumps({k: v for k, v in spec_of().items() if k != "answerEnd"}), "lacks 'answerEnd'"),
    ("tokens zero", json.dumps(spec_of(maxNewTokens=0)), "maxNewTokens must be a whole number from 1 to 4096"),
    ("tokens over", json.dumps(spec_of(maxNewTokens=MAX_NEW_TOKENS + 1)), "maxNewTokens must be"),
    ("tokens float", json.dumps(spec_of(maxNewTokens=16.0)), "maxNewTokens must be"),
    ("tokens bool", json.dumps(spec_of(maxNewTokens=True)), "maxNewTokens must be"),
    ("tokens string", json.dumps(spec_of(maxNewTokens="16")), "maxNewTokens must be"),
    ("tokens NaN", json.dumps(spec_of()).replace('"maxNewTokens": 16', '"maxNewTokens": NaN'), "maxNewTokens"),
    ("system empty", json.dumps(spec_of(system="")), "system must be a non-empty string"),
    ("system blank", json.dumps(spec_of(system=" \n")), "system must be a non-empty string"),
    ("system number", json.dumps(spec_of(system=5)), "system must be a non-empty string"),
    ("system long", json.dumps(spec_of(system="s" * 20_001)), "system is 20001 characters"),
    ("start empty", json.dumps(spec_of(answerStart="")), "answerStart must be a non-empty string"),
    ("end null", json.dumps(spec_of(answerEnd=None)), "answerEnd must be a non-empty string"),
    ("same markers", json.dumps(spec_of(answerStart="##", answerEnd="##")), "the same marker"),
    ("no questions", json.dumps(spec_of(questions=[])), "questions must be a list of 1 to 20"),
    (
        "21 questions",
        json.dumps(spec_of(questions=[{"question": "q", "answer": "1"}] * (MAX_QUESTIONS + 1))),
        "questions must be a list of 1 to 20",
    ),
    ("questions object", json.dumps(spec_of(questions={"question": "q", "answer": "1"})), "must be a list"),
    ("question a string", json.dumps(spec_of(questions=["What?"])), "questions[0] is not an object"),
    (
        "question without answer",
        json.dumps(spec_of(questions=[{"question": "q", "answer": "1"}, {"question": "q"}])),
        "questions[1] lacks 'answer'",
    ),
    (
        "question extra key",
        json.dumps(spec_of(questions=[{"question": "q", "answer": "1", "id": 3}])),
        "questions[0] has the unknown key 'id'",
    ),
    (
        "answer empty",
        json.dumps(spec_of(questions=[{"question": "q", "answer": " "}])),
        "questions[0].answer must be a non-empty string",
    ),
    (
        "answer a number",
        json.dumps(spec_of(questions=[{"question": "q", "answer": 7}])),
        "questions[0].answer must be a non-empty string",
    ),
    (
        "question empty",
        json.dumps(spec_of(questions=[{"question": "", "answer": "7"}])),
        "questions[0].question must be a non-empty string",
    ),
]


@pytest.mark.pure
@pytest.mark.parametrize(
    ("raw", "words"), [(raw, words) for _, raw, words in REFUSED_SPECS], ids=[s[0] for s in REFUSED_SPECS]
)
def test_a_bad_spec_is_refused_naming_the_field(raw, words):
    with pytest.raises(RefusedError) as caught:
        parse_spec(raw)
    message = str(caught.value)
    assert words in message and "\n" not in message and len(message) < 200, message


@pytest.mark.pure
def test_the_record_is_the_four_key_step_record():
    graded = [Graded("What is 3 + 4?", "7", "7", True), Graded("What is 2 * 4?", "8", "", False)]
    record = build_record(graded, "MaxText 0.2.4 RL evaluation matching, math-verify 0.9.0")
    assert record == {
        "title": TITLE,
        "summary": "1 of 2 correct (MaxText 0.2.4 RL evaluation matching, math-verify 0.9.0)",
        "columns": ["question", "expected", "answer", "correct"],
        "rows": [["What is 3 + 4?", "7", "7", "yes"], ["What is 2 * 4?", "8", "", "no"]],
    }
    assert record_problems(json.loads(json.dumps(record))) == []
    assert list(COLUMNS) == record["columns"]


@pytest.mark.pure
def test_the_record_stays_within_the_parsers_bounds_whatever_the_text():
    hostile = "a line\nanother\x00\x1b[2J\u2029 " + "word " * 2_000
    graded = [Graded(hostile + str(i), "\t$70,000\n" * 50, hostile * 3, i % 2 == 0) for i in range(MAX_QUESTIONS)]
    record = build_record(graded, "a grader\n" + hostile)
    assert record_problems(record) == []
    assert record["summary"].startswith(f"{MAX_QUESTIONS // 2} of {MAX_QUESTIONS} correct (a grader a line another")
    question, expected, answer, correct = record["rows"][0]
    assert len(question) == QUESTION_CELL and question.startswith("a line another word") and question[-1] == "…"
    assert len(expected) == ANSWER_CELL and expected.startswith("$70,000 $70,000")
    assert len(answer) == ANSWER_CELL and correct == "yes"
    assert record_problems({**record, "rows": [["a\nb", "", "", "no"]]}), "the checker itself can fail"
    assert record_problems({**record, "extra": 1})


@pytest.mark.pure
def test_the_gcs_deadline_is_two_minutes_unless_set():
    assert gcs_seconds({}) == GCS_SECONDS == 120.0
    assert gcs_seconds({GCS_SECONDS_ENV: ""}) == GCS_SECONDS
    assert gcs_seconds({GCS_SECONDS_ENV: "2.5"}) == 2.5
    assert gcs_seconds({GCS_SECONDS_ENV: "600"}) == 600.0
    for bad in ("0", "-1", "601", "nan", "inf", "two"):
        with pytest.raises(RefusedError, match=GCS_SECONDS_ENV):
            gcs_seconds({GCS_SECONDS_ENV: bad})


@pytest.mark.pure
def test_the_uris_are_a_gcs_folder_and_an_object():
    assert split_uri("gs://b/m/export/abc/", "EXPORT_URI", folder=True) == ("b", "m/export/abc/")
    assert split_uri("gs://b/m/eval/abc/record.json", "RECORD_URI", folder=False) == ("b", "m/eval/abc/record.json")
    for uri, folder in [
        ("gs://b/m/export/abc", True),
        ("gs://b/", True),
        ("gs:///x/", True),
        ("s3://b/x/", True),
        ("/tmp/export/", True),
        ("gs://b/eval/", False),
        ("gs://b", False),
    ]:
        with pytest.raises(RefusedError, match="is not gs://BUCKET/"):
            split_uri(uri, "URI", folder=folder)


@pytest.mark.pure
@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["gs://b/export/", "WORK", "gs://b/r.json"], "usage: evaluate_export.py EXPORT_URI WORK_DIR RECORD_URI"),
        (["gs://b/export", "WORK", "gs://b/r.json", valid()], "EXPORT_URI 'gs://b/export' is not gs://BUCKET/.../"),
        (["gs://b/export/", "WORK", "gs://b/eval/", valid()], "RECORD_URI 'gs://b/eval/' is not"),
        (["gs://b/export/", "WORK", "gs://b/r.json", '{"system": 1}'], "SPEC_JSON (the object) lacks 'answerEnd'"),
    ],
    ids=["usage", "export-not-a-folder", "record-a-folder", "bad-spec"],
)
def test_a_refusal_is_exit_3_and_one_line_before_any_gcs_request(argv, words, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "http://127.0.0.1:9")  # never dialled: refused before
    argv = [str(tmp_path / "w") if a == "WORK" else a for a in argv]
    with pytest.raises(SystemExit) as caught:
        main(argv)
    assert caught.value.code == 3
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("tpu-rl evaluate: ") and err.count("\n") == 1, err
    assert words in err
    assert not (tmp_path / "w").exists(), "nothing is made before the arguments are checked"


class FakeBlob:
    """What the program reads of a ``google.cloud.storage.Blob``: its name and listed size, and a download that
    writes ``data`` into the sink (more or less than the size, when a test says so)."""

    def __init__(self, name: str, data: bytes, size: int | None = None) -> None:
        self.name, self.data, self.size = name, data, len(data) if size is None else size
        self.calls: list[dict[str, Any]] = []

    def download_to_file(self, sink: Any, **call: Any) -> None:
        self.calls.append(call)
        for start in range(0, len(self.data), 8192):
            sink.write(self.data[start : start + 8192])


class FakeClient:
    """A storage client over one bucket of ``FakeBlob``s; ``failure`` is raised by every listing."""

    def __init__(self, blobs: list[FakeBlob], failure: Exception | None = None) -> None:
        self.blobs, self.failure = {b.name: b for b in blobs}, failure
        self.listings: list[dict[str, Any]] = []

    def list_blobs(self, bucket: str, prefix: str, **call: Any) -> list[FakeBlob]:
        self.listings.append({"bucket": bucket, "prefix": prefix, **call})
        if self.failure is not None:
            raise self.failure
        return [b for name, b in sorted(self.blobs.items()) if name.startswith(prefix)][: call["max_results"]]

    def bucket(self, name: str) -> FakeClient:
        assert name == "b"
        return self

    def blob(self, name: str) -> FakeBlob:
        return self.blobs[name]


PREFIX_OF = "m/export/abc/"
FOLDER_URI = "gs://b/" + PREFIX_OF


@pytest.mark.pure
def test_the_listing_checks_every_name_and_skips_the_folders_marker():
    blobs = [FakeBlob(PREFIX_OF, b""), FakeBlob(PREFIX_OF + "config.json", b"{}"), FakeBlob("m/other", b"x")]
    blobs.append(FakeBlob(PREFIX_OF + "model-00001-of-00002.safetensors", b"", size=3 * 1024**3))
    client = FakeClient(blobs)
    assert list_export(client, FOLDER_URI, 2.0) == {"config.json": 2, "model-00001-of-00002.safetensors": 3 * 1024**3}
    (listing,) = client.listings
    assert (listing["bucket"], listing["prefix"], listing["max_results"]) == ("b", PREFIX_OF, MAX_FILES + 2)
    assert listing["timeout"] == (10.0, 60.0) and listing["retry"] is not None, "the library's own hooks"


@pytest.mark.pure
@pytest.mark.parametrize(
    ("names", "words"),
    [
        ([], "holds no files"),
        ([""], "holds no files"),  # the marker alone
        (["../x"], "'../x' is a path"),
        (["sub/config.json"], "is a path"),
        ([".env"], "is not a plain file name"),
        (["notes.txt"], "'notes.txt' is not a file of a model folder"),
        (["config.json\n"], "holds a control character"),
        ([f"model-{i:05d}-of-01001.safetensors" for i in range(MAX_FILES + 1)], f"more than {MAX_FILES} files"),
    ],
    ids=["empty", "marker-only", "parent", "subfolder", "hidden", "other-file", "control", "too-many"],
)
def test_an_export_that_is_not_one_model_folder_is_refused(names, words):
    client = FakeClient([FakeBlob(PREFIX_OF + name, b"x") for name in names])
    with pytest.raises(RefusedError) as caught:
        list_export(client, FOLDER_URI, 2.0)
    assert words in str(caught.value) and FOLDER_URI in str(caught.value)


@pytest.mark.pure
def test_a_listing_that_fails_is_one_line_naming_the_uri():
    with pytest.raises(FailedError) as caught:
        list_export(FakeClient([], failure=ConnectionError("refused\nsecond line")), FOLDER_URI, 2.0)
    assert str(caught.value) == (
        f"cannot list {FOLDER_URI}: GCS failed for {FOLDER_URI} (ConnectionError: refused second line); "
        "check the network"
    )


@pytest.mark.pure
def test_each_object_is_downloaded_whole_and_no_larger_than_listed(tmp_path):
    data = bytes(range(256)) * 100
    blob = FakeBlob(PREFIX_OF + "model.safetensors", data)
    download(FakeClient([blob]), FOLDER_URI, {"model.safetensors": len(data)}, tmp_path, 2.0)
    assert (tmp_path / "model.safetensors").read_bytes() == data
    assert blob.calls[0]["timeout"] == (10.0, 60.0) and blob.calls[0]["retry"] is not None

    more = FakeBlob(PREFIX_OF + "config.json", b"x" * 20_000, size=10)
    with pytest.raises(FailedError) as caught:
        download(FakeClient([more]), FOLDER_URI, {"config.json": 10}, tmp_path, 2.0)
    assert str(caught.value) == f"cannot download {FOLDER_URI}config.json: GCS sent more than its 10 listed bytes"
    assert (tmp_path / "config.json").stat().st_size == 0, "nothing past the listed size is written"

    fewer = FakeBlob(PREFIX_OF + "config.json", b"{}", size=10)
    with pytest.raises(FailedError, match="GCS sent 2 of its 10 listed bytes"):
        download(FakeClient([fewer]), FOLDER_URI, {"config.json": 10}, tmp_path, 2.0)


@pytest.mark.pure
def test_a_download_stays_inside_the_folder(tmp_path):
    assert inside(tmp_path, "config.json") == (tmp_path / "config.json").resolve()
    for name in ("../x", "..", "/etc/passwd", "a/../../x", "notes.txt"):
        with pytest.raises(RefusedError, match="would be written outside"):
            inside(tmp_path, name)


def test_importing_the_program_loads_no_torch_transformers_storage_or_grader():
    probe = (
        "import sys, workloads.container.evaluate_export\n"
        "names = ('torch', 'transformers', 'google.cloud.storage', 'math_verify', 'sympy')\n"
        "heavy = sorted(m for m in names if m in sys.modules)\n"
        "print(heavy)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr


@pytest.mark.pure
def test_the_program_ships_with_what_it_imports():
    """The image has no copy of ``core/``: the evaluation's ConfigMap holds ``core/hf_model.py`` as ``hf_model.py`` (and
    ``core/errors.py``, which it and ``tpu_rl_program.py`` import, as ``errors.py``), and the grader, ``shown.py``,
    ``tpu_rl_program.py`` and ``tpu_rl_download.py``, beside the program, which imports them by those names when run as
    a file."""
    from workloads.specs.commands import HF_MODEL, program_files

    files = program_files("evaluate_export.py")
    shipped = ["errors.py", "evaluate_export.py", "evaluate_grader.py", "hf_model.py", "redact.py", "redact_keys.py"]
    shipped += ["shown.py", "terminal.py", "tpu_rl_download.py", "tpu_rl_program.py"]
    assert sorted(files) == shipped
    assert files["hf_model.py"] == HF_MODEL and "def export_file_problem(" in files["hf_model.py"]
    for name, text in files.items():
        compile(text, name, "exec")


# ---------------------------------------------------------------------------------------------
# Slow tier: the program's text through bash, against fake-gcs-server

BUCKET = "tpu-rl-test"
EXPORT_URI = f"gs://{BUCKET}/gemma4/export/0123abcd/"
RECORD_URI = f"gs://{BUCKET}/gemma4/evaluate/4567cdef/record.json"
WORDS = ["user", "model", "<reasoning>", "</reasoning>", "<answer>", "</answer>", "think", "7", "What", "is"]
CHAIN = ["model", "<reasoning>", "think", "</reasoning>", "<answer>", "7", "</answer>", "<turn|>"]
"""What the rigged model says after the generation prompt's last token (``model``), up to the end of its turn."""


@pytest.fixture(scope="module")
def random_export(tmp_path_factory) -> dict[str, bytes]:
    """A random tiny Gemma 4 and a tokenizer whose vocabulary has no ``<answer>`` token, so that whatever the
    model generates, its output holds no answer."""
    from tests.tiny_gemma import model_folder, tiny_gemma4, tiny_tokenizer

    words = [w for w in WORDS if "answer" not in w]
    return model_folder(tiny_gemma4(), tiny_tokenizer(words), tmp_path_factory.mktemp("random"))


@pytest.fixture(scope="module")
def answering_export(tmp_path_factory) -> dict[str, bytes]:
    """A tiny Gemma 4 rigged (``tests.tiny_gemma.walk_chain``) to answer every question with ``CHAIN``."""
    from tests.tiny_gemma import model_folder, tiny_gemma4, tiny_tokenizer, walk_chain

    model, tokenizer = tiny_gemma4(tie_word_embeddings=False), tiny_tokenizer(WORDS)
    walk_chain(model, tokenizer, CHAIN)
    return model_folder(model, tokenizer, tmp_path_factory.mktemp("answering"))


def lay_out(client: Any, files: dict[str, bytes], marker: bool = False) -> None:
    bucket = client.lookup_bucket(BUCKET) or client.create_bucket(BUCKET)
    prefix = EXPORT_URI.removeprefix(f"gs://{BUCKET}/")
    if marker:
        bucket.blob(prefix).upload_from_string(b"")  # the export's own folder marker
    for name, data in files.items():
        bucket.blob(prefix + name).upload_from_string(data)


def run_program(
    tmp_path: Path, spec: dict[str, Any] | str, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], float]:
    """The program as the pod runs it (``exec python3 /tpu-rl/evaluate_export.py "$@"`` in bash, beside the files it
    imports, ``python3`` the project's interpreter, as the image's would be), the step's arguments ``EXPORT_URI``,
    ``tmp_path/scratch``, ``RECORD_URI`` and ``spec``; (the process, its seconds)."""
    from workloads.specs.commands import program_files

    pytest.importorskip("math_verify", reason="the program grades with math-verify, as the image has it")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    shim = bin_dir / "python3"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    shim.chmod(0o755)
    environment = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": str(tmp_path / "home"),
        "TMPDIR": str(tmp_path),
        "NO_GCE_CHECK": "True",
        "NO_PROXY": "127.0.0.1,localhost",
        "STORAGE_EMULATOR_HOST": os.environ.get("STORAGE_EMULATOR_HOST", ""),
        # One torch thread: the slow tier runs four workers on two cores, where torch's own two threads spin
        # against the other workers (a run takes twice as long or more).
        "OMP_NUM_THREADS": "1",
        # The test's own import path, where it found math-verify (a PYTHONPATH beside the venv, if any).
        **({"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}),
        **(env or {}),
    }
    words = [EXPORT_URI, str(tmp_path / "scratch"), RECORD_URI, spec if isinstance(spec, str) else json.dumps(spec)]
    scripts = tmp_path / "tpu-rl"
    scripts.mkdir(exist_ok=True)
    for name, text in program_files("evaluate_export.py").items():
        (scripts / name).write_text(text)
    script = 'exec python3 "$0" "$@"'
    started = time.monotonic()
    done = subprocess.run(
        ["bash", "-c", script, str(scripts / "evaluate_export.py"), *words],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done, time.monotonic() - started


def recorded(client: Any) -> dict[str, Any] | None:
    blob = client.bucket(BUCKET).get_blob(RECORD_URI.removeprefix(f"gs://{BUCKET}/"))
    if blob is None:
        return None
    assert blob.content_type == "application/json"
    return json.loads(blob.download_as_bytes())


def progress(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("tpu-rl evaluate: question ")]


@pytest.mark.slow
def test_a_random_model_is_evaluated_and_every_answer_is_recorded(gcs, tmp_path, random_export):
    """A random model's output is whatever it is; its tokenizer has no ``<answer>`` token, so no output can hold
    one: every answer is empty and wrong, and each row holds the question as asked."""
    lay_out(gcs, random_export, marker=False)
    questions = [
        {"question": "What is 3 + 4?\nShow your work.", "answer": "7"},
        {"question": "What is 2 * 4?", "answer": "$8"},
    ]
    done, _ = run_program(tmp_path, spec_of(questions=questions, maxNewTokens=12))
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert progress(done.stdout) == ["tpu-rl evaluate: question 1/2: wrong", "tpu-rl evaluate: question 2/2: wrong"]
    for name, data in random_export.items():
        assert f"tpu-rl evaluate: downloaded {name} ({len(data)} bytes)" in done.stdout
    summary = f"0 of 2 correct ({GRADER}, math-verify {version('math-verify')})"
    assert done.stdout.splitlines()[-1] == f"tpu-rl evaluate: {summary}, recorded in {RECORD_URI}"
    record = recorded(gcs)
    assert record == {
        "title": "Held-out questions",
        "summary": f"0 of 2 correct ({GRADER}, math-verify {version('math-verify')})",
        "columns": ["question", "expected", "answer", "correct"],
        "rows": [["What is 3 + 4? Show your work.", "7", "", "no"], ["What is 2 * 4?", "$8", "", "no"]],
    }
    assert record_problems(record) == []
    assert {p.name for p in (tmp_path / "scratch" / "model").iterdir()} == set(random_export)


@pytest.mark.slow
def test_an_answering_model_is_graded_and_a_rerun_overwrites_the_record(gcs, tmp_path, answering_export):
    """The model is rigged (``walk_chain``): its layers add nothing and its head maps each token of ``CHAIN`` to
    the next, so greedy decoding after the generation prompt's last token, ``model``, says ``<reasoning> think
    </reasoning> <answer> 7 </answer>`` and ends its turn, whatever the question. So the program must prompt
    through the chat template with the generation prompt, decode greedily and only the new tokens, and extract
    ``7``; graded against 7, $7.00 and 8. The scratch folder holds an earlier attempt's index (which would
    break the load) and the record an earlier run's: both are replaced."""
    lay_out(gcs, answering_export, marker=True)
    stale = tmp_path / "scratch" / "model"
    stale.mkdir(parents=True)
    (stale / "model.safetensors.index.json").write_text('{"weight_map": {"x": "model-00001-of-00002.safetensors"}}')
    gcs.bucket(BUCKET).blob(RECORD_URI.removeprefix(f"gs://{BUCKET}/")).upload_from_string(b'{"old": true}')
    questions = [
        {"question": "What is 3 + 4?", "answer": "7"},
        {"question": "How many dollars is seven dollars?", "answer": "$7.00"},
        {"question": "What is 2 * 4?", "answer": "8"},
    ]
    done, _ = run_program(tmp_path, spec_of(questions=questions))
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert progress(done.stdout) == [
        "tpu-rl evaluate: question 1/3: correct",
        "tpu-rl evaluate: question 2/3: correct",
        "tpu-rl evaluate: question 3/3: wrong",
    ]
    assert "<reasoning>" not in done.stdout, "the model's output is never printed"
    record = recorded(gcs)
    assert record is not None and record_problems(record) == []
    assert record["summary"] == f"2 of 3 correct ({GRADER}, math-verify {version('math-verify')})"
    assert record["rows"] == [
        ["What is 3 + 4?", "7", "7", "yes"],
        ["How many dollars is seven dollars?", "$7.00", "7", "yes"],
        ["What is 2 * 4?", "8", "7", "no"],
    ]
    assert {p.name for p in stale.iterdir()} == set(answering_export), "the earlier attempt's file is gone"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["../x", "sub/config.json", "notes.txt"])
def test_an_object_that_is_no_model_folders_file_is_refused_before_any_download(gcs_folders, tmp_path, name):
    lay_out(gcs_folders, {"config.json": b"{}", name: b"planted"}, marker=True)
    done, _ = run_program(tmp_path, spec_of())
    assert done.returncode == 3, done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("tpu-rl evaluate: ")
    assert f"{EXPORT_URI} holds an object that is not a file of a model folder" in done.stderr
    assert recorded(gcs_folders) is None
    assert list((tmp_path / "scratch" / "model").iterdir()) == [], "nothing is downloaded"
    assert not (tmp_path / "scratch" / "x").exists()


@pytest.mark.slow
def test_an_empty_export_is_refused(gcs_folders, tmp_path):
    lay_out(gcs_folders, {}, marker=True)
    done, _ = run_program(tmp_path, spec_of())
    assert done.returncode == 3, done.stderr
    assert (
        done.stderr == f"tpu-rl evaluate: {EXPORT_URI} holds no files: is EXPORT_URI the export step's output folder?\n"
    )
    assert recorded(gcs_folders) is None


@pytest.mark.slow
def test_gcs_unreachable_fails_in_one_line_within_the_deadline(tmp_path):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    done, seconds = run_program(
        tmp_path, spec_of(), {"STORAGE_EMULATOR_HOST": f"http://127.0.0.1:{closed}", GCS_SECONDS_ENV: "2"}
    )
    assert done.returncode == 1, done.stderr
    assert seconds < 20, f"{seconds:.1f} s for a 2 s retry deadline"
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"tpu-rl evaluate: cannot list {EXPORT_URI}: GCS did not answer {EXPORT_URI}")
    assert "within the 2 s retry deadline" in done.stderr


@pytest.mark.slow
def test_a_folder_that_does_not_load_fails_in_one_line(gcs, tmp_path, random_export):
    files = {**random_export, "config.json": b'{"model_type": "gemma4", "text_config": '}
    lay_out(gcs, files)
    done, _ = run_program(tmp_path, spec_of())
    assert done.returncode == 1, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("tpu-rl evaluate: the export does not load as a Hugging Face model (")
    assert done.stderr.rstrip().endswith("run the export step again")
    assert recorded(gcs) is None
