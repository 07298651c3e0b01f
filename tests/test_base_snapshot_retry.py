"""``base_snapshot.py``'s tries (``main``, ``RETRY_WAITS``): a failure that may pass (the Hub, GCS) is tried again
after each wait, a refusal never; in-process, on a fake clock (the program against the loopback Hub and
fake-gcs-server: tests/test_base_snapshot.py)."""

from __future__ import annotations

import pytest

from workloads.container import base_snapshot
from workloads.container.base_snapshot import REFUSED, RETRY_WAITS, FailedError, RefusedError


def flaky(monkeypatch, *outcomes: Exception | str) -> list[tuple[str, ...]]:
    """``fetch`` answering ``outcomes`` in turn (an exception is raised, a string returned); the calls it got."""
    calls: list[tuple[str, ...]] = []
    left = list(outcomes)

    def fetch(*args: str) -> str:
        calls.append(args)
        outcome = left.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    monkeypatch.setattr(base_snapshot, "fetch", fetch)
    return calls


ARGV = ["fetch", "gs://b/m/convert/0123456789/", "/tmp/base"]


@pytest.mark.pure
def test_the_default_is_three_tries_within_two_minutes():
    assert RETRY_WAITS == (30.0, 90.0)


@pytest.mark.pure
def test_a_failure_that_passes_is_tried_again_after_each_wait(monkeypatch, capsys):
    calls = flaky(monkeypatch, FailedError("cannot read x from the Hub (HfHubHTTPError: 503)"), OSError("reset"), "c0")
    waits: list[float] = []
    base_snapshot.main(ARGV, sleep=waits.append)
    out, err = capsys.readouterr()
    assert out == "c0\n" and len(calls) == 3 and waits == [30.0, 90.0]
    assert err.splitlines() == [
        "tpu-rl base: cannot read x from the Hub (HfHubHTTPError: 503); trying again in 30 s",
        "tpu-rl base: OSError: reset; trying again in 90 s",
    ]


@pytest.mark.pure
def test_a_failure_that_stays_exits_1_after_the_last_try(monkeypatch, capsys):
    calls = flaky(monkeypatch, *[FailedError("GCS said 503")] * 3)
    waits: list[float] = []
    with pytest.raises(SystemExit) as ended:
        base_snapshot.main(ARGV, sleep=waits.append)
    assert ended.value.code == 1 and len(calls) == 3 and waits == [30.0, 90.0]
    assert capsys.readouterr().err.splitlines()[-1] == "tpu-rl base: GCS said 503 (tried 3 times)"


@pytest.mark.pure
def test_a_refusal_is_never_tried_again(monkeypatch, capsys):
    calls = flaky(monkeypatch, RefusedError("gs://b/source.json is missing"), "never")
    waits: list[float] = []
    with pytest.raises(SystemExit) as ended:
        base_snapshot.main(ARGV, sleep=waits.append)
    assert ended.value.code == REFUSED and len(calls) == 1 and waits == []
    assert capsys.readouterr().err == "tpu-rl base: gs://b/source.json is missing\n"


@pytest.mark.pure
def test_an_unknown_operation_is_refused_without_a_try(monkeypatch, capsys):
    calls = flaky(monkeypatch, "never")
    waits: list[float] = []
    with pytest.raises(SystemExit) as ended:
        base_snapshot.main(["fetch", "only-one"], sleep=waits.append)
    assert ended.value.code == REFUSED and calls == [] and waits == []
    assert "usage: base_snapshot.py" in capsys.readouterr().err
