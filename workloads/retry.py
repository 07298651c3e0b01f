"""Retrying a training run that failed in an earlier `pulumi up`.

The JobSet is awaited until its terminal state, so a *failed* run is a successfully created
resource as far as Pulumi is concerned: the next `up` sees no diff and would not re-run it.
Before registering the JobSet the program therefore reads the live object: if it ended
``Failed``, its UID becomes the JobSet's ``replacement_trigger`` (and is recorded in the
``tpu-rl/retry-of`` annotation of the new run), so Pulumi replaces it. A completed retry
keeps the same marker, so the following `up` is a no-op.
"""

from __future__ import annotations

from typing import Any

import yaml

RETRY_ANNOTATION = "tpu-rl/retry-of"


def retry_marker(live: dict[str, Any] | None) -> str:
    """UID of a live JobSet that ended Failed; otherwise the marker it was created with ("" if none)."""
    if not live:
        return ""
    metadata = live.get("metadata") or {}
    if (live.get("status") or {}).get("terminalState") == "Failed":
        return str(metadata.get("uid") or "")
    return str((metadata.get("annotations") or {}).get(RETRY_ANNOTATION, ""))


class ClusterReadError(Exception):
    """The live JobSet could not be read (network, credentials, permissions)."""


def read_live_jobset(kubeconfig: str, namespace: str, name: str) -> dict[str, Any] | None:
    """The JobSet as the API server has it, or None if it (or its CRD, or the namespace) does not exist yet."""
    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException

    api_client = config.new_client_from_config_dict(yaml.safe_load(kubeconfig))
    api_client.configuration.retries = 1
    try:
        return client.CustomObjectsApi(api_client).get_namespaced_custom_object(
            "jobset.x-k8s.io", "v1alpha2", namespace, "jobsets", name, _request_timeout=30
        )
    except ApiException as err:
        if err.status == 404:
            return None
        raise ClusterReadError(
            f"cannot read JobSet {namespace}/{name} to check for a failed earlier run: HTTP {err.status} {err.reason}"
        ) from None
    except Exception as err:  # noqa: BLE001 (urllib3, TLS and exec-plugin errors all mean the same to the user)
        raise ClusterReadError(
            f"cannot reach the cluster to read JobSet {namespace}/{name} ({type(err).__name__}); is this machine in "
            "tpu-rl:authorizedNetworks, and is gke-gcloud-auth-plugin installed and logged in?"
        ) from None
    finally:
        api_client.close()
