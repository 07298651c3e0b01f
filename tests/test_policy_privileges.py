"""``least-privilege-pods`` on one container (``workloads._container_privileges``) and one pod
(``workloads._pod_privileges``): a Windows host process (on the container or the pod), an unmasked ``/proc`` and a
profile other than the runtime's default are each named with the container or pod and the fix, on the resource
judged; the default ``procMount`` passes; a TPU quantity that is not a quantity does not make a pod a TPU worker,
so it gets neither the host network nor the node's ``/tmp`` (only real TPU workers do)."""

from __future__ import annotations

from typing import Any

import pytest

from policy.tpu_rl_policies.pods import Pod
from policy.tpu_rl_policies.workloads import _container_privileges, _pod_privileges
from tests.policy_args import Reports

pytestmark = pytest.mark.pure

WHERE = "spec.template.spec"


def container_findings(context: dict[str, Any]) -> list[tuple[str, str | None]]:
    report = Reports()
    _container_privileges({"name": "trainer", "image": "i", "securityContext": context}, report)
    return report.calls


def pod_findings(spec: dict[str, Any]) -> list[tuple[str, str | None]]:
    report = Reports()
    _pod_privileges(Pod(where=WHERE, spec=spec, metadata={}), False, report)
    return report.calls


@pytest.mark.parametrize(
    ("context", "expected"),
    [
        (
            {"windowsOptions": {"hostProcess": True}},
            ["container trainer runs as a host process (windowsOptions.hostProcess): remove it"],
        ),
        ({"windowsOptions": {"hostProcess": False}}, []),
        ({"windowsOptions": {"runAsUserName": "u"}}, []),
    ],
    ids=["host-process", "host-process-false", "other-windows-option"],
)
def test_a_container_that_runs_as_a_windows_host_process_is_named(context, expected):
    assert container_findings(context) == [(message, None) for message in expected]


@pytest.mark.parametrize(
    ("context", "expected"),
    [
        ({"procMount": "Unmasked"}, ["container trainer unmasks /proc (procMount: Unmasked): remove it"]),
        ({"procMount": "default"}, ["container trainer unmasks /proc (procMount: default): remove it"]),
        ({"procMount": "Default"}, []),
        ({}, []),
    ],
    ids=["unmasked", "lowercase-default", "default", "unset"],
)
def test_a_container_that_unmasks_proc_is_named_with_its_proc_mount(context, expected):
    assert container_findings(context) == [(message, None) for message in expected]


def test_a_container_profile_other_than_the_runtime_default_names_the_container():
    assert container_findings({"seccompProfile": {"type": "Unconfined"}}) == [
        (
            "container trainer sets the seccomp profile Unconfined: set seccompProfile.type RuntimeDefault, or leave "
            "it unset",
            None,
        )
    ]


@pytest.mark.parametrize(
    ("context", "expected"),
    [
        (
            {"windowsOptions": {"hostProcess": True}},
            [f"pod {WHERE} runs as a host process (windowsOptions.hostProcess): remove it"],
        ),
        ({"windowsOptions": {"hostProcess": False}}, []),
        ({"windowsOptions": {"runAsUserName": "u"}}, []),
    ],
    ids=["host-process", "host-process-false", "other-windows-option"],
)
def test_a_pod_that_runs_as_a_windows_host_process_is_named(context, expected):
    spec = {"containers": [{"name": "trainer", "image": "i"}], "securityContext": context}
    assert pod_findings(spec) == [(message, None) for message in expected]


def tpu_pod(chips: Any, **fields: Any) -> dict[str, Any]:
    container = {"name": "worker", "image": "i", "resources": {"limits": {"google.com/tpu": chips}}}
    return {"containers": [container], **fields}


@pytest.mark.parametrize(
    ("chips", "expected"),
    [
        (
            "lots",
            [f"pod {WHERE} uses the node's network (hostNetwork: true): only the Pathways head and the TPU workers do"],
        ),
        ("4", []),
    ],
    ids=["malformed-chips", "four-chips"],
)
def test_a_malformed_tpu_quantity_does_not_earn_the_host_network(chips, expected):
    assert pod_findings(tpu_pod(chips, hostNetwork=True)) == [(message, None) for message in expected]


@pytest.mark.parametrize(
    ("chips", "expected"),
    [
        (
            "lots",
            ["volume tmp mounts the node's /tmp: only the Pathways workers on TPU hosts mount a host path (/tmp)"],
        ),
        ("4", []),
    ],
    ids=["malformed-chips", "four-chips"],
)
def test_a_malformed_tpu_quantity_does_not_earn_the_nodes_tmp(chips, expected):
    spec = tpu_pod(chips, volumes=[{"name": "tmp", "hostPath": {"path": "/tmp"}}])
    assert pod_findings(spec) == [(message, None) for message in expected]
