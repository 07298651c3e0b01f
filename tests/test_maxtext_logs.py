"""The log lines the program parses are the ones the pinned MaxText prints: each message is taken from the release's
own source (vendored by tools/adopt_maxtext.py), formatted as Python formats it, and read back by the parser that
relies on it (workloads/observe/evaluations.py, workloads/observe/startup.py, workloads/container/train_exit.py).
The tests' sample lines (``tests.upstream_logs.LOGGED``) are checked here against the release: each logged at the line
the table gives, in the order ``workloads.observe.startup.MILESTONES`` cuts the start-up, so that a line that moves
upstream fails here.

tunix's lines (``Train step N training loss``, ``Restored params from step``) are not in MaxText's wheel: the image's
tunix is the commit the wheel pins (``wheel.json`` ``post_train_github_deps``), read by a human at adoption
(docs/releases.md "Adopting a MaxText release"); the table's rows for them, and where the restore runs, are tunix
c7d8950's (the pin is not readable offline), and their formats are read back here."""

from __future__ import annotations

import ast
import datetime
import lzma
from typing import Any

import pytest

from core.maxtext_keys import MAXTEXT_VERSION
from tests.conftest import VENDORED
from tests.upstream_logs import LOGGED, TRAIN_RL, Logged, absl, logged
from workloads.container import launch, train_exit
from workloads.observe import evaluations, startup

pytestmark = pytest.mark.pure

RELEASE = VENDORED / f"maxtext-{MAXTEXT_VERSION}"
SAMPLE: dict[str, Any] = {
    "corr": 12,
    "total": 40,
    "accuracy": 30.0,
    "partial_accuracy": 45.0,
    "format_accuracy": 80.0,
    "mean_reward": 0.45,
    "outer_step": 10,
}


def _tree(path: str) -> ast.Module:
    return ast.parse(lzma.decompress((RELEASE / f"{path}.xz").read_bytes()).decode())


def _messages(path: str, function: str) -> list[ast.expr]:
    """The first argument of every ``max_logging.<function>(...)`` call in the vendored file."""
    return [
        node.args[0]
        for node in ast.walk(_tree(path))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == function
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "max_logging"
        and node.args
    ]


def _printed(path: str, function: str, start: str) -> list[str]:
    """The messages beginning with ``start`` that ``max_logging.<function>`` logs there, formatted with ``SAMPLE``."""
    found = []
    for message in _messages(path, function):
        literal = _literal_start(message)  # only the messages that can begin with ``start`` are formatted
        if not literal or not (literal.startswith(start) or start.startswith(literal)):
            continue
        text = eval(compile(ast.Expression(message), path, "eval"), {}, dict(SAMPLE))  # noqa: S307 (its f-string)
        if isinstance(text, str) and text.startswith(start):
            found.append(text)
    return found


def _literal_start(message: ast.expr) -> str:
    """The literal text a message begins with (up to its first formatted value)."""
    if isinstance(message, ast.Constant) and isinstance(message.value, str):
        return message.value
    if isinstance(message, ast.JoinedStr) and message.values and isinstance(message.values[0], ast.Constant):
        return str(message.values[0].value)
    return ""


def _absl(message: str) -> str:
    """The line absl writes for a message, at the line the release logs it (its prefix as ``startup.ABSL`` reads it)."""
    return absl("1130 05:02:03", message)


@pytest.mark.parametrize(
    ("path", "start", "pattern"),
    [
        ("trainers/post_train/rl/train_rl.py", "Pre RL Training: ", evaluations.PRE),
        ("trainers/post_train/rl/train_rl.py", "Post RL Training: ", evaluations.POST),
        ("trainers/post_train/rl/hooks.py", "Intermediate Eval (step=", evaluations.INTERMEDIATE),
    ],
    ids=["pre", "post", "intermediate"],
)
def test_the_evaluation_lines_parse(path, start, pattern):
    (line,) = _printed(path, "warning", start)
    match = pattern.search(_absl(line))
    assert match, f"{line!r}: MaxText {MAXTEXT_VERSION} prints it otherwise than {pattern.pattern}"
    numbers = [float(g) for g in match.groups()]
    assert numbers[-6:] == [12, 40, 30.0, 45.0, 80.0, 0.45]


def test_the_completion_line_is_the_one_train_exit_reads():
    (line,) = _printed("trainers/post_train/rl/train_rl.py", "warning", "RL Training Completed")
    assert _absl(line).endswith(train_exit.COMPLETED)
    assert train_exit.evidence([_absl(line)]).completed


@pytest.mark.parametrize(
    ("path", "function", "mark"),
    [
        ("utils/max_utils.py", "log", "backend"),
        ("trainers/post_train/rl/train_rl.py", "log", "RL cluster"),
        ("trainers/post_train/rl/train_rl.py", "log", "RL trainer"),
        ("trainers/post_train/rl/train_rl.py", "warning", "pre-RL eval"),
    ],
)
def test_the_start_up_milestones_are_logged(path, function, mark):
    pattern = dict(startup.LOG_MARKS)[mark]
    lines: list[str] = []
    for message in _messages(path, function):
        if isinstance(message, ast.Constant) and isinstance(message.value, str):
            lines.append(message.value)
        elif isinstance(message, ast.JoinedStr):
            lines.append("".join(str(v.value) for v in message.values if isinstance(v, ast.Constant)) + " x")
    assert any(pattern.search(line) for line in lines), f"MaxText {MAXTEXT_VERSION} logs no {pattern.pattern}"


def test_a_message_the_release_does_not_print_is_not_found():
    assert _printed("trainers/post_train/rl/train_rl.py", "warning", "Pre RL Training (renamed)") == []
    assert not evaluations.PRE.search(_absl("Pre RL Training: corr=12, total=40"))


# -- where each line is logged, and in what order --------------------------------------------------------------

MAXTEXT_ROWS = [row for row in LOGGED if row.source == "maxtext"]


def _source(path: str) -> str:
    return lzma.decompress((RELEASE / f"{path}.xz").read_bytes()).decode()


def _patched(text: str) -> str:
    """``train_rl.py`` as the launcher runs it (``launch.PATCHES``, each found once)."""
    for old, new in launch.PATCHES:
        assert text.count(old) == 1, f"the launcher's patch {old[:40]!r} does not apply to MaxText {MAXTEXT_VERSION}"
        text = text.replace(old, new)
    return text


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else ""


def _calls(tree: ast.AST) -> list[tuple[int, str, str]]:
    """Every call under ``tree`` in the order of the source: (its first line, as absl names it; its dotted name;
    the literal start of a ``max_logging`` call's message, else "")."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            message = _literal_start(node.args[0]) if name.startswith("max_logging.") and node.args else ""
            found.append((node.lineno, node.col_offset, name, message))
    return [(line, name, message) for line, _, name, message in sorted(found)]


@pytest.mark.parametrize("row", MAXTEXT_ROWS, ids=[row.text.strip(".: (=") for row in MAXTEXT_ROWS])
def test_each_sample_line_is_where_the_release_logs_it(row: Logged):
    """The table's line is the release's, once, and stays so in the file the launcher patches."""
    texts = [_source(row.path)] + ([_patched(_source(row.path))] if row.path == TRAIN_RL else [])
    for text in texts:
        logs = [(line, name) for line, name, message in _calls(ast.parse(text)) if message.startswith(row.text)]
        assert logs == [(row.line, row.function)], f"MaxText {MAXTEXT_VERSION} logs {row.text!r} at {logs}"


def _in_order(calls: list[tuple[int, str, str]], keys: list[str]) -> dict[str, int]:
    """The line of each key (a call's dotted name, or a ``max_logging`` message's start), each called once, in the
    order of ``keys``."""
    lines = {}
    for key in keys:
        found = [line for line, name, message in calls if name == key or (message and message.startswith(key))]
        assert len(found) == 1, f"MaxText {MAXTEXT_VERSION}: {key!r} is called at {found}, not once"
        lines[key] = found[0]
    assert list(lines.values()) == sorted(lines.values()), f"MaxText {MAXTEXT_VERSION} calls them in another order"
    return lines


def test_the_release_passes_the_milestones_in_the_order_the_start_up_is_cut():
    """``_rl_train_impl`` loads the models and data, then ``create_rl_components`` logs ``Creating RL cluster...``,
    makes the ``RLCluster`` (in which tunix restores: the table's ``inside``) and logs ``Setting up RL trainer...``;
    the pre-RL evaluation comes after. ``MILESTONES`` holds them in that order, the restore's begin just before its
    line, compile on either side of it."""
    functions = {f.name: _calls(f) for f in ast.parse(_source(TRAIN_RL)).body if isinstance(f, ast.FunctionDef)}
    _in_order(
        functions["_rl_train_impl"],
        [
            "model_creation_utils.create_models_and_meshes",
            "prepare_datasets",
            "create_rl_components",
            "Pre RL Training: ",
            "Starting RL training...",
        ],
    )
    restore = logged("Restored params from step: ")
    lines = _in_order(
        functions["create_rl_components"], ["Creating RL cluster...", restore.inside, "Setting up RL trainer..."]
    )
    marks = {
        "Creating RL cluster...": "RL cluster",
        restore.inside: "restored",
        "Setting up RL trainer...": "RL trainer",
    }
    upstream = [marks[key] for key in sorted(lines, key=lines.__getitem__)] + ["pre-RL eval"]
    assert [m for m, _ in startup.MILESTONES if m in upstream] == upstream
    names = [m for m, _ in startup.MILESTONES]
    index = names.index(startup.RESTORE_BEGUN)
    assert startup.MILESTONES[index - 1 : index + 3] == (
        ("RL cluster", "load"),
        (startup.RESTORE_BEGUN, "compile"),
        ("restored", "restore"),
        ("RL trainer", "compile"),
    )
    assert [row.text for row in LOGGED if row.source == "maxtext" and row.path == TRAIN_RL][:2] == [
        "Creating RL cluster...",
        "Setting up RL trainer...",
    ], "the table lists the lines in the order an attempt logs them"


def test_tunixs_lines_as_tunix_formats_them_are_read():
    """The restore's line gives the restore's seconds (its begin that much before it); the step's line is the first
    step."""
    start = datetime.datetime(2027, 1, 1, tzinfo=datetime.UTC)
    restore = logged("Restored params from step: ")
    marks = startup.log_marks(absl("0101 00:10:00", restore.form % (10, 118.25)), start)
    assert marks["restored"] - marks[startup.RESTORE_BEGUN] == 118.25
    assert evaluations.RESTORED.search(restore.form % (10, 1.0))
    step = logged("Train step ").form % (3, 0.6, 1.8)
    assert startup.log_marks(absl("0101 00:20:00", step), start) == {"first step": start.timestamp() + 1200}
    for row in LOGGED:
        assert startup.ABSL.match(absl("0101 00:20:00", row.text)), row
