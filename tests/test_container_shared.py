"""What the container programs share is defined once: no class or top-level function of ``workloads/container`` is a
copy of another file's (the same code under any name, or a same-named one changed in a word), and every program that
imports a shared module (``tpu_rl_program.py``, every step's; ``tpu_rl_watch.py``, training's;
``tpu_rl_download.py``, the evaluation's and the publication's) gets it beside it in its ConfigMap
(``workloads.specs.commands.program_files``), and no step gets one its programs do not import: a change to a shared
module renames only the steps that use it."""

from __future__ import annotations

import ast
import difflib
import functools
import itertools
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.lifecycle_walk import settings
from workloads.container import checkpoint_scan, tpu_rl_program
from workloads.specs import commands
from workloads.specs.commands import program_files
from workloads.specs.step_specs import plan_workflow

pytestmark = pytest.mark.pure  # files only

CONTAINER = Path(__file__).parents[1] / "workloads" / "container"
SHARED = "tpu_rl_program"
"""What every step's programs share: how a run ends."""
WATCH = "tpu_rl_watch"
"""What training's watchers share (the stall watchdog, the restart drill, the slice's wait)."""
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
    shared = (CONTAINER / f"{WATCH}.py").read_text()
    alive = ast.get_source_segment(shared, next(n for n in ast.parse(shared).body if getattr(n, "name", "") == "alive"))
    assert alive is not None
    planted = programs / "watcher.py"
    planted.write_text(f"import os\n\n\n{alive}\n")
    assert duplicates(programs) == [f"{WATCH}.py:alive and watcher.py:alive"]
    planted.write_text(f"import os\n\n\n{alive.replace('def alive', 'def running').replace('Whether', 'If')}\n")
    assert duplicates(programs) == [f"{WATCH}.py:alive and watcher.py:running"], "renamed and reworded"


def test_a_planted_error_class_or_a_drifted_copy_is_found(programs):
    planted = 'class StepRefusedError(BadInputError):\n    """Not retried."""\n\n    exit_code = REFUSED\n'
    (programs / "watcher.py").write_text(planted)
    assert f"{SHARED}.py:RefusedError and watcher.py:StepRefusedError" in duplicates(programs)
    drifted = "def duration(seconds):\n    return f'{int(seconds) // 60}m{int(seconds) % 60:02d}s'\n"
    (programs / "watcher.py").write_text(drifted)
    assert duplicates(programs) == [], "a same-named definition that is not alike is no copy"
    shared = (CONTAINER / f"{WATCH}.py").read_text()
    start = shared.index("def duration(")
    copy = shared[start:].split("\n\n\n")[0].replace("h{minutes:02d}m", "h{minutes:02d}")
    (programs / "watcher.py").write_text(copy + "\n")
    assert duplicates(programs) == [f"{WATCH}.py:duration and watcher.py:duration"]


def _imports(name: str, module: str) -> bool:
    tree = ast.parse((CONTAINER / name).read_text())
    bare = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and not node.level}
    bare |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    return module in bare


IMPORTERS = {
    SHARED: (
        "base_snapshot.py",
        "checkpoint_scan.py",
        "complete_export.py",
        "evaluate_export.py",
        "publish_hub.py",
        "slice_state.py",
        "stage_dataset.py",
    ),
    WATCH: ("restart_drill.py", "slice_state.py", "stall_watchdog.py"),
    "tpu_rl_download": ("evaluate_export.py", "publish_hub.py"),
}
"""Each shared module, and the programs that import it."""
USERS = {SHARED: {"convert", "train", "export", "evaluate", "publish"}, WATCH: {"train"}}
USERS["tpu_rl_download"] = {"evaluate", "publish"}
"""The steps whose ConfigMaps ship each shared module."""
EVERY_STEP = ["tpu-rl:publish.repo=me/model", "tpu-rl:workflow.steps.evaluate=true"]


def _programs(step: Any) -> dict[str, str]:
    """The programs of ``step``'s ConfigMap (its script names the paths it reads and writes: the steps before it)."""
    return {name: text for name, text in step.scripts["data"].items() if name.endswith(".py")}


@pytest.mark.parametrize("module", sorted(IMPORTERS))
def test_every_program_that_imports_a_shared_module_gets_it_beside_it(module):
    programs = sorted(p.name for p in CONTAINER.glob("*.py") if p.stem not in ("__init__", module))
    assert [name for name in programs if _imports(name, module)] == list(IMPORTERS[module])
    for name in IMPORTERS[module]:
        files = program_files(name)
        assert files[f"{module}.py"] == (CONTAINER / f"{module}.py").read_text(), name
    assert f"{module}.py" not in program_files("train_exit.py", "mark_folder.py", "maxtext_check.py")


@pytest.mark.parametrize("module", sorted(USERS))
def test_a_shared_module_is_shipped_by_the_steps_that_use_it_and_no_other(module):
    shipped = {step.step for step in plan_workflow(settings("prod", EVERY_STEP)) if f"{module}.py" in _programs(step)}
    assert shipped == USERS[module]


def _changed(monkeypatch: pytest.MonkeyPatch, file_name: str, old: str, new: str) -> tuple[list, list]:
    """The example stack's steps (every step on) before and after ``old`` becomes ``new`` in the program
    ``file_name`` as the steps ship it."""
    before = list(plan_workflow(settings("prod", EVERY_STEP)))
    source = commands._container_source

    def edited(name: str) -> str:
        text = source(name)
        if name != file_name:
            return text
        assert old in text
        return text.replace(old, new)

    monkeypatch.setattr(commands, "_container_source", edited)
    return before, list(plan_workflow(settings("prod", EVERY_STEP)))


def test_a_training_only_constant_renames_only_training(monkeypatch):
    """``KILL_AFTER`` is training's alone (its watchers'): a change to it changes training's ConfigMap and name, and
    no other step's files; the conversion keeps its name (in a shared file it renamed every step). The steps after
    training are renamed only as any change to training renames them: they read its output, whose path is its name."""
    before, after = _changed(monkeypatch, f"{WATCH}.py", "KILL_AFTER = 30", "KILL_AFTER = 31")
    changed_files = [b.step for b, a in zip(before, after, strict=True) if _programs(b) != _programs(a)]
    assert changed_files == ["train"]
    assert [b.step for b, a in zip(before, after, strict=True) if b.name != a.name][:2] == ["train", "export"]
    assert before[0].name == after[0].name, "the conversion runs no code of training's"


def test_a_shared_constant_changes_every_steps_files(monkeypatch):
    """The counterpart: what every step ships (how a run ends) changes every step's ConfigMap."""
    before, after = _changed(monkeypatch, f"{SHARED}.py", "REFUSED = 3", "REFUSED = 4")
    assert all(_programs(b) != _programs(a) and b.name != a.name for b, a in zip(before, after, strict=True))


def test_the_shared_errors_keep_each_programs_exit():
    assert (tpu_rl_program.REFUSED, tpu_rl_program.FAILED) == (3, 1)
    assert issubclass(checkpoint_scan.ListingTooLongError, tpu_rl_program.FailedError)
    assert not issubclass(tpu_rl_program.RefusedError, tpu_rl_program.FailedError)
