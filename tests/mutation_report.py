"""Score per module and the survivors of the last `mutmut run` (`make mutation`).

mutmut keeps one `mutants/<source>.meta` JSON file per mutated source file with the exit code
of the test run against each mutant. A mutant is detected when the tests failed (or ran out of
time); it survives when they passed. Mutants listed in `tests/mutation-equivalents.txt` (one
name, the digest of its change and a one-line reason per line) change no behaviour and are left
out of the score.

    python -m tests.mutation_report [--min 90]

Exit 1 when any module scores below `--min`, or when an equivalence entry names a mutant that
no longer exists, that the tests now kill, or whose change is not the one the entry was written
for (mutmut numbers a function's mutants in order: a change to the function renumbers them, and
the name then means another mutant); an entry without a reason or digest is refused (the list
must not rot). mutmut runs every
mutant, listed or not, so a listed one the tests kill shows as detected.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import functools
import hashlib
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MUTANTS = ROOT / "mutants"
EQUIVALENTS = ROOT / "tests" / "mutation-equivalents.txt"

# mutmut.stats.status_by_exit_code: pytest failed (1), internal error (3), CPU-time limit hit; and SIGKILL (-9,
# mutmut's "segfault"), which its runner sends one second after a SIGXCPU the test process did not end on: a mutant
# that loops past the CPU-time limit.
DETECTED = {1, 3, 36, -24, 24, 152, 255, -9}
SURVIVED = {0}
NOT_RUN = {None, 5, 33, 34}  # not checked, no tests selected, skipped


@dataclass
class ModuleScore:
    """Outcome of the mutants of one source file."""

    path: str
    detected: int = 0
    equivalent: int = 0
    survivors: list[str] = field(default_factory=list)
    untested: list[str] = field(default_factory=list)
    other: dict[str, int] = field(default_factory=dict)

    @property
    def scored(self) -> int:
        return self.detected + len(self.survivors) + len(self.untested) + sum(self.other.values())

    @property
    def score(self) -> float:
        return 100.0 if self.scored == 0 else 100.0 * self.detected / self.scored


def read_equivalents(path: Path = EQUIVALENTS) -> dict[str, tuple[str, str]]:
    """`name @digest  # reason` lines (``digest``: ``change_digest`` of the mutant the entry is about), as name ->
    (digest, reason); blank lines and lines starting with `#` are comments."""
    equivalents: dict[str, tuple[str, str]] = {}
    if not path.exists():
        return equivalents
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        named, _, reason = line.partition("#")
        name, _, digest = named.strip().partition(" @")
        if not reason.strip():
            raise SystemExit(f"{path.name}:{number}: {name.strip()} has no reason")
        if not digest.strip():
            raise SystemExit(f"{path.name}:{number}: {name.strip()} has no @digest of its change (--digest prints it)")
        equivalents[name.strip()] = (digest.strip(), reason.strip())
    return equivalents


def change_digest(name: str, mutants_dir: Path = MUTANTS) -> str:
    """The first 8 hex digits of the sha256 of the lines a mutant changes (``mutant_diff``): what an equivalence entry
    records, so that a renumbered mutant no longer matches it."""
    return hashlib.sha256(mutant_diff(name, mutants_dir).encode()).hexdigest()[:8]


def scores(mutants_dir: Path = MUTANTS, equivalents: Mapping[str, object] | None = None) -> list[ModuleScore]:
    """One ModuleScore per `.meta` file under `mutants_dir`, sorted by path."""
    equivalents = equivalents or {}
    result = []
    for meta in sorted(mutants_dir.rglob("*.py.meta")):
        data = json.loads(meta.read_text())
        module = ModuleScore(str(meta.relative_to(mutants_dir)).removesuffix(".meta"))
        for name, code in sorted(data.get("exit_code_by_key", {}).items()):
            if name in equivalents:
                module.equivalent += 1
            elif code in DETECTED:
                module.detected += 1
            elif code in SURVIVED:
                module.survivors.append(name)
            elif code in NOT_RUN:
                module.untested.append(name)
            else:
                module.other[str(code)] = module.other.get(str(code), 0) + 1
        result.append(module)
    return result


@functools.cache
def _functions(path: Path) -> dict[str, str]:
    lines = path.read_text().splitlines()
    return {
        node.name: "\n".join(lines[node.lineno - 1 : node.end_lineno])
        for node in ast.walk(ast.parse("\n".join(lines)))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }


def mutant_diff(name: str, mutants_dir: Path = MUTANTS) -> str:
    """The lines a mutant changes (``-`` original, ``+`` mutant), read from mutmut's mutated source."""
    qualified, number = name.rsplit("__mutmut_", 1)
    module, function = qualified.rsplit(".", 1)
    bodies = _functions(mutants_dir / (module.replace(".", "/") + ".py"))
    original = bodies.get(f"{function}__mutmut_orig", "").splitlines()[1:]
    mutant = bodies.get(f"{function}__mutmut_{number}", "").splitlines()[1:]
    changed = difflib.unified_diff(original, mutant, lineterm="", n=0)
    return "\n".join(line for line in changed if line[:1] in "-+" and line[:3] not in ("---", "+++"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--min", type=float, default=90.0, help="lowest acceptable score per module")
    parser.add_argument("--diff", action="store_true", help="show the lines each survivor changes")
    parser.add_argument("--survivors", action="store_true", help="only list the survivors' names (to test again)")
    parser.add_argument("--digest", nargs="+", metavar="MUTANT", help="print each mutant's entry name with its @digest")
    args = parser.parse_args(argv)
    if not MUTANTS.exists():
        print("no mutants/ directory: run `make mutation` first", file=sys.stderr)
        return 1
    if args.digest:
        print("\n".join(f"{name} @{change_digest(name, MUTANTS)}" for name in args.digest))
        return 0
    equivalents = read_equivalents(EQUIVALENTS)
    modules = scores(MUTANTS, equivalents)
    if args.survivors:
        print("\n".join(name for module in modules for name in module.survivors + module.untested))
        return 0
    codes = {
        name: code
        for meta in MUTANTS.rglob("*.py.meta")
        for name, code in json.loads(meta.read_text())["exit_code_by_key"].items()
    }
    stale = sorted(set(equivalents) - set(codes))
    moved = sorted(n for n, (digest, _) in equivalents.items() if n in codes and change_digest(n, MUTANTS) != digest)
    killed = sorted(name for name in equivalents if codes.get(name) in DETECTED)  # a test tells it apart after all
    failing = False
    print(f"{'module':44} {'score':>7} {'detected':>9} {'survived':>9} {'no test':>8} {'equiv.':>7}")
    for module in modules:
        low = module.score < args.min
        failing |= low
        print(
            f"{module.path:44} {module.score:6.1f}% {module.detected:9} {len(module.survivors):9}"
            f" {len(module.untested):8} {module.equivalent:7}{'  < ' + str(args.min) if low else ''}"
        )
    for module in modules:
        for name in module.survivors + module.untested:
            print(f"  {'survived' if name in module.survivors else 'no test '}  {name}")
            if args.diff:
                print("    " + mutant_diff(name).replace("\n", "\n    "))
    for name in stale:
        print(f"  stale equivalence entry (no such mutant): {name}")
    for name in killed:
        print(f"  equivalence entry the tests kill (not equivalent: remove it): {name}")
    for name in moved:
        print(f"  equivalence entry whose mutant is another change now (renumbered: find it with --diff): {name}")
    return 1 if failing or stale or killed or moved else 0


if __name__ == "__main__":
    sys.exit(main())
