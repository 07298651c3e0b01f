"""The log lines the program parses are the ones the pinned MaxText prints: each message is taken from the release's
own source (vendored by tools/adopt_maxtext.py), formatted as Python formats it, and read back by the parser that
relies on it (workloads/observe/evaluations.py, workloads/observe/startup.py, workloads/container/train_exit.py).

tunix's lines (``Train step N training loss``, ``Restored params from step``) are not in MaxText's wheel: the image's
tunix is the commit the wheel pins (``wheel.json`` ``post_train_github_deps``), read by a human at adoption
(docs/releases.md "Adopting a MaxText release")."""

from __future__ import annotations

import ast
import lzma
from typing import Any

import pytest

from core.maxtext_keys import MAXTEXT_VERSION
from tests.conftest import VENDORED
from workloads.container import train_exit
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


def _absl(message: str, level: str = "W", where: str = "train_rl.py:744") -> str:
    """The line absl writes for a message (its prefix as ``startup.ABSL`` reads it)."""
    return f"{level}1130 05:02:03.000000 1 {where}] {message}"


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
