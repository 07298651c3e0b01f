"""Where a training attempt's start-up went (``workloads.observe.startup``): absl logs as MaxText 0.2.5 and tunix
c7d8950 print them, in their order and at their lines (``tests.upstream_logs``), the live objects as the API server,
the kubelet and Kueue write them (served by the loopback API server ``tests.fake_kube`` and read by the real bounded
reader), the logs in fake-gcs-server."""

from __future__ import annotations

import datetime

import pytest

from core.estimate import STARTUP_MINUTES, restarted
from infra.k8s import live
from tests.fake_kube import fake_cluster, kubelet_event, tpu_node, with_state, workload
from tests.lifecycle_walk import settings
from tests.upstream_logs import absl
from workloads.container.launch import SKIPPED
from workloads.observe import pulls, startup
from workloads.observe.startup import LogAttempt
from workloads.specs.step_specs import plan_workflow

DEV = plan_workflow(settings("dev", []))
UTC = datetime.UTC
WARM_NODE_RESTART_MINUTES = restarted(STARTUP_MINUTES, same_nodes=True)
"""The estimate's restart on the nodes the run holds, at the defaults."""
NS = "tpu-rl"
ATTEMPT = "20261231T234100Z"
"""The first attempt starts 20 minutes before New Year: its later lines are dated 0101 (no year in absl)."""
ATTEMPT_START = datetime.datetime(2026, 12, 31, 23, 41, tzinfo=UTC)


def at(text: str) -> float:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


# A fresh start (no checkpoint yet): MaxText 0.2.5's and tunix's lines through absl, <level><MMDD> <HH:MM:SS.micro>
# <thread> <file:line>] <message>, in the order a start-up logs them; no restore between the RL cluster and the trainer.
FIRST_LOG = "\n".join(
    [
        'tpu-rl run: {"model":"gemma4-26b","slice":{"version":"v6e","chips":32}}',
        absl("1231 23:41:02", "System Information: Jax Version: 0.8.1", 140245),
        absl("1231 23:59:30.25", "System Information: Jax Backend: Pathways 0.1", 140245),
        absl("0101 00:04:30", "Creating RL cluster...", 140245),
        absl("0101 00:16:30", "Setting up RL trainer...", 140245),
        absl(
            "0101 00:21:30",
            "Pre RL Training: corr=12, total=40, accuracy=30.0%, partial_accuracy=45.0%, format_accuracy=80.0%, "
            "mean_reward=0.4500",
            140245,
        ),
        absl("0101 00:21:31", "Starting RL training...", 140245),
        absl("0101 00:24:00", "Train step 1 training loss: 0.693147  - training perplexity: 2.000000", 140245),
        absl("0101 00:30:00", "Train step 2 training loss: 0.650000  - training perplexity: 1.915540", 140245),
    ]
)


@pytest.mark.pure
def test_absl_times_take_the_attempts_year_and_roll_over_new_year():
    start = ATTEMPT_START
    line = "I0101 00:04:30.5 140245 train_rl.py:498] Creating RL cluster..."
    assert startup.absl_time(line, start) == datetime.datetime(2027, 1, 1, 0, 4, 30, 500000, tzinfo=UTC)
    same = "W1231 23:59:30.250000 1 x.py:1] y"
    assert startup.absl_time(same, start) == datetime.datetime(2026, 12, 31, 23, 59, 30, 250000, tzinfo=UTC)
    assert startup.absl_time("tpu-rl run: {}", start) is None
    assert startup.absl_time("I0230 00:00:00.000000 1 x.py:1] no 30 February", start) is None


@pytest.mark.pure
def test_the_logs_milestones_are_their_first_lines():
    marks = startup.log_marks(FIRST_LOG, ATTEMPT_START)
    assert marks == {
        "backend": at("2026-12-31T23:59:30.25Z"),
        "RL cluster": at("2027-01-01T00:04:30Z"),
        "RL trainer": at("2027-01-01T00:16:30Z"),
        "pre-RL eval": at("2027-01-01T00:21:30Z"),
        "first step": at("2027-01-01T00:24:00Z"),
    }


@pytest.mark.pure
@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1m2.345s", 62.345), ("850ms", 0.85), ("1h0m0s", 3600.0), ("21m3.5s", 1263.5), ("15.981s", 15.981)],
)
def test_go_durations_as_the_kubelet_prints_them(text, seconds):
    assert pulls.go_duration(text) == pytest.approx(seconds)


@pytest.mark.pure
@pytest.mark.parametrize("text", ["", "1x", "1m 2s", "s", "-1s", "1m2"])
def test_other_text_is_no_duration(text):
    assert pulls.go_duration(text) is None


# -- the first attempt, its pods live -----------------------------------------------------------------------

MAXTEXT = "us-docker.pkg.dev/cloud-tpu-images/maxtext-images/tpu_post_training:0.2.4"
SERVER = "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/server:jax-0.8.1"


def train_jobset() -> dict:
    obj = with_state(DEV.train.manifest, "running")
    obj["metadata"].update(uid="uid-train", creationTimestamp="2026-12-31T23:30:00Z")
    return obj


def pod(obj: dict, job: str, index: int, scheduled: str, started: str, node: str, container: str) -> dict:
    """A pod of the training JobSet as the kubelet reports it running: PodScheduled and the container's start."""
    name = f"{obj['metadata']['name']}-{job}-0-{index}-x7k2p"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": f"uid-{job}-{index}",
            "creationTimestamp": "2026-12-31T23:31:05Z" if job == "pathways-head" else "2026-12-31T23:41:30Z",
            "labels": {
                "jobset.sigs.k8s.io/jobset-name": obj["metadata"]["name"],
                "jobset.sigs.k8s.io/replicatedjob-name": job,
            },
        },
        "spec": {"nodeName": node},
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": "PodReadyToStartContainers", "status": "True", "lastTransitionTime": scheduled},
                {"type": "Initialized", "status": "True", "lastTransitionTime": started},
                {"type": "Ready", "status": "True", "lastTransitionTime": started},
                {"type": "ContainersReady", "status": "True", "lastTransitionTime": started},
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": scheduled},
            ],
            "containerStatuses": [
                {
                    "name": container,
                    "ready": True,
                    "restartCount": 0,
                    "started": True,
                    "image": MAXTEXT if job == "pathways-head" else SERVER,
                    "imageID": "",
                    "state": {"running": {"startedAt": started}},
                    "lastState": {},
                }
            ],
        },
    }


def live_cluster(cluster, *, admitted: str = "2026-12-31T23:31:00Z") -> None:
    """The first attempt's objects: admitted at 23:31, the head pod scheduled 23:33:05 and started 23:40:05, the
    four workers scheduled by 23:52 and started by 23:58; the kubelet's pull events; the slice's nodes."""
    obj = train_jobset()
    cluster.put(obj)
    stored = cluster.objects[("jobsets", NS, obj["metadata"]["name"])]
    stored["metadata"]["creationTimestamp"] = obj["metadata"]["creationTimestamp"]  # put() stamps its own
    found = workload(obj, "admitted")
    for condition in found["status"]["conditions"]:
        condition["lastTransitionTime"] = admitted
    cluster.put(found)
    head = pod(obj, "pathways-head", 0, "2026-12-31T23:33:05Z", "2026-12-31T23:40:05Z", "cpu-1", "workload-container")
    workers = [
        pod(obj, "worker", i, f"2026-12-31T23:5{i}:00Z", f"2026-12-31T23:5{5 + i}:00Z", f"tpu-{i}", "pathways-worker")
        for i in range(4)
    ]
    pulled = 'Successfully pulled image "{}" in {} ({} including waiting). Image size: {} bytes.'
    events = [
        kubelet_event(head, "Pulling", f'Pulling image "{MAXTEXT}"', at="2026-12-31T23:33:10Z"),
        kubelet_event(head, "Pulled", pulled.format(MAXTEXT, "6m40.12s", "6m50.5s", 12_884_901_888)),
        kubelet_event(workers[0], "Pulled", pulled.format(SERVER, "1m2.3s", "1m2.345s", 2_147_483_648)),
        kubelet_event(workers[1], "Pulled", f'Container image "{SERVER}" already present on machine'),
        kubelet_event(workers[2], "Started", "Started container pathways-worker"),
    ]
    cluster.core[("pods", NS)] = [head, *workers]
    cluster.core[("events", NS)] = events
    cluster.core[("nodes", "")] = [
        *(tpu_node(f"tpu-{i}", "2026-12-31T23:45:00Z") for i in range(4)),
        *(tpu_node(f"other-{i}", "2026-12-01T00:00:00Z", accelerator="tpu-v5p-slice") for i in range(2)),
    ]


def read_facts(cluster) -> startup.ClusterFacts | None:
    reader = live.ClusterReader(cluster.kubeconfig())
    try:
        return startup.read_cluster_facts(reader, NS, DEV.train.name, "tpu-v6e-slice")
    finally:
        reader.close()


FIRST = LogAttempt(
    ATTEMPT,
    at("2026-12-31T23:41:00Z"),
    None,
    startup.log_marks(FIRST_LOG, ATTEMPT_START),
)


def test_the_first_attempts_start_up_from_kueue_the_pods_and_its_log():
    """Every component, in order, from the JobSet's creation (23:30) to the first step (00:24): 54 minutes."""
    with fake_cluster() as cluster:
        live_cluster(cluster)
        facts = read_facts(cluster)
    assert facts is not None
    (found,) = startup.startups([FIRST], facts, now=at("2027-01-01T01:00:00Z"))
    assert found.done and found.attempt == 1
    assert found.components == [
        ("admission", 65.0),  # 23:30:00 created, 23:31:00 admitted, 23:31:05 the head pod created
        ("nodes", 120.0 + 720.0),  # head scheduled 23:33:05; the last worker 23:53:00 (after the attempt's start)
        ("images", 420.0 + 300.0),  # head started 23:40:05; the last worker started 23:58:00
        ("set-up", 55.0),  # the attempt 23:41:00
        ("Pathways", 90.25),  # Jax Backend 23:59:30.25
        ("load", 299.75),  # Creating RL cluster 00:04:30
        ("compile", 720.0),  # Setting up RL trainer 00:16:30
        ("restore", 0.0),  # a fresh start restores nothing
        ("pre-RL eval", 300.0),  # Pre RL Training 00:21:30
        ("first step", 150.0),  # Train step 1 00:24:00
    ]
    assert found.seconds == 54 * 60
    assert found.chip_hours(32) == pytest.approx(28.8)
    assert [(p.image, p.seconds, p.size) for p in found.pulls] == [
        (MAXTEXT, 410.5, 12_884_901_888),
        (SERVER, 62.345, 2_147_483_648),
        (SERVER, 0.0, None),
    ]
    assert startup.status_line(found, 32) == (
        "attempt 1: start-up 54m (admission 1m, nodes 14m, images 12m, set-up 1m, Pathways 2m, load 5m, compile 12m, "
        "restore 0m, pre-RL eval 5m, first step 2m) = 28.8 chip-h"
    )


@pytest.mark.parametrize("skipped", [True, False], ids=["launcher-skipped-it", "no-word-of-it"])
def test_a_restart_whose_pods_are_gone_merges_what_only_they_said(skipped):
    """Attempt 1 ended at 00:40 (its log copied); attempt 2's pods are the live ones. Attempt 1 keeps the log's
    components and, without its pods, one merged part from its JobSet's creation to its script's start. Attempt 2
    resumed: its restore is the 2 minutes its line reports, inside the RL cluster's 12, whose other 10 are compile;
    its pre-RL evaluation is 0 when the launcher said it skips it; without that word (another image), a side file
    with no pre-RL line yet proves nothing, and the part up to its first step stays merged."""
    second_log = "\n".join(
        [
            absl("0101 00:58:00", "System Information: Jax Backend: Pathways 0.1"),
            absl("0101 01:00:00", "Creating RL cluster..."),
            absl("0101 01:11:00", "Restored params from step: 10 in 120.000 seconds"),
            absl("0101 01:12:00", "Setting up RL trainer..."),
        ]
    )
    first = LogAttempt(FIRST.name, FIRST.start, at("2027-01-01T00:40:00Z"), FIRST.marks)
    second = LogAttempt(
        "20270101T005000Z",
        at("2027-01-01T00:50:00Z"),
        None,
        startup.log_marks(second_log, datetime.datetime(2027, 1, 1, 0, 50, tzinfo=UTC)),
        pre_rl_skipped=skipped,
    )
    facts = startup.ClusterFacts(
        jobset_created=at("2026-12-31T23:30:00Z"),
        admitted=at("2026-12-31T23:31:00Z"),  # before the restart: Kueue kept it admitted
        pods_created=at("2027-01-01T00:41:00Z"),
        head_scheduled=at("2027-01-01T00:41:02Z"),
        head_started=at("2027-01-01T00:49:00Z"),
        workers_scheduled=at("2027-01-01T00:51:00Z"),
        workers_started=at("2027-01-01T00:57:00Z"),
    )
    # the second attempt's first TensorBoard event, 01:20 (its log is not copied yet: the side file has no step)
    one, two = startup.startups(
        [second, first], facts, first_events=[at("2027-01-01T00:24:10Z"), at("2027-01-01T01:20:00Z")]
    )
    assert one.components[0] == ("admission+nodes+images+set-up", 11 * 60.0), "no pods: 23:30 to 23:41, merged"
    assert one.done and one.seconds == 54 * 60
    assert two.done and two.components == [
        ("admission", 60.0),  # 00:40 the first's log, 00:41 the new pods
        ("nodes", 2.0 + 60.0),
        ("images", 478.0 + 360.0),
        ("set-up", 60.0),
        ("Pathways", 60.0),
        ("load", 120.0),
        ("compile", 540.0 + 60.0),  # to the restore's begin 01:09, and from its line 01:11 to the trainer's 01:12
        ("restore", 120.0),  # what its line reports, not the 11 minutes since the RL cluster's line
        *(
            [("pre-RL eval", 0.0), ("first step", 480.0)]  # from the trainer's line to its first TensorBoard event
            if skipped
            else [("pre-RL eval+first step", 480.0)]
        ),
    ]


def test_an_attempt_still_waiting_for_its_slice_shows_where_it_waits_now():
    """No log yet: the live pods' milestones so far, and the time since the last one, to now."""
    facts = startup.ClusterFacts(
        jobset_created=at("2026-12-31T23:30:00Z"),
        admitted=at("2026-12-31T23:33:00Z"),
        pods_created=at("2026-12-31T23:33:02Z"),
        head_scheduled=at("2026-12-31T23:34:00Z"),
    )
    (found,) = startup.startups([], facts, now=at("2026-12-31T23:50:00Z"))
    assert not found.done and found.name == "starting" and found.ending == "now"
    assert found.components == [("admission", 182.0), ("nodes", 58.0), ("images", 960.0)]
    assert startup.status_line(found, 32).startswith("attempt 1: starting, 20m to now (admission 3m, nodes 1m, images")


@pytest.mark.pure
@pytest.mark.parametrize(
    ("restored", "components"),
    [
        (
            "Restored params from step: 10 in 120.000 seconds",
            [("load", 60.0), ("compile", 540.0 + 60.0), ("restore", 120.0)],
        ),
        (
            "Restored params from step: 10 in 900.500 seconds",
            [("load", 60.0), ("compile", 0.0 + 60.0), ("restore", 660.0)],
        ),
        ("Restored params from step: 10", [("load", 60.0), ("compile+restore", 660.0), ("compile", 60.0)]),
    ],
    ids=["its-seconds", "more-than-since-the-rl-cluster", "no-seconds"],
)
def test_the_restore_is_what_its_line_reports_and_compile_the_rest_of_the_rl_cluster(restored, components):
    """tunix restores inside ``RLCluster(...)``, between MaxText's two lines (01:00, 01:12): the restore is the seconds
    its line (01:11) reports, begun no earlier than the RL cluster's line; the rest of those 12 minutes is compile. A
    line without its seconds leaves the split unknown."""
    text = "\n".join(
        [
            absl("0101 00:59:00", "System Information: Jax Backend: Pathways 0.1"),
            absl("0101 01:00:00", "Creating RL cluster..."),
            absl("0101 01:11:00", restored),
            absl("0101 01:12:00", "Setting up RL trainer..."),
        ]
    )
    assert startup.cut(None, startup.log_marks(text, ATTEMPT_START)) == components


@pytest.mark.pure
def test_a_side_file_restore_begins_no_earlier_than_its_attempt():
    """The side file has the restore's line but not MaxText's: its begin is bounded by the attempt's start."""
    line = absl("0101 00:10:00", "Restored params from step: 10 in 99999.000 seconds")
    marks = startup.log_marks(line, ATTEMPT_START)
    assert marks == {"restored": at("2027-01-01T00:10:00Z"), startup.RESTORE_BEGUN: ATTEMPT_START.timestamp()}
    fine = startup.log_marks(absl("0101 00:10:00", "Restored params from step: 10 in 0.125 seconds"), ATTEMPT_START)
    assert fine[startup.RESTORE_BEGUN] == at("2027-01-01T00:09:59.875Z")


def test_an_attempt_that_died_before_its_first_step_ends_at_its_log():
    ended = LogAttempt(ATTEMPT, FIRST.start, at("2027-01-01T00:10:00Z"), {"backend": at("2026-12-31T23:59:30Z")})
    (found,) = startup.startups([ended], None, now=at("2027-01-01T03:00:00Z"))
    assert not found.done and found.ending == "its end"
    # without its pods, the wait for the TPU nodes and their images is in the time before JAX's backend came
    assert found.components == [("nodes+images+Pathways", 18.5 * 60), ("load", 10.5 * 60)]


def test_the_slice_bills_its_nodes_hours_or_the_whole_reservation():
    with fake_cluster() as cluster:
        live_cluster(cluster)
        facts = read_facts(cluster)
    assert facts is not None
    assert [n.metadata.name for n in facts.nodes] == ["tpu-0", "tpu-1", "tpu-2", "tpu-3"], "the slice's accelerator"
    now = at("2027-01-01T01:45:00Z")
    spot = startup.slice_billing("spot", 32, facts, now)
    assert spot.chip_hours == pytest.approx(4 * 4 * 2.0), "4 nodes x 4 chips from 23:45 to 01:45"
    assert "nodes already deleted are not counted" in spot.basis
    reserved = startup.slice_billing("reservation", 32, facts, now, finished=at("2027-01-01T01:30:00Z"))
    assert reserved.chip_hours == pytest.approx(32 * 2.0), "32 chips from the step's creation (23:30) to its end"
    assert "used or not" in reserved.basis
    assert startup.slice_billing("spot", 32, None, now).chip_hours is None


def test_no_jobset_is_no_facts_and_no_events_leave_the_pod_times():
    with fake_cluster() as cluster:
        assert read_facts(cluster) is None
        live_cluster(cluster)
        cluster.core[("events", NS)] = []  # the API server keeps events an hour (--event-ttl)
        facts = read_facts(cluster)
    assert facts is not None and facts.pulls == [] and facts.head_started == at("2026-12-31T23:40:05Z")


def test_the_logs_in_gcs_are_read_by_their_heads(gcs, monkeypatch):
    from tests.conftest import put
    from workloads.observe.artifacts import bounded

    output = DEV.train.output_uri
    side = "\n".join(FIRST_LOG.splitlines()[:1] + FIRST_LOG.splitlines()[5:6])
    put(gcs, output, f"logs/evals-{ATTEMPT}.txt", data=side.encode())
    skip = f"{SKIPPED}/deps/src/maxtext/trainers/post_train/rl/train_rl.py patched: a resumed attempt ..."
    put(gcs, output, "logs/evals-20270101T005000Z.txt", data=f"tpu-rl run: {{}}\n{skip}\n".encode())
    put(gcs, output, "logs/notes.txt", data=b"not an attempt")
    (first, second) = bounded(gcs, "reading", lambda call: startup.read_log_attempts(gcs, output, **call))
    assert (first.name, first.ended, first.marks) == (ATTEMPT, None, {"pre-RL eval": at("2027-01-01T00:21:30Z")})
    assert second.marks == {} and second.pre_rl_skipped and not first.pre_rl_skipped
    put(gcs, output, f"logs/train-{ATTEMPT}.log", data=FIRST_LOG.encode())
    monkeypatch.setattr(startup, "MAX_LOG_HEAD", len(FIRST_LOG.split("Train step 1")[0]))
    (first, _) = bounded(gcs, "reading", lambda call: startup.read_log_attempts(gcs, output, **call))
    assert first.ended is not None, "the log is copied when train_rl exits: its write is the attempt's end"
    assert "first step" not in first.marks and first.marks["RL trainer"] == at("2027-01-01T00:16:30Z"), "its head only"


# -- the tools ------------------------------------------------------------------------------------------------


def test_make_status_shows_each_attempts_start_up_and_the_slices_bill(gcs):
    """The real reader against the loopback API server, the logs in fake-gcs-server: the training row, then one line
    per attempt and the slice's billed chip-hours beside the training steps'."""
    from tests.conftest import put
    from tools import status as status_cli

    put(gcs, DEV.train.output_uri, f"logs/train-{ATTEMPT}.log", data=FIRST_LOG.encode())
    with fake_cluster() as cluster:
        live_cluster(cluster)
        for step in DEV.steps:
            if step.name != DEV.train.name:
                cluster.put(with_state(step.manifest, "completed" if step is DEV.convert else "pending"))
        statuses, _ = status_cli.read_status(settings("dev", []), DEV, cluster.kubeconfig(), gcs)
    train = next(s for s in statuses if s.step == "train")
    assert train.lines[0].startswith("attempt 1: start-up 54m (admission 1m, nodes 14m, images 12m, set-up 1m, ")
    assert train.lines[0].endswith(f"= {54 / 60 * settings('dev', []).total_chips:,.1f} chip-h")
    assert train.lines[-1].startswith("slice billed ") and "TPU nodes from their creation" in train.lines[-1]
    shown = status_cli.render(settings("dev", []), DEV, statuses, datetime.datetime(2027, 1, 1, 2, tzinfo=UTC))
    assert "start-up and billing (train):\n  attempt 1: start-up 54m" in shown


def test_make_report_tables_the_start_up_of_a_run_known_by_its_uri(gcs, tmp_path):
    """Without a stack the report has no cluster: the log's components only, said so; the estimate's row comes with
    a stack."""
    import json

    from tests.conftest import put
    from tools import report

    put(gcs, DEV.train.output_uri, f"logs/train-{ATTEMPT}.log", data=FIRST_LOG.encode())
    assert report.main(["--run-uri", DEV.train.output_uri, "--out", str(tmp_path / "out")]) == 0
    written = json.loads((tmp_path / "out" / "report.json").read_text())["startup"]
    (attempt,) = written["attempts"]
    assert [c["name"] for c in attempt["components"]] == [
        "nodes+images+Pathways",
        "load",
        "compile",
        "restore",
        "pre-RL eval",
        "first step",
    ]
    assert attempt["done"] and attempt["seconds"] == 43 * 60, "from the attempt's start 23:41 to the first step 00:24"
    assert "no cluster" in written["clusterNote"] and written["billing"] is None
    page = (tmp_path / "out" / "report.html").read_text()
    assert "<h2>Start-up of each training attempt</h2>" in page and "compile 12.0 min" in page


def test_make_report_holds_a_resumed_attempt_against_the_goal(gcs, tmp_path):
    """Two attempts in GCS, the second resumed (its restore line): report.json names it among the restarts with its
    verdict, and carries the restart columns of the estimate."""
    import json

    from core.estimate import RESTART_STARTUP_MINUTES
    from tests.conftest import put
    from tools import report

    second = "\n".join(
        [
            absl("0101 01:12:00", "Restored params from step: 10 in 118.000 seconds"),
            absl("0101 01:20:00", "Train step 11 training loss: 0.600000  - training perplexity: 1.800000"),
        ]
    )
    put(gcs, DEV.train.output_uri, f"logs/train-{ATTEMPT}.log", data=FIRST_LOG.encode())
    put(gcs, DEV.train.output_uri, "logs/train-20270101T005000Z.log", data=second.encode())
    assert report.main(["--run-uri", DEV.train.output_uri, "--out", str(tmp_path / "out")]) == 0
    written = json.loads((tmp_path / "out" / "report.json").read_text())["startup"]
    assert [(a["attempt"], a["resumed"]) for a in written["attempts"]] == [(1, False), (2, True)]
    (restart,) = written["restarts"]
    assert restart["attempt"] == 2 and restart["met"] is (restart["minutes"] <= 11.25)
    assert written["restartEstimateMinutes"] == {
        "newNodes": RESTART_STARTUP_MINUTES,
        "sameNodes": WARM_NODE_RESTART_MINUTES,
    }
    assert written["goalMinutes"] == 11.25


RESTART_LOG = "\n".join(
    [
        'tpu-rl run: {"model":"gemma4-26b","slice":{"version":"v6e","chips":32}}',
        absl("0101 00:51:00", "System Information: Jax Backend: Pathways 0.1"),
        absl("0101 00:52:00", "Creating RL cluster..."),
        absl("0101 00:57:30", "Restored params from step: 10 in 180.000 seconds"),
        absl("0101 00:58:00", "Setting up RL trainer..."),
        absl("0101 01:00:30", "Train step 11 training loss: 0.600000  - training perplexity: 1.800000"),
    ]
)
"""The drill's restart on the same nodes, resumed from checkpoint 10: compile 2.5 minutes to the restore's begin and
0.5 after it, the restore 3."""


def test_make_report_measures_the_restart_drills_restart_component_by_component(gcs, tmp_path):
    """A run with tpu-rl:workflow.restartDrill: the first attempt's log and side file end with the drill's line
    (``restart_drill.py``: it appends it to the log, which the training script copies to the side file), the next
    attempt restores the checkpoint and trains. The report names that attempt the drill's restart, gives each
    component of the first start and of the restart beside the model's restart on the same nodes, and its verdict."""
    import json

    from tests.conftest import put
    from tools import report
    from workloads.container.restart_drill import drill_line

    drilled = FIRST_LOG + "\n" + drill_line(10) + "\n"
    put(gcs, DEV.train.output_uri, f"logs/train-{ATTEMPT}.log", data=drilled.encode())
    side = "\n".join([FIRST_LOG.splitlines()[0], FIRST_LOG.splitlines()[5], drill_line(10)])
    put(gcs, DEV.train.output_uri, f"logs/evals-{ATTEMPT}.txt", data=side.encode())
    put(gcs, DEV.train.output_uri, "logs/train-20270101T005000Z.log", data=RESTART_LOG.encode())
    assert report.main(["--run-uri", DEV.train.output_uri, "--out", str(tmp_path / "out")]) == 0
    written = json.loads((tmp_path / "out" / "report.json").read_text())["startup"]
    assert [(a["attempt"], a["drill"]) for a in written["attempts"]] == [(1, False), (2, True)]
    drill = written["drill"]
    assert (drill["attempt"], drill["done"], drill["firstMinutes"]) == (2, True, 43.0)
    assert drill["goalMinutes"] == 11.25 and drill["estimateMinutes"] == sum(WARM_NODE_RESTART_MINUTES.values())
    rows = {c["name"]: (c["first"], c["restart"], c["estimate"]) for c in drill["components"]}
    assert rows["compile"] == (12.0, 3.0, WARM_NODE_RESTART_MINUTES["compile"])
    assert rows["restore"][1] == 3.0 and rows["first step"][1] == 2.5 and rows["nodes"] == (None, None, 0)
    assert rows["nodes+images+Pathways"][0] == 18.5, "the first start's merged milestones"
    page = (tmp_path / "out" / "report.html").read_text()
    assert "<h3>The restart drill (attempt 2, on the same nodes)</h3>" in page
    warm = WARM_NODE_RESTART_MINUTES["compile"]
    assert f"<tr><td>compile</td><td>12.0</td><td>3.0</td><td>{warm:.1f}</td></tr>" in page
    assert f"the drill's restart: {drill['restartMinutes']:.1f} min: " in page


def test_the_drills_restart_runs_from_the_end_of_the_attempt_it_ended_to_its_first_step():
    """The restart's start-up begins when the drill's attempt ended (its log copied at 00:49:30) and is held against
    the goal: 30 s to its script's start (no pod times without the cluster: admission to set-up merged), 1 min to the
    Pathways backend (the slice's pods' times merged), load 1, compile 3, restore 3, its first step 2.5: 11 minutes,
    within 11.25."""
    from tools.report import restart_drill

    first = LogAttempt(FIRST.name, FIRST.start, at("2027-01-01T00:49:30Z"), FIRST.marks, drilled=True)
    marks = startup.log_marks(RESTART_LOG, datetime.datetime(2027, 1, 1, 0, 50, tzinfo=UTC))
    second = LogAttempt("20270101T005000Z", at("2027-01-01T00:50:00Z"), None, marks)
    one, two = startup.startups([first, second], None)
    assert two.drill and two.resumed and two.done
    assert [(name, seconds / 60) for name, seconds in two.components] == [
        ("admission+nodes+images+set-up", 0.5),
        ("nodes+images+Pathways", 1.0),
        ("load", 1.0),
        ("compile", 3.0),
        ("restore", 3.0),
        ("pre-RL eval", 0.0),
        ("first step", 2.5),
    ]
    found = restart_drill([one.to_json(32), two.to_json(32)], {"compile": 4, "restore": 2})
    assert found is not None
    assert (found["restartMinutes"], found["met"], found["estimateMinutes"]) == (11.0, True, 6)
    assert [c["name"] for c in found["components"]][-1] == "first step", "the measured components in their order"
    assert startup.status_line(two, 32).startswith("attempt 2 (the restart drill): start-up 11m (admission+nodes+")
    assert startup.status_line(two, 32).endswith("; a restart's goal, 11.25m: met (11.0m)")


def test_the_drill_marks_the_attempt_after_the_one_it_ended():
    """``make status``: the attempt after the one the drill ended is the drill's restart; a run without a drill has
    none, and the report's section is empty."""
    from tools.report import restart_drill
    from tools.report_html import _drill_section

    first = LogAttempt(FIRST.name, FIRST.start, at("2027-01-01T00:40:00Z"), FIRST.marks, drilled=True)
    second = LogAttempt("20270101T005000Z", at("2027-01-01T00:50:00Z"))
    one, two = startup.startups([first, second], None)
    assert (one.drill, two.drill) == (False, True)
    assert startup.status_line(two, 32).startswith("attempt 2 (the restart drill): starting, ")
    assert not startup.status_line(one, 32).startswith("attempt 1 (")
    plain = startup.startups([LogAttempt(FIRST.name, FIRST.start, None, FIRST.marks), second], None)
    assert not any(s.drill for s in plain)
    assert restart_drill([s.to_json(32) for s in plain], {}) is None and _drill_section(None) == ""
    waiting = restart_drill([one.to_json(32), two.to_json(32)], {"compile": 4})
    assert waiting is not None and waiting["met"] is None and waiting["firstMinutes"] == 43.0
    assert "no verdict yet: attempt 2 has not reached its first step" in _drill_section(waiting)


def _attempt(number: int, minutes: float, done: bool = True, resumed: bool | None = True) -> dict:
    """An attempt's start-up as ``make report`` writes it (``Startup.to_json``)."""
    found = startup.Startup(number, f"2027010{number}T000000Z", [("first step", minutes * 60)], done, resumed=resumed)
    return found.to_json(32)


def test_each_finished_restart_is_held_against_the_restart_goal():
    """The first attempt is not a restart, one still starting has no verdict yet, nor has a fresh start (no
    checkpoint yet: it evaluates the base again) or an attempt whose log does not say; 11.25 minutes meets it."""
    from core.estimate import STARTUP_GOAL_MINUTES
    from tools.report import restarts_against_the_goal

    assert STARTUP_GOAL_MINUTES == 11.25
    attempts = [_attempt(1, 5), _attempt(2, 11.25), _attempt(3, 15.5), _attempt(4, 3, False)]
    attempts += [_attempt(5, 20, resumed=False), _attempt(6, 9, resumed=None)]
    found = restarts_against_the_goal(attempts)
    assert found == [{"attempt": 2, "minutes": 11.2, "met": True}, {"attempt": 3, "minutes": 15.5, "met": False}]
    late = startup.Startup(2, "20270102T000000Z", [("compile", 900.0)], True, resumed=True)
    assert startup.status_line(late, 32).endswith("= 8.0 chip-h; a restart's goal, 11.25m: not met (15.0m)")
    fresh = startup.Startup(2, "20270102T000000Z", [("compile", 900.0)], True, resumed=False)
    assert startup.status_line(fresh, 32).endswith("; a fresh start (no checkpoint yet): not a restart")
    first = startup.Startup(1, "20270101T000000Z", [("compile", 600.0)], True, resumed=False)
    assert "goal" not in startup.status_line(first, 32) and "fresh" not in startup.status_line(first, 32)


def test_an_attempt_is_resumed_by_its_restore_line_and_fresh_by_a_log_that_goes_on_without_one():
    """What ``goal_met`` rests on, read from the logs as ``startups`` reads them."""
    restored = absl("0101 01:12:00", "Restored params from step: 10 in 118.000 seconds")
    second = LogAttempt(
        "20270101T005000Z",
        at("2027-01-01T00:50:00Z"),
        None,
        startup.log_marks(restored, datetime.datetime(2027, 1, 1, 0, 50, tzinfo=UTC)),
    )
    first = LogAttempt(FIRST.name, FIRST.start, at("2027-01-01T00:40:00Z"), FIRST.marks)
    one, two = startup.startups([first, second], None)
    assert (one.resumed, two.resumed) == (False, True), "the first log goes on to its first step without a restore"
    head = "\n".join(FIRST_LOG.splitlines()[:5])  # to ``Setting up RL trainer...``: tunix restores before it
    cut_short = LogAttempt(FIRST.name, FIRST.start, at("2027-01-01T00:17:00Z"), startup.log_marks(head, ATTEMPT_START))
    (found,) = startup.startups([cut_short], None)
    assert found.resumed is False and ("restore", 0.0) in found.components, "a fresh start, ended in its evaluation"


def test_the_report_shows_the_restart_columns_and_each_restarts_verdict():
    """The page's start-up table: the estimate of a first attempt and of a restart on new and on the same nodes
    (docs/cost.md "Start-up, before and after"), then each restart against the goal."""
    from core.estimate import RESTART_STARTUP_MINUTES
    from tools.report_html import _startup_section

    attempts = [_attempt(1, 44), _attempt(2, 14.2)]
    section = {
        "attempts": attempts,
        "billing": None,
        "estimateMinutes": dict(STARTUP_MINUTES),
        "restartEstimateMinutes": {"newNodes": RESTART_STARTUP_MINUTES, "sameNodes": WARM_NODE_RESTART_MINUTES},
        "goalMinutes": 11.25,
        "restarts": [{"attempt": 2, "minutes": 14.2, "met": False}],
        "clusterNote": None,
    }
    page = _startup_section({"startup": section})
    # 45 min (the checkpoint read twice); 45 - 8 (a warm compile) - 5 (no pre-RL evaluation) = 32; 32 - 5 (nodes)
    # - 12 (images) = 15
    assert "<td>estimate</td><td>per attempt</td><td>45 min</td>" in page
    assert "<td>estimate</td><td>a restart, new nodes</td><td>32 min</td>" in page
    assert "<td>estimate</td><td>a restart, same nodes</td><td>15 min</td>" in page
    assert "at most 11.25 min. attempt 2: 14.2 min (not met).</p>" in page
    without = _startup_section({"startup": {**section, "estimateMinutes": None, "restarts": []}})
    assert "estimate" not in without and "Goal" not in without, "a run known by its URI: no stack, no estimate"


def test_the_reports_restart_columns_are_the_stacks_own_estimate():
    """A stack that reads the checkpoint once (tpu-rl:training.loadCheckpointOnlyOnce true) has 45 - 2 = 43 minutes
    per attempt in its estimate output: the restart columns follow it (32 - 2 = 30, 15 - 2 = 13); a run known by its
    URI gets the defaults' (the checkpoint read twice: 32 and 15)."""
    from core.estimate import RESTART_STARTUP_MINUTES, estimate_for
    from tools.report import RunInfo, report_json
    from workloads.observe.evaluations import parse_logs
    from workloads.observe.run_data import RunData
    from workloads.observe.scalars import Scalars

    once = estimate_for(settings("prod", ["tpu-rl:training.loadCheckpointOnlyOnce=true"])).to_output()
    data = RunData("gs://b/r/", Scalars(), parse_logs([]), None)
    found = report_json(RunInfo("gs://b/r/", estimate=once), data)["startup"]
    assert sum(found["estimateMinutes"].values()) == 43
    assert {k: sum(v.values()) for k, v in found["restartEstimateMinutes"].items()} == {"newNodes": 30, "sameNodes": 13}
    alone = report_json(RunInfo("gs://b/r/"), data)["startup"]
    defaults = {"newNodes": RESTART_STARTUP_MINUTES, "sameNodes": WARM_NODE_RESTART_MINUTES}
    assert alone["restartEstimateMinutes"] == defaults
    assert {k: sum(v.values()) for k, v in defaults.items()} == {"newNodes": 32, "sameNodes": 15}
