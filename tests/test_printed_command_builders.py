"""The builders of the commands the product prints (``core.printed_commands``), called directly: each command's exact
words for a stack, with and without its home and organization known, ``--path`` and the key's namespace as the
Pulumi CLI reads them, and the value quoted for the shell unless it is a placeholder."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from core import printed_commands as printed

pytestmark = pytest.mark.pure

CLI = "tpu-rl pulumi --stack prod --"
"""The stack's home and ``--stack`` for one pulumi process, or no pulumi (tools/tpu_rl.py)."""


@dataclass(frozen=True)
class Cluster:
    kube_context: str = "gke_my-project_us-east5_tpu-rl-prod"


def test_kubectl_helm_and_make_name_the_stacks_cluster_and_stack() -> None:
    assert printed.kubectl(Cluster(), "get", "pods") == "kubectl --context gke_my-project_us-east5_tpu-rl-prod get pods"
    assert printed.kubectl("ctx", "logs") == "kubectl --context ctx logs"
    assert printed.helm(Cluster(), "list") == "helm --kube-context gke_my-project_us-east5_tpu-rl-prod list"
    assert printed.make_target("status", "prod", "WATCH=1") == "make status STACK=prod WATCH=1"


def test_a_pulumi_command_names_its_home_and_stack() -> None:
    assert printed.stack_name("prod") == "prod"
    assert printed.stack_name("prod", "acme") == "acme/prod"
    assert printed.pulumi_command("prod", "stack", "export") == f"{CLI} stack export"
    assert printed.pulumi_command("prod", "refresh", url="https://api.pulumi.com", organization="acme") == (
        "PULUMI_BACKEND_URL=https://api.pulumi.com pulumi refresh --stack acme/prod"
    )


@pytest.mark.parametrize(
    ("key", "path"),
    [
        ("tpu-rl:workflow.enabled", True),
        ("tpu-rl:authorizedNetworks[0]", True),
        ("tpu-rl:hfToken", False),
        ("gcp:project", False),
        ("tpu-rl:labels.team:x", True),
    ],
    ids=["a-field", "a-list-item", "flat", "another-namespace", "a-colon-in-the-path"],
)
def test_only_a_nested_key_needs_path(key: str, path: bool) -> None:
    assert printed.needs_path(key) is path


@pytest.mark.parametrize(
    ("key", "full"),
    [
        ("workflow.enabled", "tpu-rl:workflow.enabled"),
        ("gcp:project", "gcp:project"),
        ("tpu-rl:a.b", "tpu-rl:a.b"),
        ("labels.team:x", "tpu-rl:labels.team:x"),
        ("networks[a:b]", "tpu-rl:networks[a:b]"),
    ],
    ids=["no-namespace", "its-own", "the-projects", "a-colon-after-a-dot", "a-colon-in-brackets"],
)
def test_a_key_without_a_namespace_is_the_projects(key: str, full: str) -> None:
    assert printed.full_key(key) == full


def test_config_set_and_rm_in_full() -> None:
    assert printed.pulumi_config_set("prod", "workflow.enabled", "false") == (
        f"{CLI} config set --path 'tpu-rl:workflow.enabled' false"
    )
    assert printed.pulumi_config_set("prod", "tpu-rl:hfToken", secret=True) == (
        f"{CLI} config set --secret 'tpu-rl:hfToken'"
    )
    assert printed.pulumi_config_set("prod", "authorizedNetworks[0]", "<your CIDR>", secret=True) == (
        f"{CLI} config set --secret --path 'tpu-rl:authorizedNetworks[0]' <your CIDR>"
    )
    assert printed.pulumi_config_rm("prod", "workflow.enabled") == f"{CLI} config rm --path 'tpu-rl:workflow.enabled'"
    assert printed.pulumi_config_rm("prod", "gcp:zone") == f"{CLI} config rm 'gcp:zone'"


@pytest.mark.parametrize(
    ("value", "typed"),
    [
        ("<your CIDR>", "<your CIDR>"),
        ("10.0.0.0/8 <yours>", "10.0.0.0/8 <yours>"),
        ("STACK", "STACK"),
        ("a b", "'a b'"),
        ("x<y", "'x<y'"),
        ("<>", "'<>'"),
        ("it's", "'it'\"'\"'s'"),
    ],
    ids=["a-placeholder", "text-around-one", "a-word", "a-space", "an-open-bracket", "an-empty-placeholder", "a-quote"],
)
def test_a_value_is_quoted_for_the_shell_unless_it_is_a_placeholder(value: str, typed: str) -> None:
    assert printed.pulumi_config_set("dev", "x", value).endswith(f"'tpu-rl:x' {typed}")
