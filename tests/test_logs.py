"""`make logs` (``tools.logs``) against the loopback Kubernetes API server (``tests.fake_kube``), which here also
serves a pod's log as the API server does (``GET /api/v1/namespaces/NS/pods/POD/log``: ``text/plain``, the last
``tailLines`` lines cut at ``limitBytes``; an unknown pod is a 404 ``Status``, an unknown container a 400). No
wall-clock waits: every answer is immediate."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml

from tests import fake_kube
from tests.fake_kube import FakeCluster, status_body, step_pod, with_state
from tests.lifecycle_walk import settings
from tools import logs as logs_cli
from workloads.specs.step_specs import plan_workflow

DEV = settings("dev", [])
PLAN = {step.step: step for step in plan_workflow(DEV).steps}
NAMESPACE = DEV.namespace
TOKEN_LIKE = "hf_" + "Q" * 30


class _LogHandler(fake_kube._Handler):
    """The fake API server plus ``pods/<name>/log``."""

    def do_GET(self) -> None:  # noqa: N802
        url = urlsplit(self.path)
        parts = url.path.strip("/").split("/")
        if not (len(parts) == 7 and parts[:3] == ["api", "v1", "namespaces"] and parts[4:7:2] == ["pods", "log"]):
            super().do_GET()
            return
        cluster: LogCluster = self.server.cluster  # type: ignore[assignment]
        cluster.requests.append(self.path)
        if self.headers.get("Authorization") != f"Bearer {cluster.token}":
            self._json(401, status_body(401, "Unauthorized", "Unauthorized"))
            return
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        namespace, name = parts[3], parts[5]
        pod = next((p for p in cluster.core.get(("pods", namespace), []) if p["metadata"]["name"] == name), None)
        if pod is None:
            self._json(404, status_body(404, "NotFound", f'pods "{name}" not found', {"name": name, "kind": "pods"}))
            return
        container = query.get("container", "")
        if container not in [c["name"] for c in pod["spec"].get("containers", [])]:
            message = f"container {container} is not valid for pod {name}"
            self._json(400, status_body(400, "BadRequest", message))
            return
        lines = cluster.logs.get((name, container), "").splitlines(keepends=True)
        if "tailLines" in query:
            lines = lines[-int(query["tailLines"]) :]
        body = "".join(lines).encode()
        if "limitBytes" in query:
            body = body[: int(query["limitBytes"])]
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class LogCluster(FakeCluster):
    def __init__(self) -> None:
        super().__init__()
        self.logs: dict[tuple[str, str], str] = {}
        """(pod, container) -> its log."""


@pytest.fixture
def kube(monkeypatch) -> Iterator[LogCluster]:
    monkeypatch.setattr(fake_kube, "_Handler", _LogHandler)  # FakeCluster.start serves this handler
    cluster = LogCluster().start()
    try:
        yield cluster  # type: ignore[misc]
    finally:
        cluster.stop()


@pytest.fixture
def kubeconfig(kube, tmp_path):
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(kube.kubeconfig(context=DEV.kube_context)))
    return path


def pod(jobset: dict[str, Any], rjob: str, state: str, *, attempt: int, index: int = 0, exit_code: int = 0):
    """A pod of ``rjob`` as the JobSet and Job controllers label it (``restart-attempt``, ``job-index``,
    ``job-completion-index``), with the containers of its template; ``failed``: its first container exited
    ``exit_code``."""
    made = step_pod(jobset, rjob, "running", index=index)
    template = next(r for r in jobset["spec"]["replicatedJobs"] if r["name"] == rjob)["template"]["spec"]["template"]
    containers = [c["name"] for c in template["spec"]["containers"]]
    made["metadata"]["name"] = f"{jobset['metadata']['name']}-{rjob}-0-{index}-a{attempt}"
    made["metadata"]["labels"].update(
        {
            "jobset.sigs.k8s.io/restart-attempt": str(attempt),
            "jobset.sigs.k8s.io/job-index": "0",
            "batch.kubernetes.io/job-completion-index": str(index),
        }
    )
    made["spec"]["containers"] = [{"name": name, "image": "x"} for name in containers]
    if state == "failed":
        made["status"] = {
            "phase": "Failed",
            "containerStatuses": [
                {"name": containers[0], "state": {"terminated": {"exitCode": exit_code, "reason": "Error"}}}
            ],
        }
    return made


def serve(kube: LogCluster, step: str, state: str, pods: list[dict[str, Any]], *, restarts: int = 0) -> None:
    kube.put(with_state(PLAN[step].manifest, state, restarts=restarts))
    kube.core[("pods", NAMESPACE)] = [copy.deepcopy(p) for p in pods]


def run(kubeconfig, capsys, *args: str) -> tuple[int, str, str]:
    code = logs_cli.main(["--stack", "dev", "--kubeconfig", str(kubeconfig), *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_cpu_steps_log_its_last_lines_bounded(kube, kubeconfig, capsys):
    jobset = PLAN["convert"].manifest
    only = pod(jobset, "convert", "running", attempt=0)
    serve(kube, "convert", "running", [only])
    kube.logs[(only["metadata"]["name"], "convert")] = "".join(f"line {n}\n" for n in range(1, 301))
    code, out, err = run(kubeconfig, capsys, "--step", "convert", "--tail", "5")
    assert code == 0
    assert out.splitlines() == [f"line {n}" for n in range(296, 301)]
    assert err == f"logs of {only['metadata']['name']}, container convert (attempt 0, the coordinator)\n"
    asked = next(r for r in kube.requests if r.endswith("/log") or "/log?" in r)
    assert "tailLines=5" in asked and f"limitBytes={logs_cli.MAX_LOG_BYTES}" in asked and "container=convert" in asked


def test_a_log_past_the_cap_is_cut_not_refused(kube, kubeconfig, capsys, monkeypatch):
    """``limitBytes`` "may return slightly more" (PodLogOptions): the one bounded read keeps the first bytes."""
    monkeypatch.setattr(logs_cli, "LOG_CAP", logs_cli.Cap(40, "unused", cut=True))
    jobset = PLAN["convert"].manifest
    only = pod(jobset, "convert", "running", attempt=0)
    serve(kube, "convert", "running", [only])
    kube.logs[(only["metadata"]["name"], "convert")] = "".join(f"line {n}\n" for n in range(1, 301))
    code, out, _ = run(kubeconfig, capsys, "--step", "convert", "--tail", "300")
    assert code == 0
    assert out == "".join(f"line {n}\n" for n in range(1, 301))[:40] + "\n", out


def test_training_shows_the_newest_attempts_coordinator_then_the_pod_that_failed(kube, kubeconfig, capsys):
    """After a restart (attempt 1) the old attempt's failed worker is not shown: the new attempt's head is; when a
    worker of the new attempt fails, it is."""
    jobset = PLAN["train"].manifest
    old_worker = pod(jobset, "worker", "failed", attempt=0, index=1, exit_code=137)
    head = pod(jobset, "pathways-head", "running", attempt=1)
    workers = [pod(jobset, "worker", "running", attempt=1, index=i) for i in range(2)]
    serve(kube, "train", "running", [old_worker, head, *workers], restarts=1)
    for made in (old_worker, head, *workers):
        for container in made["spec"]["containers"]:
            kube.logs[(made["metadata"]["name"], container["name"])] = (
                f"{made['metadata']['name']}/{container['name']}\n"
            )
    code, out, err = run(kubeconfig, capsys, "--step", "train")
    assert code == 0 and out == f"{head['metadata']['name']}/workload-container\n"
    assert f"(attempt 1, the coordinator); other pods: {workers[0]['metadata']['name']}" in err
    assert old_worker["metadata"]["name"] not in err, "only the newest attempt's pods are offered"

    workers[1] = pod(jobset, "worker", "failed", attempt=1, index=1, exit_code=1)
    serve(kube, "train", "running", [old_worker, head, *workers], restarts=1)
    code, out, err = run(kubeconfig, capsys, "--step", "train")
    assert code == 0 and out == f"{workers[1]['metadata']['name']}/pathways-worker\n"
    assert err.startswith(f"logs of {workers[1]['metadata']['name']}, container pathways-worker (attempt 1, failed)")

    code, out, _ = run(kubeconfig, capsys, "--step", "train", "--pod", workers[0]["metadata"]["name"])
    assert code == 0 and out == f"{workers[0]['metadata']['name']}/pathways-worker\n"


def test_the_log_is_redacted_like_the_status(kube, kubeconfig, capsys):
    jobset = PLAN["export"].manifest
    only = pod(jobset, "export", "failed", attempt=0, exit_code=1)
    serve(kube, "export", "failed", [only])
    text = f"token {TOKEN_LIKE} read\n\x1b]0;title\x07\x1b[31mred\x1b[0m\n    indented\tand tabbed\n"
    kube.logs[(only["metadata"]["name"], "export")] = text
    code, out, err = run(kubeconfig, capsys, "--step", "export")
    assert code == 0 and "(attempt 0, failed)" in err
    assert out == "token [redacted] read\nred\n    indented\tand tabbed\n"


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["--step", "nope"],
            "error: --step 'nope' is not a step; the steps are convert, train, export, evaluate, publish",
        ),
        (
            ["--step", "evaluate"],
            "error: stack dev runs no evaluate step (tpu-rl:workflow.steps.evaluate is false); its steps are "
            "convert, train, export",
        ),
        (
            ["--step", "publish"],
            "error: stack dev runs no publish step (tpu-rl:publish.repo is not set); its steps are convert, train, "
            "export",
        ),
        (
            ["--step", "train", "--pod", "someone-else"],
            "error: --pod 'someone-else' is not a pod of step train; its pods: ",
        ),
        (
            ["--step", "train", "--set", "tpu-rl:tpu.slices=0", "--set", "tpu-rl:cpuPool.minNodes=-1"],
            'error: tpu-rl:tpu.slices = "0" is invalid: must be at least 1',
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, line, kube, kubeconfig, capsys):
    jobset = PLAN["train"].manifest
    serve(kube, "train", "running", [pod(jobset, "pathways-head", "running", attempt=0)])
    code, out, err = run(kubeconfig, capsys, *args)
    assert code == 2 and out == ""
    assert err.splitlines()[0].startswith(line), err
    if "--set" in args:  # every config problem, one line each
        assert err.splitlines()[1] == 'error: tpu-rl:cpuPool.minNodes = "-1" is invalid: must be at least 0'


def test_a_tail_out_of_bounds_is_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit) as exited:
        logs_cli.main(["--stack", "dev", "--step", "train", "--tail", "0"])
    assert exited.value.code == 2 and "is not a number of lines from 1 to 10000" in capsys.readouterr().err


def test_a_step_not_started_is_exit_1(kube, kubeconfig, capsys):
    code, out, err = run(kubeconfig, capsys, "--step", "convert")
    assert code == 1 and out == ""
    assert err == f"error: step convert has not started: JobSet {NAMESPACE}/{PLAN['convert'].name} does not exist\n"


@pytest.mark.parametrize(
    ("server", "words"),
    [
        ("https://127.0.0.1:99999", "Port out of range"),
        ("https://[::1", "Invalid IPv6 URL"),
        ("https://exa mple.com", "is not a URL"),
        ("https://:443", "names no host"),
        ("ftp://127.0.0.1:1", "is not an http(s) URL"),
    ],
    ids=["port-out-of-range", "bracket-not-closed", "space-in-host", "no-host", "not-http"],
)
def test_a_server_that_is_no_url_is_bad_input_one_line_exit_2(server, words, kube, kubeconfig, capsys):
    """Not a cluster that cannot be reached (exit 1): no retry cures the kubeconfig."""
    config = yaml.safe_load(kubeconfig.read_text())
    config["clusters"][0]["cluster"]["server"] = server
    kubeconfig.write_text(yaml.safe_dump(config))
    code, out, err = run(kubeconfig, capsys, "--step", "convert")
    assert (code, out, err.count("\n")) == (2, "", 1), err
    assert err.startswith("error: the kubeconfig is not usable: the cluster's server ") and words in err, err


def test_an_unreachable_cluster_is_one_line_and_exit_1(kube, kubeconfig, capsys):
    kube.stop()
    code, out, err = run(kubeconfig, capsys, "--step", "convert")
    assert code == 1 and out == "" and err.count("\n") == 1, "a retry may cure it"
    assert err.startswith("error: cannot read the cluster: cannot reach the cluster at 127.0.0.1:")
