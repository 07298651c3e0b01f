"""The provider calls the engine makes on each `up` and the delete-before-replace cascade, in the engine model
(``tests.engine``), with the real program, kubeconfig, client and cluster. ``sg.go`` is pulumi
``pkg/resource/deploy/step_generator.go`` (revisions in ``tests/engine.py``)."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.scenario import live, names

# The whole module is the slow tier (`make test-slow`, in CI; docs/testing.md "Timings"): each test runs the
# program or a step for real against loopback servers, seconds apiece. The fast tier keeps the same boundaries
# in pure form (the builders' and readers' own tests).
pytestmark = pytest.mark.slow


def by_urn(calls: list[tuple[str, str]]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for call, urn in calls:
        found.setdefault(urn, []).append(call)
    return found


def test_every_registration_is_checked_and_every_one_with_state_diffed(stack):
    """sg.go continueStepsFromImport calls the provider's Check on every custom resource the program registers
    (a provider's CheckConfig), and generateStepsFromDiff its Diff on every one the state holds (DiffConfig): a
    SameStep is what a Diff that found nothing yields (continueStepsFromDiff); only SameStep.Apply calls no
    provider. Components are compared without one (sg.go diff: ``prov == nil``)."""
    first = stack.up()
    assert first.error is None, first.error
    custom = [u for u, r in stack.state.items() if r.custom]
    calls = by_urn(first.calls)
    assert {u: calls[u] for u in custom} == {
        u: ["CheckConfig" if stack.state[u].type.startswith("pulumi:providers:") else "Check", "Create"] for u in custom
    }
    again = stack.up()
    assert again.error is None and set(again.actions.values()) == {"same"}
    calls = by_urn(again.calls)
    assert {u: calls[u] for u in custom} == {
        u: ["CheckConfig", "DiffConfig"] if stack.state[u].type.startswith("pulumi:providers:") else ["Check", "Diff"]
        for u in custom
    }
    assert set(calls) == set(custom), "no component, and nothing else, is called"
    assert Counter(c for c, _ in again.calls) == {
        "Check": len(custom) - 1,
        "Diff": len(custom) - 1,
        "CheckConfig": 1,
        "DiffConfig": 1,
    }


def test_a_retry_is_checked_twice_and_not_diffed(stack):
    """sg.go generateStepsFromDiff: a replacement trigger that fires replaces without the provider's Diff, and
    continueStepsFromDiff re-runs Check on the program's inputs; delete_before_replace deletes first."""
    stack.up({"train": "fail"})
    retry = stack.up()
    assert retry.error is None, retry.error
    train = next(u for u, r in stack.state.items() if r.name == names(stack)["train"])
    assert by_urn(retry.calls)[train] == ["Check", "Check", "Delete", "Create"]


def test_retrying_a_finished_conversion_asks_the_later_steps_and_keeps_them(stack):
    """A finished run whose conversion files were deleted: the conversion is replaced, delete first. The
    engine first asks which dependents must go with it (sg.go calculateDependentReplacements): the training
    takes the conversion's verified output in its ``metadata`` (a property dependency), so its provider's Diff
    is asked with ``metadata`` unknown, and the Kubernetes provider plans no replacement for an unknown
    ``metadata`` (kp.go Diff: the patch holds null there, and no force-new path matches under it); the export
    depends on the conversion through the training only (no property dependency on the replace set): not asked.
    Both keep their runs, and their objects are never deleted."""
    assert stack.up().error is None
    before = {step: live(stack, step)["metadata"]["uid"] for step in ("train", "export")}
    convert = stack.steps().convert
    bucket, _, prefix = convert.artifact_uri.removeprefix("gs://").partition("/")
    for blob in stack.gcs.bucket(bucket).list_blobs(prefix=prefix):
        blob.delete()
    again = stack.up()
    assert again.error is None, again.error
    step = {name: step for step, name in names(stack).items()}
    urns = {step[r.name]: u for u, r in stack.state.items() if r.name in step}
    assert again.actions == {
        names(stack)["convert"]: "replace",
        names(stack)["train"]: "same",
        names(stack)["export"]: "same",
    }
    assert again.cascade == {urns["train"]: "keep"}
    assert ("Diff", urns["train"]) in again.calls[: again.calls.index(("Delete", urns["convert"]))]
    assert {s: live(stack, s)["metadata"]["uid"] for s in ("train", "export")} == before
