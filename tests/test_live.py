"""Bounded live reads (infra.k8s.live) against loopback stub servers and stub auth plugins."""

from __future__ import annotations

import json
import stat
import time

import pytest
import yaml

from infra.k8s import live
from tests.loopback import QuietHandler, serve

FAST = live.Budget(connect=0.5, read=0.5, auth=0.8, total=1.2)
SLACK = 1.0
JOBSET_PATH = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/tpu-rl/jobsets/"


class StubApiServer(QuietHandler):
    """Misbehaves on purpose, by path."""

    def do_GET(self):  # noqa: N802
        name = self.path.rsplit("/", 1)[-1].split("?")[0]
        if self.headers.get("Authorization") != "Bearer test-token":
            self.send_body(401, b'{"kind": "Status", "code": 401}')
        elif name == "ok":
            self.send_body(200, json.dumps({"kind": "JobSet", "metadata": {"name": "ok", "uid": "u1"}}).encode())
        elif name == "forbidden":
            self.send_body(403, b'{"kind": "Status", "code": 403}')
        elif name == "boom":
            self.send_body(500, b"oops", "text/plain")
        elif self.misbehave(name):
            pass
        elif name == "garbage":
            self.send_body(200, b"\xff\xfe<html>not json", "text/html")
        elif name == "shape":
            self.send_body(200, b'["a", "list"]')
        elif name == "redirect":
            self.send_body(302, b"", Location=self.path)
        elif name == "huge":
            self.send_body(200, b"[" + b"1," * (live.MAX_BODY_BYTES // 2 + 10) + b"1]")
        elif "jobsets" in self.path and name == "jobsets":
            self.send_body(200, json.dumps({"items": [{"kind": "JobSet", "metadata": {"name": "a"}}, "junk"]}).encode())
        else:
            self.send_body(404, b'{"kind": "Status", "code": 404}')


@pytest.fixture(autouse=True)
def no_live_cluster():
    """This module tests the real reader (overrides the conftest stub), against loopback only."""


@pytest.fixture(scope="module")
def server():
    with serve(StubApiServer) as url:
        yield url


def kubeconfig(server: str, user: dict) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "test",
            "clusters": [{"name": "test", "cluster": {"server": server}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
            "users": [{"name": "test", "user": user}],
        }
    )


def token_user(token: str = "test-token") -> dict:
    return {"token": token}


def read(server: str, name: str, user: dict | None = None):
    return live.get_json(kubeconfig(server, user or token_user()), JOBSET_PATH + name, budget=FAST)


def test_an_object_is_read_and_a_missing_one_is_none(server):
    assert read(server, "ok")["metadata"]["uid"] == "u1"
    assert read(server, "never-created") is None


def test_lists_keep_only_objects(server):
    items = live.list_items(kubeconfig(server, token_user()), JOBSET_PATH.rstrip("/"), "a=b", budget=FAST)
    assert items == [{"kind": "JobSet", "metadata": {"name": "a"}}]


@pytest.mark.parametrize(
    ("name", "user", "words"),
    [
        ("forbidden", None, "refused to read .* \\(HTTP 403\\)"),
        ("ok", token_user("wrong"), "refused to read .* \\(HTTP 401\\)"),
        ("boom", None, "answered HTTP 500"),
        ("garbage", None, "not JSON"),
        ("shape", None, "JSON that is not an object"),
        ("redirect", None, "redirected .* \\(HTTP 302\\)"),
        ("huge", None, "sent more than"),
        ("reset", None, "cannot reach the cluster at .*authorizedNetworks"),
    ],
)
def test_every_failure_is_one_clear_line(server, name, user, words):
    with pytest.raises(live.ClusterReadError, match=words) as caught:
        read(server, name, user)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("name", ["hang", "drip"])
def test_a_silent_or_dripping_server_is_bounded(server, name):
    start = time.monotonic()
    with pytest.raises(live.ClusterReadError):
        read(server, name)
    assert time.monotonic() - start < FAST.total + SLACK


def test_a_refused_connection_names_the_likely_causes():
    with pytest.raises(live.ClusterReadError, match="authorizedNetworks"):
        read("http://127.0.0.1:9", "x")


def plugin(tmp_path, body: str) -> dict:
    path = tmp_path / "auth-plugin"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": str(path),
            "args": ["--x"],
            "provideClusterInfo": True,
            "installHint": "install the plugin",
        }
    }


CREDENTIAL = (
    '{"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential", '
    '"status": {"token": "test-token"}}'
)


def test_the_auth_plugin_token_is_used(server, tmp_path):
    user = plugin(tmp_path, f'test "$1" = --x && test -n "$KUBERNETES_EXEC_INFO" && echo \'{CREDENTIAL}\'')
    assert read(server, "ok", user)["metadata"]["name"] == "ok"


def test_a_stalled_auth_plugin_is_bounded(server, tmp_path):
    start = time.monotonic()
    with pytest.raises(live.ClusterReadError, match="did not answer within"):
        read(server, "ok", plugin(tmp_path, "sleep 30"))
    assert time.monotonic() - start < FAST.auth + SLACK


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ("echo 'ERROR: token ya29.SECRETSECRET expired' >&2; exit 1", "failed: ERROR: token \\[redacted\\] expired"),
        ("echo not-json", "did not print an ExecCredential"),
        ("echo '{\"status\": {}}'", "did not print an ExecCredential"),
    ],
)
def test_auth_plugin_failures_are_one_line_without_tokens(server, tmp_path, body, words):
    with pytest.raises(live.ClusterReadError, match=words) as caught:
        read(server, "ok", plugin(tmp_path, body))
    assert "SECRET" not in str(caught.value)


def test_a_missing_auth_plugin_gives_the_install_hint(server):
    user = {"exec": {"command": "/nonexistent/gke-gcloud-auth-plugin", "installHint": "gcloud components install x"}}
    with pytest.raises(live.ClusterReadError, match="gke-gcloud-auth-plugin was not found: gcloud components"):
        read(server, "ok", user)


@pytest.mark.parametrize("config", ["", "{}", "current-context: x", "clusters: 5"])
def test_an_unusable_kubeconfig_is_one_line(config):
    with pytest.raises(live.ClusterReadError, match="kubeconfig is not usable"):
        live.get_json(config, "/x", budget=FAST)


def test_the_default_budget_stays_under_30_seconds():
    budget = live.Budget()
    assert budget.total < 30 and budget.auth < budget.total and budget.connect + budget.read <= budget.total


@pytest.mark.parametrize(
    ("api_version", "kind", "name", "path"),
    [
        ("batch/v1", "Job", "a-b", "/apis/batch/v1/namespaces/ns/jobs/a-b"),
        ("jobset.x-k8s.io/v1alpha2", "JobSet", "", "/apis/jobset.x-k8s.io/v1alpha2/namespaces/ns/jobsets"),
    ],
)
def test_object_paths(api_version, kind, name, path):
    assert live.object_path(api_version, kind, "ns", name) == path
