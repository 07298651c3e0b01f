"""The example stacks and the variants that register what they do not: the one list the pins
(``tests/test_registered.py``), the pod-token and egress checks and the policy tests plan."""

from __future__ import annotations

from tools.closed_world import VARIANTS

STACKS: dict[str, tuple[str, ...]] = {
    name: VARIANTS[name]
    for name in (
        "dev",
        "prod",
        "prod-publishing-evaluating",
        "dev-flex-start",
        "prod-pinned-encrypted-mirrored",
        "dev-without-kueue",
    )
}
"""The example stacks, and the variants that register what they do not (the publish and evaluate steps' objects,
a flex-start pool, a pinned control-plane version, the Secrets key, the image mirrors, no Kueue of the stack's)."""
