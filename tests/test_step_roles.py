"""A step's behaviour is a property of its entry in the step catalogue (``core.steps.STEPS``), its roles among them: the
step that fills the Hub cache and those that read it (``HubCache``), the steps whose containers hold the Hub write
token (``write_token``), the step on the TPU slice (``holds_tpu``). Outside the catalogue no code compares a value
with a step's name, whether written out or through a name bound to it (a constant, a class attribute, a loop over
names), and no code binds a name to a step's name: each user reads the entry's field instead.

The product's files are parsed once per process (``tests.source_files``); the checks are tested on planted modules
of their own.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.layout import hub_cache
from core.names import HF_SECRET, HF_WRITE_SECRET
from core.steps import HUB_CACHE_FILLER, STEPS, TPU_HOLDER, HubCache, _the_one
from infra.gcp.access import READER_ROLE, WRITER_ROLE, hub_cache_grants
from tests.source_files import module_name, nodes, product_files, rel

CATALOGUE = ("core/steps.py",)
"""Where a step's name may be compared or bound: the catalogue itself."""

PER_STEP_CODE: dict[tuple[str, str], str] = {
    ("workloads/wiring.py", "uses = ('convert',)"): "the export's wiring names the earlier step whose result its "
    "check reads, as its builder names the steps it reads (workloads/specs/step_specs.py `before[...]`)",
}
"""Bindings in a step's own code (its wiring) of the earlier steps it reads: (path, the binding) -> what."""


def _strings(node: ast.AST) -> list[str]:
    """The strings ``node`` writes out: a string, or a tuple, list or set of them."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [value for element in node.elts for value in _strings(element)]
    return []


def _pairs(node: ast.AST) -> Iterator[tuple[ast.AST, ast.AST, str]]:
    """What ``node`` binds: (target, value, how the binding is written: a format of both) for an assignment, an
    annotated or augmented one, a walrus, a ``for`` loop or a comprehension over a value, and a parameter's default."""
    if isinstance(node, ast.Assign):
        for target in node.targets:
            yield target, node.value, "{} = {}"
    elif isinstance(node, ast.AnnAssign | ast.AugAssign | ast.NamedExpr) and node.value is not None:
        yield node.target, node.value, "{} = {}"
    elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
        yield node.target, node.iter, "for {} in {}"
    elif isinstance(node, ast.arguments):
        positional = [*node.posonlyargs, *node.args]
        defaults = [*zip(positional[len(positional) - len(node.defaults) :], node.defaults, strict=True)]
        defaults += [(arg, value) for arg, value in zip(node.kwonlyargs, node.kw_defaults, strict=True) if value]
        for arg, value in defaults:
            yield arg, value, "{}={}"


def _bound(target: ast.AST) -> list[str]:
    """The names a binding's target binds (an attribute's own name: ``self.step`` binds ``step``)."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.arg):
        return [target.arg]
    if isinstance(target, ast.Attribute):
        return [target.attr]
    if isinstance(target, ast.Tuple | ast.List):
        return [name for element in target.elts for name in _bound(element)]
    return []


BINDS = (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr, ast.For, ast.AsyncFor, ast.comprehension)


@functools.cache
def step_bindings(path: Path) -> dict[str, str]:
    """Each name ``path`` binds to a step's name written out (or to a tuple, list or set holding one) -> the
    binding as code."""
    found: dict[str, str] = {}
    for node in nodes(path, *BINDS, ast.arguments):
        for target, value, written in _pairs(node):
            if any(name in STEPS for name in _strings(value)):
                found |= dict.fromkeys(_bound(target), written.format(ast.unparse(target), ast.unparse(value)))
    return found


@functools.cache
def _imported(path: Path) -> dict[str, str]:
    """The names ``path`` imports -> what each is, qualified (``from core.names import X as Y``: ``Y`` ->
    ``core.names.X``; ``import core.names as names``: ``names`` -> ``core.names``; ``import core.names``: ``core``)."""
    module = module_name(path).split(".")
    package = module if path.name == "__init__.py" else module[:-1]
    found: dict[str, str] = {}
    for node in nodes(path, ast.Import, ast.ImportFrom):
        if isinstance(node, ast.ImportFrom):
            base = [*package[: len(package) - node.level + 1], node.module or ""] if node.level else [node.module or ""]
            found |= {alias.asname or alias.name: ".".join([*filter(None, base), alias.name]) for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {
                alias.asname or alias.name.split(".")[0]: alias.name if alias.asname else alias.name.split(".")[0]
                for alias in node.names
            }
    return found


def step_names_of(path: Path, bound: dict[str, str]) -> set[str]:
    """The names whose value in ``path`` is a step's name: those it binds so, and those it imports from a module that
    does (``bound``: qualified name -> its binding, of every module)."""
    own = set(step_bindings(path))
    imported = {name for name, qualified in _imported(path).items() if qualified in bound}
    return own | imported


def _refers(node: ast.AST, names: set[str], modules: dict[str, str], bound: dict[str, str]) -> bool:
    """Whether ``node`` is one of ``names``, or ``<module>.<name>`` of a module that binds it to a step's name."""
    if isinstance(node, ast.Name):
        return node.id in names
    if isinstance(node, ast.Attribute):
        dotted = ast.unparse(node.value)
        head, _, rest = dotted.partition(".")
        module = ".".join(filter(None, [modules.get(head, head), rest]))
        return f"{module}.{node.attr}" in bound
    return False


def step_name_comparisons(path: Path, bound: dict[str, str] | None = None) -> list[str]:
    """Each comparison (``==``, ``!=``, ``in``, ``not in``, a ``case``) of a value with a step's name, written out or
    through a name bound to one (``bound``: qualified name -> its binding, of every module; ``path``'s own
    bindings are always seen)."""
    bound = bound or {}
    names, modules = step_names_of(path, bound), _imported(path)

    def names_a_step(side: ast.AST) -> bool:
        return any(name in STEPS for node in ast.walk(side) for name in _strings(node)) or any(
            _refers(node, names, modules, bound) for node in ast.walk(side)
        )

    found = []
    for node in nodes(path, ast.Compare, ast.MatchValue):
        if isinstance(node, ast.Compare) and any(names_a_step(side) for side in [node.left, *node.comparators]):
            found.append(ast.unparse(node))
        elif isinstance(node, ast.MatchValue) and names_a_step(node.value):
            found.append(f"case {ast.unparse(node.value)}")
    return found


def bindings_of(paths: list[Path]) -> dict[str, str]:
    """Qualified name -> its binding to a step's name, of every module of ``paths``."""
    return {f"{module_name(path)}.{name}": code for path in paths for name, code in step_bindings(path).items()}


def _outside_the_catalogue() -> list[Path]:
    return [path for path in product_files() if rel(path) not in CATALOGUE]


@functools.cache
def product_bindings() -> dict[str, str]:
    """``bindings_of`` the product outside the catalogue, found once per process."""
    return bindings_of(_outside_the_catalogue())


def test_no_step_name_is_compared_outside_the_catalogue():
    found = {
        (rel(path), comparison)
        for path in _outside_the_catalogue()
        for comparison in step_name_comparisons(path, product_bindings())
    }
    assert found == set(), "a step's behaviour is a property of its entry in core.steps.STEPS"


def test_no_name_is_bound_to_a_step_name_outside_the_catalogue():
    found = {(rel(path), code) for path in _outside_the_catalogue() for code in step_bindings(path).values()}
    listed = set(PER_STEP_CODE)
    assert found - listed == set(), "a step's role is a field of its entry in core.steps.STEPS (read the field)"
    assert listed <= found, "a listed binding is gone: drop it from PER_STEP_CODE"


@pytest.fixture
def root(tmp_path, monkeypatch) -> Path:
    """``tmp_path`` as the tree the planted modules are named from (``tests.source_files.module_name``)."""
    import tests.source_files

    monkeypatch.setattr(tests.source_files, "ROOT", tmp_path)
    return tmp_path


def test_the_check_sees_a_comparison_written_out(root):
    source = root / "budget.py"
    source.write_text('more = [s for s in steps if s.step == "train"]\nmatch name:\n    case "export":\n        pass\n')
    assert sorted(step_name_comparisons(source)) == ["case 'export'", "s.step == 'train'"]


ROLES = """
from core.steps import STEPS
WRITER = "convert"
READERS: tuple[str, ...] = ("export", "evaluate")
class Wiring:
    uses = ("train",)
def writes(step, default="publish", kind="log"):
    for other in ("convert", "train"):
        pass
    return step == WRITER or step in READERS or step != "evaluate" or step.name == STEPS["train"].name or step == kind
"""
USERS = """
from planted.roles import WRITER as FILLER
import planted.roles as roles
import planted.roles
from .roles import READERS
def check(step, name):
    return step == FILLER or name in roles.READERS or (step, name) == (planted.roles.WRITER, 1) or name in READERS
def other(step):
    return step.kind == "convert-like" or step == roles.STEPS or step == roles.Wiring
"""


@pytest.fixture
def planted(root) -> Path:
    """A package ``planted`` under ``root``: ``ROLES`` as ``roles``, ``USERS`` as ``users``."""
    package = root / "planted"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "roles.py").write_text(ROLES)
    (package / "users.py").write_text(USERS)
    return package


def test_the_check_finds_a_planted_constant_and_each_comparison_with_it(planted):
    roles, users = planted / "roles.py", planted / "users.py"
    assert step_bindings(roles) == {
        "WRITER": "WRITER = 'convert'",
        "READERS": "READERS = ('export', 'evaluate')",
        "uses": "uses = ('train',)",
        "default": "default='publish'",
        "other": "for other in ('convert', 'train')",
    }
    assert step_name_comparisons(roles) == [
        "step == WRITER",
        "step in READERS",
        "step != 'evaluate'",
        "step.name == STEPS['train'].name",
    ]
    bound = bindings_of([roles, users])
    assert {"planted.roles.WRITER", "planted.roles.READERS"} <= set(bound) and "planted.roles.kind" not in bound
    assert step_name_comparisons(users, bound) == [
        "step == FILLER",
        "name in roles.READERS",
        "(step, name) == (planted.roles.WRITER, 1)",
        "name in READERS",
    ], "an imported constant, a module's attribute, a relative import: each is the step's name it is bound to"
    assert step_name_comparisons(users) == [], "unresolved, an imported name is not a step's"


@pytest.mark.pure
def test_each_role_is_a_field_of_its_entry():
    assert {name: facts.hub_cache for name, facts in STEPS.items() if facts.hub_cache} == {
        "convert": HubCache.FILLS,
        "export": HubCache.READS,
    }
    assert (HUB_CACHE_FILLER, TPU_HOLDER) == ("convert", "train")
    assert hub_cache("bucket", "gemma4-26b") == "gs://bucket/gemma4-26b/convert/hub/", "under the filler's prefix"
    with pytest.raises(ValueError, match=r"exactly one step that fills the Hub cache, not \('convert', 'export'\)"):
        _the_one("fills the Hub cache", ["convert", "export"])
    with pytest.raises(ValueError, match=r"not \(\)"):
        _the_one("fills the Hub cache", [])
    assert (
        _the_one("reads it", (name for name, facts in STEPS.items() if facts.hub_cache is HubCache.READS)) == "export"
    )


@pytest.mark.pure
def test_the_shared_hub_caches_grants_follow_the_entries(monkeypatch):
    """Every step that uses the cache, and no other, is granted on a shared one: the filler writes it in the writer
    stack, reads it elsewhere; a reader only reads it."""
    monkeypatch.setitem(STEPS, "publish", dataclasses.replace(STEPS["publish"], hub_cache=HubCache.READS))
    roles = {grant.holder: grant.role for grant in hub_cache_grants("hub/", writes=True)}
    assert roles == {HUB_CACHE_FILLER: WRITER_ROLE, "export": READER_ROLE, "publish": READER_ROLE}
    assert {grant.role for grant in hub_cache_grants("hub/", writes=False)} == {READER_ROLE}
    monkeypatch.setitem(STEPS, "export", dataclasses.replace(STEPS["export"], hub_cache=None))
    assert "export" not in {grant.holder for grant in hub_cache_grants("hub/", writes=True)}


def _token_secret(step) -> str | None:
    """The Secret the step's container reads ``HF_TOKEN`` from (None: no token)."""
    pod = step.manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    (container,) = [c for c in pod["containers"] if c["name"] == step.container]
    refs = [e["valueFrom"]["secretKeyRef"]["name"] for e in container.get("env", []) if e["name"] == "HF_TOKEN"]
    return refs[0] if refs else None


@pytest.mark.pure
def test_the_write_token_goes_where_the_entry_says(monkeypatch):
    from tests.lifecycle_walk import settings
    from workloads.specs.step_specs import plan_workflow

    stack = settings("prod", ["tpu-rl:publish.repo=acme/gemma4-grpo", "tpu-rl:workflow.steps.evaluate=true"])
    assert {step.step: _token_secret(step) for step in plan_workflow(stack).steps if step.step != "train"} == {
        "convert": HF_SECRET,
        "export": None,
        "evaluate": None,
        "publish": HF_WRITE_SECRET,
    }
    monkeypatch.setitem(STEPS, "evaluate", dataclasses.replace(STEPS["evaluate"], write_token=True))
    monkeypatch.setitem(STEPS, "publish", dataclasses.replace(STEPS["publish"], write_token=False))
    secrets = {step.step: _token_secret(step) for step in plan_workflow(stack).steps if step.step != "train"}
    assert (secrets["evaluate"], secrets["publish"]) == (HF_WRITE_SECRET, HF_SECRET)
