"""The training head's view of its slice (``workloads/container/slice_state.py``): the wait before train_rl starts and
the evidence after a "maybe down" error, on a fake clock (no wall waits), against pods as the API server reports them
and, for the client itself, against the loopback API server (TLS, bearer token, label selector)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fake_kube import TOKEN, fake_cluster, restarted, step_pod
from workloads.container import slice_state
from workloads.container.slice_state import Api, Clock, Ended, Worker, check, evidence, wait
from workloads.container.tpu_rl_program import FailedError, RefusedError

HOUR = 3600.0
BUDGET = 4.5 * HOUR
WALL0 = 1_796_032_800.0
"""2026-11-30 10:00 UTC: the fake clock's wall time at its start."""


class FakeClock(Clock):
    """A clock that moves only when the program sleeps."""

    def __init__(self) -> None:
        self.t = 0.0
        super().__init__(now=lambda: self.t, wall=lambda: WALL0 + self.t, sleep=self._sleep)
        self.slept = 0

    def _sleep(self, seconds: float) -> None:
        self.slept += 1
        self.t += seconds


def ready(index: int, restarts: int = 0) -> Worker:
    return Worker(f"run-worker-0-{index}-x", f"uid-{index}", True, restarts, None, "Running")


def pending(index: int, why: str = "Pending: 0/4 nodes are available: 4 didn't match") -> Worker:
    return Worker(f"run-worker-0-{index}-x", f"uid-{index}-new", False, 0, None, why)


class Timeline:
    """An API whose answer at each read is the last event's at or before the clock's hour."""

    def __init__(self, clock: FakeClock, events: list[tuple[float, object]]) -> None:
        self.clock, self.events, self.reads = clock, sorted(events, key=lambda e: e[0]), 0

    def pods(self) -> list[Worker]:
        self.reads += 1
        answer = [value for at, value in self.events if at * HOUR <= self.clock.t][-1]
        if isinstance(answer, Exception):
            raise answer
        return list(answer)  # type: ignore[call-overload]


ALL = [ready(i) for i in range(8)]
AWAY = [pending(i) for i in range(8)]


def run_wait(tmp_path: Path, events: list[tuple[float, object]], budget: float = BUDGET) -> tuple[bool, list[str]]:
    clock, said = FakeClock(), list[str]()
    api = Timeline(clock, events)
    done = wait(api, 8, budget, str(tmp_path / "baseline.json"), said.append, clock)
    return done, said


def test_a_slice_that_is_up_starts_train_rl_at_once_and_keeps_its_workers_as_the_baseline(tmp_path):
    done, said = run_wait(tmp_path, [(0, ALL)])
    assert done and said == ["tpu-rl: the slice is up: 8 of 8 workers Ready; starting train_rl"]
    baseline = json.loads((tmp_path / "baseline.json").read_text())
    assert baseline == {f"uid-{i}": [f"run-worker-0-{i}-x", 0] for i in range(8)}


def test_a_restarted_head_waits_for_its_slice_through_a_four_hour_maintenance(tmp_path):
    """The restarted head starts at once while its workers are Pending (the slice away for 4 h, past the 2 h stall
    bound): it waits, saying what for and until when, then starts train_rl."""
    done, said = run_wait(tmp_path, [(0, AWAY), (2, [*ALL[:3], *AWAY[3:]]), (4, ALL)])
    assert done
    assert said[0] == (
        "tpu-rl: waiting for the slice until 14:30 UTC (tpu-rl:kueue.recoveryTimeout 4h30m): 0 of 8 workers Ready; "
        "run-worker-0-0-x: Pending: 0/4 nodes are available: 4 didn't match"
    )
    assert any(line.startswith("tpu-rl: waiting for the slice until 14:30 UTC") and ": 3 of 8" in line for line in said)
    assert said[-1] == "tpu-rl: the slice is up: 8 of 8 workers Ready after 4h00m; starting train_rl"
    repeats = [line for line in said if ": 0 of 8" in line]
    assert len(repeats) == 2 * 3600 // slice_state.SAY_EVERY, "said at once, then every SAY_EVERY while unchanged"


def test_a_slice_away_past_its_budget_ends_the_wait_with_one_line(tmp_path):
    done, said = run_wait(tmp_path, [(0, AWAY)])
    assert not done and not (tmp_path / "baseline.json").exists()
    assert said[-1] == (
        "tpu-rl: the slice did not come back within tpu-rl:kueue.recoveryTimeout (4h30m): 0 of 8 workers Ready; "
        "run-worker-0-0-x: Pending: 0/4 nodes are available: 4 didn't match; the step fails, and the next "
        "`make up STACK=<stack>` retries it from its last checkpoint (raise the key for a longer maintenance)"
    )
    assert "\n" not in said[-1]


@pytest.mark.parametrize("at", [BUDGET - 20, BUDGET, BUDGET + 20])
def test_the_budget_is_kept_at_its_boundary(tmp_path, at):
    """Back by the budget's last read (it reads every 10 s, the last at the budget itself): it goes on; after it,
    the wait has ended."""
    done, _said = run_wait(tmp_path, [(0, AWAY), (at / HOUR, ALL)])
    assert done == (at <= BUDGET)


def test_a_missing_worker_is_named_as_not_created(tmp_path):
    _done, said = run_wait(tmp_path, [(0, ALL[:6])], budget=60)
    assert said[0].endswith(": 6 of 8 workers Ready; 2 not created yet")


def test_an_api_it_may_not_read_never_holds_the_attempt(tmp_path):
    done, said = run_wait(tmp_path, [(0, RefusedError("HTTP 403 listing the pods"))])
    assert done and said == [
        "tpu-rl: cannot read the slice's workers (HTTP 403 listing the pods): starting train_rl without waiting "
        "for them"
    ]


def test_an_api_it_cannot_reach_holds_the_attempt_five_minutes_at_most(tmp_path):
    clock, said = FakeClock(), list[str]()
    api = Timeline(clock, [(0, FailedError("ConnectionError"))])
    assert wait(api, 8, BUDGET, str(tmp_path / "b.json"), said.append, clock)
    assert slice_state.UNREAD_SECONDS <= clock.t <= slice_state.UNREAD_SECONDS + 10
    assert said == [
        "tpu-rl: cannot read the slice's workers (ConnectionError): starting train_rl without waiting for them"
    ]


def test_a_read_that_fails_once_is_read_again(tmp_path):
    done, said = run_wait(tmp_path, [(0, FailedError("ReadTimeout")), (0.01, ALL)])
    assert done and said[-1].startswith("tpu-rl: the slice is up")


# -- the evidence after a "maybe down" error ----------------------------------------------------------------------

BASE = {f"uid-{i}": [f"run-worker-0-{i}-x", 0] for i in range(8)}


@pytest.mark.parametrize(
    ("workers", "says"),
    [
        (ALL, None),
        (
            [*ALL[:7], Worker("run-worker-0-7-x", "uid-7", True, 0, "EvictionByEvictionAPI", "Running")],
            "DisruptionTarget",
        ),
        (ALL[:7], "worker run-worker-0-7-x of this attempt is gone"),
        ([*ALL[:7], pending(7)], "worker run-worker-0-7-x of this attempt is gone"),  # re-created: another UID
        ([*ALL[:7], ready(7, restarts=1)], "worker run-worker-0-7-x restarted (1 since the attempt began"),
        ([*ALL[:7], Worker("run-worker-0-7-x", "uid-7", False, 0, None, "Running")], "7 of 8 workers Ready"),
    ],
    ids=["healthy", "disrupted", "gone", "replaced", "restarted", "not-ready"],
)
def test_each_kind_of_evidence_says_the_slice_is_down(workers, says):
    found = evidence(workers, 8, BASE)
    assert (found is None) if says is None else (found is not None and found[0] == "down" and says in found[1])


def test_without_a_baseline_only_the_ready_count_is_evidence():
    assert evidence([*ALL[:7], ready(7, restarts=3)], 8, {}) is None
    assert evidence(ALL[:7], 8, {}) == ("down", "7 of 8 workers Ready; 1 not created yet")


# -- a container's own fault: named, not a lost slice ---------------------------------------------------------------

OOM_FIELDS = ("pathways-worker", "OOMKilled", 137)
OOM = Ended(*OOM_FIELDS)
CRASH = Ended("pathways-proxy", "Error", 1)


def faulted(index: int, ended: Ended = OOM, ready: bool = True) -> Worker:
    """Worker ``index`` restarted in place once since the baseline, its container's termination on record."""
    why = "Running" if ready else "Running: pathways-worker CrashLoopBackOff"
    return Worker(f"run-worker-0-{index}-x", f"uid-{index}", ready, 1, None, why, ended=(ended,))


HEAD = Worker("run-pathways-head-0-0-x", "uid-head", True, 0, None, "Running", job="pathways-head")


@pytest.mark.parametrize(
    ("pods", "expected"),
    [
        (
            [*ALL[:7], faulted(7)],
            ("fault", "run-worker-0-7-x: container pathways-worker ended OOMKilled (exit code 137)"),
        ),
        (
            [*ALL[:7], faulted(7, ready=False)],
            ("fault", "run-worker-0-7-x: container pathways-worker ended OOMKilled (exit code 137)"),
        ),
        (
            [*ALL, Worker(HEAD.name, HEAD.uid, True, 1, None, "Running", job=HEAD.job, ended=(CRASH,))],
            ("fault", "run-pathways-head-0-0-x: container pathways-proxy ended Error (exit code 1)"),
        ),
        (
            [*ALL[:6], faulted(6), Worker("run-worker-0-7-x", "uid-7", True, 0, "PreemptionByScheduler", "Running")],
            (
                "down",
                "worker run-worker-0-7-x is being stopped by Kubernetes (DisruptionTarget: PreemptionByScheduler)",
            ),
        ),
        ([*ALL[:6], faulted(6)], ("down", "worker run-worker-0-7-x of this attempt is gone")),
        ([*ALL[:7], ready(7, restarts=1)], ("down", "worker run-worker-0-7-x restarted (1 since the attempt began")),
        (
            [*ALL[:6], faulted(6, ready=False), Worker("run-worker-0-7-x", "uid-7", False, 0, None, "Pending: x")],
            ("down", "6 of 8 workers Ready; run-worker-0-7-x: Pending: x"),
        ),
    ],
    ids=[
        "oom",
        "oom-not-ready",
        "sidecar",
        "disrupted-too",
        "gone-too",
        "no-termination",
        "another-not-ready",
    ],
)
def test_a_container_that_ended_of_its_own_fault_is_named_not_a_lost_slice(pods, expected):
    """A worker OOMKilled or a head sidecar's non-zero exit, restarted in place with its termination on record and no
    disruption, is a fault (its own not-Ready explained by it); any other evidence of a lost slice still wins."""
    base = {**BASE, HEAD.uid: [HEAD.name, 0]}
    if all(p.job == "worker" for p in pods):
        pods = [*pods, HEAD]
    found = evidence(pods, 8, base)
    assert found is not None and found[0] == expected[0] and found[1].startswith(expected[1]), found


def test_a_container_terminated_now_is_a_fault_before_its_restart_is_counted():
    """The kubelet reports the termination at once (``state.terminated``) and counts the restart only when the
    container starts again, after its back-off: the fault is named in between, not taken for a worker not Ready."""
    oom_now = Worker("run-worker-0-7-x", "uid-7", False, 0, None, "Running", ended=(Ended(*OOM_FIELDS, now=True),))
    found = evidence([*ALL[:7], oom_now, HEAD], 8, {**BASE, HEAD.uid: [HEAD.name, 0]})
    assert found == ("fault", "run-worker-0-7-x: container pathways-worker ended OOMKilled (exit code 137)")
    pod = step_pod(jobset(), "worker", "running")
    pod["status"]["containerStatuses"] = [
        {
            "name": "pathways-worker",
            "restartCount": 0,
            "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}},
        }
    ]
    assert slice_state.worker(pod).ended == (Ended(*OOM_FIELDS, now=True),)


def test_a_head_sidecar_restart_without_a_termination_on_record_is_no_lost_slice():
    """The head runs on cpu-np: only a fault of its sidecars is evidence; a worker's restart without one is a lost
    slice, as before."""
    restarted_head = Worker(HEAD.name, HEAD.uid, True, 1, None, "Running", job=HEAD.job)
    assert evidence([*ALL, restarted_head], 8, {**BASE, HEAD.uid: [HEAD.name, 0]}) is None


def test_a_fault_is_judged_at_the_end_of_the_window_unless_a_disruption_follows(tmp_path):
    """A lost host can crash the other workers first: a fault is watched through the window, and a disruption seen
    in it makes the slice down."""
    clock = FakeClock()
    crashed = [*ALL[:7], faulted(7)]
    status, line = check(Timeline(clock, [(0, crashed)]), 8, 60, write_baseline(tmp_path), clock)
    assert status == 3 and clock.t >= 60
    assert (
        line == "fault: run-worker-0-7-x: container pathways-worker ended OOMKilled (exit code 137), with no "
        "disruption in 1m00s"
    )
    clock = FakeClock()
    evicted = [*ALL[:6], Worker("run-worker-0-6-x", "uid-6", True, 0, "EvictionByEvictionAPI", "Running"), faulted(7)]
    status, line = check(Timeline(clock, [(0, crashed), (30 / HOUR, evicted)]), 8, 60, write_baseline(tmp_path), clock)
    assert status == 1 and line.startswith("down: worker run-worker-0-6-x is being stopped by Kubernetes")


def test_a_pods_terminations_are_read_as_the_kubelet_reports_them():
    """``lastState.terminated`` of a container restarted in place (the workers' ``OnFailure``, the head's native
    sidecars in ``initContainerStatuses``); a clean exit or a termination without a reason is read as such."""
    worker_pod = restarted(step_pod(jobset(), "worker", "running", index=2), "pathways-worker", "OOMKilled", 137)
    parsed = slice_state.worker(worker_pod)
    assert (parsed.job, parsed.restarts, parsed.ended) == ("worker", 1, (OOM,))
    head = restarted(step_pod(jobset(), "pathways-head", "running"), "pathways-rm", "Error", 2, sidecar=True)
    parsed = slice_state.worker(head)
    assert (parsed.job, parsed.restarts, parsed.ended) == ("pathways-head", 1, (Ended("pathways-rm", "Error", 2),))
    clean = restarted(step_pod(jobset(), "worker", "running"), "pathways-worker", "Completed", 0)
    assert slice_state.worker(clean).ended == ()
    odd = restarted(step_pod(jobset(), "worker", "running"), "pathways-worker", "", 139)
    odd["status"]["containerStatuses"][0]["lastState"]["terminated"]["reason"] = None
    assert slice_state.worker(odd).ended == (Ended("pathways-worker", "Error", 139),)


def write_baseline(tmp_path: Path) -> str:
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(BASE))
    return str(path)


def test_a_slice_that_goes_down_within_the_window_is_down(tmp_path):
    """The error came first (the proxy's 60 s pipe timeout), the workers' eviction a little after: the check waits
    for evidence through its window."""
    clock = FakeClock()
    api = Timeline(clock, [(0, ALL), (30 / HOUR, AWAY)])
    status, line = check(api, 8, 60, write_baseline(tmp_path), clock)
    assert status == 1 and line.startswith("down: worker run-worker-0-0-x of this attempt is gone")
    assert 30 <= clock.t < 60


def test_a_slice_that_stays_up_through_the_window_is_up(tmp_path):
    clock = FakeClock()
    status, line = check(Timeline(clock, [(0, ALL)]), 8, 60, write_baseline(tmp_path), clock)
    assert (status, line) == (0, "up: 8 of 8 workers Ready for 1m00s, none restarted or stopped")
    assert clock.t >= 60


@pytest.mark.parametrize(
    ("error", "status"),
    [(RefusedError("HTTP 403 listing the pods"), 2), (FailedError("ConnectionError"), 2)],
)
def test_a_slice_that_cannot_be_read_is_unknown(tmp_path, error, status):
    clock = FakeClock()
    found, line = check(Timeline(clock, [(0, error)]), 8, 60, write_baseline(tmp_path), clock)
    assert found == status and line.startswith("unknown: cannot read the slice's workers (")


# -- the pods as the API server reports them ----------------------------------------------------------------------


def jobset(uid: str = "js-uid-1", restarts: int = 0) -> dict:
    """A training JobSet as far as its pods' labels go (the program's manifest is tests/test_pins_workloads.py's)."""
    template = {"metadata": {"labels": {"app.kubernetes.io/component": "train"}}, "spec": {}}
    jobs = [{"name": name, "template": {"spec": {"template": template}}} for name in ("pathways-head", "worker")]
    return {
        "metadata": {"name": "gemma4-26b-train-abc", "namespace": "tpu-rl", "uid": uid},
        "spec": {"replicatedJobs": jobs},
        "status": {"restarts": restarts},
    }


def test_a_pod_is_read_as_its_worker(tmp_path):
    running = step_pod(jobset(), "worker", "running", index=3)
    assert slice_state.worker(running) == Worker(
        running["metadata"]["name"], running["metadata"]["uid"], True, 0, None, "Running"
    )
    waiting = step_pod(jobset(), "worker", "unschedulable", message="0/4 nodes \x1b[31mare\x1b[0m available\n")
    parsed = slice_state.worker(waiting)
    assert not parsed.ready and parsed.why == "Pending: 0/4 nodes are available", "no terminal control"
    running["metadata"]["deletionTimestamp"] = "2026-11-30T10:00:00Z"
    assert not slice_state.worker(running).ready and slice_state.worker(running).why == "being deleted"
    assert not slice_state.worker({"metadata": [], "status": "x"}).ready, "another shape: not Ready"


def account(tmp_path: Path, cluster, token: str = TOKEN) -> tuple[str, dict[str, str]]:
    folder = tmp_path / "account"
    folder.mkdir(exist_ok=True)
    (folder / "token").write_text(token)
    (folder / "ca.crt").write_bytes(cluster.ca_pem)
    (folder / "namespace").write_text("tpu-rl\n")
    host, port = cluster.endpoint.rsplit(":", 1)
    env = {
        "KUBERNETES_SERVICE_HOST": host,
        "KUBERNETES_SERVICE_PORT": port,
        slice_state.JOBSET_UID_ENV: "js-uid-1",
        slice_state.ATTEMPT_ENV: "1",
    }
    return str(folder), env


def test_the_client_reads_only_this_attempts_workers_through_tls_and_the_token(tmp_path):
    with fake_cluster() as cluster:
        current = jobset(restarts=1)
        cluster.core[("pods", "tpu-rl")] = [
            step_pod(current, "pathways-head", "running"),
            *(step_pod(current, "worker", "running", index=i) for i in range(8)),
            step_pod(jobset(restarts=0), "worker", "unschedulable", index=9),  # the attempt before
            step_pod(jobset(uid="another-run", restarts=1), "worker", "unschedulable", index=10),
        ]
        folder, env = account(tmp_path, cluster)
        pods = Api(folder, env).pods()
        assert len(pods) == 9 and all(p.ready for p in pods)
        assert [p.job for p in pods].count("worker") == 8 and pods[0].job == "pathways-head", "the head's pod too"
        (path,) = [p for p in cluster.requests if "/pods" in p]
        assert "jobset.sigs.k8s.io%2Fjobset-uid%3Djs-uid-1" in path and "restart-attempt%3D1" in path


def test_a_token_the_api_refuses_is_a_refusal_and_a_server_gone_a_failed_read(tmp_path):
    with fake_cluster() as cluster:
        folder, env = account(tmp_path, cluster, token="expired")
        with pytest.raises(RefusedError, match="HTTP 401"):
            Api(folder, env).pods()
        api = Api(*account(tmp_path, cluster))
    with pytest.raises(FailedError):
        api.pods()


def test_no_in_cluster_api_is_a_refusal(tmp_path):
    with pytest.raises(RefusedError, match="no in-cluster API"):
        Api(str(tmp_path), {})


def test_the_program_waits_and_exits_with_the_code_it_is_given(tmp_path, monkeypatch, capsys):
    """``main``: the wait's lines on stdout and in the log; no service account at all never holds the attempt."""
    log = tmp_path / "train.log"
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    args = ["wait", str(tmp_path / "none"), "8", "60", str(tmp_path / "b.json"), str(log), "78"]
    assert slice_state.main(args) == 0
    assert "starting train_rl without waiting for them" in log.read_text()
    assert slice_state.main(["check", str(tmp_path / "none"), "8", "60", str(tmp_path / "b.json")]) == 2
    assert capsys.readouterr().out.splitlines()[-1].startswith("unknown: no in-cluster API")
