"""The real sequences a stack goes through, each run end to end: the real program (under the mock
runtime, ``live=True``), its real kubeconfig, exec plugin, TLS and Kubernetes client against a loopback
API server, its artifact checks against fake-gcs-server, and ``tests.engine``'s model of what the Pulumi
engine and pulumi-kubernetes decide for each step object. Each test names the engine or provider
function whose decision it relies on (``sg.go`` is pulumi ``pkg/resource/deploy/step_generator.go``,
``kp.go`` pulumi-kubernetes ``provider/pkg/provider/provider.go``; revisions in ``tests/engine.py``)."""

from __future__ import annotations

import pytest

from core.names import ADOPTED, RETRY_ANNOTATION
from tests.lifecycle_walk import settings
from tests.scenario import STEPS, live, names, trigger

# The whole module is the slow tier (`make test-slow`, in CI; docs/testing.md "Timings"): each test runs the
# program or a step for real against loopback servers, seconds apiece. The fast tier keeps the same boundaries
# in pure form (the builders' and readers' own tests).
pytestmark = pytest.mark.slow


def test_first_up_of_a_new_stack_creates_each_step_once_and_the_next_up_changes_nothing(stack):
    """sg.go generateResourceSteps: no old state -> a create; with the state recorded and the same inputs
    and trigger, the provider's Check and Diff find nothing to change and a SameStep keeps the outputs
    (step.go SameStep.Apply calls no provider): nothing runs twice."""
    first = stack.up()
    assert first.error is None, first.error
    step_names = names(stack)
    assert first.actions == {step_names[s]: "create" for s in STEPS}
    assert all(trigger(first.plan, step_names[s]) == "" for s in STEPS)
    assert [w.split(":")[0] for w in stack.written] == list(STEPS)
    again = stack.up()
    assert again.error is None and again.actions == {step_names[s]: "same" for s in STEPS}
    assert len(stack.written) == 3, "no step ran again"
    steps = {u for u, r in stack.state.items() if r.name in step_names.values()}
    assert sorted(c for c in again.calls if c[1] in steps) == sorted((c, u) for u in steps for c in ("Check", "Diff"))


def test_a_step_fails_then_up_retries_it_with_the_configured_values(stack):
    """sg.go shouldTriggerReplace: the failed run's UID is a new trigger value -> replace (delete first:
    delete_before_replace); continueStepsFromDiff re-runs Check on the program's current inputs, so the
    retry gets the deadline configured since the failure (ignoreChanges does not carry it over)."""
    failed = stack.up({"train": "fail"})
    train = names(stack)["train"]
    message = str(failed.error)
    assert message.startswith(
        f"JobSet tpu-rl/{train} failed (FailedJobs): jobset failed due to one or more job failures (first failed "
        f"job: {train}-pathways-head-0)."
    )
    assert message.endswith(
        f"Run `make up STACK={stack.name}` again to retry it (training resumes from its last checkpoint)"
    )
    assert names(stack)["export"] not in failed.actions, "nothing downstream of a failed step is created"
    old_uid = live(stack, "train")["metadata"]["uid"]

    retry = stack.up(overrides=["tpu-rl:workflow.timeouts.train=30h"])
    assert retry.error is None, retry.error
    assert retry.actions[train] == "replace" and trigger(retry.plan, train) == old_uid
    now = live(stack, "train")
    assert now["metadata"]["uid"] != old_uid and now["metadata"]["annotations"][RETRY_ANNOTATION] == old_uid
    assert now["spec"]["replicatedJobs"][0]["template"]["spec"]["activeDeadlineSeconds"] == 30 * 3600
    assert any("ended Failed (FailedJobs); retrying it" in m for _, m in retry.plan.logs)

    stable = stack.up(overrides=["tpu-rl:workflow.timeouts.train=30h"])
    assert stable.error is None and set(stable.actions.values()) == {"same"}, "a completed retry stays put"


def test_ctrl_c_while_up_waits_for_a_step_then_up_waits_for_the_same_run(stack):
    """The provider returned once the step was applied (skipAwait: await.go Creation -> metadata.ReadyCondition
    is Immediate), so the state has it; the program was waiting (workloads.observe.waiting) when it was stopped. The
    next `up` sees the same inputs and trigger: the engine calls the provider's Check and Diff (sg.go
    continueStepsFromImport, generateStepsFromDiff), the Diff finds nothing and a SameStep keeps the recorded
    object (step.go SameStep.Apply, the only part that calls no provider); the program waits for the same run
    until it ends: nothing is deleted or started twice."""
    interrupted = stack.up({"train": "interrupt"})
    assert "stopped while waiting for" in str(interrupted.error)
    train = names(stack)["train"]
    uid = live(stack, "train")["metadata"]["uid"]
    assert stack.step_state(train) is not None and names(stack)["export"] not in interrupted.actions
    stack.on_wait = lambda s: s.finish(train)
    again = stack.up()
    assert again.error is None, again.error
    assert again.actions[train] == "same" and live(stack, "train")["metadata"]["uid"] == uid
    urn = stack.step_state(train).urn
    assert [c for c, u in again.calls if u == urn] == ["Check", "Diff"], "a SameStep is Checked and Diffed"
    assert again.actions[names(stack)["export"]] == "create"


def test_change_an_operational_knob_while_training_runs_keeps_the_run(stack):
    """The deadline and maxRestarts are ignoreChanges: processIgnoreChanges (sg.go) puts the recorded
    values back, so the running step is neither renamed nor replaced nor updated; `up` waits for it."""
    stack.up({"train": "interrupt"})
    uid = live(stack, "train")["metadata"]["uid"]
    changed = ["tpu-rl:workflow.timeouts.train=30h", "tpu-rl:workflow.maxRestarts=3"]
    assert names(stack, changed) == names(stack)
    stack.on_wait = lambda s: s.finish(names(s)["train"])
    again = stack.up(overrides=changed)
    assert again.error is None and again.actions[names(stack)["train"]] == "same"
    assert live(stack, "train")["metadata"]["uid"] == uid


def test_change_a_training_knob_while_training_runs_queues_the_new_run_behind_the_old_one(stack):
    """A training knob renames the step (a new object). Kueue holds it (the slice's chips are the quota, the
    old run has them: "insufficient unused quota"), `up` waits, and once the old run ends Kueue admits the
    new one; the old object is deleted after the program finished (sg.go GenerateDeletes)."""
    stack.up({"train": "interrupt"})
    old = names(stack)["train"]
    changed = ["tpu-rl:training.learningRate=3e-05"]
    new = names(stack, changed)["train"]
    assert new != old
    polls = []

    def old_run_ends(s):
        polls.append(s.clock)
        if len(polls) == 2:  # the new run waited behind the old one for one poll
            assert s.cluster.get("JobSet", "tpu-rl", new)["spec"]["suspend"] is True
            s.finish(old)
            s.finish(new)

    stack.on_wait = old_run_ends
    after = stack.up({"train": "queued"}, overrides=changed)
    assert after.error is None, after.error
    assert after.actions[new] == "create" and after.actions[old] == "delete"
    assert stack.cluster.get("JobSet", "tpu-rl", old) is None
    assert any(
        "queued: couldn't assign flavors to pod set worker: insufficient unused quota" in m for _, m in after.plan.logs
    )


def test_a_queued_step_stops_up_after_the_admission_timeout_and_the_next_up_follows_it(stack):
    """Queued past tpu-rl:kueue.admissionTimeout: `up` stops with Kueue's reason and leaves the JobSet queued
    (it starts once admitted); the next `up` finds it unchanged (SameStep) and waits for it again."""
    stack.up({"train": "interrupt"})
    old = names(stack)["train"]
    changed = ["tpu-rl:training.learningRate=3e-05", "tpu-rl:kueue.admissionTimeout=2m"]
    new = names(stack, changed)["train"]
    waited = stack.up({"train": "queued"}, overrides=changed)
    assert str(waited.error).startswith(
        f"JobSet tpu-rl/{new} is still queued after 2m: Kueue: couldn't assign flavors to pod set worker: "
        "insufficient unused quota for google.com/tpu in flavor tpu-rl-tpu-slice, 32 more needed. It stays queued"
    )
    assert 2 * 60 <= stack.clock < 2 * 60 + 2 * 20, "it gave up at the bound, one poll after"
    assert stack.cluster.get("JobSet", "tpu-rl", new)["spec"]["suspend"] is True, "still queued"
    stack.finish(old)
    stack.on_wait = lambda s: s.finish(new)
    again = stack.up(overrides=changed)
    assert again.error is None, again.error
    assert again.actions[new] == "same"


def test_without_kueue_a_training_knob_change_stops_until_the_old_run_ends(stack):
    """No queue (tpu-rl:kueue.enabled false): the slice is held by the old run, so `up` stops before creating
    the new one and says how to wait or stop; a preview only warns."""
    off = ["tpu-rl:kueue.enabled=false"]
    stack.up({"train": "interrupt"}, overrides=off)
    old = names(stack, off)["train"]
    changed = [*off, "tpu-rl:training.learningRate=3e-05"]
    new = names(stack, changed)["train"]
    blocked = stack.up(overrides=changed)
    assert f"training run {old} (an earlier configuration) is still running on the TPU slice" in str(blocked.error)
    context = settings(stack.name, off).kube_context  # the stack's cluster, not the shell's current one
    assert f"kubectl --context {context} delete jobset -n tpu-rl {old}" in str(blocked.error)
    assert new not in blocked.actions
    preview = stack.preview(overrides=changed)
    assert preview.error is None and any(old in w for w in preview.plan.warnings())
    stack.cluster.set_state("JobSet", "tpu-rl", old, "completed")
    after = stack.up(overrides=changed)
    assert after.error is None, after.error
    assert after.actions[new] == "create" and after.actions[old] == "delete"


def test_kueue_stops_a_step_whose_pods_are_never_ready_and_the_next_up_retries_it(stack):
    """Kueue's waitForPodsReady with backoffLimitCount 0 deactivates the Workload (Evicted
    DeactivatedDueToRequeuingLimitExceeded: workload_controller.go triggerDeactivation) and leaves the JobSet
    suspended, never terminal: `up` stops at once with Kueue's words; the next `up` counts the step as failed
    (its UID is the trigger: sg.go shouldTriggerReplace) and runs it again."""
    stopped = stack.up({"train": "deactivated"})
    train = names(stack)["train"]
    assert str(stopped.error).startswith(
        f"Kueue stopped JobSet tpu-rl/{train} (DeactivatedDueToRequeuingLimitExceeded: The workload is deactivated "
        "due to exceeding the maximum number of re-queuing retries)"
    )
    assert "raise tpu-rl:kueue.podsReadyTimeout" in str(stopped.error) and stack.clock == 0, "no waiting"
    uid = live(stack, "train")["metadata"]["uid"]
    retried = stack.up()
    assert retried.error is None, retried.error
    assert retried.actions[train] == "replace" and trigger(retried.plan, train) == uid
    assert any(
        "was stopped by Kueue (DeactivatedDueToRequeuingLimitExceeded); retrying it" in m for _, m in retried.plan.logs
    )


def test_a_step_its_queue_can_never_admit_fails_up_at_once(stack):
    """A LocalQueue managed elsewhere whose ClusterQueue is smaller than one slice: Kueue says "> maximum
    capacity" (flavorassigner.go), which no wait can change: `up` stops on the first poll."""
    elsewhere = ["tpu-rl:kueue.enabled=false", "tpu-rl:kueue.queue=team-queue"]
    failed = stack.up({"train": "never"}, overrides=elsewhere)
    train = names(stack, elsewhere)["train"]
    assert live(stack, "train", elsewhere)["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-queue"
    assert str(failed.error).startswith(
        f"Kueue can never admit JobSet tpu-rl/{train} as its queue is configured: couldn't assign flavors to pod "
        "set worker: insufficient quota for google.com/tpu in flavor tpu-rl-tpu-slice"
    )
    assert "> maximum capacity (32)" in str(failed.error) and stack.clock == 0


def test_a_conversion_pod_that_cannot_be_scheduled_fails_up_after_the_bound_with_the_reasons(stack):
    """cpu-np cannot grow (the autoscaler's NotTriggerScaleUp: max size reached): the conversion's pod stays
    Pending (PodScheduled False Unschedulable) and `up` stops after tpu-rl:workflow.unschedulableTimeout with
    the scheduler's and autoscaler's words read from the pod and its events, instead of waiting out the 4 h
    deadline while the slice bills. Nothing after it starts."""
    failed = stack.up({"convert": "unschedulable"})
    convert = names(stack)["convert"]
    message = str(failed.error)
    assert message.startswith(f"JobSet tpu-rl/{convert} could not be scheduled for 15m: pod {convert}-convert-0-0-")
    assert "(pool cpu-np): scheduler: 0/6 nodes are available: 2 Insufficient memory" in message
    assert "autoscaler NotTriggerScaleUp: pod didn't trigger scale-up: 1 max node group size reached" in message
    assert (
        "raise tpu-rl:cpuPool.maxNodes" in message and "Kueue stops it after tpu-rl:kueue.podsReadyTimeout" in message
    )
    assert 15 * 60 <= stack.clock < 16 * 60, "the bound, not the deadline"
    assert names(stack)["train"] not in failed.actions


def test_an_oom_killed_conversion_fails_up_at_once_naming_the_limit_and_the_key(stack):
    """The kernel kills the conversion (OOMKilled, exit 137): the Job's pod failure policy fails it (any
    non-zero exit: FailJob), the JobSet fails (maxRestarts 0), and `up` names the container, its limit and
    the key that raises it; no retry re-downloads the model first."""
    failed = stack.up({"convert": "oomkilled"})
    convert = names(stack)["convert"]
    message = str(failed.error)
    assert message.startswith(f"JobSet tpu-rl/{convert} failed (FailedJobs)")
    assert f"; container convert of pod {convert}-convert-0-0-x7k2p was OOMKilled at its 168Gi limit: raise " in message
    assert "tpu-rl:workflow.stepMemoryGib" in message and "Read the logs with: kubectl --context gke_" in message


def test_runner_killed_while_up_waits_the_run_fails_meanwhile_then_up_retries_it(stack):
    """The create had returned (skipAwait), so the state has the step and no operation is pending; the run
    failed while nobody watched: the next `up` reads it, passes its UID as the trigger and replaces it
    (sg.go shouldTriggerReplace); the one after that changes nothing."""
    killed = stack.up({"train": "kill"})
    assert "killed while waiting for" in str(killed.error)
    train = names(stack)["train"]
    assert stack.step_state(train) is not None and not stack.pending_creates
    stack.cluster.set_state("JobSet", "tpu-rl", train, "failed", restarts=1)
    uid = live(stack, "train")["metadata"]["uid"]
    retried = stack.up()
    assert retried.error is None, retried.error
    assert retried.actions[train] == "replace" and trigger(retried.plan, train) == uid
    assert set(stack.up().actions.values()) == {"same"}


def test_runner_killed_during_the_create_the_run_fails_meanwhile_then_up_twice_retries_it(stack):
    """Killed before the provider's Create returned: a pending create (journal.go carries it into every
    snapshot; it is not a resource), so the next `up` creates the step again: with upsertExistingObjects
    the provider applies the manifest to the existing, failed object (await.go Creation) and the program's
    wait sees Failed at once. That create stores the failed run's own UID as the trigger; the program's
    marker for an object whose retry-of is its own UID is "<UID>/adopted", so the following `up` replaces
    it (shouldTriggerReplace)."""
    killed = stack.up({"train": "kill-during-create"})
    assert isinstance(killed.error, Exception)
    train = names(stack)["train"]
    assert train in stack.pending_creates and stack.step_state(train) is None
    stack.cluster.set_state("JobSet", "tpu-rl", train, "failed", restarts=1)  # it failed while nobody watched
    uid = live(stack, "train")["metadata"]["uid"]

    adopted = stack.up()
    assert adopted.actions[train] == "adopt" and "failed (FailedJobs)" in str(adopted.error)
    assert stack.step_state(train).trigger == uid
    assert live(stack, "train")["metadata"]["annotations"][RETRY_ANNOTATION] == uid

    retried = stack.up()
    assert retried.error is None, retried.error
    assert retried.actions[train] == "replace" and trigger(retried.plan, train) == uid + ADOPTED
    assert live(stack, "train")["metadata"]["uid"] != uid
    assert set(stack.up().actions.values()) == {"same"}


def test_runner_killed_during_a_retrys_create_the_retry_fails_meanwhile_then_up_twice_retries_it_again(stack):
    """The adopting create applies ``retry-of: <its own UID>`` over the retry's ``retry-of: <first UID>``:
    with a new field manager and no force that is an SSA conflict (await.go Creation, patchForce,
    handleSSAErr), so the step objects carry ``pulumi.com/patchForce`` and the adoption goes through."""
    stack.up({"train": "fail"})
    first = live(stack, "train")["metadata"]["uid"]
    train = names(stack)["train"]
    stack.up({"train": "kill-during-create"})  # the retry is created (replace), then the runner dies
    assert train in stack.pending_creates
    retry_uid = live(stack, "train")["metadata"]["uid"]
    assert live(stack, "train")["metadata"]["annotations"][RETRY_ANNOTATION] == first
    stack.cluster.set_state("JobSet", "tpu-rl", train, "failed", restarts=1)
    adopted = stack.up()
    assert adopted.actions[train] == "adopt" and "failed (FailedJobs)" in str(adopted.error)
    assert live(stack, "train")["metadata"]["annotations"][RETRY_ANNOTATION] == retry_uid
    again = stack.up()
    assert again.error is None and trigger(again.plan, train) == retry_uid + ADOPTED


def test_runner_killed_during_the_create_while_training_runs_then_up_adopts_and_waits_for_it(stack):
    """The same pending create, but the run is still going: the adopting create applies onto the running
    object and the program waits for it: nothing is started twice."""
    stack.up({"train": "kill-during-create"})
    uid = live(stack, "train")["metadata"]["uid"]
    stack.on_wait = lambda s: s.finish(names(s)["train"])
    again = stack.up()
    assert again.error is None, again.error
    assert again.actions[names(stack)["train"]] == "adopt" and live(stack, "train")["metadata"]["uid"] == uid


def test_a_completed_step_whose_output_is_missing_is_run_again_by_the_next_up(stack):
    """A step can complete without its files (a deleted prefix, a bucket policy): `up` fails naming the path
    and saying that the next `up` runs it again; that `up` reads the files, finds them missing and passes
    the run's UID as the trigger (a replacement, sg.go shouldTriggerReplace)."""
    first = stack.up({"convert": "complete-without-output"})
    convert = names(stack)["convert"]
    assert "conversion finished but" in str(
        first.error
    ) and f"the next `make up STACK={stack.name}` runs {convert} again" in str(first.error)
    again = stack.up()
    assert again.error is None, again.error
    assert again.actions[convert] == "replace" and again.actions[names(stack)["export"]] == "create"


def test_refresh_from_outside_the_network_fails_and_keeps_the_state(stack):
    """kp.go Read: without deleteUnreachable, an unreachable cluster fails the refresh and the state stays;
    with it, every object would be dropped (and the next `up` would run every step again). The program's
    provider sets neither, so only PULUMI_K8S_DELETE_UNREACHABLE=true on that one command drops them
    (kp.go Configure reads it when the provider's inputs lack the key)."""
    assert stack.up().error is None
    assert "deleteUnreachable" not in stack.provider_inputs
    before = dict(stack.state)
    stack.cluster.stop()
    assert stack.refresh(reachable=False) is not None
    assert stack.state == before, "a failed refresh keeps every object in the state"
    assert stack.refresh(reachable=False, env={"PULUMI_K8S_DELETE_UNREACHABLE": "true"}) is None
    left = [r.urn for r in stack.state.values() if r.type.startswith("kubernetes:")]
    assert left == [], "the documented recovery for a cluster that is really gone: every object of it dropped"


def test_pr_preview_after_a_failed_run_warns_and_shows_the_retry(stack):
    """A preview of an unchanged step returns its recorded outputs (step.go SameStep), a recorded Failed
    status included: the program warns instead of failing; with the cluster readable the marker is the
    failed UID, so the preview shows the replacement `up` will make (sg.go shouldTriggerReplace in a dry run)."""
    stack.up({"train": "fail"})
    train = names(stack)["train"]
    preview = stack.preview()
    assert preview.error is None, preview.error
    assert preview.actions[train] == "replace"
    retry = f"ended Failed (FailedJobs); `make up STACK={stack.name}` will retry it"
    assert any(retry in w for w in preview.plan.warnings())


def test_pr_preview_after_a_failed_run_from_outside_the_network_warns_once(stack):
    """Unreadable: the trigger is null, which is "no trigger" (sg.go shouldTriggerReplace), and the
    program's annotations are ignoreChanges, so the steps show as recorded: one warning, no error."""
    stack.up({"train": "fail"})
    stack.cluster.stop()
    preview = stack.preview()
    assert preview.error is None, preview.error
    assert preview.actions[names(stack)["train"]] == "same"
    warnings = preview.plan.warnings()
    assert sum("preview could not read the cluster" in w for w in warnings) == 1
    assert len(warnings) == 1, "a preview waits for nothing and says nothing it cannot read"


def test_pr_preview_while_a_retry_runs_shows_no_change_and_warns_of_nothing(stack):
    """The retry was created and its `up` stopped while the program waited: the state has it with the trigger
    it was created with, and the live run carries the same marker (its retry-of), so the preview plans no
    change for it (SameStep): no replacement, no error, no failure warning."""
    stack.up({"train": "fail"})
    stack.up({"train": "interrupt"})  # the retry runs; `up` was stopped while it waited
    preview = stack.preview()
    train = names(stack)["train"]
    assert preview.error is None and preview.actions[train] == "same"
    assert not [w for w in preview.plan.warnings() if "Failed" in w or "failed" in w]


def test_pr_preview_of_a_retried_run_from_outside_the_network_shows_no_change(stack):
    """The retry's object carries ``tpu-rl/retry-of``; a preview that cannot read the cluster passes no
    marker, and the annotation is ignoreChanges (processIgnoreChanges keeps the recorded one), so nothing
    shows as an update; the null trigger is no trigger (shouldTriggerReplace)."""
    stack.up({"train": "fail"})
    assert stack.up().error is None
    stack.cluster.stop()
    preview = stack.preview()
    assert preview.error is None and set(preview.actions.values()) == {"same"}


def test_moving_the_hub_cache_after_a_run_re_runs_and_rewrites_nothing(stack):
    """``tpu-rl:model.hubCache`` and its writer name no step (``workloads.specs.step_specs.HUB_CACHE``: hashed as the
    stack's own cache): after a finished run the steps are the same objects, and each step's ConfigMap of scripts,
    whose data now differs in the folder only, is kept as it was (``ignoreChanges`` on ``data``: sg.go
    ``processIgnoreChanges`` gives the ignored path its old value before the provider's Diff), not replaced under its
    JobSet."""
    first = stack.up()
    assert first.error is None, first.error
    steps = names(stack)
    moved = stack.up(overrides=["tpu-rl:model.hubCache=gs://shared-hub/hub/", "tpu-rl:model.hubCacheWriter=prod"])
    assert moved.error is None, moved.error
    assert names(stack) == steps, "where the cache is renames no step"
    assert set(moved.actions.values()) == {"same"}, moved.actions
    scripts = [(call, urn) for call, urn in moved.calls if urn.endswith("-scripts")]
    assert {urn.rsplit("::", 1)[1] for _, urn in scripts} == {f"{name}-scripts" for name in steps.values()}
    assert {call for call, _ in scripts} == {"Check", "Diff"}, "no ConfigMap of scripts is updated or replaced"
