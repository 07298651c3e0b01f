"""The product's Python files, parsed once per test process: what tests/test_limits.py and tests/test_errors.py
read (every file of ``core``, ``infra``, ``workloads``, ``tools``, ``program``, the policy pack and the entry point;
not the tests)."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

from tools.stack_files import ROOT

PRODUCT: tuple[str, ...] = ("core", "infra", "workloads", "tools", "program", "policy/tpu_rl_policies")
PRODUCT += ("policy/__main__.py", "__main__.py")


@cache
def product_files() -> tuple[Path, ...]:
    found: list[Path] = []
    for entry in PRODUCT:
        path = ROOT / entry
        found += [path] if path.is_file() else sorted(path.rglob("*.py"))
    return tuple(path for path in found if "venv" not in path.relative_to(ROOT).parts)


@cache
def parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)
