"""A step's name is what it runs (``workloads.specs.behaviour``): a change to a program's comments or docstrings renames
no step, a change to its code renames the steps that run it, and the name is the same under every Python that
`pulumi up` may run on."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.lifecycle_walk import settings
from tools.stack_files import ROOT
from workloads.specs import commands
from workloads.specs.behaviour import behaviour
from workloads.specs.step_specs import plan_workflow

pytestmark = pytest.mark.program

CONTAINER = ROOT / "workloads" / "container"
SOURCE = '''"""A module's docstring — with a dash…"""

import os  # a comment

LIMIT = 3
"""An attribute's docstring."""


class Reader:
    """A class's docstring."""

    def read(self, path: str) -> str:
        """A method's docstring, over
        two lines."""
        text = "# not a comment"  # a comment after code
        return text + os.sep  # another
'''


def test_what_explains_a_program_is_dropped_and_what_it_does_is_kept():
    assert behaviour(SOURCE) == (
        "import os\n"
        "LIMIT = 3\n"
        "class Reader:\n"
        "    def read(self, path: str) -> str:\n"
        '        text = "# not a comment"\n'
        "        return text + os.sep\n"
    )
    for bash in ("echo hi  # a bash comment\n", "set -euo pipefail\n[[ -f x ]] && y\n"):
        assert behaviour(bash) == bash, "not Python: hashed as it is"


@pytest.mark.parametrize(
    ("before", "after", "same"),
    [
        ('x = 1\n"""Explains x."""\n', 'x = 1\n"""Explains x better."""\n', True),
        ("x = 1  # one\n", "x = 1  # uno\n\n\n", True),
        ("def f():\n    '''Doc.'''\n    return 1\n", "def f():\n    return 1\n", True),
        ("x = 1\n", "x = 2\n", False),
        ('x = "a"\n', 'x = "b"\n', False),  # a string the program uses
        ("if a:\n    b()\nc()\n", "if a:\n    b()\n    c()\n", False),  # the nesting of its blocks
        ('print("""text""")\n', 'print("""other""")\n', False),  # a string argument is no docstring
    ],
)
def test_a_change_renames_exactly_when_it_changes_what_runs(before, after, same):
    assert (behaviour(before) == behaviour(after)) == same


def _names(monkeypatch: pytest.MonkeyPatch, program: str, edit) -> list[str]:
    real = commands.program_file
    monkeypatch.setattr(commands, "program_file", lambda name: edit(real(name)) if name == program else real(name))
    return [step.name for step in plan_workflow(settings("prod", [])).steps]


def test_a_programs_docstring_renames_no_step_and_its_code_renames_those_that_run_it(monkeypatch):
    """``train_exit.py`` runs in training alone: a new docstring keeps every name; a new constant renames training
    and the steps after it, never the conversion."""
    names = _names(monkeypatch, "train_exit.py", lambda text: text)
    documented = _names(monkeypatch, "train_exit.py", lambda text: text.replace('"""', '"""Newly explained. ', 1))
    commented = _names(monkeypatch, "train_exit.py", lambda text: text.replace("\nimport ", "\n# why\nimport ", 1))
    assert documented == commented == names
    changed = _names(
        monkeypatch, "train_exit.py", lambda text: text.replace("CHECK_SECONDS = 60", "CHECK_SECONDS = 61")
    )
    assert changed[0] == names[0] and changed[1:] != names[1:] and len(set(changed[1:]) & set(names)) == 0


def _interpreter(python: str) -> str | None:
    """``python`` that runs: on the ``PATH``, else pyenv's (whose shim answers only where the version is selected)."""
    candidates = [shutil.which(python), *sorted(Path.home().glob(f".pyenv/versions/{python[6:]}*/bin/{python}"))]
    for candidate in filter(None, candidates):
        if subprocess.run([str(candidate), "-c", "pass"], capture_output=True, timeout=30).returncode == 0:
            return str(candidate)
    return None


@pytest.mark.slow
@pytest.mark.parametrize("python", ["python3.12", "python3.13"])
def test_every_program_is_hashed_alike_under_every_python(python, tmp_path):
    """``requires-python >= 3.11``: the operator's Python may tokenize f-strings otherwise (3.12's FSTRING_* tokens),
    and must name every step alike."""
    found = _interpreter(python)
    if found is None:
        pytest.skip(f"no {python} on this machine")
    programs = sorted(p.name for p in CONTAINER.glob("*.py") if p.name != "__init__.py")
    script = (
        "import sys\nfrom pathlib import Path\nsys.path.insert(0, sys.argv[1])\nfrom behaviour import behaviour\n"
        "for name in sys.argv[4:]:\n"
        "    Path(sys.argv[3], name).write_text(behaviour(Path(sys.argv[2], name).read_text()))\n"
    )
    out = tmp_path / "out"
    out.mkdir()
    module = str(ROOT / "workloads" / "specs")  # behaviour.py imports the standard library alone
    subprocess.run([found, "-I", "-c", script, module, str(CONTAINER), str(out), *programs], check=True, timeout=60)
    for name in programs:
        assert Path(out, name).read_text() == behaviour((CONTAINER / name).read_text()), name
