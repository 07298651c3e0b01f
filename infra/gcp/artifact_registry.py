"""The stack's image mirrors (``tpu-rl:images.mirror``): an Artifact Registry remote repository in the stack's project
and region for each upstream Artifact Registry repository the images come from, and the node accounts' grants to pull
through them (``infra.gcp.access.registry_grants``).

Why: GKE's Image streaming streams images from Artifact Registry standard or remote repositories, and a node service
account of its own needs the Service Usage Consumer role in the project that hosts them ("Use Image streaming to pull
container images", https://cloud.google.com/kubernetes-engine/docs/how-to/image-streaming, Requirements), which no
stack has in Google's projects of the public TPU images. A remote repository of the stack's own is in its project and
region; the first pull of an image copies it there, later pulls are served from the copy ("Remote repository
overview", https://cloud.google.com/artifact-registry/docs/repositories/remote-overview). The pure arguments are
``core.images.repository_args``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pulumi
import pulumi_gcp as gcp

from core.images import Mirror, repository_args
from infra.gcp.access import registry_grants
from infra.gcp.identities import grant_key
from infra.options import child_options

ARTIFACT_REGISTRY_API = "artifactregistry.googleapis.com"


@dataclass(frozen=True)
class ImageMirrorArgs:
    """What the mirrors and their grants are built from."""

    project: str
    mirrors: dict[str, Mirror]
    """Upstream repository -> its mirror (``core.images.mirrors_for``)."""
    pullers: Mapping[str, pulumi.Input[str]]
    """Node account (``cpu``, ``tpu``) -> its email."""
    labels: dict[str, str] = field(default_factory=dict)


class ImageMirror(pulumi.ComponentResource):
    """The remote repositories and the pullers' grants on them."""

    repositories: list[gcp.artifactregistry.Repository]
    grants: list[pulumi.Resource]
    grant_keys: list[pulumi.Output[str]]
    """What identifies each grant (its id): what the node pools' propagation wait waits again for when one is new."""

    def __init__(self, name: str, args: ImageMirrorArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("tpu-rl:gcp:ImageMirror", name, None, opts)
        child = child_options(self, opts)
        by_id = {m.repository_id: m for m in args.mirrors.values()}
        self.repositories = [
            gcp.artifactregistry.Repository(repo_id, **repository_args(mirror, args.labels), opts=child)
            for repo_id, mirror in by_id.items()
        ]
        repos = dict(zip(by_id, self.repositories, strict=True))
        self.grants, self.grant_keys = [], []
        for grant in registry_grants(list(by_id)):
            member = pulumi.Output.from_input(args.pullers[grant.holder]).apply(lambda e: f"serviceAccount:{e}")
            resource: pulumi.CustomResource
            if grant.repository is None:
                resource = gcp.projects.IAMMember(
                    grant.resource_name, project=args.project, role=grant.role, member=member, opts=child
                )
            else:
                mirror = by_id[grant.repository]
                resource = gcp.artifactregistry.RepositoryIamMember(
                    grant.resource_name,
                    project=mirror.project,
                    location=mirror.location,
                    repository=repos[grant.repository].name,
                    role=grant.role,
                    member=member,
                    opts=child,
                )
            self.grants.append(resource)
            self.grant_keys.append(grant_key(resource.id))
        self.register_outputs({"repositories": [r.name for r in self.repositories], "grants": len(self.grants)})
