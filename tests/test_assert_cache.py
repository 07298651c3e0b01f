"""The rewritten test modules the xdist controller caches (tests/assert_cache.py) are what pytest's own import hook
would write and read back."""

from __future__ import annotations

import importlib.util
import marshal
import sys

from _pytest.assertion import rewrite

from tests import assert_cache

SOURCE = "def test_it():\n    x = [1, 2]\n    assert x == [1, 3], 'differs'\n"


def test_the_cached_module_is_pytests_rewrite_under_pytests_name(tmp_path, request):
    source = tmp_path / "test_sample.py"
    source.write_text(SOURCE)
    assert not assert_cache.current(source)
    assert_cache.write(source)
    cached = tmp_path / "__pycache__" / f"test_sample.{sys.implementation.cache_tag}-pytest-{rewrite.version}.pyc"
    assert assert_cache.cached(source) == cached and assert_cache.current(source)
    data = cached.read_bytes()
    source_hash, code = rewrite._rewrite_test(source, request.config)
    assert data[:16] == importlib.util.MAGIC_NUMBER + b"\x03\x00\x00\x00" + source_hash[:8]
    assert data[16:] == marshal.dumps(code), "the code pytest's hook makes with this run's configuration"
    assert rewrite._read_pyc(source, cached) is not None, "pytest's hook reads it back"
    source.write_text(SOURCE.replace("[1, 3]", "[1, 4]"))
    assert not assert_cache.current(source), "a changed source is rewritten again"


def test_only_an_xdist_controller_warms_the_cache(request):
    """This run's own process is no controller (a worker, or a run without workers): it leaves the cache to pytest."""
    assert not assert_cache.wanted(request.config)
