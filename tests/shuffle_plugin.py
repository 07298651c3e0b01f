"""The tests in a seeded random order: ``-p tests.shuffle_plugin --shuffle-seed N`` (the scheduled run,
``.github/workflows/scheduled.yml``). A test that passes only after another (on what it left in a cache, a module's
state or a file) fails in some order; the seed, in the run's header, gives that order again. The same seed and the
same tests give the same order in every process, as pytest-xdist's workers need (each collects and must agree).
"""

from __future__ import annotations

import random

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--shuffle-seed",
        type=int,
        default=None,
        help="run the tests in the random order this seed gives (tests/shuffle_plugin.py)",
    )


def pytest_report_header(config: pytest.Config) -> str | None:
    seed = config.getoption("shuffle_seed")
    return None if seed is None else f"shuffled: --shuffle-seed {seed} gives this order again"


def shuffled(items: list[pytest.Item], seed: int) -> list[pytest.Item]:
    """``items`` in the order ``seed`` gives: by node id first, so that the order depends on the seed and the tests
    alone, not on the order they were collected in."""
    ordered = sorted(items, key=lambda item: item.nodeid)
    random.Random(seed).shuffle(ordered)
    return ordered


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    seed = config.getoption("shuffle_seed")
    if seed is not None:
        items[:] = shuffled(items, seed)
