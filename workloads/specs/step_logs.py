"""Where a step's logs are read (plain strings, no Pulumi): the ``kubectl logs`` command and the Cloud Logging
query URL each ``Step`` carries (``workloads.specs.step_specs``), for `pulumi up`'s messages and the operator."""

from __future__ import annotations

import urllib.parse

from core.printed_commands import kubectl
from core.settings import Settings


def logs_command(settings: Settings, job: str, container: str) -> str:
    """The step's logs: the pods of its first replicated Job (``job-name`` label), one container, in the stack's
    cluster (``--context``: the shell's current one may be another stack's)."""
    return kubectl(
        settings, "logs", "-n", settings.namespace, "-l", f"job-name={job}", "-c", container, "--tail=200", "-f"
    )


def console_logs_url(settings: Settings, pod_prefix: str, container: str | None = None) -> str:
    """A Cloud Logging query for the step's pods ("" where the cluster is not a GKE cluster the stack can name:
    ``Settings.gke_cluster``)."""
    if settings.gke_cluster is None:
        return ""
    project, _, cluster = settings.gke_cluster
    query = (
        'resource.type="k8s_container"\n'
        f'resource.labels.project_id="{project}"\n'
        f'resource.labels.cluster_name="{cluster}"\n'
        f'resource.labels.namespace_name="{settings.namespace}"\n'
        f'resource.labels.pod_name:"{pod_prefix}"'
    )
    if container:
        query += f'\nresource.labels.container_name="{container}"'
    return (
        "https://console.cloud.google.com/logs/query;query="
        + urllib.parse.quote(query, safe="")
        + f"?project={project}"
    )
