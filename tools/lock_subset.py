"""The entries of requirements.lock that one environment installs (docs/testing.md "Dependencies").

requirements.lock pins, together and with the sha256 of every file, the packages of the program
(requirements.txt), of the pure layer (pyproject.toml's [project] dependencies) and of each dependency group
(pyproject.toml's [dependency-groups]). uv's lock says after each entry what needs it (``# via``): a package, or
one of those sources (``-r requirements.txt``, ``tpu-rl-core (pyproject.toml)``, ``tpu-rl-core
(pyproject.toml:dev)``). An environment installs the entries its sources need, directly or through another
selected entry, as the lock writes them (hashes included; each entry's marker still decides on which platform it
applies), with ``--require-hashes --no-deps``: nothing is resolved, nothing read but the lock::

    python3 tools/lock_subset.py requirements.lock requirements.txt pyproject.toml pyproject.toml:dev

prints what `make dev-venv` installs. A source no entry names, or an entry without its ``# via`` (a lock not
written by `make lock`), exits 2 with every problem, one line each. Standard library only: it runs before the
venv has anything (the installers, uv and pip, are the group ``pyproject.toml:installer``)."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

SOURCE = re.compile(r"^(?:-r (?P<file>\S+)|\S+ \((?P<project>[^)]+)\))$")
"""A source as uv's annotation names it: ``-r requirements.txt``, ``tpu-rl-core (pyproject.toml:dev)``."""


@dataclass(frozen=True)
class Entry:
    name: str
    text: str  # the entry as the lock writes it: the pin, its marker, its hashes
    needed_by: tuple[str, ...]  # packages (canonical names) and sources (requirements.txt, pyproject.toml:dev)


def canonical(name: str) -> str:
    """A distribution name as PEP 503 compares them (``PyYAML`` and ``pyyaml``, ``a_b`` and ``a-b``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse(lock: str) -> tuple[list[Entry], list[str]]:
    """The lock's entries and what is wrong with them (an entry no ``# via`` follows)."""
    entries: list[Entry] = []
    problems: list[str] = []
    blocks: list[list[str]] = []
    for line in lock.splitlines():
        if re.match(r"[A-Za-z0-9]", line):
            blocks.append([line])
        elif blocks and line.startswith(" "):
            blocks[-1].append(line)
    for block in blocks:
        name = canonical(re.split(r"[=<>!~ ;\\]", block[0], maxsplit=1)[0])
        pin = [line.rstrip() for line in block if not line.lstrip().startswith("#")]
        notes = [line.strip().lstrip("#").strip() for line in block if line.lstrip().startswith("#")]
        if not notes or notes[0].split(" ")[0] != "via":
            problems.append(f"{name}: no '# via' after its entry (a lock written by `make lock` has one)")
            notes = ["via"]
        # `# via parent`, or `# via` and a parent a line (`#   parent`)
        parents = [note for note in [notes[0].removeprefix("via").strip(), *notes[1:]] if note]
        needed_by = []
        for parent in parents:
            source = SOURCE.match(parent)
            needed_by.append((source["file"] or source["project"]) if source else canonical(parent))
        entries.append(Entry(name, "\n".join(pin), tuple(needed_by)))
    return entries, problems


def select(entries: list[Entry], sources: list[str]) -> list[Entry]:
    """The entries the sources need, directly or through another selected entry, in the lock's order."""
    chosen = set(sources)
    while True:
        more = {e.name for e in entries if e.name not in chosen and chosen.intersection(e.needed_by)}
        if not more:
            return [e for e in entries if e.name in chosen]
        chosen |= more


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: lock_subset.py LOCK SOURCE... (requirements.txt, pyproject.toml, pyproject.toml:GROUP)")
        return 2
    path, sources = Path(argv[0]), argv[1:]
    try:
        entries, problems = parse(path.read_text())
    except OSError as exc:
        print(f"error: cannot read {path}: {exc.strerror}", file=sys.stderr)
        return 2
    named = {parent for entry in entries for parent in entry.needed_by}
    problems += [
        f"no entry of {path} is needed by {source}: run `make lock`" for source in sources if source not in named
    ]
    if problems:
        print("\n".join(f"error: {path}: {problem}" for problem in problems), file=sys.stderr)
        return 2
    sys.stdout.write("".join(entry.text + "\n" for entry in select(entries, sources)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
