"""The destroy guards and the grants' waits in the engine model (``tests.engine``): a protected stack guards itself
from the first `up` on, whatever happens to the steps; lifting the protection runs and waits for no step; every
grant's wait comes before what uses it, on a first `up` and when a step is turned on later; a destroy leaves no
Cloud KMS key version billing. Engine functions as in ``tests/engine.py`` (``sg.go`` is ``step_generator.go``)."""

from __future__ import annotations

import copy
import json

import pytest

from tests.engine import STEP_TYPES, Stack
from tests.scenario import names

pytestmark = pytest.mark.slow

GUARD = "tpu-rl:lifecycle:DestroyGuard"
WAIT = "pulumi-python:dynamic/kms:GrantPropagation"
LIFT = ["tpu-rl:protect=false", "tpu-rl:workflow.enabled=false"]
"""How a protected stack's protection is lifted without running or waiting for a step (docs/destroy.md
"Destroy"): the program registers the platform only, unprotected; the steps' objects are deleted at the end."""


RECORD = {
    "title": "Held-out questions",
    "summary": "4 of 5 correct",
    "columns": ["question", "expected", "answer", "correct"],
    "rows": [["Janet's ducks lay 16 eggs per day ...", "18", "18", "yes"]],
}
"""What a completed evaluation leaves (a step record, ``core.records``)."""


def _guards(stack: Stack) -> dict[str, bool]:
    return {r.name: r.protect for r in stack.state.values() if r.type == GUARD}


def _destroy_loses_nothing(stack: Stack) -> None:
    """A protected destroy, with and without a preview: every guard refused, nothing deleted or dropped."""
    before = copy.deepcopy(stack.state)
    billed = dict(stack.cloud.now(stack._live_objects()))
    previewed = stack.destroy()
    assert previewed.errors and all("because it is protected" in e for e in previewed.errors)
    assert stack.state == before and previewed.calls == []
    skipped = stack.destroy(skip_preview=True)
    assert set(skipped.outcomes.values()) == {"refused", "skipped"}, skipped.outcomes
    assert {u for u, what in skipped.outcomes.items() if what == "refused"} <= {
        u for u, r in before.items() if r.protect
    }
    assert skipped.calls == [] and stack.state == before, "nothing deleted, nothing dropped"
    assert stack.cloud.now(stack._live_objects()) == billed


@pytest.mark.parametrize("outcome", ["fail", "kill", "interrupt"])
def test_a_protected_stack_is_guarded_after_an_up_that_a_step_did_not_finish(stack, outcome):
    """The platform's guard is registered once the platform is, each step's as soon as its object is created, so
    after a failed, killed or stopped training the state holds the guards of everything it holds: each guard's
    antichain comes before those of everything it depends on (sg.go ScheduleDeletes levels the condemned resources
    from those with no condemned dependencies, then reverses the rounds), each guard is refused, and performPostSteps
    skips the rest."""
    first = stack.up({"train": outcome})
    assert first.error is not None
    step_names = names(stack)
    assert stack.step_state(step_names["train"]) is not None and stack.step_state(step_names["export"]) is None
    guards = _guards(stack)
    assert {"tpu-rl-protect", "tpu-rl-protect-step-1", "tpu-rl-protect-step-2"} <= set(guards)
    assert all(guards.values()), "protected (the prod example)"
    train_guard = next(r for r in stack.state.values() if r.name == "tpu-rl-protect-step-2")
    assert stack.urn("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet", step_names["train"]) in train_guard.dependencies
    _destroy_loses_nothing(stack)


def test_a_protected_stack_is_guarded_after_a_finished_up(stack):
    assert stack.up().error is None
    assert len(_guards(stack)) == 1 + 2 + 2 * 5 and all(_guards(stack).values()), (
        "the platform's, each Helm release's, each step's and its scripts'"
    )
    _destroy_loses_nothing(stack)


def test_lifting_the_protection_runs_and_waits_for_no_step(stack):
    """After a failed training, `up` with tpu-rl:protect false and tpu-rl:workflow.enabled false: the program
    registers no step (nothing is retried, the clock does not move: no wait), unprotects every guard, the cluster,
    its pools and the bucket, and deletes the steps' objects at the end (sg.go GenerateDeletes); destroy then deletes
    everything but what docs/destroy.md lists (a bucket that holds objects without forceDestroy) and what its failed
    delete cancelled, none of which bills."""
    assert stack.up({"train": "fail"}).error is not None
    train = names(stack)["train"]
    clock = stack.clock
    lifted = stack.up(overrides=LIFT)
    assert lifted.error is None, lifted.error
    assert set(lifted.actions.values()) == {"delete"} and train in lifted.actions, "no step created or replaced"
    assert stack.clock == clock, "nothing waited for"
    assert not any(r.protect for r in stack.state.values()), "nothing protected"
    assert not any(r.type in STEP_TYPES for r in stack.state.values())
    destroyed = stack.destroy()
    assert all("containing objects without `force_destroy`" in e for e in destroyed.errors), destroyed.errors
    kept = {r.type for r in stack.state.values() if r.custom}
    assert kept <= {
        "gcp:storage/bucket:Bucket",
        "gcp:projects/service:Service",
        "pulumi-python:dynamic/storage:BucketIdentity",
        # the deletes the bucket's failed one cancelled (step_executor.go cancelDueToError): none bills
        "gcp:compute/network:Network",
        "gcp:serviceaccount/account:Account",
        "gcp:kms/keyRing:KeyRing",
        "gcp:projects/serviceIdentity:ServiceIdentity",
    }


def test_each_grant_is_made_before_what_uses_it_first_up_and_a_step_turned_on_later(stack):
    """The order the engine registers in (the state's order): each step account's Workload Identity binding before
    its Kubernetes service account (the step's own first use waits for it to apply: ``workloads/container/
    mark_folder.py``), the node accounts' wait before every pool. Turning the evaluation on later creates its account
    and grants and no wait; no wait is created again."""
    first = stack.up()
    assert first.error is None, first.error
    order = [r.name for r in stack.state.values()]
    for step in ("convert", "export", "publish"):
        assert order.index(f"{step}-workload-identity") < order.index(f"{step}-ksa")
        assert f"{step}-access-propagation" not in order, "no fixed wait for a step account"
    nodes = order.index("nodes-access-propagation")
    assert all(nodes < order.index(p) for p in ("system-pool", "cpu-pool", "tpu-pool-0"))

    stack.record = json.dumps(RECORD).encode()  # what the evaluation leaves
    later = stack.up(overrides=["tpu-rl:workflow.steps.evaluate=true"])
    assert later.error is None, later.error
    waits = {u.rsplit("::", 1)[-1]: what for u, what in later.resources.items() if f"::{WAIT}" in u or "$" + WAIT in u}
    assert waits == {"gke-agent-key-propagation": "same", "nodes-access-propagation": "same"}
    order = [r.name for r in stack.state.values()]
    assert order.index("evaluate-workload-identity") < order.index("evaluate-ksa")
    evaluate = names(stack, ["tpu-rl:workflow.steps.evaluate=true"])["evaluate"]
    ksa = stack.urn("kubernetes:core/v1:ServiceAccount", "evaluate-ksa")
    assert ksa in stack.state[stack.urn("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet", evaluate)].dependencies


def test_a_destroy_leaves_no_key_version_billing(stack):
    """prod, unprotected: the stack's key is deleted with deletion_policy DELETE, which schedules every version for
    destruction and turns rotation off (terraform-provider-google resourceKMSCryptoKeyDelete): after destroy no key
    version is left billing (the model leaves one only for ABANDON)."""
    assert stack.up(overrides=["tpu-rl:protect=false"]).error is None
    key = next(r for r in stack.state.values() if r.type == "gcp:kms/cryptoKey:CryptoKey")
    assert key.inputs["deletionPolicy"] == "DELETE" and key.inputs["rotationPeriod"] == "7776000s"
    stack.destroy()
    left = stack.cloud.now(stack._live_objects())
    assert "Cloud KMS key versions" not in " ".join(left.values()), left
