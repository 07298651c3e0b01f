"""``reviewed-helm-charts`` at the edges of the values it compares: values that are not a mapping (text that is not
YAML, YAML of a scalar or a list), a key YAML reads as a number, a list of another length or another item, and a value
path that runs past or stops short of a reviewed one; each named as the operator reads it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from pulumi_policy import ResourceValidationArgs

from infra.k8s import kueue
from policy.tpu_rl_policies.helm import HELM_CHARTS, INSTALLED, reviewed_helm_charts
from policy.tpu_rl_policies.resources import DEPLOYMENT, HELM_RELEASE
from tests.policy_args import OPTIONS, Reports

pytestmark = pytest.mark.pure

JOBSET = "oci://registry.k8s.io/jobset/charts/jobset"
KUEUE = "oci://registry.k8s.io/kueue/charts/kueue"
CONFIG_YAML = "managerConfig.controllerManagerConfigYaml"
DIFFER = (
    " differ from what tpu-rl sets (infra/k8s/kueue.py helm_values): a value can move the controller or widen what "
    "it manages (manageJobsWithoutQueueName); keep the program's"
)


@pytest.fixture(autouse=True)
def at_up(monkeypatch):
    """Judged as at ``pulumi up`` (every value known)."""
    monkeypatch.setattr(DEPLOYMENT, "dry_run", False)


def findings(chart: str, values: Any) -> list[str]:
    """What the policy reports on a release of ``chart`` as the program installs it, but for ``values``."""
    name = chart.rsplit("/", 1)[-1]
    props = {
        "name": name,
        "chart": chart,
        "version": HELM_CHARTS[chart][0][-1],
        "namespace": INSTALLED[chart][0],
        "values": values,
    }
    urn = f"urn:pulumi:dev::tpu-rl::{HELM_RELEASE}::{name}"
    report = Reports()
    reviewed_helm_charts.validate(ResourceValidationArgs(HELM_RELEASE, props, urn, name, OPTIONS, None), report)
    return [message for message, _ in report.calls]


def kueue_values(change: Any = None) -> dict[str, Any]:
    """Kueue's values as the program writes them, its manager configuration (YAML text) passed through ``change``."""
    settings = SimpleNamespace(kueue=SimpleNamespace(pods_ready_timeout=1800, recovery_timeout=16200))
    values = kueue.helm_values(settings)  # type: ignore[arg-type]
    if change is not None:
        config = yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])
        changed = change(config)
        values["managerConfig"]["controllerManagerConfigYaml"] = (
            changed if isinstance(changed, str) else yaml.safe_dump(config)
        )
    return values


def frameworks(value: Any) -> Any:
    def change(config: dict[str, Any]) -> None:
        config["integrations"]["frameworks"] = value

    return change


def test_the_programs_kueue_values_draw_no_finding():
    assert findings(KUEUE, kueue_values()) == []
    assert findings(JOBSET, {}) == []


@pytest.mark.parametrize(
    "values",
    ["controllerManager: [unclosed", "5", "- a list"],
    ids=["not-yaml", "yaml-scalar", "yaml-list"],
)
def test_values_that_are_not_a_mapping_are_named_values(values):
    """The release's whole ``values`` given as text that is not YAML of a mapping: named ``values``, not left blank."""
    assert findings(JOBSET, values) == [f"Helm release jobset: values{DIFFER}"]


@pytest.mark.parametrize(
    "text",
    ["apiVersion: [unclosed", "- kind: Configuration", "Configuration"],
    ids=["not-yaml", "yaml-list", "yaml-scalar"],
)
def test_a_manager_configuration_that_is_not_a_mapping_is_named_at_its_path(text):
    assert findings(KUEUE, kueue_values(lambda config: text)) == [f"Helm release kueue: {CONFIG_YAML}{DIFFER}"]


def test_a_configuration_key_yaml_reads_as_a_number_is_named_among_the_text_keys():
    """YAML reads ``1:`` as the integer 1: compared with the text keys, it is named, not a crash on sorting them."""

    def change(config: dict[Any, Any]) -> None:
        config[1] = "one"
        config["zzz"] = "last"

    assert findings(KUEUE, kueue_values(change)) == [f"Helm release kueue: {CONFIG_YAML}.1, {CONFIG_YAML}.zzz{DIFFER}"]


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ("batch/job", "integrations.frameworks"),
        (7, "integrations.frameworks"),
        (["batch/job"], "integrations.frameworks"),
        (["batch/job", "jobset.x-k8s.io/jobset", "pod"], "integrations.frameworks"),
        (["batch/job", "pod"], "integrations.frameworks[1]"),
        (["pod", "jobset.x-k8s.io/jobset"], "integrations.frameworks[0]"),
    ],
    ids=["text", "number", "shorter", "longer", "second-item", "first-item"],
)
def test_a_list_of_another_shape_or_item_is_named_where_it_differs(value, path):
    """A list the program writes (Kueue's integrations) compared item by item only when it is a list of the same
    length: otherwise the list itself is named; an item that differs is named by its index."""
    assert findings(KUEUE, kueue_values(frameworks(value))) == [f"Helm release kueue: {CONFIG_YAML}.{path}{DIFFER}"]


@pytest.mark.parametrize(
    ("values", "path"),
    [
        ({"controllerManager": {}}, "controllerManager"),
        ({"controllerManager": {"nodeSelector": "system"}}, "controllerManager.nodeSelector"),
        (
            {"controllerManager": {"nodeSelector": {"cloud.google.com/gke-nodepool": {"pool": "system"}}}},
            "controllerManager.nodeSelector.cloud.google.com/gke-nodepool.pool",
        ),
        ({"managerConfig": {"controllerManagerConfigYaml": {"kind": "x"}}}, f"{CONFIG_YAML}.kind"),
        ({"managerConfig": "x"}, "managerConfig"),
    ],
    ids=["short-of-node-selector", "node-selector-text", "past-node-selector", "past-config-yaml", "short-of-config"],
)
def test_a_value_path_shorter_or_longer_than_a_reviewed_one_is_not_reviewed(values, path):
    """A reviewed value path is matched whole: a path that stops inside one or runs past its end is a value tpu-rl
    does not set (named as such), not a match of its common part."""
    assert findings(KUEUE, values) == [
        f"Helm release kueue: values {path} are not ones tpu-rl sets; a value can change the chart's images, "
        "privileges or webhooks"
    ]


def test_more_than_three_differences_are_counted_after_the_first_three():
    def change(config: dict[str, Any]) -> None:
        config["integrations"]["frameworks"] = ["a", "b"]
        config["webhook"]["port"] = 1
        config["health"] = "x"

    assert findings(KUEUE, kueue_values(change)) == [
        f"Helm release kueue: {CONFIG_YAML}.health, {CONFIG_YAML}.integrations.frameworks[0], "
        f"{CONFIG_YAML}.integrations.frameworks[1] and 1 more{DIFFER}"
    ]
