"""Two small judgements the pack rests on: a mounted file the launcher's hash cannot be taken of is not the launcher
(``scripts._is_launcher``), and GKE's Secrets encryption is required only where the policy config says so
(``storage._secrets_encryption``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pulumi_policy import ResourceValidationArgs

from policy.tpu_rl_policies.resources import CLUSTER
from policy.tpu_rl_policies.scripts import _is_launcher
from policy.tpu_rl_policies.storage import _secrets_encryption, secrets_encryption
from tests.policy_args import OPTIONS, Reports
from workloads.container import launch

pytestmark = pytest.mark.pure

LAUNCHER_TEXT = Path(launch.__file__).read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("\ud800", id="lone-surrogate"),
        pytest.param(LAUNCHER_TEXT + "\udcff", id="launcher-and-a-surrogate"),
        pytest.param("#!/usr/bin/env python3\n\udc80", id="script-with-a-surrogate"),
    ],
)
def test_a_text_with_a_lone_surrogate_is_not_the_launcher_rather_than_an_error(text):
    """A mounted file's text that is no valid Unicode (a lone surrogate, as a JSON ``\\ud800`` escape decodes to) is
    hashed as it is and judged not the launcher: reading it never raises."""
    assert _is_launcher(text) is False


def test_the_launcher_is_known_by_its_text():
    assert _is_launcher(LAUNCHER_TEXT) is True
    assert _is_launcher(LAUNCHER_TEXT + "\n") is False


def _cluster_findings(config: dict[str, Any]) -> list[tuple[str, str | None]]:
    report = Reports()
    args = _cluster_args(config)
    _secrets_encryption(args, dict(args.props), report)
    return report.calls


def _cluster_args(config: dict[str, Any]) -> ResourceValidationArgs:
    props = {"databaseEncryption": {"state": "DECRYPTED"}}
    return ResourceValidationArgs(CLUSTER, props, "urn:pulumi:dev::tpu-rl::c::c", "c", OPTIONS, None, config)


def test_secrets_encryption_reads_required_as_the_engine_sends_it():
    """The engine sends ``required`` always, its schema's default (false) where the config does not set it
    (``ReconcilePolicyPackConfig``): an unencrypted cluster is a finding only where the config asks for encryption."""
    assert secrets_encryption.config_schema is not None
    assert secrets_encryption.config_schema.properties["required"]["default"] is False
    assert _cluster_findings({"required": False}) == []
    assert len(_cluster_findings({"required": True})) == 1
