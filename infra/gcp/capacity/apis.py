"""The project: its APIs and the permissions the account running `up` holds on it.

- the APIs, ``service_usage_v1.ServiceUsageClient.batch_get_services``: the stack enables the ones it needs itself
  (``infra.gcp.apis``), so a disabled one is a note; a disabled Service Usage API, which that needs, is a problem;
- the permissions the stack's resources need (``infra.gcp.permissions``, docs/permissions.md), asked of Resource
  Manager (``projects.testIamPermissions``): every missing one in one line, with the role that grants it."""

from __future__ import annotations

from typing import Any

from core import deadline
from core.names import REQUIRED_APIS
from core.settings import Settings
from infra.gcp.capacity.findings import Finding
from infra.gcp.capacity.reads import Clients, ReadFailedError, as_enum, as_text, bounded_read

SERVICE_USAGE = "serviceusage.googleapis.com"


def api_findings(states: dict[str, str] | None, project: str, apis: tuple[str, ...] = REQUIRED_APIS) -> list[Finding]:
    """Which of the stack's APIs are not enabled yet (the stack enables them itself)."""
    if states is None:
        return [Finding("unknown", f"the APIs of project {project} could not be listed; they were not checked")]
    disabled = sorted(api for api in apis if states.get(api) != "ENABLED")
    return [Finding("note", f"this `up` enables {', '.join(disabled)} in project {project}")] if disabled else []


def service_states(message: Any) -> dict[str, str]:
    """``BatchGetServicesResponse`` as API name -> state name."""
    return {
        as_text(s.config.name, f"services[{n}].config.name", 80): as_enum(s.state)
        for n, s in enumerate(message.services)
    }


def check_permissions(settings: Settings, clients: Clients, budget: deadline.Budget) -> list[Finding]:
    """The permissions the stack's resources need (``infra.gcp.permissions``), asked of Resource Manager: missing
    ones are a problem, one line naming each with its role; a test that cannot be made is a warning."""
    from google.api_core import exceptions as api

    from infra.gcp.permissions import missing_text, needed

    wanted = needed(settings)
    try:
        held_permissions = bounded_read(
            f"testing the permissions of the account running `up` in project {settings.project}",
            "Resource Manager (projects.testIamPermissions)",
            lambda options: clients.permissions.test(settings.project, wanted, options),
            clients,
            budget,
        )
    except (ReadFailedError, api.NotFound) as err:
        return [Finding("unknown", f"{err}; the permissions (docs/permissions.md) were not checked")]
    text = missing_text(settings.project, wanted, held_permissions)
    return [Finding("problem", text)] if text else []


def read_api_states(
    project: str, apis: tuple[str, ...], clients: Clients, budget: deadline.Budget
) -> tuple[dict[str, str] | None, Finding | None]:
    """The state of each of ``apis`` in ``project`` (``services.batchGet``), or None and why not: a problem when
    the Service Usage API itself is disabled (the stack cannot enable the others: the check stops there), else a
    warning."""
    from google.api_core import exceptions as api

    try:
        states = bounded_read(
            f"listing the APIs of project {project}",
            "Service Usage (services.batchGet)",
            lambda options: service_states(
                clients.services.batch_get_services(
                    request={
                        "parent": f"projects/{project}",
                        "names": [f"projects/{project}/services/{a}" for a in apis],
                    },
                    **options,
                )
            ),
            clients,
            budget,
        )
    except (ReadFailedError, api.NotFound) as err:
        if f"{SERVICE_USAGE} is disabled" in str(err):
            return None, Finding(
                "problem",
                f"the Service Usage API is disabled in project {project}: the stack cannot enable "
                f"the APIs it needs; run `gcloud services enable {SERVICE_USAGE} --project "
                f"{project}`",
            )
        return None, Finding("unknown", f"{err}; the APIs were not checked")
    return states, None
