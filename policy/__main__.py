"""The tpu-rl guardrails policy pack (constructing PolicyPack starts the analyzer server)."""

import pulumi_policy.policy
from pulumi_policy import PolicyPack

# Run as a script from policy/ (the Pulumi CLI's analyzer), so its folder is on sys.path; `core` is the
# installed tpu-rl-core (policy/requirements.lock: pyproject.toml's group policy).
from tpu_rl_policies import PACK_LEVEL, PACK_NAME, POLICIES, Analyzer

# PolicyPack builds its servicer by this module name (pulumi-policy 1.21 policy.py, PolicyPack.__init__): ours also
# keeps whether the engine runs a preview (tpu_rl_policies.Analyzer; tests/test_policy_pack.py pins it).
pulumi_policy.policy._PolicyAnalyzerServicer = Analyzer  # type: ignore[misc]

PolicyPack(name=PACK_NAME, enforcement_level=PACK_LEVEL, policies=POLICIES)
