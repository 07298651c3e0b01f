"""Test files that share something costly, run in one process together: `make test`'s halves
(``tests/fast_tier.py``) and the slow tier's workers (``--dist loadfile``: ``pytest_xdist_make_scheduler`` in
``tests/conftest.py``) each keep a group's files together, so that one process alone pays what they share.

A plain module (no pytest, no product import): the fast tier's runner reads it before any test process starts.
"""

from __future__ import annotations

GOOGLE_CLIENTS = (
    "tests/test_capacity.py",
    "tests/test_capacity_boot_disk.py",
    "tests/test_capacity_hostile.py",
    "tests/test_capacity_hub_cache.py",
    "tests/test_capacity_quotas.py",
    "tests/test_capacity_survivors.py",
    "tests/test_catalogue_entries.py",
    "tests/test_state_bucket.py",
    "tests/test_state_messages.py",
)
"""The files that use the ``google_clients`` fixture: the Google API clients' libraries (google-cloud-compute alone is
34 MB of Python), imported once."""
FIRST_PREVIEWS = ("tests/test_policy.py", "tests/test_judge_preview.py")
"""The files that judge the example stacks' first previews (``tests.analyzer.first_preview``, a run of the program
each, remembered per process)."""
PROPERTY_TESTS = (
    "tests/test_container_shown.py",
    "tests/test_hostile_reply_properties.py",
    "tests/test_redact_properties.py",
    "tests/test_redact_terminal.py",
)
"""The files that import hypothesis (about a second of a process's CPU to import and set up)."""
PRODUCT_SOURCES = ("tests/test_bounded.py", "tests/test_errors.py", "tests/test_limits.py", "tests/test_step_roles.py")
"""The files that read the product's syntax trees (``tests.source_files``: some 28,000 lines, more than a second of
a process's CPU to parse and walk), parsed once."""
EXAMPLE_VARIANTS = (
    "tests/test_pod_tokens_and_egress.py",
    "tests/test_policy_closed_world.py",
    "tests/test_policy_grants_allowed.py",
    "tests/test_policy_pods_whole.py",
    "tests/test_registered.py",
)
"""The files that plan every example stack and variant (``tests.example_stacks.STACKS``), planned once."""
LOCAL_CLUSTER = (
    "tests/test_local_cluster_existing.py",
    "tests/test_local_cluster_failure_policy.py",
    "tests/test_local_cluster_maintenance.py",
    "tests/test_local_cluster_run.py",
    "tests/test_local_engine.py",
)
"""The files that play scenarios on the local cluster (``tests.local_cluster``): one cluster, started once."""

GROUPS = {
    **{name: "google-clients" for name in GOOGLE_CLIENTS},
    **{name: "first-previews" for name in FIRST_PREVIEWS},
    **{name: "property-tests" for name in PROPERTY_TESTS},
    **{name: "product-sources" for name in PRODUCT_SOURCES},
    **{name: "example-variants" for name in EXAMPLE_VARIANTS},
    **{name: "local-cluster" for name in LOCAL_CLUSTER},
}
"""Test file -> its group; a file of no group is its own unit."""


def unit(path: str) -> str:
    """What runs in one process: ``path``'s group, or the file itself (a path relative to the root)."""
    return GROUPS.get(path, path)
