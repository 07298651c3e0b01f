"""Every parser of a reply from elsewhere against generated hostile shapes, one property per family: the Hub's JSON
(through the Hub client and the checks that read it), safetensors headers, Kubernetes objects (through `make status`
and `make logs`' choice of a pod), TensorBoard event files (through `make report`'s data and page). Each draw is a
good reply with a value of any JSON shape at any place in it, or raw bytes that are no such reply (nested past
Python's limit, cut, not UTF-8). The outcome is the tool's result or one ``TpuRlError`` line, never another
exception (which a tool ends with exit 70). The replies a review found: ``tests/test_hostile_replies.py``."""

from __future__ import annotations

import copy
import json
import math
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, configuration, example, given, settings
from hypothesis import strategies as st

from core.boundary import BoundaryError
from core.errors import TpuRlError
from core.hf_model import ModelFormatError, Tensor, parse_config, parse_header, parse_index
from tests.fake_hub import COMMIT, GOOD, REPO, FakeHub
from tests.fake_kube import step_pod, with_state, workload
from tests.hf_files import CONFIG
from tests.lifecycle_walk import settings as stack_settings
from tests.loopback import serve
from tests.run_files import START, write_raw_events
from workloads.specs.step_specs import plan_workflow

pytestmark = pytest.mark.slow

configuration.set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "tpu-rl-hypothesis")  # not the checkout's

PROPERTIES = settings(
    max_examples=60,
    deadline=None,
    database=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate, Phase.shrink],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
"""The same examples on every run (a CI run cannot fail on a new draw), nothing written to the checkout."""
DEV = plan_workflow(stack_settings("dev", []))
ESCAPES = "\x1b[2J\x1b]8;;https://evil.example\x07\u202e\x9b\x00\r"
TEXT = st.text(st.sampled_from("ab/._-:0 " + ESCAPES) | st.characters(), max_size=12)
"""Text of any character, escapes and controls more often than chance gives."""
NUMBERS = (
    st.integers(min_value=-(2**70), max_value=2**70)
    | st.sampled_from([0, -1, 2**31, 2**63, 2**64])
    | st.floats(allow_nan=True, allow_infinity=True)
)
SCALARS = st.none() | st.booleans() | NUMBERS | TEXT
JSON = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3), max_leaves=8
)
"""A value of any JSON shape (NaN and the infinities too: Python's JSON reads and writes them)."""
REPLACEMENT = st.one_of(SCALARS, st.lists(SCALARS, max_size=2), JSON)
"""What a place of a reply becomes: a scalar or a short list as often as a structure (a reader that iterates a
field, or keys a dict by it, meets a number or a list there)."""
NOT_JSON = st.sampled_from(
    [b"[" * 100_000, b'{"a": ' * 3_000 + b"1" + b"}" * 3_000, b"\xff\xfe{", b"{", b"", b"<html>oops</html>", b"nul\0"]
)
"""Bytes no parser reads as the reply: nested past Python's recursion limit, not UTF-8, cut, empty, a proxy's page."""


def paths(value: Any, here: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON value: each key of an object and index of a list, at any depth."""
    found = [here]
    if isinstance(value, dict):
        for key, inner in value.items():
            found += paths(inner, (*here, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found += paths(inner, (*here, index))
    return found


@st.composite
def mutated(draw: st.DrawFn, good: Any, changes: int = 3) -> Any:
    """``good`` with up to ``changes`` of its places replaced by a value of any shape, or removed."""
    value = copy.deepcopy(good)
    for _ in range(draw(st.integers(1, changes))):
        where = draw(st.sampled_from(paths(value)))
        if not where:
            value = draw(REPLACEMENT)
            continue
        parent = value
        for part in where[:-1]:
            parent = parent[part]
        if isinstance(parent, dict) and draw(st.booleans()) and draw(st.booleans()):
            del parent[where[-1]]
        else:
            parent[where[-1]] = draw(REPLACEMENT)
    return value


def one_line(err: BaseException) -> None:
    assert isinstance(err, TpuRlError), f"{type(err).__name__}: {err}"
    assert str(err) and "\n" not in str(err), str(err)


# ---------------------------------------------------------------------------------------------
# The Hub's JSON, through its client: the model's info, the account, a shard's header


class Replies(FakeHub.serving({"config.json": json.dumps(CONFIG).encode()})):  # type: ignore[misc]
    """The loopback Hub whose model info, ``whoami`` or ``model.safetensors`` is what the draw made (``made``); a
    repository it does not hold is the Hub's 404 (``RepoNotFound``), as a publication's new repository is."""

    made: dict[str, bytes] = {}

    def do_GET(self):  # noqa: N802
        path = self.path.split("?")[0]
        if path == "/api/whoami-v2":
            self.send_body(200, self.made["whoami"])
        elif "/revision/" in path and "info" in self.made:
            self.send_body(200, self.made["info"])
        elif path.startswith("/api/models/") and "/revision/" not in path:
            self._error(404, "RepoNotFound", "Repository not found")
        else:
            super().do_GET()

    def _at(self, revision: str) -> tuple[str, dict[str, bytes]]:
        sha, files = super()._at(revision)
        return sha, {**files, "model.safetensors": self.made["shard"]} if "shard" in self.made else files


@pytest.fixture(scope="module")
def hub():
    with serve(Replies) as url:
        yield url


GOOD_INFO = {
    "id": REPO,
    "sha": COMMIT,
    "private": True,
    "cardData": {"license": "apache-2.0"},
    "tags": ["license:apache-2.0"],
    "siblings": [{"rfilename": "config.json", "size": 5}, {"rfilename": "model.safetensors", "size": 9}],
}
GOOD_WHOAMI = {
    "name": "alice",
    "orgs": [{"name": "acme", "roleInOrg": "write"}],
    "auth": {
        "accessToken": {
            "role": "fineGrained",
            "fineGrained": {"scoped": [{"entity": {"type": "org", "name": "acme"}, "permissions": ["repo.write"]}]},
        }
    },
}
GOOD_HEADER = {"model.language_model.norm.weight": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 8]}}


def encoded(value: Any) -> bytes:
    return json.dumps(value).encode()


REPLIES = {
    "info": st.one_of(mutated(GOOD_INFO).map(encoded), NOT_JSON),
    "whoami": st.one_of(mutated(GOOD_WHOAMI).map(encoded), NOT_JSON),
    "shard": st.one_of(mutated(GOOD_HEADER).map(encoded), NOT_JSON.filter(lambda raw: len(raw) < 100_000)).map(
        lambda raw: len(raw).to_bytes(8, "little") + raw + b"\0" * 8
    ),
}


FOUND = {
    "info": encoded({**GOOD_INFO, "cardData": None, "tags": 5}),
    "whoami": encoded({**GOOD_WHOAMI, "orgs": 5}),
    "shard": (lambda raw: len(raw).to_bytes(8, "little") + raw + b"\0" * 8)(
        encoded({"model.language_model.norm.weight": {"dtype": "BF16", "shape": [2, None], "data_offsets": [0, 8]}})
    ),
}
"""The shapes a review found crashing each check (``tests/test_hostile_replies.py``), drawn first."""


@pytest.mark.slow  # 1.5-2.5 s a reply of drawn examples: the fast tier's budget
@pytest.mark.parametrize("reply", sorted(REPLIES))
def test_a_hub_reply_of_any_shape_is_the_checks_answer_or_one_line(hub, reply):
    """The model's info (the read preflight, the publication's, the base model's files), the account (the
    publication's preflight), a shard's header (the base model's layout for the export check)."""
    from core.deadline import Budget
    from workloads.preflight import base_model_layout, check_model_access, check_publish_access

    budget = Budget(20.0, 5.0, 5.0, "test")
    checks = {
        "info": lambda: check_model_access(REPO, "main", GOOD, endpoint=hub, budget=budget),
        "whoami": lambda: check_publish_access("acme/new", True, GOOD, endpoint=hub, budget=budget),
        "shard": lambda: base_model_layout(REPO, COMMIT, GOOD, hub, budget=budget),
    }

    @settings(PROPERTIES, max_examples=30)  # each example a few requests to the loopback Hub
    @given(made=REPLIES[reply])
    @example(made=FOUND[reply])
    def check(made: bytes) -> None:
        Replies.made = {reply: made}
        try:
            checks[reply]()
        except Exception as err:  # noqa: BLE001 (the property: what it is)
            one_line(err)
            assert GOOD not in str(err)

    try:
        check()
    finally:
        Replies.made = {}


# ---------------------------------------------------------------------------------------------
# safetensors headers, an index, a config: what the export check reads of a model folder

HEADER = {
    "a": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 12]},
    "b": {"dtype": "F32", "shape": [], "data_offsets": [12, 16]},
    "__metadata__": {"format": "pt"},
}


@settings(PROPERTIES, max_examples=200)
@given(
    raw=st.one_of(mutated(HEADER, changes=4).map(encoded), NOT_JSON),
    size=st.one_of(st.none(), st.integers(0, 2**45)),
)
def test_a_safetensors_header_of_any_shape_is_its_tensors_or_one_line(raw, size):
    """``parse_header`` (the export check's, the export step's): the tensors the library finds, or one
    ``ModelFormatError`` line, which the export check names as a problem of the export (and the base's check as a
    ``PreflightError``)."""
    described = 8 + len(raw) + 16 if size is None else size
    try:
        found = parse_header(raw, "model-00001-of-00002.safetensors", described)
    except ModelFormatError as err:
        assert str(err).startswith("model-00001-of-00002.safetensors") and "\n" not in str(err), str(err)
        return
    assert all(isinstance(t, Tensor) and all(type(n) is int and n >= 0 for n in t.shape) for t in found.values())


@settings(PROPERTIES, max_examples=150)
@given(
    index=st.one_of(
        mutated({"metadata": {"total_size": 8}, "weight_map": {"w": "model-1.safetensors"}}).map(encoded), NOT_JSON
    ),
    config=st.one_of(mutated(CONFIG, changes=2).map(encoded), NOT_JSON),
)
def test_an_index_or_a_config_of_any_shape_is_read_or_one_line(index, config):
    for parse, raw in ((parse_index, index), (parse_config, config)):
        try:
            parse(raw)
        except ModelFormatError as err:
            assert "\n" not in str(err) and str(err)


# ---------------------------------------------------------------------------------------------
# Kubernetes objects: a step's JobSet, its Kueue Workloads, its pods, as `make status` and `make logs` read them

LIVE = with_state({**DEV.train.manifest, "metadata": {**DEV.train.manifest["metadata"], "uid": "u-1",
                   "creationTimestamp": "2026-09-21T10:00:00Z"}}, "running")  # fmt: skip
QUEUED = workload(LIVE, "recovering")
POD = step_pod(LIVE, "worker", "running")


@settings(PROPERTIES, max_examples=150)
@given(
    obj=st.one_of(mutated(LIVE, changes=3), JSON),
    queued=st.one_of(mutated(QUEUED, changes=2), JSON),
    pod=st.one_of(mutated(POD, changes=3), JSON),
)
def test_a_cluster_object_of_any_shape_is_a_status_or_one_line(obj, queued, pod):
    """`make status`'s row of the step (its JobSet and Workloads, parsed where read) and `make logs`' choice of a
    pod: the row, or the one ``BoundaryError`` line the tools print (exit 2)."""
    from infra.k8s import live_objects
    from tools.logs import choose
    from tools.status import StepStatus, render, step_status

    try:
        typed = live_objects.jobset(obj, "JobSet tpu-rl/x")
        found = step_status(DEV.train, typed, live_objects.workloads([queued], "the Workloads"))
        assert isinstance(found, StepStatus)
        render(stack_settings("dev", []), DEV, [found], datetime(2026, 9, 21, tzinfo=UTC))
        choose(DEV.train, live_objects.pods([pod], "the pods"))
    except Exception as err:  # noqa: BLE001 (the property: what it is)
        one_line(err)
        assert not isinstance(err, BoundaryError) or err.exit_code == 2, "an object of another shape exits 2"


# ---------------------------------------------------------------------------------------------
# TensorBoard event files: `make report`'s data and page

EVENTS = st.lists(
    st.tuples(
        st.one_of(st.sampled_from(["rewards/train/sum", "actor/train/loss", "jax/orbax/x"]), TEXT),
        st.integers(min_value=-(2**63), max_value=2**63 - 1),
        st.one_of(st.floats(START, START + 1e6), st.floats(allow_nan=True, allow_infinity=True)),
        st.floats(allow_nan=True, allow_infinity=True, width=32),
    ),
    max_size=6,
)


@settings(PROPERTIES, max_examples=40)
@given(events=EVENTS)
def test_event_files_of_any_steps_times_tags_and_values_make_a_report(events):
    """What a writer may put in an event file (a step of int64's range, a wall time of any double, a tag of any text,
    any float): the report's data (``report.json``) and page are made, every attempt's time one a clock shows."""
    from tools.report import report_json
    from tools.report_html import render_html
    from tools.report_info import RunInfo
    from workloads.observe.evaluations import parse_logs
    from workloads.observe.run_data import RunData
    from workloads.observe.scalars import read_event_files

    with tempfile.TemporaryDirectory() as folder:
        write_raw_events(Path(folder), events)
        scalars = read_event_files(Path(folder).iterdir())
    info = RunInfo(output_uri=DEV.train.output_uri)
    report = report_json(info, RunData(DEV.train.output_uri, scalars, parse_logs([]), None))
    json.dumps(report)
    render_html(report, info, [])
    for attempt in report["attempts"]:
        assert all(math.isfinite(attempt[k]) and 0 <= attempt[k] <= 253402300799 for k in ("start", "end"))
