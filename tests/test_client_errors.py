"""The Google client libraries' errors as the project's (``infra.client_errors``): each kind of failure with the exit
code that says whether what was given must change (2) or a retry may cure it (1), at the boundary of each row."""

from __future__ import annotations

import pytest
import requests
from google.api_core import exceptions as api
from google.auth import exceptions as auth

from core.errors import BAD_INPUT, FAILED, TpuRlError
from infra.client_errors import client_errors, described, exit_code_of, translated

pytestmark = pytest.mark.pure


class _CallerError(TpuRlError):
    """A caller's own class, which its callers catch."""


def _status(code: int) -> requests.exceptions.HTTPError:
    response = requests.Response()
    response.status_code = code
    return requests.exceptions.HTTPError(f"HTTP {code}", response=response)


@pytest.mark.parametrize(
    ("err", "code", "words"),
    [
        (auth.DefaultCredentialsError("none"), BAD_INPUT, "no usable Google credentials for reading x: run `gcloud"),
        (auth.RefreshError("expired"), BAD_INPUT, "no usable Google credentials"),
        (auth.TransportError("refused"), FAILED, "cannot reach the token endpoint of the Google credentials for read"),
        (api.Unauthorized("who"), BAD_INPUT, "GCS refused reading x (HTTP 401: permission denied): who"),
        (api.Forbidden("no"), BAD_INPUT, "GCS refused reading x (HTTP 403: permission denied): no"),
        (api.NotFound("gone"), BAD_INPUT, "GCS found nothing for reading x (HTTP 404): gone"),
        (api.BadRequest("bad"), BAD_INPUT, "GCS refused reading x (HTTP 400): bad"),
        (api.PreconditionFailed("changed"), BAD_INPUT, "GCS refused reading x (HTTP 412): changed"),
        (_status(407), BAD_INPUT, "GCS refused reading x (HTTP 407): HTTP 407"),
        (_status(418), FAILED, "GCS answered HTTP 418 for reading x: HTTP 418"),
        (_status(408), FAILED, "GCS answered HTTP 408 for reading x; retry later"),
        (api.TooManyRequests("slow down"), FAILED, "GCS answered HTTP 429 for reading x; retry later"),
        (api.InternalServerError("oops"), FAILED, "GCS answered HTTP 500 for reading x; retry later"),
        (_status(599), FAILED, "GCS answered HTTP 599 for reading x; retry later"),
        (api.ServiceUnavailable("down"), FAILED, "GCS answered HTTP 503 for reading x; retry later"),
        (api.RetryError("gave up", api.ServiceUnavailable("down")), FAILED, "GCS kept answering HTTP 503"),
        (api.RetryError("gave up", requests.exceptions.SSLError("cert")), BAD_INPUT, "TLS with GCS failed"),
        (api.RetryError("gave up", None), FAILED, "GCS did not answer reading x in time (no answer)"),
        (requests.exceptions.SSLError("cert"), BAD_INPUT, "TLS with GCS failed for reading x; check the proxy"),
        (requests.exceptions.TooManyRedirects("loop"), BAD_INPUT, "GCS redirected reading x too many times"),
        (requests.exceptions.ConnectionError("refused"), FAILED, "cannot reach GCS for reading x (ConnectionError)"),
        (requests.exceptions.ReadTimeout("slow"), FAILED, "cannot reach GCS for reading x (ReadTimeout)"),
        (TimeoutError("slow"), FAILED, "cannot reach GCS for reading x (TimeoutError); check the network"),
        (ValueError("odd"), FAILED, "GCS failed for reading x (ValueError: odd)"),
    ],
)
def test_each_failure_gets_its_line_and_exit_code(err, code, words):
    line, found = described(err, "reading x", "GCS")
    assert line.startswith(words) and found == code, line
    unknown = "failed for" in line or "HTTP 418" in line
    assert ("retry later" in line) == (code == FAILED and not unknown), "the hint where a retry may help"
    assert exit_code_of(err) == code
    assert "\n" not in line


def test_a_translated_error_is_the_callers_class_with_the_code():
    found = translated(api.Forbidden("no"), "listing gs://b/", _CallerError, "GCS")
    assert isinstance(found, _CallerError) and found.exit_code == BAD_INPUT
    assert str(found) == "GCS refused listing gs://b/ (HTTP 403: permission denied): no"
    retry = translated(api.ServiceUnavailable("down"), "listing gs://b/", _CallerError, "GCS")
    assert isinstance(retry, _CallerError) and retry.exit_code == FAILED and str(retry).endswith("; retry later")
    assert _CallerError("x").exit_code == FAILED, "the class's own code is kept where none is given"
    own = _CallerError("already ours", exit_code=BAD_INPUT)
    assert translated(own, "anything") is own


def test_the_seams_catch_every_client_error_and_nothing_else():
    caught = client_errors()
    for err in (
        api.NotFound("x"),
        auth.DefaultCredentialsError("x"),
        requests.exceptions.ConnectionError("x"),
        OSError("x"),
        TimeoutError("x"),
    ):
        assert isinstance(err, caught)
    for bug in (KeyError("x"), TypeError("x"), RuntimeError("x")):  # a bug, not a client's failure: a traceback
        assert not isinstance(bug, caught)
