"""``trusted-registries`` on one workload, called as the engine calls the stack policy (``StackValidationArgs`` with the
policy's config, the stack's ``gcp:project`` from ``ConfigureStack``): which entries of the config's ``registries`` are
paths of the stack's own project (they trust nothing, and the refusal's list of trusted registries leaves them out),
how an image that relies on such an entry is refused naming the entry as written, that each refusal is on the resource
that runs the image, and which containers of an Argo ``podSpecPatch`` are judged (those that set an image)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pulumi_policy import StackValidationArgs

from core.errors import BadInputError
from policy import judge_preview
from policy.tpu_rl_policies.resources import DEPLOYMENT
from policy.tpu_rl_policies.workloads import trusted_registries
from tests.policy_args import Reports, policy_resource

pytestmark = pytest.mark.pure

PROJECT = "tpu-prod"
OWN = f"us-east5-docker.pkg.dev/{PROJECT}"
UPSTREAM = "us-docker.pkg.dev/cloud-tpu-images"
TRUSTED_IMAGE = f"{UPSTREAM}/maxtext-images/tpu_post_training:0.2.5"
PUBLIC = "docker.io/library/busybox:1.36"
JOB = "kubernetes:batch/v1:Job"
WORKFLOW = "kubernetes:argoproj.io/v1alpha1:Workflow"


@pytest.fixture(autouse=True)
def engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine's ``ConfigureStack`` for a stack of project ``PROJECT`` at `pulumi up`, restored after the test."""
    monkeypatch.setattr(DEPLOYMENT, "config", {"gcp:project": PROJECT})
    monkeypatch.setattr(DEPLOYMENT, "dry_run", False)


def urn_of(resource_type: str) -> str:
    return f"urn:pulumi:prod::tpu-rl::{resource_type}::step"


def judge(resource_type: str, props: dict[str, Any], registries: list[str]) -> list[tuple[str, str | None]]:
    """What the policy reports (message, URN) on a stack of one resource, with ``registries`` as its config."""
    resource = policy_resource(resource_type, "step", props, stack="prod")
    report = Reports()
    trusted_registries.validate(StackValidationArgs([resource], {"registries": registries}), report)
    return report.calls


def job(image: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "step"},
        "spec": {"template": {"spec": {"containers": [{"name": "main", "image": image}]}}},
    }


def untrusted(where: str, shown: str, registries: str) -> str:
    return (
        f"{where}: image {shown} is not from a trusted registry ({registries}); it would run with the Hugging Face "
        "token and a bucket identity"
    )


def listed(image: str, entry: str) -> str:
    return (
        f"Job step: container main: image {image} is from a repository of the stack's own project that is not one of "
        f"its mirrors; the policy config's registries list {entry}, but a path of the stack's project is never "
        "trusted by a listing (its writers decide what it holds): name the image through the stack's mirror "
        "(tpu-rl:images.mirror) or from a trusted upstream"
    )


@pytest.mark.parametrize(
    "entry",
    [f"{OWN} ", f"/{OWN}", f"{OWN}X"],
    ids=["trailing-space", "leading-slash", "project-id-extended-by-an-upper-case-letter"],
)
def test_an_entry_that_is_no_path_of_the_own_project_stays_a_trusted_registry_of_the_refusal(entry):
    """An entry is a path of the stack's project only when, less its trailing slashes, it is
    ``<location>-docker.pkg.dev/<project>[/...]`` with the project id as written: a trailing space makes the id
    another one, a leading slash no Artifact Registry path, ``tpu-prodX`` another project. Such an entry stays in the
    trusted registries the refusal of an image from elsewhere lists, on the Job that runs it."""
    assert judge(JOB, job(PUBLIC), [UPSTREAM, entry]) == [
        (untrusted("Job step: container main", PUBLIC, f"{UPSTREAM}, {entry}"), urn_of(JOB))
    ]


@pytest.mark.parametrize(
    "entry", [OWN, f"{OWN}/", f"{OWN}//", f"{OWN}/team"], ids=["project", "trailing-slash", "two-slashes", "repository"]
)
def test_a_path_of_the_own_project_is_left_out_of_the_trusted_registries_of_the_refusal(entry):
    """Near miss: the same refusal, the entry (with or without trailing slashes) trusting nothing, not listed."""
    assert judge(JOB, job(PUBLIC), [UPSTREAM, entry]) == [
        (untrusted("Job step: container main", PUBLIC, UPSTREAM), urn_of(JOB))
    ]


@pytest.mark.parametrize(
    ("entry", "image"),
    [
        (OWN, f"{OWN}/team/maxtext:1"),
        (f"{OWN}/", f"{OWN}/team/maxtext:1"),
        (f"{OWN}/team/", f"{OWN}/team/maxtext:1"),
        (f"{OWN}/team-X", f"{OWN}/team-X/maxtext:1"),
    ],
    ids=["project", "project-trailing-slash", "repository-trailing-slash", "repository-ending-in-upper-case"],
)
def test_an_image_under_a_listed_path_of_the_own_project_is_refused_naming_the_entry_as_written(entry, image):
    """The image is under the entry (its trailing slash aside, nothing else trimmed): the refusal names the listing
    the operator wrote, on the Job that runs the image."""
    assert judge(JOB, job(image), [UPSTREAM, entry]) == [(listed(image, entry), urn_of(JOB))]


def test_an_image_of_the_own_project_under_no_listing_is_refused_as_untrusted():
    """Near miss: another repository of the project than the one listed relies on no listing."""
    image = f"{OWN}/other/maxtext:1"
    assert judge(JOB, job(image), [UPSTREAM, f"{OWN}/team/"]) == [
        (untrusted("Job step: container main", image, UPSTREAM), urn_of(JOB))
    ]


@pytest.mark.parametrize(("image", "shown"), [(None, "(none)"), (7, "7")], ids=["missing", "a-number"])
@pytest.mark.parametrize("entry", ["XXXX", "localhost"], ids=["upper-case-name", "lower-case-name"])
def test_an_image_that_is_no_text_is_never_trusted(image, shown, entry):
    """A missing or non-text image names no registry: no listed name trusts it, a bare one of any spelling included."""
    assert judge(JOB, job(image), [UPSTREAM, entry]) == [
        (untrusted("Job step: container main", shown, f"{UPSTREAM}, {entry}"), urn_of(JOB))
    ]


def workflow(patch: dict[str, Any]) -> dict[str, Any]:
    """An Argo Workflow whose one template runs a trusted image, with ``patch`` as its ``podSpecPatch`` (JSON)."""
    container = {"name": "main", "image": TRUSTED_IMAGE}
    template = {"name": "main", "container": container, "podSpecPatch": json.dumps(patch)}
    return {"metadata": {"name": "step"}, "spec": {"entrypoint": "main", "templates": [template]}}


def test_a_pod_spec_patch_container_without_an_image_is_not_judged():
    """It keeps the image of the container it patches, judged where it is."""
    patch = {"containers": [{"name": "main", "resources": {"limits": {"cpu": "1"}}}]}
    assert judge(WORKFLOW, workflow(patch), [UPSTREAM]) == []


def test_a_pod_spec_patch_container_that_sets_an_image_is_judged_after_one_that_does_not():
    """Each container of the patch is judged on its own: one without an image is passed over, the next that sets an
    untrusted one is refused, on the Workflow."""
    patch = {"containers": [{"name": "main", "resources": {"limits": {"cpu": "1"}}}, {"name": "side", "image": PUBLIC}]}
    assert judge(WORKFLOW, workflow(patch), [UPSTREAM]) == [
        (untrusted("Workflow step: container side", PUBLIC, UPSTREAM), urn_of(WORKFLOW))
    ]


def test_a_pod_spec_patch_container_that_sets_a_trusted_image_passes():
    patch = {"containers": [{"name": "side", "image": TRUSTED_IMAGE}]}
    assert judge(WORKFLOW, workflow(patch), [UPSTREAM]) == []


def test_an_empty_registry_is_refused_by_the_engine():
    """An entry ``""`` would be a prefix of every image's path: the schema asks for text, and the engine refuses an
    empty one before the pack runs (``ReconcilePolicyPackConfig``, as ``policy/judge_preview.py`` ``reconciled``)."""
    config = {"trusted-registries": {"registries": ["us-docker.pkg.dev/cloud-tpu-images", ""]}}
    with pytest.raises(BadInputError, match=r'trusted-registries\.registries\[1\]: "" is shorter than 1$'):
        judge_preview.reconciled([trusted_registries], config)
    assert judge_preview.reconciled([trusted_registries], {"trusted-registries": {"registries": ["a"]}})
