"""``make test``'s first step (``tests/warm_bytecode.py``): a module is compiled to the bytecode Python reads, a test
module rewritten to the cache pytest reads (its plain bytecode would never be read), each once."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from tests import assert_cache, warm_bytecode


def _tree(tmp_path: Path) -> dict[str, Path]:
    folder = tmp_path / "tests"
    folder.mkdir()
    files = {
        "test_thing.py": "def test_it():\n    assert 1 + 1 == 2\n",
        "conftest.py": "X = 1\n",
        "helper.py": "def helper():\n    return 1\n",
    }
    for name, text in files.items():
        (folder / name).write_text(text)
    (tmp_path / "lib.py").write_text("Y = 2\n")
    return {name: folder / name for name in files} | {"lib.py": tmp_path / "lib.py"}


def test_a_test_module_is_rewritten_for_pytest_and_any_other_compiled(tmp_path):
    paths = _tree(tmp_path)
    assert [warm_bytecode.test_module(paths[n]) for n in paths] == [True, True, False, False]
    assert warm_bytecode._warm([str(p) for p in paths.values()])
    for name in ("test_thing.py", "conftest.py"):
        assert assert_cache.current(paths[name]), name
        assert not Path(importlib.util.cache_from_source(str(paths[name]))).exists(), "no plain bytecode of it"
    for name in ("helper.py", "lib.py"):
        assert Path(importlib.util.cache_from_source(str(paths[name]))).exists(), name
        assert not assert_cache.cached(paths[name]).exists()


def test_a_test_module_weighs_its_rewrite_in_the_shares(tmp_path):
    paths = _tree(tmp_path)
    size = paths["helper.py"].stat().st_size
    assert warm_bytecode._cost(paths["helper.py"]) == size
    assert (
        warm_bytecode._cost(paths["test_thing.py"])
        == paths["test_thing.py"].stat().st_size * warm_bytecode.REWRITE_COST
    )
