"""The one bounded read (``core.bounded``: a cap on the bytes received and inflated, one ``ReplyTooLargeError``
line) on each transport the project's clients use, through each library's own hook. The policy is pure and lives
in ``core``; these adapters import the network libraries, so they live here, below every client that mounts them
(``infra.gcp.capacity``, ``infra.k8s.live``, ``workloads.preflight``, ``workloads.observe.artifacts``) and above
``core``:

- requests (google-cloud-* REST transports and google-cloud-storage: google-auth's ``AuthorizedSession``, a
  ``requests.Session``): ``cap_session`` mounts ``CappedAdapter`` with requests' own ``Session.mount``;
- httpx2 (huggingface_hub 2.x's client, made by the factory given to its ``set_client_factory``,
  ``huggingface_hub/utils/_http.py``): ``capped_transport``, an ``httpx2.HTTPTransport`` whose replies stream
  through the cap;
- urllib3 (the kubernetes client: ``_preload_content=False`` hands back urllib3's ``HTTPResponse`` unread):
  ``read_response`` reads it through the cap.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

from core import bounded
from core.bounded import Cap

STORAGE_METADATA_OFF = "DISABLE_GCS_PYTHON_CLIENT_OTEL_BUCKET_METADATA"
"""What turns off google-cloud-storage's background fetch of a bucket's metadata (``no_background_fetches``)."""


def no_background_fetches() -> None:
    """google-cloud-storage 3.17 fetches a bucket's metadata for its trace spans, on the first call that names the
    bucket, in a daemon thread of its own (``_helpers.create_trace_span_helper``,
    ``_bucket_metadata_cache.BucketMetadataCache.get_or_queue_fetch``), traces on or not: a ``buckets.get`` with the
    library's default retry (two minutes), outside every budget, asking for ``storage.buckets.get``, which a reader
    of objects need not hold. Turned off through the variable the library reads at each call
    (``_opentelemetry_tracing._is_bucket_metadata_disabled``), unless the operator set it."""
    os.environ.setdefault(STORAGE_METADATA_OFF, "true")


CHUNK = 64 * 1024
"""Bytes read from the socket at a time."""


def _request_line(method: str, url: str) -> str:
    """``METHOD scheme://host/path`` of a request, for its line (the query left out: a page token, a signature)."""
    parts = urlsplit(url)
    return f"{method} {parts.scheme}://{parts.netloc}{parts.path}"


# ---------------------------------------------------------------------------------------------
# requests


def _capped_adapter(cap: Cap, check: Callable[[bytes], None] | None) -> Any:
    from requests.adapters import HTTPAdapter

    class CappedAdapter(HTTPAdapter):
        """Reads each reply itself, through the cap, and hands requests the plain bytes: the clients then parse
        ``response.content`` as usual. A streamed request (``stream=True``: google-cloud-storage's media
        downloads, whose ``Download`` writes the body chunk by chunk into the caller's sink,
        ``_media/requests/download.py``) is passed on unread: its reader bounds it (``core.hf_model.read_object``:
        a sink of at most the bytes asked for; urllib3 >= 2.6 inflates at most a chunk per read)."""

        def send(  # type: ignore[override]  # the same arguments, passed on as they come
            self, request: Any, stream: bool = False, **kwargs: Any
        ) -> Any:
            if stream:
                return super().send(request, stream=True, **kwargs)
            request.headers["Accept-Encoding"] = bounded.ACCEPT_ENCODING
            response = super().send(request, stream=True, **kwargs)
            limit = cap.for_range(request.headers.get("Range"))
            try:
                body = bounded.read(
                    response.raw.stream(CHUNK, decode_content=False),
                    response.headers.get("Content-Encoding", ""),
                    limit,
                    _request_line(request.method, request.url),
                )
            except BaseException:
                response.close()  # drops the connection: the rest of the body is never read
                raise
            response.headers.pop("Content-Encoding", None)
            # What ``Response.content`` reads and then keeps (requests models.py): set, it is not read again.
            response._content = body
            response._content_consumed = True  # type: ignore[attr-defined]
            response.close()  # read to its end: the connection goes back to the pool
            if check is not None and response.status_code < 400:
                check(body)
            return response

    return CappedAdapter(max_retries=0)


def cap_session(session: Any, cap: Cap, check: Callable[[bytes], None] | None = None) -> None:
    """Every reply of ``session`` (a ``requests.Session``) through ``cap``, by requests' own ``Session.mount`` of an
    adapter for both schemes; ``check(body)``: what else a successful reply must be (the capacity check: a JSON
    object)."""
    adapter = _capped_adapter(cap, check)
    for prefix in ("https://", "http://"):
        session.mount(prefix, adapter)


# ---------------------------------------------------------------------------------------------
# httpx2 (huggingface_hub)


def capped_transport(cap: Cap) -> Any:
    """An ``httpx2.HTTPTransport`` (proxies from the environment, as httpx's default) that asks for gzip or deflate
    and hands on each reply's plain bytes through ``cap`` (no ``Content-Encoding`` left for httpx to decode)."""
    import httpx2

    class CappedStream(httpx2.SyncByteStream):
        def __init__(self, stream: Any, encoding: str, limit: Cap, what: str) -> None:
            self.stream, self.encoding, self.limit, self.what = stream, encoding, limit, what

        def __iter__(self) -> Iterator[bytes]:
            return bounded.streamed(iter(self.stream), self.encoding, self.limit, self.what)

        def close(self) -> None:
            self.stream.close()

    class CappedTransport(httpx2.HTTPTransport):
        def handle_request(self, request: Any) -> Any:
            request.headers["Accept-Encoding"] = bounded.ACCEPT_ENCODING
            response = super().handle_request(request)
            try:
                encoding = bounded.inflatable(response.headers.get("content-encoding", ""))
            except bounded.ReplyEncodingError:
                response.close()
                raise
            skip = {b"content-encoding", b"content-length"} if encoding else set()
            headers = [(k, v) for k, v in response.headers.raw if k.lower() not in skip]
            what = _request_line(request.method, str(request.url))
            return httpx2.Response(
                response.status_code,
                headers=headers,
                stream=CappedStream(response.stream, encoding, cap.for_range(request.headers.get("range")), what),
                extensions=response.extensions,
            )

    return CappedTransport(trust_env=True)


# ---------------------------------------------------------------------------------------------
# urllib3 (the kubernetes client)


def read_response(response: Any, cap: Cap, what: str) -> bytes:
    """The body of an unread urllib3 ``HTTPResponse`` (a kubernetes client call with ``_preload_content=False``)
    through ``cap``; the connection goes back to the pool, or is dropped when the reply was refused."""
    try:
        return bounded.read(
            response.stream(CHUNK, decode_content=False), response.headers.get("Content-Encoding", ""), cap, what
        )
    except BaseException:
        response.close()  # the rest of the body is never read
        raise
    finally:
        response.release_conn()
