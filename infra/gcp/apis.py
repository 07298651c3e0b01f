"""The Google Cloud APIs the stack needs, enabled and never disabled on destroy."""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp


class ProjectApis(pulumi.ComponentResource):
    """Enables the required services; destroying the stack leaves them enabled."""

    services: list[gcp.projects.Service]

    def __init__(
        self, name: str, project: str, apis: tuple[str, ...], opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("tpu-rl:gcp:ProjectApis", name, None, opts)
        self.services = [
            gcp.projects.Service(
                api.split(".")[0],
                project=project,
                service=api,
                disable_on_destroy=False,
                disable_dependent_services=False,
                opts=pulumi.ResourceOptions(parent=self),
            )
            for api in apis
        ]
        self.register_outputs({"services": [s.service for s in self.services]})
