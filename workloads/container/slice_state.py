"""The training head's view of its TPU slice: its attempt's worker pods, read from the Kubernetes API (run in the
MaxText image by the training script as ``python3 /tpu-rl/slice_state.py``, a file of its ConfigMap beside ``shown.py``,
``tpu_rl_program.py`` and ``tpu_rl_watch.py``, which it imports; standard library only).

    python3 slice_state.py wait ACCOUNT_DIR WORKERS SECONDS BASELINE LOG EXIT   # before train_rl starts
    python3 slice_state.py check ACCOUNT_DIR WORKERS SECONDS BASELINE           # after train_rl died of an error

The attempt's pods are the pods JobSet labels with this JobSet's UID and this attempt's restart number (JobSet v0.10.1
``jobset_controller.go`` ``labelAndAnnotateObject`` puts ``jobset-uid``, ``replicatedjob-name`` and
``restart-attempt`` on every Job's pod template; the head reads its own two from the downward API:
``TPU_RL_JOBSET_UID``, ``TPU_RL_RESTART_ATTEMPT``): the workers (the replicated Job ``worker``) and the head, whose
sidecars (the Pathways proxy and resource manager) restart in place too. The head's Kubernetes service account may
get and list the pods of its namespace, nothing else (``infra.k8s.manifests.head_access``); its token, CA and
namespace are the files the kubelet mounts in ``ACCOUNT_DIR``, the token read again for every request (the kubelet
rotates it).

- ``wait``: until ``WORKERS`` workers are Ready, at most ``SECONDS`` (the attempt's recovery budget,
  ``tpu-rl:kueue.recoveryTimeout``). A restarted attempt's head starts at once on cpu-np while its slice may still be
  away (a host maintenance: "up to a few hours", Cloud TPU's "Manually start a host maintenance event"); train_rl and
  its stall watchdog start only once every worker answers, so the wait is never taken for a stall. It says what it
  waits for (the first Pending worker's reason) and until when, every ``SAY_EVERY`` seconds and whenever the count
  changes, on stdout and in ``LOG``. Once all are Ready it writes ``BASELINE`` (each Ready worker's and the head's
  UID, name and container restarts) and exits 0; past ``SECONDS`` it says so in one line and exits ``EXIT``
  (``core.names.SLICE_WAIT_EXIT``: the step fails, the next `make up` retries it). An API it may not read (no
  grant: 401, 403, 404), or cannot read for ``UNREAD_SECONDS``, never holds the attempt: it says so and exits 0.
- ``check``: whether the slice is down, judged by evidence over ``SECONDS``: a pod of ``BASELINE`` gone, a pod being
  disrupted (the ``DisruptionTarget`` condition Kubernetes sets before it evicts or preempts a pod, or
  garbage-collects a lost node's), a container restarted since with no termination on record, fewer than ``WORKERS``
  Ready that no fault explains; the first such evidence ends it (``down: <why>``, exit 1). A container of a worker or
  a head's sidecar that restarted since and whose termination Kubernetes recorded as ``OOMKilled`` or a non-zero exit
  (``state.terminated``, else ``lastState.terminated``), with no disruption, is a fault of the program, not a lost
  slice: the check goes on watching the window for a disruption (a lost host can crash the other workers first),
  then prints ``fault: <pod>: container <name> ended <reason> (exit code <code>)`` (exit 3). Else ``up: <why>``
  (exit 0, no evidence in the whole window) or ``unknown: <why>`` (exit 2). ``train_exit.py`` asks it when train_rl
  died of an error.
"""

from __future__ import annotations

import datetime
import http.client
import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING or __package__:  # the repository's package (the tests)
    from workloads.container import shown
    from workloads.container.tpu_rl_program import FailedError, RefusedError
    from workloads.container.tpu_rl_watch import duration, interval
else:  # python3 /tpu-rl/slice_state.py: what it imports are files of the same ConfigMap, its folder on sys.path
    import shown
    from tpu_rl_program import FailedError, RefusedError
    from tpu_rl_watch import duration, interval

JOBSET_UID_ENV = "TPU_RL_JOBSET_UID"
ATTEMPT_ENV = "TPU_RL_RESTART_ATTEMPT"
WORKER_JOB = "worker"
JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
TIMEOUT = 20.0
"""The bound of one request's connect and of each of its reads (seconds)."""
MAX_BYTES = 8 << 20
"""The most of one reply read: a slice's pods are a few hundred kilobytes."""
SAY_EVERY = 600.0
"""How often the wait repeats its line when nothing changed (seconds)."""
UNREAD_SECONDS = 300.0
"""How long an API that cannot be read holds the wait before train_rl starts anyway (seconds)."""
REASON_CHARS = 200
BUDGET_KEY = "tpu-rl:kueue.recoveryTimeout"
LOOKS, LONGEST_LOOK = 40, 10.0
"""How often the pods are read (``interval``): a fortieth of the bound, at least every 10 s."""


@dataclass(frozen=True)
class Ended:
    """A container whose termination Kubernetes recorded as a fault: killed for memory, or a non-zero exit."""

    container: str
    reason: str
    code: int
    now: bool = False
    """Its current state (terminated, not restarted yet), not its last one."""


@dataclass(frozen=True)
class Worker:
    """One pod of the attempt as the API server reports it: a worker, or the head (``job``)."""

    name: str
    uid: str
    ready: bool
    restarts: int
    """Its containers' restarts, sidecars included."""
    disrupted: str | None
    """The ``DisruptionTarget`` condition's reason when Kubernetes is stopping the pod (None: it is not)."""
    why: str
    """What keeps it from Ready: the scheduler's message, a container's waiting reason, its phase."""
    job: str = WORKER_JOB
    """Its replicated Job (``worker``, ``pathways-head``)."""
    ended: tuple[Ended, ...] = ()
    """Its containers whose last termination was ``OOMKilled`` or a non-zero exit."""

    def fault(self) -> str:
        """``<pod>: container <name> ended <reason> (exit code <code>)`` for its first faulted container."""
        first = self.ended[0]
        return f"{self.name}: container {first.container} ended {first.reason} (exit code {first.code})"


def _condition(status: dict[str, Any], kind: str) -> dict[str, Any] | None:
    found = [c for c in status.get("conditions") or [] if isinstance(c, dict) and c.get("type") == kind]
    return found[0] if found else None


def _ended(container: dict[str, Any]) -> Ended | None:
    """The container's termination as Kubernetes recorded it (its current state's, else its last state's), when it
    was a fault: ``OOMKilled``, or a non-zero exit code."""
    for key in ("state", "lastState"):
        state = container.get(key)
        terminated = state.get("terminated") if isinstance(state, dict) else None
        if not isinstance(terminated, dict):
            continue
        code = terminated.get("exitCode")
        code = code if isinstance(code, int) and not isinstance(code, bool) else -1
        reason = shown.line(terminated.get("reason") or "Error", 60, " ")
        if reason == "OOMKilled" or code != 0:
            return Ended(shown.line(container.get("name"), 63, " "), reason, code, key == "state")
        return None
    return None


def worker(pod: dict[str, Any]) -> Worker:
    """A pod of the list, read leniently (a field of another shape is a pod that is not Ready)."""
    meta: dict[str, Any] = pod["metadata"] if isinstance(pod.get("metadata"), dict) else {}
    status: dict[str, Any] = pod["status"] if isinstance(pod.get("status"), dict) else {}
    labels: dict[str, Any] = meta["labels"] if isinstance(meta.get("labels"), dict) else {}
    ready = _condition(status, "Ready")
    disruption = _condition(status, "DisruptionTarget")
    containers = [c for c in status.get("containerStatuses") or [] if isinstance(c, dict)]
    sidecars = [c for c in status.get("initContainerStatuses") or [] if isinstance(c, dict)]
    restarts = sum(c["restartCount"] for c in [*sidecars, *containers] if isinstance(c.get("restartCount"), int))
    ended = tuple(found for c in [*sidecars, *containers] if (found := _ended(c)) is not None)
    scheduled = _condition(status, "PodScheduled") or {}
    waiting = [
        f"{c.get('name')} {c['state']['waiting'].get('reason')}"
        for c in containers
        if isinstance(c.get("state"), dict) and isinstance(c["state"].get("waiting"), dict)
    ]
    if scheduled.get("status") == "False":
        why = f"{status.get('phase', 'Pending')}: {scheduled.get('message') or scheduled.get('reason')}"
    elif waiting:
        why = f"{status.get('phase')}: {', '.join(waiting)}"
    else:
        why = str(status.get("phase") or "no status yet")
    deleting = meta.get("deletionTimestamp") is not None
    return Worker(
        name=shown.line(meta.get("name"), 100, " "),
        uid=str(meta.get("uid") or ""),
        ready=bool(ready and ready.get("status") == "True") and not deleting,
        restarts=restarts,
        disrupted=shown.line(disruption.get("reason") or "DisruptionTarget", 60, " ")
        if disruption and disruption.get("status") == "True"
        else None,
        why=shown.line("being deleted" if deleting else why, REASON_CHARS, " "),
        job=str(labels.get(JOB_LABEL) or WORKER_JOB),
        ended=ended,
    )


class Api:
    """The pods of this attempt, through the in-cluster API server: one bounded GET of a list (the standard
    library's ``urllib`` with the mounted CA, like the image's other programs of this project: the module is also
    imported by the pure step builders, which may import no network library).

    Not the ``kubernetes`` client library: the MaxText image has none. MaxText 0.2.5's wheel lists it only in
    ``dependencies/requirements/*/runner-requirements.txt`` (the xpk runner's), not in the
    ``tpu-post-train-requirements.txt`` the post-training image is built from, nor in what those pull in."""

    def __init__(self, account_dir: str, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        host, port = env.get("KUBERNETES_SERVICE_HOST", ""), env.get("KUBERNETES_SERVICE_PORT", "443")
        if not host or not env.get(JOBSET_UID_ENV) or not env.get(ATTEMPT_ENV):
            raise RefusedError(f"no in-cluster API or no {JOBSET_UID_ENV}/{ATTEMPT_ENV} in the environment")
        self.dir = account_dir
        with open(os.path.join(account_dir, "namespace"), encoding="utf-8") as handle:
            namespace = handle.read().strip()
        host = f"[{host}]" if ":" in host else host
        selector = ",".join(
            (
                f"jobset.sigs.k8s.io/jobset-uid={env[JOBSET_UID_ENV]}",
                f"jobset.sigs.k8s.io/restart-attempt={env[ATTEMPT_ENV]}",
            )
        )
        query = urllib.parse.urlencode({"labelSelector": selector, "limit": "500"})
        self.url = f"https://{host}:{port}/api/v1/namespaces/{urllib.parse.quote(namespace)}/pods?{query}"
        self.tls = ssl.create_default_context(cafile=os.path.join(account_dir, "ca.crt"))

    def pods(self) -> list[Worker]:
        try:
            with open(os.path.join(self.dir, "token"), encoding="utf-8") as handle:
                token = handle.read().strip()
        except OSError as err:
            raise RefusedError(f"no service account token ({type(err).__name__})") from None
        request = urllib.request.Request(
            self.url, headers={"Authorization": f"Bearer {token}", "Accept": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT, context=self.tls) as response:  # noqa: S310 (https)
                body = response.read(MAX_BYTES + 1)
        except urllib.error.HTTPError as err:
            if err.code in (401, 403, 404):
                raise RefusedError(f"HTTP {err.code} listing the pods") from None
            raise FailedError(f"HTTP {err.code}") from None
        except (OSError, http.client.HTTPException) as err:  # URLError, a timeout, TLS, a cut connection
            raise FailedError(type(err).__name__) from None
        if len(body) > MAX_BYTES:
            raise FailedError("a reply over 8 MiB")
        try:
            items = json.loads(body)["items"]
        except (ValueError, KeyError, TypeError):
            raise FailedError("a reply that is not a pod list") from None
        return [worker(p) for p in items if isinstance(p, dict)] if isinstance(items, list) else []


def workers_of(pods: list[Worker]) -> list[Worker]:
    """The workers among the attempt's pods."""
    return [p for p in pods if p.job == WORKER_JOB]


def _first_not_ready(workers: list[Worker], expected: int) -> str:
    waiting = [w for w in workers if not w.ready]
    if waiting:
        return f"; {waiting[0].name}: {waiting[0].why}"
    return f"; {expected - len(workers)} not created yet" if len(workers) < expected else ""


@dataclass
class Clock:
    """The program's clocks: ``now`` for bounds, ``wall`` for the times it prints, ``sleep``."""

    now: Callable[[], float] = time.monotonic
    wall: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep

    def at(self, seconds_from_now: float) -> str:
        when = datetime.datetime.fromtimestamp(self.wall() + seconds_from_now, datetime.UTC)
        return when.strftime("%H:%M UTC")


def wait(api: Any, expected: int, seconds: float, baseline: str, say: Callable[[str], None], clock: Clock) -> bool:
    """Wait for every worker (the module's docstring); True once all are Ready, or when they cannot be read."""
    start = clock.now()
    deadline, unread_since, said, count = start + seconds, None, None, -1
    until = f"until {clock.at(seconds)} ({BUDGET_KEY} {duration(seconds)})"
    while True:
        try:
            pods = api.pods()
        except RefusedError as err:
            say(f"tpu-rl: cannot read the slice's workers ({err}): starting train_rl without waiting for them")
            return True
        except FailedError as err:
            unread_since = clock.now() if unread_since is None else unread_since
            if clock.now() - unread_since >= min(UNREAD_SECONDS, seconds):
                say(f"tpu-rl: cannot read the slice's workers ({err}): starting train_rl without waiting for them")
                return True
            clock.sleep(interval(seconds, LOOKS, LONGEST_LOOK))
            continue
        unread_since = None
        workers = workers_of(pods)
        ready = sum(w.ready for w in workers)
        if ready >= expected:
            kept = [p for p in pods if p.ready or p.job != WORKER_JOB]  # the Ready workers, and the head
            with open(baseline, "w", encoding="utf-8") as handle:
                json.dump({p.uid: [p.name, p.restarts] for p in kept}, handle)
            waited = clock.now() - start
            after = f" after {duration(waited)}" if waited >= 1 else ""
            say(f"tpu-rl: the slice is up: {ready} of {expected} workers Ready{after}; starting train_rl")
            return True
        if clock.now() >= deadline:
            say(
                f"tpu-rl: the slice did not come back within {BUDGET_KEY} ({duration(seconds)}): {ready} of "
                f"{expected} workers Ready{_first_not_ready(workers, expected)}; the step fails, and the next "
                "`make up STACK=<stack>` retries it from its last checkpoint (raise the key for a longer maintenance)"
            )
            return False
        if ready != count or said is None or clock.now() - said >= SAY_EVERY:
            say(
                f"tpu-rl: waiting for the slice {until}: {ready} of {expected} workers Ready"
                f"{_first_not_ready(workers, expected)}"
            )
            said, count = clock.now(), ready
        clock.sleep(interval(seconds, LOOKS, LONGEST_LOOK))


DOWN, FAULT = "down", "fault"


def evidence(pods: list[Worker], expected: int, baseline: dict[str, Any]) -> tuple[str, str] | None:
    """What the attempt's pods say now: (``DOWN``, why) for a lost slice, (``FAULT``, which container) for a container
    that ended of its own fault with no disruption, None for nothing (the module's docstring)."""
    by_uid = {p.uid: p for p in pods}
    for p in pods:
        if p.disrupted:
            return DOWN, f"{_kind(p)} {p.name} is being stopped by Kubernetes (DisruptionTarget: {p.disrupted})"
    for uid, (name, _restarts) in baseline.items():
        if uid not in by_uid:
            return DOWN, f"worker {shown.line(name, 100, ' ')} of this attempt is gone"
    faulted = {p.uid for p in pods if _faulted(p, baseline)}
    for p in workers_of(pods):
        if _restarted(p, baseline) and p.uid not in faulted:
            since = p.restarts - (_baseline_restarts(baseline, p.uid) or 0)
            return DOWN, f"worker {p.name} restarted ({since} since the attempt began: {p.why})"
    workers = workers_of(pods)
    if sum(w.ready or w.uid in faulted for w in workers) < expected:
        unexplained = [w for w in workers if w.uid not in faulted]
        ready = sum(w.ready for w in workers)
        missing = expected - len(workers) + len(unexplained)  # the workers not created count against the others
        return DOWN, f"{ready} of {expected} workers Ready{_first_not_ready(unexplained, missing)}"
    first = next((p for p in pods if p.uid in faulted), None)
    return None if first is None else (FAULT, first.fault())


def _baseline_restarts(baseline: dict[str, Any], uid: str) -> int | None:
    """The restarts ``baseline`` holds for the pod ``uid`` (None: it holds none)."""
    entry = baseline.get(uid)
    return entry[1] if entry is not None and isinstance(entry[1], int) else None


def _restarted(pod: Worker, baseline: dict[str, Any]) -> bool:
    before = _baseline_restarts(baseline, pod.uid)
    return before is not None and pod.restarts > before


def _faulted(pod: Worker, baseline: dict[str, Any]) -> bool:
    """Whether a container of ``pod`` ended of its own fault in this attempt: it is terminated so now (not restarted
    yet), or its last termination was, and it restarted since the baseline (or the baseline does not hold it)."""
    if any(ended.now for ended in pod.ended):
        return True
    return bool(pod.ended) and (_baseline_restarts(baseline, pod.uid) is None or _restarted(pod, baseline))


def _kind(pod: Worker) -> str:
    return "worker" if pod.job == WORKER_JOB else "the head's pod"


def check(api: Any, expected: int, seconds: float, baseline: str, clock: Clock) -> tuple[int, str]:
    """Judge the slice (the module's docstring): (exit status, the line to print): 0 up, 1 down, 2 unknown, 3 fault."""
    try:
        with open(baseline, encoding="utf-8") as handle:
            base = {str(k): v for k, v in json.load(handle).items() if isinstance(v, list) and len(v) == 2}
    except (OSError, ValueError, AttributeError):
        base = {}
    deadline, fault = clock.now() + seconds, None
    while True:
        try:
            found = evidence(api.pods(), expected, base)
        except RefusedError as err:
            return 2, f"unknown: cannot read the slice's workers ({err})"
        except FailedError as err:
            if clock.now() >= deadline:
                if fault:
                    return 3, f"fault: {fault}, then the slice could not be read ({err})"
                return 2, f"unknown: cannot read the slice's workers ({err})"
            clock.sleep(interval(seconds, LOOKS, LONGEST_LOOK))
            continue
        if found is not None and found[0] == DOWN:
            return 1, f"down: {found[1]}"
        fault = fault or (found[1] if found is not None else None)
        if clock.now() >= deadline:
            if fault:
                return 3, f"fault: {fault}, with no disruption in {duration(seconds)}"
            return 0, f"up: {expected} of {expected} workers Ready for {duration(seconds)}, none restarted or stopped"
        clock.sleep(interval(seconds, LOOKS, LONGEST_LOOK))


def main(argv: list[str]) -> int:
    mode, account_dir, expected, seconds, baseline, *rest = argv
    clock, api, problem = Clock(), None, ""
    try:
        api = Api(account_dir)
    except RefusedError as err:
        problem = str(err)
    except OSError as err:
        problem = f"no service account files ({type(err).__name__})"
    if mode == "wait":
        log, code = rest

        def say(line: str) -> None:
            print(line, flush=True)
            with open(log, "a", encoding="utf-8") as handle:
                handle.write(line + "\n")

        if api is None:
            say(f"tpu-rl: cannot read the slice's workers ({problem}): starting train_rl without waiting for them")
            return 0
        return 0 if wait(api, int(expected), float(seconds), baseline, say, clock) else int(code)
    status, line = (
        (2, f"unknown: {problem}") if api is None else check(api, int(expected), float(seconds), baseline, clock)
    )
    print(line, flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
