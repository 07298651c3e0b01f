"""The tpu-rl guardrails policy pack (constructing PolicyPack starts the analyzer server)."""

import sys
from pathlib import Path

from pulumi_policy import EnforcementLevel, PolicyPack

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tpu_rl_policies import POLICIES  # noqa: E402

PolicyPack(
    name="tpu-rl-guardrails",
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=POLICIES,
)
