"""What the program always makes is there (``always-made``), from the closed world's ``always`` and ``podLabels``
(``core/data/closed-world.json``, written by ``make closed-world`` from the program's own plans).

The closed world refuses what the program never makes; this refuses the lack of what it makes whatever the
configuration: the namespace (its pod security labels are pinned by ``closed-world-shapes``), the NetworkPolicies
(default-deny ingress, the evaluation's egress, the training pods' own traffic) and the steps' Kubernetes service
accounts, each by its type and logical name; and on every pod of every workload, the labels
the program puts on every step's pods, which the NetworkPolicies and the queues select by (a pod without its step
label is outside its step's policy).
"""

from __future__ import annotations

from pulumi_policy import EnforcementLevel, Severity, StackValidationArgs, StackValidationPolicy

from core.closed_world import load

from .pods import _name, kind_of, pods
from .properties import _m, judging, unseen
from .resources import Report, Resource, _guarded_stack

WORLD = load()


def _always_made(args: StackValidationArgs, resources: list[Resource], report: Report) -> None:
    held = {(r.resource_type, r.name) for r in resources}
    for type_, name in sorted(WORLD.always - held):
        report(f"{type_} {name} is missing: the program makes it whatever the configuration; restore it")
    for r in resources:
        if not r.resource_type.startswith("kubernetes:"):
            continue  # another provider's image (the stack's outputs name the steps' images) is no pod
        for pod in pods(r.resource_type, r.props):
            if pod.origin not in ("api", "shape", "patch"):
                continue  # a lone container or pod fields: no metadata of a pod's to label
            with judging():
                labels = _m(pod.metadata.get("labels"))
                missing = [key for key in sorted(WORLD.pod_labels) if key not in labels]
                if missing and not unseen(pod.metadata.get("labels")):
                    report(
                        f"{kind_of(r.resource_type) or r.resource_type} {_name(r)}: pod {pod.where} lacks the label "
                        f"{', '.join(missing)}, which the program puts on every step's pods (its NetworkPolicies and "
                        "queues select pods by them); restore it",
                        r.urn,
                    )


always_made = StackValidationPolicy(
    name="always-made",
    description=(
        "What the program makes whatever the configuration (the namespace, its NetworkPolicies, the steps' service "
        "accounts) is there, and every pod carries the labels the program puts on every step's "
        "pods."
    ),
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps=(
        "Keep what infra/k8s/ and workloads/ make; after a change to the program, run `make closed-world`."
    ),
    validate=_guarded_stack(_always_made),
)
