"""Live reads through the official Kubernetes client (infra.k8s.live) against a loopback API server
speaking the real paths, list pages, Status errors and TLS, with real exec auth plugins (scripts)."""

from __future__ import annotations

import base64
import contextlib
import copy
import json
import re
import socket
import stat
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from core.deadline import Budget
from infra.k8s import credentials, live
from tests.conftest import slug
from tests.fake_kube import FakeCluster, cutting_handshakes, fake_cluster, with_state
from tests.loopback import QuietHandler, serve

FAST = live.Budgets(auth=Budget(0.8, 0.8, 0.8), read=Budget(1.2, 0.5, 0.5))
"""Budgets a test runs out of on purpose: a hanging plugin, the retries a budget leaves room for."""
ROOMY = live.Budgets(auth=Budget(30.0, 30.0, 30.0), read=Budget(30.0, 10.0, 10.0))
"""Budgets no test that passes within them waits out: a host that stalls a second (a busy CI machine) fails none."""
SLACK = 1.0
JOBSET = "jobset.x-k8s.io/v1alpha2"


@pytest.fixture(scope="module")
def cluster():
    with fake_cluster() as running:
        yield running


@pytest.fixture
def pauses(monkeypatch) -> list[float]:
    """The reader's pauses between tries, taken at once on a clock only they move: the budget is spent as if each had
    been waited out, and by nothing else (a host that stalls changes no decision)."""
    slept: list[float] = []
    start = time.monotonic()
    monkeypatch.setattr(live, "retry_clock", lambda: start + sum(slept))
    monkeypatch.setattr(live, "retry_sleep", slept.append)
    return slept


def manifest(kind: str, name: str, labels: dict | None = None) -> dict:
    assert kind == "JobSet"
    spec = {"replicatedJobs": [{"name": "head", "replicas": 1}]}
    return {
        "apiVersion": JOBSET,
        "kind": kind,
        "metadata": {"name": name, "namespace": "tpu-rl", "labels": labels or {}},
        "spec": spec,
    }


def reader(config, budgets=ROOMY) -> live.ClusterReader:
    return live.ClusterReader(config, budgets)


def test_objects_are_read_over_tls_and_a_missing_one_is_none(cluster: FakeCluster):
    stored = cluster.put(with_state(manifest("JobSet", "run-a"), "failed"))
    found = reader(cluster.kubeconfig()).get(JOBSET, "JobSet", "tpu-rl", "run-a")
    assert found is not None
    assert found["metadata"]["uid"] == stored["metadata"]["uid"] and found["status"]["terminalState"] == "Failed"
    assert reader(cluster.kubeconfig()).get(JOBSET, "JobSet", "tpu-rl", "never-created") is None
    assert cluster.requests[-1] == "/apis/jobset.x-k8s.io/v1alpha2/namespaces/tpu-rl/jobsets/never-created"


def test_the_clusters_ca_is_a_file_written_whole_before_any_reader_gets_its_name(cluster: FakeCluster, monkeypatch):
    """The client's own temp file for certificate-authority-data is named before it is written (kubernetes 37.0.2
    ``_create_temp_file_with_content``): a second thread could take it empty, and its TLS failed with
    NO_CERTIFICATE_OR_CRL_FOUND. The reader hands the client a file of its own, so the client writes none."""
    from kubernetes.config import kube_config

    def racy(*args, **kwargs):
        raise AssertionError("the client wrote a temp file of the kubeconfig's data")

    monkeypatch.setattr(kube_config, "_create_temp_file_with_content", racy)
    readers = [reader(cluster.kubeconfig()) for _ in range(2)]
    assert [r.get(JOBSET, "JobSet", "tpu-rl", "absent") for r in readers] == [None, None]
    ca = base64.b64decode(cluster.kubeconfig()["clusters"][0]["cluster"]["certificate-authority-data"])
    assert [Path(name).read_bytes() for name in credentials._FILES.values()].count(ca) == 1, "one file per content"
    bad = copy.deepcopy(cluster.kubeconfig())
    bad["clusters"][0]["cluster"]["certificate-authority-data"] = "not base64!"
    with pytest.raises(live.ClusterReadError, match="certificate-authority-data is not base64"):
        reader(bad).get(JOBSET, "JobSet", "tpu-rl", "absent")


def test_a_crd_that_is_not_installed_yet_reads_as_absent(cluster: FakeCluster):
    cluster.missing_groups.add("jobset.x-k8s.io")
    try:
        assert reader(cluster.kubeconfig()).get(JOBSET, "JobSet", "tpu-rl", "x") is None
        assert reader(cluster.kubeconfig()).list(JOBSET, "JobSet", "tpu-rl", "a=b") == []
    finally:
        cluster.missing_groups.clear()


def test_lists_follow_every_page_and_the_selector(cluster: FakeCluster, monkeypatch):
    monkeypatch.setattr(live, "PAGE_SIZE", 2)
    for index in range(5):
        cluster.put(manifest("JobSet", f"page-{index}", {"app": "tpu-rl", "n": str(index % 2)}))
    names = [
        item["metadata"]["name"]
        for item in reader(cluster.kubeconfig()).list(JOBSET, "JobSet", "tpu-rl", "app=tpu-rl,n=0")
    ]
    assert names == ["page-0", "page-2", "page-4"]
    assert any("continue=2" in r for r in cluster.requests), "the second page was read"


def test_endless_pages_are_refused(monkeypatch):
    class Endless(QuietHandler):
        def do_GET(self):  # noqa: N802
            self.send_json(200, {"kind": "JobSetList", "metadata": {"continue": "more"}, "items": []})

    monkeypatch.setattr(live, "MAX_PAGES", 3)
    with serve(Endless) as url, pytest.raises(live.ClusterReadError, match="more than 3 pages"):
        reader(FakeCluster().kubeconfig() | {"clusters": [{"name": "test", "cluster": {"server": url}}]}).list(
            JOBSET, "JobSet", "tpu-rl", "a=b"
        )


def test_an_answer_past_the_cap_is_one_line_and_a_gzipped_one_is_read(monkeypatch):
    """The one bounded read (core.bounded) on the client's urllib3 answer: received or inflated, past the cap is
    one line naming the request and the fix; within it, gzip is inflated."""
    import gzip

    jobset = {"kind": "JobSet", "metadata": {"name": "x"}}

    class Large(QuietHandler):
        def do_GET(self):  # noqa: N802
            if self.path.endswith("/small"):
                self.send_body(200, gzip.compress(json.dumps(jobset).encode()), **{"Content-Encoding": "gzip"})
            elif self.path.endswith("/packed"):
                self.send_body(200, gzip.compress(b" " * 5000), **{"Content-Encoding": "gzip"})
            else:
                self.send_body(200, b" " * 5000)

    monkeypatch.setattr(live, "CAP", live.Cap(4096, live.CAP.fix))
    with serve(Large) as url:
        config = FakeCluster().kubeconfig() | {"clusters": [{"name": "test", "cluster": {"server": url}}]}
        assert reader(config).get(JOBSET, "JobSet", "tpu-rl", "small") == jobset
        for name in ("plain", "packed"):
            with pytest.raises(live.ClusterReadError) as caught:
                reader(config).get(JOBSET, "JobSet", "tpu-rl", name)
            assert str(caught.value) == (
                f"GET {url.split('://')[1]}/apis/jobset.x-k8s.io/v1alpha2/namespaces/tpu-rl/jobsets/{name} replied "
                "more than 4 KiB (check the kubeconfig's server or a proxy in the way)"
            )


@pytest.mark.parametrize(
    ("user", "words"),
    [
        ({"token": "wrong"}, r"refused to read /apis/.*/jobsets/x \(HTTP 401\): the identity running `pulumi` needs"),
    ],
)
def test_refused_access_is_one_line(cluster: FakeCluster, user, words):
    with pytest.raises(live.ClusterReadError, match=words) as caught:
        reader(cluster.kubeconfig(user)).get(JOBSET, "JobSet", "tpu-rl", "x")
    assert "\n" not in str(caught.value)


def test_a_failed_reader_fails_again_at_once_with_the_same_line():
    """Once a cluster is found unreachable, the remaining reads of that `up` or preview skip at once."""
    gone = FakeCluster().start(tls=False)
    config = gone.kubeconfig()
    gone.stop()
    shared = reader(config)
    with pytest.raises(
        live.ClusterReadError, match="cannot reach the cluster at 127.0.0.1:.*authorizedNetworks"
    ) as first:
        shared.get(JOBSET, "JobSet", "tpu-rl", "a")
    start = time.monotonic()
    for _ in range(3):
        with pytest.raises(live.ClusterReadError) as again:
            shared.list(JOBSET, "JobSet", "tpu-rl", "a=b")
        assert str(again.value) == str(first.value)
    assert time.monotonic() - start < 0.05


def test_an_untrusted_certificate_is_a_tls_line_naming_why_and_is_not_retried(cluster: FakeCluster):
    before = len(cluster.requests)
    with cutting_handshakes(cluster, cut=0) as relay, pytest.raises(live.ClusterReadError) as failed:
        del relay.kubeconfig["clusters"][0]["cluster"]["certificate-authority-data"]
        reader(relay.kubeconfig).get(JOBSET, "JobSet", "tpu-rl", "x")
    assert re.fullmatch(
        "TLS with the cluster at 127.0.0.1:[0-9]+ failed \\(certificate: unable to get local issuer certificate\\); "
        "is the kubeconfig current\\?",
        str(failed.value),
    ), failed.value
    assert relay.connections == 1, "one handshake: a certificate that does not verify is not tried again"
    assert len(cluster.requests) == before


def test_a_handshake_cut_short_is_retried_like_a_reset(cluster: FakeCluster, pauses):
    cluster.put(with_state(manifest("JobSet", "cut-a"), "failed"))
    with cutting_handshakes(cluster, cut=1) as relay:
        found = reader(relay.kubeconfig, live.Budgets(auth=ROOMY.auth, read=Budget(10.0, 2.0, 2.0))).get(
            JOBSET, "JobSet", "tpu-rl", "cut-a"
        )
    assert found is not None and found["metadata"]["name"] == "cut-a"
    assert relay.connections == 2, "the cut handshake, then the one that answered"
    assert pauses == [0.5], "after the default backoff"


def test_handshakes_cut_short_every_time_are_one_line_naming_the_network(cluster: FakeCluster, pauses):
    with cutting_handshakes(cluster, cut=100) as relay, pytest.raises(live.ClusterReadError) as failed:
        reader(relay.kubeconfig, FAST).get(JOBSET, "JobSet", "tpu-rl", "x")
    assert relay.connections == 2 and pauses == [0.5], "tried again within the budget (1.2 s), not after 1.5 s"
    assert str(failed.value) == (
        f"the cluster at {relay.kubeconfig['clusters'][0]['cluster']['server'][8:]} kept closing the connection "
        "during the TLS handshake: is this machine in tpu-rl:authorizedNetworks, and is a proxy in the way?"
    )


@contextlib.contextmanager
def plain_http(reset_tls: bool) -> Iterator[str]:
    """A plain HTTP server's address: a request gets its 400; a TLS ClientHello gets the 400 too, or (``reset_tls``)
    a reset, which is what the client meets first when the server closes with the rest of the hello unread and the
    reset wins the race with its 400."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(10)

    def serve() -> None:
        with contextlib.suppress(OSError):
            while True:
                connection, _ = listener.accept()
                with connection:
                    first = connection.recv(1)
                    if first == b"\x16" and reset_tls:
                        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                        continue
                    connection.recv(65536)
                    connection.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()


@pytest.mark.parametrize("reset_tls", [False, True], ids=["its-400-read-first", "the-reset-first"])
def test_a_plain_http_server_at_an_https_address_is_bad_input_whichever_the_client_meets_first(reset_tls, pauses):
    """The same fault, the same line and code every run: not a TLS record the client cannot parse one run (2) and a
    reset retried until the budget ends the next (1)."""
    with plain_http(reset_tls) as where, pytest.raises(live.ClusterReadError) as failed:
        config = FakeCluster().kubeconfig()
        config["clusters"][0]["cluster"]["server"] = f"https://{where}"
        reader(config).get(JOBSET, "JobSet", "tpu-rl", "x")
    assert (failed.value.exit_code, pauses) == (2, []), "not retried"
    assert str(failed.value) == (
        f"the cluster at {where} answers plain HTTP, not TLS: the kubeconfig's https:// server is not an API "
        "server's address (another service's port?), or the kubeconfig is not current"
    )


# ---------------------------------------------------------------------------------------------
# The exec auth plugin (as gke-gcloud-auth-plugin speaks it)


def plugin(tmp_path, body: str, *, hint: str = "install the plugin") -> dict:
    path = tmp_path / "gke-gcloud-auth-plugin"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": str(path),
            "args": ["--use_application_default_credentials"],
            "provideClusterInfo": True,
            "installHint": hint,
        }
    }


def credential(token: str) -> str:
    status = {"expirationTimestamp": "2099-01-01T00:00:00Z", "token": token}
    kind = {"kind": "ExecCredential", "apiVersion": "client.authentication.k8s.io/v1beta1"}
    return json.dumps({**kind, "spec": {"interactive": False}, "status": status})


def test_the_plugin_gets_the_cluster_info_and_its_token_is_used(cluster: FakeCluster, tmp_path):
    cluster.put(manifest("JobSet", "with-plugin"))
    body = (
        'test "$1" = --use_application_default_credentials || exit 9\n'
        'echo "$KUBERNETES_EXEC_INFO" | grep -q certificate-authority-data || exit 8\n'
        f"echo '{credential(cluster.token)}'\n"
    )
    found = reader(cluster.kubeconfig(plugin(tmp_path, body))).get(JOBSET, "JobSet", "tpu-rl", "with-plugin")
    assert found is not None and found["metadata"]["name"] == "with-plugin"


def ended(pid: int) -> bool:
    """Whether process ``pid`` has ended (gone, or a zombie its new parent has yet to reap)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


@pytest.mark.slow
@pytest.mark.parametrize(
    "hangs",
    [
        "sleep 300 &\necho $$ $! > {pids}\nwait\n",  # the plugin, and a gcloud it waits on
        "exec >&- 2>&-\nsleep 300 &\necho $$ $! > {pids}\nwait\n",  # its outputs closed first: it lives on
    ],
    ids=["waiting-on-a-child", "outputs-closed"],
)
def test_a_hanging_plugin_is_bounded_killed_with_what_it_started_and_later_reads_skip(
    cluster: FakeCluster, tmp_path, hangs
):
    pids = tmp_path / "pids"
    body = hangs.format(pids=pids)
    shared = reader(cluster.kubeconfig(plugin(tmp_path, body)), FAST)
    start = time.monotonic()
    with pytest.raises(live.ClusterReadError, match="gke-gcloud-auth-plugin did not answer within 1 s"):
        shared.get(JOBSET, "JobSet", "tpu-rl", "x")
    with pytest.raises(live.ClusterReadError, match="did not answer within"):
        shared.get(JOBSET, "JobSet", "tpu-rl", "y")
    assert time.monotonic() - start < FAST.auth.total + SLACK
    # SIGKILL is delivered as the killed process next runs: look until both have ended, within a second.
    deadline = time.monotonic() + 1
    while not all(ended(int(pid)) for pid in pids.read_text().split()) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert all(ended(int(pid)) for pid in pids.read_text().split())


def test_a_ctrl_c_while_the_plugin_runs_kills_it(tmp_path, monkeypatch):
    started = []

    def interrupted(process, name, seconds):
        started.append(process.pid)
        raise KeyboardInterrupt

    monkeypatch.setattr(credentials, "_collect", interrupted)
    exec_config = plugin(tmp_path, "sleep 300\n")["exec"]
    with pytest.raises(KeyboardInterrupt):
        credentials.run_plugin(exec_config, {"server": "https://h"}, 10)
    assert len(started) == 1 and ended(started[0])


def test_a_plugin_that_prints_without_end_is_stopped_at_the_limit(tmp_path):
    exec_config = plugin(tmp_path, "yes\n")["exec"]
    with pytest.raises(live.ClusterReadError, match=f"printed more than {credentials.OUTPUT_LIMIT} bytes"):
        credentials.run_plugin(exec_config, {"server": "https://h"}, 10)


@pytest.mark.parametrize("size", [credentials.OUTPUT_LIMIT, credentials.OUTPUT_LIMIT + 1], ids=["limit", "past"])
def test_what_a_plugin_prints_is_read_up_to_the_limit(tmp_path, size):
    printed = credential("t" * 16)
    padding = size - len(printed) - 1  # the JSON, then spaces up to `size` bytes with its newline
    exec_config = plugin(tmp_path, f"printf '%s%{padding}s\\n' '{printed}' ''\n")["exec"]
    if size > credentials.OUTPUT_LIMIT:
        with pytest.raises(live.ClusterReadError, match="printed more than"):
            credentials.run_plugin(exec_config, {"server": "https://h"}, 10)
    else:
        assert credentials.run_plugin(exec_config, {"server": "https://h"}, 10)["token"] == "t" * 16


def test_the_exec_info_says_not_interactive_and_gives_the_cluster_only_when_asked():
    cluster = {
        "server": "https://h",
        "certificate-authority-data": "Q0E=",
        "extensions": [{"name": "other", "extension": 1}, {"name": credentials.EXEC_EXTENSION, "extension": {"a": 1}}],
    }
    asked = {"apiVersion": "client.authentication.k8s.io/v1", "command": "p", "provideClusterInfo": True}
    assert json.loads(credentials.exec_info(asked, cluster)) == {
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "spec": {
            "interactive": False,
            "cluster": {"server": "https://h", "certificate-authority-data": "Q0E=", "config": {"a": 1}},
        },
    }
    not_asked = {**asked, "provideClusterInfo": False}
    assert json.loads(credentials.exec_info(not_asked, cluster))["spec"] == {"interactive": False}
    without_extension = {k: v for k, v in cluster.items() if k != "extensions"}
    assert "config" not in json.loads(credentials.exec_info(asked, without_extension))["spec"]["cluster"]


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (
            "echo 'ERROR: token ya29.SECRETSECRET expired' >&2; exit 1",
            r"failed: process returned 1\. ERROR: token \[redacted\] expired",
        ),
        ("echo not-json", "failed: what it printed is not JSON"),
        (
            'echo \'{"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential", "status": {}}\'',
            "did not print an ExecCredential with a token",
        ),
        (
            'echo \'{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": {}}\'',
            "failed: it printed apiVersion client.authentication.k8s.io/v1, not client.authentication.k8s.io/v1beta1",
        ),
        (
            'echo \'{"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "Status", "status": {}}\'',
            "did not print an ExecCredential with a token",
        ),
        ("echo '[]'", "did not print an ExecCredential with a token"),
        ("exit 4", r"failed: process returned 4$"),
        ("printf '\\033[31mRED\\033[0m\\n' >&2; exit 3", r"failed: process returned 3\. RED$"),
    ],
    ids=[
        "stderr-with-token",
        "not-json",
        "no-token",
        "other-version",
        "other-kind",
        "a-list",
        "silent",
        "ansi-in-stderr",
    ],
)
def test_plugin_failures_are_one_line_without_tokens_or_escapes(cluster: FakeCluster, tmp_path, body, words):
    with pytest.raises(live.ClusterReadError, match=words) as caught:
        reader(cluster.kubeconfig(plugin(tmp_path, body))).get(JOBSET, "JobSet", "tpu-rl", "x")
    assert "SECRET" not in str(caught.value) and "\x1b" not in str(caught.value) and "\n" not in str(caught.value)


def test_a_missing_plugin_gives_the_install_hint(cluster: FakeCluster):
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": "/nonexistent/gke-gcloud-auth-plugin",
            "installHint": "gcloud components install x",
        }
    }
    with pytest.raises(
        live.ClusterReadError, match="gke-gcloud-auth-plugin was not found: gcloud components install x"
    ):
        reader(cluster.kubeconfig(user)).get(JOBSET, "JobSet", "tpu-rl", "x")


# ---------------------------------------------------------------------------------------------
# kubeconfig shapes and files


EXEC_SHAPES = [
    # What run_plugin reads of the exec block, refused before it reads it (a TypeError or KeyError otherwise).
    ("command: p, apiVersion: v1, env: x", "exec plugin: env: Input should be a valid list"),
    ("command: p, apiVersion: v1, env: [x]", "exec plugin: env.0: Input should be a valid dictionary"),
    ("command: p, apiVersion: v1, env: [{name: A}]", "exec plugin: env.0.value: Field required"),
    ("command: p, apiVersion: v1, env: [{name: A, value: 1}]", "exec plugin: env.0.value: Input should be a valid"),
    ("command: p, apiVersion: v1, env: [{value: b}]", "exec plugin: env.0.name: Field required"),
    ("command: p, apiVersion: v1, args: x", "exec plugin: args: Input should be a valid list"),
    ("command: p, apiVersion: v1, args: [--a, 2]", "exec plugin: args.1: Input should be a valid string"),
    ("command: p, apiVersion: 1", "exec plugin: apiVersion: Input should be a valid string"),
    ("command: p", "exec plugin: apiVersion: Field required"),
]


@pytest.mark.parametrize(
    ("config", "words"),
    [
        ("", "it is not a mapping"),
        ("{}", "no current context"),
        ("current-context: x", "no context x"),
        ("current-context: x\ncontexts: 5", "contexts is not a list"),
        ("current-context: x\ncontexts: [{name: x}]", "an entry of contexts has no name or context"),
        ("current-context: x\ncontexts: [{name: x, context: {cluster: c}}]", "the context's cluster has no server"),
        (
            "current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\nclusters: [{name: c, cluster: {server: ftp://h}}]",
            "not an http\\(s\\) URL",
        ),
        (
            "current-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
            "clusters: [{name: c, cluster: {server: 'https://h'}}]\nusers: [{name: u, user: {exec: {args: [1]}}}]",
            "exec plugin has no command",
        ),
        *(
            (
                "current-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
                "clusters: [{name: c, cluster: {server: 'https://h'}}]\n"
                f"users: [{{name: u, user: {{exec: {{{plugin}}}}}}}]",
                words,
            )
            for plugin, words in EXEC_SHAPES
        ),
        ("a: &x [1]\nb: *x", "YAML aliases"),
        ("[" * 100 + "]" * 100, "nested deeper than 64"),
        ("a: " + "9" * 5000, "out of range"),
    ],
    ids=[
        "empty",
        "no-context",
        "unknown-context",
        "contexts-not-list",
        "context-without-body",
        "no-server",
        "not-http",
        "exec-without-command",
        *(f"exec-{slug(plugin.removeprefix('command: p, apiVersion: v1, '))}" for plugin, _ in EXEC_SHAPES),
        "alias",
        "deep",
        "huge-int",
    ],
)
def test_an_unusable_kubeconfig_is_one_line(config, words):
    with pytest.raises(live.ClusterReadError, match=words) as caught:
        reader(config).get(JOBSET, "JobSet", "tpu-rl", "x")
    assert "\n" not in str(caught.value)


def test_kubeconfig_files_merge_like_kubectl_and_are_read_with_limits(tmp_path, cluster: FakeCluster):
    first = tmp_path / "a"
    first.write_text(yaml.safe_dump(cluster.kubeconfig(context="wanted")))
    second = tmp_path / "b"
    other = cluster.kubeconfig(context="wanted")
    other["clusters"][0]["cluster"]["server"] = "https://elsewhere"
    second.write_text(yaml.safe_dump(other))
    merged = credentials.kubeconfig_from_files([tmp_path / "missing", first, second], "wanted")
    assert merged["clusters"][0]["cluster"]["server"] == cluster.url, "the first definition of a name wins"
    with pytest.raises(live.ClusterReadError, match="no context nope in"):
        credentials.kubeconfig_from_files([first], "nope")
    with pytest.raises(live.ClusterReadError, match="not a regular file"):
        credentials.kubeconfig_from_files([tmp_path], "wanted")
    with pytest.raises(live.ClusterReadError, match="not a regular file"):
        credentials.kubeconfig_from_files([__import__("pathlib").Path("/dev/zero")], "wanted")
