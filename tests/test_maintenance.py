"""GKE's host maintenance notices: the node labels parsed where they are read
(``workloads.observe.slice_maintenance``), `pulumi up`'s check before training's JobSet is created
(``workloads.reader.LiveReader.check_maintenance``, one of ``TrainWiring.gates``) against the loopback API server's
nodes (``tests.fake_kube``) on a fake clock, ``TPU_RL_ACCEPT`` read at the program's boundary, and `make status`'s
lines. The whole program's stop and go on, through the engine's model, is the slow tier's (the end of this file)."""

from __future__ import annotations

import asyncio
import datetime
import json
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pulumi
import pytest

from core.errors import BAD_INPUT
from core.estimate import estimate_for
from infra.k8s.live import ClusterReader
from program.config import ACCEPT_ENV, Accept, AcceptError, accepted
from tests.fake_kube import T0, tpu_node, with_state
from tests.lifecycle_walk import settings
from tests.world import NO_HUB
from tools import status as status_cli
from workloads import reader
from workloads.observe import slice_maintenance as maintenance
from workloads.observe.artifacts import storage_client
from workloads.observe.slice_maintenance import ACTIVE_LABEL, PERFORM_LABEL, SCHEDULED_LABEL, span
from workloads.specs.step_specs import plan_workflow

PROD = settings("prod", [])
PLAN = plan_workflow(PROD)
NAMESPACE = PROD.namespace
NOW = datetime.datetime(2026, 12, 1, 8, 0, tzinfo=datetime.UTC)
"""The fake clock: every check runs at this instant."""
HOURS: dict[str, float] = {s.step: s.hours for s in estimate_for(PROD).steps}
"""The program's estimate (what the stack exports as ``estimate``): the window's lengths."""
CONVERT, TRAIN = HOURS[PLAN.convert.step], HOURS[PLAN.train.step]
NODES = "/api/v1/nodes"


def at(hours: float) -> str:
    """The label's value for ``hours`` from now: whole seconds since the epoch, as GKE writes it."""
    return str(int((NOW + datetime.timedelta(hours=hours)).timestamp()))


def slice_nodes(count: int, value: str | None, *, topology: str = PROD.slice.topology) -> list[dict[str, Any]]:
    labels = {} if value is None else {SCHEDULED_LABEL: value}
    return [tpu_node(f"gke-tpu-rl-prod-tpu-np-{i}", T0, topology=topology, labels=labels) for i in range(count)]


def whole(nodes: list[dict[str, Any]], total: int = 8) -> list[dict[str, Any]]:
    """``nodes`` and as many more unlabelled Ready nodes as make the reservation's whole slice (``total`` items)."""
    more = [
        tpu_node(f"gke-tpu-rl-prod-tpu-np-x{i}", T0, topology=PROD.slice.topology) for i in range(total - len(nodes))
    ]
    return [*nodes, *more]


def check(cluster, monkeypatch, *, accepted: bool = False, preview: bool = False) -> tuple[Any, list[tuple[str, str]]]:
    """``LiveReader.check_maintenance`` for prod's training (the conversion before it) at ``NOW``: what it resolved
    to (or the ``RunError`` it stopped `up` with), and the lines it logged."""
    said: list[tuple[str, str]] = []
    monkeypatch.setattr(maintenance, "clock", NOW.timestamp)
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *_, **__: said.append(("warn", message)))
    monkeypatch.setattr(pulumi.log, "info", lambda message, *_, **__: said.append(("info", message)))
    monkeypatch.setattr(reader.pulumi.runtime, "is_dry_run", lambda: preview)
    args = reader.reader_args(PROD, accept_maintenance=accepted)

    async def gate() -> Any:  # the Outputs are made on the loop that resolves them
        kubeconfig = pulumi.Output.from_input(json.dumps(cluster.kubeconfig()))
        ready = pulumi.Output.from_input(True)
        live = reader.LiveReader(args, kubeconfig, ready, connect=ClusterReader, bucket=storage_client, hub=NO_HUB)
        try:
            return await live.check_maintenance(PLAN.train, [PLAN.convert]).future()
        finally:
            await live.kubeconfig.future()  # resolved: no task of it is left pending when the loop closes

    loop = asyncio.new_event_loop()  # not asyncio.run, which leaves the thread no current loop for later tests
    try:
        return loop.run_until_complete(gate()), said
    except pulumi.RunError as err:
        return err, said
    finally:
        loop.close()


def expected_line(nodes: str, when: str, where: str) -> str:
    return (
        f"host maintenance is scheduled on the TPU slice inside the expected training: {nodes} at {when}, {where}. "
        "Start it now, before training, with `make maintenance STACK=prod` (the slice may be away up to a few hours; "
        "`make status STACK=prod` shows when it is back, then `make up STACK=prod`), or go on anyway with `make up "
        'STACK=prod ACCEPT=maintenance` (docs/maintenance.md "The check in up")'
    )


# -- the check in `up` ------------------------------------------------------------------------------------------


def test_a_maintenance_inside_the_expected_training_stops_up_with_one_line(cluster, monkeypatch):
    """The window is the estimate's: the conversion (not run yet), then training; the line names the nodes, the UTC
    time, how far into training it falls and the two ways on."""
    cluster.core[("nodes", "")] = slice_nodes(8, at(CONVERT + TRAIN / 2))
    stopped, said = check(cluster, monkeypatch)
    assert isinstance(stopped, pulumi.RunError) and said == []
    nodes = "nodes gke-tpu-rl-prod-tpu-np-0, gke-tpu-rl-prod-tpu-np-1, gke-tpu-rl-prod-tpu-np-2 and 5 more"
    when = NOW + datetime.timedelta(hours=CONVERT + TRAIN / 2)
    where = f"{span(TRAIN * 3600 / 2)} into the expected {span(TRAIN * 3600)} of training"
    assert str(stopped) == expected_line(nodes, f"{when:%Y-%m-%d %H:%M} UTC", where)
    assert f"ACCEPT={Accept.MAINTENANCE}`" in str(stopped), "the word the program accepts"
    assert any(request.startswith(NODES) for request in cluster.requests)


def test_a_time_already_past_is_due_now_and_one_during_the_conversion_is_before_training(cluster, monkeypatch):
    cluster.core[("nodes", "")] = whole([*slice_nodes(1, at(-2)), *slice_nodes(2, at(CONVERT / 2))[1:]])
    stopped, _ = check(cluster, monkeypatch)
    assert isinstance(stopped, pulumi.RunError)
    assert "inside the expected training: nodes gke-tpu-rl-prod-tpu-np-0, gke-tpu-rl-prod-tpu-np-1 at " in str(stopped)
    assert f"at {NOW - datetime.timedelta(hours=2):%Y-%m-%d %H:%M} UTC, due now (its time has passed). " in str(stopped)
    cluster.core[("nodes", "")] = whole(slice_nodes(2, at(CONVERT / 2)))
    stopped, _ = check(cluster, monkeypatch)
    assert f", in {span(CONVERT * 3600 / 2)}, before training starts (the steps before it run). " in str(stopped)


def test_a_completed_conversion_leaves_only_training_in_the_window(cluster, monkeypatch):
    """Half an hour past the end of training counted from now: after it once the conversion is done, inside it
    while the conversion still has to run."""
    cluster.core[("nodes", "")] = whole(slice_nodes(2, at(TRAIN + min(CONVERT, 1) / 2)))
    stopped, _ = check(cluster, monkeypatch)
    assert isinstance(stopped, pulumi.RunError)
    cluster.put(with_state(PLAN.convert.manifest, "completed"))
    went, said = check(cluster, monkeypatch)
    when = NOW + datetime.timedelta(hours=TRAIN + min(CONVERT, 1) / 2)
    assert went == "" and said == [
        (
            "info",
            "host maintenance is scheduled on the TPU slice after the expected end of training: nodes "
            f"gke-tpu-rl-prod-tpu-np-0, gke-tpu-rl-prod-tpu-np-1 at {when:%Y-%m-%d %H:%M} UTC (in "
            f"{span((when - NOW).total_seconds())})",
        )
    ]


def test_accept_maintenance_warns_with_the_notice_and_goes_on(cluster, monkeypatch):
    cluster.core[("nodes", "")] = slice_nodes(8, at(CONVERT + 1))
    went, said = check(cluster, monkeypatch, accepted=True)
    assert went == ""
    ((level, line),) = said
    assert level == "warn" and "\n" not in line
    assert line.startswith("host maintenance is scheduled on the TPU slice inside the expected training: nodes ")
    assert line.endswith(
        'going on as told (ACCEPT=maintenance): the run will meet it (docs/maintenance.md "The check in up")'
    )


def away_nodes(ready: int, *, total: int = 8, active: int = 0) -> list[dict[str, Any]]:
    """The slice's ``total`` nodes, the first ``ready`` Ready, the rest not (``Unknown``: the kubelet gone with its
    host), the last ``active`` of them under maintenance."""
    nodes = []
    for i in range(total):
        labels = {ACTIVE_LABEL: "ONGOING"} if i >= total - active else {}
        name = f"gke-tpu-rl-prod-tpu-np-{i}"
        nodes.append(
            tpu_node(name, T0, topology=PROD.slice.topology, labels=labels, ready="True" if i < ready else "Unknown")
        )
    return nodes


def test_a_slice_that_is_away_stops_up_before_training_with_one_line(cluster, monkeypatch):
    """A maintenance under way (nodes NotReady, GKE's active-maintenance label) or a reservation's nodes missing: a
    training created now would only wait for its slice, so `up` stops, naming what is away and the ways on."""
    cluster.core[("nodes", "")] = away_nodes(5, active=3)
    stopped, said = check(cluster, monkeypatch)
    assert isinstance(stopped, pulumi.RunError) and said == []
    assert str(stopped) == maintenance.away_refusal(
        "5 of 8 nodes Ready (NotReady: nodes gke-tpu-rl-prod-tpu-np-5, gke-tpu-rl-prod-tpu-np-6, "
        f"gke-tpu-rl-prod-tpu-np-7; maintenance under way ({ACTIVE_LABEL}=ONGOING) on 3)",
        "prod",
    )
    cluster.core[("nodes", "")] = away_nodes(6, total=6)
    stopped, _ = check(cluster, monkeypatch)
    assert isinstance(stopped, pulumi.RunError)
    assert "the TPU slice is away: 6 of 8 nodes Ready (2 of the reservation's 8 missing)" in str(stopped)
    assert "`make status STACK=prod`" in str(stopped) and "ACCEPT=maintenance" in str(stopped)


def test_a_slice_that_is_back_or_not_up_yet_lets_up_go_on(cluster, monkeypatch):
    """Every node Ready: nothing said. No node at all: not judged (an autoscaled pool before training, a pool being
    created); with ACCEPT=maintenance an away slice is one warning."""
    cluster.core[("nodes", "")] = away_nodes(8)
    assert check(cluster, monkeypatch) == ("", [])
    cluster.core[("nodes", "")] = []
    assert check(cluster, monkeypatch) == ("", [])
    cluster.core[("nodes", "")] = away_nodes(7)
    went, said = check(cluster, monkeypatch, accepted=True)
    assert went == "" and [level for level, _ in said] == ["warn"]
    assert said[0][1].startswith("the TPU slice is away: 7 of 8 nodes Ready (NotReady: node gke-tpu-rl-prod-tpu-np-7)")


@pytest.mark.parametrize(
    ("nodes", "reserved", "line"),
    [
        (8, True, "slice: 8 of 8 nodes Ready"),
        (0, True, "slice: away: 0 of 8 nodes (none of the reservation's exists: a maintenance or a repair)"),
        (0, False, "slice: no nodes (its pool scales up for training and back to zero after it)"),
        (4, False, "slice: 4 of 8 nodes Ready"),
    ],
    ids=["back", "reservation-gone", "autoscaled-at-zero", "autoscaled-scaling"],
)
def test_status_shows_how_many_of_the_slices_nodes_are_ready(nodes, reserved, line):
    notices = maintenance.slice_notices(away_nodes(nodes, total=nodes), "the slice's nodes")
    assert maintenance.slice_line(notices, maintenance.SliceSize(8, reserved)) == line
    away = maintenance.slice_notices(away_nodes(6, active=1), "the slice's nodes")
    assert maintenance.slice_line(away, maintenance.SliceSize(8, reserved)).startswith(
        "slice: away: 6 of 8 nodes Ready (NotReady: nodes gke-tpu-rl-prod-tpu-np-6, gke-tpu-rl-prod-tpu-np-7; "
    )


@pytest.mark.parametrize("value", ["next tuesday", "1733083200.5", "-5", "9" * 12, ""])
def test_a_label_that_is_not_a_time_is_one_warning_and_up_goes_on(cluster, monkeypatch, value):
    cluster.core[("nodes", "")] = whole([*slice_nodes(1, value), *slice_nodes(2, None)[1:]])
    went, said = check(cluster, monkeypatch)
    assert went == ""
    assert said == [
        (
            "warn",
            f"maintenance notices: node gke-tpu-rl-prod-tpu-np-0: {SCHEDULED_LABEL}={value!r} is not a time in "
            "seconds since the Unix epoch, as GKE writes it; its maintenance time is not read",
        )
    ]


def test_a_node_of_another_shape_is_a_warning_and_the_others_are_still_judged(cluster, monkeypatch):
    broken = tpu_node("gke-broken", T0, topology=PROD.slice.topology)
    broken["metadata"]["labels"] = {**broken["metadata"]["labels"], "odd": 7}
    cluster.core[("nodes", "")] = whole([broken, *slice_nodes(1, at(CONVERT + 1))], total=9)  # 8 read
    stopped, said = check(cluster, monkeypatch)
    assert isinstance(stopped, pulumi.RunError) and "node gke-tpu-rl-prod-tpu-np-0 at" in str(stopped)
    ((level, line),) = said
    assert level == "warn" and line.startswith("maintenance notices: the slice's nodes item 0: metadata.labels.odd")


def test_no_label_or_no_nodes_says_nothing(cluster, monkeypatch):
    """An autoscaled pool has no nodes before training: nothing to read, nothing said."""
    assert check(cluster, monkeypatch) == ("", [])
    cluster.core[("nodes", "")] = slice_nodes(8, None)
    assert check(cluster, monkeypatch) == ("", [])


def test_only_the_slices_nodes_count(cluster, monkeypatch):
    """The selector is the slice's accelerator and topology: another pool's maintenance is not the run's."""
    cluster.core[("nodes", "")] = slice_nodes(2, at(1), topology="2x4")
    assert check(cluster, monkeypatch) == ("", [])
    asked = next(request for request in cluster.requests if request.startswith(NODES))
    (selector,) = parse_qs(urlsplit(asked).query)["labelSelector"]
    assert selector == "cloud.google.com/gke-tpu-accelerator=tpu-v6e-slice,cloud.google.com/gke-tpu-topology=4x8"


def test_a_preview_reads_nothing(cluster, monkeypatch):
    cluster.core[("nodes", "")] = slice_nodes(8, at(1))
    assert check(cluster, monkeypatch, preview=True) == ("", [])
    assert cluster.requests == []


@pytest.mark.parametrize("state", ["running", "completed"])
def test_a_training_that_exists_is_followed_without_the_check(cluster, monkeypatch, state):
    cluster.put(with_state(PLAN.train.manifest, state))
    cluster.core[("nodes", "")] = slice_nodes(8, at(1))
    assert check(cluster, monkeypatch) == ("", [])
    assert not any(request.startswith(NODES) for request in cluster.requests), "the nodes are not read"


def test_a_failed_training_is_retried_so_it_is_checked(cluster, monkeypatch):
    cluster.put(with_state(PLAN.train.manifest, "failed"))
    cluster.core[("nodes", "")] = slice_nodes(8, at(CONVERT + 1))
    stopped, _ = check(cluster, monkeypatch)
    assert isinstance(stopped, pulumi.RunError)


def test_nodes_that_cannot_be_read_are_one_warning_and_training_starts_unchecked(cluster, monkeypatch):
    cluster.stop()
    went, said = check(cluster, monkeypatch)
    assert went == ""
    ((level, line),) = said
    assert level == "warn" and line.startswith(
        "the slice's maintenance notices were not read (cannot reach the cluster"
    )
    assert line.endswith("); training starts unchecked: `make status STACK=prod` shows them")


# -- the program's boundary: TPU_RL_ACCEPT ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "words"),
    [("", set()), ("maintenance", {Accept.MAINTENANCE}), (" maintenance, ,maintenance ,", {Accept.MAINTENANCE})],
)
def test_accept_is_read_once_into_its_words(text, words):
    assert accepted({ACCEPT_ENV: text}) == words
    assert accepted({}) == frozenset()


def test_a_word_accept_does_not_know_is_bad_input_naming_the_words():
    with pytest.raises(AcceptError) as raised:
        accepted({ACCEPT_ENV: "maintenance,maintenence"})
    assert raised.value.exit_code == BAD_INPUT
    assert str(raised.value) == (
        "TPU_RL_ACCEPT (make up's ACCEPT=): 'maintenence' is not something `up` can be told to go on past; the words "
        "are: maintenance, rerun, audit (comma-separated)"
    )


# -- the labels, parsed once ----------------------------------------------------------------------------------


def test_the_label_is_whole_seconds_since_the_epoch_as_gkes_example():
    """GKE "Monitor maintenance events" prints ``1733083200`` for the label: 2024-12-01 20:00 UTC."""
    assert maintenance.scheduled_time("1733083200") == datetime.datetime(2024, 12, 1, 20, 0, tzinfo=datetime.UTC)
    notices = maintenance.slice_notices(
        [
            tpu_node("a", T0, labels={SCHEDULED_LABEL: "1733083200", PERFORM_LABEL: "true", ACTIVE_LABEL: "ONGOING"}),
            tpu_node("b", T0, labels={PERFORM_LABEL: "yes"}),
            "not a node",
        ],
        "the slice's nodes",
    )
    assert [(n.name, n.requested, n.active) for n in notices.nodes] == [("a", True, "ONGOING"), ("b", False, "")]
    assert notices.problems == ("the slice's nodes item 2: expected an object, got str: that node is not read",)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "under 1 min"), (59, "under 1 min"), (45 * 60, "45 min"), (3600, "1 h"), (7800, "2 h 10 min"),
     (3 * 86400 + 4 * 3600 + 59 * 60, "3 d 4 h")],
)  # fmt: skip
def test_a_span_is_read_at_a_glance(seconds, text):
    assert span(seconds) == text


# -- make status ------------------------------------------------------------------------------------------------


def test_status_shows_the_soonest_maintenance_what_was_asked_and_what_runs():
    notices = maintenance.slice_notices(
        [
            tpu_node("a", T0, labels={SCHEDULED_LABEL: at(3 * 24 + 4.5), PERFORM_LABEL: "true"}),
            tpu_node("b", T0, labels={SCHEDULED_LABEL: at(5 * 24), ACTIVE_LABEL: "ONGOING"}),
            tpu_node("c", T0, labels={SCHEDULED_LABEL: "soon"}),
            tpu_node("d", T0),
        ],
        "the slice's nodes",
    )
    assert maintenance.status_lines(notices, NOW) == [
        "slice maintenance scheduled 2026-12-04 12:30 UTC (in 3 d 4 h) on 2 of 4 nodes",
        f"slice maintenance requested ({PERFORM_LABEL}=true) on 1 of 4 nodes",
        f"slice maintenance under way ({ACTIVE_LABEL}=ONGOING) on 1 of 4 nodes",
        f"node c: {SCHEDULED_LABEL}='soon' is not a time in seconds since the Unix epoch, as GKE writes it; its "
        "maintenance time is not read",
    ]
    due = maintenance.slice_notices([tpu_node("a", T0, labels={SCHEDULED_LABEL: at(-1)})], "the slice's nodes")
    assert maintenance.status_lines(due, NOW) == [
        "slice maintenance scheduled 2026-12-01 07:00 UTC (due now) on 1 of 1 nodes"
    ]
    assert maintenance.status_lines(maintenance.SliceNotices(), NOW) == []


def test_make_status_reads_the_slices_nodes_and_says_when_it_cannot(cluster):
    dev = settings("dev", [])
    cluster.core[("nodes", "")] = [
        tpu_node(f"n{i}", T0, topology=dev.slice.topology, labels={SCHEDULED_LABEL: at(27)}) for i in range(2)
    ]
    shown = status_cli.slice_lines(dev, cluster.kubeconfig(), NOW)
    assert shown == [
        "slice: 2 of 2 nodes Ready",
        "slice maintenance scheduled 2026-12-02 11:00 UTC (in 1 d 3 h) on 2 of 2 nodes",
    ]
    rendered = status_cli.render(dev, plan_workflow(dev), [], NOW, shown)
    assert f"\n{shown[0]}\n{shown[1]}\nlogs convert: " in rendered, "below the table, above the log commands"
    cluster.stop()
    (unread,) = status_cli.slice_lines(dev, cluster.kubeconfig(), NOW)
    assert unread.startswith("slice and its maintenance notices not read (cannot reach the cluster at 127.0.0.1:")


def test_a_word_accept_does_not_know_stops_the_program_before_anything(monkeypatch):
    from tools.plan import plan_stack
    from tools.stack_files import ROOT

    monkeypatch.setenv(ACCEPT_ENV, "audits")
    plan, _ = plan_stack(ROOT / "Pulumi.dev.yaml", [], raise_errors=False)
    assert isinstance(plan.error, pulumi.RunError) and plan.resources == []
    assert str(plan.error).startswith("TPU_RL_ACCEPT (make up's ACCEPT=): 'audits' is not something `up` can be told")


# -- the whole program through the engine's model (slow tier) ---------------------------------------------------


@pytest.mark.slow
def test_up_stops_before_training_is_created_and_goes_on_once_the_maintenance_is_done(stack, monkeypatch):
    """The real program, its kubeconfig, exec plugin and client against the loopback cluster: the stop leaves no
    training JobSet (the conversion, which needs no slice, may run on); once the slice's nodes carry no notice (the
    maintenance was taken), the next `up` creates training."""
    from tests.scenario import names

    monkeypatch.setattr(maintenance, "clock", NOW.timestamp)
    stack.cluster.core[("nodes", "")] = slice_nodes(8, at(CONVERT + 1))
    stopped = stack.up()
    assert str(stopped.error).startswith("host maintenance is scheduled on the TPU slice inside the expected training")
    train = names(stack)["train"]
    assert train not in stopped.actions and stack.cluster.get("JobSet", NAMESPACE, train) is None
    stack.cluster.core[("nodes", "")] = slice_nodes(8, None)
    after = stack.up()
    assert after.error is None, after.error
    assert after.actions[train] == "create"


@pytest.mark.slow
def test_accept_maintenance_reaches_the_program_and_up_goes_on_with_one_warning(stack, monkeypatch):
    monkeypatch.setattr(maintenance, "clock", NOW.timestamp)
    monkeypatch.setenv(ACCEPT_ENV, "maintenance")
    stack.cluster.core[("nodes", "")] = slice_nodes(8, at(CONVERT + 1))
    run = stack.up()
    assert run.error is None, run.error
    (warning,) = [w for w in run.plan.warnings() if "host maintenance" in w]
    assert "going on as told (ACCEPT=maintenance)" in warning


@pytest.mark.slow
def test_up_stops_before_training_while_the_slice_is_away_and_goes_on_once_it_is_back(stack, monkeypatch):
    """The real program: nodes of the slice NotReady under a maintenance stop `up` before training's JobSet exists;
    once every node is Ready again, the next `up` creates it."""
    from tests.scenario import names

    monkeypatch.setattr(maintenance, "clock", NOW.timestamp)
    stack.cluster.core[("nodes", "")] = away_nodes(6, active=2)
    stopped = stack.up()
    assert str(stopped.error).startswith("the TPU slice is away: 6 of 8 nodes Ready (NotReady: nodes ")
    train = names(stack)["train"]
    assert train not in stopped.actions and stack.cluster.get("JobSet", NAMESPACE, train) is None
    stack.cluster.core[("nodes", "")] = away_nodes(8)
    after = stack.up()
    assert after.error is None, after.error
    assert after.actions[train] == "create"
