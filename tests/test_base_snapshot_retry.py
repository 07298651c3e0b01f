"""``base_snapshot.py``'s tries (``main``, ``RETRY_WAITS``): a failure that may pass (the Hub, GCS) is tried again
after each wait, a refusal never; in-process, on a fake clock (the program against the loopback Hub and
fake-gcs-server: tests/test_base_snapshot.py)."""

from __future__ import annotations

import pytest

from workloads.container import base_snapshot
from workloads.container.base_snapshot import REFUSED, FailedError, RefusedError


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


def gcs_error(status: int, body: dict) -> Exception:
    """A GCS error as google-cloud-storage raises it: ``from_http_response`` of the JSON API's answer."""
    import json

    import requests
    from google.api_core import exceptions

    answer = requests.Response()
    answer.status_code = status
    answer._content = json.dumps(body).encode()
    answer.request = requests.Request(
        "POST",
        "https://storage.googleapis.com/storage/v1/b/my-tpu-prod-project-tpu-rl-prod/o/gemma4-26b%2Ftrain%2Fhub%2F"
        "nvidia%2FOpenMathInstruct-2%2F0123456789abcdef0123456789abcdef01234567%2Fdata%2Ftrain_1M-00000-of-00003"
        ".parquet/rewriteTo/b/my-tpu-prod-project-tpu-rl-prod/o/gemma4-26b%2Ftrain%2F0123456789%2Fdataset%2Fdata",
    ).prepare()
    return exceptions.from_http_response(answer)


@pytest.mark.pure
def test_a_gcs_error_is_told_by_its_status_and_reason_not_its_url(monkeypatch, capsys):
    """A copy's URL holds both objects' paths (hundreds of characters): the line keeps the reason, and a 403 says
    where the grants are (a fresh grant can take minutes to propagate, which the tries also cover)."""
    reason = "tpu-rl-cpu@p.iam.gserviceaccount.com does not have storage.objects.create access to the object."
    denied = gcs_error(403, {"error": {"code": 403, "message": reason, "errors": [{"message": reason}]}})
    flaky(monkeypatch, *[denied] * 3)
    with pytest.raises(SystemExit):
        base_snapshot.main(ARGV, sleep=lambda s: None)
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith(f"tpu-rl base: Forbidden (403): {reason}: the pod's account lacks a grant on the bucket")
    assert "rewriteTo" not in last and last.endswith("(tried 3 times)")
    bare = gcs_error(503, {"error": {"code": 503, "message": "Backend Error"}})
    assert base_snapshot.describe(bare) == "ServiceUnavailable (503): Backend Error"
    assert base_snapshot.describe(ValueError("a\n  b")) == "ValueError: a b"
