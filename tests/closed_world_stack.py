"""Small stacks for ``closed-world``, judged through pulumi-policy's own analyzer (``tests/analyzer.py``): the
policy, the type tokens and the dev stack's image mirror (shared by ``tests/test_policy_closed_world.py`` and
``tests/test_policy_closed_world_edges.py``)."""

from __future__ import annotations

from typing import Any

from tests import analyzer

CLOSED = analyzer.pack_policy("closed-world")
MAXTEXT = "us-docker.pkg.dev/cloud-tpu-images/maxtext-images/tpu_post_training"
UPSTREAM = "https://us-docker.pkg.dev/cloud-tpu-images/maxtext-images"
MIRROR_PATH = "us-east5-docker.pkg.dev/my-tpu-dev-project/tpu-rl-dev-cloud-tpu-images-maxtext-images"
"""Where the dev stack's mirror of ``UPSTREAM`` serves its images."""
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
ROLE_BINDING = "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding"
REPOSITORY = "gcp:artifactregistry/repository:Repository"

Spec = tuple[str, str, dict[str, Any]]
"""A resource of a small stack: its type token, name and properties."""


def mirror(upstream: Any = UPSTREAM, **props: Any) -> Spec:
    """The dev stack's remote repository mirroring ``upstream``, with ``props`` over its inputs."""
    inputs = {
        "project": "my-tpu-dev-project",
        "location": "us-east5",
        "repositoryId": "tpu-rl-dev-cloud-tpu-images-maxtext-images",
        "mode": "REMOTE_REPOSITORY",
        "format": "DOCKER",
        "remoteRepositoryConfig": {"commonRepository": {"uri": upstream}},
        **props,
    }
    return (REPOSITORY, "mirror", inputs)
