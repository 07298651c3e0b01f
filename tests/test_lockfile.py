"""requirements.lock is what `make venv` (and so `make up`) installs: every runtime package, transitive ones
too, pinned with its sha256 hashes, at versions requirements.txt allows, for Linux and macOS on Python
3.11-3.13, and the versions this environment has installed (a stale lock fails here). requirements-dev.lock is
the same for the test tools (`make dev-venv`), at requirements.lock's versions for the runtime packages,
requirements-slow.lock the same for the slow tier's torch and transformers (`make test-slow`), for where that tier
runs (Linux x86_64, Python 3.11), at requirements-dev.lock's versions, and requirements-uv.lock pins the installers
themselves (uv, UV_VERSION, and pip, PIP_VERSION)."""

from __future__ import annotations

import importlib.metadata as metadata
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements.lock"
REQUIREMENTS = ROOT / "requirements.txt"
DEV_LOCK = ROOT / "requirements-dev.lock"
DEV_REQUIREMENTS = ROOT / "requirements-dev.txt"
UV_LOCK = ROOT / "requirements-uv.lock"
SLOW_LOCK = ROOT / "requirements-slow.lock"
SLOW_REQUIREMENTS = ROOT / "requirements-slow.txt"
MAKEFILE = ROOT / "Makefile"
HASH = re.compile(r"--hash=sha256:[0-9a-f]{64}")

# Where users run the program: each must get exactly one pin of every package it needs.
TARGETS = [
    {
        "python_version": f"3.{minor}",
        "python_full_version": f"3.{minor}.0",
        "sys_platform": platform,
        "platform_system": system,
        "platform_machine": machine,
        "os_name": "posix",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
    }
    for minor in (11, 12, 13)
    for platform, system, machine in (
        ("linux", "Linux", "x86_64"),
        ("linux", "Linux", "aarch64"),
        ("darwin", "Darwin", "arm64"),
        ("darwin", "Darwin", "x86_64"),
    )
]
SLOW_TARGET = next(
    t for t in TARGETS if (t["python_version"], t["sys_platform"], t["platform_machine"]) == ("3.11", "linux", "x86_64")
)
"""Where the slow tier runs (CI: Linux x86_64, Python 3.11): its lock is for there alone (torch's CPU build)."""


@dataclass(frozen=True)
class Pin:
    name: str
    version: str
    marker: Marker | None

    def applies(self, environment: dict[str, str] | None = None) -> bool:
        return self.marker is None or self.marker.evaluate(environment)


def logical_lines(text: str) -> list[str]:
    """pip's view of a requirements file: continuations joined, comments and blank lines dropped."""
    joined = re.sub(r"\\\n", " ", text)
    lines = (re.sub(r"(^|\s)#.*$", "", line).strip() for line in joined.splitlines())
    return [line for line in lines if line]


def requirements(text: str, folder: Path = ROOT) -> list[Requirement]:
    """A requirements file's requirements, the files it includes (`-r other.txt`) read in place."""
    found: list[Requirement] = []
    for line in logical_lines(text):
        if line.startswith("-r "):
            found += requirements((folder / line.removeprefix("-r ").strip()).read_text(), folder)
        else:
            found.append(Requirement(line))
    return found


def parse_lock(text: str) -> tuple[list[Pin], list[str]]:
    """The lock's pins and what is wrong with its entries: each is `name==version [; marker]` followed by
    at least one sha256 hash (pip's --require-hashes then refuses any file whose hash is not listed)."""
    pins: list[Pin] = []
    problems: list[str] = []
    for line in logical_lines(text):
        spec, *options = re.split(r"\s+(?=--)", line)
        if spec.startswith("-"):
            problems.append(f"an option line, not a pinned package: {line[:80]}")
            continue
        try:
            req = Requirement(spec)
        except InvalidRequirement as exc:
            problems.append(f"not a requirement: {spec!r} ({exc})")
            continue
        specifiers = list(req.specifier)
        if req.url or req.extras or len(specifiers) != 1 or specifiers[0].operator != "==" or "*" in str(req.specifier):
            problems.append(f"{spec}: not an exact name==version pin")
            continue
        if not options:
            problems.append(f"{spec}: no --hash")
        problems += [
            f"{spec}: {option!r} is not --hash=sha256:<64 hex>" for option in options if not HASH.fullmatch(option)
        ]
        pins.append(Pin(canonicalize_name(req.name), specifiers[0].version, req.marker))
    seen: set[tuple[str, str]] = set()
    for pin in pins:
        key = (pin.name, str(pin.marker))
        if key in seen:
            problems.append(f"{pin.name} is pinned twice for the marker {pin.marker}")
        seen.add(key)
    for target in TARGETS:
        applying = [pin.name for pin in pins if pin.applies(target)]
        twice = sorted({name for name in applying if applying.count(name) > 1})
        if twice:
            problems.append(f"pinned twice on Python {target['python_version']} {target['sys_platform']}: {twice}")
    return pins, problems


def requirement_problems(pins: list[Pin], wanted: list[Requirement]) -> list[str]:
    """Each requirement of requirements.txt is pinned once on every target, at a version its range allows."""
    problems = []
    for req in wanted:
        name = canonicalize_name(req.name)
        for target in TARGETS:
            if req.marker and not req.marker.evaluate(target):
                continue
            versions = [pin.version for pin in pins if pin.name == name and pin.applies(target)]
            where = f"on Python {target['python_version']} {target['sys_platform']} {target['platform_machine']}"
            if len(versions) != 1:
                problems.append(f"{req}: {len(versions)} pins {where}")
            elif not req.specifier.contains(versions[0], prereleases=True):
                problems.append(f"{req}: the lock pins {versions[0]} {where}")
    return sorted(set(problems))


def label(target: dict[str, str] | None) -> str:
    if target is None:
        return "here"
    return f"on Python {target['python_version']} {target['sys_platform']} {target['platform_machine']}"


def dependency_problems(
    pins: list[Pin], wanted: list[Requirement], targets: list[dict[str, str]] = TARGETS
) -> list[str]:
    """Every package the requirements need (their dependencies followed through this environment's metadata, as
    `pip install --no-deps` will not) has one pin on each target and here, and here it is the installed version.
    (A target that gets another version may need other dependencies; uv's resolution covers those.)"""
    problems = []
    environments: list[dict[str, str] | None] = [None, *targets]
    todo = [(req, "requirements.txt", set(range(len(environments)))) for req in wanted]
    seen: dict[tuple[str, str], set[int]] = {}
    while todo:
        req, needed_by, where = todo.pop()
        name = canonicalize_name(req.name)
        extras = sorted(req.extras)
        key = (name, ",".join(extras))
        new = {
            i for i in where - seen.get(key, set()) if req.marker is None or req.marker.evaluate(_env(environments[i]))
        }
        if not new:
            continue
        seen.setdefault(key, set()).update(new)
        try:
            dist: metadata.Distribution | None = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            if 0 in new:
                problems.append(f"{name} (needed by {needed_by}) is not installed")
                continue
            dist = None  # needed on another Python only (libcst's pyyaml-ft on 3.13): its pins are checked
        for i in sorted(new):
            locked = [pin.version for pin in pins if pin.name == name and pin.applies(environments[i])]
            if len(locked) != 1:
                problems.append(f"{name} (needed by {needed_by}) has {len(locked)} pins {label(environments[i])}")
            elif environments[i] is None and dist and Version(locked[0]) != Version(dist.version):
                problems.append(f"{name}: the lock pins {locked[0]}, installed is {dist.version}")
        for line in (dist.requires if dist else None) or []:
            dep = Requirement(line)
            applies = {
                i
                for i in new
                if dep.marker is None
                or any(dep.marker.evaluate(_env(environments[i], extra)) for extra in ["", *extras])
            }
            if applies:
                todo.append((Requirement(str(dep).split(";")[0]), name, applies))
    return sorted(set(problems))


def _env(target: dict[str, str] | None, extra: str = "") -> dict[str, str]:
    return {**(target or {}), "extra": extra}


PIP_INSTALL_LINE = re.compile(r"\bpip (--python \S+ )?install\b")
"""A line that installs with pip or uv (``pip install``, ``uv pip install``, ``pip --python <venv> install``)."""

# Each install rule of the Makefile and the lock it installs, hash-checked, nothing else.
INSTALLS = {
    "$(UV)": "requirements-uv.lock",
    "$(VENV)/.installed": "requirements.lock",
    "$(VENV)/.installed-dev": "requirements-dev.lock",
    "$(VENV)/.installed-slow": "requirements-slow.lock",
}
# Each lock and the Makefile variable holding the command `make lock` makes it with (its header).
LOCK_COMMANDS = {
    "requirements.lock": "LOCK_COMMAND",
    "requirements-dev.lock": "DEV_LOCK_COMMAND",
    "requirements-uv.lock": "UV_LOCK_COMMAND",
    "requirements-slow.lock": "SLOW_LOCK_COMMAND",
}


def expand(makefile: str, text: str) -> str:
    """``text`` with the Makefile's variables (``$(NAME)``) replaced by their definitions, as make runs it."""
    definitions = dict(re.findall(r"^([A-Z_]+) *[:?]?= *(.*)$", makefile, re.MULTILINE))
    for _ in range(10):
        text, before = re.sub(r"\$\(([A-Z_]+)\)", lambda m: definitions.get(m[1], m[0]), text), text
        if text == before:
            break
    return text


def makefile_problems(makefile: str, locks: dict[str, str]) -> list[str]:
    """Each install rule installs its lock alone, hash-checked and without resolving (uv itself from its own
    lock, by pip); `make lock` runs, with a pinned uv, the command each lock's header names."""
    problems = []
    for target, lock in INSTALLS.items():
        rule = re.search(rf"^{re.escape(target)}:(?P<prereqs>.*)\n(?P<recipe>(?:\t.*\n)+)", makefile, re.MULTILINE)
        if not rule:
            problems.append(f"no {target} rule")
            continue
        if lock not in rule["prereqs"].split():
            problems.append(f"{target} does not depend on {lock}")
        recipe = expand(makefile, rule["recipe"]).splitlines()
        # `pip install --dry-run` installs nothing (the slow tier's probe for torch's wheel)
        installs = [line.strip() for line in recipe if PIP_INSTALL_LINE.search(line) and "--dry-run" not in line]
        hashed = [line for line in installs if re.search(rf"\s-r {re.escape(lock)}(\s|;|$)", line)]
        if not hashed or not all("--require-hashes" in line and "--no-deps" in line for line in hashed):
            problems.append(f"{target} does not install --require-hashes --no-deps -r {lock}")
        problems += [f"unhashed install in {target}: {line}" for line in installs if line not in hashed]
    uv = re.search(r"^UV_VERSION := (\d+\.\d+\.\d+)$", makefile, re.MULTILINE)
    lock_rule = re.search(r"^lock:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    if not (uv and lock_rule):
        return [*problems, "no lock target and no exact UV_VERSION"]
    if "uv==$(UV_VERSION)" not in lock_rule[1]:
        problems.append("make lock does not install uv==$(UV_VERSION)")
    for lock, variable in LOCK_COMMANDS.items():
        command = re.search(rf"^{variable} := (.+)$", makefile, re.MULTILINE)
        if not command or f"$({variable})" not in lock_rule[1]:
            problems.append(f"make lock does not run $({variable})")
        elif f"#    {command[1]}" not in locks[lock].splitlines()[:5]:
            problems.append(f"the header of {lock} does not name the command make lock runs: {command[1]}")
    pip = re.search(r"^PIP_VERSION := (\d+(?:\.\d+)+)$", makefile, re.MULTILINE)
    pinned = (
        uv
        and pip
        and {f"uv=={uv[1]}", f"pip=={pip[1]}"} <= set(re.findall(r"^\S+==\S+", locks["requirements-uv.lock"], re.M))
    )
    if not pinned or "printf 'uv==$(UV_VERSION)\\npip==$(PIP_VERSION)\\n' |" not in lock_rule[1]:
        problems.append("requirements-uv.lock is not made from uv==$(UV_VERSION) and pip==$(PIP_VERSION)")
    return problems


def agreement_problems(runtime: list[Pin], dev: list[Pin]) -> list[str]:
    """The dev lock pins each runtime package exactly as requirements.lock does (installing it over the runtime
    venv changes nothing there)."""
    runtime_names = {pin.name for pin in runtime}
    want = {(pin.name, pin.version, str(pin.marker)) for pin in runtime}
    have = {(pin.name, pin.version, str(pin.marker)) for pin in dev if pin.name in runtime_names}
    return [f"requirements-dev.lock pins {p[0]}=={p[1]} ({p[2]})" for p in sorted(have - want)] + [
        f"requirements-dev.lock lacks {p[0]}=={p[1]} ({p[2]})" for p in sorted(want - have)
    ]


def slow_agreement_problems(dev: list[Pin], slow: list[Pin]) -> list[str]:
    """The slow lock pins, for where the slow tier runs, each package the dev lock pins there, at its version
    (installing it over the dev venv changes nothing there), and nothing for another platform."""
    want = {(pin.name, pin.version) for pin in dev if pin.applies(SLOW_TARGET)}
    have = {(pin.name, pin.version) for pin in slow if pin.applies(SLOW_TARGET)}
    dev_names = {name for name, _ in want}
    return (
        [f"requirements-slow.lock pins {n}=={v}" for n, v in sorted(have - want) if n in dev_names]
        + [f"requirements-slow.lock lacks {n}=={v}" for n, v in sorted(want - have)]
        + [f"requirements-slow.lock pins {pin.name} for another platform" for pin in slow if pin.marker]
    )


def locks() -> dict[str, str]:
    return {name: (ROOT / name).read_text() for name in LOCK_COMMANDS}


@pytest.fixture(scope="module")
def lock() -> tuple[str, list[Pin], list[Requirement]]:
    text = LOCK.read_text()
    pins, _ = parse_lock(text)
    return text, pins, requirements(REQUIREMENTS.read_text())


def test_every_lock_entry_is_an_exact_pin_with_sha256_hashes_once(lock):
    text, pins, _ = lock
    assert parse_lock(text)[1] == []
    assert len(pins) > 50


def test_every_requirement_is_pinned_at_a_version_its_range_allows_on_every_target(lock):
    _, pins, wanted = lock
    assert requirement_problems(pins, wanted) == []


def test_the_lock_pins_every_dependency_and_what_this_environment_has_installed(lock):
    """A lock regenerated without reinstalling, or a venv changed by hand (`pip install -U`, `pulumi install`,
    which upgrades setuptools), fails here: run `make venv` (or `make lock` after editing requirements.txt)."""
    _, pins, wanted = lock
    assert dependency_problems(pins, wanted) == []


def test_make_venv_installs_the_hash_checked_lock_and_make_lock_writes_it():
    assert makefile_problems(MAKEFILE.read_text(), locks()) == []


@pytest.fixture(scope="module")
def dev_lock() -> tuple[str, list[Pin], list[Requirement]]:
    text = DEV_LOCK.read_text()
    pins, _ = parse_lock(text)
    return text, pins, requirements(DEV_REQUIREMENTS.read_text())


def test_the_dev_lock_pins_every_test_tool_with_hashes_at_a_version_its_range_allows(dev_lock):
    text, pins, wanted = dev_lock
    assert parse_lock(text)[1] == []
    assert requirement_problems(pins, wanted) == []


def test_the_dev_lock_pins_the_runtime_packages_as_requirements_lock_does(lock, dev_lock):
    assert agreement_problems(lock[1], dev_lock[1]) == []


def test_the_dev_lock_pins_what_this_environment_has_installed(dev_lock):
    """`make dev-venv` after `make lock` (or after pulling a changed lock: make does it before `make test`)."""
    _, pins, wanted = dev_lock
    assert dependency_problems(pins, wanted) == []


@pytest.fixture(scope="module")
def slow_lock() -> tuple[str, list[Pin], list[Requirement]]:
    text = SLOW_LOCK.read_text()
    pins, _ = parse_lock(text)
    return text, pins, requirements(SLOW_REQUIREMENTS.read_text())


def test_the_slow_lock_pins_torch_and_transformers_with_hashes_at_a_version_their_range_allows(slow_lock):
    """`make test-slow` installs requirements-slow.lock alone, hash-checked: torch's CPU build (this machine's wheel;
    PyTorch's CPU index elsewhere), transformers and every dependency, for Linux x86_64 and Python 3.11."""
    text, pins, wanted = slow_lock
    assert parse_lock(text)[1] == []
    assert requirement_problems(pins, wanted) == []
    versions = {pin.name: pin.version for pin in pins}
    assert versions["torch"] == "2.13.0+cpu", "the CPU build: PyPI's Linux torch is a CUDA build of several GB"
    torch = re.search(r"^torch==\S+((?:\s*\\\s*--hash=sha256:[0-9a-f]{64})+)", text, re.MULTILINE)
    assert torch and torch[1].count("--hash") == 1, "one file: the CPU wheel for Linux x86_64 and CPython 3.11"


def test_the_slow_lock_pins_the_dev_packages_as_the_dev_lock_does(dev_lock, slow_lock):
    assert slow_agreement_problems(dev_lock[1], slow_lock[1]) == []


@pytest.mark.slow
def test_the_slow_lock_pins_what_the_slow_tier_has_installed(slow_lock):
    """`make test-slow` installs the slow lock first: every dependency of torch and transformers is pinned, at the
    installed version (without the slow tier's packages, as in `make test`, they are not installed: skipped)."""
    pytest.importorskip("transformers", reason="the slow tier's packages are not installed (make test-slow)")
    _, pins, wanted = slow_lock
    assert dependency_problems(pins, wanted, [SLOW_TARGET]) == []


def test_uv_and_pip_are_pinned_at_their_versions_with_the_hash_of_each_of_their_files():
    pins, problems = parse_lock(UV_LOCK.read_text())
    assert problems == []
    uv = re.search(r"^UV_VERSION := (\S+)$", MAKEFILE.read_text(), re.MULTILINE)
    pip = re.search(r"^PIP_VERSION := (\S+)$", MAKEFILE.read_text(), re.MULTILINE)
    assert uv and pip and pins == [Pin("pip", pip[1], None), Pin("uv", uv[1], None)]
    assert UV_LOCK.read_text().count("--hash=sha256:") > 10, "a wheel for every platform uv ships"


MUTANTS = {
    "a hash shortened": ("lock", lambda t: re.sub(r"(--hash=sha256:[0-9a-f]{63})[0-9a-f]", r"\1", t, count=1)),
    "an md5 hash": ("lock", lambda t: t.replace("--hash=sha256:", "--hash=md5:", 1)),
    "an entry without hashes": ("lock", lambda t: t + "\nsix==1.17.0\n"),
    "a range, not a pin": ("lock", lambda t: t.replace("==", ">=", 1)),
    "an entry twice": ("lock", lambda t: t + "\n" + logical_lines(t)[0] + "\n"),
    "an option line": ("lock", lambda t: "--index-url https://example.invalid/simple\n" + t),
    "a requirement not locked": ("requirements", lambda t: t + "\nsix>=1.16\n"),
    "a range the pin is outside of": ("requirements", lambda t: t + "\npulumi>=999\n"),
    "a stale pin": ("dependencies", lambda t: re.sub(r"^pulumi==\S+", "pulumi==0.0.1", t, flags=re.MULTILINE)),
    "an unhashed install": ("makefile", lambda t: t.replace("--require-hashes ", "")),
    "the dev ranges installed": (
        "makefile",
        lambda t: t.replace("-r requirements-dev.lock\n", "-r requirements-dev.txt\n", 1),
    ),
    "uv from the index unhashed": ("makefile", lambda t: t.replace("-r requirements-uv.lock", "uv==$(UV_VERSION)")),
    "a resolving install": ("makefile", lambda t: t.replace("--no-deps\n", "\n", 1)),
    "a dev lock made without the runtime lock": (
        "makefile",
        lambda t: t.replace("--constraint requirements.lock ", ""),
    ),
    "a UV_VERSION the uv lock does not pin": ("makefile", lambda t: t.replace("UV_VERSION := 0.", "UV_VERSION := 9.")),
    "a dev lock with another runtime pin": (
        "dev-lock",
        lambda t: re.sub(r"^pulumi==\S+", "pulumi==3.999.0", t, flags=re.MULTILINE),
    ),
    "a test tool not locked": ("dev-requirements", lambda t: t + "\nsix>=1.16\n"),
    "the ranges installed": ("makefile", lambda t: t.replace("-r requirements.lock", "-r requirements.txt", 1)),
    "a header of another command": ("makefile", lambda t: t.replace("--universal ", "", 1)),
    "a dependency missing on macOS": (
        "dependencies",
        lambda t: re.sub(r"^(cycler==\S+)", r"\1 ; sys_platform == 'linux'", t, flags=re.MULTILINE),
    ),
    "an unpinned uv": ("makefile", lambda t: t.replace("uv==$(UV_VERSION)", "uv")),
    "an unpinned pip": ("makefile", lambda t: t.replace("pip==$(PIP_VERSION)", "pip")),
    "a PIP_VERSION the uv lock does not pin": ("makefile", lambda t: t.replace("PIP_VERSION := 2", "PIP_VERSION := 9")),
    "the slow ranges installed": (
        "makefile",
        lambda t: t.replace("-r requirements-slow.lock\n", "-r requirements-slow.txt\n", 1),
    ),
    "an unhashed slow install": ("makefile", lambda t: t.replace("$(PIP_INSTALL) $$index", "install $$index", 1)),
    "a slow lock not made by make lock": ("makefile", lambda t: t.replace(" $(SLOW_LOCK_COMMAND) &&", " true &&")),
    "a slow lock with another dev pin": (
        "slow-lock",
        lambda t: re.sub(r"^pulumi==\S+", "pulumi==3.999.0", t, flags=re.MULTILINE),
    ),
    "a slow lock pinning for another platform": (
        "slow-lock",
        lambda t: re.sub(r"^(torch==\S+)", r"\1 ; sys_platform == 'darwin'", t, flags=re.MULTILINE),
    ),
}


@pytest.mark.parametrize("mutant", sorted(MUTANTS))
def test_each_check_fails_on_a_broken_lock_requirements_or_makefile(lock, mutant):
    """The checks above are not vacuous: each catches its mistake in a copy of the files."""
    text, pins, wanted = lock
    where, mutate = MUTANTS[mutant]
    if where == "lock":
        assert parse_lock(mutate(text))[1]
    elif where == "requirements":
        assert requirement_problems(pins, requirements(mutate(REQUIREMENTS.read_text())))
    elif where == "dependencies":
        assert dependency_problems(parse_lock(mutate(text))[0], wanted)
    elif where == "dev-lock":
        assert agreement_problems(pins, parse_lock(mutate(DEV_LOCK.read_text()))[0])
    elif where == "slow-lock":
        dev = parse_lock(DEV_LOCK.read_text())[0]
        assert slow_agreement_problems(dev, parse_lock(mutate(SLOW_LOCK.read_text()))[0])
    elif where == "dev-requirements":
        assert requirement_problems(
            parse_lock(DEV_LOCK.read_text())[0], requirements(mutate(DEV_REQUIREMENTS.read_text()))
        )
    else:
        assert makefile_problems(mutate(MAKEFILE.read_text()), locks())


@pytest.mark.slow  # two real installs of uv and pip (about 15 s)
@pytest.mark.parametrize("python_pip", ["has --python", "lacks --python"])
def test_the_installer_rule_makes_a_venv_with_the_pinned_uv_and_pip_either_way(tmp_path, python_pip):
    """`make`'s first rule, as a new user's `make up` runs it: python3's own pip installs uv and pip into a venv
    made without one; a python3 whose pip lacks `--python` (pip < 22.3, or none) gets the venv's bundled pip,
    which installs the same lock. Either way the venv has the lock's uv and pip, and nothing else was resolved."""
    if not shutil.which("make"):
        pytest.skip("make is not installed")
    for name in ("Makefile", "requirements-uv.lock"):
        shutil.copy(ROOT / name, tmp_path / name)
    python = Path(sys.base_prefix) / "bin" / "python3"
    if python_pip == "lacks --python":
        wrapper = tmp_path / "python3"
        wrapper.write_text(
            "#!/bin/sh\n"
            'if [ "$1 $2 $3" = "-m pip --python" ]; then echo "no such option: --python" >&2; exit 2; fi\n'
            f'exec {python} "$@"\n'
        )
        wrapper.chmod(0o755)
        python = wrapper
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    done = subprocess.run(
        ["make", "--no-print-directory", f"PYTHON={python}", ".venv/bin/uv"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    pins = {pin.name: pin.version for pin in parse_lock(UV_LOCK.read_text())[0]}
    uv = subprocess.run([tmp_path / ".venv/bin/uv", "--version"], capture_output=True, text=True, check=True)
    assert uv.stdout.split()[1] == pins["uv"]
    pip = subprocess.run(
        [tmp_path / ".venv/bin/python", "-m", "pip", "--version"], capture_output=True, text=True, check=True
    )
    assert pip.stdout.split()[1] == pins["pip"], "Pulumi's pip toolchain lists the venv's packages with it"
