"""What a step prints of a text from elsewhere (``workloads/container/shown.py``), the one module every container
program prints such text through: core's redaction (shipped beside the programs: the image has no ``core``), terminal
controls removed before the secrets are looked for, and every program shipped with it in its ConfigMap and printing
through it, run as the pod runs it (``python3 /tpu-rl/<file>``)."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import Phase, configuration, given, settings
from hypothesis import strategies as st

import core.redact
import core.redact_keys
import core.terminal
from core.terminal import visible
from tests.source_files import ROOT
from workloads.container import shown
from workloads.specs.commands import CORE_FILES, program_files, program_imports

pytestmark = pytest.mark.pure
configuration.set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "tpu-rl-hypothesis")

PROPERTIES = settings(
    max_examples=150, deadline=None, database=None, derandomize=True, phases=[Phase.explicit, Phase.generate]
)
CONTAINER = ROOT / "workloads" / "container"
HOSTILE = (
    "404 Client Error\x1b]8;;https://evil.example\x07 click\x1b]8;;\x07 \x1b[2J\x1bc\u202eexe.txt\u2066 "
    "re\u00adpo\u200b \U000e0069\U000e0067 \x1b]52;c;cm0gLXJmIH4=\x07for url: https://huggingface.co/api/x"
)
SHOWN = "404 Client Error click exe.txt repo for url: https://huggingface.co/api/x"
TOKEN = "hf_" + "Sx7" * 11 + "q"
"""A Hugging Face token's shape (``hf_`` and 34 letters and digits)."""
NO_SECRETS: dict[str, str] = {}


def test_a_hub_error_with_escapes_hyperlinks_and_invisible_characters_is_the_terminals_text():
    assert shown.line(HOSTILE) == SHOWN


def test_controls_go_first_so_a_coloured_or_split_secret_is_still_found():
    """A token cut by a zero-width space, a soft hyphen or a colour code reads whole on a terminal: it is redacted."""
    held = {"HF_TOKEN": TOKEN}
    split = TOKEN[:10] + "\u200b" + TOKEN[10:20] + "\x1b[31m" + TOKEN[20:30] + "\u00ad" + TOKEN[30:]
    assert shown.redacted(f"401 for {split}", held) == "401 for [redacted]"
    assert shown.redacted(f"bearer {TOKEN[:3]}\U000e0041{TOKEN[3:]}", NO_SECRETS) == "bearer [redacted]"


def test_the_pods_secrets_are_redacted_by_their_variables_names():
    held = {
        "HF_TOKEN": "not-a-token-shape",
        "WRITE_KEY": "k3y-value",
        "PATH": "/usr/bin:/bin",
        "SHORT_TOKEN": "1234567",
    }
    said = shown.redacted("not-a-token-shape k3y-value /usr/bin 1234567", held)
    assert said == "[redacted] [redacted] /usr/bin 1234567", "a value under 8 characters is no secret"


def test_a_longer_secret_is_redacted_before_a_shorter_one_inside_it():
    held = {"A_TOKEN": "abcdefgh", "B_TOKEN": "abcdefgh-and-more"}
    assert shown.redacted("x abcdefgh-and-more y abcdefgh", held) == "x [redacted] y [redacted]"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a -----BEGIN PRIVATE KEY-----\nMIIE\nabc\n-----END PRIVATE KEY----- b", "a [redacted private key] b"),
        ("cut -----BEGIN RSA PRIVATE KEY-----\nMIIEvQIBADANBg", "cut [redacted private key]"),
        (
            "tail: MIIEvQIBADANBg\nkqhkiG9w0BAQEF\n-----END EC PRIVATE KEY----- next",
            "tail: MIIEvQIBADANBg\n[redacted private key] next",  # core's rule: a prose line's last word stays
        ),
        (
            "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----",
            "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----",
        ),
    ],
    ids=["whole", "cut-after-begin", "cut-before-end", "public-key-kept"],
)
def test_private_keys_whole_or_cut_and_a_public_key_kept(text, expected):
    assert shown.redacted(text, NO_SECRETS) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"token {TOKEN}", "token [redacted]"),
        ("hf_" + "a" * 29, "hf_" + "a" * 29),
        ("pip install hf_transfer hf_hub_download", "pip install hf_transfer hf_hub_download"),
        ("ya29.a0AfB_byC-x", "[redacted]"),
        ("eyJhbGciOiJSUzI1NiIsImtpZCI6", "[redacted]"),
        ("eyJhbGciOiJ", "eyJhbGciOiJ"),
    ],
    ids=["hf-token", "hf-29-kept", "package-names", "oauth", "jwt", "short-jwt-kept"],
)
def test_token_shapes_at_their_boundaries(text, expected):
    assert shown.redacted(text, NO_SECRETS) == expected


def test_a_line_is_one_line_cut_at_its_limit_after_the_redaction():
    said = shown.line(f"a\n\tb\u2028c {TOKEN}", 14)
    assert said == "a b c [redacte"
    assert shown.line("x" * 500) == "x" * 300 and shown.line("x" * 500, None) == "x" * 500
    assert shown.line("a\ud800b") == "a?b" and shown.line("a\ud800b", None, " ") == "a b"


@PROPERTIES
@pytest.mark.slow
@given(st.text(max_size=300))
def test_a_line_is_one_printable_line_of_what_a_terminal_draws(text):
    line = shown.line(text, 10_000)
    assert line.isprintable() and not core.terminal.HIDDEN.search(line) and line == " ".join(line.split())
    assert line == shown.line(core.redact.redact_text(text, width=10_000), 10_000), "core's redaction, once"


@PROPERTIES
@pytest.mark.slow
@given(st.text(max_size=200), st.text(alphabet="\u200b\u00ad\U000e0041\x1b[31m\u202e", max_size=4))
def test_a_held_secret_never_survives_an_invisible_character_inside_it(before, inside):
    held = {"HF_TOKEN": TOKEN}
    said = shown.redacted(before + TOKEN[:17] + inside + TOKEN[17:], held)
    assert TOKEN not in said and TOKEN not in visible(said)


# ---------------------------------------------------------------------------------------------
# The programs: no copy of the patterns, each ships and prints through ``shown.py``


def program_names() -> list[str]:
    return sorted(p.name for p in CONTAINER.glob("*.py") if p.name not in ("__init__.py", "shown.py"))


def project_imports(name: str) -> set[str]:
    """The files of ``workloads/container``, and core's ``CORE_FILES`` by their names, that the program ``name``
    imports (as ``python3 /tpu-rl/<file>`` finds them: its bare ``import x`` or ``from x import ...`` of a file beside
    it)."""
    tree = ast.parse((CONTAINER / name).read_text())
    bare = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
    bare += [
        node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module and not node.level
    ]
    return {f"{module}.py" for module in bare if (CONTAINER / f"{module}.py").exists() or f"{module}.py" in CORE_FILES}


def test_no_program_holds_a_copy_of_the_patterns():
    for name in program_names():
        source = (CONTAINER / name).read_text()
        assert "HIDDEN = re.compile" not in source and r"\x1b\[[0-?]*" not in source, name
        assert "ACCESS_TOKENS" not in source and "hf_[A-Za-z0-9]" not in source, name


def test_every_file_a_program_imports_ships_beside_it():
    assert {name: set(program_imports(name)) for name in program_names()} == {
        name: project_imports(name) for name in program_names()
    }
    shipped = {"stage_dataset.py", "base_snapshot.py", "shown.py", "hf_model.py", "tpu_rl_program.py"}
    shipped |= {"errors.py"}  # core's error tree, which hf_model.py and tpu_rl_program.py import
    shipped |= {"redact.py", "redact_keys.py", "terminal.py"}  # core's redaction, which shown.py applies
    assert set(program_files("stage_dataset.py")) == shipped


PRINTS_OUTSIDE_TEXT = (
    "base_snapshot.py",
    "complete_export.py",
    "evaluate_export.py",
    "mark_folder.py",
    "maxtext_check.py",
    "publish_hub.py",
    "slice_state.py",
    "train_exit.py",
)
"""The programs that print a text from elsewhere (the Hub's, GCS's or the API server's errors, a record's names,
train_rl's log, the image's files); ``stage_dataset.py`` prints through ``base_snapshot.log``."""


def test_each_program_that_prints_outside_text_imports_the_module():
    assert {name for name in program_names() if "shown.py" in project_imports(name)} == set(PRINTS_OUTSIDE_TEXT)


def test_every_program_imports_as_the_pod_runs_it(tmp_path):
    """Each program's ConfigMap files (``program_files``) in one folder, imported by a real ``python3`` with that folder
    first on ``sys.path`` and no package around them, as ``python3 /tpu-rl/<file>`` runs them: each finds ``shown``."""
    for name in program_names():
        for file_name, text in program_files(name).items():
            (tmp_path / file_name).write_text(text)
    modules = [name.removesuffix(".py") for name in program_names()]
    imports = f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import {', '.join(modules)}"
    probe = f"{imports}; print(sys.modules['shown'].__file__)"
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == str(tmp_path / "shown.py"), done.stderr


def test_the_export_prints_the_hubs_error_as_the_terminals_text_with_the_token_redacted(monkeypatch, capsys):
    """The export's completing program, failing on an error whose text carries terminal controls, hyperlinks and the
    pod's token: stderr holds the one line a terminal would draw, the token redacted, and the step runs again."""
    from workloads.container import complete_export

    def failing(*_args: str) -> None:
        raise OSError(f"{HOSTILE} {TOKEN[:12]}\u200b{TOKEN[12:]}")

    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setattr(complete_export, "complete", failing)
    with pytest.raises(SystemExit) as stopped:
        complete_export.main(["google/gemma", "a" * 40, "gs://b/x/", "gs://b/c/"])
    assert stopped.value.code == 1
    assert capsys.readouterr().err == f"tpu-rl export: OSError: {SHOWN} [redacted]\n"


def test_a_program_prints_an_images_text_as_the_terminals_with_the_token_redacted(tmp_path):
    """The MaxText check, run as its pod runs it (``python3 /tpu-rl/maxtext_check.py`` beside ``shown.py``), names an
    image it finds no MaxText in: the name a terminal would draw, the pod's token redacted."""
    for file_name, text in program_files("maxtext_check.py").items():
        (tmp_path / file_name).write_text(text)
    argv = [sys.executable, str(tmp_path / "maxtext_check.py"), f"img\x1b[2J\u200bx {TOKEN}"]
    env = {"PATH": "/usr/bin:/bin", "HF_TOKEN": TOKEN}
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 3 and done.stdout == ""
    assert done.stderr.startswith("tpu-rl: the image imgx [redacted] has no MaxText package"), done.stderr
    assert done.stderr.count("\n") == 1 and TOKEN not in done.stderr


def test_a_program_module_name_is_a_file_of_the_folder():
    """The import the pods run is the bare name of a file of the ConfigMap (``import shown``), never a package path."""
    for name in PRINTS_OUTSIDE_TEXT:
        source = (CONTAINER / name).read_text()
        assert re.search(
            r"^else:  # python3 /tpu-rl/[a-z_]+\.py: .*\n(    import [a-z_]+( as [a-z_]+)?\n)+", source, re.M
        ), name
        assert importlib.import_module(f"workloads.container.{name.removesuffix('.py')}").shown is shown
