"""The publish step's model card as the ConfigMap it mounts (``commands.CARD_DIR``): its metadata, known before the
run's numbers are, and the card's files (``README.md`` and the reward curve)."""

from __future__ import annotations

from typing import Any

from core.settings import Settings
from workloads.specs.step_manifests import labels


def card_metadata(settings: Settings, name: str, step_id: str) -> dict[str, Any]:
    """The card ConfigMap's metadata: known before the run's numbers are (a preview shows the object)."""
    return {"name": name, "namespace": settings.namespace, "labels": labels(settings, "publish", step_id)}


def card_config_map(metadata: dict[str, Any], readme: str, image: bytes | None) -> dict[str, Any]:
    """The publish step's model card as a ConfigMap (mounted at ``commands.CARD_DIR``; its metadata
    ``card_metadata``): ``README.md`` and, when the run logged a reward, the reward curve (``binaryData``; a
    ConfigMap holds at most 1 MiB)."""
    import base64

    manifest: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata,
        "data": {"README.md": readme},
    }
    if image is not None:
        manifest["binaryData"] = {REWARD_IMAGE: base64.b64encode(image).decode()}
    return manifest


REWARD_IMAGE = "reward-curve.png"
"""The reward curve's file name in the card folder and on the Hub (the card links it)."""
REWARD_IMAGE_MAX_BYTES = 512 * 1024
"""The largest reward curve the card carries: base64 makes it 683 KiB, which with the card's own bound
(``model_card.CARD_MAX_BYTES``, 256 KiB) stays under a ConfigMap's 1 MiB; a larger one is left out."""
CARD_FILES = ("README.md", REWARD_IMAGE)
"""What the card adds to a published branch (a file of the export by that name is replaced by it)."""
