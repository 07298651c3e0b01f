"""Who may read the Hugging Face write token, judged directly (``iam._write_token``, the ``hub-write-token-scope``
check): every way a container reaches its Secret (an env ``secretKeyRef``, an ``envFrom`` ``secretRef``, a mounted
``secret`` or ``projected`` volume), named in the one line an operator reads, on the resource that holds the pod; and
the publication's own container, the only one exempt. Beside it, two small judgements the pack rests on: a mounted
file the launcher's hash cannot be taken of is not the launcher (``scripts._is_launcher``), and GKE's Secrets
encryption is required only where the policy config says so (``storage._secrets_encryption``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pulumi_policy import ResourceValidationArgs

from core.names import COMPONENT_LABEL, HF_SECRET, HF_WRITE_SECRET, PUBLISH_ENV
from core.steps import WRITE_TOKEN_HOLDERS
from policy.tpu_rl_policies.iam import _write_token
from policy.tpu_rl_policies.resources import CLUSTER, Resource
from policy.tpu_rl_policies.scripts import _is_launcher
from policy.tpu_rl_policies.storage import _secrets_encryption, secrets_encryption
from tests.policy_args import OPTIONS, Reports, stack_args
from workloads.container import launch

pytestmark = pytest.mark.pure

POD = "kubernetes:core/v1:Pod"
PUBLICATION = WRITE_TOKEN_HOLDERS[0]
REPO_ENV, BRANCH_ENV, _PRIVATE_ENV = PUBLISH_ENV
WRITE_ENV = {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": HF_WRITE_SECRET, "key": "token"}}}
"""The write token as the publish step's container reads it."""
READ_ENV = {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": HF_SECRET, "key": "token"}}}
SCOPE = "only the publication's container may (it can push to, and delete, the stack's model repositories)"


def _pod(*containers: dict[str, Any], component: str = "train", volumes: list[Any] | None = None) -> Resource:
    """A Pod of the stack labelled as the step ``component``'s, running ``containers``."""
    props = {
        "metadata": {"name": "step-pod", "labels": {COMPONENT_LABEL: component}},
        "spec": {"containers": list(containers), "volumes": volumes or []},
    }
    return Resource(POD, props, f"urn:pulumi:dev::tpu-rl::{POD}::step", "step")


def _findings(*resources: Resource) -> list[tuple[str, str | None]]:
    report = Reports()
    _write_token(stack_args(), list(resources), report)
    return report.calls


def _line(container: str, refs: str) -> str:
    return f"Pod step-pod: container {container} reads the Hub write token ({refs}): {SCOPE}"


SECRET_VOLUME = {"name": "w", "secret": {"secretName": HF_WRITE_SECRET}}
PROJECTED_VOLUME = {
    "name": "w",
    "projected": {"sources": [{"configMap": {"name": "x"}}, {"secret": {"name": HF_WRITE_SECRET}}]},
}
MOUNT = {"name": "w", "mountPath": "/w"}


@pytest.mark.parametrize(
    ("container", "volumes", "refs"),
    [
        pytest.param({"env": [WRITE_ENV]}, [], "env HF_TOKEN", id="env-secretKeyRef"),
        pytest.param({"envFrom": [{"secretRef": {"name": HF_WRITE_SECRET}}]}, [], "envFrom", id="envFrom-secretRef"),
        pytest.param({"volumeMounts": [MOUNT]}, [SECRET_VOLUME], "volume w", id="secret-volume"),
        pytest.param({"volumeMounts": [MOUNT]}, [PROJECTED_VOLUME], "volume w", id="projected-volume"),
        pytest.param(
            {
                "env": [WRITE_ENV],
                "envFrom": [{"configMapRef": {"name": "x"}}, {"secretRef": {"name": HF_WRITE_SECRET}}],
                "volumeMounts": [MOUNT],
            },
            [SECRET_VOLUME],
            "env HF_TOKEN, envFrom, volume w",
            id="every-route-at-once",
        ),
    ],
)
def test_each_route_to_the_write_token_is_named_on_the_resource_that_holds_the_pod(container, volumes, refs):
    """A container outside the publication that reaches the write token's Secret by env, envFrom or a mounted
    volume is one finding, on the pod's resource, naming every route it takes (an operator removes each)."""
    pod = _pod({"name": "trainer", **container}, volumes=volumes)
    assert _findings(pod) == [(_line("trainer", refs), pod.urn)]


@pytest.mark.parametrize(
    ("container", "volumes"),
    [
        pytest.param({"env": [READ_ENV]}, [], id="env-read-token"),
        pytest.param({"envFrom": [{"secretRef": {"name": HF_SECRET}}]}, [], id="envFrom-read-token"),
        pytest.param({"envFrom": [{"configMapRef": {"name": HF_WRITE_SECRET}}]}, [], id="envFrom-configMap"),
        pytest.param(
            {"volumeMounts": [MOUNT]}, [{"name": "w", "secret": {"secretName": HF_SECRET}}], id="read-token-volume"
        ),
        pytest.param({"volumeMounts": [{"name": "other", "mountPath": "/o"}]}, [SECRET_VOLUME], id="volume-unmounted"),
    ],
)
def test_other_secrets_and_unmounted_volumes_are_no_route_to_the_write_token(container, volumes):
    """The read token's Secret, a ConfigMap of the write token's name and a write-token volume the container does not
    mount give it nothing of the write token."""
    assert _findings(_pod({"name": "trainer", **container}, volumes=volumes)) == []


def test_the_publication_container_that_publishes_may_read_the_write_token_and_its_siblings_may_not():
    """In the publication's pod the container that publishes (the one given the repository to publish to) is exempt;
    every other container of that pod, before or after it, is judged as any other."""
    publisher = {"name": "publish", "env": [{"name": REPO_ENV, "value": "acme/m"}, WRITE_ENV]}
    pod = _pod(
        {"name": "before", "env": [WRITE_ENV]},
        publisher,
        {"name": "after", "envFrom": [{"secretRef": {"name": HF_WRITE_SECRET}}]},
        component=PUBLICATION,
    )
    assert _findings(pod) == [(_line("before", "env HF_TOKEN"), pod.urn), (_line("after", "envFrom"), pod.urn)]


@pytest.mark.parametrize(
    ("component", "env"),
    [
        pytest.param("train", [{"name": REPO_ENV, "value": "acme/m"}, WRITE_ENV], id="publish-env-outside-publication"),
        pytest.param(PUBLICATION, [WRITE_ENV], id="publication-without-publish-env"),
        pytest.param(PUBLICATION, [{"name": BRANCH_ENV, "value": "main"}, WRITE_ENV], id="publication-branch-only"),
    ],
)
def test_the_exemption_needs_both_the_publication_pod_and_its_publishing_container(component, env):
    """Neither half exempts alone: a container outside the publication given the repository to publish to, and a
    container of the publication's pod not given it (a branch is no repository), both reading the token, are each
    a finding."""
    pod = _pod({"name": "c", "env": env}, component=component)
    assert _findings(pod) == [(_line("c", "env HF_TOKEN"), pod.urn)]


def test_the_publishing_container_is_exempt_only_with_the_repository_to_publish_to():
    """The contrast of the cases above: the publication's container given the repository reads the token unflagged."""
    pod = _pod({"name": "publish", "env": [WRITE_ENV, {"name": REPO_ENV, "value": "acme/m"}]}, component=PUBLICATION)
    assert _findings(pod) == []


LAUNCHER_TEXT = Path(launch.__file__).read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("\ud800", id="lone-surrogate"),
        pytest.param(LAUNCHER_TEXT + "\udcff", id="launcher-and-a-surrogate"),
        pytest.param("#!/usr/bin/env python3\n\udc80", id="script-with-a-surrogate"),
    ],
)
def test_a_text_with_a_lone_surrogate_is_not_the_launcher_rather_than_an_error(text):
    """A mounted file's text that is no valid Unicode (a lone surrogate, as a JSON ``\\ud800`` escape decodes to) is
    hashed as it is and judged not the launcher: reading it never raises."""
    assert _is_launcher(text) is False


def test_the_launcher_is_known_by_its_text():
    assert _is_launcher(LAUNCHER_TEXT) is True
    assert _is_launcher(LAUNCHER_TEXT + "\n") is False


def _cluster_findings(config: dict[str, Any]) -> list[tuple[str, str | None]]:
    report = Reports()
    args = _cluster_args(config)
    _secrets_encryption(args, dict(args.props), report)
    return report.calls


def _cluster_args(config: dict[str, Any]) -> ResourceValidationArgs:
    props = {"databaseEncryption": {"state": "DECRYPTED"}}
    return ResourceValidationArgs(CLUSTER, props, "urn:pulumi:dev::tpu-rl::c::c", "c", OPTIONS, None, config)


def test_secrets_encryption_reads_required_as_the_engine_sends_it():
    """The engine sends ``required`` always, its schema's default (false) where the config does not set it
    (``ReconcilePolicyPackConfig``): an unencrypted cluster is a finding only where the config asks for encryption."""
    assert secrets_encryption.config_schema is not None
    assert secrets_encryption.config_schema.properties["required"]["default"] is False
    assert _cluster_findings({"required": False}) == []
    assert len(_cluster_findings({"required": True})) == 1
