"""Adopt a MaxText release: its wheel, its key table and the files the tests read, made by one command.

    python -m tools.adopt_maxtext VERSION [--wheel FILE] [--loader PYTHON3.12]
    (make maxtext VERSION=0.2.5 LOADER=python3.12)

1. Downloads the ``maxtext`` wheel of ``VERSION`` from PyPI (``pip download --no-deps --python-version 3.12
   --only-binary=:all:``; MaxText requires Python 3.12, the wheel is pure Python, so any pip fetches it), or reads
   ``--wheel FILE`` (offline), and hashes it.
2. Reads the files the program and its tests need out of it (``VENDOR``), each checked against the wheel's own
   ``RECORD`` (the sha256 the wheel was built with), and the version against its ``METADATA``.
3. Where ``../shared/maxtext-VERSION/README.md`` lists the release's files with their sha256 (a list made apart
   from the wheel), checks the files against it too, and vendors that list beside them.
4. Writes them to ``tests/data/vendor/maxtext-VERSION/`` in ``../shared``'s layout (MaxText's code ``xz``
   compressed, as for 0.2.4 and 0.2.5), with ``wheel.json`` (the wheel's name and sha256, the pip command, the git
   pins of its post-training dependencies, tunix among them, and each file's sha256 and git blob id), and rewrites
   their lines of ``tests/data/vendor/SHA256SUMS``.
5. Regenerates ``core/data/maxtext-VERSION-keys.json`` and ``-refused.json`` from those configs: the keys of
   ``base.yml`` and ``post_train/rl.yml`` and the fields of train_rl's pydantic model in ``configs/types.py``, read
   statically, less what the run would not use as written, refused with the reason (``core.maxtext_keys.analyse``);
   and pins the wheel's ``RECORD`` lines of its ``maxtext/`` files (path, sha256, size) in
   ``core/data/maxtext-VERSION-record.json``, which every MaxText step checks its image's MaxText against before it
   loads a weight (``workloads/container/maxtext_check.py``).
6. With ``--loader PYTHON3.12``, makes ``build/maxtext-VERSION/venv``, a venv with the wheel and the JAX its config
   loader imports, in which tests/test_maxtext_pyconfig.py (slow tier) loads each step's argv with MaxText's own
   ``pyconfig`` (tools/maxtext_loader.py).
7. Prints what changed against the table the program uses now (``core.maxtext_keys.MAXTEXT_VERSION``): keys
   removed, types changed, keys added (``rl.yml``'s first: the RL trainer's new knobs), the defaults changed of the
   keys the program names and of ``rl.yml``'s (when that release's configs are vendored), and exits 1 when a key the
   program sets or reads is gone (a human must then change the program before switching to the release).

Switching the program is then ``MAXTEXT_VERSION`` in ``core/maxtext_keys.py`` and the image's default tag, and the
tests say the rest (docs/releases.md "Adopting a MaxText release"). Bad arguments exit 2; a failed download, a
wheel that is not the release (or not the one ``wheel.json`` pinned) and a missing key exit 1; each failure is one
line naming what failed and the fix.
"""

from __future__ import annotations

import argparse
import base64
import csv
import io
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from core import maxtext_keys
from core.config.load import INTERPRETED, PROGRAM_KEYS
from core.knobs import DATASETS, TRAINING_KNOBS
from tools.process import entry_point
from tools.vendoring import AdoptError, compressed, git_blob, merge_sums, run, sha256

ROOT = Path(__file__).resolve().parents[1]
VENDOR_DIR = ROOT / "tests" / "data" / "vendor"
DATA_DIR = ROOT / "core" / "data"
PACKAGE = "maxtext/"
"""The wheel's package folder: a vendored path is the path inside it (``configs/base.yml``)."""
VENDOR: tuple[str, ...] = (
    "configs/base.yml",
    "configs/post_train/rl.yml",
    "configs/types.py",
    "configs/models/gemma4-*.yml",
    "examples/chat_templates/gsm8k_rl.json",
    "examples/chat_templates/openmathinstruct2_rl.json",
    "trainers/post_train/rl/evaluate_rl.py",
    "trainers/post_train/rl/utils_rl.py",
    "trainers/post_train/rl/math_verify_pool.py",
    "trainers/post_train/rl/train_rl.py",
    "trainers/post_train/rl/hooks.py",
    "utils/max_utils.py",
    "checkpoint_conversion/to_maxtext.py",
    "checkpoint_conversion/to_huggingface.py",
)
"""What the tests read (patterns inside ``maxtext/``): the configs every key is checked against and the pydantic
models pyconfig checks them with (``types.py``), the Gemma 4 shapes,
the RL prompt templates, MaxText's RL evaluation code (tests/test_evaluate_grader.py), the RL trainer's and
``max_utils``' code, whose log lines the program parses (tests/test_maxtext_logs.py), and the converters, whose own
flags (``--hf_model_path``) the conversion and the export pass (tests/test_maxtext_keys.py)."""
PINS = "dependencies/extra_deps/post_train_github_deps.txt"
"""The wheel's git pins of the post-training stack (tunix, tpu-inference, vLLM): what the image installs."""
RECORD_NAME = "wheel.json"
SHARED_DIR = ROOT.parent / "shared"
"""The project's reference data beside the checkout (``../shared``), where a release may have a README listing its
files' sha256: a list made apart from the wheel, which the files must match and which is vendored with them."""
RELEASED_LIST = "README.md"
_SUM_LINE = re.compile(r"^([0-9a-f]{64})  (\S+)$", re.M)
VERSION = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+(?:\.post[0-9]+|rc[0-9]+)?")
DOWNLOAD_SECONDS = 600
LOADER_PACKAGES: tuple[str, ...] = (
    "jax==0.11.0",
    "jaxlib==0.11.0",
    "absl-py==2.5.1",
    "etils==1.15.0",
    "flax==0.12.8",
    "Jinja2==3.1.6",
    "numpy==2.5.5",
    "omegaconf==2.4.0",
    "orbax-checkpoint==0.12.8",
    "packaging==26.4",
    "pathwaysutils==0.1.13",
    "psutil==7.2.2",
    "pydantic==2.14.4",
    "PyYAML==6.0.4",
    "tensorboardX==2.6.5",
)
"""What MaxText 0.2.5's config loader imports (``configs/pyconfig.py``, ``configs/types.py``, ``utils/max_utils.py``),
at versions its requirements allow (jax 0.11.0 as ``dependencies/extra_deps/tpu_post_train_overrides.txt`` pins it;
the rest the newest then): the wheel is installed without its dependencies, which are the whole TPU stack."""
LOADER_SECONDS = 1200
DERIVED = frozenset({"checkpoint_dir", "tensorboard_dir"})
"""Keys the program refuses that MaxText derives in code (RLConfig), in no config file."""


@dataclass(frozen=True)
class Release:
    """A MaxText wheel and the files read out of it."""

    version: str
    wheel_name: str
    wheel_sha256: str
    files: dict[str, bytes]
    """Path inside ``maxtext/`` -> content, every one checked against the wheel's RECORD."""
    pins: tuple[str, ...]
    record: tuple[str, ...] = ()
    """The RECORD's own lines of the files under ``maxtext/`` (``path,sha256=<urlsafe base64>,size``), in its order."""


def download(version: str, folder: Path) -> Path:
    """The ``maxtext==version`` wheel from the package index pip is configured with, in ``folder``."""
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--python-version",
        "3.12",
        "--only-binary=:all:",
        f"maxtext=={version}",
        "-d",
        str(folder),
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=DOWNLOAD_SECONDS, check=False)
    except subprocess.TimeoutExpired:
        raise AdoptError(
            f"pip download maxtext=={version} took over {DOWNLOAD_SECONDS} s: check the network, or pass --wheel FILE"
        ) from None
    wheels = sorted(folder.glob(f"maxtext-{version}-*.whl"))
    if done.returncode != 0 or len(wheels) != 1:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
        raise AdoptError(f"pip download maxtext=={version} failed ({last}): is {version} on PyPI? or pass --wheel FILE")
    return wheels[0]


def _record(archive: zipfile.ZipFile, dist_info: str) -> dict[str, str]:
    """The wheel's RECORD: member -> sha256 hex (PEP 376/427: urlsafe base64 without padding)."""
    rows = csv.reader(io.StringIO(archive.read(f"{dist_info}/RECORD").decode()))
    hashes: dict[str, str] = {}
    for row in rows:
        if len(row) >= 2 and row[1].startswith("sha256="):
            digest = row[1].removeprefix("sha256=")
            hashes[row[0]] = base64.urlsafe_b64decode(digest + "=" * (-len(digest) % 4)).hex()
    return hashes


RECORD_LINE = re.compile(r"maxtext/[^,\"\\\r\n]+,sha256=[A-Za-z0-9_-]{43},[0-9]+")
"""A RECORD line of a file under ``maxtext/``: its path (no comma, quote or backslash, so the line is the CSV row
itself), its sha256 (urlsafe base64 of 32 bytes, no padding) and its size."""


def package_record(archive: zipfile.ZipFile, dist_info: str) -> tuple[str, ...]:
    """The RECORD's lines of the files under ``maxtext/``, each the wheel's file with its sha256 and size: what
    ``core/data/maxtext-<version>-record.json`` pins (``pin``)."""
    lines = [line for line in archive.read(f"{dist_info}/RECORD").decode().splitlines() if line.startswith(PACKAGE)]
    for line in lines:
        if not RECORD_LINE.fullmatch(line):
            raise AdoptError(f"the wheel's RECORD line {line[:120]!r} is not a file with its sha256 and size")
        path, digest, size = line.rsplit(",", 2)
        content = archive.read(path)
        if (len(content), sha256(content)) != (int(size), base64.urlsafe_b64decode(digest[7:] + "=").hex()):
            raise AdoptError(f"{path} in the wheel does not match its RECORD line: the wheel is damaged")
    if not lines:
        raise AdoptError(f"the wheel's RECORD lists no file under {PACKAGE}: pass the maxtext wheel")
    return tuple(lines)


def read_wheel(path: Path, version: str) -> Release:
    """The files of ``VENDOR`` and the pins out of the wheel at ``path``, which must be maxtext ``version``."""
    data = path.read_bytes()
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise AdoptError(f"{path} is not a wheel (not a zip file): download it again") from None
    dist_info = f"maxtext-{version}.dist-info"
    names = set(archive.namelist())
    if f"{dist_info}/METADATA" not in names:
        raise AdoptError(f"{path} is not the maxtext {version} wheel (no {dist_info}/METADATA): pass that wheel")
    metadata = archive.read(f"{dist_info}/METADATA").decode(errors="replace")
    if not re.search(r"^Name: maxtext\s*$", metadata, re.M) or not re.search(
        rf"^Version: {re.escape(version)}\s*$", metadata, re.M
    ):
        raise AdoptError(f"{path}: its METADATA does not say maxtext {version}: pass the {version} wheel")
    hashes = _record(archive, dist_info)
    files: dict[str, bytes] = {}
    for pattern in VENDOR:
        regex = re.compile(re.escape(PACKAGE + pattern).replace(r"\*", r"[^/]+") + r"\Z")
        matched = sorted(name for name in names if regex.match(name))
        if not matched:
            raise AdoptError(f"maxtext {version} has no {PACKAGE}{pattern}: update VENDOR in tools/adopt_maxtext.py")
        for name in matched:
            content = archive.read(name)
            if hashes.get(name) != sha256(content):
                raise AdoptError(f"{name} in {path.name} does not match the wheel's RECORD: the wheel is damaged")
            files[name.removeprefix(PACKAGE)] = content
    pins: tuple[str, ...] = ()
    if PINS in names:
        pins = tuple(line.strip() for line in archive.read(PINS).decode().splitlines() if line.strip())
    return Release(version, path.name, sha256(data), files, pins, package_record(archive, dist_info))


def vendored_name(path: str) -> str:
    """Where a file is vendored: MaxText's Python code compressed (``.xz``), the data as it is."""
    return path + ".xz" if path.endswith(".py") else path


def record(release: Release) -> dict[str, object]:
    """``wheel.json``: where the vendored files came from, each file's sha256 and git blob id."""
    return {
        "package": "maxtext",
        "version": release.version,
        "wheel": release.wheel_name,
        "sha256": release.wheel_sha256,
        "fetched_with": f"pip download --no-deps --python-version 3.12 --only-binary=:all: maxtext=={release.version}",
        "post_train_github_deps": list(release.pins),
        "files": {
            path: {"sha256": sha256(content), "git_blob": git_blob(content)}
            for path, content in sorted(release.files.items())
        },
    }


def check_pinned(release: Release, vendor_dir: Path) -> None:
    """A release adopted before is the same wheel again: its ``wheel.json`` sha256 pins it."""
    recorded = vendor_dir / f"maxtext-{release.version}" / RECORD_NAME
    if recorded.exists():
        pinned = json.loads(recorded.read_text()).get("sha256")
        if pinned != release.wheel_sha256:
            raise AdoptError(
                f"{release.wheel_name} has sha256 {release.wheel_sha256}, not the {pinned} adopted "
                f"({_shown(recorded)}): find out why the release's wheel changed before removing that record"
            )


def released_sums(text: str) -> dict[str, str]:
    """The ``<sha256>  <path>`` lines of a released list (``../shared/maxtext-<version>/README.md``)."""
    return {m[2]: m[1] for m in _SUM_LINE.finditer(text)}


def check_released(release: Release, shared_dir: Path, vendor_dir: Path) -> dict[str, bytes]:
    """The list of the release's files, when there is one, after checking the wheel's files against it:
    ``{RELEASED_LIST: its bytes}`` to vendor beside them, else nothing. ``../shared``'s list first; without it (a
    clone), the one an earlier adoption vendored, so that adopting again there keeps it."""
    name = Path(f"maxtext-{release.version}") / RELEASED_LIST
    listed = next((p for p in (shared_dir / name, vendor_dir / name) if p.is_file()), None)
    if listed is None:
        print(f"{_shown(shared_dir / name)} is absent: the files are checked against the wheel's RECORD only")
        return {}
    data = listed.read_bytes()
    sums = released_sums(data.decode(errors="replace"))
    wrong = sorted(
        path for path, digest in sums.items() if path not in release.files or sha256(release.files[path]) != digest
    )
    if not sums or wrong:
        raise AdoptError(
            f"{_shown(listed)} lists {', '.join(wrong) or 'no sha256 line'} otherwise than the wheel "
            f"{release.wheel_name}: find out which is the release before adopting it"
        )
    print(f"the wheel's files match the {len(sums)} sha256 of {_shown(listed)} (vendored beside them)")
    return {RELEASED_LIST: data}


def write_vendor(release: Release, vendor_dir: Path, extra: dict[str, bytes] | None = None) -> Path:
    """The files, ``wheel.json`` and their SHA256SUMS lines, under ``vendor_dir/maxtext-<version>/``, with ``extra``
    files as they are (``check_released``'s list)."""
    prefix = f"maxtext-{release.version}"
    folder = vendor_dir / prefix
    for old in sorted(folder.rglob("*"), reverse=True) if folder.exists() else ():
        if old.is_file():
            old.unlink()
        else:
            old.rmdir()
    sums: dict[str, str] = {}
    for path, content in release.files.items():
        target = folder / vendored_name(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(compressed(content) if target.suffix == ".xz" else content)
        sums[f"{prefix}/{path}"] = sha256(content)
    for name, content in (extra or {}).items():
        (folder / name).write_bytes(content)
        sums[f"{prefix}/{name}"] = sha256(content)
    text = json.dumps(record(release), indent=1) + "\n"
    (folder / RECORD_NAME).write_text(text)
    sums[f"{prefix}/{RECORD_NAME}"] = sha256(text.encode())
    merge_sums(vendor_dir / "SHA256SUMS", sums, lambda name: name.startswith(prefix + "/"))
    return folder


def pin(release: Release) -> dict[str, object]:
    """``core/data/maxtext-<version>-record.json``: the wheel's name and sha256 and the RECORD's lines of its
    ``maxtext/`` files, the MaxText each step checks its image's against (``workloads/container/maxtext_check.py``)."""
    return {
        "package": "maxtext",
        "version": release.version,
        "wheel": release.wheel_name,
        "sha256": release.wheel_sha256,
        "record": list(release.record),
    }


def write_pin(release: Release, data_dir: Path) -> Path:
    """The pin (``pin``) in ``data_dir``, one RECORD line a line."""
    path = data_dir / f"maxtext-{release.version}-record.json"
    path.write_text(json.dumps(pin(release), indent=1) + "\n")
    return path


def write_table(version: str, configs: Path, data_dir: Path) -> tuple[Path, dict[str, str], dict[str, str]]:
    """``core/data/maxtext-<version>-keys.json`` and ``-refused.json`` generated from ``configs``."""
    table, refused = maxtext_keys.analyse(configs)
    path = data_dir / f"maxtext-{version}-keys.json"
    path.write_text(json.dumps(table, indent=1) + "\n")
    path.with_name(f"maxtext-{version}-refused.json").write_text(json.dumps(refused, indent=1) + "\n")
    return path, table, refused


def program_keys() -> set[str]:
    """The MaxText keys the program sets or reads by name (the typed knobs, the refused and interpreted extraArgs,
    the datasets' keys); the steps' whole argv is checked by tests/test_commands.py."""
    keys = {knob.key for knob in TRAINING_KNOBS} | set(INTERPRETED) | (set(PROGRAM_KEYS) - DERIVED)
    return keys | {key for dataset in DATASETS.values() for key, _ in dataset.keys}


def changes(old: dict[str, str], new: dict[str, str], rl_keys: set[str]) -> list[str]:
    """What a reader must look at, line by line: removed keys, changed types, added keys (rl.yml's first)."""
    removed = sorted(set(old) - set(new))
    retyped = sorted(key for key in set(old) & set(new) if old[key] != new[key])
    added = sorted(set(new) - set(old), key=lambda key: (key.split(".")[0] not in rl_keys, key))
    lines = [f"keys: {len(old)} -> {len(new)} ({len(added)} added, {len(removed)} removed, {len(retyped)} retyped)"]
    lines += [f"  removed: {key}" for key in removed]
    lines += [f"  retyped: {key} {old[key]} -> {new[key]}" for key in retyped]
    lines += [f"  added{' (rl.yml)' if key.split('.')[0] in rl_keys else ''}: {key} ({new[key]})" for key in added]
    return lines


def defaults(configs: Path) -> dict[str, object]:
    """Key -> default of ``base.yml`` and ``post_train/rl.yml`` (rl.yml wins), nested blocks as dotted keys."""
    values: dict[str, object] = {}
    for name in maxtext_keys.CONFIG_FILES:
        for key, value in (yaml.safe_load((configs / name).read_text()) or {}).items():
            values[key] = value
            if isinstance(value, dict):
                values.update({f"{key}.{sub}": sub_value for sub, sub_value in value.items()})
    return values


def changed_defaults(old: Path, new: Path, keys: set[str]) -> list[str]:
    """The keys of ``keys`` whose default differs between two releases' configs: a key the program passes keeps its
    value, but one it leaves to MaxText (a knob at MaxText's default, an extraArgs key) then means something else."""
    before, after = defaults(old), defaults(new)
    return [
        f"  default changed: {key} {_short(before[key])} -> {_short(after[key])}"
        for key in sorted(keys & set(before) & set(after))
        if before[key] != after[key]
    ]


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:60]}... ({len(text)} characters)"


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def loader_dir(version: str) -> Path:
    """Where ``--loader`` makes the venv whose Python runs MaxText's own config loader (tools/maxtext_loader.py)."""
    return ROOT / "build" / f"maxtext-{version}" / "venv"


def _run(command: list[str], what: str) -> None:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=LOADER_SECONDS, check=False)
    except subprocess.TimeoutExpired:
        raise AdoptError(f"{what} took over {LOADER_SECONDS} s: check the network and run it again") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
        raise AdoptError(f"{what} failed ({last}): check the Python given to --loader (3.12) and the network")


def make_loader(wheel: Path, python: str, folder: Path) -> Path:
    """A venv of ``python`` (3.12, as MaxText requires) in ``folder`` with the wheel and ``LOADER_PACKAGES``: the
    interpreter tests/test_maxtext_pyconfig.py runs tools/maxtext_loader.py with."""
    _run([python, "-m", "venv", "--clear", str(folder)], f"{python} -m venv {folder}")
    pip = [str(folder / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    _run([*pip, "--no-deps", str(wheel)], f"pip install {wheel.name}")
    _run([*pip, *LOADER_PACKAGES], "pip install of the loader's packages")
    return folder / "bin" / "python"


def adopt(
    version: str,
    wheel: Path | None,
    vendor_dir: Path = VENDOR_DIR,
    data_dir: Path = DATA_DIR,
    loader: str | None = None,
    shared_dir: Path = SHARED_DIR,
) -> int:
    """The whole adoption (the module's docstring); the exit status."""
    with tempfile.TemporaryDirectory(prefix="tpu-rl-maxtext-") as scratch:
        path = wheel if wheel is not None else download(version, Path(scratch))
        release = read_wheel(path, version)
        check_pinned(release, vendor_dir)
        released = check_released(release, shared_dir, vendor_dir)
        if loader is not None:
            made = make_loader(path, loader, loader_dir(version))
            print(f"made {_shown(made)}: make test-slow runs MaxText {version}'s loader on the steps' argv")
    # Read before a re-adoption of the same version rewrites it; none committed yet (a first adoption, a table
    # removed to be made again): every key is new.
    current = maxtext_keys.known_keys() if maxtext_keys.TABLE.is_file() else {}
    folder = write_vendor(release, vendor_dir, released)
    table_path, table, refused = write_table(version, folder / "configs", data_dir)
    pin_path = write_pin(release, data_dir)
    print(f"maxtext {version}: {release.wheel_name} sha256 {release.wheel_sha256}")
    for pin in release.pins:
        print(f"  pins {pin}")
    beside = "".join(f", {name}" for name in released)
    print(
        f"wrote {_shown(folder)}/ ({len(release.files)} files, {RECORD_NAME}{beside}), {_shown(vendor_dir)}/SHA256SUMS"
    )
    print(f"wrote {_shown(table_path)} ({len(table)} keys) and its -refused.json ({len(refused)} keys)")
    print(f"wrote {_shown(pin_path)} (the RECORD's {len(release.record)} lines of maxtext/: the steps' image check)")
    rl_keys = set((yaml.safe_load(release.files["configs/post_train/rl.yml"]) or {}).keys())
    print(f"against {maxtext_keys.MAXTEXT_VERSION}, the version the program uses now:")
    for line in changes(current, table, rl_keys):
        print(line)
    previous = vendor_dir / f"maxtext-{maxtext_keys.MAXTEXT_VERSION}" / "configs"
    if previous.is_dir() and previous != folder / "configs":
        named = program_keys() | {key for key in table if key.split(".")[0] in rl_keys}
        for line in changed_defaults(previous, folder / "configs", named):
            print(line)
    missing = sorted(program_keys() - set(table))
    if missing:
        print(f"the program sets or reads keys maxtext {version} does not have: {', '.join(missing)}", file=sys.stderr)
        return 1
    print(f"every key the program names exists in {version}; next: docs/releases.md 'Adopting a MaxText release'")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.adopt_maxtext", description=__doc__.split("\n", 1)[0])
    parser.add_argument("version", help="the MaxText release, e.g. 0.2.5")
    parser.add_argument("--wheel", type=Path, help="the release's wheel, already downloaded (no network)")
    parser.add_argument(
        "--loader",
        metavar="PYTHON3.12",
        help="also make build/maxtext-VERSION/venv, a venv of this Python with the wheel and the JAX its config "
        "loader imports (tests/test_maxtext_pyconfig.py runs the loader with it)",
    )
    args = parser.parse_args(argv)
    problems = []
    if not VERSION.fullmatch(args.version):
        problems.append(f"version {args.version!r} is not a release number like 0.2.5")
    if args.wheel is not None and not args.wheel.is_file():
        problems.append(f"--wheel {args.wheel} is not a file")
    return run("adopt_maxtext", problems, lambda: adopt(args.version, args.wheel, loader=args.loader))


if __name__ == "__main__":
    entry_point(main)
