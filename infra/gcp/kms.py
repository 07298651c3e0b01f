"""The Cloud KMS key GKE encrypts Secrets with (``tpu-rl:gke.secretsEncryptionKey``), and the GKE service
agent's right to use it.

Application-layer Secrets encryption (CIS GKE 5.3.1) wraps every Secret, the Hugging Face token included,
with a key in Cloud KMS before etcd stores it. GKE requires the key in the cluster's location and needs
``roles/cloudkms.cryptoKeyEncrypterDecrypter`` for its service agent
``service-PROJECT_NUMBER@container-engine-robot.iam.gserviceaccount.com`` on that key before the cluster is
created or updated with it.

The grant is not in effect when its create returns: "access changes ... are eventually consistent", a policy
change takes "Typically 2 minutes, potentially 7 minutes or longer"
(https://cloud.google.com/iam/docs/access-change-propagation), and the provider does not retry a cluster
create that fails on it (google-beta ``resourceContainerClusterCreate``: ``transport_tpg.Retry`` with the
default predicates only, none for a KMS or IAM permission error). So what uses a new grant waits for it
(``GrantPropagation``, the analogue of Terraform's ``time_sleep``); the node accounts' grants use the same resource
(``infra.gcp.cluster``).

The wait is a fixed bound where no live signal of the grant taking effect exists. IAM's test of access,
``testIamPermissions`` (Cloud KMS ``cryptoKeys.testIamPermissions``, Cloud Storage ``buckets.testIamPermissions``),
answers for the caller's own credentials, and GKE's service agent is a Google-managed account whose credentials the
project does not hold. The policy read back (``getIamPolicy``) or judged by Policy Troubleshooter is the stored
policy, which holds the binding as soon as ``setIamPolicy`` returns: what propagates is enforcement, which neither
sees. The honest signal is the use itself, retried on the permission error (terraform-provider-google
``transport_tpg.IamMemberMissing`` retries BigQuery's creates so), but the cluster create is the provider's, which
does not retry it, and GKE has no dry run of a cluster create to probe with
(``google.container.v1.CreateClusterRequest``: ``parent`` and ``cluster`` only). Upstream has nothing better:
Cluster Toolkit's gke-cluster module offers no Secrets encryption, and the provider's own acceptance test of
``database_encryption`` (``testAccContainerCluster_withDatabaseEncryption``) grants and creates with no wait. The
node accounts' first uses are the nodes' own agents and the closed Pathways servers (the workers run as the TPU
pools' account, with no script of the stack before them), which retry nothing the stack controls: their wait stays
fixed too, and runs while the cluster is created.

A step account's grants have that signal: the step's own first use of each, retried while it is refused, for up to
IAM's 7 minutes and a margin of one from the pod's start (its script's first program, ``mark_folder.py``
``BOUND_SECONDS``: the bucket's metadata, a read of an absent object under each prefix it reads, whose 404 says the
read grant applies, then its output folder; a refused token for the account is the Workload Identity binding not
applied yet). It sees what the pods use: the account's token through Workload Identity and each object-prefix grant
under its condition. Probing from the program instead would need a token for the account
(``iam.serviceAccounts.getAccessToken``, ``roles/iam.serviceAccountTokenCreator``, for the deployer on each step
account: a grant that itself propagates, and a path from the deployer to the accounts), would not exercise the
Workload Identity binding, and a bucket's ``testIamPermissions`` is asked of the bucket, where an object-name
condition cannot hold.

The wait is the program's, not the provider's: ``GrantPropagationProvider.create`` only records when the grants were
made (``since``), and what depends on them waits in the program until ``since`` + the bound
(``GrantPropagation.ready``). A provider's operation in flight is what the engine waits for when an update is
cancelled (``deployment_executor.go`` ``Execute``: ``SignalCancellation``, then the step executor's
``WaitForCompletion``), and the Python dynamic provider's ``Cancel`` does nothing (``pulumi/dynamic/__main__.py``
``DynamicResourceProviderServicer.Cancel``): a 420 s sleep in ``create`` held Ctrl-C for 7 minutes. The program's wait
runs in a daemon thread in steps of at most ``POLL_SECONDS``, which the SIGINT that pulumi-language-python sends on a
cancelled update ends at once (``tests/test_interrupt.py`` measures the shape).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_gcp as gcp
from pulumi import dynamic

from core.printed_commands import make_target
from infra.gcp.naming import crypto_key_id, key_ring_id
from infra.options import child_options
from infra.stop import log_info
from infra.threads import in_daemon_thread

KEY_ROLE = "roles/cloudkms.cryptoKeyEncrypterDecrypter"
KEY_DELETION_POLICY = "DELETE"
"""What the provider does when the stack deletes the key it created: schedule its versions for destruction and turn
rotation off (``SecretsKey``)."""
ROTATION_PERIOD = "7776000s"
"""90 days: Cloud KMS's recommended rotation for symmetric keys."""
PROPAGATION_SECONDS = 420.0
"""How long a new grant is given to take effect before it is used: the 7 minutes IAM documents as "potentially"
(its "typically" is 2). It runs once per new or changed grant, while what does not need the grant is created."""
PROPAGATION_DOC = "https://cloud.google.com/iam/docs/access-change-propagation"
POLL_SECONDS = 5.0
"""The wait's longest sleep: an interrupted program never sleeps longer than this past the signal."""


def key_advice(stack: str) -> str:
    """What to do when the wait for the GKE agent's grant on the Secrets key was not enough."""
    return f"if the cluster create still fails on a Cloud KMS permission, run `{make_target('up', stack)}` again"


def gke_service_agent(project_number: str) -> str:
    """The GKE service agent of a project, as an IAM member."""
    return f"serviceAccount:service-{project_number}@container-engine-robot.iam.gserviceaccount.com"


def key_name(project: str, region: str, ring: str, key: str) -> str:
    """A Cloud KMS key's resource name (what ``database_encryption.key_name`` takes)."""
    return crypto_key_id(project, region, ring, key)


def now() -> float:
    """The wall clock (seconds since the epoch): ``since`` is taken in the provider's process and compared in the
    program's. Tests replace it with a fake clock."""
    return time.time()


def sleep(seconds: float) -> None:
    """One sleep of the wait (tests replace it)."""
    time.sleep(seconds)


def wait_for_propagation(
    since: float | None,
    seconds: float,
    what: str,
    advice: str,
    *,
    clock: Callable[[], float] | None = None,
    pause: Callable[[float], object] | None = None,
    step: float = POLL_SECONDS,
) -> str | None:
    """Wait until ``since`` + ``seconds`` by ``clock`` (a sleep that wakes early sleeps again; never past the bound by
    more than one ``step``), then return the one line that says why and what to do if it was not enough. None, and no
    wait, when nothing is recorded (``since`` None: a wait made before the time was recorded, or the offline plan) or
    the bound has passed (every `up` after the one that made the grants)."""
    clock = clock or now
    pause = pause or sleep
    if since is None:
        return None
    ends = float(since) + max(0.0, seconds)
    if clock() >= ends:
        return None
    while (left := ends - clock()) > 0:
        pause(min(step, left))
    return (
        f"waited {seconds:g} s for {what} to take effect (IAM: typically 2 minutes, potentially 7 or longer, "
        f"{PROPAGATION_DOC}); {advice}"
    )


def _grant_set(props: dict[str, Any]) -> set[str]:
    """The grants a wait is for (a wait recorded before ``grants`` existed is for its one ``grant``)."""
    grants = props.get("grants")
    return {str(g) for g in grants} if grants else {str(props.get("grant"))}


class GrantPropagationProvider(dynamic.ResourceProvider):
    """Create records when the grants were made (``since``, the wall clock); nothing else is done to anything. The
    waiting is the program's (``GrantPropagation.ready``): a provider's create cannot be cancelled (module docstring).

    A dynamic provider is pickled into the state by reference (dill, ``pulumi/dynamic/dynamic.py``
    ``serialize_provider``: this class is importable, so its module and name are stored, not its code), and the
    engine runs it in ``pulumi-resource-pulumi-python`` from the project directory, which imports it from there:
    keep ``infra.gcp.kms.GrantPropagationProvider`` importable under this name (the destroy of a stack that has the
    resource needs it too; ``tests/test_kms_wait.py`` pins it).
    """

    serialize_as_secret_always = False  # the pickle holds no secret: a module and a class name

    def create(self, props: dict[str, Any]) -> dynamic.CreateResult:
        return dynamic.CreateResult(str(props["grant"]), {**props, "since": now()})

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> dynamic.DiffResult:
        """A grant that was not there (created, or changed: another key, member, role or condition is another
        grant) is waited for again: a replacement, whose create records a new ``since``. Grants that only went
        away are an update that keeps ``since``: nothing new to wait for. Nothing else changes anything."""
        old, new = _grant_set(olds), _grant_set(news)
        if new - old:
            return dynamic.DiffResult(changes=True, replaces=["grants"], delete_before_replace=False)
        return dynamic.DiffResult(changes=old != new, replaces=[], delete_before_replace=False)

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> dynamic.UpdateResult:
        return dynamic.UpdateResult({**news, "since": olds.get("since")})


class GrantPropagation(dynamic.Resource, module="kms", name="GrantPropagation"):
    """When ``grants`` were made (``GrantPropagationProvider``): created once per new grant, so only the `up` that
    makes (or changes) a grant waits; every later `up` finds the bound passed. What uses the grants depends on
    ``ready()``, not on the resource."""

    since: pulumi.Output[float | None]
    """When the grants were made (the provider's wall clock); None in a state written before it was recorded."""

    def __init__(
        self,
        name: str,
        grant: pulumi.Input[str],
        seconds: float,
        opts: pulumi.ResourceOptions | None = None,
        *,
        grants: pulumi.Input[list[str]] | None = None,
        what: str | None = None,
        advice: str | None = None,
    ) -> None:
        """``grant`` names what is waited for (one grant's id, or an account); ``grants`` is the list of grants (each
        grant's id and condition) whose new members make a new wait: ``[grant]`` when not given."""
        self._seconds = seconds
        self._what = what
        self._advice = advice or key_advice(pulumi.get_stack())
        props = {
            "grant": grant,
            "grants": grants if grants is not None else pulumi.Output.from_input(grant).apply(lambda g: [g]),
            "seconds": seconds,
            "since": None,
        }
        super().__init__(GrantPropagationProvider(), name, props, opts)

    def ready(self) -> pulumi.Input[pulumi.Resource]:
        """This resource once its grants have had ``seconds`` to take effect: what a user of the grants depends on.
        The wait runs in the program, in a daemon thread (``POLL_SECONDS`` at a time); a preview waits for nothing."""
        if pulumi.runtime.is_dry_run():
            return self

        def wait(values: list[Any]) -> asyncio.Future[str | None]:
            since, grant = values
            what = self._what or f"the new grant {grant}"
            return in_daemon_thread(
                lambda: wait_for_propagation(since, self._seconds, what, self._advice), "tpu-rl-grant-propagation"
            )

        def done(line: str | None) -> GrantPropagation:
            if line:
                log_info(line, resource=self)
            return self

        waited: pulumi.Output[str | None] = pulumi.Output.all(self.since, self.id).apply(wait)
        return waited.apply(done)


@dataclass(frozen=True)
class SecretsKeyArgs:
    """What the key and its grant are built from."""

    project: str
    region: str
    """The cluster's location: GKE accepts only a key there."""
    key: str
    """``create``, or the name of an existing key (``projects/P/locations/R/keyRings/K/cryptoKeys/C``)."""
    ring_name: str
    """The key ring the stack creates with ``create`` (``Names.key_ring``)."""
    key_id: str
    """The key the stack creates in that ring (``Names.crypto_key``)."""
    labels: dict[str, str]
    adopt: frozenset[str] = field(default_factory=frozenset)
    """Ids of a ring and key of these names that exist already and that a destroy left (or the stack's state holds):
    the capacity check found them (``infra.gcp.capacity.keys.judge_key``, ``Finding.reuse``), and they are imported,
    not created. A key in use by another stack is never among them: the check stops `up` before anything is
    created."""


class SecretsKey(pulumi.ComponentResource):
    """The key (created, or given) and the GKE service agent's grant on it; ``name`` is what the cluster takes,
    ``ready`` what it waits for."""

    name: str
    grant: gcp.kms.CryptoKeyIAMMember
    ready: GrantPropagation

    def __init__(self, name: str, args: SecretsKeyArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("tpu-rl:gcp:SecretsKey", name, None, opts)
        child = child_options(self, opts)
        # GKE's service agent may not exist yet right after the container API is enabled on a new project
        # (IAM then answers 400 "service account ... does not exist", which the provider does not retry):
        # generating the service identity first creates it. Its email is not always returned, so the member
        # is built from the project number.
        agent = gcp.projects.ServiceIdentity(
            "gke-service-agent", project=args.project, service="container.googleapis.com", opts=child
        )
        after: list[pulumi.Resource] = [agent]
        if args.key == "create":
            ring_id = key_ring_id(args.project, args.region, args.ring_name)
            self.name = key_name(args.project, args.region, args.ring_name, args.key_id)
            # A key ring cannot be deleted in Cloud KMS: `destroy` drops it from the state and leaves it. One that
            # an earlier destroy left is imported (``import_``: the engine reads it and then updates it to these
            # inputs, pulumi >= 3.174); its id is what the provider gives a ring it creates, so the import is a
            # no-op on every later `up` (step_generator.go: an import only when the old id differs).
            ring = gcp.kms.KeyRing(
                "key-ring",
                name=args.ring_name,
                project=args.project,
                location=args.region,
                opts=child_options(self, opts, import_=ring_id if ring_id in args.adopt else None),
            )
            # DELETE (the provider's default, said here): when `destroy` or an `up` that drops the key deletes it, the
            # provider schedules every version for destruction and turns rotation off, then drops it from the state
            # (terraform-provider-google ``resourceKMSCryptoKeyDelete``: ``clearCryptoKeyVersions``,
            # ``disableCryptoKeyRotation``): no version is billed or created after the stack is gone. The versions stay
            # restorable for the key's scheduled-destruction duration (30 days by default), and the cluster that used
            # the key is deleted (or sent DECRYPTED) before it: it depends on the key through the grant. ABANDON (as
            # before) left the key rotating every 90 days, each rotation a new billed version. No `protect`: a
            # protected key would fail the `up` that removes it.
            crypto_key = gcp.kms.CryptoKey(
                "secrets-key",
                name=args.key_id,
                key_ring=ring.id,
                purpose="ENCRYPT_DECRYPT",
                rotation_period=ROTATION_PERIOD,
                deletion_policy=KEY_DELETION_POLICY,
                labels=args.labels,
                opts=child_options(self, opts, import_=self.name if self.name in args.adopt else None),
            )
            after.append(crypto_key)
        else:
            self.name = args.key
        number = gcp.organizations.get_project_output(project_id=args.project).number
        # The member is the project's GKE service agent, the same for every stack of the project. On the stack's own
        # key the grant is this stack's alone (the key is per stack, and adopted only when a destroy left it:
        # infra.gcp.capacity.keys). On a key it is given, every stack of the project that is given the key (or a copy
        # of this stack elsewhere) registers the same binding, and the provider's delete removes it whoever else
        # needs it (terraform-provider-google ``resourceIamMemberDelete``: ``subtractFromBindings``): so the stack
        # never deletes it (``retain_on_delete``: pulumi ``step.go`` ``DeleteStep.Apply`` calls no provider for a
        # retained resource), and a destroy leaves it on the key (docs/destroy.md "Destroy").
        self.grant = gcp.kms.CryptoKeyIAMMember(
            "gke-agent-key-user",
            crypto_key_id=self.name,
            role=KEY_ROLE,
            member=number.apply(gke_service_agent),
            opts=child_options(self, opts, depends_on=after, retain_on_delete=args.key != "create"),
        )
        # The grant's id names the key, the role and the member: a new grant is a new id, and waits again.
        self.ready = GrantPropagation(
            "gke-agent-key-propagation", self.grant.id, PROPAGATION_SECONDS, opts=child_options(self, opts)
        )
        self.register_outputs({"name": self.name, "member": self.grant.member, "agent": agent.id})
