"""One service account per node role and per CPU step, least-privilege project roles, bucket-scoped object
access.

Pathways and TPU pods run with ``hostNetwork`` and therefore as the *node's* service account, so the cpu and
tpu node accounts get object access on our bucket only, under the prefixes their steps use
(``infra.gcp.access``). Each CPU step (convert, export, publish, and a ``when-run`` step where it runs) has an
account of its own, with only its step's prefixes, which its pods' Kubernetes service account maps to through
Workload Identity (bound in ``infra.gcp.cluster`` once the identity pool exists).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from infra.gcp.access import BucketGrant, bucket_grants, hub_cache_grants
from infra.options import child_options

NODE_PROJECT_ROLES = ("roles/container.defaultNodeServiceAccount",)
"""What a GKE node needs (logs, metrics, resource metadata): GKE's least-privilege node role. No
``artifactregistry.reader``: the default images are public."""
REGISTRY_READER = "roles/artifactregistry.reader"
"""Granted to the node accounts too when ``tpu-rl:images.registries`` names a registry beyond Google's public
TPU image repositories (it may be private)."""


@dataclass(frozen=True)
class IdentitiesArgs:
    """What the service accounts and their grants are built from."""

    project: str
    cluster_name: str
    """Named in each account's display name."""
    service_accounts: dict[str, str]
    """Role -> the account's id (``Names.service_accounts``)."""
    bucket: pulumi.Input[str]
    """The artifacts bucket the cpu, tpu and step accounts get object access to."""
    bucket_name: str
    """Its name as configured (the IAM conditions name it)."""
    model: str
    """The model the steps train (its prefixes bound each account's object access, ``infra.gcp.access``)."""
    steps: tuple[str, ...] = ()
    """The steps the stack runs (a ``when-run`` step's account and grants exist only where it runs)."""
    private_registries: bool = False
    """Whether an allowed image registry may be private (the nodes then get ``REGISTRY_READER``)."""
    hub_cache: tuple[str, str] | None = None
    """A shared Hub cache's bucket and folder (``Settings.shared_hub_cache``): the conversion's and the export's
    identities get their grants on it (``infra.gcp.access.hub_cache_grants``); None: the stack's own bucket's."""
    hub_cache_writes: bool = False
    """Whether this stack is the shared cache's one writer (``Settings.hub_cache_writes``): else its conversion only
    reads it."""


class NodeIdentities(pulumi.ComponentResource):
    """Service accounts ``system``, ``cpu``, ``tpu`` (nodes) and one per CPU step (Workload Identity): those
    ``IdentitiesArgs.service_accounts`` names (on an existing cluster, the steps' only), each with its grants."""

    accounts: dict[str, gcp.serviceaccount.Account]
    grants: list[pulumi.Resource]
    grant_keys: dict[str, list[pulumi.Output[str]]]
    """Account (``system``, ``cpu``, ``tpu``, or a step) -> what identifies each of its grants: the grant's id and
    its condition (a changed condition keeps the id): what ``GrantPropagation`` waits again for when it is new."""

    def __init__(self, name: str, args: IdentitiesArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("tpu-rl:gcp:NodeIdentities", name, None, opts)
        bucket = args.bucket
        child = child_options(self, opts)
        self.accounts = {
            role: gcp.serviceaccount.Account(
                f"{role}-sa",
                account_id=account_id,
                project=args.project,
                display_name=f"tpu-rl {role} ({args.cluster_name})",
                opts=child,
            )
            for role, account_id in args.service_accounts.items()
        }
        self.grants = []
        self.grant_keys = {role: [] for role in self.accounts}
        node_roles = NODE_PROJECT_ROLES + ((REGISTRY_READER,) if args.private_registries else ())
        for role_name in [role for role in ("system", "cpu", "tpu") if role in self.accounts]:
            account = self.accounts[role_name]
            for role in node_roles:
                member = gcp.projects.IAMMember(
                    f"{role_name}-{role.split('/')[1]}",
                    project=args.project,
                    role=role,
                    member=_member(account),
                    opts=child,
                )
                self.grants.append(member)
                self.grant_keys[role_name].append(grant_key(member.id))
        on: list[tuple[pulumi.Input[str], str, BucketGrant]] = [
            (bucket, args.bucket_name, grant)
            for grant in bucket_grants(args.model, args.steps)
            if grant.holder in self.accounts
        ]
        if args.hub_cache is not None:
            cache_bucket, prefix = args.hub_cache
            on += [(cache_bucket, cache_bucket, grant) for grant in hub_cache_grants(prefix, args.hub_cache_writes)]
        on = [(target, name, grant) for target, name, grant in on if grant.holder in self.accounts]
        for target, target_name, grant in on:
            condition = grant.condition(target_name)
            member = gcp.storage.BucketIAMMember(
                grant.resource_name,
                bucket=target,
                role=grant.role,
                member=_member(self.accounts[grant.holder]),
                condition=condition,
                opts=child,
            )
            self.grants.append(member)
            self.grant_keys[grant.holder].append(grant_key(member.id, condition))
        self.register_outputs({**{role: a.email for role, a in self.accounts.items()}, "grants": len(self.grants)})

    def email(self, role: str) -> pulumi.Output[str]:
        return self.accounts[role].email


def grant_key(grant_id: pulumi.Input[str], condition: dict[str, str] | None = None) -> pulumi.Output[str]:
    """A grant as a propagation wait tells it from another: its id (resource, role, member) and its condition's
    expression, which the id does not hold."""
    expression = (condition or {}).get("expression", "")
    return pulumi.Output.from_input(grant_id).apply(lambda found: f"{found} if {expression}" if expression else found)


def _member(account: gcp.serviceaccount.Account) -> pulumi.Output[str]:
    return account.email.apply(lambda email: f"serviceAccount:{email}")


def workload_bindings(
    identities: NodeIdentities, members: dict[str, str], opts: pulumi.ResourceOptions
) -> dict[str, gcp.serviceaccount.IAMMember]:
    """Each CPU step's Workload Identity binding: its Kubernetes service account (``members``: step -> the member
    ``PROJECT.svc.id.goog[NS/KSA]``) may act as that step's Google account, and only as it. The identity pool is the
    project's, not the cluster's: the KSA is named as the account (``core.names.step_ksa``), so no other stack has
    this principal."""
    return {
        step: gcp.serviceaccount.IAMMember(
            f"{step}-workload-identity",
            service_account_id=identities.accounts[step].name,
            role="roles/iam.workloadIdentityUser",
            member=member,
            opts=opts,
        )
        for step, member in members.items()
    }
