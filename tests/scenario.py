"""Helpers of the scenario tests (``test_scenarios.py``, ``test_scenario_hanging_plugin.py``): a
``gke-gcloud-auth-plugin`` on PATH, its credential, and the steps' names and live objects of a
``tests.engine.Stack``. Their fixtures (``cluster``, ``stack``) are in ``tests/conftest.py``; a module that
sets ``REAL_CLUSTER = True`` reads the loopback cluster with the real reader."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Sequence
from typing import Any

from tests.engine import Stack

STEPS = ("convert", "train", "export")


def auth_plugin(tmp_path, monkeypatch, body: str) -> None:
    """``gke-gcloud-auth-plugin`` on PATH, as the program's kubeconfig runs it."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    plugin = folder / "gke-gcloud-auth-plugin"
    plugin.write_text("#!/bin/sh\n" + body)
    plugin.chmod(plugin.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")


def credential(token: str) -> str:
    status = {"expirationTimestamp": "2099-01-01T00:00:00Z", "token": token}
    return json.dumps(
        {"kind": "ExecCredential", "apiVersion": "client.authentication.k8s.io/v1beta1", "status": status}
    )


def names(stack: Stack, overrides: Sequence[str] = ()) -> dict[str, str]:
    return {s.step: s.name for s in stack.steps(overrides).steps}


def live(stack: Stack, step: str, overrides: Sequence[str] = ()) -> dict[str, Any]:
    built = {s.step: s for s in stack.steps(overrides).steps}[step]
    obj = stack.cluster.get(built.kind, "tpu-rl", built.name)
    assert obj is not None, f"{step}'s {built.kind} {built.name} is not in the cluster"
    return obj
