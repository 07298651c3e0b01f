"""The platform: the GCP resources (``infra.gcp``: APIs, network, bucket, identities, cluster and pools,
and the capacity check) and the Kubernetes platform on the cluster (``infra.k8s``: provider, JobSet,
Kueue and its queues, namespace, token Secret, and the bounded live reader). Pure builders sit beside the
components that register them (``gke_spec``, ``kueue``, ``manifests``); nothing here imports ``workloads``.
"""
