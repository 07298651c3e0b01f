"""What the container programs share is defined once: no class or top-level function of ``workloads/container`` is a
copy of another file's (the same code under any name, or a same-named one changed in a word), and every program that
imports the shared module (``tpu_rl_program.py``) gets it beside it in its ConfigMap
(``workloads.specs.commands.program_files``)."""

from __future__ import annotations

import ast
import difflib
import functools
import itertools
import shutil
from pathlib import Path

import pytest

from workloads.container import tpu_rl_program
from workloads.specs.commands import program_files

pytestmark = pytest.mark.pure  # files only

CONTAINER = Path(__file__).parents[1] / "workloads" / "container"
SHARED = "tpu_rl_program"
ENTRY_POINT = "main"
"""Every program's entry point: the one name each program defines for itself."""
DRIFTED = 0.9
"""How alike two same-named definitions may be before one is a copy of the other with a word changed (the two
``CappedFile`` classes that differed in one argument were 0.96 alike; unrelated ``check`` functions are near 0.2)."""


Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def _code(node: Definition) -> str:
    """``node``'s code without its name and its docstrings (what a copy keeps when its words are reworded); ``node`` is
    changed."""
    for inner in ast.walk(node):
        if isinstance(inner, Definition):
            first = inner.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                inner.body = inner.body[1:] or [ast.Pass()]
    node.name = "_"
    return ast.unparse(node)


@functools.cache
def _definitions(text: str) -> tuple[tuple[str, str], ...]:
    return tuple((node.name, _code(node)) for node in ast.parse(text).body if isinstance(node, Definition))


def definitions(folder: Path) -> list[tuple[str, str, str]]:
    """(file, name, code) of each class and top-level function of the folder's programs."""
    return [(path.name, *found) for path in sorted(folder.glob("*.py")) for found in _definitions(path.read_text())]


def _alike(code: str, other: str) -> bool:
    matcher = difflib.SequenceMatcher(None, code, other, autojunk=False)
    return matcher.quick_ratio() >= DRIFTED and matcher.ratio() >= DRIFTED


def duplicates(folder: Path) -> list[str]:
    """Each pair of definitions in two files of ``folder`` that is one definition twice: the same code under any name,
    or the same name (but ``main``) with code at least ``DRIFTED`` alike."""
    found = []
    for (file, name, code), (other_file, other, other_code) in itertools.combinations(definitions(folder), 2):
        same_name = name == other != ENTRY_POINT
        if file != other_file and (code == other_code or (same_name and _alike(code, other_code))):
            found.append(f"{file}:{name} and {other_file}:{other}")
    return found


def test_no_definition_is_a_copy_of_another_files():
    assert duplicates(CONTAINER) == []


@pytest.fixture
def programs(tmp_path: Path) -> Path:
    """A copy of the container programs' folder, to plant a copy in."""
    folder = tmp_path / "container"
    shutil.copytree(CONTAINER, folder, ignore=shutil.ignore_patterns("__pycache__"))
    return folder


def test_a_planted_copy_of_a_shared_helper_is_found(programs):
    shared = (CONTAINER / f"{SHARED}.py").read_text()
    alive = ast.get_source_segment(shared, next(n for n in ast.parse(shared).body if getattr(n, "name", "") == "alive"))
    assert alive is not None
    planted = programs / "watcher.py"
    planted.write_text(f"import os\n\n\n{alive}\n")
    assert duplicates(programs) == [f"{SHARED}.py:alive and watcher.py:alive"]
    planted.write_text(f"import os\n\n\n{alive.replace('def alive', 'def running').replace('Whether', 'If')}\n")
    assert duplicates(programs) == [f"{SHARED}.py:alive and watcher.py:running"], "renamed and reworded"


def test_a_planted_error_class_or_a_drifted_copy_is_found(programs):
    planted = 'class StepRefusedError(BadInputError):\n    """Not retried."""\n\n    exit_code = REFUSED\n'
    (programs / "watcher.py").write_text(planted)
    assert f"{SHARED}.py:RefusedError and watcher.py:StepRefusedError" in duplicates(programs)
    drifted = "def duration(seconds):\n    return f'{int(seconds) // 60}m{int(seconds) % 60:02d}s'\n"
    (programs / "watcher.py").write_text(drifted)
    assert duplicates(programs) == [], "a same-named definition that is not alike is no copy"
    shared = (CONTAINER / f"{SHARED}.py").read_text()
    start = shared.index("def duration(")
    copy = shared[start : shared.index("\n\n\n", start)].replace("h{minutes:02d}m", "h{minutes:02d}")
    (programs / "watcher.py").write_text(copy + "\n")
    assert duplicates(programs) == [f"{SHARED}.py:duration and watcher.py:duration"]


def _imports_shared(name: str) -> bool:
    tree = ast.parse((CONTAINER / name).read_text())
    bare = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and not node.level}
    bare |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    return SHARED in bare


IMPORTERS = (
    "base_snapshot.py",
    "checkpoint_scan.py",
    "complete_export.py",
    "evaluate_export.py",
    "publish_hub.py",
    "restart_drill.py",
    "slice_state.py",
    "stage_dataset.py",
    "stall_watchdog.py",
)


def test_every_program_that_imports_the_shared_module_gets_it_beside_it():
    programs = sorted(p.name for p in CONTAINER.glob("*.py") if p.stem not in ("__init__", SHARED))
    assert [name for name in programs if _imports_shared(name)] == list(IMPORTERS)
    for name in IMPORTERS:
        files = program_files(name)
        assert files[f"{SHARED}.py"] == (CONTAINER / f"{SHARED}.py").read_text(), name
    assert f"{SHARED}.py" not in program_files("train_exit.py", "mark_folder.py", "maxtext_check.py")


def test_the_shared_errors_keep_each_programs_exit():
    assert (tpu_rl_program.REFUSED, tpu_rl_program.FAILED) == (3, 1)
    assert issubclass(tpu_rl_program.ListingTooLongError, tpu_rl_program.FailedError)
    assert not issubclass(tpu_rl_program.RefusedError, tpu_rl_program.FailedError)
