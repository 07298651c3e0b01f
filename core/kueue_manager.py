"""Kueue's manager configuration as tpu-rl installs it (``config.kueue.x-k8s.io/v1beta2``): one home for what the
program writes (``infra.k8s.kueue.helm_values``), what the policy pack allows (``reviewed-helm-charts``) and what
``tools/adopt_controller.py`` checks against a release's own ``Configuration``."""

from __future__ import annotations

from typing import Any

from core.config.values import format_duration

FRAMEWORKS = ("batch/job", "jobset.x-k8s.io/jobset")
"""The integrations Kueue manages: JobSets, and the Jobs they create (a child Job follows its JobSet)."""


def configuration(pods_ready_timeout: int, recovery_timeout: int) -> dict[str, Any]:
    """The manager configuration with these waitForPodsReady timeouts (seconds): ``tools/adopt_controller.py``
    checks a release's ``Configuration`` has every field of it."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443"},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        "controller": {
            "groupKindConcurrency": {
                "Job.batch": 5,
                "Pod": 5,
                "Workload.kueue.x-k8s.io": 5,
                "LocalQueue.kueue.x-k8s.io": 1,
                "ClusterQueue.kueue.x-k8s.io": 1,
                "ResourceFlavor.kueue.x-k8s.io": 1,
            }
        },
        "clientConnection": {"qps": 50, "burst": 100},
        # v1beta2 has no `enable`: the block's presence turns it on. recoveryTimeout would default to timeout
        # (apis/config/v1beta2/defaults.go): a node repair under a running training takes longer than that.
        "waitForPodsReady": {
            "timeout": format_duration(pods_ready_timeout),
            "recoveryTimeout": format_duration(recovery_timeout),
            "blockAdmission": False,
            "requeuingStrategy": {"timestamp": "Eviction", "backoffLimitCount": 0},
        },
        "integrations": {"frameworks": list(FRAMEWORKS)},
    }
