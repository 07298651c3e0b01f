"""The Google client libraries' errors as the project's, in one table (``core.errors``).

Every read of Google Cloud (google-cloud-storage, -kms, -resource-manager, -service-usage, google-auth and the
requests/urllib3 transport under them) fails in one of three ways, and the exit code says which:

- **what the operator gave must change** (exit 2): no usable credentials, a refusal (401, 403), something not found
  (404), a request the service calls invalid (400, 409, 412), a proxy that wants credentials (407), TLS that fails (a
  proxy, its certificate), endless redirects;
- **a retry may cure it** (exit 1, the message ends with the retry hint): no answer in time, 408, 429, a 5xx, a
  connection that could not be made or was dropped (the credentials' token endpoint's too), the library's own retry
  given up;
- anything else is a failure of the world (exit 1) named by its status or type, without the hint.

A seam catches ``CLIENT_ERRORS`` and raises ``translated(err, what, kind)``: the caller's own class (``StateError``,
``StorageError``, ...), which its callers catch as before, with the code of what happened. Nothing here imports a
client library until it is asked (the tools that never reach Google load none)."""

from __future__ import annotations

import functools
from typing import Any

from core.errors import BAD_INPUT, FAILED, TpuRlError
from core.redact import scrub

RETRY = "retry later"
"""The hint an error a retry may cure ends with."""
REFUSED_STATUS = frozenset((400, 401, 403, 404, 407, 409, 412))
UNAVAILABLE_STATUS = frozenset((408, 429, 500, 502, 503, 504))
LOGIN = "run `gcloud auth application-default login`"


def client_errors(*also: type[Exception]) -> tuple[type[Exception], ...]:
    """The bases of every error the Google clients and their transport raise (``OSError`` covers sockets and
    ``TimeoutError``), and ``also``: what a seam catches."""
    return _bases() + also


@functools.cache
def _bases() -> tuple[type[Exception], ...]:
    from google.api_core import exceptions as api
    from google.auth import exceptions as auth
    from requests import exceptions as http
    from urllib3 import exceptions as url

    return (api.GoogleAPIError, auth.GoogleAuthError, http.RequestException, url.HTTPError, OSError)


def status_of(err: BaseException) -> int | None:
    """The HTTP status an error carries (``code`` of google-api-core's, the response's of requests'), None without."""
    code = getattr(err, "code", None)
    if isinstance(code, int) and 100 <= code <= 599:
        return code
    response = getattr(err, "response", None)
    status = getattr(response, "status_code", None)
    return status if isinstance(status, int) else None


def described(err: BaseException, what: str, service: str = "Google Cloud") -> tuple[str, int]:
    """One line for ``err`` met while ``what``, and its exit code (the module's table)."""
    from google.api_core import exceptions as api
    from google.auth import exceptions as auth
    from requests import exceptions as http

    if isinstance(err, auth.DefaultCredentialsError | auth.RefreshError):
        return f"no usable Google credentials for {what}: {LOGIN}", BAD_INPUT
    if isinstance(err, auth.TransportError):  # the token endpoint did not answer
        named = type(err.__cause__ or err.__context__ or err).__name__
        return f"cannot reach the token endpoint of the Google credentials for {what} ({named}); {RETRY}", FAILED
    if isinstance(err, api.RetryError):
        cause = err.cause
        if isinstance(cause, http.SSLError):
            return f"TLS with {service} failed for {what}; check the proxy or its certificate", BAD_INPUT
        if isinstance(cause, api.GoogleAPICallError):
            return f"{service} kept answering HTTP {cause.code} for {what}; {RETRY}", FAILED
        named = type(cause).__name__ if cause is not None else "no answer"
        return f"{service} did not answer {what} in time ({named}); check the network, or {RETRY}", FAILED
    if isinstance(err, http.SSLError):
        return f"TLS with {service} failed for {what}; check the proxy or its certificate", BAD_INPUT
    if isinstance(err, http.TooManyRedirects):
        return f"{service} redirected {what} too many times; check the endpoint or the proxy", BAD_INPUT
    status = status_of(err)
    if status in (401, 403):
        return f"{service} refused {what} (HTTP {status}: permission denied): {_said(err)}", BAD_INPUT
    if status == 404:
        return f"{service} found nothing for {what} (HTTP 404): {_said(err)}", BAD_INPUT
    if status in REFUSED_STATUS:
        return f"{service} refused {what} (HTTP {status}): {_said(err)}", BAD_INPUT
    if status in UNAVAILABLE_STATUS or (status is not None and status >= 500):
        return f"{service} answered HTTP {status} for {what}; {RETRY}", FAILED
    if status is not None:
        return f"{service} answered HTTP {status} for {what}: {_said(err)}", FAILED
    if isinstance(err, http.ConnectionError | http.Timeout | TimeoutError | OSError):
        named = type(err).__name__
        return f"cannot reach {service} for {what} ({named}); check the network or a proxy, or {RETRY}", FAILED
    return f"{service} failed for {what} ({type(err).__name__}: {_said(err)})", FAILED


def translated(
    err: BaseException, what: str, kind: type[TpuRlError] = TpuRlError, service: str = "Google Cloud"
) -> TpuRlError:
    """``err`` as ``kind`` with the line and exit code ``described`` gives; a project error passes as it is."""
    if isinstance(err, TpuRlError):
        return err
    line, code = described(err, what, service)
    return kind(line, exit_code=code)


def exit_code_of(err: BaseException) -> int:
    """The exit code ``described`` gives ``err``, for a seam that words its own line."""
    return described(err, "")[1]


def _said(err: Any) -> str:
    """What the error body says (google-api-core's first ``errors[].message``, else its message), without the
    request's URL, on one line."""
    errors = getattr(err, "errors", None) or []
    first = errors[0] if errors and isinstance(errors[0], dict) else {}
    message = first.get("message") if isinstance(first.get("message"), str) else getattr(err, "message", None)
    return scrub(message if isinstance(message, str) and message else str(err), limit=160)
