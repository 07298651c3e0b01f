"""`make maintenance` (``tools.maintenance``) against the loopback Kubernetes API server (``tests.fake_kube``, which
applies a node's label patch as the API server does), and the Makefile's `maintenance` target and `ACCEPT` as `make
-n` prints them. No wall-clock waits, no cluster: the clock is the module's."""

from __future__ import annotations

import datetime
import os
import shutil
import subprocess

import pytest
import yaml

from core.errors import BAD_INPUT, FAILED
from tests.fake_kube import T0, tpu_node, with_state
from tests.fake_pulumi import CLEAN
from tests.lifecycle_walk import settings
from tools import maintenance as maintenance_cli
from tools.stack_files import ROOT
from workloads.observe import slice_maintenance as maintenance
from workloads.observe.slice_maintenance import ACTIVE_LABEL, PERFORM_LABEL, SCHEDULED_LABEL
from workloads.specs.step_specs import plan_workflow

DEV = settings("dev", [])
PLAN = plan_workflow(DEV)
NOW = datetime.datetime(2026, 12, 1, 8, 0, tzinfo=datetime.UTC)
WHEN = str(int((NOW + datetime.timedelta(days=2, hours=3)).timestamp()))
"""A maintenance two days and three hours off (2026-12-03 11:00 UTC)."""
MAKE = shutil.which("make")


@pytest.fixture(autouse=True)
def fixed_clock(monkeypatch):
    monkeypatch.setattr(maintenance, "clock", NOW.timestamp)


@pytest.fixture
def kubeconfig(cluster, tmp_path):
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(cluster.kubeconfig(context=DEV.kube_context)))
    return path


def nodes(cluster, *labels: dict[str, str]) -> None:
    """The dev slice's nodes (2x4: two hosts), with these labels each."""
    cluster.core[("nodes", "")] = [
        tpu_node(f"gke-tpu-rl-dev-tpu-np-{i}", T0, topology=DEV.slice.topology, labels=extra)
        for i, extra in enumerate(labels)
    ]


def labels(cluster) -> dict[str, str | None]:
    return {n["metadata"]["name"]: n["metadata"]["labels"].get(PERFORM_LABEL) for n in cluster.core[("nodes", "")]}


def run(kubeconfig, capsys, *args: str) -> tuple[int, str, str]:
    code = maintenance_cli.main(["--stack", "dev", "--kubeconfig", str(kubeconfig), *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_it_lists_the_slice_and_labels_each_node_then_says_how_to_follow(cluster, kubeconfig, capsys):
    nodes(cluster, {SCHEDULED_LABEL: WHEN}, {SCHEDULED_LABEL: WHEN, ACTIVE_LABEL: "ONGOING"})
    code, out, err = run(kubeconfig, capsys)
    assert (code, err) == (0, "")
    selector = "cloud.google.com/gke-tpu-accelerator=tpu-v6e-slice,cloud.google.com/gke-tpu-topology=2x4"
    assert out.splitlines() == [
        f"the slice's nodes ({selector}):",
        "  gke-tpu-rl-dev-tpu-np-0  scheduled 2026-12-03 11:00 UTC (in 2 d 3 h)",
        f"  gke-tpu-rl-dev-tpu-np-1  scheduled 2026-12-03 11:00 UTC (in 2 d 3 h) · {ACTIVE_LABEL}=ONGOING",
        f"gke-tpu-rl-dev-tpu-np-0: labelled {PERFORM_LABEL}=true",
        f"gke-tpu-rl-dev-tpu-np-1: labelled {PERFORM_LABEL}=true",
        "GKE starts the host maintenance of the slice now; a large slice may be away up to a few hours (Cloud TPU, "
        '"Manually start a host maintenance event").',
        "follow it: `make status STACK=dev` (its slice maintenance lines), or `kubectl --context "
        f"{DEV.kube_context} get nodes -l {selector} -L {SCHEDULED_LABEL},{ACTIVE_LABEL}`; once the slice is back: "
        "`make up STACK=dev`",
    ]
    assert labels(cluster) == {"gke-tpu-rl-dev-tpu-np-0": "true", "gke-tpu-rl-dev-tpu-np-1": "true"}
    patch = {"metadata": {"labels": {PERFORM_LABEL: "true"}}}
    assert cluster.patches == [
        (f"/api/v1/nodes/gke-tpu-rl-dev-tpu-np-{i}", "application/merge-patch+json", patch) for i in range(2)
    ]


def test_a_node_already_asked_is_left_as_it_is(cluster, kubeconfig, capsys):
    nodes(cluster, {SCHEDULED_LABEL: WHEN, PERFORM_LABEL: "true"}, {SCHEDULED_LABEL: WHEN})
    code, out, _ = run(kubeconfig, capsys)
    assert code == 0 and f"gke-tpu-rl-dev-tpu-np-0: already labelled {PERFORM_LABEL}=true" in out.splitlines()
    assert [path for path, _, _ in cluster.patches] == ["/api/v1/nodes/gke-tpu-rl-dev-tpu-np-1"]


def test_it_refuses_while_training_runs_unless_forced(cluster, kubeconfig, capsys):
    """A rehearsal under a short run is the forced case (docs/maintenance.md)."""
    nodes(cluster, {SCHEDULED_LABEL: WHEN}, {SCHEDULED_LABEL: WHEN})
    cluster.put(with_state(PLAN.train.manifest, "running"))
    code, out, err = run(kubeconfig, capsys)
    assert code == FAILED and cluster.patches == []
    assert "gke-tpu-rl-dev-tpu-np-0  scheduled 2026-12-03 11:00 UTC" in out, "the nodes are listed first"
    assert err == (
        f"error: training JobSet tpu-rl/{PLAN.train.name} has not ended (it runs, or waits for the slice): a "
        "maintenance now interrupts it; wait for it to end (`make status STACK=dev`), or rehearse a maintenance under "
        "it with `make maintenance STACK=dev FORCE=1` "
        '(docs/maintenance.md "Rehearse a host maintenance on a dev slice")\n'
    )
    code, _, err = run(kubeconfig, capsys, "--force")
    assert (code, err) == (0, "") and set(labels(cluster).values()) == {"true"}


def test_a_finished_training_does_not_hold_it_back(cluster, kubeconfig, capsys):
    nodes(cluster, {SCHEDULED_LABEL: WHEN})
    cluster.put(with_state(PLAN.train.manifest, "completed"))
    assert run(kubeconfig, capsys)[0] == 0


def test_with_no_maintenance_scheduled_it_labels_nothing_unless_forced(cluster, kubeconfig, capsys):
    nodes(cluster, {}, {})
    code, out, err = run(kubeconfig, capsys)
    assert code == FAILED and cluster.patches == [] and "no maintenance scheduled" in out
    assert err == (
        f"error: no node of the slice of stack dev has a maintenance scheduled ({SCHEDULED_LABEL}): a manual start is "
        "for a scheduled maintenance, so nothing is labelled; `make maintenance STACK=dev FORCE=1` labels anyway\n"
    )
    code, out, _ = run(kubeconfig, capsys, "--force")
    assert code == 0 and len(cluster.patches) == 2
    assert "no maintenance was scheduled on the slice: whether GKE starts one for the label, no page read says" in out


def test_a_slice_without_nodes_has_nothing_to_start(cluster, kubeconfig, capsys):
    code, out, err = run(kubeconfig, capsys, "--force")
    assert (code, out) == (FAILED, "")
    assert err == (
        "error: the slice of stack dev has no nodes (tpu-v6e-slice 2x4): an autoscaled pool (tpu-rl:tpu.capacity spot, "
        "flex-start or on-demand) has none outside training, so there is nothing to start\n"
    )


def test_a_refused_label_is_one_line_naming_the_permission(cluster, kubeconfig, capsys):
    nodes(cluster, {SCHEDULED_LABEL: WHEN})
    cluster.patch_refusal = 403
    code, _, err = run(kubeconfig, capsys)
    assert code == FAILED and err.count("\n") == 1
    assert err.startswith("error: cannot read or label the slice's nodes: the cluster at 127.0.0.1:")
    assert err.endswith(
        "refused to label node gke-tpu-rl-dev-tpu-np-0 (HTTP 403): the identity needs to update nodes "
        "(container.nodes.update, in roles/container.admin, which `make up` needs too) and a fresh login\n"
    )


def test_an_unreachable_cluster_is_one_line_and_a_missing_context_is_bad_input(cluster, kubeconfig, capsys, tmp_path):
    cluster.stop()
    code, _, err = run(kubeconfig, capsys)
    assert code == FAILED and err.startswith("error: cannot read or label the slice's nodes: cannot reach the cluster")
    other = tmp_path / "other"
    other.write_text(yaml.safe_dump(cluster.kubeconfig(context="elsewhere")))
    code, _, err = run(other, capsys)
    assert code == BAD_INPUT and err.startswith("error: no context ") and DEV.get_credentials_command in err


# -- the Makefile -----------------------------------------------------------------------------------------------


def dry_run(*args: str) -> list[str]:
    """What `make -n ARGS` would run, outside any parent make."""
    assert MAKE is not None
    env = {k: v for k, v in os.environ.items() if k not in CLEAN}
    command = [MAKE, "--no-print-directory", "-n", "-o", ".venv/.installed", "-o", "policy/venv/.installed", *args]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=True).stdout.splitlines()


@pytest.mark.skipif(MAKE is None, reason="make is not installed")
def test_make_maintenance_runs_the_tool_and_force_passes_through():
    assert dry_run("maintenance", "STACK=prod")[-1] == ".venv/bin/python -m tools.maintenance --stack prod"
    assert dry_run("maintenance", "STACK=prod", "FORCE=1")[-1].endswith("--stack prod --force")


@pytest.mark.skipif(MAKE is None, reason="make is not installed")
def test_make_up_hands_pulumi_up_accept_and_only_it():
    """`ACCEPT=` reaches `pulumi up` as TPU_RL_ACCEPT (the program reads it, ``program.config.accepted``); without it
    the variable is set empty, so one exported in the shell does not reach `pulumi up`."""
    *_, accept, up = dry_run("up", "STACK=dev", "ACCEPT=maintenance")
    assert accept == "export TPU_RL_ACCEPT='maintenance'; \\" and up.startswith("pulumi up --stack dev")
    assert dry_run("up", "STACK=dev")[-2] == "export TPU_RL_ACCEPT=''; \\"
