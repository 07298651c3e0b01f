"""How the kubernetes client's errors become one ``ClusterReadError`` line each, with the exit code of what happened
(``core.errors``): the reads of ``infra.k8s.live`` and the tools that read the cluster through it."""

from __future__ import annotations

import ssl

from core.bounded import ReplyEncodingError, ReplyTooLargeError
from core.errors import BAD_INPUT
from core.redact import scrub
from infra.k8s.credentials import ClusterReadError

DROPPED = (ssl.SSLEOFError, ssl.SSLZeroReturnError, ssl.SSLSyscallError)
"""TLS errors that are a connection ending mid-handshake (the server, a load balancer or a proxy closed it: a
control plane being upgraded or resized does), not a refusal: retried as a reset is. A certificate that does not
verify or a protocol the server refuses fails at once."""


def tls_error(err: BaseException) -> ssl.SSLError | None:
    """The ``ssl`` error under a client's error: urllib3's ``SSLError`` carries it as its argument; the kubernetes
    client raises its ``ApiException`` (status 0) while handling urllib3's (kubernetes ``rest.py``
    ``RESTClientObject.request``), so it is that one's context."""
    seen: set[int] = set()
    todo: list[BaseException] = [err]
    while todo:
        current = todo.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, ssl.SSLError):
            return current
        todo += [e for e in (*current.args, current.__cause__, current.__context__) if isinstance(e, BaseException)]
    return None


PROBE_BYTES = 4096
"""How much of a plain HTTP answer the probe reads."""


def speaks_plain_http(server: str, seconds: float) -> bool:
    """Whether the host and port of ``server`` (an https:// URL) answer a plain HTTP request with an HTTP status line,
    each of the connect, the send and the read within ``seconds`` (False: no answer, another one, or none in time)."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(server)
    if not parts.hostname:
        return False
    request = f"GET /version HTTP/1.0\r\nHost: {parts.hostname}\r\n\r\n".encode("ascii", "replace")
    answer = b""
    try:
        with socket.create_connection((parts.hostname, parts.port or 443), timeout=seconds) as sock:
            sock.sendall(request)
            while len(answer) < PROBE_BYTES and (chunk := sock.recv(PROBE_BYTES - len(answer))):
                answer += chunk  # to its end where it is short: a close with an answer unread would reset it
    except (OSError, ValueError):
        pass
    return answer.startswith(b"HTTP/")


def tls_line(where: str, cause: ssl.SSLError | None) -> ClusterReadError:
    """The line of a failed TLS connection, naming why (the certificate, or the connection cut short)."""
    if isinstance(cause, DROPPED):
        return ClusterReadError(
            f"the cluster at {where} kept closing the connection during the TLS handshake: is this machine in "
            "tpu-rl:authorizedNetworks, and is a proxy in the way?"
        )
    if isinstance(cause, ssl.SSLCertVerificationError):
        why = f" (certificate: {scrub(str(cause.verify_message), limit=80)})"
    elif cause is not None and cause.reason:
        why = f" ({scrub(str(cause.reason), limit=80)})"
    else:
        why = ""
    return ClusterReadError(
        f"TLS with the cluster at {where} failed{why}; is the kubeconfig current?", exit_code=BAD_INPUT
    )


def described(err: Exception, path: str, where: str, read_seconds: float) -> ClusterReadError:
    """One line for a failed read of ``path`` from the cluster at ``where``, with its exit code: what was given must
    change (a refusal, TLS that fails, a redirect, a reply no API server sends: 2) or a retry may cure it (1)."""
    import urllib3
    from kubernetes.client.exceptions import ApiException

    if isinstance(err, ReplyTooLargeError):  # the one bounded read's line (core.bounded)
        return ClusterReadError(str(err), exit_code=BAD_INPUT)
    if isinstance(err, ReplyEncodingError):
        return ClusterReadError(
            f"the cluster at {where} answered {path} with a body it cannot read ({err})", exit_code=BAD_INPUT
        )
    if isinstance(err, ApiException):
        status = err.status or 0
        if status == 0 and "SSLError" in str(err.reason):  # the client's wrapping of urllib3's SSLError
            return tls_line(where, tls_error(err))
        if 300 <= status < 400:
            return ClusterReadError(
                f"the cluster at {where} redirected {path} (HTTP {status}); expected the API server",
                exit_code=BAD_INPUT,
            )
        if status in (401, 403):
            return ClusterReadError(
                f"the cluster at {where} refused to read {path} (HTTP {status}): the identity running `pulumi` "
                "needs container.developer (or read access to the namespace) and a fresh login",
                exit_code=BAD_INPUT,
            )
        if status == 429:
            return ClusterReadError(f"the cluster at {where} kept answering 429 (too many requests) for {path}")
        return ClusterReadError(f"the cluster at {where} answered HTTP {status} for {path}")
    if isinstance(err, urllib3.exceptions.ReadTimeoutError):
        return ClusterReadError(
            f"the cluster at {where} accepted the connection but did not answer {path} within {read_seconds:g} s"
        )
    if isinstance(err, urllib3.exceptions.SSLError):
        return tls_line(where, tls_error(err))
    if isinstance(err, (urllib3.exceptions.HTTPError, OSError)):
        return ClusterReadError(
            f"cannot reach the cluster at {where} ({type(err).__name__}): is this machine in "
            "tpu-rl:authorizedNetworks, and is gke-gcloud-auth-plugin installed and logged in "
            "(gcloud auth application-default login)?"
        )
    return ClusterReadError(f"reading {path} from the cluster at {where} failed ({type(err).__name__})")
