"""A preview whose auth plugin hangs, with the real budgets (its own file: it takes the plugin's
budget, about 10 s, and runs beside the other scenarios)."""

from __future__ import annotations

import time

import pytest

from tests.scenario import auth_plugin

# The whole module is the slow tier (`make test-slow`, in CI; docs/testing.md "Timings"): each test runs the
# program or a step for real against loopback servers, seconds apiece. The fast tier keeps the same boundaries
# in pure form (the builders' and readers' own tests).
pytestmark = pytest.mark.slow


def test_preview_with_a_hanging_auth_plugin_finishes_in_under_30_seconds(stack, tmp_path, monkeypatch):
    """The first read waits for the plugin within its budget; every later read of the preview skips at once."""
    assert stack.up().error is None
    auth_plugin(tmp_path, monkeypatch, "sleep 300\n")
    start = time.monotonic()
    preview = stack.preview()
    elapsed = time.monotonic() - start
    assert preview.error is None and elapsed < 30, elapsed
    assert set(preview.actions.values()) == {"same"}
    assert sum("gke-gcloud-auth-plugin did not answer within" in w for w in preview.plan.warnings()) == 1
