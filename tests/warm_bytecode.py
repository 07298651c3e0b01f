"""The bytecode of what the fast tier imports, compiled once on both cores before its two halves start.

A fresh clone's venv has no bytecode (uv compiles nothing unless told, and compiling the whole venv would cost
some 50 s of CPU for 13,000 files the tests never import). Left to the tests, each half (``tests/fast_tier.py``)
and each subprocess a test starts compiles the same modules at the same time until one of them has written the
``.pyc``. Compiled here, from the list of modules a fast-tier run imports
(``tests/data/bytecode.txt``, paths under site-packages, longest first so the two shares end together), it is
some 10 s of CPU, half of it on each core, and nothing already compiled is compiled again.

The test modules are pytest's to read (``test_*.py``, ``conftest.py``): their plain bytecode is never used, so they
are rewritten and cached as pytest reads them (``tests.assert_cache``) in the same two processes, not compiled; each
half then finds its test modules current.

``python -m tests.warm_bytecode``: compile (what ``make test`` runs first). ``--write``: rewrite the list from the
``.pyc`` files the venv holds after a run of the fast tier that started from none (``make bytecode-list``). A
listed module the venv lacks (after a lock change) is skipped; the list only saves time, and ``make test``'s
timing line shows when it has grown stale.
"""

from __future__ import annotations

import compileall
import sys
import sysconfig
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from tests import assert_cache

ROOT = Path(__file__).resolve().parent.parent
LIST = ROOT / "tests" / "data" / "bytecode.txt"
SITE = Path(sysconfig.get_paths()["purelib"])
WORKERS = 2
"""The two cores `make test` has."""
OWN = ("core", "infra", "program", "tools", "workloads", "policy/tpu_rl_policies", "tests")
"""The project's own packages: compiled whole (a few hundred small files)."""


REWRITE_COST = 10
"""How much more a byte of a test module costs to rewrite than a byte of a module to compile (4.9 s and 0.5 s of CPU
for the suite's 2.9 MB): what the shares are weighed by."""


def test_module(path: Path) -> bool:
    """Whether pytest rewrites ``path`` (its ``python_files``, ``test_*.py``, and ``conftest.py``)."""
    return path.parent.name == "tests" and (path.name.startswith("test_") or path.name == "conftest.py")


def _warm(paths: list[str]) -> bool:
    for path in map(Path, paths):
        if test_module(path):
            assert_cache.write(path)
    return all(compileall.compile_file(p, quiet=2) for p in paths if not test_module(Path(p)))


def _cost(path: Path) -> int:
    return path.stat().st_size * (REWRITE_COST if test_module(path) else 1)


def sources() -> list[Path]:
    """The listed modules the venv holds and the project's own, costliest first."""
    listed = (SITE / line for line in LIST.read_text().split() if not line.startswith("#"))
    own = (p for folder in OWN for p in (ROOT / folder).rglob("*.py"))
    found = [p for p in [*listed, *own, ROOT / "__main__.py"] if p.is_file()]
    return sorted(found, key=_cost, reverse=True)


def compile_all() -> bool:
    """Compile or rewrite every source, dealt round-robin to ``WORKERS`` processes so that each gets an even share."""
    found = [str(p) for p in sources()]
    shares = [found[i::WORKERS] for i in range(WORKERS)]
    with ProcessPoolExecutor(WORKERS) as pool:
        return all(pool.map(_warm, shares))


def write() -> int:
    """The list, from the ``.pyc`` files the venv holds: one source path under site-packages per line."""
    tag = sys.implementation.cache_tag
    names = set()
    for pyc in SITE.rglob(f"__pycache__/*.{tag}.pyc"):
        source = pyc.parent.parent / (pyc.name.split(".", 1)[0] + ".py")
        if source.is_file():
            names.add(source.relative_to(SITE).as_posix())
    header = "# Written by `make bytecode-list` (tests/warm_bytecode.py): the modules a fast-tier run imports.\n"
    LIST.write_text(header + "".join(f"{n}\n" for n in sorted(names)))
    return len(names)


def main(argv: list[str]) -> int:
    if argv == ["--write"]:
        print(f"tests/data/bytecode.txt: {write()} modules")
        return 0
    if argv:
        print("usage: python -m tests.warm_bytecode [--write]", file=sys.stderr)
        return 2
    return 0 if compile_all() else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
