"""What the Pulumi engine and pulumi-kubernetes decide for the program's step objects, as a model the
scenario tests drive the real program through (``tests/test_scenarios.py``).

The real program runs under the mock runtime with ``live=True``: it reads the loopback cluster
(``tests.fake_kube``) through the real Kubernetes client, its kubeconfig's real exec plugin (a script
on PATH) and real TLS, and checks artifacts in fake-gcs-server. For each step object it registers,
this model makes the decision the engine and the provider make, each cited by the function it comes
from, then plays it on the cluster: create, adopt, replace (delete first), update, record. The steps
carry ``pulumi.com/skipAwait: "true"``, so the provider returns once a step is applied
(``await.go`` ``Creation``/``Update`` -> ``metadata.ReadyCondition``: Immediate); the run then goes on
in the cluster (and in Kueue) as each scenario says, while the program waits for it
(``workloads.run.waiting``) on a fake clock this model advances: a scenario can act on every poll.

Sources (read at these revisions; see README "Run lifecycle" for the same citations):
- pulumi/pulumi v3.259.0 (0ac56e8): ``pkg/resource/deploy/step_generator.go`` (``sg.go``),
  ``pkg/resource/deploy/step.go``, ``pkg/backend/journal.go``, ``pkg/resource/deploy/deployment_executor.go``;
- pulumi/pulumi-kubernetes v4.32.0 (a03ff6b): ``provider/pkg/provider/provider.go`` (``kp.go``),
  ``provider/pkg/await/await.go``, ``provider/pkg/provider/diff.go``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pulumi.output import Unknown

from tests.conftest import JOBSET, SENTINEL_TOKEN, put
from tests.fake_kube import FakeCluster, pod_event, step_pod, with_state
from tests.hf_files import LANGUAGE, model_files
from tests.lifecycle_walk import settings
from tools.plan import plan_stack
from tools.plan.offline import UNKNOWN, Plan, Registration, plain
from tools.stack_files import ROOT, parse_property_path
from workloads.build.steps import Step, Workflow, plan_workflow
from workloads.run import waiting

STEP_TYPES = (JOBSET,)
TERMINAL = ("completed", "failed")
"""A JobSet's terminal states (``status.terminalState``); the provider plans no field of a custom resource
as a replacement (``diff.go`` ``forceNewProperties`` knows built-in kinds only)."""


class StoppedError(Exception):
    """The `up` stopped while the program waited for a step (Ctrl-C, a dropped connection)."""


class KilledError(Exception):
    """The runner was killed (SIGKILL, a lost CI machine)."""


@dataclass
class Recorded:
    """What the state holds for a resource (``resource.State``: inputs, outputs, trigger)."""

    inputs: dict[str, Any]
    outputs: dict[str, Any]
    trigger: Any


@dataclass
class Run:
    plan: Plan
    actions: dict[str, str]
    """Step name -> create | adopt | replace | update | same (what the engine planned and did)."""

    @property
    def error(self) -> BaseException | None:
        return self.plan.error


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


def process_ignore_changes(inputs: dict[str, Any], old: dict[str, Any], paths: list[str]) -> dict[str, Any]:
    """``sg.go`` ``processIgnoreChanges``: every ignored path takes the old input's value (absent stays absent)."""
    result = copy.deepcopy(inputs)
    for path in paths:
        elements = parse_property_path(path)
        present, value = _get(old, elements)
        if _get(result, elements[:-1])[0] or present:
            _set(result, elements, present, value)
    return result


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
    export_files: dict[str, bytes] = field(default_factory=lambda: model_files(LANGUAGE, 2))
    """What a completed export writes (file -> bytes): a whole model folder, as the export check reads it."""
    secrets: dict[str, str] = field(default_factory=lambda: {"tpu-rl:hfToken": SENTINEL_TOKEN})
    """The stack's secrets as `pulumi up` decrypts them."""
    publisher: Callable[[Step], None] | None = None
    """What a completed publish step does (a scenario runs the step's real container command); None: nothing."""
    state: dict[str, Recorded] = field(default_factory=dict)
    pending_creates: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Creates a killed `up` left (``journal.go``: carried into every later snapshot until a refresh clears them)."""
    provider_inputs: dict[str, Any] = field(default_factory=dict)
    """The Kubernetes provider's inputs the last run registered (what a refresh configures it with)."""
    written: list[str] = field(default_factory=list)
    clock: float = 0.0
    """The program's clock while it waits (seconds; ``workloads.run.waiting.now``)."""
    on_wait: Callable[[Stack], None] | None = None
    """What happens in the cluster each time the program pauses between polls (a scenario sets it)."""
    stop: BaseException | None = None
    """Raised at the program's next pause (the runner is stopped or killed while the program waits)."""

    # -- running the program -------------------------------------------------------------------

    def up(self, outcomes: dict[str, str] | None = None, overrides: list[str] = ()) -> Run:
        """``pulumi up``; ``outcomes`` says how each awaited step ends (default: complete)."""
        return self._run(False, outcomes or {}, list(overrides))

    def preview(self, overrides: list[str] = ()) -> Run:
        return self._run(True, {}, list(overrides))

    def _run(self, preview: bool, outcomes: dict[str, str], overrides: list[str]) -> Run:
        self._steps = self.steps(overrides)
        self._final_step = settings(
            self.stack_file.name.split(".")[1], [*self.overrides, *overrides]
        ).training.final_step
        actions: dict[str, str] = {}
        registered: set[str] = set()
        killed: list[bool] = []

        def answer(registration: Registration) -> dict[str, Any] | None:
            if killed:
                raise KilledError("the runner is gone")
            if registration.type == "gcp:container/cluster:Cluster":
                return {
                    **registration.inputs,
                    "endpoint": self.cluster.endpoint,
                    "masterAuth": {"clusterCaCertificate": self.cluster.ca_data},
                }
            if registration.type == "gcp:storage/bucket:Bucket":
                bucket = registration.inputs["name"]
                if not self.gcs.lookup_bucket(bucket):  # the bucket the program creates
                    self.gcs.create_bucket(bucket)
                return None
            if registration.type == "pulumi:providers:kubernetes":
                self.provider_inputs = plain(registration.inputs, False)
                return None
            if registration.type not in STEP_TYPES:
                return None
            registered.add(registration.name)
            try:
                return self._step(registration, preview, outcomes, actions)
            except KilledError:
                killed.append(True)
                raise

        original = (waiting.sleep, waiting.now)
        waiting.sleep, waiting.now = self._pause, lambda: self.clock
        try:
            plan, _ = plan_stack(
                self.stack_file,
                [*self.overrides, *overrides],
                stack=self.stack_file.name.split(".")[1],
                live=True,
                preview=preview,
                secrets=self.secrets,
                outputs_for=answer,
                raise_errors=False,
            )
        finally:
            waiting.sleep, waiting.now = original
            self.stop = None
        if not preview and plan.error is None and not killed:
            # The program finished without an error: resources it no longer registers are deleted,
            # after every create (deployment_executor.go: deletes follow the source's end; sg.go
            # GenerateDeletes). The provider deletes by name (kp.go Delete, await.go Deletion).
            for name in sorted(set(self.state) - registered):
                recorded = self.state.pop(name)
                metadata = recorded.inputs["metadata"]
                self.cluster.delete(recorded.inputs["kind"], metadata["namespace"], metadata["name"])
                actions[name] = "delete"
        return Run(plan, actions)

    def _pause(self, seconds: float) -> None:
        """The program's pause between polls: time passes, then the cluster (the scenario) acts."""
        self.clock += seconds
        if self.stop is not None:
            stop, self.stop = self.stop, None
            raise stop
        if self.on_wait is not None:
            self.on_wait(self)

    # -- one step object -----------------------------------------------------------------------

    def _step(
        self, registration: Registration, preview: bool, outcomes: dict[str, str], actions: dict[str, str]
    ) -> dict[str, Any]:
        name = registration.name
        inputs = plain(registration.inputs, False)
        ignore = list(registration.request.ignoreChanges)
        trigger = registration.trigger
        old = self.state.get(name)
        if old is None:
            # No old state (a pending create is not a resource: journal.go): sg.go generateResourceSteps -> CreateStep.
            action = "create"
        elif should_trigger_replace(trigger, old.trigger):
            # sg.go generateStepsFromDiff: the trigger is compared before the provider's diff, and a
            # replacement re-runs Check on the program's current inputs (continueStepsFromDiff): nothing
            # ignored is carried over.
            action = "replace"
        else:
            inputs = process_ignore_changes(inputs, old.inputs, ignore)
            # sg.go generateStepsFromDiff: a diff is an update, none is a SameStep (the provider is not called).
            action = "update" if inputs != old.inputs else "same"
        kind, namespace = inputs["kind"], inputs["metadata"]["namespace"]
        live = self.cluster.get(kind, namespace, name)
        if action == "create" and live is not None and not preview:
            action = "adopt"  # kp.go Create with upsertExistingObjects: a server-side apply onto the object
        actions[name] = action
        if preview:
            return self._preview_outputs(action, old, inputs, live)
        if action == "same":
            return copy.deepcopy(old.outputs)  # step.go SameStep: the recorded outputs, no provider call
        if action == "replace":
            # delete_before_replace: DeleteReplacement, then CreateReplacement, run serially (sg.go); the
            # delete waits until the object is gone (await.go Deletion, foreground).
            self.cluster.delete(kind, namespace, name)
            self.state.pop(name)  # the old resource leaves the snapshot once DeleteReplacement is done
            live = None
        obj = self._apply(inputs, live, adopt=action == "adopt")
        outcome = outcomes.get(inputs["metadata"]["labels"]["app.kubernetes.io/component"], "complete")
        if outcome == "kill-during-create" and action in ("create", "adopt", "replace"):
            # The runner dies before the provider's Create returned: snapshot.go markOperationPending recorded
            # a pending create, and no resource (journal.go).
            self.cluster.set_state(kind, namespace, name, "running")
            self.pending_creates[name] = inputs
            raise KilledError(f"killed while creating {name}")
        self.state[name] = Recorded(inputs, obj, trigger)
        self._run_step(obj, outcome)
        return obj

    def _preview_outputs(
        self, action: str, old: Recorded | None, inputs: dict[str, Any], live: dict[str, Any] | None
    ) -> dict[str, Any]:
        if action == "same":
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

    # -- what the steps write ------------------------------------------------------------------

    def steps(self, overrides: list[str] = ()) -> Workflow:
        """The three steps of the stack's configuration (the pure builders the program uses)."""
        stack = self.stack_file.name.split(".")[1]
        return plan_workflow(settings(stack, [*self.overrides, *overrides]))

    def write_outputs(self, obj: dict[str, Any]) -> None:
        """The files a step that succeeds leaves in its output path."""
        name = obj["metadata"]["name"]
        step = next(s for s in self._steps.steps if s.name == name)
        if step.step == "convert":
            put(self.gcs, step.artifact_uri, "_METADATA", "params/0.0")
        elif step.step == "train":
            final = self._final_step
            put(self.gcs, step.artifact_uri, f"{final}/commit_success.txt", f"{final}/model_params/_METADATA")
        elif step.step == "publish":
            if self.publisher is not None:
                self.publisher(step)
        else:
            bucket, _, prefix = step.artifact_uri.removeprefix("gs://").partition("/")
            for file, data in self.export_files.items():
                self.gcs.bucket(bucket).blob(prefix + file).upload_from_string(data)
        self.written.append(f"{step.step}:{step.output_uri}")

    # -- refresh -------------------------------------------------------------------------------

    def refresh(self, *, reachable: bool, env: dict[str, str] | None = None) -> str | None:
        """``pulumi refresh``; returns its error (None when it succeeded). The provider is configured from
        the state (its last inputs) and the environment ``env`` (kp.go Configure: deleteUnreachable from
        the inputs when they have it, else PULUMI_K8S_DELETE_UNREACHABLE)."""
        setting = self.provider_inputs.get(
            "deleteUnreachable", (env or {}).get("PULUMI_K8S_DELETE_UNREACHABLE", "false")
        )
        delete_unreachable = str(setting).lower() == "true"
        for name, recorded in sorted(self.state.items()):
            if not reachable:
                if delete_unreachable:
                    del self.state[name]  # kp.go Read: "Deleting the unreachable resource from Pulumi state"
                    continue
                # kp.go Read: "failed to read resource state due to unreachable cluster": the refresh fails.
                return f"failed to read resource state due to unreachable cluster ({name})"
            metadata = recorded.inputs["metadata"]
            live = self.cluster.get(recorded.inputs["kind"], metadata["namespace"], metadata["name"])
            if live is None:
                del self.state[name]  # step.go RefreshStep: a blank ID is a delete
            else:
                recorded.outputs = live
        return None

    def clear_pending_creates(self) -> None:
        """``pulumi refresh --clear-pending-creates`` (refresh.go, removePendingCreates)."""
        self.pending_creates.clear()


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
