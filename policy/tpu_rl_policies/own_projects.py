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

from pulumi_policy import EnforcementLevel, Severity, StackValidationArgs, StackValidationPolicy

from core.closed_world import load
from core.project_refs import configured_projects, projects_of

from .pods import _name, kind_of
from .resources import CLUSTER, DEPLOYMENT, Report, Resource, _guarded_stack

UPSTREAM = load().upstream_projects


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
