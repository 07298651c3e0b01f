"""The policy pack's check factories (``policy/tpu_rl_policies/resources.py``: ``_guarded_resource``,
``_guarded_stack``), each called here and its product run, not only the products the pack's modules made at import:
what the check is handed (plain props, a mapping where the engine sent something else), what it reports and for
which resource, a check that raises on a hostile shape, and a value the engine does not know yet at a preview and at
``pulumi up``."""

from __future__ import annotations

from typing import Any

import pytest
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, UnknownValueError

from policy.tpu_rl_policies.properties import Unseen
from policy.tpu_rl_policies.resources import DEPLOYMENT, Resource, _guarded_resource, _guarded_stack
from tests.policy_args import TYPE, Reports, resource_args, stack_args, stack_resource

pytestmark = pytest.mark.pure


@pytest.fixture
def deployment(monkeypatch):
    """Whether the engine runs a preview (``DEPLOYMENT.dry_run``), restored after the test."""

    def set_to(dry_run: bool | None) -> None:
        monkeypatch.setattr(DEPLOYMENT, "dry_run", dry_run)

    set_to(False)
    return set_to


# ---------------------------------------------------------------------------------------------
# _guarded_resource


def test_a_resource_check_reads_plain_props_and_its_findings_are_reported(deployment):
    handed: list[tuple[Any, Any]] = []

    def check(args: Any, props: dict[str, Any], say: Any) -> None:
        handed.append((args, props))
        say(f"{args.name}: parallelism {props['spec']['parallelism']!r}")

    args = resource_args({"spec": {"parallelism": 2.0, "ratio": 0.5}})
    report = Reports()
    assert _guarded_resource(check)(args, report) is None
    assert handed == [(args, {"spec": {"parallelism": 2, "ratio": 0.5}})]
    assert type(handed[0][1]["spec"]["parallelism"]) is int, "a whole number the engine sent as a double is a count"
    assert handed[0][1] is not args.props, "a plain copy"
    assert report.calls == [("step: parallelism 2", None)]


@pytest.mark.parametrize("props", [[1, 2], "text", None], ids=["list", "string", "none"])
def test_a_resource_check_is_handed_an_empty_mapping_when_the_props_are_none(deployment, props):
    handed: list[Any] = []
    report = Reports()
    _guarded_resource(lambda args, props, say: handed.append(props))(resource_args(props), report)
    assert handed == [{}] and type(handed[0]) is dict
    assert report.calls == []


@pytest.mark.parametrize("error", [KeyError, TypeError, ValueError])
@pytest.mark.parametrize("dry_run", [True, False])
def test_a_resource_check_that_raises_is_a_finding_naming_the_type(deployment, error, dry_run):
    deployment(dry_run)

    def check(args: Any, props: dict[str, Any], say: Any) -> None:
        say("before the error")
        raise error("spec")

    report = Reports()
    _guarded_resource(check)(resource_args({"spec": {}}), report)
    assert report.calls == [
        ("before the error", None),
        (f"cannot judge this {TYPE}: its shape is malformed ({error.__name__}); fix it", None),
    ]


def _reads_unknown(args: Any, props: dict[str, Any], say: Any) -> None:
    say("read before the unknown")
    if props["image"]:  # an Unseen: noted as read
        say("never")
    say("image unset")


def test_a_resource_value_not_known_at_a_preview_withholds_what_rests_on_it(deployment):
    deployment(True)
    report = Reports()
    with pytest.raises(UnknownValueError) as raised:
        _guarded_resource(_reads_unknown)(resource_args({"image": Unseen("image")}), report)
    assert report.calls == [("read before the unknown", None)]
    assert raised.value.message == (
        "image not known until what they come from exists; judged at `pulumi up`; reading them as unset it would "
        "report: image unset"
    )


def test_a_resource_value_not_known_at_up_is_a_finding(deployment):
    report = Reports()
    _guarded_resource(_reads_unknown)(resource_args({"image": Unseen("image")}), report)
    assert report.calls == [
        ("read before the unknown", None),
        ("image unset", None),
        ("cannot judge image: not known at `pulumi up`; give it a value the program knows", None),
    ]


def test_each_resource_check_is_its_own(deployment):
    """Two checks made by the factory each run their own function."""
    report = Reports()
    first = _guarded_resource(lambda args, props, say: say("first"))
    second = _guarded_resource(lambda args, props, say: say("second"))
    second(resource_args({}), report)
    first(resource_args({}), report)
    assert report.calls == [("second", None), ("first", None)]


# ---------------------------------------------------------------------------------------------
# _guarded_stack


def test_a_stack_check_reads_each_resource_plain_and_reports_on_the_one_it_names(deployment):
    handed: list[list[Resource]] = []

    def check(args: Any, resources: list[Resource], say: Any) -> None:
        handed.append(resources)
        for r in resources:
            say(f"{r.name} runs {r.props.get('spec', {}).get('parallelism')!r}", r.urn)

    report = Reports()
    args = stack_args(stack_resource({"spec": {"parallelism": 4.0}}), stack_resource([1], "other", protect=True))
    assert _guarded_stack(check)(args, report) is None
    step, other = handed[0]
    assert step == Resource(TYPE, {"spec": {"parallelism": 4}}, f"urn:pulumi:dev::tpu-rl::{TYPE}::step", "step")
    assert type(step.props["spec"]["parallelism"]) is int
    assert other == Resource(TYPE, {}, f"urn:pulumi:dev::tpu-rl::{TYPE}::other", "other", True)
    assert report.calls == [("step runs 4", step.urn), ("other runs None", other.urn)]


@pytest.mark.parametrize("error", [KeyError, AttributeError])
def test_a_stack_check_that_raises_is_a_finding_on_the_stack(deployment, error):
    def check(args: Any, resources: list[Resource], say: Any) -> None:
        say("first", resources[0].urn)
        raise error("spec")

    report = Reports()
    _guarded_stack(check)(stack_args(stack_resource({})), report)
    assert report.calls == [
        ("first", f"urn:pulumi:dev::tpu-rl::{TYPE}::step"),
        (f"cannot judge this stack: a resource's shape is malformed ({error.__name__}); fix it", None),
    ]


@pytest.mark.parametrize("read_first", [False, True], ids=["reported-first", "unknown-read-first"])
def test_a_stack_value_not_known_at_a_preview_withholds_the_findings_on_its_resource(deployment, read_first):
    """Each unknown is of its resource: a finding on ``known`` stands at a preview whether it is reported before or
    after the check read the unknown of ``late``, and only the findings on ``late`` wait for ``pulumi up``."""
    deployment(True)

    def check(args: Any, resources: list[Resource], say: Any) -> None:
        known, unknown = resources
        if read_first and unknown.props["image"]:
            say("never")
        say("on the known one", known.urn)
        if unknown.props["image"]:
            say("never")
        say("on the unknown one", unknown.urn)

    report = Reports()
    args = stack_args(stack_resource({"image": "a"}, "known"), stack_resource({"image": UNKNOWN_STRING_VALUE}, "late"))
    with pytest.raises(UnknownValueError) as raised:
        _guarded_stack(check)(args, report)
    assert report.calls == [("on the known one", f"urn:pulumi:dev::tpu-rl::{TYPE}::known")]
    assert raised.value.message == (
        "Job late: .image not known until what they come from exists; judged at `pulumi up`; reading them as unset it "
        "would report: on the unknown one"
    )


def test_a_stack_check_is_handed_the_validations_arguments() -> None:
    handed: list[Any] = []

    def check(args: Any, resources: list[Resource], say: Any) -> None:
        handed.append(args)

    args = stack_args(stack_resource({}))
    _guarded_stack(check)(args, Reports())
    assert handed == [args] and handed[0] is args
