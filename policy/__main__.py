"""The tpu-rl guardrails policy pack (constructing PolicyPack starts the analyzer server)."""

from pulumi_policy import EnforcementLevel, PolicyPack
from tpu_rl_policies import POLICIES

PolicyPack(
    name="tpu-rl-guardrails",
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=POLICIES,
)
