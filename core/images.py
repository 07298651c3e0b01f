"""Image references as data (no Pulumi, no network): what a reference names, its digest pin, and the images the
stack runs pinned to the digests ``up`` read from their registry (``infra.gcp.registry``).

A reference is ``HOST[:PORT]/PATH[:TAG][@sha256:HEX]`` (the distribution reference grammar, as
``core.config.schema.IMAGE`` accepts it: a registry host is always written). A digest is only ever one the
registry answered for the tag (``Docker-Content-Digest``) or one the configuration already pins; none is made up.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from core.settings import ImageSettings

DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
"""A content digest as registries name a manifest (the only algorithm the configuration accepts)."""
IMAGE_KEYS = {"maxtext": "maxtext", "pathwaysServer": "pathways_server", "pathwaysProxy": "pathways_proxy"}
"""``tpu-rl:images.<key>`` -> its ``ImageSettings`` field."""


@dataclass(frozen=True)
class ImageRef:
    """One image reference, split."""

    host: str
    """The registry host (with its port, if any): ``us-docker.pkg.dev``."""
    name: str
    """The repository path under the host: ``cloud-tpu-images/maxtext-images/tpu_post_training``."""
    tag: str | None
    digest: str | None
    """``sha256:<64 hex>``, or None."""

    @property
    def repository(self) -> str:
        """Host and path without tag or digest."""
        return f"{self.host}/{self.name}"

    @property
    def reference(self) -> str:
        """What the registry's manifest endpoint takes: the digest if pinned, else the tag."""
        return self.digest or self.tag or "latest"

    def pinned(self, digest: str) -> str:
        """The image pinned by ``digest``, without the tag (the digest alone says what runs)."""
        if not DIGEST.fullmatch(digest):
            raise ValueError(f"not a sha256 digest: {digest!r}")
        return f"{self.repository}@{digest}"


def parse(image: str) -> ImageRef:
    """Split a reference; ``ValueError`` when it names no registry host or no repository."""
    rest, _, digest = image.partition("@")
    host, slash, path = rest.partition("/")
    if not slash or not path or ("." not in host and ":" not in host and host != "localhost"):
        raise ValueError(f"image {image!r} names no registry host")
    last = path.rsplit("/", 1)[-1]
    tag = None
    if ":" in last:
        path, _, tag = path.rpartition(":")
    if digest and not DIGEST.fullmatch(digest):
        raise ValueError(f"image {image!r} has a digest that is not sha256:<64 hex>")
    return ImageRef(host, path, tag or None, digest or None)


def to_resolve(images: ImageSettings) -> dict[str, str]:
    """``tpu-rl:images.<key>`` -> image, for each image the configuration names by tag only."""
    return {
        key: getattr(images, field) for key, field in IMAGE_KEYS.items() if parse(getattr(images, field)).digest is None
    }


def pin_images(images: ImageSettings, digests: dict[str, str]) -> ImageSettings:
    """The images with each ``tpu-rl:images.<key>`` in ``digests`` pinned to its digest (the others as they are)."""
    unknown = set(digests) - set(IMAGE_KEYS)
    if unknown:
        raise ValueError(f"no image key {sorted(unknown)}")
    pinned = {IMAGE_KEYS[key]: parse(getattr(images, IMAGE_KEYS[key])).pinned(d) for key, d in digests.items()}
    return replace(
        images,
        maxtext=pinned.get("maxtext", images.maxtext),
        pathways_server=pinned.get("pathways_server", images.pathways_server),
        pathways_proxy=pinned.get("pathways_proxy", images.pathways_proxy),
    )


def image_outputs(configured: ImageSettings, running: ImageSettings) -> dict[str, dict[str, str | None]]:
    """The stack output ``images``: per key, the image as configured, the one the steps run, and its digest (None:
    not read, as in the offline plan, which reads no registry)."""
    return {
        key: {
            "configured": getattr(configured, field),
            "image": getattr(running, field),
            "digest": parse(getattr(running, field)).digest,
        }
        for key, field in IMAGE_KEYS.items()
    }
