"""Every project a resource names is the stack's, one its configuration names, or one the program pulls from
(``own-projects``): deny by default, where a name points (``core.project_refs``).

A resource of the stack is made in the stack's project (``gcp:project``), and what it refers to is there too: an
account (``...@<project>.iam.gserviceaccount.com``), a key, a reservation, a boot or image-cache disk's image
(``projects/<project>/...``), a registry (``<location>-docker.pkg.dev/<project>/...``). A project its configuration
names (a Cloud KMS key of another project in ``tpu-rl:gke``, a registry in ``tpu-rl:images``) is the operator's choice;
the program itself names only the projects it pulls its images from and GKE's service agents' (the closed world's
``upstreamProjects``, written by ``make closed-world`` from its plans). Any other project is refused, at any path of
any resource: a node pool's image cache from another project would run its images with the steps' tokens. A value not
known yet is judged at `pulumi up`.
"""

from __future__ import annotations

from typing import Any

from pulumi_policy import EnforcementLevel, Severity, StackValidationArgs, StackValidationPolicy

from core.closed_world import fill, load
from core.names import WORKLOAD_IDENTITY_ANNOTATION
from core.project_refs import configured_projects, projects_of

from .closed_world import _names
from .pods import _name, kind_of
from .properties import _m, unseen
from .resources import CLUSTER, DEPLOYMENT, Report, Resource, _guarded_stack

SERVICE_ACCOUNT = "kubernetes:core/v1:ServiceAccount"

WORLD = load()
UPSTREAM = WORLD.upstream_projects


def _own(resources: list[Resource]) -> set[str]:
    """The stack's project and those its configuration names; with no configuration from the engine, the projects
    of the stack's cluster."""
    if DEPLOYMENT.setting("gcp:project"):
        return configured_projects(DEPLOYMENT.config)
    return {
        r.props["project"] for r in resources if r.resource_type == CLUSTER and isinstance(r.props.get("project"), str)
    }


def _own_projects(args: StackValidationArgs, resources: list[Resource], report: Report) -> None:
    own = _own(resources)
    if not own:
        return
    shown = ", ".join(sorted(own))
    for r in resources:
        seen: set[tuple[str, str]] = set()
        for path, project in projects_of(r.props):
            if project in own or project in UPSTREAM or (path, project) in seen:
                continue
            seen.add((path, project))
            kind = kind_of(r.resource_type)
            where = f"{kind} {_name(r)}" if kind else f"{r.resource_type.rpartition(':')[2]} {r.name}"
            report(
                f"{where}: {path} names project {project}, which is neither the stack's nor one its configuration "
                f"names ({shown}) nor one the program pulls from ({', '.join(sorted(UPSTREAM))}); keep it in the "
                "stack's projects",
                r.urn,
            )


own_projects = StackValidationPolicy(
    name="own-projects",
    description=(
        "Every project a resource names (its project, an account, a key, an image, a reservation, a registry) is the "
        "stack's, one its configuration names, or one the program pulls its images from."
    ),
    severity=Severity.CRITICAL,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Keep the stack's resources and what they refer to in gcp:project, or name the project in the "
    "stack's configuration (a key, a registry) where the program takes one.",
    validate=_guarded_stack(_own_projects),
)


def _own_names(args: StackValidationArgs, resources: list[Resource], report: Report) -> None:
    """A Google Cloud resource the program names after the stack's cluster (an account, the network, the cluster, a
    key ring) carries one of the names the program gives it, of the stack's cluster name: with dev and prod in one
    project, a name of the other stack's is the other stack's account or network."""
    stacks = _names(resources)
    project = DEPLOYMENT.setting("gcp:project")
    for r in resources:
        if r.resource_type == SERVICE_ACCOUNT:
            _acts_as(r, project, report)
        for field, templates in WORLD.names.get(r.resource_type, {}).items():
            value = r.props.get(field)
            if unseen(value) or value is None:
                continue
            allowed = sorted({fill(t, n) for t in templates for n in stacks})
            if value not in allowed:
                report(
                    f"{r.resource_type.rpartition(':')[2]} {r.name}: {field} {value} is not a name the program gives "
                    f"one of this stack's ({', '.join(allowed)}): a name of another stack's is that stack's resource",
                    r.urn,
                )


def _acts_as(r: Resource, project: Any, report: Report) -> None:
    """A Kubernetes service account acts as the Google account of its own name in the stack's project (Workload
    Identity's annotation): the program names each as the account it acts as."""
    metadata = _m(r.props.get("metadata"))
    name, account = metadata.get("name"), _m(metadata.get("annotations")).get(WORKLOAD_IDENTITY_ANNOTATION)
    if account is None or unseen(account) or unseen(name) or not isinstance(project, str):
        return
    own = f"{name}@{project}.iam.gserviceaccount.com"
    if account != own:
        report(
            f"ServiceAccount {name}: {WORKLOAD_IDENTITY_ANNOTATION} is {account}, not the account of its own name "
            f"({own}): the program names each Kubernetes service account as the Google account it acts as",
            r.urn,
        )


own_names = StackValidationPolicy(
    name="own-names",
    description=(
        "A Google Cloud resource the program names after the stack's cluster (an account, the network, the cluster, a "
        "key ring) has one of the names it gives one, of the stack's own cluster name."
    ),
    severity=Severity.CRITICAL,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Keep the names infra/gcp/naming.py gives, of the stack's tpu-rl:clusterName.",
    validate=_guarded_stack(_own_names),
)
