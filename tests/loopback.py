"""Loopback HTTP servers for tests: stand-ins for the Hub and the Kubernetes API, and the ways a
server (or a proxy in front of it) goes wrong: hangs, drips bytes, resets the connection."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

RESET_ON_CLOSE = b"\x01\x00\x00\x00\x00\x00\x00\x00"  # SO_LINGER on, 0 s: close sends RST


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that keeps test output clean and can misbehave on request."""

    def log_message(self, *args: object) -> None:
        pass

    def send_body(self, status: int, body: bytes, content_type: str = "application/json", **headers: str) -> None:
        """Reply with `body` and a correct Content-Length."""
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_json(self, status: int, value: object) -> None:
        self.send_body(status, json.dumps(value).encode())

    def misbehave(self, name: str, *, drips: int = 50, pause: float = 0.3) -> bool:
        """`hang` (no reply for 10 s), `drip` (a promised 100 kB, one byte per `pause`) or `reset`
        (connection reset); True when `name` is one of them and the reply is done."""
        if name == "hang":
            time.sleep(10)
        elif name == "drip":
            self.send_response(200)
            self.send_header("Content-Length", "100000")
            self.end_headers()
            for _ in range(drips):
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(pause)
        elif name == "reset":
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, RESET_ON_CLOSE)
            self.connection.close()
        else:
            return False
        return True


POLL_SECONDS = 0.02
"""How often a loopback server's ``serve_forever`` looks for a ``shutdown()``: its default, 0.5 s, is up to half a
second more in every test that stops a server."""


@contextmanager
def serve(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """Run `handler` on a free loopback port in a daemon thread; yield its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": POLL_SECONDS}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
