"""A TPU maintenance under a running training, through the training container's real script: each attempt is the
prod (or flex-start) step's ConfigMap run by a real bash, its programs by a real Python, the slice's pods served by
the loopback API server as the Job controller and the kubelet report them, and the JobSet's answer to each exit the
failure-policy model's (``tests.jobset_model``: the Job controller's ``podFailurePolicy``, JobSet's
``failurePolicy``). Only the MaxText image is a stand-in (the ``python3`` shim runs a small train_rl).

The clock is compressed, and real: the stall bound is ``STALL`` seconds and the recovery budget ``BUDGET`` (the
manifest's 2 h and 4h30m), so "a slice away 4 h" is a slice away twice the stall bound and within the budget.

- the slice goes away mid-training: train_rl dies of ``DEADLINE_EXCEEDED`` (the proxy's pipe timeout: pathways-utils'
  "may or may not be due to slice down"), its workers are evicted and re-made Pending; the judge finds them not
  Ready and exits 75: one counted restart;
- the restarted head starts at once while its workers stay Pending past the stall bound: it waits (no stall, no
  second restart), then trains to the end;
- a slice away past the budget: the restarted head's wait ends with one line and exit 78, which fails the JobSet
  (the next `pulumi up` retries it).

The same error on a healthy slice failing the run is the judge's and the check's own tests' (a minute of watching,
on a fake clock there: ``tests/test_train_exit.py``, ``tests/test_slice_state.py``)."""

from __future__ import annotations

import copy
import os
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from core.names import SLICE_DOWN_EXIT, STALLED_EXIT
from tests.fake_hub import COMMIT
from tests.fake_kube import fake_cluster, restarted, step_pod
from tests.jobset_model import head_exit
from tests.step_scripts import install, literal_env, objects, step_id
from workloads.container.slice_state import ATTEMPT_ENV, JOBSET_UID_ENV
from workloads.container.train_exit import CHECK_SECONDS
from workloads.specs.train_script import SLICE_WAIT_ENV, STALL_ENV

pytestmark = pytest.mark.slow

STALL, BUDGET, CHECK = 2, 10, 2
"""The compressed stall bound, recovery budget and the judge's look at the slice (seconds)."""
NAMESPACE = "tpu-rl"
UID = "3f1c2a9e-train-uid"

ABSL = "I1201 05:00:03.000000 1"
TRAINS = f"""import sys, time
print("{ABSL} max_utils.py:837] System Information: Jax Backend: PJRT C API", flush=True)
for step in range(1, 4):
    print(f"{ABSL} peft_trainer.py:770] Train step {{step}} training loss: 0.5", flush=True)
    time.sleep(0.2)
"""
DIES = (
    TRAINS
    + """time.sleep(float(__import__("os").environ.get("STAND_IN_DIES_AFTER", "1")))
sys.stderr.write('''Traceback (most recent call last):
  File "/deps/src/maxtext/trainers/post_train/rl/train_rl.py", line 797, in main
    rl_train(argv, kwargs)
jax.errors.JaxRuntimeError: DEADLINE_EXCEEDED: Pathways pipe to worker 3 unreachable for 60s
''')
sys.exit(1)
"""
)
COMPLETES = TRAINS + f'print("{ABSL} train_rl.py:768] RL Training Completed Successfully!", flush=True)\n'


class Slice:
    """The slice's worker pods as the cluster shows them over time: ``show(state)`` now, ``after(text, seconds,
    state)`` once the attempt's log holds ``text`` (the attempt's own clock: its set-up takes seconds here)."""

    def __init__(self, cluster, jobset: dict, log: Path) -> None:
        self.cluster, self.jobset, self.log = cluster, jobset, log
        self.done = threading.Event()
        self.threads: list[threading.Thread] = []

    def show(self, state: str, restarts: int) -> None:
        """``running``, ``unschedulable`` (re-made Pending), or ``oom``: running, worker 3's Pathways server OOMKilled
        and restarted in place (the same pod)."""
        obj = copy.deepcopy(self.jobset)
        obj["status"] = {"restarts": restarts}
        made = "running" if state == "oom" else state
        workers = [step_pod(obj, "worker", made, index=i) for i in range(8)]
        for pod in workers:  # a re-made pod is another object: another UID
            pod["metadata"]["uid"] += f"-{made}-{restarts}"
        if state == "oom":
            restarted(workers[3], "pathways-worker", "OOMKilled", 137)
        self.cluster.core[("pods", NAMESPACE)] = [step_pod(obj, "pathways-head", "running"), *workers]

    def after(self, text: str, seconds: float, state: str, restarts: int) -> None:
        def watch() -> None:
            while not self.done.wait(0.05):
                if self.log.exists() and text in self.log.read_text(errors="replace"):
                    if not self.done.wait(seconds):
                        self.show(state, restarts)
                    return

        thread = threading.Thread(target=watch, daemon=True)
        thread.start()
        self.threads.append(thread)

    def stop(self) -> None:
        self.done.set()
        for thread in self.threads:
            thread.join(5)


@pytest.fixture
def world(tmp_path, gcs):
    """The loopback API server and the GCS emulator the attempts run against."""
    with fake_cluster() as cluster:
        yield cluster, gcs


def run_attempt(
    tmp_path: Path, cluster, gcs, train: dict, train_rl: str, restarts: int, **env: str
) -> subprocess.CompletedProcess[str]:
    """One attempt of the training container: its script under bash, its service account's files pointing at the
    loopback API server, its downward-API values (the JobSet's UID, this attempt's restart number)."""
    folder = tmp_path / f"attempt-{restarts}"
    folder.mkdir()
    bucket = train["metadata"]["annotations"]["tpu-rl/input"].removeprefix("gs://").split("/")[0]
    if not gcs.lookup_bucket(bucket):
        gcs.create_bucket(bucket)
    (folder / "train_rl.py").write_text(train_rl)
    run_sh = install(train, folder)
    judge = run_sh.parent / "train_exit.py"
    window = f"CHECK_SECONDS = {CHECK_SECONDS}\n"
    assert window in judge.read_text()
    judge.write_text(judge.read_text().replace(window, f"CHECK_SECONDS = {CHECK}\n"))  # the clock compressed
    account = folder / "account"
    account.mkdir()
    (account / "token").write_text(cluster.token)
    (account / "ca.crt").write_bytes(cluster.ca_pem)
    (account / "namespace").write_text(NAMESPACE)
    host, port = cluster.endpoint.rsplit(":", 1)
    environment = {
        **literal_env(train),
        STALL_ENV: str(STALL),
        SLICE_WAIT_ENV: str(BUDGET),
        "PATH": f"{folder / 'bin'}:/usr/bin:/bin",
        "SHIM_RUN_C": "1",
        "SHIM_TRAIN_RL": str(folder / "train_rl.py"),
        "SHIM_BASE_COMMIT": COMMIT,
        "STORAGE_EMULATOR_HOST": os.environ["STORAGE_EMULATOR_HOST"],
        "NO_GCE_CHECK": "True",
        "KUBERNETES_SERVICE_HOST": host,
        "KUBERNETES_SERVICE_PORT": port,
        JOBSET_UID_ENV: UID,
        ATTEMPT_ENV: str(restarts),
        **env,
    }
    return subprocess.run(
        ["bash", str(run_sh)], env=environment, capture_output=True, text=True, errors="replace", timeout=120
    )


def training(*overrides: str) -> dict:
    train = objects("prod", "tpu-rl:training.optimizer=adamw", *overrides)["train"]
    train["metadata"]["uid"] = UID
    return train


Timeline = Callable[[Slice], None]


def play(tmp_path, world, train: dict, attempts: list[tuple[str, Timeline]]) -> list[tuple[str, object, str]]:
    """Run the attempts in order while the JobSet restarts them; each attempt's (JobSet's state after it, what
    counted or why it failed, the container's output)."""
    cluster, gcs = world
    found, counted = [], 0
    for index, (train_rl, timeline) in enumerate(attempts):
        pods = Slice(cluster, train, tmp_path / f"attempt-{index}" / "train.log")
        try:
            timeline(pods)
            done = run_attempt(tmp_path, cluster, gcs, train, train_rl, index)
        finally:
            pods.stop()
        state, value = head_exit(train, done.returncode, counted)
        found.append((state, value, done.stdout + done.stderr))
        if state != "restarted":
            break
        counted = int(value)
    return found


def maintenance_then(back_after: float | None) -> list[tuple[str, Timeline]]:
    """A training whose slice goes away after its third step (train_rl dies a second later); the restarted attempt's
    workers stay Pending for ``back_after`` seconds of its wait (None: for good), then Ready."""

    def first(pods: Slice) -> None:
        pods.show("running", 0)
        pods.after("Train step 3 training loss", 0.1, "unschedulable", 0)  # evicted, re-made Pending; train_rl dies

    def second(pods: Slice) -> None:
        pods.show("unschedulable", 1)
        if back_after is not None:
            pods.after("tpu-rl: waiting for the slice", back_after, "running", 1)

    return [(DIES, first), (COMPLETES, second)]


@pytest.mark.parametrize("capacity", ["reservation", "flex-start"])
def test_a_maintenance_longer_than_the_stall_bound_costs_one_restart_and_the_run_completes(tmp_path, world, capacity):
    overrides = () if capacity == "reservation" else ("tpu-rl:tpu.capacity=flex-start", "tpu-rl:tpu.reservation=")
    train = training(*overrides)
    first, *rest = play(tmp_path, world, train, maintenance_then(back_after=2.5 * STALL))
    assert first[:2] == ("restarted", 1), first[2][-3000:]
    assert "and its slice is down: worker" in first[2]
    assert f"exiting {SLICE_DOWN_EXIT} so the JobSet restarts" in first[2]
    (second,) = rest
    assert second[:2] == ("completed", 1), second[2][-3000:]
    out = second[2]
    assert "tpu-rl: waiting for the slice until " in out and "0 of 8 workers Ready" in out
    assert "tpu-rl: the slice is up: 8 of 8 workers Ready after " in out
    assert "stalled" not in out, "the wait is not a stall, and the stall clock starts at the devices"


class SideFiles:
    """The run's side files (``<output>logs/evals-*.txt``) in GCS, polled while the attempts run: every text seen, as
    `make status` would read them then."""

    def __init__(self, gcs, train: dict) -> None:
        self.bucket = train["metadata"]["annotations"]["tpu-rl/input"].removeprefix("gs://").split("/")[0]
        self.logs = f"gemma4-26b/train/{step_id(train)}/logs/"
        self.gcs, self.seen, self.done = gcs, set[str](), threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self.done.wait(0.2):
            for blob in self.gcs.list_blobs(self.bucket, prefix=self.logs):
                if blob.name.rsplit("/", 1)[-1].startswith("evals-"):
                    self.seen.add(blob.download_as_bytes().decode(errors="replace"))

    def __enter__(self) -> SideFiles:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.done.set()
        self.thread.join(5)


def test_a_slice_away_past_the_recovery_budget_fails_the_step_with_one_line(tmp_path, world):
    """The wait's lines reach the side file as they are said (`make status` shows what the head waits for and until
    when), and its last line too."""
    train = training()
    with SideFiles(world[1], train) as side:
        first, second = play(tmp_path, world, train, maintenance_then(back_after=None))
    waiting = [text for text in side.seen if "tpu-rl: waiting for the slice until " in text]
    assert any("did not come back" not in text for text in waiting), "the waiting line, in GCS while it waited"
    assert any("tpu-rl: the slice did not come back within" in text for text in waiting), "then the end's line"
    assert first[:2] == ("restarted", 1)
    assert second[:2] == ("failed", "PodFailurePolicy"), "exit 78: FailJob, then FailJobSet; `up` reports it"
    (line,) = [x for x in second[2].splitlines() if "did not come back" in x]
    assert line.startswith(
        f"tpu-rl: the slice did not come back within tpu-rl:kueue.recoveryTimeout ({BUDGET}s): 0 of 8 workers Ready; "
    )
    assert "the next `make up STACK=<stack>` retries it from its last checkpoint" in line


HANGS = """import time
print("I1201 05:00:01.000000 1 train_rl.py:348] Installed tunix", flush=True)
time.sleep(60)
"""
"""A train_rl whose start-up hangs before its devices answer (a Pathways client blocked on a worker that never
registers): no ``System Information: Jax Backend:`` line, no progress."""


def test_a_start_up_that_hangs_on_a_slice_seen_ready_is_ended_at_the_stall_bound(tmp_path, world):
    """The wait saw every worker Ready, so the devices' bound is the stall bound (2 s here), not the recovery budget
    (10 s): the attempt ends stalled, exit 76, a counted restart, after about one stall bound."""
    train = training()

    def ready(pods: Slice) -> None:
        pods.show("running", 0)

    ((state, counted, out),) = play(tmp_path, world, train, [(HANGS, ready)])
    assert (state, counted) == ("restarted", 1), out[-3000:]
    # The watchdog's line names the bound it ended the attempt at (a wall-clock bound here fails on a loaded host).
    assert "tpu-rl: the slice is up: 8 of 8 workers Ready" in out
    assert f"train_rl's devices did not come up within {STALL}s of its start (tpu-rl:workflow.stallTimeout)" in out
    assert f"exiting {STALLED_EXIT} so the JobSet restarts it from its last checkpoint" in out


def test_a_worker_that_runs_out_of_memory_fails_the_run_at_once_naming_it(tmp_path, world):
    """A worker's Pathways server is OOMKilled and restarted in place, no disruption: train_rl dies of the error it
    saw; the judge names the container, its reason and code, and exits 1, which fails the JobSet at once instead of
    spending every restart on the same fault."""
    train = training()

    def oom(pods: Slice) -> None:
        pods.show("running", 0)
        pods.after("Train step 3 training loss", 0.1, "oom", 0)

    ((state, reason, out),) = play(tmp_path, world, train, [(DIES, oom)])
    assert (state, reason) == ("failed", "PodFailurePolicy"), out[-3000:]
    assert "its slice shows a container's own fault (" in out
    assert "container pathways-worker ended OOMKilled (exit code 137)" in out


def test_an_error_outside_pathways_utils_codes_on_a_slice_that_goes_is_a_lost_slice(tmp_path, world):
    """train_rl dies of ``UNAVAILABLE`` (a code pathways-utils does not list) as its slice goes: the judge looks at the
    slice, finds it down and exits 75, a counted restart; the restarted attempt waits for the slice and completes."""
    train = training()
    unavailable = DIES.replace(
        "DEADLINE_EXCEEDED: Pathways pipe to worker 3 unreachable for 60s", "UNAVAILABLE: Socket closed"
    )
    assert unavailable != DIES
    (_, first), second = maintenance_then(back_after=1)
    found = play(tmp_path, world, train, [(unavailable, first), second])
    assert [f[:2] for f in found] == [("restarted", 1), ("completed", 1)], found[0][2][-3000:]
    assert "failed with jax.errors.JaxRuntimeError: UNAVAILABLE: Socket closed, and its slice is down: " in found[0][2]
