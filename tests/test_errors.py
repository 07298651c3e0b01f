"""One error tree (``core.errors``): every exception class the product defines, its step programs' included, is a
``TpuRlError`` but the one adapter at a seam, bad input exits 2 and a failure 1, and each CLI's entry point catches the
base alone, so a new refusal needs no new ``except``."""

from __future__ import annotations

import ast
import builtins
import importlib
import importlib.util
import sys
from collections.abc import Callable, Iterator, Mapping
from functools import cache, partial
from pathlib import Path
from typing import Any

import pytest

from core.errors import BAD_INPUT, FAILED, BadInputError, TpuRlError
from tests.source_files import module_name, nodes, parsed, product_files, rel
from tools.stack_files import ROOT

pytestmark = pytest.mark.pure  # files and imports only

ROOTS = {
    "core/errors.py:TpuRlError": "the one tree: the product's refusals and failures, its step programs' too (the file "
    "ships beside them, workloads/specs/commands.py CORE_FILES)",
    "infra/stop.py:StopError": "the adapter at the seam to the Pulumi engine, on pulumi.RunError: the engine shows "
    "a RunError's text alone, and a traceback for anything else (infra/stop.py)",
}
"""The exception classes of the product on no class of its own, each ``path:Class`` -> why; the only ones on a base of
the language or of a library (``Exception``, ``ValueError``, ``pulumi.RunError``...)."""
MAX_ROOTS = 3


def _imported(module: str, attribute: str | None = None, top: bool = False) -> Any:
    """What an import binds: ``from module import attribute``, ``import module`` (``top``: its top package) or
    ``import module as x``."""
    imported = importlib.import_module(module)
    if attribute is None:
        return sys.modules[module.partition(".")[0]] if top else imported
    try:
        return getattr(imported, attribute)
    except AttributeError:
        return importlib.import_module(f"{module}.{attribute}")


class _Names(Mapping[str, Any]):
    """What a name means in one file: as its imports bind it (in any scope; the first that imports here, in the order
    of the file: a step program's package branch before the branch its pod runs), else as the imported file has it."""

    def __init__(self, path: Path) -> None:
        package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
        self.bound: dict[str, list[Callable[[], Any]]] = {}
        statements = [n for n in nodes(path, ast.Import, ast.ImportFrom) if isinstance(n, ast.Import | ast.ImportFrom)]
        for node in sorted(statements, key=lambda n: (n.lineno, n.col_offset)):
            for alias in node.names:
                if isinstance(node, ast.ImportFrom):
                    module = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
                    name, binding = alias.asname or alias.name, partial(_imported, module, alias.name)
                elif alias.asname:
                    name, binding = alias.asname, partial(_imported, alias.name)
                else:
                    name, binding = alias.name.partition(".")[0], partial(_imported, alias.name, top=True)
                self.bound.setdefault(name, []).append(binding)
        self.own = partial(importlib.import_module, module_name(path))

    def __getitem__(self, name: str) -> Any:
        for binding in [*self.bound.get(name, []), lambda: getattr(self.own(), name)]:  # else the file's own name
            try:
                return binding()
            except (ImportError, AttributeError):
                continue
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self.bound)

    def __len__(self) -> int:
        return len(self.bound)


@cache
def _product_files() -> frozenset[Path]:
    return frozenset(path.resolve() for path in product_files())


def _key(cls: type) -> str | None:
    """``path:Class`` of a class the product defines, None for the language's or a library's."""
    file = getattr(sys.modules.get(cls.__module__), "__file__", None)
    if file is None or Path(file).resolve() not in _product_files():
        return None
    return f"{rel(Path(file).resolve())}:{cls.__qualname__}"


@cache
def exception_classes() -> dict[str, tuple[list[str], set[str]]]:
    """Every exception class of every product file (at any depth: a class in a function too), found by its bases as
    Python resolves them (the file's imports; the language's and the libraries' classes as they are at import):
    ``path:Class`` -> (its bases of the language or a library, the roots of ``ROOTS`` it descends from)."""
    defined: dict[str, tuple[Path, ast.ClassDef]] = {}
    for path in product_files():
        for node in nodes(path, ast.ClassDef):
            assert isinstance(node, ast.ClassDef)
            key = f"{rel(path)}:{node.name}"
            defined[f"{key}@{node.lineno}" if key in defined else key] = (path, node)  # a second of the name: its line
    names = {path: _Names(path) for path in product_files()}

    def bases(key: str) -> list[str | type]:
        """Each base: the key of a class of the same file, or the class itself."""
        path, node = defined[key]
        found: list[str | type] = []
        for base in node.bases:
            own = f"{rel(path)}:{ast.unparse(base)}"
            if own in defined:
                found.append(own)
                continue
            try:
                value = eval(ast.unparse(base), {"__builtins__": builtins}, names[path])  # noqa: S307 (a base's words)
            except Exception as err:  # noqa: BLE001 (a base the test cannot resolve is named in the failure)
                raise AssertionError(f"{key}: the base {ast.unparse(base)} does not resolve ({err!r})") from None
            found.append(getattr(value, "__origin__", value))
        return found

    @cache
    def judged(key: str) -> tuple[bool, list[str], set[str]]:
        """(an exception class, its library bases, its roots)."""
        exception, library, roots = False, [], set()
        for base in bases(key):
            if isinstance(base, str):
                is_exception, _, above = judged(base)
            elif isinstance(base, type) and issubclass(base, BaseException):
                is_exception, above = True, {c for c in map(_key, base.__mro__) if c in ROOTS}
                if _key(base) is None:
                    library.append(f"{base.__module__}.{base.__qualname__}")
            else:
                continue
            exception = exception or is_exception
            roots |= above
        if exception and key in ROOTS:
            roots = {key}
        return exception, library, roots

    return {key: (library, roots) for key in defined for exception, library, roots in [judged(key)] if exception}


@pytest.mark.source
def test_at_most_three_roots_and_no_other_class_on_a_library_base():
    found = exception_classes()
    assert len(found) > 25 and "core/config/values.py:ConfigError" in found
    assert len(ROOTS) <= MAX_ROOTS
    on_library_bases = {key: library for key, (library, _) in found.items() if library}
    assert set(on_library_bases) == set(ROOTS), "subclass core.errors.TpuRlError (BadInputError for bad input)"
    assert on_library_bases["infra/stop.py:StopError"] == ["pulumi.errors.RunError"]


@pytest.mark.source
def test_every_product_exception_is_a_tpu_rl_error():
    """The step programs' too: ``tpu_rl_program.py``'s refusal and failure, ``hf_model.py``'s format errors."""
    found = exception_classes()
    outside = {key: sorted(roots) for key, (_, roots) in found.items() if roots != {"core/errors.py:TpuRlError"}}
    assert outside == {"infra/stop.py:StopError": ["infra/stop.py:StopError"]}
    for key in ("workloads/container/tpu_rl_program.py:RefusedError", "core/hf_model.py:ModelFormatError"):
        assert found[key][1] == {"core/errors.py:TpuRlError"}, key


@pytest.mark.parametrize(
    ("module", "name", "code"),
    [
        ("workloads.container.tpu_rl_program", "FailedError", FAILED),
        ("core.hf_model", "ModelFormatError", BAD_INPUT),
        ("core.hf_model", "JsonDocumentError", BAD_INPUT),
        ("tools.check_pulumi_project", "ProjectRefusedError", BAD_INPUT),
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


def test_a_step_programs_refusal_is_bad_input_that_exits_3():
    """The same input fails every try: the pod exits 3 (``core.names.SETUP_FAILURE_EXIT``), and the step is not
    retried."""
    from core.names import SETUP_FAILURE_EXIT
    from workloads.container.tpu_rl_program import REFUSED, RefusedError

    assert issubclass(RefusedError, BadInputError) and RefusedError.exit_code == REFUSED == SETUP_FAILURE_EXIT


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
    "tools/local_cluster/parts.py": (1, "a start that failed or was interrupted stops what it started, then raises"),
    "tools/process.py": (1, "a fault of tpu-rl's at a command's entry point: one line naming it, exit 70"),
    "tools/plan/offline.py": (1, "the program's own error, returned to the caller that asked for it"),
    "tools/rehearse/hub.py": (1, "a request the loopback Hub cannot serve is a 500 the client reads, not a reset"),
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
