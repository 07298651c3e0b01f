"""What the Pulumi engine and its providers decide for every resource the program registers, as a model the
scenario tests drive the real program through (``tests/test_scenarios.py``, ``tests/test_lifecycle_*.py``).

The real program runs under the mock runtime with a world of real readers: it reads the loopback cluster
(``tests.fake_kube``) through the real Kubernetes client, its kubeconfig's real exec plugin (a script on PATH)
and real TLS, and checks artifacts in fake-gcs-server. For each resource it registers, this model makes the
engine's decision, each cited by the function it comes from, records the provider calls it implies (``Check``
on every registration, ``Diff`` on every one with old state unless its replacement trigger fired), and plays
the decision on the cluster and on a ledger of what bills (``Cloud``): create, adopt, replace (delete first),
update, same; a create may fail (``Stack.fail_create``), and the engine then cancels the rest of the deployment.
Deletes (of what a run no longer registers, and ``destroy``) follow the engine's schedule and its checks in order:
``protect``, ``retainOnDelete``, ``deletedWith``, the provider's Delete. The steps carry
``pulumi.com/skipAwait: "true"``, so the provider returns once a step is applied (``await.go``
``Creation``/``Update`` -> ``metadata.ReadyCondition``: Immediate); the run then goes on in the cluster (and in
Kueue) as each scenario says, while the program waits for it (``workloads.observe.waiting``) on a fake clock this
model advances: a scenario can act on every poll.

On the first error that is not a protect refusal the engine cancels the deployment: a step already running
finishes, none starts after it (``step_executor.go`` ``cancelDueToError``, ``executeChain``; ``Stack.fail_create``,
``Stack.fail_during`` and ``Stack._delete``).

Sources, the newest this project can read (the lock pins the SDK 3.272.0 and pulumi-kubernetes 4.34.2, whose
sources are not published where this project reads; docs/engine-behaviour.md "The engine, provider and controller
behaviour relied on" says what that means):
- pulumi/pulumi v3.259.0 (0ac56e8), the newest release tag, and HEAD 1b59498 (3.260.0-dev) where they
  differ: ``pkg/resource/deploy/step_generator.go`` (``sg.go``), ``pkg/resource/deploy/step.go``,
  ``pkg/resource/deploy/step_executor.go``, ``pkg/resource/deploy/deployment_executor.go``,
  ``pkg/resource/graph/dependency_graph.go``, ``pkg/backend/apply.go``, ``pkg/backend/journal.go``;
- hashicorp/terraform-provider-google (e03b762): ``resourceContainerNodePoolCreate`` (what a failed create leaves);
- pulumi/pulumi-kubernetes v4.32.0 (a03ff6b), the newest release tag (HEAD 9497796 changes none of the
  functions cited): ``provider/pkg/provider/provider.go`` (``kp.go``), ``provider/pkg/provider/diff.go``,
  ``provider/pkg/await/await.go``, ``provider/pkg/provider/helm_release.go``.
"""

from __future__ import annotations

import base64
import copy
import functools
import json
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dill
from pulumi.output import Unknown

from core.settings import Settings
from infra.k8s.live import ClusterReader
from tests.conftest import JOBSET, SENTINEL_TOKEN, put, put_conversion
from tests.fake_kube import FakeCluster, pod_event, step_pod, with_state
from tests.hf_files import LANGUAGE, VISION, model_files
from tests.lifecycle_walk import settings
from tests.world import fake_world
from tools.plan import plan_stack
from tools.plan.offline import UNKNOWN, Plan, Registration, plain
from tools.stack_files import ROOT, parse_property_path
from workloads.observe import waiting
from workloads.specs.step_specs import Step, Workflow, plan_workflow

STEP_TYPES = (JOBSET,)
TERMINAL = ("completed", "failed")
"""A JobSet's terminal states (``status.terminalState``); the provider plans no field of a custom resource
as a replacement (``diff.go`` ``forceNewProperties`` knows built-in kinds only)."""
PROJECT = "tpu-rl"
K8S_PROVIDER = "pulumi:providers:kubernetes"
CLUSTER = "gcp:container/cluster:Cluster"
BUCKET = "gcp:storage/bucket:Bucket"
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
FORCE_NEW = {"kubernetes:storage.k8s.io/v1:StorageClass": ("parameters", "provisioner")}
GCP_FORCE_NEW = {BUCKET: ("name", "location", "project")}
"""Inputs whose change the google provider plans as a replacement (``resource_storage_bucket.go``: ForceNew), for
the resources holding run data (``infra.gcp.storage.IDENTITY_KEYS``)."""
DYNAMIC = "pulumi-python:dynamic"
"""A Python dynamic resource's type prefix: its provider is the pickle in its ``__provider`` input, which the engine
model loads and calls as ``pulumi/dynamic/__main__.py`` does (``get_provider``: dill), for ``check``."""
"""Top-level inputs whose change the Kubernetes provider plans as a replacement, besides ``metadata.name`` and
``metadata.namespace`` (``kp.go`` ``Diff``: "Changing the identity of the resource always causes a
replacement"; ``diff.go`` ``forceNewProperties``), for the kinds the program registers."""
BILLED = {
    CLUSTER: "GKE cluster",
    "gcp:container/nodePool:NodePool": "node VMs and their boot disks",
    "gcp:compute/routerNat:RouterNat": "Cloud NAT gateway and its auto-allocated external IPs",
    BUCKET: "bucket storage",
    "gcp:kms/cryptoKey:CryptoKey": "Cloud KMS key versions",
    "gcp:compute/address:Address": "static IP address",
    "gcp:compute/globalAddress:GlobalAddress": "static IP address",
    "gcp:compute/disk:Disk": "Persistent Disk",
}
"""The resource types that bill while they exist (the others the program registers: APIs, networks, subnets,
routers, firewalls, service accounts, IAM bindings, key rings, Kubernetes objects, do not)."""


class StoppedError(Exception):
    """The `up` stopped while the program waited for a step (Ctrl-C, a dropped connection)."""


class KilledError(Exception):
    """The runner was killed (SIGKILL, a lost CI machine)."""


@dataclass
class Recorded:
    """What the state holds for a resource (``resource.State``): inputs, outputs, trigger and the options the
    engine's decisions read."""

    inputs: dict[str, Any]
    outputs: dict[str, Any]
    trigger: Any
    urn: str = ""
    type: str = ""
    custom: bool = True
    parent: str = ""
    provider: str = ""
    """The provider's URN ("" for a component or a default provider the program does not register)."""
    dependencies: tuple[str, ...] = ()
    property_deps: dict[str, tuple[str, ...]] = field(default_factory=dict)
    deleted_with: str = ""
    protect: bool = False
    retain_on_delete: bool = False
    delete_before_replace: bool = False
    replace_on_changes: tuple[str, ...] = ()
    ignore_changes: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.urn.rsplit("::", 1)[-1]

    def depends_on(self) -> set[str]:
        """``dependency_graph.go`` ``DependenciesOf``: the provider, the parent, ``dependencies``, property
        dependencies and ``deletedWith``."""
        edges = {*self.dependencies, self.parent, self.provider, self.deleted_with}
        for urns in self.property_deps.values():
            edges.update(urns)
        edges.discard("")
        edges.discard(self.urn)
        return edges


@dataclass
class Run:
    plan: Plan
    actions: dict[str, str]
    """Step name -> create | adopt | replace | update | same | delete (what the engine planned and did)."""
    resources: dict[str, str] = field(default_factory=dict)
    """URN -> the same, for every resource the run registered or deleted."""
    calls: list[tuple[str, str]] = field(default_factory=list)
    """The provider calls the engine made, in order: (Check | Diff | CheckConfig | DiffConfig | Create | Update
    | Delete | Read, URN)."""
    cascade: dict[str, str] = field(default_factory=dict)
    """URN -> "replace" or "keep": the dependents a delete-before-replace asked about
    (``calculateDependentReplacements``)."""

    @property
    def error(self) -> BaseException | None:
        return self.plan.error


@dataclass
class Destroyed:
    """What ``pulumi destroy`` did."""

    errors: list[str]
    outcomes: dict[str, str]
    """URN -> deleted | dropped (deletedWith a planned delete) | kept (retainOnDelete) | refused (protected) |
    failed (the provider's Delete) | skipped (a dependency of a delete that failed) | cancelled (its antichain came
    after a failed delete: the engine had cancelled the deployment) | previewed."""
    calls: list[tuple[str, str]] = field(default_factory=list)


def is_unknown(value: Any) -> bool:
    return isinstance(value, Unknown) or value == UNKNOWN


def should_trigger_replace(new: Any, old: Any) -> bool:
    """``sg.go`` ``shouldTriggerReplace``: unknowns always replace, a null on either side never does,
    otherwise a change does."""
    if is_unknown(new) or is_unknown(old):
        return True
    if new is None or old is None:
        return False
    return new != old


def _get(obj: Any, path: list[str | int]) -> tuple[bool, Any]:
    for element in path:
        if isinstance(element, int):
            if not isinstance(obj, list) or element >= len(obj):
                return False, None
        elif not isinstance(obj, dict) or element not in obj:
            return False, None
        obj = obj[element]
    return True, obj


def _set(obj: Any, path: list[str | int], present: bool, value: Any) -> None:
    for element in path[:-1]:
        obj = obj.setdefault(element, {}) if isinstance(element, str) else obj[element]
    if present:
        obj[path[-1]] = copy.deepcopy(value)
    elif isinstance(obj, dict):
        obj.pop(path[-1], None)


def process_ignore_changes(inputs: dict[str, Any], old: dict[str, Any], paths: Iterable[str]) -> dict[str, Any]:
    """``sg.go`` ``processIgnoreChanges``: every ignored path takes the old input's value (absent stays absent)."""
    result = copy.deepcopy(inputs)
    for path in paths:
        elements = parse_property_path(path)
        present, value = _get(old, elements)
        if _get(result, elements[:-1])[0] or present:
            _set(result, elements, present, value)
    return result


def kubernetes_replaces(type_: str, old: dict[str, Any], new: dict[str, Any], unknown: Iterable[str] = ()) -> bool:
    """``kp.go`` ``Diff`` for an object the program registers: a replacement when ``metadata.name`` or
    ``metadata.namespace`` changes, or a force-new input of a built-in kind (``FORCE_NEW``).

    An input that is unknown (``calculateDependentReplacements`` makes the inputs that depend on a replaced
    resource unknown) is null in the provider's patch, and the force-new paths below it match nothing
    (``convertPatchToDiff`` -> ``openapi.PatchPropertiesChanged``: a JSONPath under a null finds nothing, "not
    found" is no match): an unknown ``metadata`` is an update, never a replacement."""
    unknown = set(unknown)
    if "metadata" not in unknown:
        for key in ("name", "namespace"):
            if (old.get("metadata") or {}).get(key) != (new.get("metadata") or {}).get(key):
                return True
    return any(k not in unknown and old.get(k) != new.get(k) for k in FORCE_NEW.get(type_, ()))


class Cloud:
    """What bills, as the model's cluster and resources say: the billed resources the program created
    (``BILLED``), and what the cluster made from its objects: a Persistent Disk for each claim of a pod that
    exists (a generic ephemeral volume's claim, or a named one: the disk lives as long as the claim, which
    lives as long as its Pod object, and a finished Job keeps its Pods), a load balancer and its address for
    each Service of type LoadBalancer. ``ever`` keeps everything that existed at any point."""

    def __init__(self) -> None:
        self.resources: dict[str, str] = {}
        """URN -> what bills, for the billed resources the engine created and has not deleted."""
        self.left: dict[str, str] = {}
        """What exists without a resource in the state: abandoned by a provider's Delete, or left by a cluster's
        deletion (key -> why)."""
        self.ever: dict[str, str] = {}

    @staticmethod
    def derived(objects: Iterable[dict[str, Any]]) -> dict[str, str]:
        """The billed cloud objects the cluster makes from its live ``objects`` (JobSets and Services)."""
        found: dict[str, str] = {}
        for obj in objects:
            meta = obj.get("metadata") or {}
            where = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
            if obj.get("kind") == "Service" and (obj.get("spec") or {}).get("type") == "LoadBalancer":
                found[f"load balancer {where}"] = "a Service of type LoadBalancer: a forwarding rule and its address"
            if obj.get("kind") != "JobSet" or not obj.get("status"):
                continue  # a JobSet that has not started has no pods
            for rjob in obj["spec"]["replicatedJobs"]:
                job = rjob["template"]["spec"]
                pods = rjob.get("replicas", 1) * job.get("parallelism", 1)
                for volume in job["template"]["spec"].get("volumes", []):
                    claim = volume.get("persistentVolumeClaim", {}).get("claimName")
                    if claim:
                        found[f"disk of claim {meta.get('namespace')}/{claim}"] = "a claimed Persistent Disk"
                    elif "ephemeral" in volume:
                        for index in range(pods):
                            found[f"disk {where}/{rjob['name']}-{index}/{volume['name']}"] = (
                                "a generic ephemeral volume's Persistent Disk (lives as long as its Pod object)"
                            )
        return found

    def now(self, cluster_objects: Iterable[dict[str, Any]]) -> dict[str, str]:
        return {**self.resources, **self.left, **self.derived(cluster_objects)}

    def observe(self, cluster_objects: Iterable[dict[str, Any]]) -> None:
        self.ever.update(self.now(cluster_objects))


DATASET_COMMIT = "f0e1d2c3b4a5968778695a4b3c2d1e0f1a2b3c4d"
"""The dataset's commit a scenario's training records."""


@dataclass
class Stack:
    """One stack's state across runs, and the cluster and bucket its runs act on."""

    cluster: FakeCluster
    gcs: Any
    stack_file: Path = ROOT / "Pulumi.prod.yaml"
    overrides: list[str] = field(
        # The export check reads the Hub: the scenarios are about the lifecycle (test_artifacts runs the check).
        default_factory=lambda: ["tpu-rl:workflow.preflight=false", "tpu-rl:workflow.verifyExport=false"]
    )
    export_files: dict[str, bytes] = field(default_factory=lambda: model_files({**LANGUAGE, **VISION}, 2))
    """What a completed export writes (file -> bytes): a whole model folder, as the export check reads it."""
    base_commit: str | None = None
    """The base model's commit the conversion records (None: ``tests.fake_hub.COMMIT``)."""
    dataset_commit: str | None = DATASET_COMMIT
    """The dataset's commit a completed training records in ``<output>dataset/dataset.json`` (None: no record)."""
    secrets: dict[str, str] = field(default_factory=lambda: {"tpu-rl:hfToken": SENTINEL_TOKEN})
    """The stack's secrets as `pulumi up` decrypts them."""
    publisher: Callable[[Step], None] | None = None
    """What a completed publish step does (a scenario runs the step's real container command); None: nothing."""
    record: bytes = b""
    """What a completed step whose output is a step record (``core.records``) writes there."""
    state: dict[str, Recorded] = field(default_factory=dict)
    """URN -> every resource the state holds, in the order the engine writes them (dependencies first)."""
    pending_creates: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Creates a killed `up` left (``journal.go``: carried into every later snapshot until a refresh clears them)."""
    provider_inputs: dict[str, Any] = field(default_factory=dict)
    """The Kubernetes provider's inputs the last run registered (what a refresh configures it with)."""
    jobset_crds: dict[str, dict[str, Any]] = field(default_factory=dict)
    """JobSet chart version -> the CRD its ``crds/`` holds: what a Helm install of the chart creates (empty: the
    model installs none)."""
    written: list[str] = field(default_factory=list)
    cloud: Cloud = field(default_factory=Cloud)
    helm: dict[tuple[str, str], tuple[int, str]] = field(default_factory=dict)
    """(namespace, release) -> its newest revision and status in Helm's storage (Secrets in the cluster)."""
    kill_helm_install: str = ""
    """The Helm release whose install the runner is killed during (its revision is left pending-install)."""
    fail_create: tuple[str, str, tuple[str, ...]] | None = None
    """(resource, its provider's error, after): the create of the resource named so fails, once every resource named
    in ``after`` is created (a TPU pool's create runs for minutes, the Helm installs beside it do not), and leaves no
    state (terraform-provider-google ``resourceContainerNodePoolCreate``: ``SetId("")`` when the failed operation left
    no pool). The engine then cancels the deployment (``step_executor.go`` ``cancelDueToError``: ``se.cancel()``
    without ``--continue-on-error``; ``deployment_executor.go`` ``Execute`` leaves its loop on the cancelled context):
    a step already running finishes, no registration after the failure gets one."""
    fail_during: str = ""
    """The resource whose create is in flight when ``fail_create``'s fails (its registration started and not returned;
    ``after`` is waited for too): that step finishes and is written to the state (``executeChain`` checks the
    cancelled context only before a step), and no registration after it gets one, its dependents' and guards' alike
    (``deployment_executor.go`` ``Execute`` returns on ``ctx.Done()`` and handles no more events)."""
    _condemned: set[str] = field(default_factory=set, repr=False)
    """What a delete-before-replace deleted with the resource it replaces, in this run (created again)."""
    clock: float = 0.0
    """The program's clock while it waits (seconds; ``workloads.observe.waiting.now``)."""
    on_wait: Callable[[Stack], None] | None = None
    """What happens in the cluster each time the program pauses between polls (a scenario sets it)."""
    stop: BaseException | None = None
    """Raised at the program's next pause (the runner is stopped or killed while the program waits)."""

    @property
    def name(self) -> str:
        return self.stack_file.name.split(".")[1]

    def step_state(self, name: str) -> Recorded | None:
        """The state of the step object ``name`` (None when the state has none)."""
        return next((r for r in self.state.values() if r.type in STEP_TYPES and r.name == name), None)

    def steps_in_state(self) -> set[str]:
        return {r.name for r in self.state.values() if r.type in STEP_TYPES}

    def urn(self, type_: str, name: str) -> str:
        """The URN of the one resource of ``type_`` named ``name`` in the state."""
        (found,) = [u for u, r in self.state.items() if r.type == type_ and r.name == name]
        return found

    # -- running the program -------------------------------------------------------------------

    def up(self, outcomes: dict[str, str] | None = None, overrides: Sequence[str] = ()) -> Run:
        """``pulumi up``; ``outcomes`` says how each awaited step ends (default: complete)."""
        return self._run(False, outcomes or {}, list(overrides))

    def preview(self, overrides: Sequence[str] = ()) -> Run:
        return self._run(True, {}, list(overrides))

    def _run(self, preview: bool, outcomes: dict[str, str], overrides: list[str]) -> Run:
        self._steps = self.steps(overrides)
        self._final_step = self.loaded(overrides).training.final_step
        actions: dict[str, str] = {}
        resources: dict[str, str] = {}
        calls: list[tuple[str, str]] = []
        cascade: dict[str, str] = {}
        registered: list[str] = []
        killed: list[bool] = []
        cancelled: list[str] = []
        created = threading.Condition()
        done: set[str] = set()
        """The names of the resources whose registration has returned (``fail_create``'s ``after``)."""
        started: set[str] = set()
        """``fail_during`` once its registration has started."""
        self._condemned: set[str] = set()

        def answer(registration: Registration) -> dict[str, Any] | None:
            if killed:
                raise KilledError("the runner is gone")
            if cancelled:
                raise RuntimeError(f"not created: the deployment stopped after {cancelled[0]}")
            rec = self._record(registration)
            if not preview and self.fail_create and rec.name == self.fail_create[0] and rec.urn not in self.state:
                name, error, after = self.fail_create
                during = {self.fail_during} - {""}
                with created:  # the provider's create runs until then (a bounded wait on a condition, no timer)
                    ready = created.wait_for(lambda: set(after) <= done and during <= started, 60)
                    assert ready, f"{after} never registered, or {during} never started"
                    cancelled.append(f"creating {name}: {error}")
                    created.notify_all()
                raise RuntimeError(f"creating {name}: {error}")
            if not preview and rec.name == self.fail_during and self.fail_create and not cancelled:
                with created:  # in flight when the other create fails: it goes on to its end
                    started.add(rec.name)
                    created.notify_all()
                    assert created.wait_for(lambda: bool(cancelled), 60), f"{self.fail_create[0]} never failed"
            registered.append(rec.urn)
            try:
                out = self._register(registration, rec, preview, outcomes, actions, resources, calls, cascade)
            except KilledError:
                killed.append(True)
                raise
            with created:
                done.add(rec.name)
                created.notify_all()
            return out

        original = (waiting.sleep, waiting.now)
        waiting.sleep, waiting.now = self._pause, lambda: self.clock
        try:
            plan, _ = plan_stack(
                self.stack_file,
                [*self.overrides, *overrides],
                stack=self.name,
                world=functools.partial(fake_world, cluster=ClusterReader),
                preview=preview,
                secrets=self.secrets,
                outputs_for=answer,
                raise_errors=False,
            )
        finally:
            waiting.sleep, waiting.now = original
            self.stop = None
        if not preview and plan.error is None and not killed:
            # The program finished without an error: what it no longer registers is deleted, after every create
            # (deployment_executor.go performPostSteps: sg.go GenerateDeletes, then ScheduleDeletes).
            gone = {urn: self.state[urn] for urn in self.state if urn not in set(registered)}
            outcome = self._delete(list(gone), dry_run=False, calls=calls)
            for urn, what in outcome.outcomes.items():
                resources[urn] = "delete" if what == "deleted" else what
                if gone[urn].type in STEP_TYPES and what == "deleted":
                    actions[gone[urn].name] = "delete"
            if outcome.errors:
                plan.error = RuntimeError("; ".join(outcome.errors))
        self.cloud.observe(self._live_objects())
        return Run(plan, actions, resources, calls, cascade)

    def _pause(self, seconds: float) -> None:
        """The program's pause between polls: time passes, then the cluster (the scenario) acts."""
        self.clock += seconds
        if self.stop is not None:
            stop, self.stop = self.stop, None
            raise stop
        if self.on_wait is not None:
            self.on_wait(self)

    # -- one registration ----------------------------------------------------------------------

    def _urn(self, request: Any) -> str:
        """The URN the mock monitor gives a registration (``MockMonitor.make_urn``, as the engine makes it)."""
        type_ = request.type
        if request.parent:
            type_ = request.parent.split("::")[2].split("$")[-1] + "$" + type_
        return f"urn:pulumi:{self.name}::{PROJECT}::{type_}::{request.name}"

    def _record(self, registration: Registration) -> Recorded:
        request = registration.request
        return Recorded(
            inputs=plain(registration.inputs, False),
            outputs={},
            trigger=registration.trigger,
            urn=self._urn(request),
            type=registration.type,
            custom=bool(request.custom),
            parent=request.parent,
            provider=request.provider.rsplit("::", 1)[0] if request.provider else "",
            dependencies=tuple(request.dependencies),
            property_deps={k: tuple(v.urns) for k, v in request.propertyDependencies.items()},
            deleted_with=request.deletedWith,
            protect=bool(request.protect) if request.HasField("protect") else False,
            retain_on_delete=bool(request.retainOnDelete) if request.HasField("retainOnDelete") else False,
            delete_before_replace=bool(request.deleteBeforeReplace),
            replace_on_changes=tuple(request.replaceOnChanges),
            ignore_changes=tuple(request.ignoreChanges),
        )

    def _register(
        self,
        registration: Registration,
        rec: Recorded,
        preview: bool,
        outcomes: dict[str, str],
        actions: dict[str, str],
        resources: dict[str, str],
        calls: list[tuple[str, str]],
        cascade: dict[str, str],
    ) -> dict[str, Any] | None:
        """The engine's steps for one registration (``sg.go`` ``GenerateSteps`` -> ``continueStepsFromImport``
        -> ``generateStepsFromDiff`` -> ``continueStepsFromDiff``), played out."""
        old = self.state.get(rec.urn)
        action = self._decide(rec, old, calls)
        if action == "replace" and old is not None and old.protect and rec.protect:
            # sg.go continueStepsFromDiff: "unable to replace resource %q\nas it is currently marked for
            # protection" (a bail in an update).
            raise RuntimeError(f"unable to replace resource {rec.urn!r}\nas it is currently marked for protection")
        if registration.type in STEP_TYPES:
            rec.inputs = self._inputs_for(rec, old, action)
            obj = self._step(rec, old, action, preview, outcomes, actions, calls, cascade)
            resources[rec.urn] = actions[rec.name]
            return obj
        resources[rec.urn] = action
        # The outputs the program reads back are the same on every run (an endpoint, an email, a URL): the mock's
        # (or ``_outputs``'), whatever the step.
        outputs = self._outputs(registration)
        if preview:
            return outputs
        if action == "same":
            assert old is not None
        else:
            if rec.custom:
                calls.append(("Update" if action == "update" else "Create", rec.urn))
            self._apply_platform(rec, action)
            if rec.type in BILLED:
                self.cloud.resources[rec.urn] = BILLED[rec.type]
        rec.outputs = outputs or rec.inputs
        self.state[rec.urn] = rec
        return outputs

    def _decide(self, rec: Recorded, old: Recorded | None, calls: list[tuple[str, str]]) -> str:
        """create | replace | update | same, with the provider calls the decision takes."""
        provider = rec.type.startswith("pulumi:providers:")
        if rec.custom:
            # sg.go continueStepsFromImport: prov.Check on every registration of a custom resource (a provider's
            # is its CheckConfig: deploy/providers/registry.go Registry.Check).
            calls.append(("CheckConfig" if provider else "Check", rec.urn))
        if rec.type.startswith(DYNAMIC):
            # The same Check with the state's inputs as olds (none for a create or a recreate); a failure makes the
            # resource invalid (sg.go issueCheckErrors, diag GetResourceInvalidError "%v resource '%v' has a problem:
            # %v"; then "resource %s is invalid"): the deployment stops, its dependents are never registered.
            olds = {} if old is None or rec.urn in self._condemned else old.inputs
            dynamic_provider = dill.loads(base64.b64decode(rec.inputs["__provider"]))
            failures = dynamic_provider.check(copy.deepcopy(olds), copy.deepcopy(rec.inputs)).failures
            if failures:
                raise RuntimeError(f"{rec.type} resource '{rec.name}' has a problem: {failures[0].reason}")
        if old is None or rec.urn in self._condemned:
            # No old state (a pending create is not a resource: journal.go): a CreateStep; or the resource was
            # deleted by another's delete-before-replace (sg.go ContinueStepsFromDiff: "re-create replaced
            # resource deleted due to dependent DBR").
            return "create" if old is None else "replace"
        if should_trigger_replace(rec.trigger, old.trigger):
            # sg.go generateStepsFromDiff: the trigger is compared before the provider's Diff, which is not called;
            # a replacement re-runs Check on the program's inputs (continueStepsFromDiff: "we need to recompute
            # the default values").
            if rec.custom:
                calls.append(("Check", rec.urn))
            return "replace"
        inputs = process_ignore_changes(rec.inputs, old.inputs, rec.ignore_changes)
        if not rec.custom:
            # sg.go diff: a component (no provider) is compared with DeepEquals; no provider call.
            return "same" if inputs == old.inputs else "update"
        # sg.go diff -> diffResource: the provider's Diff (DiffConfig for a provider: registry.go Registry.Diff).
        calls.append(("DiffConfig" if provider else "Diff", rec.urn))
        if inputs == old.inputs:
            return "same"  # DiffNone: a SameStep (step.go SameStep.Apply keeps the ID and outputs)
        if any(inputs.get(k) != old.inputs.get(k) for k in GCP_FORCE_NEW.get(rec.type, ())):
            calls.append(("Check", rec.urn))  # sg.go continueStepsFromDiff: a replacement re-runs Check
            return "replace"
        if rec.type.startswith("kubernetes:") and rec.type != HELM_RELEASE:
            changed = {k for k in {*inputs, *old.inputs} if inputs.get(k) != old.inputs.get(k)}
            if kubernetes_replaces(rec.type, old.inputs, inputs) or changed & set(rec.replace_on_changes):
                calls.append(("Check", rec.urn))
                return "replace"
        return "update"

    def _inputs_for(self, rec: Recorded, old: Recorded | None, action: str) -> dict[str, Any]:
        """What the engine sends a step's provider: ``ignoreChanges`` applied unless it is replaced (a replacement
        re-runs Check on the program's current inputs: nothing ignored is carried over)."""
        if old is None or action == "replace":
            return rec.inputs
        return process_ignore_changes(rec.inputs, old.inputs, rec.ignore_changes)

    def _outputs(self, registration: Registration) -> dict[str, Any] | None:
        """The outputs of the resources whose values the program reads back (others echo their inputs)."""
        if registration.type == CLUSTER:
            return {
                **registration.inputs,
                "endpoint": self.cluster.endpoint,
                "masterAuth": {"clusterCaCertificate": self.cluster.ca_data},
            }
        if registration.type == BUCKET:
            bucket = registration.inputs["name"]
            if not self.gcs.lookup_bucket(bucket):  # the bucket the program creates
                self.gcs.create_bucket(bucket)
            return None
        if registration.type == K8S_PROVIDER:
            self.provider_inputs = plain(registration.inputs, False)
        return None

    def _apply_platform(self, rec: Recorded, action: str) -> None:
        """A platform resource's create or update, as far as the cluster shows it: a Helm release of the JobSet
        chart creates its CRD when it installs the chart (helm v3.20.2 ``pkg/action/install.go``
        ``installCRDs``, skipping one that exists) and never on an upgrade (``pkg/action/upgrade.go`` renders
        without CRDs; pulumi-kubernetes ``helm_release.go`` ``helmUpdate`` runs ``action.NewUpgrade``)."""
        if rec.type == HELM_RELEASE:
            self._helm(rec, action)
        if rec.type != HELM_RELEASE or rec.inputs.get("name") != "jobset" or action == "update":
            return
        crd = self.jobset_crds.get(str(rec.inputs.get("version")))
        if crd is not None and self.cluster.get("CustomResourceDefinition", "", crd["metadata"]["name"]) is None:
            self.cluster.put(crd)

    def _helm(self, rec: Recorded, action: str) -> None:
        """pulumi-kubernetes v4.32.0 ``helm_release.go``: a create is a Helm install (``helmCreate``), an update an
        upgrade (``helmUpdate``); helm v3.20.2 refuses an install whose name has any revision but a failed or
        uninstalled one with ``replace`` (``install.go`` ``availableName``), and an upgrade of a pending release
        (``upgrade.go``: ``errPending``)."""
        key = (str(rec.inputs.get("namespace")), str(rec.inputs.get("name")))
        found = self.helm.get(key)
        if action == "update":
            if found is not None and found[1].startswith("pending"):
                raise RuntimeError("another operation (install/upgrade/rollback) is in progress")
            self.helm[key] = ((found or (0, ""))[0] + 1, "deployed")
            return
        if found is not None:
            raise RuntimeError("cannot re-use a name that is still in use")
        if self.kill_helm_install == key[1]:
            self.helm[key] = (1, "pending-install")  # the runner dies while Helm waits for the chart's objects
            self.pending_creates[rec.urn] = rec.inputs
            raise KilledError(f"killed while installing {key[1]}")
        self.helm[key] = (1, "deployed")

    # -- one step object -----------------------------------------------------------------------

    def _step(
        self,
        rec: Recorded,
        old: Recorded | None,
        action: str,
        preview: bool,
        outcomes: dict[str, str],
        actions: dict[str, str],
        calls: list[tuple[str, str]],
        cascade: dict[str, str],
    ) -> dict[str, Any]:
        name, inputs = rec.name, rec.inputs
        kind, namespace = inputs["kind"], inputs["metadata"]["namespace"]
        live = self.cluster.get(kind, namespace, name)
        if action == "create" and live is not None and not preview:
            action = "adopt"  # kp.go Create with upsertExistingObjects: a server-side apply onto the object
        actions[name] = action
        if preview:
            return self._preview_outputs(action, old, inputs, live)
        if action == "same":
            assert old is not None
            rec.outputs = old.outputs
            self.state[rec.urn] = rec
            return copy.deepcopy(old.outputs)  # step.go SameStep.Apply: the recorded outputs (Check, Diff came before)
        if action == "replace":
            assert old is not None
            # delete_before_replace: the engine first asks which dependents must go too (sg.go
            # calculateDependentReplacements), then DeleteReplacement, then CreateReplacement, serially; the delete
            # waits until the object is gone (await.go Deletion, foreground).
            cascade.update(self._dependent_replacements(old, calls))
            self._condemned |= {urn for urn, what in cascade.items() if what == "replace"}
            for urn in [u for u, what in cascade.items() if what == "replace"]:
                self._provider_delete(self.state.pop(urn), calls)
            calls.append(("Delete", rec.urn))
            self.cluster.delete(kind, namespace, name)
            del self.state[rec.urn]  # the old resource leaves the snapshot once DeleteReplacement is done
            live = None
        calls.append(("Update" if action == "update" else "Create", rec.urn))
        obj = self._apply(inputs, live, adopt=action == "adopt")
        outcome = outcomes.get(inputs["metadata"]["labels"]["app.kubernetes.io/component"], "complete")
        if outcome == "kill-during-create" and action in ("create", "adopt", "replace"):
            # The runner dies before the provider's Create returned: snapshot.go markOperationPending recorded
            # a pending create, and no resource (journal.go).
            self.cluster.set_state(kind, namespace, name, "running")
            self.pending_creates[name] = inputs
            raise KilledError(f"killed while creating {name}")
        rec.outputs = obj
        self.state[rec.urn] = rec
        self._run_step(obj, outcome)
        self.cloud.observe(self._live_objects())
        return obj

    def _dependent_replacements(self, root: Recorded, calls: list[tuple[str, str]]) -> dict[str, str]:
        """``sg.go`` ``calculateDependentReplacements`` (HEAD): of every transitive dependent of ``root``, a
        component or external resource is never replaced; one whose provider is replaced, or (HEAD, #23818)
        whose ``deletedWith`` target is, must be; otherwise one with a property dependency on the replace set is
        asked: its provider's Diff with those inputs unknown (``kubernetes_replaces``)."""
        replace_set = {root.urn}
        decided: dict[str, str] = {}
        for urn, rec in self.state.items():  # the state is in dependency order
            if urn == root.urn or not (rec.depends_on() & (replace_set | set(decided))):
                continue
            if not rec.custom:
                continue
            unknown = {k for k, urns in rec.property_deps.items() if set(urns) & replace_set}
            if rec.provider in replace_set or rec.deleted_with in replace_set:
                decided[urn] = "replace"
            elif unknown:
                calls.append(("Diff", urn))
                replaces = rec.type.startswith("kubernetes:") and kubernetes_replaces(
                    rec.type, rec.inputs, rec.inputs, unknown
                )
                decided[urn] = "replace" if replaces else "keep"
            else:
                continue
            if decided[urn] == "replace":
                if rec.protect:
                    raise RuntimeError(f"unable to replace resource {urn!r} as part of replacing {root.urn!r}")
                replace_set.add(urn)
        return decided

    def _preview_outputs(
        self, action: str, old: Recorded | None, inputs: dict[str, Any], live: dict[str, Any] | None
    ) -> dict[str, Any]:
        if action == "same":
            assert old is not None
            return copy.deepcopy(old.outputs)  # SameStep in preview: the recorded outputs
        if action == "update" and live is not None and not _has_unknowns(inputs):
            # kp.go Update in preview: a dry-run apply that returns the live object (status included).
            return {**inputs, "status": live.get("status")}
        # kp.go Create in preview strips status (and inputs with unknowns return the inputs only).
        return {**inputs, "status": UNKNOWN}

    def _apply(self, inputs: dict[str, Any], live: dict[str, Any] | None, *, adopt: bool) -> dict[str, Any]:
        """POST a new object, or server-side apply the manifest onto the one that exists (create with
        upsert, or update): the applied fields change; status, UID and fields not applied stay."""
        manifest = copy.deepcopy(inputs)
        manifest.pop("status", None)
        if live is None:
            return self.cluster.put(with_state(manifest, "pending"))
        applied = manifest["metadata"].get("annotations", {})
        current = live["metadata"].get("annotations") or {}
        changed = sorted(k for k, v in applied.items() if k in current and current[k] != v)
        if adopt and changed and applied.get("pulumi.com/patchForce") != "true":
            # A create with upsert applies under a new field manager without force (await.go Creation,
            # patchForce); a field another manager set to a different value is a conflict (handleSSAErr).
            raise RuntimeError(f"server-side apply field conflict detected: {changed}")
        merged = copy.deepcopy(live)
        merged["metadata"]["annotations"] = {**current, **applied}
        return self.cluster.put(merged)

    def _run_step(self, obj: dict[str, Any], outcome: str) -> None:
        """After the provider returned (skipAwait), the run goes on in the cluster as ``outcome`` says:
        complete, complete-without-output, fail, run (the scenario's ``on_wait`` drives it), interrupt or
        kill (the program is stopped at its first pause), or a Kueue state (queued, never, deactivated)."""
        metadata = obj["metadata"]
        namespace, name = metadata["namespace"], metadata["name"]
        if _state_of(obj) in TERMINAL:
            return  # it had ended (an adopted object)
        if outcome in ("complete", "complete-without-output"):
            if outcome == "complete":
                self.write_outputs(obj)
            self.cluster.set_state("JobSet", namespace, name, "completed")
        elif outcome == "fail":
            self.cluster.set_state("JobSet", namespace, name, "failed", restarts=1)
        elif outcome in ("queued", "never", "deactivated"):
            self.cluster.kueue(namespace, name, outcome)
        elif outcome == "unschedulable":
            # Admitted and started, but its first pod finds no node and cpu-np cannot grow (the scheduler's
            # condition and events, the autoscaler's NotTriggerScaleUp).
            self.cluster.set_state("JobSet", namespace, name, "running")
            pod = step_pod(obj, obj["spec"]["replicatedJobs"][0]["name"], "unschedulable")
            self.cluster.core[("pods", namespace)] = [pod]
            self.cluster.core[("events", namespace)] = [
                pod_event(pod, "FailedScheduling"),
                pod_event(pod, "NotTriggerScaleUp"),
            ]
        elif outcome == "oomkilled":
            # The step's container is OOM-killed (exit 137): its Job fails by its pod failure policy.
            rjob = obj["spec"]["replicatedJobs"][0]
            container = rjob["template"]["spec"]["template"]["spec"]["containers"][0]["name"]
            self.cluster.core[("pods", namespace)] = [step_pod(obj, rjob["name"], "oomkilled", container=container)]
            self.cluster.set_state("JobSet", namespace, name, "failed")
        else:
            self.cluster.set_state("JobSet", namespace, name, "running")
            if outcome == "interrupt":
                self.stop = StoppedError(f"stopped while waiting for {name}")
            elif outcome == "kill":
                self.stop = KilledError(f"killed while waiting for {name}")
            else:
                assert outcome == "run", outcome

    def finish(self, name: str, state: str = "completed") -> None:
        """The cluster ends the running step ``name``: Kueue admits it first if it is queued; a completed step
        of the current configuration leaves its files."""
        obj = self.cluster.get("JobSet", "tpu-rl", name)
        assert obj is not None, name
        if obj["spec"].get("suspend"):
            self.cluster.kueue("tpu-rl", name, "admitted")
        if state == "completed" and any(step.name == name for step in self._steps.steps):
            self.write_outputs(obj)
        self.cluster.set_state("JobSet", "tpu-rl", name, state, restarts=1 if state == "failed" else 0)

    # -- deletes ---------------------------------------------------------------------------------

    def destroy(self, *, skip_preview: bool = False) -> Destroyed:
        """``pulumi destroy`` (the program does not run: ``pkg/engine/destroy.go`` ``Destroy`` uses a null
        source, so every resource of the state is condemned). By default a preview runs first and any error in
        it stops the destroy before anything is deleted (``pkg/backend/apply.go``
        ``PreviewThenPromptThenExecute``: "if err != nil ... return changes, err"); ``skip_preview`` runs the
        deletes straight away (``if !op.Opts.SkipPreview``)."""
        calls: list[tuple[str, str]] = []
        condemned = list(self.state)
        if not skip_preview:
            preview = self._delete(condemned, dry_run=True, calls=calls)
            if preview.errors:
                return Destroyed(preview.errors, preview.outcomes, calls)
        done = self._delete(condemned, dry_run=False, calls=calls)
        self.cloud.observe(self._live_objects())
        return Destroyed(done.errors, done.outcomes, calls)

    def schedule(self, urns: Iterable[str]) -> list[list[str]]:
        """``sg.go`` ``ScheduleDeletes``: the condemned resources in antichains, each after every resource that
        depends on it (the resources with no condemned dependencies are removed round by round, then the
        rounds are reversed)."""
        condemned = [u for u in self.state if u in set(urns)]
        rounds: list[list[str]] = []
        left = set(condemned)
        while left:
            layer = [u for u in condemned if u in left and not (self.state[u].depends_on() & left)]
            assert layer, f"a dependency cycle among {sorted(left)}"
            rounds.append(layer)
            left -= set(layer)
        return rounds[::-1]

    def dependencies_of(self, urn: str) -> set[str]:
        """``dependency_graph.go`` ``TransitiveDependenciesOf``."""
        found: set[str] = set()
        todo = [urn]
        while todo:
            for dep in self.state[todo.pop()].depends_on():
                if dep in self.state and dep not in found:
                    found.add(dep)
                    todo.append(dep)
        return found

    def _delete(self, urns: list[str], *, dry_run: bool, calls: list[tuple[str, str]]) -> Destroyed:
        """The deletes of ``urns``: ``deployment_executor.go`` ``performPostSteps`` runs the antichains one after
        another, leaving out of each the transitive dependencies of every step that failed before it
        (``erroredDeps``); a protect error does not cancel the deployment (``step_executor.go``
        ``cancelDueToError``: "We special case deleteProtectedError to always continue past them") but is such a
        failure. Any other failed delete (the provider's Delete) does: without ``--continue-on-error``
        ``cancelDueToError`` calls ``se.cancel()``; the steps of its antichain, submitted together
        (``ExecuteParallel``) and running on up to ``--parallel`` workers (``defaultParallel``: four per CPU), finish,
        and no step of a later antichain runs (``ExecuteSerial`` and ``worker`` select the cancelled context, and
        ``executeChain`` checks it before each step): they stay in the state (``cancelled``). Each delete is
        ``step.go`` ``DeleteStep.Apply``, in its order: protect (before the dry-run
        branch, so a preview refuses too), then in a real run ``retainOnDelete``, ``deletedWith`` a resource
        whose delete is *planned* (``isDeletedWith`` looks at ``otherDeletions``, filled before anything runs:
        it is dropped without its provider being called, whatever then happens to that resource), then the
        provider's Delete."""
        planned = set(urns)
        errors: list[str] = []
        outcomes: dict[str, str] = {}
        errored: set[str] = set()
        cancelled = False
        for chain in self.schedule(urns):
            if cancelled:
                outcomes.update(dict.fromkeys(chain, "cancelled"))
                continue
            for urn in chain:
                if urn in errored:
                    outcomes[urn] = "skipped"
                    continue
                rec = self.state[urn]
                if rec.protect:
                    errors.append(f"resource {urn!r} cannot be deleted\nbecause it is protected")
                    outcomes[urn] = "refused"
                elif dry_run:
                    outcomes[urn] = "previewed"
                    continue
                elif rec.retain_on_delete:
                    outcomes[urn] = "kept"
                elif rec.deleted_with in planned:
                    outcomes[urn] = "dropped"
                elif rec.custom:
                    try:
                        self._provider_delete(rec, calls)
                        outcomes[urn] = "deleted"
                    except RuntimeError as err:
                        errors.append(str(err))
                        outcomes[urn] = "failed"
                else:
                    outcomes[urn] = "deleted"  # a component: no provider, nothing to delete
                if outcomes[urn] in ("refused", "failed"):
                    errored |= self.dependencies_of(urn)
                    cancelled = cancelled or outcomes[urn] == "failed"
                elif not dry_run:
                    del self.state[urn]
        return Destroyed(errors, outcomes, calls)

    def _provider_delete(self, rec: Recorded, calls: list[tuple[str, str]]) -> None:
        """The provider's Delete of ``rec``, as far as the model's cloud and cluster show it."""
        calls.append(("Delete", rec.urn))
        inputs = rec.inputs
        if rec.type in STEP_TYPES:
            # kp.go Delete -> await.go Deletion: a foreground delete that waits until the object is gone: its Jobs,
            # their Pods and the Pods' claims go first (their owner references block it).
            self.cluster.delete(inputs["kind"], inputs["metadata"]["namespace"], inputs["metadata"]["name"])
        elif rec.type == HELM_RELEASE:
            self.helm.pop((str(inputs.get("namespace")), str(inputs.get("name"))), None)  # helm uninstall
        elif rec.type == CLUSTER:
            if inputs.get("deletionProtection"):
                # google-beta resource_container_cluster.go resourceContainerClusterDelete.
                raise RuntimeError(
                    "Cannot destroy cluster because deletion_protection is set to true. Set it to false to proceed "
                    "with cluster deletion."
                )
            # GKE deletes the nodes, their pods and emptyDir and hostPath data, and only *attempts* to delete the
            # load balancers and Persistent Disks the cluster made ("Deletion of these resources is not always
            # guaranteed": gcloud container clusters delete): the model counts them as left.
            for what, why in self.cloud.derived(self._live_objects()).items():
                self.cloud.left[what] = f"{why}; left by the cluster's deletion, which does not guarantee it"
            self.cluster.objects.clear()
            self.helm.clear()
        elif rec.type == BUCKET:
            name = inputs["name"]
            bucket = self.gcs.lookup_bucket(name)
            if bucket is not None and not inputs.get("forceDestroy") and any(True for _ in bucket.list_blobs()):
                # google-beta resource_storage_bucket.go resourceStorageBucketDelete.
                raise RuntimeError(
                    f"Error trying to delete bucket {name} containing objects without `force_destroy` set to true"
                )
        elif rec.type == "gcp:kms/cryptoKey:CryptoKey" and inputs.get("deletionPolicy") == "ABANDON":
            # google-beta resource_kms_crypto_key.go resourceKMSCryptoKeyDelete: "removing CryptoKey %q from
            # Terraform state without deletion".
            self.cloud.left[rec.urn] = "Cloud KMS key versions (the key is abandoned, not destroyed)"
        # A CryptoKey with DELETE (the stack's: infra.gcp.kms.KEY_DELETION_POLICY) leaves nothing that bills: the same
        # function schedules every version for destruction (clearCryptoKeyVersions) and turns rotation off
        # (disableCryptoKeyRotation), so no new version is made; the key and its name stay in Cloud KMS (the next
        # `up` imports them, infra.gcp.capacity.surviving_key_findings).
        self.cloud.resources.pop(rec.urn, None)

    def _live_objects(self) -> list[dict[str, Any]]:
        with self.cluster.lock:
            return [copy.deepcopy(o) for o in self.cluster.objects.values()]

    # -- what the steps write ------------------------------------------------------------------

    def loaded(self, overrides: Sequence[str] = ()) -> Settings:
        """The settings of the stack's file with its overrides and ``overrides``, as the program loads them."""
        return settings(self.name, [*self.overrides, *overrides], stack_file=self.stack_file)

    def steps(self, overrides: Sequence[str] = ()) -> Workflow:
        """The three steps of the stack's configuration (the pure builders the program uses)."""
        return plan_workflow(self.loaded(overrides))

    def write_outputs(self, obj: dict[str, Any]) -> None:
        """The files a step that succeeds leaves in its output path."""
        name = obj["metadata"]["name"]
        step = next(s for s in self._steps.steps if s.name == name)
        if step.step == "convert":
            put_conversion(self.gcs, step.output_uri, commit=self.base_commit)
        elif step.step == "train":
            final = self._final_step
            put(self.gcs, step.artifact_uri, f"{final}/commit_success.txt", f"{final}/model_params/_METADATA")
            if self.dataset_commit is not None:  # as stage_dataset.py writes it
                record = {"repo": "nvidia/OpenMathInstruct-2", "revision": "main", "commit": self.dataset_commit}
                put(
                    self.gcs, step.output_uri, "dataset/dataset.json", data=json.dumps({**record, "files": {}}).encode()
                )
        elif step.step == "publish":
            if self.publisher is not None:
                self.publisher(step)
        elif step.output == "record":
            bucket, _, name = step.artifact_uri.removeprefix("gs://").partition("/")
            self.gcs.bucket(bucket).blob(name).upload_from_string(self.record)
        else:
            bucket, _, prefix = step.artifact_uri.removeprefix("gs://").partition("/")
            for file, data in self.export_files.items():
                self.gcs.bucket(bucket).blob(prefix + file).upload_from_string(data)
        self.written.append(f"{step.step}:{step.output_uri}")

    # -- refresh -------------------------------------------------------------------------------

    def refresh(self, *, reachable: bool, env: dict[str, str] | None = None) -> str | None:
        """``pulumi refresh`` (the program does not run: ``pkg/engine/refresh.go`` ``Refresh`` uses an error
        source; every resource is read). Returns its error (None when it succeeded). The Kubernetes provider is
        configured from the state (its last inputs) and the environment ``env`` (kp.go Configure:
        deleteUnreachable from the inputs when they have it, else PULUMI_K8S_DELETE_UNREACHABLE); the other
        resources read as recorded."""
        setting = self.provider_inputs.get(
            "deleteUnreachable", (env or {}).get("PULUMI_K8S_DELETE_UNREACHABLE", "false")
        )
        delete_unreachable = str(setting).lower() == "true"
        for urn, recorded in list(self.state.items()):
            if not recorded.provider or self.state.get(recorded.provider, Recorded({}, {}, None)).type != K8S_PROVIDER:
                continue
            if not reachable:
                if delete_unreachable:
                    del self.state[urn]  # kp.go Read: "Deleting the unreachable resource from Pulumi state"
                    continue
                # kp.go Read: "failed to read resource state due to unreachable cluster": the refresh fails.
                return f"failed to read resource state due to unreachable cluster ({recorded.name})"
            if recorded.type not in STEP_TYPES:
                continue  # the model's cluster serves the steps' objects only
            metadata = recorded.inputs["metadata"]
            live = self.cluster.get(recorded.inputs["kind"], metadata["namespace"], metadata["name"])
            if live is None:
                del self.state[urn]  # step.go RefreshStep: a blank ID is a delete
            else:
                recorded.outputs = live
        return None


def _state_of(obj: dict[str, Any]) -> str:
    status = obj.get("status") or {}
    return {"Completed": "completed", "Failed": "failed"}.get(status.get("terminalState", ""), "running")


def _has_unknowns(value: Any) -> bool:
    if is_unknown(value):
        return True
    if isinstance(value, dict):
        return any(_has_unknowns(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_unknowns(v) for v in value)
    return False
