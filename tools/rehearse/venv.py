"""The rehearsal's interpreter: Python 3.12 with the post-training image's package set, on CPU, made once and kept.

MaxText's post-training image installs its Python packages from the wheel's own list,
``dependencies/requirements/generated_requirements/tpu-post-train-requirements.txt``, with
``UV_TORCH_BACKEND=cpu uv pip install --resolution=lowest -r <that file>`` (the wheel's
``dependencies/scripts/setup.sh`` ``install_post_training_deps``): every bound of the file is a lower one, so the
lowest resolution installs exactly the versions the file was generated at. The venv here is made the same way, from
the adopted wheel (``core/data/maxtext-<version>-record.json`` names it and its sha256), with what this machine cannot
have stood in for, each named with why (``STOOD_IN``); MaxText itself is not installed in it: each step's sandbox
holds the wheel's ``maxtext/`` at ``/deps/src/maxtext``, where the image keeps it (``tools.rehearse.sandbox``).

The venv is ``build/rehearse/venv-<version>``; its stamp records what it was made from (the wheel's sha256, the
list's, what was stood in for, the interpreter), and a venv whose stamp differs is made again.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import zipfile
from dataclasses import dataclass
from pathlib import Path

from core.errors import BadInputError, UnavailableError
from core.maxtext_keys import MAXTEXT_VERSION, RECORD
from tools.stack_files import ROOT

BUILD = ROOT / "build" / "rehearse"
REQUIREMENTS = "dependencies/requirements/generated_requirements/tpu-post-train-requirements.txt"
"""The image's package list inside the wheel."""
STOOD_IN = {
    "torch": "PyPI's build of the same release stands in for the image's CPU build (+cpu), which is on "
    "download.pytorch.org only: the CUDA build, whose CUDA libraries (about 4 GB, once) are installed, unused on CPU",
    "torchvision": "as torch",
}
"""Packages of the image's list pinned to a build this machine cannot have (a local version, ``==X+cpu``), installed
at the same release from PyPI instead, with why (each named in the rehearsal's output)."""
NOT_IN_LIST = {
    "vllm": "built from GitHub (the wheel's extra_deps/post_train_github_deps.txt), which this machine does not reach, "
    "and it needs a TPU or GPU: the rollout engine is where training's accelerator calls begin",
    "tpu-inference": "as vllm",
    "google-tunix": "the image takes it at a GitHub commit; the list's PyPI release stands in",
}
"""Packages the image adds after the list, from GitHub (named in the output, never installed)."""
INSTALL_SECONDS = 1800
PYTHON_312 = ("python3.12",)


class RehearsalSetupError(UnavailableError):
    """The rehearsal's venv could not be made (one line, exit 1)."""


class NoPythonError(BadInputError):
    """No Python 3.12 to make the venv with (one line, exit 2: name one with PYTHON312=)."""


@dataclass(frozen=True)
class Venv:
    folder: Path
    python: Path
    package: Path
    """The wheel's ``maxtext/`` folder, unpacked once (each sandbox copies it to its ``/deps/src/maxtext``; its
    parent is a ``PYTHONPATH`` entry that imports it)."""
    made: bool
    """Made by this run (not reused)."""


def wheel_pin() -> tuple[str, str]:
    """The adopted wheel's file name and sha256 (``core.maxtext_keys.RECORD``)."""
    record = json.loads(RECORD.read_text())
    return record["wheel"], record["sha256"]


def find_python(given: str = "") -> str:
    """A Python 3.12: ``given``, else ``python3.12`` on PATH, else pyenv's newest 3.12."""
    candidates = [given] if given else [*PYTHON_312]
    if not given:
        root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
        candidates += [str(p) for p in sorted(root.glob("versions/3.12*/bin/python3.12"), reverse=True)]
    for candidate in candidates:
        path = shutil.which(candidate) or (candidate if Path(candidate).is_file() else "")
        if not path:
            continue
        done = subprocess.run([path, "-c", "import sys; print(sys.version_info[:2] == (3, 12))"], capture_output=True)
        if done.stdout.strip() == b"True":
            return path
    raise NoPythonError(
        "the rehearsal needs Python 3.12 (MaxText's): none found on PATH or in pyenv; name one with "
        "make rehearse PYTHON312=/path/to/python3.12"
    )


def fetch_wheel(folder: Path) -> Path:
    """The adopted MaxText wheel, downloaded once into ``folder`` and checked against its pinned sha256."""
    name, sha = wheel_pin()
    path = folder / name
    if not path.exists() or _sha256(path) != sha:
        folder.mkdir(parents=True, exist_ok=True)
        command = [
            *_pip(),
            "download",
            "--no-deps",
            "--python-version",
            "3.12",
            "--only-binary=:all:",
            f"maxtext=={MAXTEXT_VERSION}",
            "-d",
            str(folder),
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=600)
        if done.returncode != 0 or not path.exists():
            last = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
            raise RehearsalSetupError(f"pip download maxtext=={MAXTEXT_VERSION} failed ({last}): check the network")
    if _sha256(path) != sha:
        raise RehearsalSetupError(
            f"{path} is not the adopted wheel (sha256 {_sha256(path)}, not {sha}): delete it and run make rehearse"
        )
    return path


def _pip() -> list[str]:
    import sys

    return [sys.executable, "-m", "pip"]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def requirements(wheel: Path) -> str:
    """The image's package list, as the wheel holds it."""
    with zipfile.ZipFile(wheel) as archive:
        return archive.read(REQUIREMENTS).decode()


def stood_in(text: str, names: dict[str, str]) -> str:
    """The list with the packages named pinned to their release without its local version (``torch==2.11.0+cpu``:
    ``torch==2.11.0``), markers and all; every other line as it is."""
    kept = []
    for line in text.splitlines():
        requirement, marker, rest = line.partition(";")
        name, pinned, version = requirement.partition("==")
        if pinned and name.strip().lower() in names:
            line = f"{name}=={version.strip().split('+')[0]}" + (f" {marker}{rest}" if marker else "")
        kept.append(line)
    return "\n".join(kept) + "\n"


def ensure(python312: str = "", *, log: Path | None = None) -> Venv:
    """The venv, made when missing or made from something else (module docstring)."""
    wheel = fetch_wheel(BUILD / "wheels")
    folder = BUILD / f"venv-{MAXTEXT_VERSION}"
    package = BUILD / f"maxtext-{MAXTEXT_VERSION}" / "maxtext"
    listed = requirements(wheel)
    python = find_python(python312)
    stamp = {
        "wheel": _sha256(wheel),
        "requirements": hashlib.sha256(listed.encode()).hexdigest(),
        "stoodIn": sorted(STOOD_IN),
        "python": python,
    }
    stamp_file = folder / "tpu-rl-rehearse.json"
    if stamp_file.exists() and json.loads(stamp_file.read_text()) == stamp and (package / "__init__.py").exists():
        return Venv(folder, folder / "bin" / "python", package, made=False)
    shutil.rmtree(folder, ignore_errors=True)
    shutil.rmtree(package.parent, ignore_errors=True)
    BUILD.mkdir(parents=True, exist_ok=True)
    (BUILD / "requirements.txt").write_text(stood_in(listed, STOOD_IN))
    uv = ROOT / ".venv" / "bin" / "uv"
    # No UV_TORCH_BACKEND (the image's setting, for torch, which PyPI's build stands in for): with it uv asks
    # PyTorch's index for the packages it serves (triton among them), which this machine does not reach.
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}
    steps = [
        [str(uv), "venv", "--quiet", "--python", python, str(folder)],
        [
            str(uv),
            "pip",
            "install",
            "--quiet",
            "--python",
            str(folder / "bin" / "python"),
            "--resolution=lowest",
            "-r",
            str(BUILD / "requirements.txt"),
        ],
    ]
    for command in steps:
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=INSTALL_SECONDS, env=env)
        except subprocess.TimeoutExpired:
            raise RehearsalSetupError(
                f"making the rehearsal's venv took over {INSTALL_SECONDS} s: check the network"
            ) from None
        if log is not None:
            with log.open("a") as file:
                file.write(done.stdout + done.stderr)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
            raise RehearsalSetupError(
                f"{Path(command[0]).name} {command[1]} failed ({last}): see {log or 'its output'}"
            )
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(package.parent, [m for m in archive.namelist() if m.startswith("maxtext/")])
    stamp_file.write_text(json.dumps(stamp, indent=1) + "\n")
    return Venv(folder, folder / "bin" / "python", package, made=True)
