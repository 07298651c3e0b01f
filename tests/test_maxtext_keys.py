"""The committed MaxText key table is the pinned release's configuration (made from its wheel by
tools/adopt_maxtext.py), the steps' argv loads as that release's config loader loads it, and extraArgs are read
against the table."""

from __future__ import annotations

import copy
import functools
import hashlib
import io
import json
import lzma
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from core import maxtext_keys
from core.config import ConfigError
from core.config.load import INTERPRETED, PROGRAM_KEYS, read_extra_args
from core.knobs import TRAINING_KNOBS
from core.names import SETUP_FAILURE_EXIT
from tests.conftest import SHARED, VENDORED, shared_path
from tests.pure_plan import per_mutant_cache
from tools import adopt_maxtext

KEY = "tpu-rl:training.extraArgs"
VERSION = maxtext_keys.MAXTEXT_VERSION
RELEASE = f"maxtext-{VERSION}"

pytestmark = pytest.mark.pure


@functools.cache
def _vendored(path: str) -> bytes:
    """A vendored file of the release, decompressed (once per process)."""
    plain = VENDORED / RELEASE / path
    return plain.read_bytes() if plain.exists() else lzma.decompress(plain.with_name(plain.name + ".xz").read_bytes())


def _vendored_yaml(path: str) -> Any:
    """A vendored YAML file of the release, parsed once per process (each caller gets its own copy)."""
    return copy.deepcopy(_parsed(path))


@functools.cache
def _parsed(path: str) -> Any:
    return yaml.safe_load(_vendored(path))


def _wheel_record() -> dict:
    return json.loads(shared_path(RELEASE, adopt_maxtext.RECORD_NAME).read_text())


# -- the table is the release's ------------------------------------------------------------------------


@pytest.mark.slow
def test_the_table_is_regenerated_from_the_pinned_release():
    configs = shared_path(RELEASE, "configs")
    assert maxtext_keys.TABLE.name == f"maxtext-{VERSION}-keys.json"
    assert maxtext_keys.generate(configs) == maxtext_keys.known_keys(), (
        f"core/data/maxtext-{VERSION}-keys.json is stale: make maxtext VERSION={VERSION}"
    )


def test_only_the_pinned_releases_table_is_committed():
    tables = sorted(p.name for p in maxtext_keys.TABLE.parent.glob("maxtext-*-keys.json"))
    assert tables == [maxtext_keys.TABLE.name], "an old table is dead data: git keeps it"


def test_the_wheel_record_names_every_vendored_file_with_its_content():
    record = _wheel_record()
    assert record["package"] == "maxtext" and record["version"] == VERSION
    assert record["wheel"] == f"maxtext-{VERSION}-py3-none-any.whl" and re.fullmatch(r"[0-9a-f]{64}", record["sha256"])
    vendored = {
        p.relative_to(VENDORED / RELEASE).as_posix().removesuffix(".xz")
        for p in (VENDORED / RELEASE).rglob("*")
        if p.is_file() and p.name not in (adopt_maxtext.RECORD_NAME, adopt_maxtext.RELEASED_LIST)
    }
    assert vendored == set(record["files"])
    for path, facts in record["files"].items():
        data = _vendored(path)
        assert hashlib.sha256(data).hexdigest() == facts["sha256"], path
        assert adopt_maxtext.git_blob(data) == facts["git_blob"], path
    assert any(pin.startswith("google-tunix @ ") for pin in record["post_train_github_deps"]), "the image's tunix"


def test_the_vendored_files_are_the_released_ones():
    """The files the table is made of are those of the list ../shared keeps for the release, by sha256: a list made
    apart from the wheel, vendored beside the files by tools/adopt_maxtext.py (so this runs in a clone too); where
    ../shared has it as well, the two are the same bytes."""
    listed = shared_path(RELEASE, adopt_maxtext.RELEASED_LIST)
    released = adopt_maxtext.released_sums(listed.read_text())
    assert {"configs/base.yml", "configs/post_train/rl.yml"} <= set(released)
    files = _wheel_record()["files"]
    for path, digest in released.items():
        assert files[path]["sha256"] == digest, f"{path}: the wheel's differs from the released list"
        assert hashlib.sha256(_vendored(path)).hexdigest() == digest, path
    beside = SHARED / RELEASE / adopt_maxtext.RELEASED_LIST
    if beside.exists():
        assert beside.read_bytes() == listed.read_bytes(), "../shared's list changed: make maxtext VERSION=" + VERSION


# -- every key the program passes is one of the release's, with the same meaning ----------------------------


def test_every_key_the_program_sets_or_reads_is_a_maxtext_key():
    table = maxtext_keys.known_keys()
    assert {k.key for k in TRAINING_KNOBS} <= set(table)
    assert set(INTERPRETED) <= set(table)
    derived = adopt_maxtext.DERIVED  # RLConfig fields derived in code, in no config file
    assert set(PROGRAM_KEYS) - derived <= set(table) and not derived & set(table)
    assert adopt_maxtext.program_keys() <= set(table)
    assert table["rl.num_generations"] == "int" and table["train_fraction"] == "float"
    assert table["async_checkpointing"] == "bool" and table["logical_axis_rules"] == "list"


def _steps_argv(stack: str) -> dict[str, list[str]]:
    """The steps' argv; dev's with every knob MaxText 0.2.5 added set away from its default, and the two-slice keys
    (each caller gets its own copy)."""
    return copy.deepcopy(_steps_argv_once(stack))


@per_mutant_cache
def _steps_argv_once(stack: str) -> dict[str, list[str]]:
    from tests.lifecycle_walk import settings
    from workloads.specs.commands import convert_argv, disaggregated, export_argv, train_argv

    changed = [f"tpu-rl:training.{k.field}={_other(k.default)}" for k in TRAINING_KNOBS if k.maxtext_default]
    s = settings(stack, [*(changed if stack == "dev" else []), "tpu-rl:training.extraArgs.eval_interval=5"])
    two = [f"{key}={value}" for key, value in disaggregated(2).items()]
    return {
        "convert": convert_argv(s, "gs://b/convert/"),
        "train": train_argv(s, "gs://b/convert/0/items/", "gs://b/train/") + two,
        "export": export_argv(s, "gs://b/export/"),
    }


def _other(default: object) -> object:
    return (not default) if isinstance(default, bool) else -1


def _fits(kind: str, value: object) -> bool:
    """Whether a value OmegaConf's YAML read from the argv is one pydantic takes for a default of type ``kind``."""
    if kind == "null" or value is None:
        return True
    if kind == "bool":
        return isinstance(value, bool) or value in (0, 1)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind in ("list", "dict"):
        return isinstance(value, (list, dict, str))
    return isinstance(value, str)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_steps_argv_loads_as_the_releases_pyconfig_loads_it(stack):
    """What MaxText's loader (``configs/pyconfig.py`` ``_initialize_pydantic``) does with a ``key=value`` word,
    short of importing it (it needs JAX): ``OmegaConf.from_cli`` reads the value as YAML, the key must be a config
    key (pydantic's ``extra="forbid"``), the value of its type, and a key the model's ``configs/models/<name>.yml``
    sets must not be given another value (``validate_no_keys_overridden_twice``)."""
    table = maxtext_keys.known_keys()
    for step, argv in _steps_argv(stack).items():
        words = dict(a.split("=", 1) for a in argv[2:] if not a.startswith("-"))
        model = _vendored_yaml(f"configs/models/{words['model_name']}.yml") or {}
        for key, text in words.items():
            assert key in table, f"{step}: {key} is no MaxText {VERSION} key"
            value = yaml.safe_load(text) if not text.startswith("${") else text
            assert _fits(table[key], value), f"{step}: {key}={text} is not a {table[key]}"
            assert key not in model or model[key] == value, f"{step}: {key} is set by {words['model_name']}.yml"


def _flags(path: str) -> set[str]:
    """A converter's own flags: argparse's ``add_argument("--x"`` and absl's ``flags.DEFINE_*("x"``."""
    source = _vendored(path).decode()
    return set(re.findall(r'add_argument\(\s*"--(\w+)"', source)) | set(
        re.findall(r'flags\.DEFINE_\w+\(\s*"(\w+)"', source)
    )


@pytest.mark.parametrize(("step", "module"), [("convert", "to_maxtext"), ("export", "to_huggingface")])
def test_the_converters_flags_exist_in_the_release(step, module):
    argv = _steps_argv("prod")[step]
    assert argv[1] == f"maxtext.checkpoint_conversion.{module}"
    given = {a[2:].split("=", 1)[0] for a in argv if a.startswith("--")}
    flags = _flags(f"checkpoint_conversion/{module}.py")
    assert given and given <= flags, f"{module} {VERSION} has no {sorted(given - flags)}"


def test_the_flags_read_are_the_converters_own():
    assert {"lazy_load_tensors", "hf_model_path", "revision"} <= _flags("checkpoint_conversion/to_maxtext.py")
    assert {"override_model_architecture", "hf_model_path"} <= _flags("checkpoint_conversion/to_huggingface.py")
    assert "parallel_threads" not in _flags("checkpoint_conversion/to_huggingface.py"), "removed in 0.2.5"


def test_the_optimizer_patch_applies_to_the_releases_utils_rl(tmp_path):
    from workloads.specs.commands import OPTIMIZER_PATCH

    target = tmp_path / "utils_rl.py"
    target.write_bytes(_vendored("trainers/post_train/rl/utils_rl.py"))
    done = subprocess.run([sys.executable, "-c", OPTIMIZER_PATCH, str(target)], capture_output=True, text=True)
    assert done.returncode == 0 and done.returncode != SETUP_FAILURE_EXIT, done.stderr
    assert "optax.adafactor(learning_rate=learning_rate)" in target.read_text()


def test_the_launcher_skips_only_the_pre_rl_evaluation_of_a_resumed_attempt(tmp_path, monkeypatch):
    """The release's own train_rl block, run before and after the launcher's patch: a resumed attempt
    (``RESUMED_ENV`` set) still pushes the restored weights to the rollout engine (train_rl's comment: without it the
    rollout engine keeps the base's), even with ``num_test_batches=0``, and no longer evaluates; a fresh attempt does
    as MaxText does. The patch is idempotent (the launcher run twice on one file)."""
    from tests.pre_rl_block import calls
    from workloads.container.launch import RESUMED_ENV, SKIPPED, skip_pre_rl_evaluation

    target = tmp_path / "train_rl.py"
    original = _vendored("trainers/post_train/rl/train_rl.py").decode()
    target.write_text(original)
    monkeypatch.delenv(RESUMED_ENV, raising=False)
    assert calls(original) == ["synced", "evaluated", "Pre RL Training"], "MaxText evaluates on every attempt"
    said = skip_pre_rl_evaluation(str(target))
    assert said == f"{SKIPPED}{target} patched: a resumed attempt syncs its weights and does not evaluate them"
    patched = target.read_text()
    assert skip_pre_rl_evaluation(str(target)) == f"{SKIPPED}{target} was patched already"
    assert target.read_text() == patched and [p.name for p in tmp_path.iterdir()] == ["train_rl.py"]
    compile(patched, "train_rl.py", "exec")
    assert calls(patched) == ["synced", "evaluated", "Pre RL Training"], "a fresh attempt is unchanged"
    assert calls(patched, num_test_batches=0) == [], "num_test_batches=0 still turns it all off"
    monkeypatch.setenv(RESUMED_ENV, "gs://b/train/0123456789/rl/checkpoints/actor/30/model_params/")
    assert calls(patched) == ["synced"], "a resumed attempt syncs the restored weights and does not evaluate"
    assert calls(patched, num_test_batches=0) == ["synced"], "tunix syncs only after a step: the first rollouts too"
    assert calls(original) == ["synced", "evaluated", "Pre RL Training"]


def test_the_launcher_leaves_an_unknown_train_rl_alone(tmp_path, monkeypatch):
    """An image whose train_rl differs, is not where MaxText's images keep it, is not UTF-8, or cannot be rewritten
    trains as before: one line says why, and the attempt goes on and evaluates; a rewrite that fails leaves the file
    as it was and no file beside it."""
    from workloads.container import launch

    target = tmp_path / "train_rl.py"
    original = _vendored("trainers/post_train/rl/train_rl.py")
    text = original.decode().replace("update_params(", "push_params(")
    target.write_text(text)
    binary = tmp_path / "latin1.py"
    binary.write_bytes(original.replace(b"# Run evaluation", "# Run \xe9valuation".encode("latin-1")))
    for path in (target, tmp_path / "missing.py", binary):
        said = launch.skip_pre_rl_evaluation(str(path))
        assert said.startswith(launch.KEPT) and said.endswith(": this attempt evaluates") and "\n" not in said
    assert target.read_text() == text

    def refused(source: str, destination: str) -> None:
        raise PermissionError(13, "Permission denied", destination)

    whole = tmp_path / "whole.py"
    whole.write_bytes(original)
    monkeypatch.setattr(launch.os, "replace", refused)
    assert launch.skip_pre_rl_evaluation(str(whole)) == f"{launch.KEPT}cannot patch {whole} (Permission denied): " + (
        "this attempt evaluates"
    )
    assert whole.read_bytes() == original and not (tmp_path / "whole.py.tpu-rl").exists()


def test_the_new_knobs_keep_the_releases_defaults_and_are_passed_only_when_changed():
    rl = _vendored_yaml("configs/post_train/rl.yml")
    new = [knob for knob in TRAINING_KNOBS if knob.maxtext_default and knob.key in rl]
    assert {k.key for k in new} == {
        "gc_collect_after_weight_sync",
        "free_kv_cache_during_weight_sync",
        "reward_num_workers",
    }
    for knob in new:
        assert rl[knob.key] == knob.default, f"{knob.key}: MaxText's default is what the program leaves unset"
    at_default = "\n".join(_steps_argv("prod")["train"])
    changed = _steps_argv("dev")["train"]
    assert not any(k.key in at_default for k in new), "the tutorial's argv at the defaults"
    assert {"gc_collect_after_weight_sync=false", "free_kv_cache_during_weight_sync=false"} <= set(changed)
    assert "reward_num_workers=-1" in changed


def test_a_knob_at_maxtexts_default_that_no_yaml_sets_is_the_fields_default():
    """A knob left out at MaxText's default that no YAML file of the release sets (``loadCheckpointOnlyOnce``, false
    until a real run has shown the copy: docs/first-run.md "The first training run's path") relies on its field's
    default in ``configs/types.py``: a release that changed it fails here, at adoption. Set, it is passed."""
    import ast

    base, rl = (_vendored_yaml(f"configs/{name}") for name in ("base.yml", "post_train/rl.yml"))
    fields = _models().fields(maxtext_keys.CONFIG_CLASS)
    knobs = [knob for knob in TRAINING_KNOBS if knob.maxtext_default and knob.key not in base and knob.key not in rl]
    assert [k.key for k in knobs] == ["load_checkpoint_only_once"]
    for knob in knobs:
        default = fields[knob.key].default
        if isinstance(default, ast.Call) and ast.unparse(default.func) == "Field":
            default = [*default.args[:1], *(k.value for k in default.keywords if k.arg == "default")][0]
        assert default is not None and ast.literal_eval(default) == knob.default, knob.key
    assert not any("load_checkpoint_only_once" in word for word in _steps_argv("prod")["train"])
    assert "load_checkpoint_only_once=true" in _steps_argv("dev")["train"], "set away from it (dev's), it is passed"


# -- the adoption command --------------------------------------------------------------------------------


def _fake_wheel(tmp_path: Path, version: str, *, damage: str = "", drop: str = "", tunix: str = "abc") -> Path:
    """A wheel holding the vendored release's files (as version ``version``), its METADATA and RECORD."""
    import base64

    files = {f"maxtext/{path}": _vendored(path) for path in _wheel_record()["files"] if path != drop}
    files[adopt_maxtext.PINS] = f"google-tunix @ https://github.com/google/tunix/archive/{tunix}.zip\n".encode()
    info = f"maxtext-{version}.dist-info"
    files[f"{info}/METADATA"] = f"Metadata-Version: 2.5\nName: maxtext\nVersion: {version}\n".encode()
    rows = [
        f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}"
        for name, data in files.items()
    ]
    files[f"{info}/RECORD"] = ("\n".join([*rows, f"{info}/RECORD,,"]) + "\n").encode()
    if damage:
        files[damage] = files[damage] + b"\n# changed\n"
    path = tmp_path / f"maxtext-{version}-py3-none-any.whl"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    path.write_bytes(buffer.getvalue())
    return path


def _dirs(tmp_path: Path) -> tuple[Path, Path]:
    vendor, data = tmp_path / "vendor", tmp_path / "data"
    vendor.mkdir()
    data.mkdir()
    (vendor / "SHA256SUMS").write_text(f"{'0' * 64}  schemas/x.yaml\n{'1' * 64}  maxtext-9.9.9/old.yml\n")
    (vendor / "maxtext-9.9.9").mkdir()
    (vendor / "maxtext-9.9.9" / "old.yml").write_text("stale: true\n")
    return vendor, data


def test_the_command_makes_the_table_when_none_is_committed(tmp_path, capsys, monkeypatch):
    """A first adoption, or a table removed to be made again: every key is new, and no traceback."""
    vendor, data = _dirs(tmp_path)
    monkeypatch.setattr(maxtext_keys, "TABLE", tmp_path / "none" / "maxtext-9.9.9-keys.json")
    assert (
        adopt_maxtext.adopt("9.9.9", _fake_wheel(tmp_path, "9.9.9"), vendor, data, shared_dir=tmp_path / "shared") == 0
    )
    made = json.loads((data / "maxtext-9.9.9-keys.json").read_text())
    assert f"keys: 0 -> {len(made)} ({len(made)} added, 0 removed, 0 retyped)" in capsys.readouterr().out


def test_the_command_makes_the_table_and_the_vendored_files_from_the_wheel(tmp_path, capsys):
    vendor, data = _dirs(tmp_path)
    wheel = _fake_wheel(tmp_path, "9.9.9")
    assert adopt_maxtext.adopt("9.9.9", wheel, vendor, data, shared_dir=tmp_path / "shared") == 0
    assert json.loads((data / "maxtext-9.9.9-keys.json").read_text()) == maxtext_keys.known_keys()
    record = json.loads((vendor / "maxtext-9.9.9" / "wheel.json").read_text())
    assert record["sha256"] == hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert record["post_train_github_deps"] == ["google-tunix @ https://github.com/google/tunix/archive/abc.zip"]
    assert not (vendor / "maxtext-9.9.9" / "old.yml").exists(), "a file the release no longer has is gone"
    assert (vendor / "maxtext-9.9.9" / "trainers/post_train/rl/utils_rl.py.xz").exists(), "code is compressed"
    sums = {
        name: digest
        for digest, name in (line.split("  ", 1) for line in (vendor / "SHA256SUMS").read_text().splitlines())
    }
    assert sums["schemas/x.yaml"] == "0" * 64 and "maxtext-9.9.9/old.yml" not in sums
    assert sums["maxtext-9.9.9/configs/base.yml"] == record["files"]["configs/base.yml"]["sha256"]
    assert (
        sums["maxtext-9.9.9/wheel.json"]
        == hashlib.sha256((vendor / "maxtext-9.9.9/wheel.json").read_bytes()).hexdigest()
    )
    out = capsys.readouterr().out
    assert f"keys: {len(maxtext_keys.known_keys())} -> {len(maxtext_keys.known_keys())} (0 added" in out
    pin = json.loads((data / "maxtext-9.9.9-record.json").read_text())
    with zipfile.ZipFile(wheel) as archive:
        lines = archive.read("maxtext-9.9.9.dist-info/RECORD").decode().splitlines()
    assert pin == {
        "package": "maxtext",
        "version": "9.9.9",
        "wheel": wheel.name,
        "sha256": record["sha256"],
        "record": [line for line in lines if line.startswith("maxtext/")],
    }, "the RECORD's own lines of maxtext/, each the wheel's file: what the steps check their image against"
    assert len(pin["record"]) == len(record["files"]) and "maxtext-9.9.9-record.json (the RECORD's 17 lines" in out


@pytest.mark.parametrize(
    ("damage", "drop", "words"),
    [
        ("maxtext/configs/base.yml", "", "does not match the wheel's RECORD"),
        ("", "configs/post_train/rl.yml", "has no maxtext/configs/post_train/rl.yml"),
    ],
)
def test_a_damaged_or_incomplete_wheel_is_refused(tmp_path, damage, drop, words):
    vendor, data = _dirs(tmp_path)
    with pytest.raises(adopt_maxtext.AdoptError, match=words):
        adopt_maxtext.adopt(
            "9.9.9", _fake_wheel(tmp_path, "9.9.9", damage=damage, drop=drop), vendor, data, shared_dir=tmp_path
        )
    assert not list(data.iterdir()), "nothing written"


@pytest.mark.slow
def test_a_release_adopted_before_must_be_the_same_wheel(tmp_path):
    vendor, data = _dirs(tmp_path)
    wheel = _fake_wheel(tmp_path, "9.9.9")
    assert adopt_maxtext.adopt("9.9.9", wheel, vendor, data, shared_dir=tmp_path / "shared") == 0
    assert adopt_maxtext.adopt("9.9.9", wheel, vendor, data, shared_dir=tmp_path / "shared") == 0, (
        "the same wheel again"
    )
    (tmp_path / "other").mkdir()
    other = _fake_wheel(tmp_path / "other", "9.9.9", tunix="def")
    with pytest.raises(adopt_maxtext.AdoptError, match="not the [0-9a-f]{64} adopted"):
        adopt_maxtext.adopt("9.9.9", other, vendor, data, shared_dir=tmp_path / "shared")


@pytest.mark.parametrize("agrees", [True, False])
def test_the_released_list_beside_the_checkout_is_checked_and_vendored(tmp_path, agrees):
    vendor, data = _dirs(tmp_path)
    wheel = _fake_wheel(tmp_path, "9.9.9")
    base = hashlib.sha256(_vendored("configs/base.yml")).hexdigest() if agrees else "0" * 64
    listed = tmp_path / "shared" / "maxtext-9.9.9" / "README.md"
    listed.parent.mkdir(parents=True)
    listed.write_text(f"# MaxText 9.9.9\n\n```\n{base}  configs/base.yml\n```\n")
    if not agrees:
        with pytest.raises(adopt_maxtext.AdoptError, match="lists configs/base.yml otherwise than the wheel"):
            adopt_maxtext.adopt("9.9.9", wheel, vendor, data, shared_dir=tmp_path / "shared")
        return
    assert adopt_maxtext.adopt("9.9.9", wheel, vendor, data, shared_dir=tmp_path / "shared") == 0
    assert (vendor / "maxtext-9.9.9" / "README.md").read_bytes() == listed.read_bytes()
    assert "README.md" not in json.loads((vendor / "maxtext-9.9.9" / "wheel.json").read_text())["files"]
    sums = (vendor / "SHA256SUMS").read_text()
    assert f"{hashlib.sha256(listed.read_bytes()).hexdigest()}  maxtext-9.9.9/README.md" in sums
    # In a clone (no ../shared), adopting again keeps the vendored list, checked against the wheel the same way.
    assert adopt_maxtext.adopt("9.9.9", wheel, vendor, data, shared_dir=tmp_path / "absent") == 0
    assert (vendor / "maxtext-9.9.9" / "README.md").read_bytes() == listed.read_bytes()
    assert (vendor / "SHA256SUMS").read_text() == sums


def test_another_releases_wheel_is_refused(tmp_path):
    with pytest.raises(adopt_maxtext.AdoptError, match="not the maxtext 9.9.9 wheel"):
        adopt_maxtext.read_wheel(_fake_wheel(tmp_path, "9.9.8"), "9.9.9")


def test_a_release_without_a_key_the_program_uses_fails(tmp_path, monkeypatch, capsys):
    vendor, data = _dirs(tmp_path)
    monkeypatch.setattr(adopt_maxtext, "program_keys", lambda: {"rl.num_generations", "no_such_key"})
    assert (
        adopt_maxtext.adopt("9.9.9", _fake_wheel(tmp_path, "9.9.9"), vendor, data, shared_dir=tmp_path / "shared") == 1
    )
    assert "does not have: no_such_key" in capsys.readouterr().err


def test_the_command_names_the_defaults_that_changed(tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    for root, rl in (
        (old, "rl:\n  num_generations: 2\nbatch_size: 4\n"),
        (new, "rl:\n  num_generations: 8\nbatch_size: 4\n"),
    ):
        (root / "post_train").mkdir(parents=True)
        (root / "base.yml").write_text("debug: true\n")
        (root / "post_train" / "rl.yml").write_text(rl)
    keys = {"rl.num_generations", "batch_size", "debug"}
    assert adopt_maxtext.changed_defaults(old, new, keys) == ["  default changed: rl.num_generations 2 -> 8"]


def test_a_failed_download_is_one_line_naming_the_fix(tmp_path, monkeypatch, capsys):
    def pip(command, **kwargs):
        assert command[1:4] == ["-m", "pip", "download"] and "maxtext==9.9.9" in command
        assert kwargs["timeout"] == adopt_maxtext.DOWNLOAD_SECONDS
        return subprocess.CompletedProcess(command, 1, "", "ERROR: No matching distribution found for maxtext==9.9.9\n")

    monkeypatch.setattr(adopt_maxtext.subprocess, "run", pip)
    assert adopt_maxtext.main(["9.9.9"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == (
        "adopt_maxtext: pip download maxtext==9.9.9 failed (ERROR: No matching distribution found for "
        "maxtext==9.9.9): is 9.9.9 on PyPI? or pass --wheel FILE"
    )


def test_bad_arguments_exit_2_naming_each(tmp_path, capsys):
    assert adopt_maxtext.main(["latest", "--wheel", str(tmp_path / "none.whl")]) == 2
    err = capsys.readouterr().err
    assert "'latest' is not a release number" in err and "none.whl is not a file" in err


# -- extraArgs against the table --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("typo", "meant"),
    [
        ("rl.num_generation", "rl.num_generations"),
        ("eval_intervall", "eval_interval"),
        ("rl.grpo_betta", "rl.grpo_beta"),
    ],
)
def test_closest_key(typo, meant):
    assert maxtext_keys.closest_key(typo) == meant


def test_closest_key_stays_inside_a_nested_block():
    assert maxtext_keys.closest_key("rl.eval_interval") is None, "eval_interval is not an rl.* key"
    assert maxtext_keys.closest_key("zzzzzzzz") is None


@pytest.mark.parametrize(
    ("value", "rendered"),
    [
        ({"eval_interval": 5}, {"eval_interval": "5"}),
        ({"eval_interval": "5"}, {"eval_interval": "5"}),
        ({"rl": {"num_iterations": 2}}, {"rl.num_iterations": "2"}),
        ({"rl.grpo_beta": 0.04}, {"rl.grpo_beta": "0.04"}),
        ({"async_checkpointing": "TRUE"}, {"async_checkpointing": "true"}),
        ({"train_fraction": "0.5", "num_epoch": 2}, {"num_epoch": "2", "train_fraction": "0.5"}),
        ('{"rl.loss_algo": "gspo-token"}', {"rl.loss_algo": "gspo-token"}),
        ({"reward_worker_timeout_seconds": 60}, {"reward_worker_timeout_seconds": "60.0"}),  # new in 0.2.5
        ({"max_seq_token_per_tpu": 4096}, {"max_seq_token_per_tpu": "4096"}),  # new in 0.2.5
        ({}, {}),
    ],
)
def test_extra_args_are_typed_by_the_table(value, rendered):
    assert read_extra_args(KEY, value) == rendered


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ({"rl": {"num_generation": 8}}, "did you mean rl.num_generations"),
        ({"eval_interval": 2**31}, "at most 100000"),
        ({"max_num_checkpoints_to_keep": 2**31}, "at most 2147483647"),
        ({"rl.grpo_beta": "big"}, "finite number"),
        ({"rl.grpo_beta": float("nan")}, "finite number"),
        ({"eval_interval": None}, "expected a value"),
        ({"generation_configs": {"greedy": {"temperature": 0}}}, "takes an object here"),
        ({"data_sharding": "x"}, "takes a list here"),
        ({"pure_nnx": True}, f"MaxText {VERSION} has no such key"),  # removed in 0.2.5
    ],
)
def test_extra_args_refused(value, words):
    with pytest.raises(ConfigError, match=words):
        read_extra_args(KEY, value)


# -- the keys MaxText's loader takes from configs/types.py (train_rl's pydantic model) ------------------------

CONFIGS = VENDORED / RELEASE / "configs"
"""The vendored configs: base.yml, post_train/rl.yml and types.py (``.xz``), in a clone too."""


@functools.cache
def _models() -> maxtext_keys._Models:
    """types.py's classes, read once per process (only read from)."""
    return maxtext_keys._Models(_vendored("configs/types.py").decode())


def test_the_table_and_the_refusals_are_what_the_command_makes_of_the_vendored_files(tmp_path):
    """The committed files are byte for byte what ``tools/adopt_maxtext.py`` writes (``write_table``) from the
    vendored configs and types.py: regenerated by the command, not by hand."""
    path, table, refused = adopt_maxtext.write_table(VERSION, CONFIGS, tmp_path)
    assert path.read_bytes() == maxtext_keys.TABLE.read_bytes(), f"stale: make maxtext VERSION={VERSION}"
    assert (tmp_path / maxtext_keys.REFUSED.name).read_bytes() == maxtext_keys.REFUSED.read_bytes()
    assert (table, refused) == (maxtext_keys.known_keys(), maxtext_keys.refused_keys())
    assert not set(table) & set(refused), "a key is either taken or refused"
    assert set(table.values()) <= {"bool", "int", "float", "str", "null", "list", "dict"}
    assert "configs/types.py" in adopt_maxtext.VENDOR and "configs/types.py" in _wheel_record()["files"]


def test_the_static_read_counts_the_fields_pydantic_counts():
    """``RLConfig.model_fields`` has 927 fields and ``MaxTextConfig.model_fields`` 865 (pydantic 2.14, MaxText 0.2.5,
    in build/maxtext-0.2.5/venv); the ``ast`` read of types.py finds the same, through every base class."""
    models = _models()
    assert len(models.fields("RLConfig")) == 927 and len(models.fields("MaxTextConfig")) == 865
    assert {"load_checkpoint_only_once", "log_weight_sync_time", "rl", "vllm"} <= set(models.fields("RLConfig"))
    assert models.fields("RLConfig")["log_weight_sync_time"].owner == "VLLM"
    assert {"dpo", "lora"} <= set(models.fields("MaxTextConfig")) - set(models.fields("RLConfig")), "not train_rl's"


def test_every_field_of_train_rls_model_is_taken_or_refused():
    fields = set(_models().fields(maxtext_keys.CONFIG_CLASS))
    table, refused = maxtext_keys.known_keys(), maxtext_keys.refused_keys()
    assert fields <= set(table) | set(refused)
    assert len(table) == 894 and len(refused) == 142
    assert {key for key in table if "." not in key} <= fields, "every top-level key is a field pyconfig takes"


@pytest.mark.parametrize(
    ("key", "kind"),
    [
        ("load_checkpoint_only_once", "bool"),  # Checkpointing, in no YAML file
        ("log_weight_sync_time", "bool"),  # VLLM, in no YAML file
        ("use_standalone_converter", "bool"),
        ("inference_replicas", "int"),
        ("replicator_backup_interval_minutes", "int"),  # NonNegativeInt
        ("vision_projector_type", "str"),  # a Literal
        ("rl.use_rollout_logps", "bool"),  # RL's, rl.yml's block leaves it out
        ("rl.force_on_policy_ratio", "bool"),
        ("student_overrides", "dict"),
        ("rl.num_generations", "int"),  # rl.yml's, as before
        ("rl.epsilon_high", "null"),
    ],
)
def test_the_fields_no_yaml_names_are_typed_by_their_annotation(key, kind):
    assert maxtext_keys.known_keys()[key] == kind


@pytest.mark.parametrize(
    ("value", "rendered"),
    [
        ({"use_standalone_converter": True}, {"use_standalone_converter": "true"}),
        ({"use_standalone_converter": "true"}, {"use_standalone_converter": "true"}),
        ({"log_weight_sync_time": "TRUE"}, {"log_weight_sync_time": "true"}),
        ({"log_weight_sync_time": False}, {"log_weight_sync_time": "false"}),
        ({"rl": {"use_rollout_logps": False}}, {"rl.use_rollout_logps": "false"}),
        ({"inference_replicas": 2}, {"inference_replicas": "2"}),
    ],
)
def test_extra_args_take_the_fields_maxtexts_loader_takes(value, rendered):
    assert read_extra_args(KEY, value) == rendered


@pytest.mark.parametrize("value", [{"use_standalone_converter": "sometimes"}, {"log_weight_sync_time": 2}])
def test_the_new_keys_take_a_value_of_their_type_only(value):
    with pytest.raises(ConfigError, match=f"{next(iter(value))} = .* is invalid: expected true or false"):
        read_extra_args(KEY, value)


@pytest.mark.parametrize("key", ["no_such_key_anywhere", "rl.no_such_knob", "lora", "dpo"])
def test_extra_args_still_refuse_what_maxtext_does_not_have(key):
    """In neither YAML file nor types.py (``lora``, ``dpo``: MaxTextConfig's, the converters', not train_rl's)."""
    assert key not in maxtext_keys.known_keys() and key not in maxtext_keys.refused_keys()
    with pytest.raises(ConfigError, match=f"MaxText {VERSION} has no such key"):
        read_extra_args(KEY, {key: 1})


@pytest.mark.parametrize(
    ("key", "words"),
    [
        # DerivedValues ("derived from other config values"): RLConfig leaves these to the keys they come from
        (
            "global_batch_size_to_train_on",
            "MaxText's pre-training derives it from other keys (configs/types.py DerivedValues); train_rl does not use",
        ),
        ("metrics_dir", "derives it"),
        # RLConfig.set_derived_values_and_validate assigns these on every load: a value is overwritten
        ("emb_dim", "overwrites a value (configs/types.py RLConfig.set_derived_values_and_validate)"),
        ("micro_batch_size_to_train_on", "overwrites a value"),
        ("steps", "overwrites a value"),  # base.yml's, but RLConfig sets it from train_steps
        ("num_slices", "overwrites a value"),  # from num_trainer_slices
        # rl's fields written flat: RLConfig.map_flat_fields_to_nested_models copies them over rl.*
        ("num_generations", "MaxText reads rl.num_generations: set that"),
        ("num_iterations", "MaxText reads rl.num_iterations: set that"),
        # the other blocks' dotted copies: MaxText reads the flat key
        ("vllm.log_weight_sync_time", "takes the flat key log_weight_sync_time"),
        ("cluster.rollout_tensor_parallelism", "takes the flat key rollout_tensor_parallelism"),
        # base.yml's keys train_rl's model lacks (MMapDataset is MaxTextConfig's only): pyconfig stops the run
        ("blend_cache_dir", "no field of train_rl's config"),
        ("base_config", "pyconfig reads it from a config file only"),
    ],
)
def test_what_the_loader_takes_but_the_run_would_not_use_is_refused_with_the_reason(key, words):
    assert key not in maxtext_keys.known_keys()
    with pytest.raises(
        ConfigError, match=f"{re.escape(key)} = 1 is invalid: not settable in extraArgs: .*{re.escape(words)}"
    ):
        read_extra_args(KEY, {key: 1})


def test_the_derived_fields_are_refused_whatever_the_table_would_type_them():
    models = _models()
    derived = set(models.fields("DerivedValues")) | (models.overwritten("RLConfig") & set(models.fields("RLConfig")))
    assert {"global_batch_size_to_train_on", "checkpoint_dir", "tensorboard_dir", "steps", "num_slices"} <= derived
    assert "train_steps" not in derived, "object.__setattr__ of a name that is no field: pyconfig refuses it anyway"
    assert "learning_rate_schedule_steps" not in derived, "set only when -1 (under an if): a value is kept"
    assert derived <= set(maxtext_keys.refused_keys()) and not derived & set(maxtext_keys.known_keys())
    assert len(derived) == 29
    # the program's own reason (core.config.load REFUSED_KEYS) comes first
    with pytest.raises(ConfigError, match="not settable in extraArgs: MaxText derives it from base_output_directory"):
        read_extra_args(KEY, {"checkpoint_dir": "gs://b/x/"})


def _release(tmp_path: Path, types_py: str, rl_yml: str = "rl:\n  a: 1\nflat: 2\n") -> Path:
    configs = tmp_path / "configs"
    (configs / "post_train").mkdir(parents=True)
    (configs / "base.yml").write_text("from_base: x\nonly_base: true\n")
    (configs / "post_train" / "rl.yml").write_text(rl_yml)
    (configs / "types.py").write_text(types_py)
    return configs


TYPES_PY = """
import enum
from typing import Literal, Optional
PathStr = str

class Level(enum.IntEnum):
  LOW = 1

class Mode(str, enum.Enum):
  A = "a"

class RL(BaseModel):
  a: int = Field(1)
  b: Optional[float] = Field(None)

class Vllm(BaseModel):
  c: bool = Field(False)

class DerivedValues(BaseModel):
  d: None | int = Field(None)

class Base(BaseModel):
  from_base: str = Field("x")
  flat: int = 2
  e: PathStr = Field("")
  f: int | float = Field(1)
  g: str | list[str] = Field("a")
  h: Literal["p", "q"] = Field("p")
  i: Level = Field(Level.LOW)
  j: Mode = Field(Mode.A)
  k: None | NonNegativeInt = Field(None)
  l: dict[str, int] = Field(default_factory=dict)
  m: Unknown = Field(3)
  n: int = Field(0)
  o: int = Field(0)

class RLConfig(Base, RL, Vllm, DerivedValues):
  rl: RL = Field(default_factory=RL)
  vllm: Vllm = Field(default_factory=Vllm)

  @model_validator(mode="after")
  def derive(self):
    self.n = 1
    if self.o:
      self.o = 2
    object.__setattr__(self, "not_a_field", 3)
    return self
"""


def test_the_static_read_of_a_models_file(tmp_path):
    """What ``analyse`` makes of each kind of field (a made-up types.py: every rule in one place)."""
    table, refused = maxtext_keys.analyse(_release(tmp_path, TYPES_PY))
    assert table == {
        "c": "bool",  # Vllm's, read flat
        "e": "str",  # an alias of str
        "f": "float",  # int | float
        "flat": "int",
        "from_base": "str",
        "g": "str",  # a scalar or a list: extraArgs gives one value
        "h": "str",  # a Literal of texts
        "i": "int",  # an IntEnum
        "j": "str",  # a str Enum
        "k": "int",  # None | NonNegativeInt
        "l": "dict",
        "m": "int",  # an annotation it cannot read: the type of the default
        "o": "int",  # assigned under an if only: a value is kept
        "rl": "dict",
        "rl.a": "int",  # rl.yml's block
        "rl.b": "float",  # RL's field the block leaves out; Optional[float]: a value given is a float
    }
    assert set(refused) == {"a", "b", "d", "n", "only_base", "vllm", "vllm.c", "base_config"}
    assert (
        "reads rl.a" in refused["a"]
        and "reads rl.b" in refused["b"]
        and "DerivedValues" in refused["d"]
        and "overwrites" in refused["n"]
    )
    assert "no field of train_rl's config" in refused["only_base"] and "flat key c" in refused["vllm.c"]


def test_the_models_file_is_read_where_it_is_vendored_compressed(tmp_path):
    configs = _release(tmp_path, TYPES_PY)
    plain = maxtext_keys.analyse(configs)
    (configs / "types.py.xz").write_bytes(lzma.compress((configs / "types.py").read_bytes()))
    (configs / "types.py").unlink()
    assert maxtext_keys.analyse(configs) == plain


def test_the_command_writes_the_refusals_beside_the_table(tmp_path):
    vendor, data = _dirs(tmp_path)
    assert adopt_maxtext.adopt("9.9.9", _fake_wheel(tmp_path, "9.9.9"), vendor, data, shared_dir=tmp_path / "s") == 0
    assert json.loads((data / "maxtext-9.9.9-refused.json").read_text()) == maxtext_keys.refused_keys()
    assert (vendor / "maxtext-9.9.9" / "configs" / "types.py.xz").exists(), "MaxText's code is compressed"


@pytest.mark.slow
def test_pydantic_counts_the_fields_the_static_read_finds(tmp_path):
    """In the venv with MaxText's wheel (``python -m tools.adopt_maxtext VERSION --loader python3.12``; skipped without
    it): ``RLConfig.model_fields`` is the ``ast`` read's field set, and train_rl's own loader (tools/maxtext_loader.py)
    takes the training argv with the keys this table adds."""
    python = adopt_maxtext.loader_dir(VERSION) / "bin" / "python"
    if not python.exists():
        pytest.skip(f"no {python}: python -m tools.adopt_maxtext {VERSION} --loader python3.12 makes it")
    script = (
        "import json; from maxtext.configs import types; "
        "print(json.dumps({n: sorted(getattr(types, n).model_fields) for n in ('RLConfig', 'RL', 'DerivedValues')}))"
    )
    done = subprocess.run([str(python), "-c", script], capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    fields = json.loads(done.stdout.strip().splitlines()[-1])
    models = _models()
    for name, names in fields.items():
        assert set(models.fields(name)) == set(names), name
    argv = _steps_argv("prod")["train"] + ["use_standalone_converter=false", "log_weight_sync_time=true"]
    steps = tmp_path / "argv.json"
    steps.write_text(json.dumps({"train": [*argv, "rl.use_rollout_logps=false"], "control": [*argv, "steps_zz=1"]}))
    loader = adopt_maxtext.ROOT / "tools" / "maxtext_loader.py"
    done = subprocess.run([str(python), str(loader), str(steps)], capture_output=True, text=True, timeout=600)
    results = json.loads(done.stdout.strip().splitlines()[-1])["results"]
    assert results["train"] == "ok" and "steps_zz" in results["control"]
