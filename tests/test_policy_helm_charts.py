"""``reviewed-helm-charts`` on small stacks built by hand, judged through pulumi-policy's own analyzer
(``tests/analyzer.py``): each finding is the exact line an operator reads on the release it names (the release's own
name, else its resource name; the charts and versions tpu-rl takes, listed; the provider's default namespace named as
such), a renderer is refused in words, a value that draws no finding (an empty post-renderer) draws none, and a
release whose chart or namespace the engine does not know is never judged as if it did."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from pulumi.output import Unknown

from core.kueue_manager import configuration
from policy import judge_preview
from policy.tpu_rl_policies.helm import reviewed_helm_charts
from policy.tpu_rl_policies.resources import HELM_RELEASE
from tests import analyzer

pytestmark = pytest.mark.pure

JOBSET = "oci://registry.k8s.io/jobset/charts/jobset"
KUEUE = "oci://registry.k8s.io/kueue/charts/kueue"
CHARTS = f"{JOBSET}, {KUEUE}"
JOBSET_VERSION = "0.12.0"
KUEUE_VERSION = "0.17.8"
CONFIG_YAML = "managerConfig.controllerManagerConfigYaml"
NOT_REVIEWED = "are not ones tpu-rl sets; a value can change the chart's images, privileges or webhooks"
DIFFER = (
    "differ from what tpu-rl sets (infra/k8s/kueue.py helm_values): a value can move the controller or widen what "
    "it manages (manageJobsWithoutQueueName); keep the program's"
)


def release(name: str = "jobset", /, **props: Any) -> analyzer.Resource:
    """A Helm release the stack registers as ``name``: JobSet's chart as the program installs it, but for ``props``
    (a property given as ``None`` is left out)."""
    base = {"name": name, "chart": JOBSET, "version": JOBSET_VERSION, "namespace": "jobset-system"}
    merged = {key: value for key, value in {**base, **props}.items() if value is not None}
    return analyzer.Resource(HELM_RELEASE, name, f"urn:pulumi:prod::tpu-rl::{HELM_RELEASE}::{name}", merged)


def judge(resource: analyzer.Resource, *, preview: bool = False) -> list[analyzer.Finding]:
    pack = analyzer.Pack(
        {"all": "mandatory"}, dry_run=preview, policies=[reviewed_helm_charts], stack="prod", stack_config={}
    )
    return pack.analyze(resource)


def found(resource: analyzer.Resource) -> list[str]:
    """The message of each finding at ``pulumi up``, every one mandatory, judged and on the release."""
    findings = judge(resource)
    assert all(f.level == "mandatory" and not f.unjudged and f.urn in ("", resource.urn) for f in findings), findings
    return [f.message for f in findings]


def another_chart(name: str, chart: str) -> str:
    return (
        f"Helm release {name} installs chart {chart}, which is not one tpu-rl installs ({CHARTS}): the policy pack "
        "cannot see what a chart renders (its pods, images and RBAC), so only reviewed charts are allowed"
    )


def in_namespace(name: str, namespace: str) -> str:
    return (
        f"Helm release {name} installs {JOBSET} in namespace {namespace}, not jobset-system: the chart's controller "
        "and its RBAC land where tpu-rl does not install them"
    )


def manager_config(**changes: Any) -> dict[str, Any]:
    """Kueue's manager configuration as the program writes it (its timeouts any duration), but for ``changes``."""
    manager = configuration(1800, 16200)
    return {
        **manager,
        "waitForPodsReady": {**manager["waitForPodsReady"], "timeout": "30m", "recoveryTimeout": "4h30m"},
        **changes,
    }


def kueue_values(**changes: Any) -> dict[str, Any]:
    return {
        "controllerManager": {"nodeSelector": {"cloud.google.com/gke-nodepool": "system"}},
        "managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(manager_config(**changes))},
    }


CASES = [
    # (id, release, the messages of its findings, in order)
    ("as-installed", release(), []),
    (
        "named-by-its-release-name",
        release("jobset", name="jobset-release", namespace=""),
        [in_namespace("jobset-release", "(the provider default)")],
    ),
    ("no-release-name", release("jobset", name=None, namespace="default"), [in_namespace("jobset", "default")]),
    ("a-release-name-not-text", release("jobset", name=7, namespace="default"), [in_namespace("jobset", "default")]),
    ("the-provider-default-namespace", release(namespace=None), [in_namespace("jobset", "(the provider default)")]),
    (
        "another-chart",
        release("miner", chart="oci://docker.io/someone/miner"),
        [another_chart("miner", "'oci://docker.io/someone/miner'")],
    ),
    ("a-chart-not-text", release("miner", chart=["x"]), [another_chart("miner", "['x']")]),
    (
        "another-version",
        release(version="0.11.0"),
        [
            "Helm release jobset: oci://registry.k8s.io/jobset/charts/jobset version '0.11.0' is not one the stack's "
            "manifests are validated against (0.10.1, 0.12.0); pin one of them"
        ],
    ),
    ("an-empty-post-renderer", release(postrender="", valueYamlFiles=[]), []),
    (
        "three-values-changed",
        release(
            "kueue", chart=KUEUE, version=KUEUE_VERSION, namespace="kueue-system", values=(kueue_values(a=1, b=2, c=3))
        ),
        [f"Helm release kueue: {CONFIG_YAML}.a, {CONFIG_YAML}.b, {CONFIG_YAML}.c {DIFFER}"],
    ),
]


@pytest.mark.parametrize(("case", "resource", "expected"), CASES, ids=[c[0] for c in CASES])
def test_each_finding_on_a_release_is_the_line_an_operator_reads(
    case: str, resource: analyzer.Resource, expected: list[str]
) -> None:
    assert found(resource) == expected


def test_a_renderer_is_refused_in_words() -> None:
    renderer = analyzer.Resource("kubernetes:helm.sh/v4:Chart", "evil", "urn:evil", {"chart": JOBSET})
    assert found(renderer) == [
        "kubernetes:helm.sh/v4:Chart evil renders Kubernetes objects from a chart or from files, out of the review "
        "the stack's own objects get: tpu-rl installs charts only as the reviewed Helm releases "
        "(infra/k8s/platform.py) and registers every other object itself"
    ]


@pytest.mark.parametrize("preview", [True, False], ids=["preview", "up"])
@pytest.mark.parametrize("field", ["chart", "namespace"])
def test_a_chart_or_namespace_not_known_is_not_judged(field: str, preview: bool) -> None:
    """A release whose chart or namespace the engine does not know yet is not taken for another chart or another
    namespace: at a preview the policy says it cannot judge it yet, at ``pulumi up`` that it is not known."""
    findings = judge(release(**{field: Unknown()}), preview=preview)
    (finding,) = findings
    if preview:
        assert finding.level == "advisory" and finding.unjudged, finding
        assert finding.message.startswith(f"{judge_preview.CANT_RUN}reviewed-helm-charts' from policy pack "), finding
        assert finding.message.endswith(
            f" during preview: .{field} not known until what they come from exists; judged at `pulumi up`"
        ), finding
    else:
        assert (finding.level, finding.unjudged, finding.message) == (
            "mandatory",
            False,
            f"cannot judge .{field}: not known at `pulumi up`; give it a value the program knows",
        )


def test_values_tpu_rl_does_not_set_are_each_named() -> None:
    """Every value path the program does not set is named, comma-separated (in the order the engine sends them)."""
    (message,) = found(release(values={"image": {"tag": "x"}, "replicas": 2}))
    assert message in (
        f"Helm release jobset: values image.tag, replicas {NOT_REVIEWED}",
        f"Helm release jobset: values replicas, image.tag {NOT_REVIEWED}",
    )
