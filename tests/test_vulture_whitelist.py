"""The dead-code whitelists say exactly what they excuse: vulture matches a whitelisted name wherever it is defined, so
each entry of ``tests/data/vulture-whitelist.txt`` (the product's, read by the scan of the product alone) and of
``tests/data/vulture-whitelist-tests.txt`` (the tests', read with it by this test's scan of the product and the
tests) names one definition (``module.Class.name``, ``module.function.parameter``, or a library's attribute the
project sets), under a comment saying who reads it; a project entry resolves to a definition in the tree, the
product's whitelist names none of the tests, and, without its whitelist, each scan reports exactly one definition per
entry: none hidden by another's name, none stale."""

from __future__ import annotations

import ast
import functools
import importlib.util
import tomllib
from collections import Counter
from pathlib import Path

import pytest

from tools.stack_files import ROOT

WHITELIST = ROOT / "tests" / "data" / "vulture-whitelist.txt"
"""The product's: what the scan of the product alone (``[tool.vulture]`` paths) reads."""
TESTS_WHITELIST = ROOT / "tests" / "data" / "vulture-whitelist-tests.txt"
"""The tests': what the scan of the product and the tests reads besides the product's."""
PROJECT_ROOTS = frozenset({"core", "infra", "workloads", "tools", "program", "policy", "tests"})
"""The first part of an entry that names the project's own code (any other names a library)."""

SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def dotted(node: ast.expr) -> str | None:
    """``a.b.c`` as written (None: anything but names and attributes)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def entries(text: str) -> list[tuple[int, str | None]]:
    """Each statement after the docstring: (its line, the dotted name it is; None: not one)."""
    body = ast.parse(text).body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return [(stmt.lineno, dotted(stmt.value) if isinstance(stmt, ast.Expr) else None) for stmt in body]


def _named_in(scope: ast.AST, name: str) -> ast.AST | None:
    """What defines ``name`` in ``scope``: a function, class or assignment of its body, a parameter of the function
    itself or of a lambda in it (nested functions and classes are looked into only by their own entries)."""
    if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
        for arg in (*scope.args.posonlyargs, *scope.args.args, *scope.args.kwonlyargs):
            if arg.arg == name:
                return arg
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        if isinstance(node, SCOPES):
            if node.name == name:
                return node
            continue
        if isinstance(node, ast.Lambda) and _named_in(node, name) is not None:
            return node
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return node
        todo.extend(ast.iter_child_nodes(node))
    return None


def defined(name: str, root: Path = ROOT) -> bool:
    """Whether a project entry names a definition in the tree under ``root``: its longest prefix that is a module,
    then each further part defined in the part before."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        base = root.joinpath(*parts[:end])
        module = next((p for p in (base.with_suffix(".py"), base / "__init__.py") if p.is_file()), None)
        if module is not None:
            break
    else:
        return False
    scope: ast.AST | None = ast.parse(module.read_text())
    for part in parts[end:]:
        scope = _named_in(scope, part) if scope is not None else None
    return scope is not None


@functools.cache
def imported_library(name: str, root: Path = ROOT) -> bool:
    """Whether the project's code or tests import ``name`` (installed here or not: the slow tier's and the by-hand
    fixtures' libraries are not in the fast tier's venv); only the files that mention it are parsed."""
    for top in sorted(PROJECT_ROOTS):
        for path in (root / top).rglob("*.py"):
            parts = path.relative_to(root).parts
            text = path.read_text() if "venv" not in parts and "vendor" not in parts else ""
            if name in text and name in _imports(ast.parse(text, filename=str(path))):
                return True
    return False


def _imports(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
        elif _imported_by_name(node):
            names.add(node.args[0].value.split(".")[0])  # type: ignore[attr-defined]
    return names


def _imported_by_name(node: ast.AST) -> bool:
    """``pytest.importorskip("x")`` or ``importlib.import_module("x")``: how a test imports an optional library."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("importorskip", "import_module")
        and bool(node.args)
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    )


def problems(text: str, root: Path = ROOT) -> list[str]:
    """What is wrong with a whitelist's text: an entry that is not a qualified name, has no comment above its block,
    or names no definition (a project entry) or no library the code imports (installed or not)."""
    lines = text.splitlines()
    found = []
    for lineno, name in entries(text):
        where = f"line {lineno}: {lines[lineno - 1].strip()}"
        if name is None or "." not in name:
            found.append(f"{where}: not a qualified name (module.Class.name, module.function.parameter)")
            continue
        above = lineno - 2
        while above >= 0 and dotted_line(lines[above]):
            above -= 1
        if above < 0 or not lines[above].lstrip().startswith("#"):
            found.append(f"{where}: no comment above it saying who reads it")
        first = name.split(".", 1)[0]
        if first in PROJECT_ROOTS:
            if not defined(name, root):
                found.append(f"{where}: no such definition in the tree")
        elif importlib.util.find_spec(first) is None and not imported_library(first, root):
            found.append(f"{where}: no library {first} is installed or imported by the code")
    return found


def dotted_line(line: str) -> bool:
    """Whether a line is an entry (a dotted name alone)."""
    try:
        tree = ast.parse(line.strip())
    except SyntaxError:
        return False
    return len(tree.body) == 1 and isinstance(tree.body[0], ast.Expr) and dotted(tree.body[0].value) is not None


@pytest.mark.parametrize("whitelist", [WHITELIST, TESTS_WHITELIST], ids=lambda p: p.name)
def test_every_entry_is_one_commented_definition_of_the_tree_or_a_library(whitelist):
    assert not problems(whitelist.read_text())


def test_the_products_whitelist_names_no_tests_definition():
    assert [name for _, name in entries(WHITELIST.read_text()) if name and name.startswith("tests.")] == []


PLANTED = '''"""A whitelist."""

# pytest runs it.
tests.loopback.PromptStop.serve_forever.poll_interval
tests.test_evaluate_export.test_no_answer_is_graded_as_maxtexts_fallback_and_recorded_empty.timeout_seconds
poll_interval

tests.loopback.PromptStop.serve_forever.poll_interval
'''


def test_a_bare_name_or_an_entry_without_its_comment_is_refused():
    assert problems(PLANTED) == [
        "line 6: poll_interval: not a qualified name (module.Class.name, module.function.parameter)",
        "line 8: tests.loopback.PromptStop.serve_forever.poll_interval: no comment above it saying who reads it",
    ]


@pytest.mark.parametrize(
    "name",
    [
        "tests.loopback.PromptStop.serve_forever.no_such_parameter",  # a parameter the method does not have
        "tests.loopback.LoopbackServer.serve_forever",  # defined in its base class, not in it
        "tests.no_such_module.anything",
        "tests.conftest.pytest_xdist_make_scheduler._split_scope",  # a method of the class defined there
        "core.boundary.Model.model_config.frozen",  # an argument of the call assigned, not a definition
    ],
)
def test_an_entry_that_names_no_definition_is_refused(name):
    assert not defined(name)
    assert problems(f"# who reads it\n{name}\n") == [f"line 2: {name}: no such definition in the tree"]


def test_a_definition_is_found_through_classes_functions_parameters_and_lambdas(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("def hook(a, *, b):\n    return lambda c: c\n")
    (tmp_path / "pkg" / "mod.py").write_text(
        "X: int = 1\nclass C:\n    y = 2\n    def m(self, z):\n        class Inner:\n            def n(self): pass\n"
    )
    for name in ("pkg.hook", "pkg.hook.a", "pkg.hook.b", "pkg.hook.c", "pkg.mod.X", "pkg.mod.C.y", "pkg.mod.C.m.z"):
        assert defined(name, tmp_path), name
    assert defined("pkg.mod.C.m.Inner.n", tmp_path)
    for name in ("pkg.hook.d", "pkg.mod.y", "pkg.mod.C.n", "pkg.mod.C.m.n", "pkg.other.X"):
        assert not defined(name, tmp_path), name


def unwhitelisted(whitelist: Path) -> Counter[str]:
    """The names of what vulture reports, one per definition, in the scan that reads ``whitelist`` but without it:
    the product alone, as ``make lint`` scans it, or the product and the tests."""
    from vulture.core import Vulture  # type: ignore[import-untyped]

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["vulture"]
    scanner = Vulture(ignore_names=config.get("ignore_names", []))
    paths = [ROOT / path for path in config["paths"]]
    if whitelist == TESTS_WHITELIST:
        paths.append(ROOT / "tests")
    scanner.scavenge([path for path in paths if path != whitelist], exclude=config["exclude"])
    return Counter(item.name for item in scanner.get_unused_code(min_confidence=config["min_confidence"]))


@pytest.mark.slow  # vulture reads the whole tree: ~3 s a scan
@pytest.mark.parametrize("whitelist", [WHITELIST, TESTS_WHITELIST], ids=lambda p: p.name)
def test_without_its_whitelist_each_scan_reports_one_definition_per_entry(whitelist):
    listed = Counter(name.rsplit(".", 1)[-1] for _, name in entries(whitelist.read_text()) if name)
    reported = unwhitelisted(whitelist)
    unlisted, stale = sorted((reported - listed).elements()), sorted((listed - reported).elements())
    assert not unlisted, f"dead code, or a definition whose entry is missing (one entry each): {unlisted}"
    assert not stale, f"entries for which vulture reports nothing (remove them): {stale}"
