"""The image runs the MaxText the checks ran: each MaxText step's script first checks its image's MaxText against the
adopted wheel's RECORD (``workloads/container/maxtext_check.py``, the pin ``core/data/maxtext-<version>-record.json``
written by ``make maxtext``), and stops in one line, exit 3, before anything reads a weight.

The program runs on a wheel made here in the real format (``path,sha256=<urlsafe base64 without padding>,size``),
pinned by the adoption's own reading of its RECORD and installed into a temporary ``site-packages`` the way an
installer lays out a wheel (its files, its ``.dist-info``); through a real bash, each step's script as its container
runs it, with ``python3`` a shim that runs the check for real and records every other call."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import lzma
import os
import re
import shlex
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from core import maxtext_keys
from core.names import SETUP_FAILURE_EXIT, SLICE_DOWN_EXIT, STALLED_EXIT
from tests.conftest import VENDORED
from tests.lifecycle_walk import settings
from tests.shim_calls import LOG, read_calls
from tools import adopt_maxtext
from workloads.container import maxtext_check
from workloads.specs.commands import (
    MAXTEXT_CHECK,
    PIN_END,
    PIN_START,
    RUN_SCRIPT,
    SCRIPTS_DIR,
    program_files,
    with_pin,
)
from workloads.specs.step_manifests import head_pod_failure_policy
from workloads.specs.step_specs import plan_workflow
from workloads.specs.train_script import EVALS_LOG, SLICE_WAIT_ENV, STALL_ENV, STALL_MARKER, TRAIN_LOG

VERSION = "9.9.9"
IMAGE = "us-docker.pkg.dev/cloud-tpu-images/maxtext-images/tpu_post_training@sha256:" + "ab" * 32
FILES = {
    "maxtext/__init__.py": b'"""MaxText."""\n',
    "maxtext/configs/base.yml": b"run_name: ''\nper_device_batch_size: 12.0\n",
    "maxtext/trainers/post_train/rl/train_rl.py": b"def main():\n  pass\n",
    "maxtext/assets/tokenizers/tokenizer.model": bytes(range(256)) * 4200,  # past one read of the program (1 MiB)
}
MAXTEXT_STEPS = ("convert", "train", "export")
SOURCE = (Path(maxtext_check.__file__)).read_text()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_wheel(tmp_path: Path, files: dict[str, bytes] = FILES) -> Path:
    """A maxtext wheel: the files, a module outside ``maxtext/`` and its ``.dist-info`` with a real RECORD."""
    info = f"maxtext-{VERSION}.dist-info"
    members = {**files, "dependencies/extra_deps/post_train_github_deps.txt": b"vllm\n"}
    members[f"{info}/METADATA"] = f"Metadata-Version: 2.4\nName: maxtext\nVersion: {VERSION}\n".encode()
    rows = [f"{name},sha256={_b64(data)},{len(data)}" for name, data in members.items()]
    members[f"{info}/RECORD"] = ("\n".join([*rows, f"{info}/RECORD,,"]) + "\n").encode()
    wheel = tmp_path / f"maxtext-{VERSION}-py3-none-any.whl"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    wheel.write_bytes(buffer.getvalue())
    return wheel


def pin_of(wheel: Path) -> dict[str, object]:
    """The pin the adoption makes of ``wheel`` (``adopt_maxtext.package_record``, ``adopt_maxtext.pin``)."""
    with zipfile.ZipFile(wheel) as archive:
        record = adopt_maxtext.package_record(archive, f"maxtext-{VERSION}.dist-info")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    return adopt_maxtext.pin(adopt_maxtext.Release(VERSION, wheel.name, digest, {}, (), record))


def install(wheel: Path, site: Path) -> Path:
    """The wheel installed into ``site`` as an installer lays it out (its members where they are named)."""
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    return site / "maxtext"


@pytest.fixture
def installed(tmp_path):
    """(the program with the wheel's pin, the site-packages the wheel is installed in, the pin)."""
    wheel = make_wheel(tmp_path)
    site = tmp_path / "site-packages"
    install(wheel, site)
    program = tmp_path / MAXTEXT_CHECK
    pin = pin_of(wheel)
    program.write_text(with_pin(SOURCE, pin))
    for name, text in program_files("shown.py").items():  # beside it, as its ConfigMap holds them
        (tmp_path / name).write_text(text)
    return program, site, pin


def run(program: Path, site: Path, cwd: Path, image: str = IMAGE) -> subprocess.CompletedProcess[str]:
    """``python3 maxtext_check.py IMAGE`` with ``site`` on the path, as the image puts ``/deps/src`` there."""
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(site)}
    return subprocess.run(
        [sys.executable, str(program), image], cwd=cwd, env=env, capture_output=True, text=True, timeout=30
    )


def test_the_wheels_own_files_pass(installed, tmp_path):
    program, site, _ = installed
    done = run(program, site, tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == f"tpu-rl: MaxText {VERSION} checked: the 4 files of its wheel's RECORD in {site}/maxtext\n"


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ("flip", "1 of the 4 files of its RECORD differ in {folder} (changed: assets/tokenizers/tokenizer.model)"),
        ("append", "1 of the 4 files of its RECORD differ in {folder} (changed: configs/base.yml)"),
        ("remove", "1 of the 4 files of its RECORD differ in {folder} (missing: trainers/post_train/rl/train_rl.py)"),
    ],
)
def test_one_byte_changed_or_a_file_gone_stops_the_step_in_one_line(installed, tmp_path, change, said):
    program, site, pin = installed
    folder = site / "maxtext"
    if change == "flip":  # the same size: only the sha256 tells
        model = folder / "assets/tokenizers/tokenizer.model"
        data = bytearray(model.read_bytes())
        data[len(data) - 1] ^= 1
        model.write_bytes(bytes(data))
    elif change == "append":
        (folder / "configs/base.yml").write_bytes((folder / "configs/base.yml").read_bytes() + b"\n")
    else:
        (folder / "trainers/post_train/rl/train_rl.py").unlink()
    done = run(program, site, tmp_path)
    assert (done.returncode, done.stdout) == (SETUP_FAILURE_EXIT, "")
    assert done.stderr == (
        f"tpu-rl: the image {IMAGE} says it holds MaxText {VERSION}, but not the files of the wheel the checks ran "
        f"(maxtext-{VERSION}-py3-none-any.whl, sha256 {str(pin['sha256'])[:12]}): {said.format(folder=folder)}: set "
        "tpu-rl:images.maxtext to an image (a digest) whose MaxText files are the wheel's, or set "
        "tpu-rl:images.maxtextCheck warn to run the image's MaxText unchecked\n"
    )


def test_many_differences_are_counted_past_the_first_names(tmp_path):
    files = {"maxtext/__init__.py": b"", **{f"maxtext/configs/models/m{i}.yml": f"{i}\n".encode() for i in range(8)}}
    wheel = make_wheel(tmp_path, files)
    site = tmp_path / "site-packages"
    for path in install(wheel, site).glob("configs/models/*.yml"):
        path.write_text("changed\n")
    program = tmp_path / MAXTEXT_CHECK
    program.write_text(with_pin(SOURCE, pin_of(wheel)))
    for name, text in program_files("shown.py").items():
        (tmp_path / name).write_text(text)
    done = run(program, site, tmp_path)
    assert done.returncode == SETUP_FAILURE_EXIT and len(done.stderr.splitlines()) == 1
    assert "8 of the 9 files of its RECORD differ" in done.stderr
    assert (
        "(changed: configs/models/m0.yml, configs/models/m1.yml, configs/models/m2.yml, configs/models/m3.yml, "
        "configs/models/m4.yml and 3 more)"
    ) in done.stderr


def test_files_the_record_does_not_list_are_left_alone(installed, tmp_path):
    """What an image's build or Python itself leaves in the package: setuptools' in-place build of the vLLM adapter,
    compiled modules."""
    program, site, _ = installed
    (site / "maxtext/__pycache__").mkdir()
    (site / "maxtext/__pycache__/__init__.cpython-312.pyc").write_bytes(b"\x00")
    (site / "maxtext/integration/vllm/build/lib").mkdir(parents=True)
    (site / "maxtext/integration/vllm/maxtext_vllm_adapter.egg-info").mkdir(parents=True)
    assert run(program, site, tmp_path).returncode == 0


def test_the_package_checked_is_the_one_python3_m_imports(installed, tmp_path):
    """``python3 -m`` puts the working directory first: a ``maxtext`` there is the one MaxText runs, not the
    installed one."""
    program, site, _ = installed
    workdir = tmp_path / "workdir"
    shadow = workdir / "maxtext"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_bytes(FILES["maxtext/__init__.py"])
    done = run(program, site, workdir)
    assert done.returncode == SETUP_FAILURE_EXIT
    assert f"3 of the 4 files of its RECORD differ in {shadow} (missing: " in done.stderr


EDITABLE_FINDER = """import importlib.util
import sys


class Finder:
    \"\"\"As setuptools' editable install's finder (its ``__editable___<name>_finder.py``): the package's folder by its
    name, no folder of it on sys.path.\"\"\"

    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname != "maxtext":
            return None
        return importlib.util.spec_from_file_location(fullname, {init!r}, submodule_search_locations=[{folder!r}])


sys.meta_path.append(Finder)
"""
"""What an editable install's ``.pth`` line runs at startup, here from ``sitecustomize`` (``site`` imports it as it runs
a ``.pth``'s import line)."""


def test_an_editable_install_is_found_by_its_finder(installed, tmp_path):
    """``pip install -e`` of MaxText puts no folder of it on ``sys.path``: a finder on ``sys.meta_path`` finds it, and
    so does the check, asking the finders as the import system does."""
    program, site, _ = installed
    folder = site / "maxtext"
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(EDITABLE_FINDER.format(init=str(folder / "__init__.py"), folder=str(folder)))
    done = run(program, hook, tmp_path)  # only the hook on the path: the site-packages is not
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == f"tpu-rl: MaxText {VERSION} checked: the 4 files of its wheel's RECORD in {folder}\n"


@pytest.mark.pure
def test_the_package_is_looked_for_without_editing_the_path(tmp_path, monkeypatch):
    """The working directory is searched first, as ``python3 -m`` searches it; ``sys.path`` stays as it was."""
    (tmp_path / "maxtext").mkdir()
    (tmp_path / "maxtext" / "__init__.py").write_text("")
    monkeypatch.chdir(tmp_path)
    before = list(sys.path)
    assert maxtext_check.package_dir() == str(tmp_path / "maxtext")
    assert sys.path == before


def test_an_image_without_maxtext_is_one_line(installed, tmp_path):
    program, _, _ = installed
    done = run(program, tmp_path / "empty", tmp_path)
    assert done.returncode == SETUP_FAILURE_EXIT
    assert done.stderr.startswith(f"tpu-rl: the image {IMAGE} has no MaxText package (python3 finds no single folder")
    assert len(done.stderr.splitlines()) == 1


def _metadata(site: Path, version: str | None) -> None:
    """The installed metadata of the wheel in ``site`` made to say ``version`` (None: removed)."""
    info = site / f"maxtext-{VERSION}.dist-info"
    if version is None:
        for path in info.iterdir():
            path.unlink()
        info.rmdir()
        return
    (info / "METADATA").write_text(f"Metadata-Version: 2.4\nName: maxtext\nVersion: {version}\n")


def test_an_image_of_another_release_is_named_with_its_version_and_the_adoption(installed, tmp_path):
    """The image's own version from its installed metadata: the way out is that release's adoption or an image of
    the adopted one, or the override."""
    program, site, pin = installed
    (site / "maxtext/configs/base.yml").write_text("changed\n")
    _metadata(site, "9.10.0")
    done = run(program, site, tmp_path)
    assert done.returncode == SETUP_FAILURE_EXIT and len(done.stderr.splitlines()) == 1
    assert done.stderr.startswith(
        f"tpu-rl: the image {IMAGE} holds MaxText 9.10.0, not the {VERSION} the checks ran (maxtext-{VERSION}-"
    )
    assert done.stderr.endswith(
        "(changed: configs/base.yml): adopt MaxText 9.10.0 (make maxtext VERSION=9.10.0, "
        'docs/releases.md "Adopting a MaxText release"), set tpu-rl:images.maxtext to the tpu_post_training image '
        f"of MaxText {VERSION}, or set tpu-rl:images.maxtextCheck warn to run the image's MaxText unchecked\n"
    )


@pytest.mark.parametrize(("version_py", "named"), [('__version__ = "9.9.7"\n', "9.9.7"), ("# no version\n", None)])
def test_without_metadata_the_version_is_the_packages_own(installed, tmp_path, version_py, named):
    """No ``.dist-info`` (a package copied into place, as MaxText's images copy it to /deps/src): the package's
    ``version.py``, which the wheel holds; without either, the line says the image names no version."""
    program, site, _ = installed
    _metadata(site, None)
    (site / "maxtext/version.py").write_text(version_py)
    (site / "maxtext/configs/base.yml").write_text("changed\n")
    done = run(program, site, tmp_path)
    assert done.returncode == SETUP_FAILURE_EXIT and len(done.stderr.splitlines()) == 1
    if named:
        assert f"holds MaxText {named}, not the {VERSION} the checks ran" in done.stderr
        assert f"adopt MaxText {named} (make maxtext VERSION={named}," in done.stderr
    else:
        assert f"does not hold the MaxText {VERSION} the checks ran (maxtext-{VERSION}-" in done.stderr
        assert "; it names no version)" in done.stderr
        assert done.stderr.endswith(
            f"set tpu-rl:images.maxtext to the tpu_post_training image of MaxText {VERSION}, or set "
            "tpu-rl:images.maxtextCheck warn to run the image's MaxText unchecked\n"
        )


def test_warn_says_it_in_one_line_and_goes_on(installed, tmp_path):
    """``tpu-rl:images.maxtextCheck: warn``: the same line as a warning, exit 0, so the step runs the image's
    MaxText; a matching image is the same one line on stdout as without it."""
    program, site, _ = installed
    same = subprocess.run(
        [sys.executable, str(program), IMAGE, "warn"],
        cwd=tmp_path,
        env={"PATH": os.environ["PATH"], "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (same.returncode, same.stderr) == (0, "") and same.stdout.startswith(f"tpu-rl: MaxText {VERSION} checked")
    (site / "maxtext/configs/base.yml").write_text("changed\n")
    refused = run(program, site, tmp_path)
    warned = subprocess.run(
        [sys.executable, str(program), IMAGE, "warn"],
        cwd=tmp_path,
        env={"PATH": os.environ["PATH"], "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (warned.returncode, warned.stdout) == (0, "")
    assert warned.stderr == (
        refused.stderr.rstrip("\n").replace("tpu-rl: ", "tpu-rl: warning: ", 1)
        + "; going on (tpu-rl:images.maxtextCheck warn)\n"
    )


@pytest.mark.parametrize("argv", [["IMAGE", "ignore"], ["IMAGE", "warn", "extra"], []])
def test_a_mode_other_than_refuse_or_warn_is_refused(argv):
    assert maxtext_check.main(["maxtext_check.py", *argv]) == SETUP_FAILURE_EXIT


def test_a_program_without_its_pin_is_one_line_not_a_traceback(tmp_path):
    program = tmp_path / MAXTEXT_CHECK
    program.write_text(SOURCE)  # not inlined: PINNED is empty
    for name, text in program_files("shown.py").items():
        (program.parent / name).write_text(text)
    done = run(program, tmp_path, tmp_path)
    assert done.returncode == SETUP_FAILURE_EXIT
    assert done.stderr.startswith("tpu-rl: cannot check the image's MaxText (JSONDecodeError: ")
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr


# -- in the steps' scripts --------------------------------------------------------------------------------

SHIM = f"""#!/bin/sh
{LOG}
case "$1" in */maxtext_check.py) exec "{{python}}" "$@";; esac
case "$1" in */base_snapshot.py) echo 0123456789abcdef0123456789abcdef01234567;; esac
exit 0
"""
"""``python3`` in the scripts' container: the check runs for real, every other call is recorded and succeeds (the
base's commit printed where a script reads one)."""


def run_step(step, tmp_path: Path, program: str, site: Path) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """The step's ConfigMap as mounted (its ``maxtext_check.py`` in place of ``program``), its ``run.sh`` run by
    bash in ``tmp_path``; the process and the program each ``python3`` call ran (``-m``: the module)."""
    folder = tmp_path / "tpu-rl"
    folder.mkdir(parents=True)
    for name, text in {**step.scripts["data"], MAXTEXT_CHECK: program}.items():
        for path in (TRAIN_LOG, EVALS_LOG, STALL_MARKER):  # training's files in /tmp
            text = text.replace(path, str(tmp_path / Path(path).name))
        (folder / name).write_text(text.replace(f"{SCRIPTS_DIR}/", f"{folder}/"))
    (tmp_path / "bin").mkdir()
    log = tmp_path / "calls.log"
    log.write_text("")
    shim = tmp_path / "bin" / "python3"
    shim.write_text(SHIM.format(python=sys.executable, log=log))
    shim.chmod(0o755)
    env = {
        "PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin",
        "PYTHONPATH": str(site),
        STALL_ENV: "7200",
        SLICE_WAIT_ENV: "16200",
    }
    done = subprocess.run(
        ["bash", str(folder / RUN_SCRIPT)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    calls = read_calls(log)
    return done, [(c[1] if c[0] == "-m" else Path(c[0]).name) for c in calls]


@pytest.mark.parametrize(
    ("step", "same"),
    [
        *((step, False) for step in MAXTEXT_STEPS),
        ("convert", True),
        ("export", True),
        pytest.param("train", True, marks=pytest.mark.slow),  # the script's log readers poll each second
    ],
)
def test_each_maxtext_step_checks_its_image_before_it_reads_a_weight(tmp_path, step, same):
    wheel = make_wheel(tmp_path)
    site = install(wheel, tmp_path / "site-packages").parent
    if not same:
        (site / "maxtext/configs/base.yml").write_bytes(FILES["maxtext/configs/base.yml"].replace(b"12", b"13"))
    planned = plan_workflow(settings("prod", []))[step]
    done, ran = run_step(planned, tmp_path / "run", with_pin(SOURCE, pin_of(wheel)), site)
    assert ran[0] == MAXTEXT_CHECK
    if same:
        assert done.returncode == 0, done.stderr
        assert {
            "maxtext.checkpoint_conversion.to_maxtext",
            "launch.py",
            "maxtext.checkpoint_conversion.to_huggingface",
        } & set(ran[1:]), ran
        return
    assert done.returncode == SETUP_FAILURE_EXIT and ran == [MAXTEXT_CHECK], "nothing runs after it"
    (line,) = done.stderr.splitlines()
    expected = settings("prod", []).images.maxtext
    assert line.startswith(f"tpu-rl: the image {expected} says it holds MaxText {VERSION}, but not the files")
    assert "(changed: configs/base.yml)" in line


@pytest.mark.pure
@pytest.mark.parametrize(("stack", "mode"), [("dev", "refuse"), ("prod", "refuse"), ("prod", "warn")])
def test_the_check_is_each_maxtext_steps_first_line_with_the_committed_pin(stack, mode):
    """``python3 /tpu-rl/maxtext_check.py IMAGE``, the image the step's manifest runs, ``warn`` after it only when
    ``tpu-rl:images.maxtextCheck`` says so."""
    config = settings(stack, ["tpu-rl:workflow.steps.evaluate=true", f"tpu-rl:images.maxtextCheck={mode}"])
    line = f"python3 /tpu-rl/{MAXTEXT_CHECK} {shlex.quote(config.images.maxtext)}" + (" warn" if mode == "warn" else "")
    for planned in plan_workflow(config).steps:
        data = planned.scripts["data"]
        lines = data[RUN_SCRIPT].splitlines()
        if planned.step not in MAXTEXT_STEPS:
            assert MAXTEXT_CHECK not in data, planned.step
            continue
        assert lines[:2] == ["set -euo pipefail", line], planned.step
        assert config.images.maxtext in json.dumps(planned.manifest), "the image the check names is the one it runs"
        program = data[MAXTEXT_CHECK]
        assert PIN_START not in program and PIN_END not in program
        assert SOURCE.count(PIN_START) == SOURCE.count(PIN_END) == 1, "the pin replaces the one block between them"
        packed = re.search(r'^PINNED = """\n([A-Za-z0-9+/=\n]+)"""$', program, re.M)
        assert packed and maxtext_check.pinned(packed[1]) == maxtext_keys.pinned_record()


@pytest.mark.pure
def test_the_checks_exit_fails_a_step_and_is_no_disruption():
    assert maxtext_check.MISMATCH == SETUP_FAILURE_EXIT
    counted = [
        rule for rule in head_pod_failure_policy()["rules"] if rule["action"] == "Count" and "onExitCodes" in rule
    ]
    assert all(maxtext_check.MISMATCH not in rule["onExitCodes"]["values"] for rule in counted)
    assert {SLICE_DOWN_EXIT, STALLED_EXIT} == {v for rule in counted for v in rule["onExitCodes"]["values"]}


@pytest.mark.pure
def test_the_pin_is_bytes_of_the_pin_alone():
    pin = maxtext_keys.pinned_record()
    assert with_pin(SOURCE, pin) == with_pin(SOURCE, json.loads(json.dumps(pin)))
    packed = with_pin(SOURCE, pin)
    assert all(len(line) <= 76 for line in packed.split('PINNED = """\n', 1)[1].split('"""', 1)[0].splitlines())


# -- the committed pin is the adopted wheel's -----------------------------------------------------------------


@pytest.mark.pure
def test_the_committed_pin_is_the_adopted_wheels_record():
    """The pin and the vendored files come from one wheel: its name and sha256 are ``wheel.json``'s, and every file
    vendored from it (checked against ``SHA256SUMS`` and the release's own list) has the pin's sha256 and size."""
    pin = maxtext_keys.pinned_record()
    release = f"maxtext-{maxtext_keys.MAXTEXT_VERSION}"
    wheel = json.loads((VENDORED / release / adopt_maxtext.RECORD_NAME).read_text())
    assert (pin["version"], pin["wheel"], pin["sha256"]) == (wheel["version"], wheel["wheel"], wheel["sha256"])
    assert maxtext_keys.RECORD.name == f"{release}-record.json"
    rows = {path.removeprefix("maxtext/"): (digest, size) for path, digest, size in maxtext_check.rows(pin["record"])}
    assert len(rows) == len(pin["record"]) > 600
    for path, facts in wheel["files"].items():
        plain = VENDORED / release / path
        packed = plain.with_name(plain.name + ".xz")
        data = plain.read_bytes() if plain.exists() else lzma.decompress(packed.read_bytes())
        assert rows[path] == (_b64(data), len(data)) and hashlib.sha256(data).hexdigest() == facts["sha256"], path
    listed = adopt_maxtext.released_sums((VENDORED / release / adopt_maxtext.RELEASED_LIST).read_text())
    for path, digest in listed.items():
        assert base64.urlsafe_b64decode(rows[path][0] + "=").hex() == digest, path


@pytest.mark.pure
def test_only_the_pinned_releases_record_is_committed():
    pins = sorted(p.name for p in maxtext_keys.RECORD.parent.glob("maxtext-*-record.json"))
    assert pins == [maxtext_keys.RECORD.name]


@pytest.mark.pure
def test_the_adoption_refuses_a_record_line_without_its_file(tmp_path):
    wheel = make_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    record = f"maxtext-{VERSION}.dist-info/RECORD"
    members[record] = members[record].replace(b"maxtext/configs/base.yml,sha256=", b"maxtext/configs/base.yml,md5=")
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    with zipfile.ZipFile(wheel) as archive, pytest.raises(adopt_maxtext.AdoptError, match="with its sha256 and size"):
        adopt_maxtext.package_record(archive, f"maxtext-{VERSION}.dist-info")


# -- at plan time: an image whose tag names another MaxText release ---------------------------------------------------


@pytest.mark.pure
@pytest.mark.parametrize(
    ("tag", "release"),
    [
        (":0.2.5", "0.2.5"),  # MaxText's own images: tpu_post_training:<release> (the default)
        (":0.2.4", "0.2.4"),
        (":maxtext-v0.2.4", "0.2.4"),  # as its git tags name a release
        (":v0.2.6", "0.2.6"),
        (":0.2.4-rc1", "0.2.4"),
        (":0.2.4@sha256:" + "c" * 64, "0.2.4"),  # a digest pins it, the tag still names the release
        (":latest-2026-12-01", None),
        (":nightly", None),
        (":0.2.5.1", None),
        ("@sha256:" + "c" * 64, None),
    ],
)
def test_the_release_an_images_tag_names(tag, release):
    from core.images import tag_release

    assert tag_release(f"us-docker.pkg.dev/cloud-tpu-images/maxtext-images/tpu_post_training{tag}") == release


@pytest.mark.pure
def test_the_default_image_names_the_adopted_release():
    from core.config.workflow_keys import DEFAULT_IMAGES
    from core.images import tag_release

    assert tag_release(DEFAULT_IMAGES["maxtext"]) == maxtext_keys.MAXTEXT_VERSION
