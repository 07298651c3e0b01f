"""`make status` against a loopback Kubernetes API stub and fake-gcs-server."""

from __future__ import annotations

import json
import re
import time

import pytest
import yaml

from core.deadline import BUDGETS, Budget
from infra.k8s import live_objects
from tests.fake_kube import with_state, workload
from tests.lifecycle_walk import settings
from tests.loopback import QuietHandler, serve
from tests.run_files import upload_run
from tools import status as status_cli
from tools.stack_files import ROOT
from workloads.specs.step_specs import plan_workflow

DEV = plan_workflow(settings("dev", []))
CONTEXT = "gke_my-tpu-dev-project_us-east5_tpu-rl-dev"
OBJECTS: dict[str, dict] = {}
"""What the stub API server has, by object name (tests set it)."""


class StubApi(QuietHandler):
    def do_GET(self):  # noqa: N802
        name = self.path.split("?")[0].rsplit("/", 1)[-1]
        body: dict[str, object]
        if self.headers.get("Authorization") != "Bearer t":
            code, body = 401, {"kind": "Status"}
        elif name in OBJECTS:
            code, body = 200, OBJECTS[name]
        else:
            code, body = 404, {"kind": "Status", "code": 404}
        self.send_json(code, body)


@pytest.fixture(autouse=True)
def no_objects():
    """Each test's loopback stub starts empty."""
    OBJECTS.clear()


@pytest.fixture(scope="module")
def api():
    with serve(StubApi) as url:
        yield url


def kubeconfig(tmp_path, server: str, context: str = CONTEXT):
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "other",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "contexts": [
                    {"name": "other", "context": {"cluster": "x", "user": "u"}},
                    {"name": context, "context": {"cluster": "c", "user": "u"}},
                ],
                "users": [{"name": "u", "user": {"token": "t"}}],
            }
        )
    )
    return path


def cpu_step(step, state, ready=True):
    """A CPU step's JobSet as its controller leaves it (created 05:00, ended 05:18:02)."""
    obj = with_state(step.manifest, {"succeeded": "completed"}.get(state, state))
    obj["metadata"]["creationTimestamp"] = "2026-11-30T05:00:00Z"
    if not ready:
        obj["status"]["replicatedJobsStatus"][0]["ready"] = 0
    return obj


def jobset(name, terminal="", restarts=1, workers_ready=1):
    conditions = (
        [{"type": "Completed", "status": "True", "lastTransitionTime": "2026-11-30T07:00:00Z"}]
        if (terminal == "Completed")
        else []
    )
    return {
        "kind": "JobSet",
        "metadata": {"name": name, "creationTimestamp": "2026-11-30T05:20:00Z"},
        "spec": {"replicatedJobs": [{"name": "pathways-head", "replicas": 1}, {"name": "worker", "replicas": 1}]},
        "status": {
            "terminalState": terminal,
            "restarts": restarts,
            "conditions": conditions,
            "replicatedJobsStatus": [
                {"name": "pathways-head", "ready": 1, "active": 1},
                {"name": "worker", "ready": workers_ready, "active": 1},
            ],
        },
    }


def run(tmp_path, api, *extra):
    return status_cli.main(["--stack", "dev", "--kubeconfig", str(kubeconfig(tmp_path, api)), *extra])


def test_a_running_training_shows_steps_eta_reward_and_log_commands(tmp_path, api, gcs, capsys):
    OBJECTS[DEV.convert.name] = cpu_step(DEV.convert, "succeeded")
    OBJECTS[DEV.train.name] = jobset(DEV.train.name)
    upload_run(gcs, DEV.train.output_uri, steps=[1, 2, 3, 4, 5, 6], checkpoints=(5,))
    assert run(tmp_path, api) == 0
    out = capsys.readouterr().out
    lines = {
        line.split()[0]: line for line in out.splitlines() if line.split()[:1] in (["convert"], ["train"], ["export"])
    }
    assert "succeeded" in lines["convert"] and "2026-11-30 05:00" in lines["convert"] and "0:18:02" in lines["convert"]
    train = lines["train"]
    assert "running" in train and " 1 " in train, "one restart"
    assert "step 6/10" in train and "reward 0.58" in train and "accuracy 30% -> 52.5%" in train
    assert re.search(r"chip-h [0-9,.]+ held, [0-9.]+ in steps", train), "both counts, labelled"
    # ETA from the estimate model: 4 steps x 1.5 s/sample x 4 prompts x 4 generations x 32/8 chips = 384 s.
    assert "ETA 0:06" in train
    assert "pending" in lines["export"]
    assert f"logs train: {DEV.train.logs_command}" in out


def test_an_attempt_the_stall_watchdog_ended_shows_in_the_training_row(tmp_path, api, gcs, capsys):
    """The watchdog's line reaches the side file as it is written (the script copies it at once): the first
    attempt stalled, the JobSet restarted the run (one restart), and the row says so."""
    from tests.conftest import put
    from tests.run_files import FIRST_ATTEMPT, PRE, RECORD

    OBJECTS[DEV.convert.name] = cpu_step(DEV.convert, "succeeded")
    OBJECTS[DEV.train.name] = jobset(DEV.train.name)
    upload_run(gcs, DEV.train.output_uri, steps=[1, 2, 3, 4, 5, 6], checkpoints=(5,))
    stalled = "tpu-rl: stalled: no new line in train_rl's log for 2h00m (tpu-rl:workflow.stallTimeout); stopping it"
    put(gcs, DEV.train.output_uri, f"logs/evals-{FIRST_ATTEMPT}.txt", data="\n".join([RECORD, PRE, stalled]).encode())
    assert run(tmp_path, api) == 0
    (train,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("train ")]
    assert f"1 attempt ended stalled ({FIRST_ATTEMPT})" in train and "running" in train


def test_status_shows_the_slice_away_and_what_the_restarted_head_waits_for_until_when(tmp_path, api, gcs, capsys):
    """A maintenance under the run: the JobSet restarted (its workers not Ready), one of the slice's nodes NotReady,
    and the restarted head's wait saying what for and until when: its line reached the side file as it was said,
    and `make status` shows it below the slice's nodes."""
    from tests.conftest import put
    from tests.fake_kube import T0, tpu_node
    from tests.run_files import RECORD, SECOND_ATTEMPT

    dev = settings("dev", [])
    OBJECTS[DEV.convert.name] = cpu_step(DEV.convert, "succeeded")
    OBJECTS[DEV.train.name] = jobset(DEV.train.name, restarts=2, workers_ready=0)
    upload_run(gcs, DEV.train.output_uri, steps=[1, 2, 3, 4, 5, 6], checkpoints=(5,))
    waiting = (
        "tpu-rl: waiting for the slice until 14:32 UTC (tpu-rl:kueue.recoveryTimeout 4h30m): 0 of 2 workers Ready; "
        "run-worker-0-0-x7k2p: Pending: 0/4 nodes are available"
    )
    newest = "20261130T100000Z"
    assert newest > SECOND_ATTEMPT
    put(gcs, DEV.train.output_uri, f"logs/evals-{newest}.txt", data="\n".join([RECORD, waiting]).encode())
    nodes = [tpu_node(f"n{i}", T0, topology=dev.slice.topology, ready=("True", "Unknown")[i]) for i in range(2)]
    OBJECTS["nodes"] = {"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": nodes}
    assert run(tmp_path, api) == 0
    out = capsys.readouterr().out.splitlines()
    assert "slice: away: 1 of 2 nodes Ready (NotReady: node n1)" in out
    assert f"slice: the head of attempt {newest}: {waiting.removeprefix('tpu-rl: ')}" in out
    assert (
        out.index("slice: away: 1 of 2 nodes Ready (NotReady: node n1)")
        < out.index(f"slice: the head of attempt {newest}: {waiting.removeprefix('tpu-rl: ')}")
        < out.index(f"logs convert: {DEV.convert.logs_command}")
    )


@pytest.mark.pure
@pytest.mark.parametrize(
    ("step", "obj", "state"),
    [
        ("convert", None, "pending"),
        ("convert", cpu_step(DEV.convert, "running", ready=False), "pending"),
        ("convert", cpu_step(DEV.convert, "running"), "running"),
        ("convert", cpu_step(DEV.convert, "succeeded"), "succeeded"),
        ("convert", cpu_step(DEV.convert, "failed"), "failed"),
        ("train", None, "pending"),
        ("train", jobset("t", workers_ready=0), "pending"),
        ("train", jobset("t", workers_ready=1), "running"),
        ("train", {**jobset("t"), "status": {}}, "pending"),
        ("train", jobset("t", "Completed", workers_ready=0), "succeeded"),
        ("train", jobset("t", "Failed"), "failed"),
    ],
)
def test_a_step_is_pending_until_its_pods_are_ready(step, obj, state):
    """Created but waiting (unschedulable TPU pods, image pulls) reads as pending, not running."""
    typed = None if obj is None else live_objects.jobset(obj, "test JobSet")
    assert status_cli.step_status(getattr(DEV, step), typed).state == state


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (
            lambda o: o["status"].update(terminalState=["Failed"]),
            "status.terminalState: Input should be a valid string",
        ),
        (lambda o: o["status"].update(conditions=5), "status.conditions: Input should be a valid list"),
        (lambda o: o.update(metadata="x"), "metadata: Input should be a valid dictionary"),
        (lambda o: o["metadata"].update(creationTimestamp="2026-11-30T05:00:00"), "a time without a zone"),
        (lambda o: o["status"].update(restarts=-1), "status.restarts: Input should be greater than or equal to 0"),
        (
            lambda o: o["status"]["conditions"].append({"type": "Failed", "message": ["x"]}),
            "status.conditions.0.message",
        ),
    ],
    ids=["list-terminal-state", "number-conditions", "string-metadata", "time-without-zone", "negative", "list-text"],
)
@pytest.mark.slow
def test_a_jobset_of_another_shape_is_one_line_naming_the_object_and_the_field(
    tmp_path, api, gcs, capsys, change, field
):
    """A JobSet the cluster (or a proxy) sends in another shape stops at the boundary: `make status` prints one
    line naming the object and the field and exits 2, the code docs/troubleshooting.md gives an endpoint that answers
    what no such service would (a retry reads the same object), no traceback; nothing past it re-checks the shape."""
    obj = cpu_step(DEV.convert, "running")
    obj["status"].setdefault("conditions", [])
    change(obj)
    OBJECTS[DEV.convert.name] = obj
    assert run(tmp_path, api) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: cannot read the cluster: JobSet tpu-rl/{DEV.convert.name}: ") and field in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_a_failed_step_shows_its_reason_and_exits_1(tmp_path, api, gcs, capsys):
    OBJECTS[DEV.convert.name] = cpu_step(DEV.convert, "failed")
    assert run(tmp_path, api) == 1
    out = capsys.readouterr().out
    first = f"{DEV.convert.name}-convert-0"
    assert (
        "failed" in out
        and f"FailedJobs: jobset failed due to one or more job failures (first failed job: {first})" in out
    )


def test_watch_refreshes_until_the_run_ends(tmp_path, api, gcs, capsys):
    OBJECTS[DEV.convert.name] = cpu_step(DEV.convert, "succeeded")
    OBJECTS[DEV.train.name] = jobset(DEV.train.name, "Completed")
    OBJECTS[DEV.export.name] = cpu_step(DEV.export, "running")
    upload_run(gcs, DEV.train.output_uri, steps=list(range(1, 11)))

    class Clock:
        sleeps = 0

        def sleep(self, seconds):
            Clock.sleeps += 1
            OBJECTS[DEV.export.name] = cpu_step(DEV.export, "succeeded")

    assert (
        status_cli.main(
            ["--stack", "dev", "--kubeconfig", str(kubeconfig(tmp_path, api)), "--watch", "--interval", "0"],
            clock=Clock(),
        )
        == 0
    )
    out = capsys.readouterr().out
    assert Clock.sleeps == 1 and out.count("STEP ") == 2, "one refresh, then the run ended"
    assert out.rsplit("STEP ", 1)[1].count("succeeded") == 3


def test_an_unreachable_cluster_is_one_line_and_bounded(tmp_path, gcs, capsys):
    start = time.monotonic()
    assert run(tmp_path, "http://127.0.0.1:9") == 1, "a retry may cure it"
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: cannot read the cluster: cannot reach the cluster at 127.0.0.1:9") and "\n" not in err
    assert time.monotonic() - start < 30


def test_a_missing_context_says_how_to_get_it(tmp_path, api, gcs, capsys):
    path = kubeconfig(tmp_path, api, context="gke_other")
    assert status_cli.main(["--stack", "dev", "--kubeconfig", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"no context {CONTEXT}" in err
    assert (
        "gcloud container clusters get-credentials tpu-rl-dev --location us-east5 --project my-tpu-dev-project" in err
    )


@pytest.mark.slow
def test_an_unreadable_bucket_is_one_line(tmp_path, api, capsys, monkeypatch):
    OBJECTS[DEV.train.name] = jobset(DEV.train.name)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "http://127.0.0.1:9")
    monkeypatch.setitem(BUDGETS, "gcs", Budget(1.0, 0.5, 0.5))
    assert run(tmp_path, api) == 1, "a retry may cure it"
    err = capsys.readouterr().err.strip()
    # Refused connects are retried within the budget; on a loaded machine the wall-clock bound can end the
    # retries first: either way one line that names the read and the fix.
    where = re.escape(f"{DEV.train.output_uri}rl/checkpoints/actor/")
    assert re.fullmatch(
        rf"error: cannot read the run in GCS: GCS did not (answer listing the checkpoints under {where} in time "
        rf"\(ConnectionError\)|finish listing the checkpoints under {where} within 1 s); check the network, or "
        "retry later",
        err,
    ), err


def test_a_config_error_is_one_line(tmp_path, api, capsys):
    assert run(tmp_path, api, "--set", "tpu-rl:tpu.slices=x") == 2
    assert capsys.readouterr().err.startswith("error: tpu-rl:tpu.slices")


@pytest.mark.slow
def test_a_step_kueue_has_not_admitted_shows_as_queued_with_kueues_reason(tmp_path, api, gcs, capsys):
    """Suspended by Kueue's webhook and waiting for quota: `queued`, not `running` or `pending`, with the
    Workload's QuotaReserved message (Kueue flavorassigner.go); a step Kueue stopped exits 1."""
    OBJECTS[DEV.convert.name] = cpu_step(DEV.convert, "succeeded")
    train = with_state(DEV.train.manifest, "running")
    train["metadata"].update(uid="uid-train", creationTimestamp="2026-11-30T05:20:00Z")
    train["spec"]["suspend"] = True
    OBJECTS[DEV.train.name] = train
    OBJECTS["workloads"] = {"kind": "WorkloadList", "metadata": {}, "items": [workload(train, "queued")]}
    upload_run(gcs, DEV.train.output_uri, steps=[])
    assert run(tmp_path, api) == 0
    out = capsys.readouterr().out
    (row,) = [line for line in out.splitlines() if line.startswith("train")]
    assert " queued " in row and "Pending: couldn't assign flavors to pod set worker: insufficient unused quota" in row
    OBJECTS["workloads"]["items"] = [workload(train, "deactivated")]
    assert run(tmp_path, api) == 1
    (row,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("train")]
    assert " stopped " in row and "DeactivatedDueToRequeuingLimitExceeded" in row


@pytest.mark.slow
def test_a_publishing_stack_shows_the_publish_step_and_where_it_published(tmp_path, api, gcs, capsys):
    plan = plan_workflow(settings("dev", ["tpu-rl:publish.repo=acme/gemma4-grpo"]))
    assert plan.publish is not None
    for step in plan.steps[:3]:
        OBJECTS[step.name] = cpu_step(step, "succeeded") if step.step != "train" else jobset(step.name, "Completed")
    OBJECTS[plan.publish.name] = cpu_step(plan.publish, "running")
    upload_run(gcs, plan.train.output_uri, steps=list(range(1, 11)))
    args = ["--set", "tpu-rl:publish.repo=acme/gemma4-grpo"]
    assert run(tmp_path, api, *args) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("publish "))
    assert plan.publish.name in row and "running" in row
    assert f"logs publish: {plan.publish.logs_command}" in out

    OBJECTS[plan.publish.name] = cpu_step(plan.publish, "succeeded")
    commit = "0123456789abcdef0123456789abcdef01234567"
    record = {"repo": "acme/gemma4-grpo", "branch": f"tpu-rl-{plan.publish.step_id}", "commit": commit}
    bucket, name = plan.publish.artifact_uri.removeprefix("gs://").split("/", 1)
    gcs.bucket(bucket).blob(name).upload_from_string(json.dumps(record))
    assert run(tmp_path, api, *args) == 0, "the run ends with its publication"
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("publish "))
    assert f"https://huggingface.co/acme/gemma4-grpo/tree/tpu-rl-{plan.publish.step_id} (commit 0123456789ab)" in row


@pytest.mark.pure
@pytest.mark.parametrize(
    ("said", "state", "shown"),
    [
        ("tpu-rl: waiting for the slice until 14:32 UTC (x): 0 of 2 workers Ready", "pending", True),
        ("tpu-rl: waiting for the slice until 14:32 UTC (x): 0 of 2 workers Ready", "failed", False),
        ("tpu-rl: the slice is up: 2 of 2 workers Ready after 3h10m; starting train_rl", "running", False),
        ("tpu-rl: the slice did not come back within tpu-rl:kueue.recoveryTimeout (4h30m): 0 of 2", "failed", True),
    ],
    ids=["waiting", "waited-then-failed", "up", "gave-up"],
)
def test_the_heads_line_is_shown_while_it_waits_or_after_it_gave_up(said, state, shown):
    from types import SimpleNamespace

    from workloads.observe.evaluations import parse_logs

    logs = parse_logs([("evals-20261130T100000Z.txt", f"tpu-rl: waiting for the slice until 11:00 UTC\n{said}\n")])
    line = status_cli.head_wait(SimpleNamespace(evaluations=logs), state)
    assert line == (f"slice: the head of attempt 20261130T100000Z: {said.removeprefix('tpu-rl: ')}" if shown else "")


def test_an_existing_clusters_stack_is_read_through_its_context_and_says_so(tmp_path, api, gcs, capsys):
    """docs/existing-cluster.md: the status reads the cluster of tpu-rl:existingCluster.kubeContext, and a context the
    kubeconfig lacks names no get-credentials command (the cluster's owner gives the context)."""
    stack = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())
    stack["config"]["tpu-rl:existingCluster"] = {"kubeContext": "team-cluster"}
    config = tmp_path / "Pulumi.dev.yaml"
    config.write_text(yaml.safe_dump(stack))
    OBJECTS[DEV.convert.name] = cpu_step(DEV.convert, "succeeded")
    found = kubeconfig(tmp_path, api, context="team-cluster")
    assert status_cli.main(["--config-file", str(config), "--kubeconfig", str(found)]) == 0
    assert "stack dev: existing cluster of context team-cluster, namespace tpu-rl" in capsys.readouterr().out
    (tmp_path / "other").mkdir()
    elsewhere = kubeconfig(tmp_path / "other", api, context="gke_other")
    assert status_cli.main(["--config-file", str(config), "--kubeconfig", str(elsewhere)]) == 2
    err = capsys.readouterr().err
    assert "no context team-cluster" in err and "get-credentials" not in err
