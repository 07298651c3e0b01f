"""One error tree (``core.errors``): every exception class the product defines is a ``TpuRlError``, bad input exits
2 and a failure 1, and each CLI's entry point catches the base alone, so a new refusal needs no new ``except``."""

from __future__ import annotations

import ast
import builtins
import importlib

import pytest

from core.errors import BAD_INPUT, FAILED, BadInputError, TpuRlError
from tests.source_files import module_name, nodes, parsed, product_files, rel
from tools.stack_files import ROOT

pytestmark = pytest.mark.pure  # files and imports only

STANDALONE = {
    "workloads/container/": "a container program is a file of its step's ConfigMap, run in the image, and imports "
    "nothing of the project but the files shipped beside it (workloads/specs/commands.py `program_imports`)",
    "core/hf_model.py": "shipped beside the container programs as hf_model.py (workloads/specs/commands.py "
    "`program_imports`): it imports the standard library and the image's packages alone",
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


@pytest.mark.source
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
        ("tools.state_home", "StateRefusedError", BAD_INPUT),
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
    "tools/audit.py": "main",
    "tools/maintenance.py": "main",
}
"""Each CLI's entry point: the function whose handlers end the process."""
ALSO_CAUGHT = {
    "KeyboardInterrupt": "Ctrl-C while watching: exit 130",
    "StopError": "the program's stop as the engine shows it, with its exit code (tools/plan/cli.py runs the program)",
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
                ends_by_report = ast.unparse(handler.body[-1]).startswith(f"return report({handler.name}")
                if "TpuRlError" in names and not ends_by_report:
                    wrong[f"{rel(path)}:{handler.lineno}"] = ["ends otherwise than tools.process.report"]
    assert len({rel(p) for p in product_files()} & set(CLI_HANDLERS)) == len(CLI_HANDLERS)
    assert wrong == {}, "a CLI catches core.errors.TpuRlError and returns tools.process.report(err)"


def test_a_state_refusal_exits_2_through_the_base(capsys):
    """The CLI's one handler gives each error its own exit code: a stack name that is none is bad input."""
    from tools import state

    assert state.main(["select", "--stack", "no/such", "--root", "."]) == BAD_INPUT
    assert capsys.readouterr().err.startswith("error: 'no/such' is not a stack name")


@pytest.mark.source
def test_the_program_stops_only_through_stop_error():
    """Every stop of `pulumi up` is an ``infra.stop.StopError``, which keeps its exit code for the offline plan; a
    bare ``pulumi.RunError`` would reach `make plan` with none."""
    raised = {
        f"{rel(path)}:{node.lineno}"
        for path in product_files()
        if rel(path) != "infra/stop.py"
        for node in nodes(path, ast.Raise)
        if isinstance(node, ast.Raise)
        and isinstance(node.exc, ast.Call)
        and ast.unparse(node.exc.func).rpartition(".")[2] == "RunError"
    }
    assert raised == set(), "raise infra.stop.StopError (or stop(err)) with the exit code it means"


def test_a_stop_keeps_the_exit_code_of_what_stopped_it():
    from core.errors import UnavailableError
    from infra.stop import StopError, stop, stop_all

    assert stop(UnavailableError("hub: no answer; retry later"), "preflight: ").exit_code == FAILED
    assert str(stop(BadInputError("x: bad"), "images: ")) == "images: x: bad"
    assert stop(BadInputError("x: bad")).exit_code == BAD_INPUT
    assert StopError("step failed").exit_code == FAILED
    both = stop_all([("a: no answer", FAILED), ("b: bad", BAD_INPUT)])
    assert both.exit_code == BAD_INPUT and str(both) == "a: no answer\nb: bad"
    assert stop_all([("a: no answer", FAILED)]).exit_code == FAILED


BROAD_HANDLERS = {
    "core/deadline.py": (2, "a call's failure is handed to the caller's thread, and to its retry predicate (wait_for)"),
    "infra/threads.py": (1, "a daemon thread's failure is handed to the program's event loop"),
    "infra/transports.py": (2, "a reply is closed on any failure, which is raised again"),
    "infra/k8s/live.py": (1, "the kubernetes client's errors, each described in one line (infra/k8s/read_errors.py)"),
    "tools/logs.py": (1, "the kubernetes client's errors, described as every read's (infra/k8s/read_errors.py)"),
    "tools/maintenance.py": (1, "the kubernetes client's errors, described as every read's (infra/k8s/read_errors.py)"),
    "workloads/preflight.py": (1, "the Hub client's errors, each described in one line (_describe)"),
    "workloads/wiring.py": (3, "the model card's extras: a failure is a warning and never stops `up`"),
    "workloads/observe/scalars.py": (1, "a record cut short ends the file, as TensorBoard itself treats it"),
    "tools/process.py": (1, "a fault of tpu-rl's at a command's entry point: one line naming it, exit 70"),
    "tools/plan/offline.py": (1, "the program's own error, returned to the caller that asked for it"),
    "policy/tpu_rl_policies/resources.py": (2, "a malformed shape is a finding, never a traceback"),
}
"""Where a handler may catch ``Exception``: path -> (how many, why). Everywhere else a seam catches what its client
raises (``infra.client_errors.client_errors``, the project's own classes), and anything else is a bug that shows."""


@pytest.mark.source
def test_a_broad_handler_is_one_named_with_its_reason():
    found: dict[str, int] = {}
    for path in product_files():
        # The container programs (one line, exit, in the image) and the rehearsal's in MaxText's venv, likewise.
        if rel(path).startswith(("workloads/container/", "tools/rehearse/inside/")):
            continue
        for node in nodes(path, ast.ExceptHandler):
            caught = node.type if isinstance(node, ast.ExceptHandler) else None
            if caught is not None and ast.unparse(caught) in ("Exception", "BaseException"):
                found[rel(path)] = found.get(rel(path), 0) + 1
    assert found == {path: count for path, (count, _) in BROAD_HANDLERS.items()}, "catch what the client raises"


def test_reporting_an_error_loads_no_pulumi():
    """Every tool reports through ``tools.process``; the program's ``StopError`` (which imports Pulumi, some 0.4 s) is
    a type there only, so `make up`'s checks before `pulumi up` start in a blink."""
    import subprocess
    import sys

    tools = ("tools.state", "tools.status", "tools.logs", "tools.audit", "tools.maintenance", "tools.report")
    loaded = "sorted(m for m in sys.modules if m.split('.')[0] == 'pulumi')"
    code = f"import sys; import {', '.join(tools)}; print({loaded})"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert done.stdout.strip() == "[]"


def _make_commands() -> set[str]:
    """The tools the Makefile runs (``$(PY) -m tools.<name>``)."""
    import re

    return set(re.findall(r"\$\(PY\) -m (tools(?:\.\w+)+)", (ROOT / "Makefile").read_text()))


@pytest.mark.source
def test_every_make_target_ends_through_the_one_entry_point():
    """Each tool a `make` target runs ends through ``tools.process.entry_point``: no command prints a traceback."""
    commands = _make_commands()
    assert {"tools.plan", "tools.state", "tools.adopt_maxtext", "tools.closed_world"} <= commands
    wrong = []
    for command in sorted(commands):
        path = ROOT / (command.replace(".", "/") + ".py")
        path = path if path.is_file() else path.with_suffix("") / "__main__.py"
        calls = [
            n
            for n in ast.walk(parsed(path))
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "entry_point"
        ]
        if [ast.unparse(c) for c in calls] != ["entry_point(main)"]:
            wrong.append(command)
    assert wrong == []


@pytest.mark.parametrize(
    ("body", "code", "said"),
    [
        ("raise KeyError('x')", 70, "error: internal error: KeyError: 'x' (at <string>:3); please report it"),
        ("raise BadInputError('a: bad')", 2, "error: a: bad"),
        ("return 5", 5, None),
    ],
)
def test_a_command_ends_in_one_line_and_its_exit_code(body, code, said):
    import subprocess
    import sys

    program = f"from core.errors import BadInputError\ndef main():\n    {body}\n"
    program += "from tools.process import entry_point\nentry_point(main)\n"
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, cwd=ROOT, timeout=60, env={"PATH": "/bin"}
    )
    assert done.returncode == code
    assert done.stderr.splitlines() == ([] if said is None else [said.replace("please report it", _REPORT)])


_REPORT = "please report it (TPU_RL_TRACEBACK=1 shows the traceback)"
