"""Ends a training attempt that stopped making progress (run in the MaxText image beside train_rl as
``python3 /tpu-rl/stall_watchdog.py``, a file of the training step's ConfigMap beside ``tpu_rl_watch.py``, which it
imports; standard library only).

    python3 stall_watchdog.py PID LOG SECONDS MARKER [BUDGET SLICE_BASELINE]

Progress is a line of train_rl's log that says the run moved on, not a new byte: a loop that keeps logging
(a retry, a warning every second) without training is not alive. The lines that count (``PROGRESS``), each
as MaxText 0.2.4 and 0.2.5 and tunix c4ec573 print them via absl (``<level><date> <time> <thread> <file>:<line>] ``):

- a training step with a number above every one seen in this attempt (tunix ``PeftTrainer._log_metrics``:
  ``Train step N training loss: ...``, once per step);
- a stage of start-up (MaxText ``train_rl.py``: ``Creating RL cluster...``, ``Setting up RL trainer...``, the
  reference and policy models initialized, ``Starting RL training...``; tunix: ``Restored params from step``,
  ``Fast forwarded``), the longest of which, vLLM's engine start with its compilation, is what the default
  ``tpu-rl:workflow.stallTimeout`` of 2 h is sized for;
- an evaluation's question or result (MaxText ``evaluate_rl.py`` ``Evaluation Question:``; ``Pre RL
  Training:``, ``Intermediate Eval (step=``, ``Post RL Training:``; tunix ``Running evaluation on train step``);
- the end of training (``RL Training Completed Successfully!``).

The log (not the TensorBoard events, which train_rl writes to GCS, out of this container's reach without a
client) is read from where the last look ended, a bounded amount each time. The ``SECONDS`` clock starts at the first
sign of devices up (``DEVICES``: MaxText's ``System Information: Jax Backend:`` line, which ``train_rl.main`` prints
once ``max_utils.print_system_information`` has initialized JAX's backend through the Pathways proxy, MaxText 0.2.5
``train_rl.py`` 797 and ``utils/max_utils.py`` 837; or any progress line, should that line ever go). Until then the
bound is ``SECONDS`` too when the slice's wait saw every worker Ready (it wrote ``SLICE_BASELINE``,
``slice_state.py``): the devices answer in minutes once the workers are up, so a start-up that hangs costs one stall
bound, not the recovery budget. Only when the wait could not read the workers (no baseline) is the bound ``BUDGET``
(the attempt's recovery budget, ``tpu-rl:kueue.recoveryTimeout``), since the slice may then still be away; without
either argument, ``SECONDS`` from the watchdog's start. When no progress line has come for the bound while
train_rl (``PID``) runs, the watchdog writes ``MARKER`` (why, one line), appends that line to the log, sends train_rl
SIGTERM and, if it is still there ``KILL_AFTER`` seconds later, SIGKILL. The training script then exits as
``train_exit.py`` judges (``STALLED_EXIT`` when nothing else explains the end). It exits by itself once train_rl is
gone.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING or __package__:  # the repository's package (the tests)
    from workloads.container.tpu_rl_watch import LogFollower, alive, duration, interval, stop
else:  # python3 /tpu-rl/stall_watchdog.py: tpu_rl_watch.py is a file of the same ConfigMap, its folder on sys.path
    from tpu_rl_watch import LogFollower, alive, duration, interval, stop

PROGRESS = re.compile(
    r"\] (?:Train step (?P<step>[0-9]{1,12}) training loss"
    r"|Creating RL cluster\.\.\.|Setting up RL trainer\.\.\.|Reference Model initialized successfully"
    r"|Policy Model initialized successfully|Starting RL training\.\.\.|Restored params from step: |Fast forwarded "
    r"|Evaluation Question: |Pre RL Training: |Intermediate Eval \(step=|Post RL Training: "
    r"|Running evaluation on train step |RL Training Completed Successfully!)"
)
"""A line that says the run moved on (the module's docstring); ``step``: a training step's number."""
DEVICES = re.compile(r"\] System Information: Jax Backend: ")
"""MaxText's line once JAX's backend is up: its devices answer (the module's docstring)."""
LOOKS, LONGEST_LOOK = 20, 60.0
"""How often the log is looked at (``interval``): a twentieth of the bound, at least once a minute."""


class Progress:
    """Follows a growing log (``LogFollower``), and says whether a progress line came."""

    def __init__(self, path: str) -> None:
        self.log, self.step = LogFollower(path), -1
        self.devices = False
        """Whether the log has shown the devices up (``DEVICES``, or any progress line)."""

    def moved(self) -> bool:
        """Whether the log's new complete lines hold progress (each line is read, for the devices' sign too)."""
        return any([self._progress(line) for line in self.log.lines()])

    def _progress(self, line: str) -> bool:
        match = PROGRESS.search(line)
        if match is None:
            self.devices = self.devices or DEVICES.search(line) is not None
            return False
        self.devices = True
        if match["step"] is None:
            return True
        step = int(match["step"])
        if step <= self.step:
            return False  # a step seen before: a loop, not training
        self.step = step
        return True


def stalled_for(seconds: float) -> str:
    return f"stalled: no training progress in train_rl's log for {duration(seconds)} (tpu-rl:workflow.stallTimeout)"


STALL_KEY = "tpu-rl:workflow.stallTimeout"
BUDGET_KEY = "tpu-rl:kueue.recoveryTimeout"


def no_devices_for(seconds: float, key: str = BUDGET_KEY) -> str:
    return f"stalled: train_rl's devices did not come up within {duration(seconds)} of its start ({key})"


def devices_bound(seconds: float, budget: float, workers_ready: bool) -> tuple[float, str]:
    """How long train_rl's devices may take to come up, and the key that sets it: the stall bound once the slice's wait
    saw every worker Ready, the recovery budget while the workers could not be read (the module's docstring)."""
    return (seconds, STALL_KEY) if workers_ready else (budget, BUDGET_KEY)


def watch(  # noqa: PLR0913 (the program's arguments, and its clocks)
    pid: int,
    log: str,
    seconds: float,
    marker: str,
    clock=time.monotonic,
    sleep=time.sleep,
    devices_seconds: float | None = None,
    devices_key: str = BUDGET_KEY,
) -> bool:
    """Watch until train_rl is gone; True when it had to be stopped. ``devices_seconds``: the bound until the devices'
    first sign (``devices_bound``; None: ``seconds`` from the start), set by ``devices_key``."""
    progress, since = Progress(log), clock()
    armed = devices_seconds is None
    while alive(pid):
        sleep(interval(seconds if armed else min(seconds, devices_seconds or seconds), LOOKS, LONGEST_LOOK))
        now = clock()
        moved = progress.moved()
        if not armed and progress.devices:
            armed, since = True, now  # the stall clock starts at the devices' first sign
        if moved:
            since = now
            continue
        bound = seconds if armed else devices_seconds or seconds
        if now - since < bound:
            continue
        line = stalled_for(seconds) if armed else no_devices_for(bound, devices_key)
        with open(marker, "w", encoding="utf-8") as handle:
            handle.write(line + "\n")
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(f"tpu-rl: {line}; stopping it\n")
        stop(pid, clock, sleep)
        return True
    return False


def main(argv: list[str]) -> None:
    pid, log, seconds, marker, *slice_wait = argv
    bound, key = None, BUDGET_KEY
    if slice_wait:
        budget, baseline = slice_wait
        bound, key = devices_bound(float(seconds), float(budget), os.path.exists(baseline))
    with contextlib.suppress(ProcessLookupError):  # train_rl ended between the check and the signal
        watch(int(pid), log, float(seconds), marker, devices_seconds=bound, devices_key=key)


if __name__ == "__main__":
    main(sys.argv[1:])
