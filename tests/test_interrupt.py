"""Ctrl-C (SIGINT) or SIGTERM while the program waits for a step or a webhook ends it at once, the step left running.

How an interruption reaches the program (pulumi v3.259.0): the CLI's first SIGINT or SIGTERM cancels the update
(``pkg/backend/cancellation_scope.go``: "^C received; cancelling"); the deployment executor then signals
cancellation to every plugin (``deployment_executor.go`` ``Execute`` -> ``pkg/host/host.go``
``SignalCancellation``: providers and analyzers first, then the language hosts' ``Cancel``), and
pulumi-language-python's ``Cancel`` cancels the program's command, whose ``cmd.Cancel`` sends it SIGINT and whose
``WaitDelay`` kills it 5 s later (``sdk/python/cmd/pulumi-language-python/main.go``). The program is run by
``pulumi-language-python-exec``: ``loop.run_until_complete`` of the program, then ``executor.shutdown(wait=True)``
of the loop's default executor, which Python's default SIGINT handler interrupts with ``KeyboardInterrupt``.

So a wait of the program must neither block the loop's thread nor run in that executor: the step waits
(``workloads.observe.waiting.wait_for_step`` through ``infra.threads.in_daemon_thread``) and the webhook wait
(``infra.k8s.live.ClusterReader.wait_admitted`` through the same ``in_daemon_thread``) run in daemon threads,
which the interpreter does not join. These tests run that shape in a real process, with the real 20 s poll, and
measure the exit after a real SIGINT or SIGTERM. (A wait in a provider, such as ``infra.gcp.kms``'s dynamic
provider, is another matter: the engine waits for a provider's operation in flight, and the Python dynamic
provider's ``Cancel`` does nothing: ``pulumi/dynamic/__main__.py``.)

What the step is left as: the provider returned once the JobSet was applied (skipAwait), so the state holds it and
the next `up` waits for the same run (``tests/test_scenarios.py``
``test_ctrl_c_while_up_waits_for_a_step_then_up_waits_for_the_same_run``)."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BOUND = 5.0
"""pulumi-language-python's WaitDelay: the program must be gone before the language host kills it."""

PROGRAM = r"""
import asyncio, sys
from concurrent.futures import ThreadPoolExecutor

from infra.k8s import live
from workloads.observe import waiting

def read():
    print("polled", flush=True)
    raise live.ClusterReadError("not yet")  # the wait keeps polling: a real 20 s sleep between polls

def step_wait():
    bounds = waiting.Bounds(total=86400.0, admission=3600.0, lost=86400.0)
    return waiting.wait_for_step(read, "JobSet tpu-rl/x", bounds, report=print)

class NeverAdmitted(live.ClusterReader):
    def __init__(self):
        pass

    def dry_run_create(self, manifest):
        print("polled", flush=True)
        raise live._NotAdmittedYetError("no endpoints available for service kueue-webhook-service")

def webhook_wait():
    return NeverAdmitted().wait_admitted({"kind": "ResourceFlavor", "metadata": {"name": "x"}}, bound=86400.0)

async def main(which):
    if which == "step":
        from infra.threads import in_daemon_thread
        return await in_daemon_thread(step_wait, "tpu-rl-wait")  # as workloads.reader runs it
    from infra.threads import in_daemon_thread
    return await in_daemon_thread(webhook_wait, "tpu-rl-platform-check")  # as infra.k8s.platform runs it

# pulumi-language-python-exec's shape: the program on an event loop with a default executor, shut down at the end.
loop = asyncio.new_event_loop()
asyncio.set_event_loop(loop)
executor = ThreadPoolExecutor(max_workers=8)
loop.set_default_executor(executor)
try:
    loop.run_until_complete(main(sys.argv[1]))
finally:
    executor.shutdown(wait=True)
    loop.close()
"""


FORKS = (
    r"""
import os, signal, sys

# The program's imports, paid once: each wait runs in a fork of this process (no thread runs here yet).
import asyncio
from concurrent.futures import ThreadPoolExecutor
from infra.k8s import live
from infra.threads import in_daemon_thread
from workloads.observe import waiting

while request := sys.stdin.readline():
    which, out, err = request.split()
    pid = os.fork()
    if pid == 0:  # the child goes on to run the program, as `python -c PROGRAM which` would
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.dup2(os.open(out, os.O_WRONLY), 1)
        os.dup2(os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 2)
        sys.argv = ["-c", which]
        # Python's own handlers, as a program started with SIGINT at its default gets them (a shell that runs
        # pytest in the background starts it with SIGINT ignored, which a fork and a Python would inherit).
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        break
    print(pid, flush=True)
    print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
else:
    sys.exit(0)
"""
    + PROGRAM
)
"""A process that imports the program's modules once, then forks a process per wait it is asked for: the child runs
``PROGRAM`` to its end at the top level, as ``python -c PROGRAM <which>`` does (its own stdin, stdout and stderr,
Python's default signal handlers), and this process prints its pid, then its exit status as ``Popen.returncode``
gives it (``-N``: ended by signal N)."""


class Forks:
    """The running ``FORKS`` process: ``interrupted`` starts one wait in a child of its own."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", FORKS],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def _line(self, timeout: float) -> str:
        assert self.proc.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(self.proc.stdout, selectors.EVENT_READ)
            assert selector.select(timeout=timeout), f"no answer within {timeout} s"
        return self.proc.stdout.readline().strip()

    def interrupted(self, which: str, sig: signal.Signals) -> tuple[float, int, str]:
        """Start the wait ``which`` in a process, send ``sig`` once it polled, return (seconds to exit, code,
        stderr)."""
        assert self.proc.stdin is not None
        out, err = self.folder / f"{which}-{sig.name}.out", self.folder / f"{which}-{sig.name}.err"
        os.mkfifo(out)
        self.proc.stdin.write(f"{which} {out} {err}\n")
        self.proc.stdin.flush()
        pid = int(self._line(timeout=60))
        code: int | None = None
        try:
            with open(out, "rb") as stdout, selectors.DefaultSelector() as selector:
                selector.register(stdout, selectors.EVENT_READ)
                assert selector.select(timeout=60), "the wait never polled"
                assert stdout.readline() == b"polled\n"
                os.kill(pid, sig)
                sent = time.monotonic()
                code = int(self._line(timeout=BOUND + 5))
                return time.monotonic() - sent, code, err.read_text()
        finally:
            if code is None:  # the child is still running: end it, and read its status
                os.kill(pid, signal.SIGKILL)
                self._line(timeout=10)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


@pytest.fixture(scope="module")
def forks(tmp_path_factory) -> Iterator[Forks]:
    running = Forks(tmp_path_factory.mktemp("interrupt"))
    try:
        yield running
    finally:
        running.close()


@pytest.mark.parametrize("which", ["step", "webhook"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupted_wait_ends_the_program_at_once(forks, which, sig):
    seconds, code, stderr = forks.interrupted(which, sig)
    assert seconds < BOUND, f"{which} wait: {seconds:.1f} s after {sig.name}"
    if sig == signal.SIGINT:
        assert "KeyboardInterrupt" in stderr and code != 0, "Python's default handler, not the language host's kill"
    else:
        assert code == -signal.SIGTERM


def test_a_step_wait_imports_the_kubernetes_client_on_the_loops_thread_before_its_own(monkeypatch):
    """The waiting thread creates a ``ClusterReader`` on every poll: a first import of the client from two threads
    at once can deadlock on Python's module locks (``infra.k8s.credentials.load_client``), so ``LiveReader.wait``
    imports it on the loop's thread before it starts its own, as the platform's checks do (``infra.k8s.platform``)."""
    import asyncio
    import types
    from typing import Any, cast

    import pulumi

    from infra.k8s.live import ClusterReader
    from tests.lifecycle_walk import settings
    from tests.world import NO_HUB
    from workloads import reader
    from workloads.observe.artifacts import storage_client
    from workloads.specs.step_specs import plan_workflow

    order: list[str] = []
    monkeypatch.setattr(reader.credentials, "load_client", lambda: order.append("client imported"))

    def thread(work, name: str) -> asyncio.Future:
        order.append(f"{name} started")
        done = asyncio.get_running_loop().create_future()
        done.set_result({})
        return done

    monkeypatch.setattr(reader, "in_daemon_thread", thread)
    prod = settings("prod", [])

    async def wait() -> object:
        live = reader.LiveReader(
            reader.reader_args(prod),
            pulumi.Output.from_input("kubeconfig"),
            pulumi.Output.from_input(True),
            connect=ClusterReader,
            bucket=storage_client,
            hub=NO_HUB,
        )
        jobset = cast(Any, types.SimpleNamespace(id=pulumi.Output.from_input("tpu-rl/train")))
        return await live.wait(plan_workflow(prod).train, jobset).future()

    loop = asyncio.new_event_loop()  # not asyncio.run, which leaves the thread no current loop for later tests
    try:
        assert loop.run_until_complete(wait()) == {}
    finally:
        loop.close()
    assert order == ["client imported", "tpu-rl-wait started"]
