"""pytest's rewritten test modules, cached before the xdist workers start.

pytest rewrites the ``assert`` statements of every test module it imports and caches the result in
``__pycache__/<name>.<tag>-pytest-<version>.pyc`` (a checked-hash pyc: a fresh clone has none). Each xdist worker
collects the whole suite, and the two start together: on a fresh clone both rewrite all of it, some 4 s of CPU each.
``warm`` writes the cache in the controller instead (``tests/conftest.py`` ``pytest_sessionstart``), once, half of
it in a second process, before the workers start; a module whose cache is current is read by the workers as
before, and the check costs a hash of each source (a few milliseconds for the suite).

``python -m tests.assert_cache FILE...``: rewrite those files (the second process).
"""

from __future__ import annotations

import fnmatch
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from _pytest.assertion import rewrite

FLAGS = b"\x03\x00\x00\x00"
"""A checked-hash pyc's flags (PEP 552), which pytest writes and requires."""


def cached(source: Path) -> Path:
    """Where pytest reads and writes ``source``'s rewritten module."""
    return rewrite.get_cache_dir(source) / (source.name[:-3] + rewrite.PYC_TAIL)


def current(source: Path) -> bool:
    """``source`` has a cached rewrite pytest will use: its magic number, flags and the source's hash."""
    try:
        with open(cached(source), "rb") as handle:
            header = handle.read(16)
    except OSError:
        return False
    hashed = importlib.util.source_hash(source.read_bytes())[:8]
    return header == importlib.util.MAGIC_NUMBER + FLAGS + hashed


def write(source: Path) -> None:
    """Rewrite ``source`` as pytest's import hook does (``_rewrite_test``, without the assertion-pass hook, which the
    caller checks is off) and cache it the way the hook does (``_write_pyc``: written aside, then renamed)."""
    try:
        source_hash, code = rewrite._rewrite_test(source, None)  # type: ignore[arg-type]
    except (OSError, SyntaxError, ValueError):
        return  # left to the worker, whose import reports it
    target = cached(source)
    target.parent.mkdir(exist_ok=True)
    aside = target.with_name(f"{target.name}.{os.getpid()}")
    with open(aside, "wb") as handle:
        rewrite._write_pyc_fp(handle, source_hash, code)
    aside.replace(target)


def test_modules(config) -> list[Path]:
    """The test modules and conftest files under the paths this run collects (its arguments, else ``testpaths``)."""
    patterns = [*config.getini("python_files"), "conftest.py"]
    found: set[Path] = set()
    for argument in config.args:
        path = Path(config.invocation_params.dir, argument.split("::", 1)[0])
        candidates = path.rglob("*.py") if path.is_dir() else [path]
        for candidate in candidates:
            if candidate.suffix == ".py" and any(fnmatch.fnmatch(candidate.name, p) for p in patterns):
                found.add(candidate.absolute())
    return sorted(found)


def wanted(config) -> bool:
    """This is an xdist controller whose workers would rewrite and cache the test modules."""
    return (
        config.pluginmanager.has_plugin("dsession")
        and config.getoption("assertmode") == "rewrite"
        and not config.getini("enable_assertion_pass_hook")
        and not sys.dont_write_bytecode
    )


def warm(config) -> int:
    """Rewrite and cache each test module of this run that has no current cache, half in a second process; the
    number of modules that had none."""
    stale = [path for path in test_modules(config) if not current(path)]
    if not stale:
        return 0
    other = stale[1::2]
    helper = subprocess.Popen([sys.executable, "-m", "tests.assert_cache", *map(str, other)], cwd=config.rootpath)
    for path in stale[::2]:
        write(path)
    helper.wait()  # what it failed to write, the workers rewrite as they would without the cache
    return len(stale)


if __name__ == "__main__":
    for name in sys.argv[1:]:
        write(Path(name))
