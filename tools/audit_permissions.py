"""The permissions each question of the access audit asks about (``tools/audit.py``), as plain data: whoever holds any
of a set on the resource it concerns can do what the finding says (docs/audit.md "What it asks, and of which
policies", whose table lists them)."""

from __future__ import annotations

DECRYPT = frozenset({"cloudkms.cryptoKeyVersions.useToDecrypt"})
STATE = frozenset({"storage.objects.get", "storage.objects.create", "storage.objects.delete"})
TOKENS = frozenset(
    {
        "iam.serviceAccounts.getAccessToken",
        "iam.serviceAccounts.signBlob",
        "iam.serviceAccounts.signJwt",
        "iam.serviceAccounts.implicitDelegation",
        "iam.serviceAccounts.getOpenIdToken",
        "iam.serviceAccounts.actAs",
        "iam.serviceAccountKeys.create",
        "iam.serviceAccountKeys.upload",
    }
)
"""Acting as an account: a token, a signature, or a key of it (a key made or uploaded signs as the account until it is
deleted: https://cloud.google.com/iam/docs/keys-create-delete, https://cloud.google.com/iam/docs/keys-upload)."""
WORKLOADS = (
    "jobs",
    "cronJobs",
    "scheduledJobs",
    "deployments",
    "daemonSets",
    "statefulSets",
    "replicaSets",
    "replicationControllers",
)
"""The Kubernetes kinds whose objects run a pod template (``scheduledJobs`` is GKE's older name of CronJobs)."""
CLUSTER = frozenset(
    {
        # the cluster itself, and acting as any of its users
        "container.clusters.update",
        "container.clusters.delete",
        "container.clusters.impersonate",
        # its Secrets (the Hugging Face tokens)
        "container.secrets.get",
        "container.secrets.list",
        # code in a running pod, or a token of its Kubernetes service account (the step accounts' Workload Identity)
        "container.pods.exec",
        "container.pods.attach",
        "container.nodes.proxy",
        "container.serviceAccounts.createToken",
        # a workload of one's own, or a change to what the stack's run: a pod, anything that runs a pod template,
        # the steps' scripts (ConfigMaps), their JobSets (custom resources), a webhook that rewrites pods
        "container.pods.create",
        "container.pods.update",
        *(f"container.{kind}.{verb}" for kind in WORKLOADS for verb in ("create", "update")),
        "container.configMaps.create",
        "container.configMaps.update",
        "container.thirdPartyObjects.create",
        "container.thirdPartyObjects.update",
        "container.mutatingWebhookConfigurations.create",
        "container.mutatingWebhookConfigurations.update",
        # a role bound, or granted beyond one's own
        "container.clusterRoleBindings.create",
        "container.clusterRoleBindings.update",
        "container.roleBindings.create",
        "container.roleBindings.update",
        "container.clusterRoles.bind",
        "container.clusterRoles.escalate",
        "container.roles.bind",
        "container.roles.escalate",
    }
)
"""Administering a cluster: changing or deleting it, and GKE's IAM permissions on its Kubernetes API (one per kind and
verb, custom resources such as JobSets as ``thirdPartyObjects``: https://cloud.google.com/kubernetes-engine/docs/
reference/api-permissions, https://cloud.google.com/iam/docs/roles-permissions/container) that read Secrets, run code
in a pod or as its account, create or change a workload or what it runs, or bind a role. ``roles/container.admin``'s
list names no permission for a pod's ephemeral containers: ``container.pods.update``, the nearest, is asked."""
POOL = frozenset(
    {
        "iam.workloadIdentityPools.create",
        "iam.workloadIdentityPools.update",
        "iam.workloadIdentityPools.delete",
        "iam.workloadIdentityPools.undelete",
        "iam.workloadIdentityPools.setIamPolicy",
        "iam.workloadIdentityPoolProviders.create",
        "iam.workloadIdentityPoolProviders.update",
        "iam.workloadIdentityPoolProviders.delete",
        "iam.workloadIdentityPoolProviders.undelete",
        "resourcemanager.projects.setIamPolicy",
    }
)
"""Rewriting a Workload Identity pool: its providers decide which outside tokens become which of its principals (the
issuer, the attribute mapping and condition), so whoever creates or changes one, or the pool, becomes any principal of
it, a deploy account's CI principals among them; whoever sets the pool's policy or its project's grants itself that
(https://cloud.google.com/iam/docs/workload-identity-federation, https://cloud.google.com/iam/docs/roles-permissions/
iam: roles/iam.workloadIdentityPoolAdmin)."""
SET_IAM = {
    "project": "resourcemanager.projects.setIamPolicy",
    "ring": "cloudkms.keyRings.setIamPolicy",
    "key": "cloudkms.cryptoKeys.setIamPolicy",
    "bucket": "storage.buckets.setIamPolicy",
    "account": "iam.serviceAccounts.setIamPolicy",
}
