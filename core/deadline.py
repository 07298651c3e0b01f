"""The deadline policy of every network call the program and the tools make (one home for it).

Each call finishes or fails within its budget, measured by the wall clock: connect, TLS, the status
line, the headers and the body included, retries too. The client libraries (``kubernetes``,
``huggingface_hub``, ``google-cloud-storage``) bound each socket operation (a connect, one read) with
the timeouts we pass them, but not a whole call: a server that drips its status line or its headers,
or sends ``100 Continue`` forever, keeps every read short and the call alive. So a call runs in a
worker thread and the caller stops waiting at the deadline; ``cancel`` (closing the call's client)
then makes the abandoned call fail at its next socket operation, within one read timeout.

Budgets are data (``BUDGETS``); the table in docs/watching-a-run.md ("Live reads and their budgets") is generated
from it.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TypeVar

from core.errors import TpuRlError

T = TypeVar("T")


@dataclass(frozen=True)
class Budget:
    """Limits of one call, in seconds of wall clock."""

    total: float
    """The whole call, every retry included."""
    connect: float
    """One TCP connect (what the library gets as its connect timeout)."""
    read: float
    """One socket read (the library's read timeout)."""
    what: str = ""
    """What the budget is for (docs/watching-a-run.md)."""

    def __post_init__(self) -> None:
        if not (0 < self.connect <= self.total and 0 < self.read <= self.total):
            raise ValueError(f"budget {self}: connect and read must be positive and within total")

    def within(self, seconds: float) -> Budget:
        """What is left of this budget when only ``seconds`` remain (a later call of a larger operation)."""
        total = max(0.001, min(self.total, seconds))
        return replace(self, total=total, connect=min(self.connect, total), read=min(self.read, total))


BUDGETS: dict[str, Budget] = {
    "hub": Budget(
        30.0,
        5.0,
        10.0,
        "Hugging Face preflight, each of its checks (the model: info and config.json; the dataset: info and one "
        "file), retries included",
    ),
    "hub-model": Budget(
        60.0, 5.0, 20.0, "the export check's base model: config.json, the index and every shard's header"
    ),
    "export-check": Budget(
        60.0, 5.0, 20.0, "the export check in GCS: the listing, the JSON files and every shard's header"
    ),
    "auth-plugin": Budget(10.0, 10.0, 10.0, "the kubeconfig's exec plugin (gke-gcloud-auth-plugin) printing a token"),
    "cluster-read": Budget(18.0, 5.0, 10.0, "one read of a JobSet (or one list), retries included"),
    "gcs": Budget(60.0, 5.0, 20.0, "one GCS operation: a listing (every page) or one object, retries included"),
    "compute": Budget(
        # The Compute and Service Usage clients take one timeout for the connect and each read.
        30.0,
        10.0,
        10.0,
        "one read of the capacity preflight (reservation, quotas, node VMs, APIs, the Secrets key ring and key, the "
        "clusters that use that key, the shared Hub cache's bucket, cpu-np's boot disk image), retries included",
    ),
    "registry": Budget(30.0, 5.0, 10.0, "one image's digest from its registry (the token too), retries included"),
    "iam-audit": Budget(
        30.0,
        10.0,
        10.0,
        "one read of `make audit`: an IAM policy (the project's, a key ring's or key's, a bucket's, a service "
        "account's) or a role's permissions, retries included",
    ),
}
"""The documented budget of each kind of call."""


class DeadlineExceededError(TpuRlError):
    """The call did not finish within its budget (the message names the budget)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"no answer within {seconds:.0f} s")
        self.seconds = seconds


def call(fn: Callable[[], T], seconds: float, *, cancel: Callable[[], object] | None = None) -> T:
    """``fn()``, or ``DeadlineExceededError`` once ``seconds`` of wall clock have passed.

    ``fn`` runs in a daemon thread (with the caller's context variables), so a process never waits
    for an abandoned call at exit; ``cancel`` is called when the deadline passes. An exception
    ``fn`` raises is raised here.
    """
    outcome: dict[str, object] = {}
    context = contextvars.copy_context()

    def run() -> None:
        try:
            outcome["value"] = context.run(fn)
        except BaseException as err:  # noqa: BLE001 (handed to the caller's thread)
            outcome["error"] = err

    worker = threading.Thread(target=run, name="tpu-rl-bounded-call", daemon=True)
    worker.start()
    worker.join(max(0.0, seconds))
    if worker.is_alive():
        if cancel is not None:
            with contextlib.suppress(Exception):  # best effort: the caller has its answer already
                cancel()
        raise DeadlineExceededError(seconds)
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]


def retrying(
    attempt: Callable[[float], T],
    budget: Budget,
    *,
    wait_for: Callable[[Exception], float | None],
    attempts: int = 4,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] = time.sleep,
) -> T:
    """Run ``attempt(seconds_left)`` until it succeeds, fails for good, ``attempts`` tries were made or
    the budget is spent.

    ``wait_for(error)`` says whether an error is transient: ``None`` (raise it now) or the seconds to
    wait before the next attempt (a server's ``Retry-After``, or 0 for the default backoff of 0.5 s,
    doubling, at most 4 s). A wait that would end past the deadline raises the last error instead.
    """
    deadline = clock() + budget.total
    backoff = 0.5
    for tried in range(1, attempts + 1):
        left = deadline - clock()
        if left <= 0:
            raise DeadlineExceededError(budget.total)
        try:
            return attempt(left)
        except DeadlineExceededError:
            raise
        except Exception as err:
            pause = wait_for(err)
            if pause is None or tried == attempts:
                raise
            pause = max(pause, backoff)
            if clock() + pause >= deadline:
                raise
            sleep(pause)
            backoff = min(backoff * 2, 4.0)
    raise AssertionError("unreachable")  # the last attempt returns or raises
