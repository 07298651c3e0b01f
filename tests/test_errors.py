"""One error tree (``core.errors``): every exception class the product defines is a ``TpuRlError``, bad input exits
2 and a failure 1, and each CLI's entry point catches the base alone, so a new refusal needs no new ``except``."""

from __future__ import annotations

import ast
import builtins
import importlib

import pytest

from core.errors import BAD_INPUT, FAILED, BadInputError, TpuRlError
from tests.source_files import module_name, nodes, parsed, product_files, rel

pytestmark = pytest.mark.pure  # files and imports only

STANDALONE = {
    "workloads/container/": "a container program is one file of its step's ConfigMap, run in the image, and imports "
    "nothing of the project but core/hf_model.py (inlined into its text: workloads/specs/commands.py `program`)",
    "core/hf_model.py": "inlined into the container programs' text (workloads/specs/commands.py `_with_hf_model`): "
    "it imports the standard library and the image's packages alone",
    "tools/check_pulumi_project.py": "copied alone to where the branch cannot write and run with the base pack's "
    "interpreter: it imports nothing of the project",
}
"""Where an exception class may stand alone: path (or folder) -> why."""

BUILTIN_EXCEPTIONS = {
    name
    for name in dir(builtins)
    if isinstance(getattr(builtins, name), type) and issubclass(getattr(builtins, name), BaseException)
}


def _base_names(node: ast.ClassDef) -> set[str]:
    names = set()
    for base in node.bases:
        if isinstance(base, ast.Name):
            names.add(base.id)
        elif isinstance(base, ast.Attribute):
            names.add(base.attr)
    return names


def exception_classes() -> list[tuple[str, str]]:
    """(module, class) of every exception the product defines, found by its bases (a built-in exception, or a class
    found so), outside the standalone files."""
    classes = [
        (path, node)
        for path in product_files()
        if not any(rel(path).startswith(prefix) for prefix in STANDALONE)
        for node in nodes(path, ast.ClassDef)
        if isinstance(node, ast.ClassDef)
    ]
    known = set(BUILTIN_EXCEPTIONS) | {"TpuRlError", "BadInputError"}
    found: dict[tuple[str, str], None] = {}
    grew = True
    while grew:
        grew = False
        for path, node in classes:
            key = (module_name(path), node.name)
            if key not in found and _base_names(node) & known:
                found[key] = None
                known.add(node.name)
                grew = True
    return sorted(found)


def test_every_product_exception_is_a_tpu_rl_error():
    found = exception_classes()
    assert len(found) > 25 and ("core.config.values", "ConfigError") in found
    outside = [
        f"{module}.{name}"
        for module, name in found
        if not issubclass(getattr(importlib.import_module(module), name), TpuRlError)
    ]
    assert outside == [], "subclass core.errors.TpuRlError (BadInputError for bad input)"


@pytest.mark.parametrize(
    ("module", "name", "code"),
    [
        ("core.config.values", "ConfigError", BAD_INPUT),
        ("core.inputs", "InputError", BAD_INPUT),
        ("core.outdir", "OutputError", BAD_INPUT),
        ("tools.stack_files", "StackFileError", BAD_INPUT),
        ("tools.state_home", "RefusedError", BAD_INPUT),
        ("tools.state_export", "StateError", FAILED),
        ("tools.logs", "NoPodsError", FAILED),
        ("tools.logs", "LogsError", BAD_INPUT),
        ("tools.status", "StatusError", BAD_INPUT),
        ("tools.report", "ReportError", BAD_INPUT),
        ("core.deadline", "DeadlineExceededError", FAILED),
        ("infra.k8s.credentials", "ClusterReadError", FAILED),
    ],
)
def test_bad_input_exits_2_and_a_failure_1(module, name, code):
    cls = getattr(importlib.import_module(module), name)
    assert cls.exit_code == code and issubclass(cls, BadInputError) == (code == BAD_INPUT)


def test_the_message_is_the_one_line_given():
    from core.config.values import ConfigError

    assert TpuRlError("bucket x: not found").message == "bucket x: not found"
    assert ConfigError("a: bad", "b: worse").message == "a: bad\nb: worse"


CLI_HANDLERS = {
    "tools/report.py": "main",
    "tools/status.py": "main",
    "tools/logs.py": "main",
    "tools/state.py": "main",
    "tools/vendoring.py": "run",  # tools/adopt_maxtext.py's and tools/adopt_controller.py's
    "tools/plan/cli.py": "_plan",
}
"""Each CLI's entry point: the function whose handlers end the process."""
ALSO_CAUGHT = {
    "KeyboardInterrupt": "Ctrl-C while watching: exit 130",
    "RunError": "the program's refusal as the Pulumi engine shows it (tools/plan/cli.py runs the program)",
    "Exception": "a bug, not a refusal: one line naming it as an internal error, exit 1 (tools/plan/cli.py)",
}


def test_each_cli_catches_the_base_alone():
    wrong = {}
    for path in product_files():
        function = CLI_HANDLERS.get(rel(path))
        if function is None:
            continue
        (node,) = [n for n in parsed(path).body if isinstance(n, ast.FunctionDef) and n.name == function]
        handlers = [n for n in ast.walk(node) if isinstance(n, ast.ExceptHandler)]
        for handler in handlers:
            ends = any(isinstance(n, ast.Return) for n in ast.walk(handler))
            if ends and handler.type is not None:  # a handler that ends the process (one that raises translates)
                names = {ast.unparse(e).rpartition(".")[2] for e in getattr(handler.type, "elts", [handler.type])}
                if names - {"TpuRlError", *ALSO_CAUGHT}:
                    wrong[f"{rel(path)}:{handler.lineno}"] = sorted(names)
    assert len({rel(p) for p in product_files()} & set(CLI_HANDLERS)) == len(CLI_HANDLERS)
    assert wrong == {}, "a CLI catches core.errors.TpuRlError and exits with its exit_code"


def test_a_state_refusal_exits_2_through_the_base(capsys):
    """The CLI's one handler gives each error its own exit code: a stack name that is none is bad input."""
    from tools import state

    assert state.main(["select", "--stack", "no/such", "--root", "."]) == BAD_INPUT
    assert capsys.readouterr().err.startswith("error: 'no/such' is not a stack name")
