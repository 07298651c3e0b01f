"""What a check that read values not known yet says (``resources._judged``), word for word: at `pulumi up` the finding
names the first three such values and counts the rest ("and N more"); at a preview the advisory names them the same
way and lists the findings it held back, each once, in the order the check made them. A count off by one hides a
value the operator must give, or names one that is not there; a list badly joined reads as one finding."""

from __future__ import annotations

import pytest
from pulumi_policy.proxy import UnknownValueError

from policy.tpu_rl_policies.properties import Unseen, unseen
from policy.tpu_rl_policies.resources import DEPLOYMENT, Report, _judged
from tests.policy_args import Reports

pytestmark = pytest.mark.pure

UP_FIX = "not known at `pulumi up`; give it a value the program knows"


def reading(count: int, *findings: str):
    """A check that reads ``count`` values not known yet (``.v0``, ``.v1``...), then reports ``findings``."""

    def run(say: Report) -> None:
        for index in range(count):
            unseen(Unseen(f".v{index}"))
        for message in findings:
            say(message)

    return run


@pytest.mark.parametrize(
    ("count", "shown"),
    [
        (1, ".v0"),
        (3, ".v0, .v1, .v2"),
        (4, ".v0, .v1, .v2 and 1 more"),
        (6, ".v0, .v1, .v2 and 3 more"),
    ],
    ids=["one", "three: all named", "four: one more", "six: three more"],
)
def test_at_up_the_finding_names_three_unknowns_and_counts_the_rest(
    monkeypatch: pytest.MonkeyPatch, count: int, shown: str
) -> None:
    monkeypatch.setattr(DEPLOYMENT, "dry_run", False)
    report = Reports()
    _judged(reading(count), report)
    assert report.calls == [(f"cannot judge {shown}: {UP_FIX}", None)]


def test_at_a_preview_the_advisory_lists_the_findings_held_back_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(DEPLOYMENT, "dry_run", True)
    report = Reports()
    with pytest.raises(UnknownValueError) as raised:
        _judged(reading(4, "first finding", "second finding"), report)
    assert report.calls == []
    assert raised.value.message == (
        ".v0, .v1, .v2 and 1 more not known until what they come from exists; judged at `pulumi up`; reading them as "
        "unset it would report: first finding; second finding"
    )


def test_at_a_preview_with_nothing_held_back_the_advisory_names_the_unknowns_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(DEPLOYMENT, "dry_run", True)
    with pytest.raises(UnknownValueError) as raised:
        _judged(reading(2), Reports())
    assert raised.value.message == ".v0, .v1 not known until what they come from exists; judged at `pulumi up`"
