"""``trusted-registries`` judges an image by its real source: an upstream registry of the policy config directly, or
the stack's own Artifact Registry remote repository, in the same stack, whose upstream is one (``tpu-rl:images.mirror``
needs no change to the pack's config); a path of the stack's project is never trusted by prefix."""

from __future__ import annotations

import copy
import dataclasses
import importlib
from typing import Any

import pytest

from tests import analyzer
from tests.pure_plan import pure_plan
from tools.plan.offline import UNKNOWN, Plan

pytestmark = pytest.mark.pure

policies = importlib.import_module("policy.tpu_rl_policies")
TRUSTED = analyzer.pack_policy("trusted-registries")
MIRROR = "tpu-rl:images.mirror=true"
PROJECT = "my-tpu-prod-project"
OWN = f"us-east5-docker.pkg.dev/{PROJECT}"
REPO = "gcp:artifactregistry/repository:Repository"
MAXTEXT_MIRROR = "tpu-rl-prod-cloud-tpu-images-maxtext-images"
DIGEST = "@sha256:" + "a" * 64


def judge(plan: Plan, config: dict[str, Any] | None = None, *, preview: bool = False) -> list[analyzer.Finding]:
    file = {
        "all": "mandatory",
        **({"trusted-registries": {"enforcementLevel": "mandatory", **config}} if config else {}),
    }
    pack = analyzer.Pack(
        file, dry_run=preview, policies=[TRUSTED], stack="prod", stack_config=analyzer.engine_config("prod", MIRROR)
    )
    return pack.analyze_stack(analyzer.resources(plan, preview=preview, stack_view=True))


def messages(plan: Plan, config: dict[str, Any] | None = None) -> list[str]:
    return [f.message for f in judge(plan, config)]


def _edit(plan: Plan, change) -> Plan:
    plan = dataclasses.replace(plan, resources=copy.deepcopy(plan.resources))
    change(plan.resources)
    return plan


def _mirror(resources: list[dict[str, Any]]) -> dict[str, Any]:
    return next(r for r in resources if r["type"] == REPO and r["name"] == MAXTEXT_MIRROR)


def _convert_image(resources: list[dict[str, Any]], image: str) -> None:
    for r in resources:
        if (
            r["type"].endswith(":JobSet")
            and r["inputs"]["metadata"]["labels"].get("app.kubernetes.io/component") == "convert"
        ):
            r["inputs"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0][
                "image"
            ] = image


def test_the_mirrored_stack_passes_with_the_default_config():
    plan = pure_plan("prod", MIRROR)
    images = {
        c["image"]
        for r in plan.resources
        if r["type"].endswith(":JobSet")
        for j in r["inputs"]["spec"]["replicatedJobs"]
        for c in j["template"]["spec"]["template"]["spec"]["containers"]
    }
    assert images and all(i.startswith(f"{OWN}/tpu-rl-prod-") for i in images)
    assert messages(plan) == []


@pytest.mark.parametrize(
    ("uri", "trusted"),
    [
        ("https://us-docker.pkg.dev/cloud-tpu-images/maxtext-images", True),
        ("https://us-docker.pkg.dev/cloud-tpu-images", True),
        ("https://us-docker.pkg.dev/cloud-tpu-imagesx/maxtext-images", False),
        ("https://us-docker.pkg.dev/attacker/maxtext-images", False),
        ("https://registry-1.docker.io", False),
    ],
)
def test_a_mirror_is_trusted_by_its_upstream(uri, trusted):
    def change(resources):
        _mirror(resources)["inputs"]["remoteRepositoryConfig"]["commonRepository"]["uri"] = uri

    found = messages(_edit(pure_plan("prod", MIRROR), change))
    if trusted:
        assert found == []
    else:
        assert found and all(
            f"comes through the stack's mirror {MAXTEXT_MIRROR} ({OWN}/{MAXTEXT_MIRROR}), whose upstream "
            f"{uri.removeprefix('https://')} is not a trusted registry" in m
            for m in found
        ), found


def test_a_docker_hub_mirror_is_not_trusted():
    def change(resources):
        _mirror(resources)["inputs"]["remoteRepositoryConfig"] = {
            "dockerRepository": {"publicRepository": "DOCKER_HUB"}
        }

    found = messages(_edit(pure_plan("prod", MIRROR), change))
    assert found and all("whose upstream docker.io is not a trusted registry" in m for m in found)


def test_a_standard_repository_of_the_stack_is_not_trusted():
    def change(resources):
        _mirror(resources)["inputs"]["mode"] = "STANDARD_REPOSITORY"

    found = messages(_edit(pure_plan("prod", MIRROR), change))
    assert found and all("a STANDARD_REPOSITORY whose writers decide what runs" in m for m in found), found


def test_a_project_path_without_the_stacks_repository_is_not_trusted():
    """Another repository of the project (or a mirror of another stack): no repository in this stack, refused."""
    image = f"{OWN}/someone-elses/maxtext:1{DIGEST}"
    found = messages(_edit(pure_plan("prod", MIRROR), lambda rs: _convert_image(rs, image)))
    (line,) = found
    assert line.startswith("JobSet ") and f": container convert: image {image} is not from a trusted registry" in line


def test_the_repository_without_the_mirror_is_not_trusted():
    """The mirror's path, the mirror removed from the stack (the images still named through it)."""
    found = messages(_edit(pure_plan("prod", MIRROR), lambda rs: rs.remove(_mirror(rs))))
    assert found and all(f"{OWN}/{MAXTEXT_MIRROR}/" in m and "is not from a trusted registry" in m for m in found)


REGISTRIES = ["us-docker.pkg.dev/cloud-tpu-images", "us-docker.pkg.dev/cloud-tpu-v2-images"]


@pytest.mark.parametrize("preview", [False, True], ids=["up", "preview"])
@pytest.mark.parametrize("entry", [OWN, f"{OWN}/", f"{OWN}/{MAXTEXT_MIRROR}"])
def test_a_listed_path_of_the_own_project_draws_nothing_on_the_unchanged_mirror_plan(entry, preview):
    """The entry trusts nothing, and no image relies on it: the stack's mirrors are trusted by their upstream."""
    config = {"registries": [*REGISTRIES, entry]}
    assert judge(pure_plan("prod", MIRROR), config, preview=preview) == []


@pytest.mark.parametrize("preview", [False, True], ids=["up", "preview"])
def test_an_image_that_relies_on_the_listing_of_the_own_project_is_refused_naming_it(preview):
    image = f"{OWN}/someone-elses/maxtext:1{DIGEST}"
    plan = _edit(pure_plan("prod", MIRROR), lambda rs: _convert_image(rs, image))
    (found,) = judge(plan, {"registries": [*REGISTRIES, OWN]}, preview=preview)
    assert found.level == "mandatory" and not found.unjudged
    assert found.message.startswith("JobSet ") and found.message.endswith(
        f": container convert: image {image} is from a repository of the stack's own project that is not one of "
        f"its mirrors; the policy config's registries list {OWN}, but a path of the stack's project is never trusted "
        "by a listing (its writers decide what it holds): name the image through the stack's mirror "
        "(tpu-rl:images.mirror) or from a trusted upstream"
    )
    (unlisted,) = messages(plan, {"registries": REGISTRIES})  # the same image, no listing: untrusted as before
    assert f"image {image} is not from a trusted registry" in unlisted


def test_a_project_whose_id_extends_the_own_one_is_another_project():
    """``<own>-x`` is another project: its path is an upstream like any other (listed, trusted; unlisted, refused)."""
    other = f"{OWN}-x"
    image = f"{other}/maxtext/maxtext:1{DIGEST}"
    plan = _edit(pure_plan("prod", MIRROR), lambda rs: _convert_image(rs, image))
    assert messages(plan, {"registries": [*REGISTRIES, other]}) == []
    assert messages(plan, {"registries": [*REGISTRIES, "europe-docker.pkg.dev/another-project"]})


def test_an_upstream_not_known_at_a_preview_is_judged_at_up():
    def change(resources):
        _mirror(resources)["inputs"]["remoteRepositoryConfig"]["commonRepository"]["uri"] = UNKNOWN

    plan = _edit(pure_plan("prod", MIRROR), change)
    (preview,) = judge(plan, preview=True)
    assert (
        preview.unjudged
        and preview.level == "advisory"
        and ".remoteRepositoryConfig.commonRepository.uri" in preview.message
    )
    (up,) = judge(plan)
    assert up.level == "mandatory" and "cannot judge" in up.message


@pytest.mark.slow
@pytest.mark.program
@pytest.mark.parametrize("preview", [False, True], ids=["up", "first-preview"])
def test_a_mirrored_example_stack_passes_the_whole_pack_with_its_policy_config_as_committed(preview):
    """``tpu-rl:images.mirror`` on, ``policy/config/prod.json`` as it is: no mandatory finding at `up` or at the first
    preview (what the pack cannot see yet there is advisory)."""
    from tests.conftest import plan_of

    plan = analyzer.first_preview("prod", MIRROR) if preview else plan_of("prod", MIRROR)
    config = analyzer.engine_config("prod", MIRROR)
    pack = analyzer.Pack(analyzer.policy_config_file("prod"), dry_run=preview, stack="prod", stack_config=config)
    found = analyzer.analyze_plan(plan, pack, preview=preview)
    assert analyzer.mandatory(found) == []
    assert not [f for f in found if f.policy == "trusted-registries"]
