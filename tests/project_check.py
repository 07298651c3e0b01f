"""tools/check_pulumi_project.py's YAML reading, for the tests of the preview's project check: each file's checks
run every time (``read_plain_yaml``), its text is parsed once per test process (``parse_plain_yaml``: PyYAML's
pure-Python events and loader, some 10 ms for Pulumi.yaml, which most of these tests read unchanged). A text that is
refused raises each time, as it does; each caller gets its own copy of a document. And the interpreter the workflows
run it with (``venv_python``)."""

from __future__ import annotations

import copy
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from tools import check_pulumi_project

PARSE = check_pulumi_project.parse_plain_yaml
_PARSED: dict[tuple[str, str], Any] = {}


def parsed_once(name: str, text: str) -> Any:
    if (name, text) not in _PARSED:
        _PARSED[name, text] = PARSE(name, text)
    return copy.deepcopy(_PARSED[name, text])


def venv_python(path: Path) -> Path:
    """``path`` as the ``python`` of a venv with PyYAML and ``core`` installed, as the workflows run the check with (the
    preview's pack venv holds the base's ``core``, the deploy's ``.venv`` the checkout's): this venv's, through a script
    (a link to it would be no venv's: Python finds its venv by the ``pyvenv.cfg`` beside the command it was run as)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
    path.chmod(0o755)
    return path


@pytest.fixture(autouse=True)
def plain_yaml_once(monkeypatch):
    """``check_pulumi_project.parse_plain_yaml`` once per text (the module's docstring)."""
    monkeypatch.setattr(check_pulumi_project, "parse_plain_yaml", parsed_once)
