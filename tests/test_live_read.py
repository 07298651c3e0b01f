"""Reading the live JobSet through the Kubernetes client, against a local HTTP API server stand-in."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from workloads import retry

PATH = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/tpu-rl/jobsets/"
FAILED = {
    "apiVersion": "jobset.x-k8s.io/v1alpha2",
    "kind": "JobSet",
    "metadata": {"name": "failed-run", "namespace": "tpu-rl", "uid": "uid-1"},
    "status": {"terminalState": "Failed"},
}


class FakeApiServer(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def _send(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):  # noqa: N802
        if self.headers.get("Authorization") != "Bearer test-token":
            self._send(401, {"kind": "Status", "code": 401, "reason": "Unauthorized"})
        elif self.path == PATH + "failed-run":
            self._send(200, FAILED)
        elif self.path == PATH + "forbidden":
            self._send(403, {"kind": "Status", "code": 403, "reason": "Forbidden"})
        else:
            self._send(404, {"kind": "Status", "code": 404, "reason": "NotFound"})


@pytest.fixture(autouse=True)
def no_live_cluster():
    """This module tests the real reader (overrides the conftest stub), against loopback only."""


@pytest.fixture(scope="module")
def api():
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeApiServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def kubeconfig(server: str, token: str = "test-token") -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "test",
            "clusters": [{"name": "test", "cluster": {"server": server}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
            "users": [{"name": "test", "user": {"token": token}}],
        }
    )


def test_a_failed_run_is_read_and_gives_its_uid_as_marker(api):
    live = retry.read_live_jobset(kubeconfig(api), "tpu-rl", "failed-run")
    assert live["status"]["terminalState"] == "Failed"
    assert retry.retry_marker(live) == "uid-1"


def test_a_missing_jobset_is_none(api):
    assert retry.read_live_jobset(kubeconfig(api), "tpu-rl", "never-created") is None


@pytest.mark.parametrize(
    ("name", "token", "words"), [("forbidden", "test-token", "HTTP 403"), ("x", "bad", "HTTP 401")]
)
def test_read_errors_are_clear(api, name, token, words):
    with pytest.raises(retry.ClusterReadError, match=words):
        retry.read_live_jobset(kubeconfig(api, token), "tpu-rl", name)


def test_an_unreachable_cluster_names_the_likely_causes():
    with pytest.raises(retry.ClusterReadError, match="authorizedNetworks"):
        retry.read_live_jobset(kubeconfig("http://127.0.0.1:9"), "tpu-rl", "x")
