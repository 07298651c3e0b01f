"""Every command the product prints and the docs give is bound to its stack, and every printed ``pulumi config set``
sets what it says.

Two stacks mean two state homes and two clusters; a command that leaves either to the operator's shell acts on
whichever the shell points at. ``core.printed_commands`` builds them; ``tests.printed_commands`` finds every command
in the product's strings, the reviewed messages, the pages, the stack files and the Makefile, and judges it (its
docstring gives the rules and ``ALLOWED`` the reviewed exceptions).

A printed ``pulumi config set`` is then run through a model of what the CLI writes into the stack file
(``tests.printed_commands.stored``, cited from pulumi/pulumi), its placeholders filled from the schema's samples, and
the stack file loaded as the program loads it (``tools.stack_files.load_stack_config``, ``core.config.load``): it
must give the settings the same value set as the offline plan's ``--set`` gives them, and no line that refuses the
key. Without ``--path`` a nested key is a flat key the loader refuses: the destroy refusal's
``tpu-rl:workflow.enabled`` never lifted a protected stack's protection.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

import tools.stack_files
from core.config import ConfigError, load_settings
from core.config.schema import FIELDS
from core.printed_commands import (
    ANY_STACK,
    full_key,
    helm,
    kubectl,
    make_target,
    needs_path,
    pulumi_command,
    pulumi_config_rm,
    pulumi_config_set,
)
from core.settings import Settings
from tests.lifecycle_walk import TOKEN, settings
from tests.printed_commands import (
    ALLOWED,
    MAKEFILE,
    PAGES,
    RUN_AGAIN,
    STACK_FILES,
    ConfigSet,
    Found,
    bare_runs_again,
    commands_in,
    config_set,
    every_command,
    filled,
    problems,
    product_commands,
    rendered,
    stored,
    unbound,
    written_config,
)
from tests.source_files import nodes, parsed, product_files, rel
from tools.stack_files import ROOT, load_stack_config, read_yaml

DEV = settings("dev", [])


def judged(command: str) -> Found:
    """The command a text gives (not the ``make`` of a substitution in front), as the scan finds it."""
    found = [Found("x", before, text) for _, before, text in commands_in(command, code=True)]
    return next(f for f in found if not f.command.startswith("make -s"))


# -- the scan ------------------------------------------------------------------------------------------------------


def test_no_printed_command_leaves_its_stack_home_or_cluster_to_the_shell():
    assert unbound() == [], "build it with core/printed_commands.py:\n" + "\n".join(unbound())


def test_the_scan_reads_every_kind_of_text_and_finds_the_commands_it_judges():
    found = every_command()
    kinds = {f.where.split(":")[0].split("/")[0] for f in found}
    assert {"core", "infra", "workloads", "tools", "docs", "README.md", "Makefile", "tests"} <= kinds, kinds
    assert any(f.where.startswith("Pulumi.prod.yaml") for f in found)
    texts = [f.command for f in found]
    assert any(t.startswith("tpu-rl pulumi --stack prod -- config set") for t in texts)
    assert any(t.startswith("kubectl --context") for t in texts)
    assert any(t.startswith("helm --kube-context") for t in texts)


def test_every_allowed_command_is_still_printed():
    printed = {f"{f.where.rsplit(':', 1)[0]}: {f.command}" for f in every_command()}
    assert sorted(set(ALLOWED) - printed) == [], "stale entries of ALLOWED"
    assert all(len(why) > 40 for why in ALLOWED.values()), "each allowed command says why"


def test_every_line_that_says_run_again_names_make_up_with_its_stack():
    """`pulumi up` by hand skips the access audit, the policy pack and the image pins `make up` adds: a line that sends
    the operator to run again names `make up STACK=<stack>` (tests.printed_commands.RUN_AGAIN)."""
    assert bare_runs_again() == []
    assert RUN_AGAIN.search("the step keeps running: run `pulumi up` again to follow it")
    assert RUN_AGAIN.search("finished but it is incomplete; the next `pulumi up` runs export again")
    assert not RUN_AGAIN.search("the step keeps running: run `make up STACK=dev` again to follow it")


EXPORTS = re.compile(r"export\s+PULUMI_(?:BACKEND_URL|DEFAULT_ORGANIZATION)\b")


def test_no_page_or_message_exports_a_stack_home_for_the_shell():
    """A home exported for the shell stays there for the next command, another stack's; only a Makefile recipe line
    exports it, for that line."""
    texts = {str(path.relative_to(ROOT)): path.read_text() for path in (*PAGES, *STACK_FILES)}
    texts |= {f.where: f.before + f.command for f in product_commands()}
    for n, line in enumerate(MAKEFILE.read_text().splitlines(), 1):
        printed = line.lstrip().startswith("#") or "echo" in line
        if printed:
            texts[f"Makefile:{n}"] = (
                line if line.lstrip().startswith("#") else " ".join(re.findall(r'echo "([^"]*)"', line))
            )
    assert [where for where, text in texts.items() if EXPORTS.search(text)] == []


@pytest.mark.pure
@pytest.mark.parametrize(
    ("command", "words"),
    [
        ("pulumi config set tpu-rl:protect false", ["names no stack", "names no state home"]),
        ("pulumi config set --stack prod tpu-rl:protect false", ["names no state home"]),
        ("tpu-rl pulumi --stack prod -- config set tpu-rl:workflow.enabled false", ["sets the flat key"]),
        ("tpu-rl pulumi -- config set --stack prod tpu-rl:protect false", ["names its stack before --"]),
        ("tpu-rl pulumi --stack prod config set tpu-rl:protect false", ["names its stack before --"]),
        ("tpu-rl status --watch", ["names no stack (--stack)"]),
        (
            "PULUMI_BACKEND_URL=$(make -s backend STACK=prod) pulumi config set --path --stack prod "
            "'tpu-rl:workflow.enabled' false",
            ["fails open: an empty PULUMI_BACKEND_URL"],
        ),
        ('PULUMI_BACKEND_URL="$(cat home)" pulumi cancel --yes --stack dev', ["fails open"]),
        ("PULUMI_BACKEND_URL=gs://b pulumi config rm --stack prod tpu-rl:gke.holdUpgrades", ["sets the flat key"]),
        ("pulumi refresh --yes", ["names no stack", "names no state home"]),
        ("PULUMI_K8S_DELETE_UNREACHABLE=true pulumi refresh --stack dev --run-program=false", ["names no state home"]),
        ("pulumi stack ls --json", ["names no state home"]),
        ("kubectl logs -n tpu-rl -l job-name=x -c c --tail=200 -f", ["names no cluster"]),
        ("kubectl delete jobset -n tpu-rl x", ["names no cluster"]),
        ("helm uninstall jobset -n jobset-system", ["names no cluster"]),
        ("helm rollback kueue -n kueue-system", ["names no cluster"]),
        ("make destroy YES=1", ["names no stack (STACK="]),
    ],
)
def test_an_unbound_command_is_named(command, words):
    said = problems(judged(command))
    assert len(said) == len(words) and all(w in s for w, s in zip(words, said, strict=True)), said


@pytest.mark.pure
@pytest.mark.parametrize(
    "command",
    [
        "tpu-rl pulumi --stack prod -- config set --path 'tpu-rl:workflow.enabled' false",
        "PULUMI_BACKEND_URL=gs://acme-tpu-pulumi-state-dev pulumi cancel --yes --stack dev",
        "PULUMI_K8S_DELETE_UNREACHABLE=true tpu-rl pulumi --stack dev -- refresh --run-program=false",
        "tpu-rl status --stack prod --watch",
        "tpu-rl pulumi",
        "PULUMI_BACKEND_URL=https://api.pulumi.com pulumi stack ls",
        "kubectl --context gke_p_r_c logs -n tpu-rl -l job-name=x",
        "helm --kube-context gke_p_r_c uninstall jobset -n jobset-system",
        "helm show crds oci://registry.k8s.io/jobset/charts/jobset --version 0.12.0",
        "make destroy STACK=prod",
        "make test",
        "pulumi up",
        "pulumi config set",
        "kubectl logs",
    ],
)
def test_a_bound_command_or_a_name_passes(command):
    found = [Found("x", before, text) for _, before, text in commands_in(command, code=True)]
    assert found and [p for f in found for p in problems(f)] == []
    assert judged(command).command.split()[0] in ("tpu-rl", "pulumi", "kubectl", "helm", "make")


@pytest.mark.pure
def test_prose_that_names_a_tool_is_no_command():
    text = (
        "the pulumi goes on; make status reads the cluster; a `pulumi up` run by hand; pulumi never logs in; run "
        "make audit again"
    )
    commands = [command for _, _, command in commands_in(text, code=False)]
    assert [c for c in commands if problems(Found("x", "", c))] == []
    assert "pulumi config set tpu-rl:protect false" in [
        c for _, _, c in commands_in("run pulumi config set tpu-rl:protect false then make up", code=False)
    ]


# -- the builders --------------------------------------------------------------------------------------------------


@pytest.mark.pure
def test_the_builders_bind_every_command_to_the_stack():
    assert kubectl(DEV, "logs", "-n", "tpu-rl") == f"kubectl --context {DEV.kube_context} logs -n tpu-rl"
    assert DEV.kube_context == f"gke_{DEV.project}_{DEV.region}_{DEV.cluster_name}"
    assert helm("gke_p_r_c", "uninstall", "kueue", "-n", "kueue-system") == (
        "helm --kube-context gke_p_r_c uninstall kueue -n kueue-system"
    )
    assert make_target("destroy", "prod") == "make destroy STACK=prod"
    assert pulumi_command("prod", "cancel", "--yes") == "tpu-rl pulumi --stack prod -- cancel --yes"
    assert pulumi_command("prod", "cancel", url="https://api.pulumi.com", organization="acme") == (
        "PULUMI_BACKEND_URL=https://api.pulumi.com pulumi cancel --stack acme/prod"
    )
    assert pulumi_config_set("prod", "tpu-rl:workflow.enabled", "false") == (
        "tpu-rl pulumi --stack prod -- config set --path 'tpu-rl:workflow.enabled' false"
    )
    assert pulumi_config_set("prod", "tpu-rl:protect", "false") == (
        "tpu-rl pulumi --stack prod -- config set 'tpu-rl:protect' false"
    )
    assert pulumi_config_set("dev", "tpu-rl:hfToken", secret=True) == (
        "tpu-rl pulumi --stack dev -- config set --secret 'tpu-rl:hfToken'"
    ), "no value: the CLI prompts for it, and the token stays out of the shell's history"
    assert pulumi_config_rm("dev", "tpu-rl:gke.holdUpgrades") == (
        "tpu-rl pulumi --stack dev -- config rm --path 'tpu-rl:gke.holdUpgrades'"
    )


@pytest.mark.pure
@pytest.mark.parametrize(
    ("key", "nested"),
    [
        ("tpu-rl:protect", False),
        ("gcp:project", False),
        ("tpu-rl:workflow.enabled", True),
        ("tpu-rl:authorizedNetworks[0]", True),
        ('tpu-rl:training.extraArgs["rl.grpo_beta"]', True),
    ],
)
def test_a_nested_key_goes_with_path(key, nested):
    assert needs_path(key) is nested
    assert ("--path" in pulumi_config_set("dev", key, "x").split()) is nested


@pytest.mark.pure
def test_a_key_without_namespace_is_the_projects_and_values_are_quoted_but_placeholders():
    assert full_key("workflow.enabled") == "tpu-rl:workflow.enabled"
    assert full_key("gcp:project") == "gcp:project"
    assert pulumi_config_set("dev", "tpu-rl:bucketName", "<name>").endswith("'tpu-rl:bucketName' <name>")
    assert pulumi_config_set("dev", "tpu-rl:model.revision", "a b").endswith("'tpu-rl:model.revision' 'a b'")
    assert pulumi_config_set(ANY_STACK, "tpu-rl:protect", "true").startswith(
        "tpu-rl pulumi --stack <stack> -- config set 'tpu-rl:protect'"
    )


@pytest.mark.pure
@pytest.mark.parametrize("field", FIELDS, ids=lambda f: f.key)
def test_every_builder_output_passes_the_scan(field):
    for command in (pulumi_config_set("prod", field.key, "x"), pulumi_config_rm("prod", field.key)):
        assert problems(judged(command)) == [], command


# -- what the CLI writes, loaded as the program loads it -----------------------------------------------------------


@pytest.mark.pure
@pytest.mark.parametrize(
    ("command", "entry"),
    [
        ("pulumi config set tpu-rl:workflow.enabled false", ("tpu-rl:workflow.enabled", (), "false")),
        ("pulumi config set --path tpu-rl:workflow.enabled false", ("tpu-rl:workflow", ("enabled",), False)),
        ("pulumi config set --path workflow.enabled true", ("tpu-rl:workflow", ("enabled",), True)),
        ("pulumi config set --path tpu-rl:training.numBatches 20", ("tpu-rl:training", ("numBatches",), 20)),
        ("pulumi config set --path tpu-rl:model.revision 0123", ("tpu-rl:model", ("revision",), "0123")),
        ("pulumi config set --path tpu-rl:protect true", ("tpu-rl:protect", (), "true")),
        (
            "pulumi config set --path 'tpu-rl:authorizedNetworks[0]' 1.2.3.4/32",
            ("tpu-rl:authorizedNetworks", (0,), "1.2.3.4/32"),
        ),
        (
            "pulumi config set --path 'tpu-rl:training.extraArgs[\"rl.grpo_beta\"]' 0",
            ("tpu-rl:training", ("extraArgs", "rl.grpo_beta"), 0),
        ),
        ("pulumi config set --secret --path tpu-rl:x.y v", ("tpu-rl:x", ("y",), {"secure": "v1:ciphertext"})),
    ],
)
def test_the_model_writes_what_the_cli_writes(command, entry):
    setting = config_set(command)
    assert setting is not None
    assert stored(setting, setting.value or "") == entry


def test_without_path_the_way_out_of_a_protected_stack_never_lifts_the_protection():
    """The destroy refusal said `pulumi config set tpu-rl:workflow.enabled false`: the CLI stores a flat key, which
    the program refuses, and the stack stays protected. With `--path` the workflow is off."""
    flat = ConfigSet("prod", "tpu-rl:workflow.enabled", "false", path=False, secret=False)
    refused = loaded("prod", written_config(document("prod"), flat, "false"))
    assert isinstance(refused, tuple) and any(
        "tpu-rl:workflow.enabled" in line and "unknown key" in line for line in refused
    )
    nested = ConfigSet("prod", "tpu-rl:workflow.enabled", "false", path=True, secret=False)
    settings = loaded("prod", written_config(document("prod"), nested, "false"))
    assert isinstance(settings, Settings) and settings.workflow.enabled is False


@functools.cache
def document(stack: str) -> dict[str, Any]:
    """The stack file's ``config:`` (the example dev stack's for a stack that has none)."""
    name = stack if stack in ("dev", "prod") else "dev"
    return dict(read_yaml(ROOT / f"Pulumi.{name}.yaml")["config"])


@pytest.fixture(autouse=True)
def _declarations_once(monkeypatch):
    """Pulumi.yaml read once: every load here reads the same declarations."""
    monkeypatch.setattr(
        tools.stack_files, "project_declarations", functools.cache(tools.stack_files.project_declarations)
    )


def loaded(stack: str, config: dict[str, Any], overrides: tuple[str, ...] = (), secret: str = "") -> Any:
    """The settings the program reads from a stack file holding ``config`` (and ``overrides``, as the offline plan's
    ``--set``), or the lines it refuses it with; a Hugging Face token where the file sets none, as the CLI would hand
    the program its secret."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "Pulumi.stack.yaml"
        path.write_text(yaml.dump({"config": config}, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper)))
        try:
            strings, secret_keys, _ = load_stack_config(path, list(overrides))
        except tools.stack_files.StackFileError as err:
            return (str(err),)
    raw: dict[str, Any] = dict(strings)
    keys = set(secret_keys) | ({secret} if secret else set())
    if raw.get("tpu-rl:hfToken") in (None, "") or "tpu-rl:hfToken" not in keys:
        raw["tpu-rl:hfToken"], keys = TOKEN, keys | {"tpu-rl:hfToken"}
    try:
        return load_settings(raw, stack if stack in ("dev", "prod") else "dev", frozenset(keys))
    except ConfigError as err:
        return tuple(sorted(str(err).splitlines()))


def check(setting: ConfigSet) -> None:
    """What the CLI writes for ``setting`` (placeholders filled) loads as the same value set with ``--set`` does,
    and the loader names no problem of the key."""
    done, value = filled(setting)
    stack = done.stack if done.stack in ("dev", "prod") else "dev"
    written = loaded(stack, written_config(document(stack), done, value))
    key = done.key if ":" in done.key else f"tpu-rl:{done.key}"
    if isinstance(written, tuple):
        refused = [line for line in written if key.split("[")[0] in line and "unknown" in line]
        assert refused == [], f"{setting}: the CLI stores a key the program refuses: {refused}"
    expected = loaded(stack, document(stack), (f"{key}={value}",), secret=key if done.secret else "")
    assert written == expected, f"{setting}: the CLI's stack file reads as {written}, not as {expected}"


def printed() -> list[tuple[str, ConfigSet]]:
    """Every printed ``pulumi config set``, where it is printed (read when a test runs, not at collection)."""
    return [(f.where, c) for f in every_command() if (c := config_set(f.command))]


def test_every_printed_config_set_sets_what_it_says():
    wrong = []
    for where, setting in printed():
        try:
            check(setting)
        except AssertionError as err:
            wrong.append(f"{where}: {err}")
    assert wrong == []


def test_the_printed_config_sets_include_the_way_out_of_a_protected_stack():
    found = printed()
    assert len(found) > 30
    assert {w.split(":")[0] for w, c in found if c.key == "tpu-rl:workflow.enabled"} >= {
        "Makefile",
        "docs/troubleshooting.md",
    }, "the destroy refusal and its page"


@pytest.mark.pure
@pytest.mark.parametrize("field", FIELDS, ids=lambda f: f.key)
def test_the_builder_sets_every_key_of_the_schema_as_the_program_reads_it(field):
    setting = config_set(judged(pulumi_config_set("prod", field.key, "<value>", secret=field.secret)).command)
    assert setting is not None
    check(setting)


def _key_of(node: ast.AST, path: Path) -> str | None:
    """A builder's key argument, when it is known before the program runs: a literal, ``_k("...")``, an f-string of
    the project's name, or a module constant of those."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("_k", "project_key") and node.args:
        inner = _key_of(node.args[0], path)
        return f"tpu-rl:{inner}" if inner else None
    if isinstance(node, ast.JoinedStr):
        text = rendered(node).replace("{PROJECT}", "tpu-rl")
        return None if "{" in text else text
    if isinstance(node, ast.Name):
        for statement in parsed(path).body:
            if isinstance(statement, ast.Assign) and any(getattr(t, "id", "") == node.id for t in statement.targets):
                return _key_of(statement.value, path)
    return None


def test_every_key_a_builder_is_given_is_a_key_of_the_schema():
    """A key the product hands ``pulumi_config_set`` or ``pulumi_config_rm`` is one the program reads (the builder
    gives it ``--path`` when nested); one known only at run time is a field's own (``field.key``) or the key of a
    message the reviewed messages pin."""
    keys = {field.key for field in FIELDS}
    wrong, seen = [], 0
    for path in product_files():
        for call in nodes(path, ast.Call):
            name = getattr(call.func, "id", getattr(call.func, "attr", ""))  # type: ignore[attr-defined]
            if name not in ("pulumi_config_set", "pulumi_config_rm") or len(call.args) < 2:  # type: ignore[attr-defined]
                continue
            key = _key_of(call.args[1], path)  # type: ignore[attr-defined]
            if key is None:
                continue
            seen += 1
            base = re.sub(r"\[\d+\]$", "", key)
            if base not in keys and not any(k.startswith(base.split("<")[0]) for k in keys if "<" in base):
                wrong.append(f"{rel(path)}:{call.lineno}: {key}")  # type: ignore[attr-defined]
    assert wrong == []
    assert seen >= 10
