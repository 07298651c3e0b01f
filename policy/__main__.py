"""The tpu-rl guardrails policy pack (constructing PolicyPack starts the analyzer server)."""

from pulumi_policy import EnforcementLevel, PolicyPack

# Run as a script from policy/ (the Pulumi CLI's analyzer), so its folder is on sys.path; `core` is the
# installed tpu-rl-core (policy/requirements.txt).
from tpu_rl_policies import POLICIES

PolicyPack(
    name="tpu-rl-guardrails",
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=POLICIES,
)
