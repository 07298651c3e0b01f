"""Each dependency range is written once and every environment installs a hashed lock (docs/testing.md
"Dependencies").

The ranges: requirements.txt (the program's, what Pulumi's pip toolchain reads), pyproject.toml's [project]
dependencies (the pure layer's PyYAML) and its dependency groups (dev: the test and lint tools and the policy SDK;
slow: the slow tier's torch and transformers; installer: uv and pip; policy: the pack's SDK). No package is named in
two of them, and no other requirements file is tracked. Two locks, both written by `make lock` with the uv the lock
pins: requirements.lock pins every package of all of them together, with sha256 hashes, once on each platform users
run (Linux and macOS, Python 3.11-3.13; torch's CPU build for Linux x86_64 and Python 3.11 alone), at versions the
ranges allow and, for the program and the test tools, the versions this environment has installed (a stale lock
fails here); policy/requirements.lock pins the pack's group at requirements.lock's versions, for pip. Each venv
installs the lock's entries its sources need (tools/lock_subset.py), --require-hashes --no-deps."""

from __future__ import annotations

import functools
import importlib.metadata as metadata
import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tools import lock_subset

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements.lock"
POLICY_LOCK = ROOT / "policy" / "requirements.lock"
REQUIREMENTS = ROOT / "requirements.txt"
PYPROJECT = ROOT / "pyproject.toml"
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
"""Where the slow tier runs (CI: Linux x86_64, Python 3.11): torch's CPU build is locked for there alone."""
PREVIEW_TARGET = next(
    t for t in TARGETS if (t["python_version"], t["sys_platform"], t["platform_machine"]) == ("3.12", "linux", "x86_64")
)
"""The PR workflow's venv of the base's pack: Ubuntu 24.04's python3 (3.12) on GitHub's x86_64 runners."""


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
    """A requirements file's requirements (no options, no includes: requirements.txt has neither)."""
    return [Requirement(line) for line in logical_lines(text)]


def pyproject() -> dict:
    return tomllib.loads(PYPROJECT.read_text())


def group(groups: dict[str, list], name: str) -> list[Requirement]:
    """A dependency group's requirements, the groups it includes (``{include-group = ...}``, PEP 735) followed."""
    found: list[Requirement] = []
    for item in groups[name]:
        found += group(groups, item["include-group"]) if isinstance(item, dict) else [Requirement(item)]
    return found


def sources(data: dict, *groups: str) -> list[Requirement]:
    """What a venv of the program needs: requirements.txt, the project's dependencies, and the groups named."""
    wanted = requirements(REQUIREMENTS.read_text()) + [Requirement(d) for d in data["project"]["dependencies"]]
    for name in groups:
        wanted += group(data["dependency-groups"], name)
    return wanted


def one_source_problems(requirements_txt: str, data: dict) -> list[str]:
    """No package's range is written in two of requirements.txt, [project] dependencies and the groups' own entries
    (a group's include is not a second mention; a name without a range, [project]'s PyYAML, pins nothing)."""
    places: dict[str, list[str]] = {}
    lists = {"requirements.txt": [str(r) for r in requirements(requirements_txt)]}
    lists["[project] dependencies"] = data["project"]["dependencies"]
    for name, items in data.get("dependency-groups", {}).items():
        lists[f"group {name}"] = [item for item in items if isinstance(item, str)]
    for where, items in lists.items():
        for item in items:
            requirement = Requirement(item)
            if requirement.specifier or requirement.url:
                places.setdefault(canonicalize_name(requirement.name), []).append(where)
    return [f"{name}'s range is in {' and '.join(where)}" for name, where in sorted(places.items()) if len(where) > 1]


def parse_lock(text: str) -> tuple[list[Pin], list[str]]:
    """The lock's pins and what is wrong with its entries: each is `name==version [; marker]` followed by
    at least one sha256 hash (pip's --require-hashes then refuses any file whose hash is not listed). Each text
    parsed once per process (each caller gets its own lists)."""
    pins, problems = _parsed_lock(text)
    return list(pins), list(problems)


@functools.lru_cache(maxsize=32)
def _parsed_lock(text: str) -> tuple[tuple[Pin, ...], tuple[str, ...]]:
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
    return tuple(pins), tuple(problems)


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
    todo = [(req, "the ranges", set(range(len(environments)))) for req in wanted]
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
        dist = installed(name)
        if dist is None and 0 in new:
            problems.append(f"{name} (needed by {needed_by}) is not installed")
            continue
        # dist is None here for a package needed on another Python only (libcst's pyyaml-ft on 3.13): its pins are
        # checked
        for i in sorted(new):
            locked = [pin.version for pin in pins if pin.name == name and pin.applies(environments[i])]
            if len(locked) != 1:
                problems.append(f"{name} (needed by {needed_by}) has {len(locked)} pins {label(environments[i])}")
            elif environments[i] is None and dist and Version(locked[0]) != Version(dist.version):
                problems.append(f"{name}: the lock pins {locked[0]}, installed is {dist.version}")
        for dep in dist.requires if dist else ():
            applies = {
                i
                for i in new
                if dep.marker is None or any(dep.holds(environments[i], extra) for extra in ["", *extras])
            }
            if applies:
                todo.append((dep.unmarked, name, applies))
    return sorted(set(problems))


@dataclass(frozen=True)
class Installed:
    """An installed distribution's version and requirements, as ``importlib.metadata`` reads them."""

    version: str
    requires: tuple[Dependency, ...]


class Dependency:
    """A requirement of an installed distribution: its marker, evaluated once per environment and extra, and the
    requirement without it."""

    def __init__(self, line: str) -> None:
        requirement = Requirement(line)
        self.marker = requirement.marker
        self.unmarked = Requirement(str(requirement).split(";")[0])
        self._held: dict[tuple[int, str], tuple[dict[str, str] | None, bool]] = {}

    def holds(self, target: dict[str, str] | None, extra: str) -> bool:
        assert self.marker is not None
        key = (id(target), extra)
        if key not in self._held or self._held[key][0] is not target:
            self._held[key] = (target, self.marker.evaluate(_env(target, extra)))
        return self._held[key][1]


@functools.cache
def installed(name: str) -> Installed | None:
    """The installed distribution ``name``, its metadata read once per process (None: not installed)."""
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return None
    return Installed(dist.version, tuple(Dependency(line) for line in dist.requires or []))


def _env(target: dict[str, str] | None, extra: str = "") -> dict[str, str]:
    return {**(target or {}), "extra": extra}


PIP_INSTALL_LINE = re.compile(r"\bpip (--python \S+ )?install\b")
"""A line that installs with pip or uv (``pip install``, ``uv pip install``, ``pip --python <venv> install``)."""

# Each install rule of the Makefile and the sources whose entries of requirements.lock it installs.
RUNTIME = ["requirements.txt", "pyproject.toml"]
INSTALLS = {
    "$(UV)": ["pyproject.toml:installer"],
    "$(VENV)/.installed": RUNTIME,
    "$(VENV)/.installed-dev": [*RUNTIME, "pyproject.toml:dev"],
    "$(VENV)/.installed-slow": [*RUNTIME, "pyproject.toml:dev", "pyproject.toml:slow"],
}
# Each lock and the Makefile variable holding the command `make lock` makes it with (its header).
LOCK_COMMANDS = {"requirements.lock": "LOCK_COMMAND", "policy/requirements.lock": "POLICY_LOCK_COMMAND"}


def expand(makefile: str, text: str) -> str:
    """``text`` with the Makefile's variables (``$(NAME)``) replaced by their definitions, as make runs it."""
    definitions = dict(re.findall(r"^([A-Z_]+) *[:?]?= *(.*)$", makefile, re.MULTILINE))
    for _ in range(10):
        text, before = re.sub(r"\$\(([A-Z_]+)\)", lambda m: definitions.get(m[1], m[0]), text), text
        if text == before:
            break
    return text


def rule(makefile: str, target: str) -> re.Match[str] | None:
    return re.search(rf"^{re.escape(target)}:(?P<prereqs>.*)\n(?P<recipe>(?:\t.*\n)+)", makefile, re.MULTILINE)


def own(line: str) -> list[str]:
    """``[line]`` when it installs this checkout itself (the console script's project) with nothing fetched or
    resolved: no index, no dependencies, the venv's own build backend."""
    words = line.split()
    ours = words[-2:] == ["-e", "."] and {"--no-deps", "--no-index", "--no-build-isolation"} <= set(words)
    return [line] if ours else []


def makefile_problems(makefile: str, locks: dict[str, str], data: dict) -> list[str]:
    """Each install rule writes the lock's entries its sources need (tools/lock_subset.py) and installs that file
    alone, hash-checked and without resolving; the pack's venv installs its lock so; `make lock` runs, with the uv
    the lock pins, the command each lock's header names, over every group."""
    problems = []
    for target, wanted in INSTALLS.items():
        found = rule(makefile, target)
        if not found:
            problems.append(f"no {target} rule")
            continue
        if "requirements.lock" not in found["prereqs"].split():
            problems.append(f"{target} does not depend on requirements.lock")
        recipe = expand(makefile, found["recipe"])
        subset = re.search(r"tools/lock_subset\.py requirements\.lock (?P<sources>[^>]*)> (?P<file>\S+)", recipe)
        if not subset or subset["sources"].split() != wanted:
            problems.append(f"{target} does not select the entries of {' '.join(wanted)}")
            continue
        installs = [line.strip() for line in recipe.splitlines() if PIP_INSTALL_LINE.search(line)]
        hashed = [line for line in installs if re.search(rf"\s-r {re.escape(subset['file'])}(\s|;|$)", line)]
        if not hashed or not all("--require-hashes" in line and "--no-deps" in line for line in hashed):
            problems.append(f"{target} does not install --require-hashes --no-deps -r {subset['file']}")
        problems += [f"unhashed install in {target}: {line}" for line in installs if line not in hashed + own(line)]
    pack = rule(makefile, "$(POLICY_VENV)/.installed")
    if not pack or "--require-hashes --no-deps --python policy/venv/bin/python -r policy/requirements.lock" not in (
        expand(makefile, pack["recipe"])
    ):
        problems.append("make policy-venv does not install --require-hashes --no-deps -r policy/requirements.lock")
    lock_rule = rule(makefile, "lock")
    if not lock_rule or lock_rule["prereqs"].split() != ["$(UV)"]:
        return [*problems, "no lock target run by the uv the lock pins ($(UV))"]
    for lock, variable in LOCK_COMMANDS.items():
        command = re.search(rf"^{variable} := (uv pip compile .+)$", makefile, re.MULTILINE)
        run = re.search(
            rf'^\tPATH="\$\(CURDIR\)/\$\(VENV\)/bin:\$\$PATH" .*\$\({variable}\)$', lock_rule["recipe"], re.M
        )
        if not command or not run:
            problems.append(f"make lock does not run $({variable}) with $(VENV)/bin/uv")
        elif f"#    {command[1]}" not in locks[lock].splitlines()[:5]:
            problems.append(f"the header of {lock} does not name the command make lock runs: {command[1]}")
    commands = {
        v: (re.search(rf"^{v} := (.+)$", makefile, re.MULTILINE) or ["", ""])[1] for v in LOCK_COMMANDS.values()
    }
    groups = data["dependency-groups"]
    named = set(re.findall(r"--group (\S+)", commands["LOCK_COMMAND"]))
    included = {item["include-group"] for name in named for item in groups.get(name, []) if isinstance(item, dict)}
    problems += [
        f"requirements.lock is made without the group {name}" for name in sorted(set(groups) - named - included)
    ]
    if "--group policy --constraint requirements.lock " not in commands["POLICY_LOCK_COMMAND"]:
        problems.append("policy/requirements.lock is not made from the group policy at requirements.lock's versions")
    return problems


def agreement_problems(lock: list[Pin], pack: list[Pin]) -> list[str]:
    """The pack's lock pins each of its packages, on every target, as requirements.lock does."""
    problems = []
    for target in TARGETS:
        have = {(pin.name, pin.version) for pin in lock if pin.applies(target)}
        problems += [
            f"policy/requirements.lock pins {pin.name}=={pin.version} {label(target)}"
            for pin in pack
            if pin.applies(target) and (pin.name, pin.version) not in have
        ]
    return sorted(set(problems))


def subset_problems(lock: str, selected: list[str], wanted: list[Requirement]) -> list[str]:
    """The entries tools/lock_subset.py selects for ``selected`` pin every package ``wanted`` needs on each target
    (and here, at the installed version): what `--no-deps` installs is whole."""
    entries, problems = lock_subset.parse(lock)
    chosen = "".join(entry.text + "\n" for entry in lock_subset.select(entries, selected))
    return problems + dependency_problems(parse_lock(chosen)[0], wanted)


def locks() -> dict[str, str]:
    return {name: (ROOT / name).read_text() for name in LOCK_COMMANDS}


@pytest.fixture(scope="module")
def lock() -> tuple[str, list[Pin]]:
    text = LOCK.read_text()
    return text, parse_lock(text)[0]


def test_each_range_is_written_once_and_no_other_requirements_file_is_tracked():
    assert one_source_problems(REQUIREMENTS.read_text(), pyproject()) == []
    if not (ROOT / ".git").exists():
        pytest.skip("the tracked files are git's")
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    files = [f for f in tracked if f.endswith(".lock") or re.search(r"(^|/)requirements[^/]*\.(txt|in)$", f)]
    assert sorted(files) == ["policy/requirements.lock", "requirements.lock", "requirements.txt"]


def test_every_lock_entry_is_an_exact_pin_with_sha256_hashes_once(lock):
    text, pins = lock
    assert parse_lock(text)[1] == []
    assert len(pins) > 100
    assert parse_lock(POLICY_LOCK.read_text())[1] == []


def test_every_range_is_pinned_at_a_version_it_allows_on_every_target(lock):
    _, pins = lock
    data = pyproject()
    assert requirement_problems(pins, sources(data, *data["dependency-groups"])) == []


def test_the_lock_pins_every_dependency_and_what_this_environment_has_installed(lock):
    """A lock regenerated without reinstalling, or a venv changed by hand (`pip install -U`, `pulumi install`,
    which upgrades setuptools), fails here: run `make dev-venv` (or `make lock` after editing a range)."""
    _, pins = lock
    assert dependency_problems(pins, sources(pyproject(), "dev")) == []


def test_each_venv_installs_the_entries_its_sources_need_and_no_more_than_its_groups(lock):
    """`make venv` installs the program's entries (no test tool), `make dev-venv` the test tools' too (no torch):
    each part pins every dependency of what it installs, on every target."""
    text, _ = lock
    data = pyproject()
    assert subset_problems(text, RUNTIME, sources(data)) == []
    assert subset_problems(text, [*RUNTIME, "pyproject.toml:dev"], sources(data, "dev")) == []
    entries, _ = lock_subset.parse(text)
    runtime = {e.name for e in lock_subset.select(entries, RUNTIME)}
    dev = {e.name for e in lock_subset.select(entries, [*RUNTIME, "pyproject.toml:dev"])}
    slow = {e.name for e in lock_subset.select(entries, [*RUNTIME, "pyproject.toml:dev", "pyproject.toml:slow"])}
    installer = {e.name for e in lock_subset.select(entries, ["pyproject.toml:installer"])}
    assert {"pulumi-gcp", "pyyaml"} <= runtime and not {"pytest", "mypy", "pulumi-policy", "torch", "uv"} & runtime
    assert runtime < dev and {"pytest", "pulumi-policy"} <= dev and not {"torch", "transformers", "uv"} & dev
    assert dev < slow and {"torch", "transformers", "math-verify"} <= slow
    assert installer == {"uv", "pip"}


def test_make_installs_the_hash_checked_lock_and_make_lock_writes_both():
    assert makefile_problems(MAKEFILE.read_text(), locks(), pyproject()) == []


def test_the_pack_lock_pins_its_group_at_the_versions_of_requirements_lock_for_pip(lock):
    """policy/requirements.lock is what the PR workflow's pip (Ubuntu 24.04's python3, 3.12) and `make policy-venv`
    install with --require-hashes --no-deps: the group `policy` and the project's dependencies, every dependency
    pinned on each target, the preview's among them, as requirements.lock pins it; core/ itself is the checkout's
    (no entry: it has no file to hash); setuptools builds it (--no-build-isolation)."""
    _, pins = lock
    pack = parse_lock(POLICY_LOCK.read_text())[0]
    assert agreement_problems(pins, pack) == []
    data = pyproject()
    wanted = [Requirement(d) for d in data["project"]["dependencies"]] + group(data["dependency-groups"], "policy")
    assert dependency_problems(pack, wanted) == []
    names = {pin.name for pin in pack if pin.applies(PREVIEW_TARGET)}
    assert {"pulumi-policy", "pulumi", "pyyaml", "setuptools"} <= names and "tpu-rl-core" not in names
    setuptools = next(pin for pin in pack if pin.name == "setuptools")
    assert Version(setuptools.version) >= Version("70"), "tpu-rl-core's build-system requires setuptools>=70"


def test_the_slow_group_locks_torchs_cpu_build_for_where_the_slow_tier_runs(lock):
    """torch's CPU build (this machine's wheel; PyTorch's page of wheels elsewhere), one file, for Linux x86_64 and
    CPython 3.11 alone (PyPI's Linux torch is a CUDA build of several GB)."""
    text, pins = lock
    (torch,) = [pin for pin in pins if pin.name == "torch"]
    assert torch.version == "2.13.0+cpu"
    assert [t for t in TARGETS if torch.applies(t)] == [SLOW_TARGET]
    entry = re.search(r"^torch==\S+[^\n]*((?:\s*\\\s*--hash=sha256:[0-9a-f]{64})+)", text, re.MULTILINE)
    assert entry and entry[1].count("--hash") == 1, "one file: the CPU wheel for Linux x86_64 and CPython 3.11"


@pytest.mark.slow
def test_the_lock_pins_what_the_slow_tier_has_installed(lock):
    """`make test-slow` installs the slow group first: every dependency of torch and transformers is pinned, at the
    installed version (without the slow tier's packages, as in `make test`, they are not installed: skipped)."""
    pytest.importorskip("transformers", reason="the slow tier's packages are not installed (make test-slow)")
    _, pins = lock
    problems = dependency_problems(pins, sources(pyproject(), "dev", "slow"), [SLOW_TARGET])
    if (ROOT / ".venv" / ".slow-without-torch").exists():  # the Makefile's install without torch, said so
        problems = [p for p in problems if p != "torch (needed by the ranges) is not installed"]
    assert problems == []


def test_uv_and_pip_are_the_installer_group_pinned_with_the_hash_of_each_of_their_files(lock):
    text, pins = lock
    installer = group(pyproject()["dependency-groups"], "installer")
    assert sorted(canonicalize_name(r.name) for r in installer) == ["pip", "uv"]
    assert all(len(r.specifier) == 1 and next(iter(r.specifier)).operator == "==" for r in installer)
    entries, _ = lock_subset.parse(text)
    chosen = "".join(e.text + "\n" for e in lock_subset.select(entries, ["pyproject.toml:installer"]))
    assert chosen.count("--hash=sha256:") > 10, "a wheel for every platform uv ships"


MUTANTS = {
    "a hash shortened": ("lock", lambda t: re.sub(r"(--hash=sha256:[0-9a-f]{63})[0-9a-f]", r"\1", t, count=1)),
    "an md5 hash": ("lock", lambda t: t.replace("--hash=sha256:", "--hash=md5:", 1)),
    "an entry without hashes": ("lock", lambda t: t + "\nsix==1.17.0\n"),
    "a range, not a pin": ("lock", lambda t: t.replace("==", ">=", 1)),
    "an entry twice": ("lock", lambda t: t + "\n" + logical_lines(t)[0] + "\n"),
    "an option line": ("lock", lambda t: "--index-url https://example.invalid/simple\n" + t),
    "a requirement not locked": ("requirements", lambda t: t + "\nsix>=1.16\n"),
    "a range the pin is outside of": ("requirements", lambda t: t + "\npulumi-gcp>=999\n"),
    "a range written twice": ("one-source", lambda t: t + "\npulumi-policy>=1.21,<2\n"),
    "a range in a group written again": ("one-source", lambda t: t + "\nmypy>=2.4\n"),
    "the project's dependency given a range again": (
        "project",
        lambda d: {**d, "project": {**d["project"], "dependencies": ["PyYAML>=6.0,<7"]}},
    ),
    "a stale pin": ("dependencies", lambda t: re.sub(r"^pulumi==\S+", "pulumi==0.0.1", t, flags=re.MULTILINE)),
    "a dependency missing on macOS": (
        "dependencies",
        lambda t: re.sub(r"^(cycler==\S+)", r"\1 ; sys_platform == 'linux'", t, flags=re.MULTILINE),
    ),
    "an entry the program's venv would not install": (
        "subset",
        lambda t: re.sub(r"^(pulumi-gcp==[^#]*# via) -r requirements.txt", r"\1 pytest", t, flags=re.M | re.S),
    ),
    "an unhashed install": ("makefile", lambda t: t.replace("--require-hashes ", "")),
    "a resolving install": ("makefile", lambda t: t.replace("--no-deps\n", "\n", 1)),
    "the ranges installed": ("makefile", lambda t: t.replace("-r $(VENV)/runtime.lock", "-r requirements.txt", 1)),
    "the project's own install from the index": ("makefile", lambda t: t.replace("--no-index --config", "--config")),
    "uv from the index unhashed": ("makefile", lambda t: t.replace("-r $(VENV)/installer.lock", "uv pip", 1)),
    "the dev venv without its group": (
        "makefile",
        lambda t: t.replace(" pyproject.toml:dev > $(VENV)/dev", " > $(VENV)/dev"),
    ),
    "the pack's venv from its ranges": (
        "makefile",
        lambda t: t.replace("-r policy/requirements.lock", "--group policy", 1),
    ),
    "a lock made without the slow group": ("makefile", lambda t: t.replace("--group slow ", "")),
    "a pack lock not at the lock's versions": ("makefile", lambda t: t.replace("--constraint requirements.lock ", "")),
    "a header of another command": ("makefile", lambda t: t.replace("--universal ", "", 1)),
    "make lock with whatever uv is on the PATH": (
        "makefile",
        lambda t: t.replace('\tPATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(POLICY', "\t$(POLICY"),
    ),
    "a pack lock with another pin": (
        "pack-lock",
        lambda t: re.sub(r"^pulumi==\S+", "pulumi==3.999.0", t, flags=re.MULTILINE),
    ),
}


@pytest.mark.parametrize("mutant", sorted(MUTANTS))
def test_each_check_fails_on_a_broken_lock_range_or_makefile(lock, mutant):
    """The checks above are not vacuous: each catches its mistake in a copy of the files."""
    text, pins = lock
    where, mutate = MUTANTS[mutant]
    data = pyproject()
    if where == "lock":
        assert parse_lock(mutate(text))[1]
    elif where == "requirements":
        assert requirement_problems(pins, requirements(mutate(REQUIREMENTS.read_text())))
    elif where == "one-source":
        assert one_source_problems(mutate(REQUIREMENTS.read_text()), data)
    elif where == "project":
        assert one_source_problems(REQUIREMENTS.read_text(), mutate(data))
    elif where == "dependencies":
        assert dependency_problems(parse_lock(mutate(text))[0], sources(data))
    elif where == "subset":
        assert mutate(text) != text
        assert subset_problems(mutate(text), RUNTIME, sources(data))
    elif where == "pack-lock":
        assert agreement_problems(pins, parse_lock(mutate(POLICY_LOCK.read_text()))[0])
    else:
        assert makefile_problems(mutate(MAKEFILE.read_text()), locks(), data)


def test_lock_subset_follows_the_via_notes_from_the_sources_through_the_packages(tmp_path, capsys):
    """A package needed by a selected one is selected (one parent on the `# via` line, or one a line after it), one
    only another source needs is not, and each entry is printed as the lock writes it, its marker and hashes."""
    digest = "--hash=sha256:" + "a" * 64
    lock = tmp_path / "requirements.lock"
    lock.write_text(
        "# This file was autogenerated by uv via the following command:\n"
        f"a==1 \\\n    {digest}\n    # via -r requirements.txt\n"
        f"viable==2 ; sys_platform == 'linux' \\\n    {digest}\n    # via a\n"
        f"b==3 \\\n    {digest}\n    # via\n    #   viable\n    #   tpu-rl-core (pyproject.toml:dev)\n"
        f"c==4 \\\n    {digest}\n    # via tpu-rl-core (pyproject.toml:dev)\n"
    )
    assert lock_subset.main([str(lock), "requirements.txt"]) == 0
    printed = capsys.readouterr().out
    assert re.findall(r"^\S+==\S+", printed, re.MULTILINE) == ["a==1", "viable==2", "b==3"]
    assert f"viable==2 ; sys_platform == 'linux' \\\n    {digest}\n" in printed and "# via" not in printed
    assert lock_subset.main([str(lock), "pyproject.toml:dev"]) == 0
    assert re.findall(r"^\S+==\S+", capsys.readouterr().out, re.MULTILINE) == ["b==3", "c==4"]


def test_lock_subset_names_every_problem_at_once_and_exits_2(tmp_path, capsys):
    """A source no entry names and an entry without its `# via` (a lock not written by `make lock`): one line each."""
    bad = tmp_path / "requirements.lock"
    bad.write_text("six==1.17.0 \\\n    --hash=sha256:" + "a" * 64 + "\n")
    assert lock_subset.main([str(bad), "requirements.txt", "pyproject.toml:nope"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3 and "six: no '# via'" in err[0] and "pyproject.toml:nope" in err[2]
    assert lock_subset.main([str(tmp_path / "missing.lock"), "requirements.txt"]) == 2


@pytest.mark.slow  # two real installs of uv and pip (about 15 s)
@pytest.mark.parametrize("python_pip", ["has --python", "lacks --python"])
def test_the_installer_rule_makes_a_venv_with_the_pinned_uv_and_pip_either_way(tmp_path, python_pip):
    """`make`'s first rule, as a new user's `make up` runs it: python3's own pip installs the lock's uv and pip (the
    group `installer`) into a venv made without one; a python3 whose pip lacks `--python` (pip < 22.3, or none) gets
    the venv's bundled pip, which installs the same entries. Either way the venv has the lock's uv and pip, and
    nothing else was resolved."""
    if not shutil.which("make"):
        pytest.skip("make is not installed")
    for name in ("Makefile", "requirements.lock", "tools/lock_subset.py"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
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
    pins = {r.name: str(r.specifier).removeprefix("==") for r in group(pyproject()["dependency-groups"], "installer")}
    uv = subprocess.run([tmp_path / ".venv/bin/uv", "--version"], capture_output=True, text=True, check=True)
    assert uv.stdout.split()[1] == pins["uv"]
    pip = subprocess.run(
        [tmp_path / ".venv/bin/python", "-m", "pip", "--version"], capture_output=True, text=True, check=True
    )
    assert pip.stdout.split()[1] == pins["pip"], "Pulumi's pip toolchain lists the venv's packages with it"
