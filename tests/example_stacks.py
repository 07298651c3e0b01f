"""The example stacks and the variants that register what they do not: the one list the pins
(``tests/test_registered.py``), the pod-token and egress checks and the policy tests plan."""

from __future__ import annotations

STACKS: dict[str, tuple[str, ...]] = {
    "dev": ("dev",),
    "prod": ("prod",),
    "prod-publishing-evaluating": ("prod", "tpu-rl:publish.repo=me/model", "tpu-rl:workflow.steps.evaluate=true"),
    "dev-flex-start": ("dev", "tpu-rl:tpu.capacity=flex-start"),
    "prod-pinned-encrypted-mirrored": (
        "prod",
        "tpu-rl:gke.versionPrefix=1.35.",
        "tpu-rl:gke.secretsEncryptionKey=create",
        "tpu-rl:images.mirror=true",
    ),
    "dev-without-kueue": ("dev", "tpu-rl:kueue.enabled=false"),
}
"""The example stacks, and the variants that register what they do not (the publish and evaluate steps' objects,
a flex-start pool, a pinned control-plane version, the Secrets key, the image mirrors, no Kueue of the stack's)."""
