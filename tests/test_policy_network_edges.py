"""``no-exposed-services`` on firewall rules at their edges: a rule with no direction (Google Cloud's default,
ingress), with no source named at all (Google Cloud admits ``0.0.0.0/0``) or only a tag or a service account, a range
written with host bits set or not a range at all, and a direction or ranges not known yet; each finding as the
operator reads it."""

from __future__ import annotations

from typing import Any

import pytest
from pulumi_policy import ResourceValidationArgs
from pulumi_policy.proxy import UNKNOWN_ARRAY_VALUE, UNKNOWN_STRING_VALUE

from policy.tpu_rl_policies.network import FIREWALL, no_exposed_services
from policy.tpu_rl_policies.resources import DEPLOYMENT
from tests.policy_args import OPTIONS, Reports

pytestmark = pytest.mark.pure

UNSET = object()


@pytest.fixture(autouse=True)
def at_up(monkeypatch):
    """Judged as at ``pulumi up`` (an unknown value left is a finding of its own)."""
    monkeypatch.setattr(DEPLOYMENT, "dry_run", False)


def findings(**props: Any) -> list[str]:
    """What the policy reports on an allowing firewall rule ``fw`` with ``props`` (``UNSET`` leaves a field out)."""
    rule = {"name": "fw", "direction": "INGRESS", "allows": [{"protocol": "tcp", "ports": ["22"]}], **props}
    rule = {key: value for key, value in rule.items() if value is not UNSET}
    report = Reports()
    args = ResourceValidationArgs(FIREWALL, rule, f"urn:pulumi:dev::tpu-rl::{FIREWALL}::fw", "fw", OPTIONS, None)
    no_exposed_services.validate(args, report)
    return [message for message, _ in report.calls]


def opened(source: str) -> str:
    return (
        f"firewall rule fw allows ingress from {source}, outside the private ranges and Google's health checks: it "
        "opens the VPC's nodes to the internet; admit only the subnet's ranges"
    )


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        ({"sourceRanges": ["0.0.0.0/0"]}, [opened("0.0.0.0/0")]),
        ({"direction": UNSET, "sourceRanges": ["0.0.0.0/0"]}, [opened("0.0.0.0/0")]),
        ({"direction": None, "sourceRanges": ["0.0.0.0/0"]}, [opened("0.0.0.0/0")]),
        ({"direction": "ingress", "sourceRanges": ["0.0.0.0/0"]}, [opened("0.0.0.0/0")]),
        ({"direction": "EGRESS", "sourceRanges": ["0.0.0.0/0"]}, []),
        ({"allows": [], "sourceRanges": ["0.0.0.0/0"]}, []),
        ({}, [opened("0.0.0.0/0 (no source named)")]),
        ({"sourceRanges": [], "sourceTags": [], "sourceServiceAccounts": []}, [opened("0.0.0.0/0 (no source named)")]),
        ({"sourceTags": ["gke-node"]}, []),
        ({"sourceServiceAccounts": ["nodes@p.iam.gserviceaccount.com"]}, []),
        ({"sourceRanges": ["10.1.2.3/8", " 192.168.7.1/24 ", "35.191.0.0/16"]}, []),
        ({"sourceRanges": ["10.0.0.0/8", "not-a-range"]}, [opened("not-a-range")]),
        ({"sourceRanges": ["10.0.0.0/7", "fd00::/8"]}, [opened("10.0.0.0/7"), opened("fd00::/8")]),
    ],
    ids=[
        "internet",
        "no-direction",
        "direction-null",
        "lower-case-ingress",
        "egress",
        "allows-nothing",
        "no-source",
        "empty-sources",
        "tag-only",
        "service-account-only",
        "host-bits-set",
        "not-a-range",
        "wider-than-private-and-ipv6",
    ],
)
def test_a_firewall_rule_admits_only_internal_sources(props, expected):
    assert findings(**props) == expected


@pytest.mark.parametrize(
    ("props", "unknown"),
    [
        ({"direction": UNKNOWN_STRING_VALUE, "sourceRanges": ["0.0.0.0/0"]}, ".direction"),
        ({"sourceRanges": UNKNOWN_ARRAY_VALUE}, ".sourceRanges"),
    ],
    ids=["direction", "ranges"],
)
def test_a_direction_or_ranges_not_known_are_not_judged_as_unset(props, unknown):
    """A rule whose direction or source ranges are not known yet is not judged on a guess (an unknown direction as
    ingress, unknown ranges as none, which Google Cloud reads as ``0.0.0.0/0``): only the unknown is named."""
    assert findings(**props) == [
        f"cannot judge {unknown}: not known at `pulumi up`; give it a value the program knows",
    ]
