"""A loopback HTTP server that goes wrong in the ways a server, a proxy or a network can, for the
clients of the Hub, the Kubernetes API and GCS: each mode is one way (``MODES``).

The server speaks HTTP/1.1 by hand on purpose: the failures live below what an HTTP framework lets
a handler do (a status line sent one byte at a time, headers that never end, ``100 Continue`` forever).
A good answer comes from the ``answer(path) -> (status, headers, body)`` function a test passes.
"""

from __future__ import annotations

import gzip
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.loopback import POLL_SECONDS, RESET_ON_CLOSE

Answer = tuple[int, dict[str, str], bytes]
MODES = (
    "hang",  # reads the request, never answers
    "drip-status",  # the status line, one byte every 0.2 s
    "drip-headers",  # a status line, then one header byte every 0.2 s, forever
    "continue",  # HTTP/1.1 100 Continue, over and over
    "reset",  # the connection is reset (RST)
    "5xx",  # 503, every time
    "429",  # 429 with Retry-After: 1 twice, then the good answer
    "429-long",  # 429 with Retry-After: 3600
    "gzip",  # the good answer, gzip-encoded
    "gzip-bomb",  # 64 KB of gzip that decompresses to 64 MiB
    "redirect-loop",  # 302 to itself
    "tls",  # a server with a certificate nobody trusts
)
PROXY_PAGE = b"<html><head><title>%s</title></head><body>a proxy in the way</body></html>"
"""What a load balancer or proxy sends for 429 and 5xx, whatever the service behind it speaks."""
_BOMB: list[bytes] = []


def bomb() -> bytes:
    """A gzip stream of 64 MiB of zeros (about 64 KB compressed), built once per process."""
    if not _BOMB:
        _BOMB.append(gzip.compress(b"\0" * (64 << 20), compresslevel=9))
    return _BOMB[0]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: HostileServer

    def log_message(self, *args: object) -> None:
        pass

    def handle_one_request(self) -> None:
        try:
            super().handle_one_request()
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            self.close_connection = True

    def _send(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _drip(self, data: bytes, forever: bool = False) -> None:
        while True:
            for byte in data:
                if self.server.stopping.is_set():
                    return
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(0.2)
            if not forever:
                return

    def _serve(self) -> None:
        server = self.server
        server.requests.append(f"{self.command} {self.path}")
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        mode = server.mode
        if mode == "hang":
            server.stopping.wait(30)
        elif mode == "drip-status":
            self._drip(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        elif mode == "drip-headers":
            self.wfile.write(b"HTTP/1.1 200 OK\r\n")
            self._drip(b"X-Pad: " + b"a" * 60 + b"\r\n", forever=True)
        elif mode == "continue":
            while not server.stopping.is_set():
                self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                self.wfile.flush()
                time.sleep(0.05)
        elif mode == "reset":
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, RESET_ON_CLOSE)
            self.connection.close()
            self.close_connection = True
        elif mode == "5xx":
            self._send(503, {"Content-Type": "text/html"}, PROXY_PAGE % b"503 Service Unavailable")
        elif mode in ("429", "429-long") and (mode == "429-long" or server.count_429 < 2):
            server.count_429 += 1
            wait = "3600" if mode == "429-long" else "1"
            self._send(429, {"Content-Type": "text/html", "Retry-After": wait}, PROXY_PAGE % b"429 Too Many Requests")
        elif mode == "redirect-loop":
            self._send(302, {"Location": self.path}, b"")
        elif mode == "gzip-bomb":
            self._send(200, {"Content-Type": "application/json", "Content-Encoding": "gzip"}, bomb())
        else:
            status, headers, body = server.answer(self.command, self.path)
            if mode == "gzip":
                headers, body = {**headers, "Content-Encoding": "gzip"}, gzip.compress(body)
            self._send(status, headers, body)

    def do_GET(self) -> None:  # noqa: N802
        self._serve()

    def do_HEAD(self) -> None:  # noqa: N802
        self._serve()

    def do_POST(self) -> None:  # noqa: N802
        self._serve()


class HostileServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, mode: str, answer: Callable[[str, str], Answer]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.mode = mode
        self.answer = answer
        self.requests: list[str] = []
        self.count_429 = 0
        self.stopping = threading.Event()
        self.url = ""  # set by hostile(), which knows the scheme


@contextmanager
def hostile(mode: str, answer: Callable[[str, str], Answer]) -> Iterator[HostileServer]:
    """Serve ``mode`` on loopback; the URL is ``server.url`` (``https`` for mode ``tls``)."""
    server = HostileServer(mode, answer)
    scheme = "http"
    if mode == "tls":
        import trustme

        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        trustme.CA().issue_cert("127.0.0.1").configure_cert(context)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        scheme = "https"
    server.url = f"{scheme}://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": POLL_SECONDS}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stopping.set()
        server.shutdown()
        server.server_close()
