"""The images' rules: each image from a registry of ``tpu-rl:images.registries``, a MaxText image of the release the
checks ran on (or told to warn), and, with ``tpu-rl:images.mirror``, every image pulled through the stack's own
remote repositories."""

from __future__ import annotations

from core.config.fields import project_key as _k
from core.config.values import UNREADABLE, Problems, UnreadableError, Values, error
from core.images import mirrored, mirrors_for, tag_release
from core.maxtext_keys import MAXTEXT_VERSION
from core.settings import ImageSettings

IMAGE_NAMES = ("maxtext", "pathwaysServer", "pathwaysProxy")


def image_settings(v: Values) -> ImageSettings:
    """The images the steps and the Pathways head run, from allowed registries, through the stack's mirrors if it
    has them."""
    registries = v[_k("images.registries")]
    problems = Problems()
    images = {name: problems.run(lambda n: v[_k(f"images.{n}")], name) for name in IMAGE_NAMES}
    for name, image in images.items():
        if image is not UNREADABLE and not any(image.startswith(f"{registry}/") for registry in registries):
            problems.add(
                error(
                    _k(f"images.{name}"),
                    image,
                    f"not from an allowed registry ({', '.join(registries)}); add its registry to "
                    "tpu-rl:images.registries if you trust it",
                )
            )
    check = v[_k("images.maxtextCheck")]
    if images["maxtext"] is not UNREADABLE:
        problems.run(_maxtext_release, images["maxtext"], check)
    problems.check()
    if UNREADABLE in images.values():
        raise UnreadableError("images")
    configured = ImageSettings(
        images["maxtext"], images["pathwaysServer"], images["pathwaysProxy"], registries, maxtext_check=check
    )
    if v[_k("images.mirror")] is not True:
        return configured
    # Through the stack's own remote repositories (``core.images.mirrors_for``): step names see where nodes pull.
    mirrors = mirrors_for(configured, v["gcp:project"], v["gcp:region"], v[_k("clusterName")])
    return mirrored(configured, mirrors)


def _maxtext_release(image: str, check: str) -> None:
    """An image whose tag names another MaxText release (``core.images.tag_release``) than the one adopted: every
    MaxText step's check (``workloads/container/maxtext_check.py``) would stop it, unless told to warn."""
    release = tag_release(image)
    if release is None or release == MAXTEXT_VERSION or check == "warn":
        return
    raise error(
        _k("images.maxtext"),
        image,
        f"its tag names MaxText {release}, and tpu-rl's checks ran on {MAXTEXT_VERSION}, so every MaxText step would "
        f"stop at its image check: use the tpu_post_training image of {MAXTEXT_VERSION}, adopt {release} first (make "
        f'maxtext VERSION={release}, docs/releases.md "Adopting a MaxText release"), or set '
        "tpu-rl:images.maxtextCheck warn to run it unchecked",
    )
