"""Kubeconfig for a GKE cluster using the gke-gcloud-auth-plugin exec plugin (plain function)."""

from __future__ import annotations

import yaml


def build_kubeconfig(context: str, endpoint: str, ca_certificate: str) -> str:
    """A kubeconfig whose credentials refresh through ``gke-gcloud-auth-plugin``.

    A static access token expires after about an hour; training runs for many
    hours while ``pulumi up`` awaits it, so the exec plugin is required.
    """
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": context,
        "clusters": [
            {
                "name": context,
                "cluster": {"server": f"https://{endpoint}", "certificate-authority-data": ca_certificate},
            }
        ],
        "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
        "users": [
            {
                "name": context,
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1beta1",
                        "command": "gke-gcloud-auth-plugin",
                        # Application Default Credentials, as the gcp provider and the README use; what
                        # `gcloud container clusters get-credentials` writes with
                        # container/use_application_default_credentials (googlecloudsdk kubeconfig.py).
                        "args": ["--use_application_default_credentials"],
                        "installHint": "Install gke-gcloud-auth-plugin: "
                        "gcloud components install gke-gcloud-auth-plugin",
                        "provideClusterInfo": True,
                    }
                },
            }
        ],
    }
    return yaml.safe_dump(config, sort_keys=False)
