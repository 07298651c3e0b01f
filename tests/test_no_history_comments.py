"""The code says what it does and why, never which issue brought it: no ``issue N`` (nor ``Issue N item M``, nor a
name such as ``before_issue_N``) in the product, the tests, the tools, the Makefile, the stacks' and the project's
configuration, or the CI. Which change brought what is the history's to say (the commits, CHANGELOG.md); the docs
and the vendored upstream files are not read, and an upstream project's issue is cited by its address
(``.../issues/123``), which this does not match."""

from __future__ import annotations

import os
import re
from pathlib import Path

from tools.stack_files import ROOT

HISTORY = re.compile(r"(?<![a-z])issues?[ _]#?[0-9]+", re.IGNORECASE)
"""A mention of an issue by its number: the word (either case, singular or plural) then a space, ``#`` or ``_``
and the number, not inside a longer word."""

CODE_SUFFIXES = frozenset({".py", ".sh", ".toml", ".yaml", ".yml"})
CODE_NAMES = frozenset({"Makefile", "run"})
"""Code without a suffix: the Makefile and CI's entry point (``.ci/run``)."""

NOT_CODE = frozenset({"docs", "vendor", "venv", ".venv", ".git", "build", "mutants", "__pycache__"})
"""Folders not read: the docs, the vendored upstream files (``tests/data/vendor``), virtual environments, the
repository's own store and what tools write (every folder whose name starts with a dot but ``.ci`` and ``.github``
is skipped too: caches)."""


def code_files(root: Path) -> list[Path]:
    found = []
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = sorted(
            name
            for name in subfolders
            if name not in NOT_CODE and (not name.startswith(".") or name in (".ci", ".github"))
        )
        found += [
            Path(folder, name) for name in sorted(files) if Path(name).suffix in CODE_SUFFIXES or name in CODE_NAMES
        ]
    return found


def history(root: Path) -> list[str]:
    """Each line of the code under ``root`` that names an issue: ``path:line: text``."""
    found = []
    for path in sorted(code_files(root)):
        text = path.read_text(errors="replace")
        lines = {text.count("\n", 0, match.start()) for match in HISTORY.finditer(text)}
        found += [f"{path.relative_to(root).as_posix()}:{n + 1}: {text.splitlines()[n].strip()}" for n in sorted(lines)]
    return found


def test_no_code_names_the_issue_that_brought_it():
    found = history(ROOT)
    assert not found, "say what the code does and why, not which issue brought it:\n" + "\n".join(found)


def test_a_planted_mention_is_found_in_any_code_and_nowhere_history_belongs(tmp_path):
    issue = "issue"  # spelled apart, so that this file does not name one
    planted = {  # (folder, ..., file): text; the paths of the tree's own files, where they are read
        ("core", "knobs.py"): f'"""Knobs."""\n\nX = 1  # ({issue} 58 item 8)\n',
        ("tests", "test_lifecycle.py"): f'def test_x():\n    """{issue.title()} 41: the account."""\n',
        ("tests", "test_lifecycle_upgrades.py"): f"def accounts_before_{issue}_41():\n    pass\n",
        ("Makefile",): f"lint:\n\t# {issue}s 37 and 38\n",
        (".ci", "run"): f"#!/usr/bin/env bash\n# {issue} #12\n",
        (".github", "workflows", "test.yml"): f"# {issue} 9\non: push\n",
        ("pyproject.toml",): f"# {issue} 7\n",
        (
            "core",
            "state_names.py",
        ): f"# https://github.com/kubernetes/kubernetes/{issue}s/12 and a tissue 3 layers deep\n",
        # Where history belongs, or upstream's: not read.
        ("CHANGELOG.md",): f"## 2\n- {issue} 61: dead code gone\n",
        ("docs", "conf.py"): f"# the {issue} 5 change\n",
        ("tests", "data", "vendor", "upstream.py"): f"# {issue} 1234 upstream\n",
        (".mypy_cache", "x.py"): f"# {issue} 1\n",
        ("venv", "lib", "y.py"): f"# {issue} 2\n",
    }
    for parts, text in planted.items():
        tmp_path.joinpath(*parts).parent.mkdir(parents=True, exist_ok=True)
        tmp_path.joinpath(*parts).write_text(text)
    assert history(tmp_path) == [
        f".ci/run:2: # {issue} #12",
        f".github/workflows/test.yml:1: # {issue} 9",
        f"Makefile:2: # {issue}s 37 and 38",
        f"core/knobs.py:3: X = 1  # ({issue} 58 item 8)",
        f"pyproject.toml:1: # {issue} 7",
        f'tests/test_lifecycle.py:2: """{issue.title()} 41: the account."""',
        f"tests/test_lifecycle_upgrades.py:1: def accounts_before_{issue}_41():",
    ]
