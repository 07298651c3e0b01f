"""The lint tools see all the code: every Python file of the project is checked and formatted by ruff and type-checked
by mypy (pyproject.toml [tool.ruff], [tool.mypy]), and pre-commit runs the same checks as `make lint`.

A Python file of the project is one git tracks or would track (.gitignore leaves out the virtualenvs, setuptools'
build output, mutmut's copies and the caches); a new folder, or an exclude that grew too wide, fails here."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from tools.stack_files import ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _project_python_files() -> set[str]:
    """Every ``*.py`` git tracks or would track, relative to the root (a file deleted but not yet committed is
    left out)."""
    git = shutil.which("git")
    if git is None or not (ROOT / ".git").exists():
        pytest.skip("the project's files are what git tracks: needs git and the checkout's .git")
    listed = subprocess.run(
        [git, "ls-files", "--cached", "--others", "--exclude-standard", "-z", "--", "*.py"],
        cwd=ROOT,
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout.decode()
    found = {name for name in listed.split("\0") if name and (ROOT / name).is_file()}
    assert len(found) > 100 and "__main__.py" in found, found
    return found


def _ruff() -> Path:
    ruff = Path(sys.executable).parent / "ruff"
    if not ruff.exists():
        pytest.skip("ruff is not installed in this environment (make dev-venv)")
    return ruff


def test_ruff_checks_and_formats_every_python_file():
    """`ruff check .` and `ruff format .` (make lint), and pre-commit's ruff hooks with --force-exclude, see the
    files ruff's own discovery lists: every Python file of the project (a source folder named build
    too, which the root's ``./build`` exclude must not catch)."""
    shown = subprocess.run(
        [str(_ruff()), "check", "--show-files", "."], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60
    ).stdout
    checked = {Path(line).resolve().relative_to(ROOT).as_posix() for line in shown.splitlines() if line.strip()}
    missing = sorted(_project_python_files() - checked)
    assert not missing, f"ruff's excludes (pyproject.toml [tool.ruff]) leave out project files: {missing}"
    assert (
        "workloads/specs/step_specs.py" in checked
        and "policy/__main__.py" in checked
        and "tests/conftest.py" in checked
    )
    # `ruff format` discovers files as `ruff check` does, unless an exclude of its own or of the linter's narrows it.
    ruff = PYPROJECT["tool"]["ruff"]
    assert "exclude" not in ruff.get("format", {}) and "exclude" not in ruff.get("lint", {}), "one set of excludes"
    assert "exclude" not in ruff, "extend-exclude: ruff's default excludes (.git, caches, build/ ...) are kept"


def _mypy_sources() -> dict[str, str]:
    """The files `python -m mypy` (no arguments: pyproject.toml's ``files``) checks, path -> module name, as mypy's
    own discovery finds them (nothing is type-checked here)."""
    from mypy.config_parser import parse_config_file
    from mypy.find_sources import create_source_list
    from mypy.options import Options

    options = Options()
    parse_config_file(options, lambda: None, str(ROOT / "pyproject.toml"), io.StringIO(), io.StringIO())
    assert options.files, "pyproject.toml [tool.mypy] names the files `make lint` checks"
    sources = create_source_list([str(ROOT / f) for f in options.files], options)
    return {Path(s.path).resolve().relative_to(ROOT).as_posix(): s.module for s in sources if s.path}


def test_mypy_checks_every_python_file_once_by_its_import_name():
    """The configured files are every Python file of the project, the tests and the policy pack's __main__.py
    among them; each is one module, named as the tests import it (the pack's package ``policy.tpu_rl_policies`` and
    each of its modules, ``policy.tpu_rl_policies.scripts``)."""
    pytest.importorskip("mypy")
    checked = _mypy_sources()
    missing = sorted(_project_python_files() - set(checked))
    assert not missing, f"pyproject.toml [tool.mypy] files leave out project files: {missing}"
    assert checked["policy/tpu_rl_policies/__init__.py"] == "policy.tpu_rl_policies"
    pack = sorted(p for p in checked if p.startswith("policy/tpu_rl_policies/") and not p.endswith("__init__.py"))
    assert len(pack) > 10 and all(checked[p] == p.removesuffix(".py").replace("/", ".") for p in pack), pack
    assert checked["policy/__main__.py"] == "policy.__main__" and checked["tests/conftest.py"] == "tests.conftest"
    modules = sorted(checked.values())
    assert len(modules) == len(set(modules)), "a module name for two files: mypy stops at the second"


def test_pre_commit_runs_what_make_lint_runs_on_every_file():
    """Each hook is one of `make lint`'s checks with the project's venv; ruff is given every staged Python file
    (and `ruff format` the Markdown pages) and applies pyproject.toml's excludes to it (--force-exclude: a file
    named on the command line is checked otherwise); mypy and the import contracts take no file names, so they
    check the configured files (the tests among them) against each change."""
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    (repo,) = config["repos"]
    assert repo["repo"] == "local"
    hooks = {hook["id"]: hook for hook in repo["hooks"]}
    assert set(hooks) == {"ruff-check", "ruff-format", "mypy", "import-contracts", "vulture"}
    for hook in hooks.values():
        assert hook["language"] == "system" and hook["entry"].startswith(".venv/bin/"), hook
        assert "files" not in hook and "exclude" not in hook and "types" not in hook, f"{hook['id']}: every file"
    assert hooks["ruff-check"]["entry"] == ".venv/bin/ruff check --force-exclude"
    assert hooks["ruff-format"]["entry"] == ".venv/bin/ruff format --check --force-exclude"
    assert {"python", "markdown"} <= set(hooks["ruff-format"]["types_or"])
    assert hooks["mypy"]["entry"] == ".venv/bin/python -m mypy"
    assert hooks["import-contracts"]["entry"] == ".venv/bin/lint-imports"
    for name in ("ruff-check", "mypy", "import-contracts"):
        assert "python" in hooks[name]["types_or"], name
    for name in ("mypy", "import-contracts", "vulture"):
        assert hooks[name]["pass_filenames"] is False and "toml" in hooks[name]["types_or"], name
    lint = _make_lint_commands()
    for command in ("ruff check .", "ruff format --check .", "lint-imports", "-m mypy", "bin/vulture"):
        assert any(line.endswith(command) for line in lint), f"make lint runs {command}: {lint}"


def _make_lint_commands() -> list[str]:
    """The recipe lines of the Makefile's ``lint`` target."""
    lines = (ROOT / "Makefile").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("lint:"))
    recipe = []
    for line in lines[start + 1 :]:
        if not line.startswith("\t"):
            break
        recipe.append(line.strip())
    return recipe
