"""requirements.lock is what `make venv` (and so `make up`) installs: every runtime package, transitive ones
too, pinned with its sha256 hashes, at versions requirements.txt allows, for Linux and macOS on Python
3.11-3.13, and the versions this environment has installed (a stale lock fails here)."""

from __future__ import annotations

import importlib.metadata as metadata
import re
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


def requirements(text: str) -> list[Requirement]:
    return [Requirement(line) for line in logical_lines(text)]


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
        if req.url or req.extras or len(specifiers) != 1 or specifiers[0].operator != "==" or "*" in str(req):
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


def dependency_problems(pins: list[Pin], wanted: list[Requirement]) -> list[str]:
    """Every package the requirements need (their dependencies followed through this environment's metadata, as
    `pip install --no-deps` will not) has one pin on each target and here, and here it is the installed version.
    (A target that gets another version may need other dependencies; uv's resolution covers those.)"""
    problems = []
    environments: list[dict[str, str] | None] = [None, *TARGETS]
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
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            problems.append(f"{name} (needed by {needed_by}) is not installed")
            continue
        for i in sorted(new):
            locked = [pin.version for pin in pins if pin.name == name and pin.applies(environments[i])]
            if len(locked) != 1:
                problems.append(f"{name} (needed by {needed_by}) has {len(locked)} pins {label(environments[i])}")
            elif environments[i] is None and Version(locked[0]) != Version(dist.version):
                problems.append(f"{name}: the lock pins {locked[0]}, installed is {dist.version}")
        for line in dist.requires or []:
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


def makefile_problems(makefile: str, lock: str) -> list[str]:
    """`make venv` installs the lock alone, hash-checked; `make lock` runs the command the lock's header names,
    with a pinned uv."""
    problems = []
    rule = re.search(r"^\$\(VENV\)/\.installed:(?P<prereqs>.*)\n(?P<recipe>(?:\t.*\n)+)", makefile, re.MULTILINE)
    if not rule:
        return ["no $(VENV)/.installed rule"]
    if "requirements.lock" not in rule["prereqs"].split():
        problems.append("$(VENV)/.installed does not depend on requirements.lock")
    installs = [line for line in rule["recipe"].splitlines() if "pip install" in line]
    hashed = [line for line in installs if "-r requirements.lock" in line]
    if not any("--require-hashes" in line and "--no-deps" in line for line in hashed):
        problems.append("$(VENV)/.installed does not run pip install --require-hashes --no-deps -r requirements.lock")
    upgrades_pip = re.compile(r"pip install (--quiet )?--upgrade pip\s*$")
    unhashed = [line.strip() for line in installs if line not in hashed and not upgrades_pip.search(line)]
    problems += [f"unhashed install in $(VENV)/.installed: {line}" for line in unhashed]
    command = re.search(r"^LOCK_COMMAND := (.+)$", makefile, re.MULTILINE)
    uv = re.search(r"^UV_VERSION := (\d+\.\d+\.\d+)$", makefile, re.MULTILINE)
    target = re.search(r"^lock:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    if not (command and uv and target):
        return [*problems, "no lock target with LOCK_COMMAND and an exact UV_VERSION"]
    if "uv==$(UV_VERSION)" not in target[1] or "$(LOCK_COMMAND)" not in target[1]:
        problems.append("make lock does not install uv==$(UV_VERSION) and run $(LOCK_COMMAND)")
    if f"#    {command[1]}" not in lock.splitlines()[:5]:
        problems.append(f"the lock's header does not name the command make lock runs: {command[1]}")
    return problems


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


def test_make_venv_installs_the_hash_checked_lock_and_make_lock_writes_it(lock):
    text, _, _ = lock
    assert makefile_problems(MAKEFILE.read_text(), text) == []


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
    "the ranges installed": ("makefile", lambda t: t.replace("-r requirements.lock", "-r requirements.txt", 1)),
    "a header of another command": ("makefile", lambda t: t.replace("--universal ", "", 1)),
    "a dependency missing on macOS": (
        "dependencies",
        lambda t: re.sub(r"^(cycler==\S+)", r"\1 ; sys_platform == 'linux'", t, flags=re.MULTILINE),
    ),
    "an unpinned uv": ("makefile", lambda t: t.replace("uv==$(UV_VERSION)", "uv")),
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
    else:
        assert makefile_problems(mutate(MAKEFILE.read_text()), text)
