"""Loopback HTTP servers for tests: stand-ins for the Hub and the Kubernetes API, and the ways a
server (or a proxy in front of it) goes wrong: hangs, drips bytes, resets the connection."""

from __future__ import annotations

import json
import selectors
import socket
import socketserver
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

RESET_ON_CLOSE = b"\x01\x00\x00\x00\x00\x00\x00\x00"  # SO_LINGER on, 0 s: close sends RST


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that keeps test output clean and can misbehave on request. Its replies go out at once
    (``TCP_NODELAY``): the headers and the body are two writes, and on a kept-alive connection Nagle's algorithm
    would hold the body until the client's delayed ACK of the headers, 40 ms a request."""

    disable_nagle_algorithm = True

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
"""How often a loopback server's ``serve_forever`` looks for a ``shutdown()`` where it polls (the stdlib's loop: its
default, 0.5 s, is up to half a second more in every test that stops a server). ``LoopbackServer`` does not poll."""


class PromptStop(socketserver.ThreadingMixIn, socketserver.TCPServer):
    """A threading TCP server whose loop sleeps until a connection comes or ``shutdown()`` wakes it: it stops at
    once and wakes for nothing else (the stdlib's loop looks for a shutdown every ``poll_interval``). Each
    connection is served in a daemon thread, so a handler that hangs holds up neither the shutdown nor the
    process's exit."""

    daemon_threads = True
    request_queue_size = 128
    """The listen backlog (socketserver's default is 5): connections opened at once by a CPU-starved worker must not
    wait out a dropped SYN's retransmission (a second)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._wake, self._woken = socket.socketpair()
        self._stopping = False
        self._stopped = threading.Event()

    def get_request(self) -> tuple[socket.socket, Any]:
        """An accepted connection, whose writes go out at once (``TCP_NODELAY``: ``QuietHandler``)."""
        request, address = super().get_request()
        request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return request, address

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        """Serve until ``shutdown()`` (``poll_interval`` is not used: nothing is polled)."""
        self._stopped.clear()
        try:
            with selectors.DefaultSelector() as selector:
                selector.register(self, selectors.EVENT_READ)
                selector.register(self._woken, selectors.EVENT_READ)
                while not self._stopping:
                    for key, _ in selector.select():
                        if key.fileobj is self and not self._stopping:
                            # socketserver's own step of serve_forever (accept, then a thread); not in typeshed
                            self._handle_request_noblock()  # type: ignore[attr-defined]
                    self.service_actions()
        finally:
            self._stopped.set()

    def shutdown(self) -> None:
        """Stop the loop and wait until it has (it must be running, or about to run, in another thread)."""
        self._stopping = True
        self._wake.send(b"x")
        self._stopped.wait()

    def server_close(self) -> None:
        super().server_close()
        self._wake.close()
        self._woken.close()

    def start(self) -> Self:
        """Serve in a daemon thread."""
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self


class LoopbackServer(PromptStop, ThreadingHTTPServer):
    """``PromptStop`` for HTTP: a ``ThreadingHTTPServer`` that stops at once."""

    def server_bind(self) -> None:
        """Bind, naming the server by its address (``HTTPServer`` asks the resolver for the loopback's name)."""
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)


@contextmanager
def serve(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """Run `handler` on a free loopback port in a daemon thread; yield its base URL."""
    server = LoopbackServer(("127.0.0.1", 0), handler).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
