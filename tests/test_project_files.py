"""Pulumi.yaml declares every key with the defaults the code applies; the stack files are valid."""

from __future__ import annotations

import ast
import importlib
import os
import re
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from core.config.schema import FIELDS, PROJECT_KEYS, declared_default, fields_of, is_object
from tools.stack_files import ROOT, project_declarations

pytestmark = pytest.mark.pure  # files and tables only

CONFIGURATION = ROOT / "docs" / "configuration.md"
"""The generated configuration reference and refused extraArgs keys (tools/docs_tables.py writes them)."""
WATCHING = ROOT / "docs" / "watching-a-run.md"
"""The generated budget and "what re-runs" tables."""
ARCHITECTURE = ROOT / "docs" / "architecture.md"
"""The Layout block, checked against the tree."""


def test_every_project_key_is_declared_with_a_description():
    declared = project_declarations()
    assert {k.split(":", 1)[1] for k in declared if k.startswith("tpu-rl:")} == set(PROJECT_KEYS)
    for key, decl in declared.items():
        assert decl.get("description"), key
        assert "default" in decl, f"{key} needs a default"


def _leaves(value, prefix=""):
    if isinstance(value, dict) and value:
        for name, item in value.items():
            yield from _leaves(item, f"{prefix}.{name}" if prefix else name)
    else:
        yield prefix, value


def test_declared_defaults_are_the_schema_defaults():
    """Every default Pulumi.yaml shows is the one the program applies (Pulumi does not merge objects)."""
    for key, decl in project_declarations().items():
        if not key.startswith("tpu-rl:"):
            continue
        schema_default = declared_default(key)
        if not is_object(key):
            assert decl["default"] == schema_default, key
            continue
        schema_leaves = dict(_leaves(schema_default))
        for path, value in _leaves(decl["default"]):
            assert path in schema_leaves, f"{key}.{path} is declared but has no schema default"
            assert schema_leaves[path] == value, f"{key}.{path}"
    assert declared_default("tpu-rl:tpu") == {
        "version": "v6e",
        "machineType": "ct6e-standard-4t",
        "topology": "4x8",
        "slices": 1,
        "capacity": "reservation",
    }
    assert declared_default("tpu-rl:workflow")["timeouts"] == {
        "convert": "4h",
        "train": "24h",
        "export": "4h",
        "evaluate": "3h",
        "publish": "4h",
    }
    assert all(fields_of(f.top) for f in FIELDS)


def test_runtime_is_python_with_pip_and_venv():
    project = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
    assert project["name"] == "tpu-rl"
    assert project["runtime"] == {"name": "python", "options": {"toolchain": "pip", "virtualenv": "venv"}}


def test_example_stacks_use_placeholders_and_no_secrets():
    for stack in ("dev", "prod"):
        text = (ROOT / f"Pulumi.{stack}.yaml").read_text()
        assert "secure:" not in text and not re.search(r"hf_[A-Za-z0-9]{20,}", text)
        config = yaml.safe_load(text)["config"]
        assert config["gcp:project"].startswith("my-tpu-")
    prod = yaml.safe_load((ROOT / "Pulumi.prod.yaml").read_text())["config"]
    assert prod["tpu-rl:protect"] is True and "0.0.0.0/0" not in prod["tpu-rl:authorizedNetworks"]


def test_make_up_selects_the_stack_where_its_state_lives_and_runs_pulumi_up():
    import shutil
    import subprocess

    if not shutil.which("make"):
        import pytest

        pytest.skip("make is not installed")
    import os

    # Outside any parent make (CI runs the tests from `make test`).
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}

    def dry_run(*args: str) -> str:
        command = ["make", "--no-print-directory", "-n", *args]
        return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=True).stdout

    out = dry_run("up", "STACK=dev")
    assert "-m tools.state select --stack 'dev'" in out and "pulumi login" not in out, "tests/test_makefile.py"
    assert 'export PULUMI_BACKEND_URL="$(printf' in out, "every pulumi command gets the stack's home"
    assert "-m tools.state locks --stack 'dev'" in out
    assert "if ! pulumi stack select dev 2>/dev/null; then .venv/bin/python -m tools.state new --stack 'dev'" in out
    assert "file://" not in (ROOT / "Makefile").read_text(), "no file backend in the checkout by default"
    assert out.rstrip().splitlines()[-1] == (
        "pulumi up --stack dev --policy-pack policy --policy-pack-config policy/config/dev.json"
    ), "with the policy pack (docs/guardrails.md)"
    test = dry_run("test")
    assert '-m tests.fast_tier -q -m "not slow"' in test, "the fast tier"
    assert "ruff check" in dry_run("lint") and "ruff check" not in test, "lint is its own command (CI runs both)"
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert [line for line in ci if not line.startswith("#") and "make " in line] == [
        "TEST_BUDGET_STRICT=1 make test",
        "make lint",
        '  make maxtext VERSION="$MAXTEXT" LOADER="$PY312"',
        '  make rehearse STACK=dev PYTHON312="$PY312"',
        '  make rehearse STACK=prod PYTHON312="$PY312" SET="tpu-rl:workflow.steps.evaluate=true '
        'tpu-rl:publish.repo=my-org/gemma4-26b-grpo"',
        "  make local-cluster-build",
        "make test-slow",
    ], "CI: the README's test command first on the fresh clone (its budget counts the install), then lint, MaxText's "
    "loader venv (its loader and mesh tests), both stacks' rehearsals, the local cluster's parts, slow tier"


def test_the_configuration_page_lists_every_key_with_its_default_and_bounds():
    from tools.docs_tables import configuration_reference

    table = configuration_reference()
    assert table in CONFIGURATION.read_text(), "docs/configuration.md's table is stale (make readme):\n" + table
    assert "| `tpu-rl:training.numBatches` | `50` | integer 1..100000 |" in table
    assert "| `tpu-rl:workflow.timeouts.train` | `24h` | duration 1m..168h |" in table


def test_the_configuration_page_lists_every_refused_extra_arg():
    from core.config.load import REFUSED_KEYS
    from tools.docs_tables import refused_keys

    assert refused_keys() in CONFIGURATION.read_text(), "docs/configuration.md's refused keys are stale"
    workflow = {"enable_checkpointing", "checkpoint_dir", "run_name", "base_output_directory", "load_parameters_path"}
    assert workflow | {"tensorboard_dir"} <= set(REFUSED_KEYS)


def test_the_watching_page_lists_every_network_budget():
    from core.deadline import BUDGETS
    from tools.docs_tables import budgets

    table = budgets()
    assert table in WATCHING.read_text(), "docs/watching-a-run.md's budget table is stale (make readme):\n" + table
    assert BUDGETS["auth-plugin"].total + BUDGETS["cluster-read"].total < 30, "a preview with a hanging plugin"
    assert all(b.total <= 60 for b in BUDGETS.values())


def test_every_training_field_is_its_knob():
    """The schema's training fields are built from core.knobs (the configuration table above pins their text);
    rebuilt here so a broken builder shows up in the test run, not only at import."""
    from core.config import schema
    from core.config.fields import knob_field
    from core.knobs import TRAINING_KNOBS

    for knob in TRAINING_KNOBS:
        field = next(f for f in schema.FIELDS if f.key == f"tpu-rl:training.{knob.field}")
        assert knob_field(knob) == field
        assert field.default == knob.default and field.samples == knob.samples
        assert f"MaxText `{knob.key}`" in field.doc


def test_the_reference_shows_each_kind_of_default():
    from tools.docs_tables import shown as _shown

    networks = next(f for f in FIELDS if f.key == "tpu-rl:authorizedNetworks")
    assert _shown(networks) == "`0.0.0.0/0`"
    assert _shown(replace(networks, default=["10.0.0.0/8", "192.168.0.0/16"])) == "`10.0.0.0/8, 192.168.0.0/16`"
    assert _shown(replace(networks, default=[])) == "(empty)"


PATH_MENTION = re.compile(
    r"(?<![\w./-])((?:core|infra|workloads|policy|tests|docs|\.github|\.ci)/[\w./-]*?"
    r"(?:\.(?:py|md|yaml|yml|json|toml|txt|tsv|png)|/))(?![\w-])"
)


def test_every_project_path_a_message_docstring_or_a_page_names_exists():
    """Remediation text, error messages, docstrings, the README and the docs point users and maintainers at
    files: a file that moved leaves a pointer to nothing (three policy remediations once named old paths)."""
    sources = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "Makefile", ROOT / "pyproject.toml"]
    sources += sorted((ROOT / "docs").glob("*.md"))
    for folder in ("core", "infra", "workloads", "policy", "tests"):
        sources += [p for p in (ROOT / folder).rglob("*.py") if "venv" not in p.parts]
    missing: dict[str, str] = {}
    made = {"policy/venv/"}  # made by `make policy-venv` (the slow tier's), named where tools must skip it
    for source in sources:
        for match in PATH_MENTION.finditer(source.read_text()):
            path = match.group(1)
            if path not in made and not (ROOT / path).exists():
                missing.setdefault(path, source.relative_to(ROOT).as_posix())
    assert not missing, f"paths named but not in the tree: {missing}"


def test_tests_share_helpers_through_modules_not_through_each_other():
    """Fixtures live in conftest.py, factories and fakes in tests/<helper>.py: a test module never imports
    another (CONTRIBUTING.md)."""
    importers = sorted(
        path.name
        for path in (ROOT / "tests").glob("*.py")
        if re.search(r"^\s*(from|import) tests\.test_", path.read_text(), re.MULTILINE)
    )
    assert importers == []


def test_pre_commit_runs_what_make_lint_runs():
    """Each tool of the Makefile's lint target is a pre-commit hook, from the same venv (no second pin)."""
    hooks = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())["repos"]
    assert [repo["repo"] for repo in hooks] == ["local"]
    entries = [hook["entry"] for hook in hooks[0]["hooks"]]
    makefile = (ROOT / "Makefile").read_text()
    lint = makefile.split("\nlint:", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    tools = [line.strip().replace("$(VENV)", ".venv").replace("$(PY)", ".venv/bin/python") for line in lint]
    assert sorted(t.removesuffix(" .") for t in tools) == sorted(e.removesuffix(" --force-exclude") for e in entries)
    assert len(entries) == 5


def layout_entries() -> dict[str, str]:
    """The Layout block of docs/architecture.md: path -> description (continuation lines joined)."""
    page = ARCHITECTURE.read_text()
    block = page.split("## Layout\n", 1)[1].split("```\n", 2)[1]
    entries: dict[str, str] = {}
    last = ""
    for line in block.splitlines():
        if line.startswith(" "):
            entries[last] += " " + line.strip()
        else:
            last, _, text = line.partition(" ")
            entries[last] = text.strip()
    return entries


NOT_PACKAGES = {"tests", "venv", ".venv", "mutants", "node_modules", "build"}
"""Folders whose packages the layout need not list (``build/``: what the tools make, MaxText's unpacked wheel among
it)."""


def package_folders() -> list[str]:
    """Every folder of the repository with an ``__init__.py`` (``folder/``), outside ``NOT_PACKAGES`` (which are not
    walked: the venvs hold thousands of folders)."""
    found = []
    for folder, folders, files in os.walk(ROOT, followlinks=True):
        folders[:] = [name for name in folders if name not in NOT_PACKAGES]
        if "__init__.py" in files:
            found.append(f"{Path(folder).relative_to(ROOT)}/")
    return found


def test_the_layout_is_the_tree():
    """Every path it lists exists; every top-level file and folder of the repository and every package
    is listed; every package says in its docstring what it holds."""
    entries = layout_entries()
    missing = sorted(path for path in entries if not (ROOT / path.rstrip("/")).exists())
    assert missing == [], f"listed but not in the tree: {missing}"
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    top = {line.split("/")[0] + ("/" if "/" in line else "") for line in tracked.splitlines()} - {".gitignore"}
    listed = {
        path if path.count("/") <= 1 and not path.endswith("/") or path.count("/") == 1 else path for path in entries
    }
    listed_top = {p.split("/")[0] + ("/" if "/" in p else "") for p in listed}
    assert sorted(top - listed_top) == [], "top-level entries missing from docs/architecture.md's Layout"
    packages = sorted(package_folders())
    assert [p for p in packages if p not in entries] == [], "packages missing from docs/architecture.md's Layout"
    for package in packages:
        doc = ast.get_docstring(ast.parse((ROOT / package / "__init__.py").read_text()))
        assert doc and len(doc) > 40, f"{package}__init__.py does not say what the package holds"


SAME_CONCEPT_NAMES = {
    "apis.py": ("infra/gcp/apis.py", "infra/gcp/capacity/apis.py"),
    "closed_world.py": ("core/closed_world.py", "policy/tpu_rl_policies/closed_world.py", "tools/closed_world.py"),
    "cluster.py": ("infra/gcp/cluster.py", "policy/tpu_rl_policies/cluster.py"),
    "kueue.py": ("infra/k8s/kueue.py", "policy/tpu_rl_policies/kueue.py"),
    "network.py": ("infra/gcp/network.py", "policy/tpu_rl_policies/network.py"),
    "storage.py": ("infra/gcp/storage.py", "policy/tpu_rl_policies/storage.py"),
}
"""The file names two modules share: one concept at two layers (docs/architecture.md "Module names")."""


@pytest.mark.skipif(
    "MUTANT_UNDER_TEST" in os.environ, reason="a mutation run's copy of the tree (mutants/) is not a git checkout"
)
@pytest.mark.source
def test_no_two_modules_share_a_file_name_unless_one_concept_at_two_layers():
    """A module's file name says what it holds, once: the same name in two folders is the same concept at two
    layers (the platform builds it, the capacity check or the policy pack judges it), each listed here and in
    docs/architecture.md."""
    tracked = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True)
    by_name: dict[str, list[str]] = {}
    for path in tracked.stdout.splitlines():
        name = path.rsplit("/", 1)[-1]
        if not path.startswith("tests/") and name not in {"__init__.py", "__main__.py"}:
            by_name.setdefault(name, []).append(path)
    shared = {name: tuple(sorted(paths)) for name, paths in by_name.items() if len(paths) > 1}
    assert shared == SAME_CONCEPT_NAMES
    page = (ROOT / "docs" / "architecture.md").read_text()
    for paths in SAME_CONCEPT_NAMES.values():
        assert all(f"`{path}`" in page for path in paths), f"docs/architecture.md says nothing of {paths}"


DOTTED_NAME = re.compile(r"``((?:core|infra|workloads|tools|program)(?:\.\w+)+)``")


def _resolves(dotted: str) -> bool:
    """Whether ``dotted`` names a module, or an attribute of one (a class, function, constant, or their member)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(target, name):
                # A dataclass field or an annotated class attribute without a default is not an attribute.
                return name in getattr(target, "__annotations__", {})
            target = getattr(target, name)
        return True
    return False


def test_every_dotted_name_a_docstring_or_a_comment_names_exists():
    """Every ``package.module.Name`` in double backticks in the product's code resolves to a module or an attribute:
    a docstring cannot go on naming a module or a class after it moves."""
    missing: dict[str, str] = {}
    for folder in ("core", "infra", "workloads", "tools", "program", "policy"):
        for source in sorted((ROOT / folder).rglob("*.py")):
            if "venv" in source.parts:
                continue
            for match in DOTTED_NAME.finditer(source.read_text()):
                if not _resolves(match.group(1)):
                    missing.setdefault(match.group(1), source.relative_to(ROOT).as_posix())
    assert not missing, f"names that do not exist: {missing}"
    assert not _resolves("infra.cluster") and not _resolves("core.estimate.Settings.nowhere"), "the check can fail"
