"""The limits that keep the product's code readable, kept by a test rather than by memory: a module of at most
``MAX_MODULE_LINES`` lines and a function of at most ``MAX_FUNCTION_LINES`` (each exception named here, with its
reason and its own ceiling), and no import circle between the project's modules. That no code outside the step
catalogue compares with or binds a step's name is ``tests/test_step_roles.py``'s.

The product is every Python file of ``core``, ``infra``, ``workloads``, ``tools``, ``program``, the policy pack and
the entry point; the tests are not held to the sizes (a test module keeps one concern's cases together). Dead code
is vulture's, at 60 % confidence: in ``make lint`` over the product alone (``[tool.vulture]`` in pyproject.toml),
where code only the tests use is dead, and in the slow tier over the product with the tests too
(``tests/test_vulture_whitelist.py``; what only a caller outside the project reads is listed in
``tests/data/vulture-whitelist.txt`` and ``tests/data/vulture-whitelist-tests.txt``). The files are parsed and
walked once per process (``tests.source_files``), in well under a second.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from tests.source_files import module_name, nodes, parsed, product_files, rel

# Not `pure`: these read the tree's files, which a mutation run's copy (mutants/) holds as mutmut rewrote them.

MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80

LONG_MODULES: dict[str, tuple[int, str]] = {}
"""Modules allowed past ``MAX_MODULE_LINES``: path -> (its own ceiling, why it is one file)."""

LONG_FUNCTIONS: dict[str, tuple[int, str]] = {}
"""Functions allowed past ``MAX_FUNCTION_LINES``: ``path:qualified name`` -> (its own ceiling, why)."""


HOLDS_STATEMENTS = (ast.stmt, ast.excepthandler, ast.match_case)
"""The nodes a function definition can be found under: statements and the clauses that hold statements (an
expression holds none: a lambda is no ``FunctionDef``)."""


def functions(tree: ast.AST, prefix: str = "") -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every function and method with its qualified name (``Class.method``, ``outer.inner``), in the order of the
    source (the expressions, which hold none, not walked)."""
    found = []
    for node in ast.iter_child_nodes(tree):
        if not isinstance(node, HOLDS_STATEMENTS):
            continue
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found.append((prefix + node.name, node))
            found += functions(node, prefix + node.name + ".")
        elif isinstance(node, ast.ClassDef):
            found += functions(node, prefix + node.name + ".")
        else:
            found += functions(node, prefix)
    return found


@functools.cache
def functions_of(path: Path) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """``functions`` of a product file, found once per process (two checks read them)."""
    return functions(parsed(path))


def test_modules_are_at_most_600_lines_or_named_with_their_reason():
    too_long = {}
    for path in product_files():
        lines = len(path.read_text().splitlines())
        ceiling, _ = LONG_MODULES.get(rel(path), (MAX_MODULE_LINES, ""))
        if lines > ceiling:
            too_long[rel(path)] = lines
    assert not too_long, f"split these modules (at most {MAX_MODULE_LINES} lines, LONG_MODULES: ceiling): {too_long}"


def test_functions_are_at_most_80_lines_or_named_with_their_reason():
    too_long = {}
    for path in product_files():
        for name, node in functions_of(path):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            ceiling, _ = LONG_FUNCTIONS.get(f"{rel(path)}:{name}", (MAX_FUNCTION_LINES, ""))
            if lines > ceiling:
                too_long[f"{rel(path)}:{name}"] = lines
    assert not too_long, f"split these functions (at most {MAX_FUNCTION_LINES} lines): {too_long}"


def test_every_named_exception_is_still_needed_and_says_why():
    """A listed module or function that shrank back under the limit leaves the list; a reason is a sentence."""
    sizes = {rel(path): len(path.read_text().splitlines()) for path in product_files()}
    assert {path for path in LONG_MODULES if sizes.get(path, 0) <= MAX_MODULE_LINES} == set()
    lengths = {
        f"{rel(path)}:{name}": (node.end_lineno or node.lineno) - node.lineno + 1
        for path in product_files()
        for name, node in functions_of(path)
    }
    assert {name for name in LONG_FUNCTIONS if lengths.get(name, 0) <= MAX_FUNCTION_LINES} == set()
    assert all(len(why) > 40 for _, why in [*LONG_MODULES.values(), *LONG_FUNCTIONS.values()])


def imports(path: Path, modules: set[str]) -> set[str]:
    """The project modules ``path`` imports anywhere (at the top, in a function, under ``TYPE_CHECKING``)."""
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found = set()
    for node in nodes(path, ast.Import, ast.ImportFrom):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        else:
            continue
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != here:
                found.add(name)
    return found


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for after in sorted(graph[node]):
            if after not in index:
                visit(after)
                low[node] = min(low[node], low[after])
            elif after in on_stack:
                low[node] = min(low[node], index[after])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


@functools.cache
def import_graph() -> dict[str, set[str]]:
    paths = {module_name(path): path for path in product_files()}
    modules = set(paths)
    graph = {name: imports(path, modules) for name, path in paths.items()}
    # A package's __init__ is imported with each of its modules: importing ``a.b`` runs ``a`` first.
    return {name: {m for m in after if not name.startswith(m + ".")} for name, after in graph.items()}


def test_no_import_circle():
    assert circles(import_graph()) == []


def test_the_circle_check_finds_a_circle_through_a_type_checking_import():
    """The check itself: two modules that import each other, one only for its types, are a circle."""
    graph = {"tools.a": {"tools.b"}, "tools.b": {"tools.a"}, "tools.c": {"tools.a"}}
    assert circles(graph) == [["tools.a", "tools.b"]]
    assert "tools.report_info" in import_graph()["tools.report_html"]


def component_args_fields() -> dict[str, list[tuple[str, str]]]:
    """Each ``*Args`` or ``*Inputs`` dataclass of the components (``infra``, ``workloads``): its fields and their
    annotations."""
    found = {}
    for path in product_files():
        if not rel(path).startswith(("infra/", "workloads/")):
            continue
        for node in nodes(path, ast.ClassDef):
            if isinstance(node, ast.ClassDef) and node.name.endswith(("Args", "Inputs")):
                found[f"{rel(path)}:{node.name}"] = [
                    (item.target.id, ast.unparse(item.annotation))
                    for item in node.body
                    if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
                ]
    return found


def test_components_declare_their_own_inputs():
    """A component takes what it uses (as pulumi-eks's components do), never the whole settings or the names, and
    reads the world through a reader it is given (None offline), never a ``live`` flag."""
    fields = component_args_fields()
    assert {"infra/gcp/cluster.py:GkeClusterArgs", "infra/k8s/platform.py:PlatformArgs"} <= set(fields)
    assert "workloads/workflow.py:WorkflowArgs" in fields and "workloads/specs/step_inputs.py:TrainInputs" in fields
    wide = {
        f"{where}.{name}": annotation
        for where, pairs in fields.items()
        for name, annotation in pairs
        if name == "live" or annotation.split(" | ")[0] in ("Settings", "Names")
    }
    assert wide == {}
