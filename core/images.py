"""Image references as data (no Pulumi, no network): what a reference names, its digest pin, the images the stack
runs pinned to the digests ``up`` read from their registry (``infra.gcp.registry``), and, with
``tpu-rl:images.mirror``, the stack's own remote repositories they are pulled through (``infra.gcp.artifact_registry``;
the configuration names the images through them, ``core.config.image_rules``).

A reference is ``HOST[:PORT]/PATH[:TAG][@sha256:HEX]`` (the distribution reference grammar, as
``core.config.formats.IMAGE`` accepts it: a registry host is always written). A digest is only ever one the
registry answered for the tag (``Docker-Content-Digest``) or one the configuration already pins; none is made up.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, replace

from core.settings import ImageSettings

DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
"""A content digest as registries name a manifest (the only algorithm the configuration accepts)."""
IMAGE_KEYS = {"maxtext": "maxtext", "pathwaysServer": "pathways_server", "pathwaysProxy": "pathways_proxy"}
"""``tpu-rl:images.<key>`` -> its ``ImageSettings`` field."""
RELEASE_TAG = re.compile(r"(?:maxtext[-_]?)?v?(?P<version>[0-9]+\.[0-9]+\.[0-9]+)(?:[-_+][A-Za-z0-9._-]*)?")
"""A tag that names a MaxText release: the release alone, as MaxText's own images are tagged
(``tpu_post_training:0.2.5``, ``core.config.workflow_keys.DEFAULT_IMAGES``), or as its git tags are
(``maxtext-v0.2.4``), with an optional suffix of a build of it (``0.2.5-rc1``)."""


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
    name, _, tag = path.rpartition(":") if ":" in path.rpartition("/")[2] else (path, "", "")
    if digest and not DIGEST.fullmatch(digest):
        raise ValueError(f"image {image!r} has a digest that is not sha256:<64 hex>")
    return ImageRef(host, name, tag or None, digest or None)


def tag_release(image: str) -> str | None:
    """The MaxText release an image's tag names (``RELEASE_TAG``), None when it names none (``latest``, a date)."""
    tag = parse(image).tag
    found = RELEASE_TAG.fullmatch(tag) if tag else None
    return found["version"] if found else None


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


PINS_IN_STATE = "TPU_RL_IMAGES_IN_STATE"
"""The digests the stack's last `up` pinned its tagged images to, as ``make up`` hands them to the program: a JSON
object of configured reference -> digest, read from the state's ``images`` output
(``tools.state_export.pins_in_state``)."""


def recorded_pins(value: str | None) -> dict[str, str]:
    """The pins ``PINS_IN_STATE`` holds (none when unset or not such an object): an image the configuration still
    names by the same tag keeps the digest its steps run, so an upstream tag that moved renames no step and runs
    nothing again; a changed reference (a new tag) is read from its registry."""
    try:
        pins = json.loads(value) if value else {}
    except ValueError:
        return {}
    if not isinstance(pins, dict):
        return {}
    return {k: v for k, v in pins.items() if isinstance(k, str) and isinstance(v, str) and DIGEST.fullmatch(v)}


def pins_of_outputs(images: object) -> dict[str, str]:
    """The pins an ``images`` stack output (``image_outputs``) records: configured reference -> digest (a reference
    that is a digest already maps to itself, and ``to_resolve`` never asks for it)."""
    pins: dict[str, str] = {}
    for entry in images.values() if isinstance(images, dict) else ():
        if not isinstance(entry, dict):
            continue
        configured, digest = entry.get("configured"), entry.get("digest")
        if isinstance(configured, str) and isinstance(digest, str) and DIGEST.fullmatch(digest):
            pins[configured] = digest
    return pins


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


# The stack's own copies: an Artifact Registry remote repository per upstream repository, in the stack's project and
# region (``infra.gcp.artifact_registry``), and the images named through it.

AR_HOST = re.compile(r"(?P<location>[a-z][a-z0-9-]*)-docker\.pkg\.dev")
"""An Artifact Registry Docker host, ``<location>-docker.pkg.dev`` (a region such as ``us-east5`` or a multi-region
such as ``us``)."""
REPOSITORY_ID = re.compile(r"[a-z]([a-z0-9-]{0,61}[a-z0-9])?")
"""An Artifact Registry repository id: a lowercase letter first, lowercase letters, digits and hyphens, at most 63."""


@dataclass(frozen=True)
class Mirror:
    """A remote repository of the stack's that proxies one upstream Artifact Registry repository."""

    project: str
    location: str
    repository_id: str
    upstream: str
    """The upstream repository's path, ``us-docker.pkg.dev/cloud-tpu-images/maxtext-images``."""

    @property
    def path(self) -> str:
        """Where the nodes pull from: ``<location>-docker.pkg.dev/<project>/<repository id>``."""
        return f"{self.location}-docker.pkg.dev/{self.project}/{self.repository_id}"

    @property
    def upstream_uri(self) -> str:
        """The remote repository's upstream, an Artifact Registry repository's URL (``common_repository.uri``)."""
        return f"https://{self.upstream}"


def upstream_repository(image: str) -> str | None:
    """The Artifact Registry repository an image is in (``<host>/<project>/<repository>``), None for another
    registry's image or one with no image name under the repository."""
    ref = parse(image)
    parts = ref.name.split("/")
    if not AR_HOST.fullmatch(ref.host) or len(parts) < 3:
        return None
    return f"{ref.host}/{parts[0]}/{parts[1]}"


def repository_id(prefix: str, upstream: str) -> str:
    """The mirror's id: ``<prefix>-<upstream project>-<upstream repository>`` in the id's alphabet, cut to 63
    characters with a hash of the upstream when longer (two upstreams never share an id)."""
    _, project, repository = upstream.split("/")
    text = re.sub(r"[^a-z0-9-]+", "-", f"{prefix}-{project}-{repository}".lower()).strip("-")
    if len(text) > 63:
        text = f"{text[:54].rstrip('-')}-{hashlib.sha256(upstream.encode()).hexdigest()[:8]}"
    if not REPOSITORY_ID.fullmatch(text):
        raise ValueError(f"no repository id can be made of {prefix!r} and {upstream!r}")
    return text


def mirrors_for(images: ImageSettings, project: str, region: str, prefix: str) -> dict[str, Mirror]:
    """Upstream repository -> its mirror, for each Artifact Registry repository the images come from that is not the
    stack's project and region already (an image of another registry is pulled as configured)."""
    local = f"{region}-docker.pkg.dev/{project}/"
    found: dict[str, Mirror] = {}
    for field in IMAGE_KEYS.values():
        image = getattr(images, field)
        upstream = upstream_repository(image)
        if upstream is None or image.startswith(local) or upstream in found:
            continue
        found[upstream] = Mirror(project, region, repository_id(prefix, upstream), upstream)
    return found


def through_mirror(images: ImageSettings, project: str, region: str, prefix: str) -> bool:
    """Whether the images are named through the stack's own mirrors (``tpu-rl:images.mirror``, ``mirrored``)."""
    own = f"{region}-docker.pkg.dev/{project}/{prefix}-"
    return any(getattr(images, field).startswith(own) for field in IMAGE_KEYS.values())


def mirrored(images: ImageSettings, mirrors: dict[str, Mirror]) -> ImageSettings:
    """The images named through their mirrors (the same image name, tag and digest under the mirror's path)."""

    def through(image: str) -> str:
        upstream = upstream_repository(image)
        if upstream is None or upstream not in mirrors:
            return image
        return f"{mirrors[upstream].path}/{image.removeprefix(upstream + '/')}"

    return replace(
        images,
        maxtext=through(images.maxtext),
        pathways_server=through(images.pathways_server),
        pathways_proxy=through(images.pathways_proxy),
        upstream=images,
    )


def repository_args(mirror: Mirror, labels: dict[str, str]) -> dict[str, object]:
    """The ``gcp.artifactregistry.Repository`` arguments of a mirror: a Docker remote repository whose upstream is
    the Artifact Registry repository (terraform-provider-google, artifact_registry_repository,
    ``remote_repository_config.common_repository.uri``: "URI to Artifact Registry Repository, e.g.
    https://REGION-docker.pkg.dev/UPSTREAM_PROJECT_ID/UPSTREAM_REPOSITORY")."""
    return {
        "project": mirror.project,
        "location": mirror.location,
        "repository_id": mirror.repository_id,
        "format": "DOCKER",
        "mode": "REMOTE_REPOSITORY",
        "description": f"tpu-rl: pull-through copy of {mirror.upstream}",
        "labels": labels,
        "remote_repository_config": {
            "description": f"{mirror.upstream} (Artifact Registry)",
            "common_repository": {"uri": mirror.upstream_uri},
        },
    }
