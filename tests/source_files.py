"""The product's Python files, parsed and walked once per test process: what tests/test_limits.py,
tests/test_errors.py and tests/test_bounded.py read (every file of ``core``, ``infra``, ``workloads``, ``tools``,
``program``, the policy pack and the entry point; not the tests)."""

from __future__ import annotations

import ast
import heapq
from collections import deque
from functools import cache
from pathlib import Path

from tools.stack_files import ROOT

PRODUCT: tuple[str, ...] = ("core", "infra", "workloads", "tools", "program", "policy/tpu_rl_policies")
PRODUCT += ("policy/__main__.py", "policy/judge_preview.py", "__main__.py")


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


HOLDS_STATEMENTS = (ast.stmt, ast.excepthandler, ast.match_case)
"""The nodes a statement can be found under (an expression holds none)."""


@cache
def _walked(path: Path, statements: bool) -> dict[type, list[tuple[int, ast.AST]]]:
    """Every node of ``path``'s tree by its type, each with its place in ``ast.walk``'s order; ``statements``: the
    statements alone (the walk does not enter expressions), in the same order."""
    found: dict[type, list[tuple[int, ast.AST]]] = {}
    todo: deque[ast.AST] = deque([parsed(path)])
    place = 0
    while todo:
        node = todo.popleft()
        if statements:
            todo.extend(child for child in ast.iter_child_nodes(node) if isinstance(child, HOLDS_STATEMENTS))
        else:
            todo.extend(ast.iter_child_nodes(node))
        found.setdefault(type(node), []).append((place, node))
        place += 1
    return found


def nodes(path: Path, *kinds: type) -> list[ast.AST]:
    """The nodes of ``path``'s tree of exactly these types (``ast.ClassDef``, ...), in ``ast.walk``'s order: what
    ``[n for n in ast.walk(parsed(path)) if isinstance(n, kinds)]`` finds, for node types, which have no subclasses,
    without walking the tree again (nor its expressions, for statements alone)."""
    walked = _walked(path, all(issubclass(kind, ast.stmt) for kind in kinds))
    return [node for _, node in heapq.merge(*(walked.get(kind, []) for kind in kinds), key=lambda pair: pair[0])]


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)
