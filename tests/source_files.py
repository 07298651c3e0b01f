"""The product's Python files, parsed and walked once per test process: what tests/test_limits.py,
tests/test_errors.py and tests/test_bounded.py read (every file of ``core``, ``infra``, ``workloads``, ``tools``,
``program``, the policy pack and the entry point; not the tests)."""

from __future__ import annotations

import ast
import heapq
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


@cache
def _walked(path: Path) -> dict[type, list[tuple[int, ast.AST]]]:
    """Every node of ``path``'s tree by its type, each with its place in ``ast.walk``'s order."""
    found: dict[type, list[tuple[int, ast.AST]]] = {}
    for place, node in enumerate(ast.walk(parsed(path))):
        found.setdefault(type(node), []).append((place, node))
    return found


def nodes(path: Path, *kinds: type) -> list[ast.AST]:
    """The nodes of ``path``'s tree of exactly these types (``ast.ClassDef``, ...), in ``ast.walk``'s order: what
    ``[n for n in ast.walk(parsed(path)) if isinstance(n, kinds)]`` finds, for node types, which have no subclasses,
    without walking the tree again."""
    walked = _walked(path)
    return [node for _, node in heapq.merge(*(walked.get(kind, []) for kind in kinds), key=lambda pair: pair[0])]


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)
