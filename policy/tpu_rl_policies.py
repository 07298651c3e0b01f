"""tpu-rl guardrails: TPU- and ML-aware CrossGuard policies (importable; ``__main__.py`` builds the pack).

Every policy has a name, a one-line description, a severity and a remediation in its
messages. Enforcement levels come from the policy config files (``config/<stack>.json``).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)

# The pack lives beside the program and shares its TPU catalogue, cost model and token shapes (plain modules).
from core.config.schema import IMAGE_REGISTRIES
from core.estimate import TrainingRun, estimate_run
from core.names import PUBLISH_ENV
from core.redact import HF_TOKEN
from core.requests import jobset_pod_sets, quantity
from core.tpu import CATALOGUE, resolve_slice

NODE_POOL = "gcp:container/nodePool:NodePool"
CLUSTER = "gcp:container/cluster:Cluster"
BUCKET = "gcp:storage/bucket:Bucket"
BUCKET_IAM = ("gcp:storage/bucketIAMMember:BucketIAMMember", "gcp:storage/bucketIAMBinding:BucketIAMBinding")
OBJECT_ROLES = ("roles/storage.objectUser", "roles/storage.objectViewer", "roles/storage.objectCreator")
"""Object roles a bucket grant must bound to prefixes (``infra.gcp.access``)."""
WHOLE_BUCKET_ROLES = ("roles/storage.objectAdmin", "roles/storage.admin", "roles/storage.legacyBucketOwner")
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
JOB = "kubernetes:batch/v1:Job"
LOCAL_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue"
CLUSTER_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"
RESOURCE_FLAVOR = "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PROJECT_IAM = (
    "gcp:projects/iAMMember:IAMMember",
    "gcp:projects/iAMBinding:IAMBinding",
)
WORKLOAD_TYPES = (JOB, JOBSET, "kubernetes:core/v1:Pod", "kubernetes:apps/v1:Deployment")

KINDS: dict[re.Pattern[str], str] = {
    HF_TOKEN: "a Hugging Face token",
    re.compile(r"(?i)\bhf_access_token=(?!\s*$)\S+"): "hf_access_token=...",
    re.compile(r"\b[A-Z][A-Z0-9_]*_(TOKEN|KEY|SECRET|PASSWORD)=\S+"): "a *_TOKEN/KEY/SECRET/PASSWORD= assignment",
    re.compile(r"(?i)--(hf-)?token[= ]\S+"): "a --token flag",
}
"""What each secret pattern finds, as a policy message names it (never the text it matched)."""
TOKEN_PATTERNS = tuple(KINDS)
SECRET_ENV_NAME = re.compile(r"(?i)(TOKEN|SECRET|PASSWORD|API_?KEY|ACCESS_KEY)")


class Report(Protocol):
    """The callback the SDK passes a validation: ``report(message, urn=None)`` (the urn is optional, and
    ignored for a resource validation). The policies here pass the message alone."""

    def __call__(self, message: str, urn: str | None = None) -> None: ...


_Args = TypeVar("_Args", ResourceValidationArgs, StackValidationArgs)


def _validation(check: Callable[[_Args, Report], None]) -> Callable[[_Args, ReportViolation], None]:
    """``check`` itself, typed as the SDK's ``validate=`` expects it."""
    # pulumi_policy types the callback `ReportViolation = Callable[[str, Optional[str]], None]`, which makes
    # the urn required (a Callable cannot mark an argument optional), while every callback it passes is
    # `report_violation(message, urn=None)` and its docs call the urn optional. The alias is wrong, not `check`.
    return check  # type: ignore[return-value]


def _machine(machine_type: str | None) -> tuple[str, Any] | None:
    for version in CATALOGUE.values():
        machine = version.machine(machine_type)
        if machine is not None:
            return version.name, machine
    return None


def containers(obj: Any) -> Iterator[Mapping[str, Any]]:
    """Every container and init container anywhere in a manifest.

    The analyzer hands props over as read-only proxies (``Mapping`` and ``Sequence``, not
    ``dict`` and ``list``), so only the abstract types are tested here.
    """
    if isinstance(obj, Mapping):
        for key in ("containers", "initContainers"):
            for container in obj.get(key) or []:
                if isinstance(container, Mapping):
                    yield container
        for value in obj.values():
            yield from containers(value)
    elif isinstance(obj, Sequence) and not isinstance(obj, str):
        for value in obj:
            yield from containers(value)


def command_text(spec: Any) -> str:
    """The words of every container's command and args in `spec`, joined by spaces: what the
    policies that read a command (revision, budget) search, whether it is argv or a shell script."""
    return " ".join(str(word) for c in containers(spec) for key in ("command", "args") for word in c.get(key) or [])


# ---------------------------------------------------------------------------------------------
# Secrets


def _no_secrets(args: ResourceValidationArgs, report: Report) -> None:
    if args.resource_type not in WORKLOAD_TYPES:
        return
    fix = "pass secrets as env valueFrom.secretKeyRef (MaxText reads HF_TOKEN from the environment)"
    for container in containers(args.props.get("spec")):
        name = container.get("name", "?")
        for field in ("command", "args"):
            for word in container.get(field) or []:
                for pattern in TOKEN_PATTERNS:
                    if pattern.search(str(word)):
                        # What kind, never what: PR comments carry policy messages, so no part of it is shown.
                        report(f"container {name}: {field} contains secret material ({KINDS[pattern]}); {fix}")
                        break
        for env in container.get("env") or []:
            value = env.get("value")
            if value is not None and (
                SECRET_ENV_NAME.search(env.get("name", "")) or any(p.search(str(value)) for p in TOKEN_PATTERNS)
            ):
                report(f"container {name}: env {env.get('name')} has a literal value; {fix}")
            if env.get("name") == "HF_TOKEN" and "secretKeyRef" not in (env.get("valueFrom") or {}):
                report(f"container {name}: HF_TOKEN must come from a secretKeyRef; {fix}")


no_secrets_in_workloads = ResourceValidationPolicy(
    name="no-secrets-in-workloads",
    description="No tokens or keys in container args, command or env values; HF_TOKEN comes from a secretKeyRef.",
    severity=Severity.CRITICAL,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Store the token as a Pulumi secret and reference the Kubernetes Secret with secretKeyRef.",
    validate=_validation(_no_secrets),
)


# ---------------------------------------------------------------------------------------------
# TPU node pools


def _tpu_pool(args: ResourceValidationArgs, report: Report) -> None:
    if args.resource_type != NODE_POOL:
        return
    node = args.props.get("nodeConfig") or {}
    found = _machine(node.get("machineType"))
    if found is None:
        return
    version, machine = found
    placement = args.props.get("placementPolicy") or {}
    topology = placement.get("tpuTopology") or (node.get("labels") or {}).get("cloud.google.com/gke-tpu-topology")
    topology = topology or machine.single_host_topology
    if topology not in machine.topologies:
        report(
            f"{machine.name} cannot form topology {topology}; valid: {', '.join(machine.topologies)}. "
            "Fix tpu-rl:tpu.topology."
        )
        return
    shape = resolve_slice(version, machine.name, topology)
    if shape.multi_host:
        if placement.get("type") != "COMPACT" or placement.get("tpuTopology") != topology:
            report(f"multi-host slice {topology} needs placementPolicy {{type: COMPACT, tpuTopology: {topology}}}")
    elif placement.get("tpuTopology"):
        report("a single-host TPU pool must not set placementPolicy.tpuTopology (GKE rejects it)")
    zones = args.props.get("nodeLocations") or []
    if len(zones) != 1:
        report(f"a TPU slice lives in exactly one zone; nodeLocations has {len(zones)}: set gcp:zone")
    autoscaling = args.props.get("autoscaling")
    affinity = (node.get("reservationAffinity") or {}).get("consumeReservationType", "UNSPECIFIED")
    preemptible = bool(node.get("spot") or node.get("flexStart"))
    if autoscaling:
        top = autoscaling.get("maxNodeCount", autoscaling.get("totalMaxNodeCount"))
        if top != shape.hosts:
            report(f"autoscaling max {top} must be one whole slice ({shape.hosts} hosts for {topology})")
        if autoscaling.get("minNodeCount", 0) not in (0, shape.hosts):
            report(f"autoscaling min must be 0 or {shape.hosts}: a partial slice cannot run")
        if affinity == "SPECIFIC_RESERVATION":
            report("an autoscaled pool must not consume a specific reservation; use capacity reservation (static)")
    else:
        if args.props.get("nodeCount") != shape.hosts:
            report(f"nodeCount {args.props.get('nodeCount')} must equal the slice's {shape.hosts} hosts")
        if affinity != "SPECIFIC_RESERVATION" or not (node.get("reservationAffinity") or {}).get("values"):
            report("a static TPU pool (capacity reservation) needs a SPECIFIC_RESERVATION affinity with the name")
    if preemptible and affinity not in ("NO_RESERVATION", "UNSPECIFIED"):
        report("spot and flex-start capacity cannot consume a reservation: set reservationAffinity NO_RESERVATION")


tpu_node_pool_shape = ResourceValidationPolicy(
    name="tpu-node-pool-shape",
    description="TPU pools form a valid slice: topology, node count, COMPACT placement, one zone, capacity mode.",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Fix tpu-rl:tpu (machineType, topology, capacity, reservation).",
    validate=_validation(_tpu_pool),
)


# ---------------------------------------------------------------------------------------------
# Cluster


def _control_plane(args: ResourceValidationArgs, report: Report) -> None:
    if args.resource_type != CLUSTER:
        return
    props = args.props
    if not (props.get("privateClusterConfig") or {}).get("enablePrivateNodes"):
        report("nodes must be private (privateClusterConfig.enablePrivateNodes); egress goes through Cloud NAT")
    if not (props.get("workloadIdentityConfig") or {}).get("workloadPool"):
        report("Workload Identity must be enabled (workloadIdentityConfig.workloadPool = PROJECT.svc.id.goog)")
    if props.get("enableShieldedNodes") is False:
        report("shielded nodes must be enabled (enableShieldedNodes: true)")


gke_control_plane = ResourceValidationPolicy(
    name="gke-private-cluster",
    description="GKE clusters have private nodes, Workload Identity and shielded nodes.",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Keep the cluster settings of infra/gcp/gke_spec.py.",
    validate=_validation(_control_plane),
)


# Ranges that are not public IPv4 (RFC 6890 special-purpose blocks): authorizing them opens nothing to
# the internet, so they do not count towards the public share.
NON_PUBLIC = tuple(
    ipaddress.IPv4Network(n)
    for n in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.0.2.0/24",
        "192.88.99.0/24",
        "192.168.0.0/16",
        "198.18.0.0/15",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/3",
    )
)
PUBLIC_ADDRESSES = 2**32 - sum(n.num_addresses for n in ipaddress.collapse_addresses(NON_PUBLIC))


def _secrets_encryption(args: ResourceValidationArgs, report: Report) -> None:
    if args.resource_type != CLUSTER or not args.get_config().get("required", False):
        return
    encryption = args.props.get("databaseEncryption") or {}
    if encryption.get("state") != "ENCRYPTED" or not encryption.get("keyName"):
        report(
            "Secrets, the Hugging Face token among them, are stored without application-layer encryption: set "
            "tpu-rl:gke.secretsEncryptionKey (create, or a Cloud KMS key in gcp:region)"
        )


secrets_encryption = ResourceValidationPolicy(
    name="secrets-encryption",
    description="Where the stack's policy config requires it, GKE encrypts Secrets with a Cloud KMS key.",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="pulumi config set --path tpu-rl:gke.secretsEncryptionKey create",
    config_schema=PolicyConfigSchema(properties={"required": {"type": "boolean", "default": False}}),
    validate=_validation(_secrets_encryption),
)


def parse_cidr(text: Any) -> ipaddress.IPv4Network | None:
    """Any CIDR spelling GKE might take (``a.b.c.d/n``, ``/00``, netmask form, host bits set), normalised."""
    value = str(text).strip()
    address, sep, prefix = value.partition("/")
    if not sep:
        prefix = "32"
    if prefix.isascii() and prefix.isdigit():
        prefix = str(int(prefix))
    try:
        network = ipaddress.ip_network(f"{address}/{prefix}", strict=False)
    except ValueError:
        return None
    return network if isinstance(network, ipaddress.IPv4Network) else None


def public_share(networks: list[ipaddress.IPv4Network]) -> float:
    """The share of the public IPv4 space the networks cover together (overlaps counted once)."""
    covered = 0
    for network in ipaddress.collapse_addresses(networks):
        # Two CIDR blocks are either disjoint or one contains the other.
        inside = [p if p.subnet_of(network) else network for p in NON_PUBLIC if p.overlaps(network)]
        private = sum(n.num_addresses for n in ipaddress.collapse_addresses(inside))
        covered += network.num_addresses - private
    return covered / PUBLIC_ADDRESSES


def _open_control_plane(args: ResourceValidationArgs, report: Report) -> None:
    if args.resource_type != CLUSTER:
        return
    config = args.props.get("masterAuthorizedNetworksConfig") or {}
    policy_config = args.get_config()
    widest = int(policy_config.get("minPrefixLength", 16))
    max_share = float(policy_config.get("maxPublicShare", 0.0001))
    fix = "set tpu-rl:authorizedNetworks to the networks you deploy from"
    networks = []
    for block in config.get("cidrBlocks") or []:
        text = block.get("cidrBlock")
        network = parse_cidr(text)
        if network is None:
            report(f"authorized network {text!r} is not an IPv4 CIDR this policy can judge; {fix}")
            continue
        networks.append(network)
        if network.prefixlen < widest and public_share([network]) > 0:
            report(f"authorized network {text} ({network}) is wider than /{widest}; {fix}")
    share = public_share(networks)
    if share > max_share:
        report(
            f"the authorized networks together cover {share:.4%} of the public IPv4 space (at most "
            f"{max_share:.4%} allowed); the control plane is open to the internet: {fix}"
        )
    if config.get("gcpPublicCidrsAccessEnabled"):
        report("gcpPublicCidrsAccessEnabled lets any Google Cloud IP reach the control plane: disable it")


no_open_control_plane = ResourceValidationPolicy(
    name="no-open-control-plane",
    description="The authorized networks of the GKE control plane cover only a small share of the public internet.",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="pulumi config set --path 'tpu-rl:authorizedNetworks[0]' <your CIDR>",
    config_schema=PolicyConfigSchema(
        properties={
            "minPrefixLength": {"type": "integer", "default": 16},
            "maxPublicShare": {"type": "number", "default": 0.0001},
        }
    ),
    validate=_validation(_open_control_plane),
)


# ---------------------------------------------------------------------------------------------
# IAM and bucket

BROAD_ROLES = ("roles/storage.admin", "roles/owner", "roles/editor")


def _broad_iam(args: ResourceValidationArgs, report: Report) -> None:
    if args.resource_type in PROJECT_IAM and args.props.get("role") in BROAD_ROLES:
        report(
            f"project-level {args.props['role']} is too broad; grant roles/storage.objectUser on the bucket "
            "(gcp.storage.BucketIAMMember) or a narrower project role"
        )


no_broad_project_iam = ResourceValidationPolicy(
    name="no-broad-project-iam",
    description="No project-level roles/storage.admin, roles/owner or roles/editor grants.",
    severity=Severity.CRITICAL,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Scope storage access to the artifacts bucket (see infra/gcp/identities.py).",
    validate=_validation(_broad_iam),
)


def _scoped_bucket_grants(args: ResourceValidationArgs, report: Report) -> None:
    if args.resource_type not in BUCKET_IAM:
        return
    role = args.props.get("role")
    if role in WHOLE_BUCKET_ROLES:
        report(f"bucket-level {role} manages the whole bucket; grant object roles on the step's prefixes")
    elif role in OBJECT_ROLES and not (args.props.get("condition") or {}).get("expression"):
        report(
            f"{role} on the whole bucket lets one step's identity read or delete every run; bound it to the "
            "prefixes its step uses with an IAM condition (infra/gcp/access.py)"
        )


scoped_bucket_grants = ResourceValidationPolicy(
    name="scoped-bucket-grants",
    description="Object access on the bucket is bounded by IAM conditions to the prefixes each identity uses.",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Keep the grants of infra/gcp/access.py: each identity's roles on its steps' prefixes.",
    validate=_validation(_scoped_bucket_grants),
)


def _bucket(args: ResourceValidationArgs, report: Report) -> None:
    if args.resource_type != BUCKET:
        return
    props = args.props
    if not props.get("uniformBucketLevelAccess"):
        report("enable uniform bucket-level access (uniformBucketLevelAccess: true)")
    if props.get("publicAccessPrevention") != "enforced":
        report("enforce public access prevention (publicAccessPrevention: enforced)")
    soft_delete = (props.get("softDeletePolicy") or {}).get("retentionDurationSeconds")
    if not soft_delete and not (props.get("versioning") or {}).get("enabled"):
        report("keep deleted checkpoints recoverable: enable soft delete or versioning")


bucket_hardening = ResourceValidationPolicy(
    name="bucket-hardening",
    description="Buckets use uniform access, enforce public access prevention and keep deleted objects recoverable.",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Keep the bucket settings of infra/gcp/storage.py.",
    validate=_validation(_bucket),
)


def _bucket_deletion(args: ResourceValidationArgs, report: Report) -> None:
    if args.resource_type != BUCKET:
        return
    if args.props.get("forceDestroy"):
        report("forceDestroy deletes every checkpoint on destroy: set tpu-rl:forceDestroy false")
    if not (args.opts and args.opts.protect):
        report("the artifacts bucket is not protected: set tpu-rl:protect true")
    if not (args.props.get("versioning") or {}).get("enabled"):
        report(
            "bucket versioning is off: an overwritten checkpoint cannot be recovered, a deleted one for the "
            "soft-delete week only: set tpu-rl:bucketVersioning true"
        )


bucket_deletion_guard = ResourceValidationPolicy(
    name="bucket-deletion-guard",
    description="Finished runs' artifacts survive destroy and overwrites: no forceDestroy, protect on, versioning.",
    severity=Severity.MEDIUM,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps=(
        "pulumi config set tpu-rl:protect true; pulumi config set tpu-rl:forceDestroy false; "
        "pulumi config set tpu-rl:bucketVersioning true"
    ),
    validate=_validation(_bucket_deletion),
)


# ---------------------------------------------------------------------------------------------
# Workloads


def _no_ttl(args: ResourceValidationArgs, report: Report) -> None:
    if args.resource_type not in (JOB, JOBSET):
        return
    spec = args.props.get("spec") or {}
    inner = [spec] + [(r.get("template") or {}).get("spec") or {} for r in spec.get("replicatedJobs") or []]
    if any("ttlSecondsAfterFinished" in s for s in inner):
        report(
            "ttlSecondsAfterFinished deletes the finished object; a later refresh re-creates it and re-runs the "
            "step: remove it"
        )


no_ttl_on_managed_jobs = ResourceValidationPolicy(
    name="no-ttl-on-managed-jobs",
    description="Pulumi-managed Jobs and JobSets have no ttlSecondsAfterFinished (a refresh would re-run them).",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Remove ttlSecondsAfterFinished; the stack keeps the objects until destroy.",
    validate=_validation(_no_ttl),
)


def _bounded_retries(args: ResourceValidationArgs, report: Report) -> None:
    if args.resource_type not in (JOB, JOBSET):
        return
    config = args.get_config()
    max_backoff, max_restarts = config.get("maxBackoffLimit", 256), config.get("maxRestarts", 3)
    spec = args.props.get("spec") or {}
    jobs = (
        [("Job", spec)]
        if args.resource_type == JOB
        else [
            (r.get("name", "?"), (r.get("template") or {}).get("spec") or {}) for r in spec.get("replicatedJobs") or []
        ]
    )
    for name, job in jobs:
        backoff = job.get("backoffLimit")
        if backoff is None or backoff > max_backoff:
            report(f"{name}: backoffLimit {backoff} is unbounded or above {max_backoff}: a TPU slice retries for hours")
    if args.resource_type == JOBSET:
        restarts = (spec.get("failurePolicy") or {}).get("maxRestarts")
        if restarts is None or restarts > max_restarts:
            report(
                f"failurePolicy.maxRestarts {restarts} is missing or above {max_restarts}: "
                "lower tpu-rl:workflow.maxRestarts"
            )


bounded_retries = ResourceValidationPolicy(
    name="bounded-retries",
    description="Jobs and JobSets retry a bounded number of times (backoffLimit, failurePolicy.maxRestarts).",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Lower tpu-rl:workflow.maxRestarts; keep backoffLimit explicit.",
    config_schema=PolicyConfigSchema(
        properties={
            "maxBackoffLimit": {"type": "integer", "default": 256},
            "maxRestarts": {"type": "integer", "default": 3},
        }
    ),
    validate=_validation(_bounded_retries),
)


def _pinned_images(args: ResourceValidationArgs, report: Report) -> None:
    if args.resource_type not in WORKLOAD_TYPES:
        return
    for container in containers(args.props.get("spec")):
        image = str(container.get("image", ""))
        by_digest = re.search(r"@sha256:[0-9a-f]{64}$", image) is not None
        tagged = "@" not in image and ":" in image.rsplit("/", 1)[-1] and not image.endswith(":latest")
        if not (by_digest or tagged):
            report(
                f"container {container.get('name')}: image {image or '(none)'} is not pinned; "
                "use a version tag or a digest"
            )
        elif "/pathways/" in image and not by_digest:
            report(
                f"container {container.get('name')}: Pathways image {image} must be pinned by digest "
                "(it must match the client's JAX); set tpu-rl:images"
            )


pinned_images = ResourceValidationPolicy(
    name="pinned-images",
    description="No :latest or untagged images; Pathways server and proxy images are pinned by digest.",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Set tpu-rl:images to tags or @sha256 digests.",
    validate=_validation(_pinned_images),
)


def _trusted_registries(args: ResourceValidationArgs, report: Report) -> None:
    if args.resource_type not in WORKLOAD_TYPES:
        return
    registries = tuple(args.get_config().get("registries") or IMAGE_REGISTRIES)
    for container in containers(args.props.get("spec")):
        image = str(container.get("image", ""))
        if not any(image.startswith(f"{registry}/") for registry in registries):
            report(
                f"container {container.get('name')}: image {image or '(none)'} is not from a trusted registry "
                f"({', '.join(registries)}); it would run with the Hugging Face token and a bucket identity"
            )


trusted_registries = ResourceValidationPolicy(
    name="trusted-registries",
    description="Workload images come from the trusted registries only (Google's TPU image repositories).",
    severity=Severity.CRITICAL,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Set tpu-rl:images to images of tpu-rl:images.registries; add a registry to the policy config.",
    config_schema=PolicyConfigSchema(
        properties={"registries": {"type": "array", "items": {"type": "string"}, "default": list(IMAGE_REGISTRIES)}}
    ),
    validate=_validation(_trusted_registries),
)


def pod_specs(obj: Any) -> Iterator[Mapping[str, Any]]:
    """Every pod spec in a manifest (a mapping that holds ``containers``)."""
    if isinstance(obj, Mapping):
        if isinstance(obj.get("containers"), Sequence):
            yield obj
        for value in obj.values():
            yield from pod_specs(value)
    elif isinstance(obj, Sequence) and not isinstance(obj, str):
        for value in obj:
            yield from pod_specs(value)


def requests_tpu(obj: Any) -> bool:
    """Whether a manifest part (a spec, a pod spec) has a container that asks for TPU chips."""
    limits = (((c.get("resources") or {}).get("limits") or {}) for c in containers(obj))
    return any("google.com/tpu" in entry for entry in limits)


def _least_privilege_pods(args: ResourceValidationArgs, report: Report) -> None:
    if args.resource_type not in WORKLOAD_TYPES:
        return
    for container in containers(args.props.get("spec")):
        context = container.get("securityContext") or {}
        if context.get("privileged"):
            report(
                f"container {container.get('name')} is privileged: root on the node, with the Hugging Face "
                "token and a bucket identity; no Pathways or MaxText container needs it"
            )
        if set((context.get("capabilities") or {}).get("add") or []) - {"NET_BIND_SERVICE"}:
            report(f"container {container.get('name')} adds capabilities: remove capabilities.add")
    for pod in pod_specs(args.props.get("spec")):
        for volume in pod.get("volumes") or []:
            host_path = (volume.get("hostPath") or {}).get("path")
            if host_path is None:
                continue
            if host_path != "/tmp" or not requests_tpu(pod):
                report(
                    f"volume {volume.get('name')} mounts the node's {host_path}: only the Pathways workers on "
                    "TPU hosts mount a host path (/tmp)"
                )


least_privilege_pods = ResourceValidationPolicy(
    name="least-privilege-pods",
    description="No privileged container or added capability; a host path only as the TPU workers' /tmp.",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Keep the pod specs of workloads/build/manifests.py (only the TPU workers mount /tmp).",
    validate=_validation(_least_privilege_pods),
)


def publish_targets(spec: Any) -> Iterator[tuple[str, str]]:
    """(repository, ``true``/``false``) of each container that publishes to the Hub (``core.names.PUBLISH_ENV``
    in its environment: what ``workloads/run/publish_hub.py`` reads)."""
    repo_env, _branch_env, private_env = PUBLISH_ENV
    for container in containers(spec):
        env = {e.get("name"): e.get("value") for e in container.get("env") or [] if isinstance(e, Mapping)}
        if repo_env in env:
            yield str(env.get(repo_env)), str(env.get(private_env))


def _private_publish(args: ResourceValidationArgs, report: Report) -> None:
    if args.resource_type not in WORKLOAD_TYPES:
        return
    allowed = set(args.get_config().get("publicRepos") or [])
    for repo, private in publish_targets(args.props.get("spec")):
        if private == "true" or repo in allowed:
            continue
        report(
            f"publishes {repo} to the Hugging Face Hub as a public repository (TPU_RL_PUBLISH_PRIVATE={private}): "
            "a trained model goes public only when the stack says so in two places, tpu-rl:publish.private false "
            "and this policy's publicRepos"
        )


private_publish = ResourceValidationPolicy(
    name="private-publish",
    description="A published model goes to a private Hub repository, unless the policy config lists the repository.",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Keep tpu-rl:publish.private true, or list the repository in publicRepos (policy/config).",
    config_schema=PolicyConfigSchema(
        properties={"publicRepos": {"type": "array", "items": {"type": "string"}, "default": []}}
    ),
    validate=_validation(_private_publish),
)


def _model_revision(args: ResourceValidationArgs, report: Report) -> None:
    if args.resource_type not in (JOB, JOBSET):
        return
    text = command_text(args.props.get("spec"))
    match = re.search(r"--revision=([^\s\"']+)", text)
    if match and not re.fullmatch(r"[0-9a-f]{40}", match.group(1)):
        report(
            f"model revision {match.group(1)!r} is a moving ref; pin a commit for reproducible runs "
            "(pulumi config set --path 'tpu-rl:model.revision' <commit>)"
        )


model_revision_pinned = ResourceValidationPolicy(
    name="model-revision-pinned",
    description="The Hugging Face model revision is pinned to a commit.",
    severity=Severity.LOW,
    enforcement_level=EnforcementLevel.ADVISORY,
    remediation_steps="Set tpu-rl:model.revision to the commit the preflight reports.",
    validate=_validation(_model_revision),
)


# ---------------------------------------------------------------------------------------------
# Labels and budget

LABEL_FIELDS = {BUCKET: ("labels",), CLUSTER: ("resourceLabels",), NODE_POOL: ("nodeConfig", "resourceLabels")}


def _labels(args: ResourceValidationArgs, report: Report) -> None:
    path = LABEL_FIELDS.get(args.resource_type)
    if path is None:
        return
    labels: Any = args.props
    for key in path:
        labels = (labels or {}).get(key)
    required = args.get_config().get("requiredLabels", ["app", "stack"])
    missing = [k for k in required if k not in (labels or {})]
    if missing:
        report(f"missing cost-attribution labels {', '.join(missing)} on {'.'.join(path)}")


cost_attribution_labels = ResourceValidationPolicy(
    name="cost-attribution-labels",
    description="Labelable GCP resources carry the cost-attribution labels.",
    severity=Severity.LOW,
    enforcement_level=EnforcementLevel.ADVISORY,
    remediation_steps="Keep settings.labels on every labelable resource.",
    config_schema=PolicyConfigSchema(
        properties={"requiredLabels": {"type": "array", "items": {"type": "string"}, "default": ["app", "stack"]}}
    ),
    validate=_validation(_labels),
)


class EstimateInputError(ValueError):
    """The training JobSet does not carry a value the estimate needs."""


def _arg(command: str, key: str, pattern: str = r"\d+") -> str:
    match = re.search(rf"(?:^|\s){re.escape(key)}=({pattern})", command)
    if match is None:
        raise EstimateInputError(f"cannot read {key}= from the training JobSet's command, so no estimate")
    return match.group(1)


def stack_estimate(resources: list[Any]) -> dict[str, Any] | None:
    """The cost estimate of a stack, from its TPU pools and its training JobSet."""
    pools = []
    for r in resources:
        if r.resource_type != NODE_POOL:
            continue
        node = r.props.get("nodeConfig") or {}
        found = _machine(node.get("machineType"))
        if found is None:
            continue
        version, machine = found
        topology = (r.props.get("placementPolicy") or {}).get("tpuTopology") or machine.single_host_topology
        if topology not in machine.topologies:
            continue
        if node.get("spot"):
            capacity = "spot"
        elif node.get("flexStart"):
            capacity = "flex-start"
        elif r.props.get("autoscaling"):
            capacity = "on-demand"
        else:
            capacity = "reservation"
        pools.append((resolve_slice(version, machine.name, topology), capacity))
    if not pools:
        return None
    shape, capacity = pools[0]
    # The training JobSet: the one whose containers ask for TPU chips (convert and export run on CPU).
    jobset = next((r for r in resources if r.resource_type == JOBSET and requests_tpu(r.props.get("spec"))), None)
    if jobset is None:  # provision only: no run, but a reserved slice still bills per day
        return estimate_run(shape, len(pools), capacity, None).to_output()
    command = command_text(jobset.props.get("spec"))
    run = TrainingRun(
        model=_arg(command, "model_name", r"[a-z0-9-]+"),
        num_batches=int(_arg(command, "num_batches")),
        batch_size=int(_arg(command, "batch_size")),
        num_generations=int(_arg(command, "rl.num_generations")),
        max_target_length=int(_arg(command, "max_target_length")),
    )
    return estimate_run(shape, len(pools), capacity, run).to_output()


def _budget(args: StackValidationArgs, report: Report) -> None:
    try:
        estimate = stack_estimate(list(args.resources))
    except (EstimateInputError, KeyError) as err:
        report(f"{err}: the budget gate cannot judge this stack; keep the JobSet rendered by workloads/")
        return
    if estimate is None:
        return
    budget = float(args.get_config().get("maxEstimatedUsd", 1000))
    if estimate["totalUsd"] > budget:
        report(
            f"estimated TPU cost of one run is ${estimate['totalUsd']:,.2f} ({estimate['capacity']}, "
            f"{estimate['chips']} chips), above maxEstimatedUsd ${budget:,.2f}: use a smaller slice, fewer "
            "numBatches or spot/flex-start capacity, or raise the budget in the policy config"
        )
    if estimate["idleUsdPerDay"] > float(args.get_config().get("maxIdleUsdPerDay", 5000)):
        report(
            f"the reserved slice bills ${estimate['idleUsdPerDay']:,.2f} per day until `pulumi destroy`: "
            "destroy the stack after the run or use autoscaled capacity"
        )


tpu_budget = StackValidationPolicy(
    name="tpu-budget",
    description="The estimated TPU cost of one workflow run stays under the stack's budget.",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Shrink the run or the slice, or raise maxEstimatedUsd in policy/config/<stack>.json.",
    config_schema=PolicyConfigSchema(
        properties={
            "maxEstimatedUsd": {"type": "number", "default": 1000},
            "maxIdleUsdPerDay": {"type": "number", "default": 5000},
        }
    ),
    validate=_validation(_budget),
)


# ---------------------------------------------------------------------------------------------
# Kueue: a step its queue can never admit waits until `pulumi up` gives up, the slice idle meanwhile


def _by_name(resources: list[Any], type_: str) -> dict[str, Mapping[str, Any]]:
    return {str((r.props.get("metadata") or {}).get("name")): r.props for r in resources if r.resource_type == type_}


def _selects(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A label selector against labels (null selects nothing, {} everything: Kueue ClusterQueue)."""
    if selector is None:
        return False
    if any(labels.get(key) != value for key, value in (selector.get("matchLabels") or {}).items()):
        return False
    for term in selector.get("matchExpressions") or []:
        key, operator, values = term.get("key"), term.get("operator"), list(term.get("values") or [])
        found = key in labels
        if not {
            "In": found and labels.get(key) in values,
            "NotIn": not found or labels.get(key) not in values,
            "Exists": found,
            "DoesNotExist": not found,
        }.get(str(operator), False):
            return False
    return True


def _pod_sets(props: Mapping[str, Any]) -> list[tuple[str, int, dict[str, float], dict[str, str]]]:
    """(replicated Job, pods, requests of one pod, node selector) of a JobSet."""
    selectors = {
        job.get("name"): dict(
            (((job.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec", {}).get("nodeSelector")
            or {}
        )
        for job in (props.get("spec") or {}).get("replicatedJobs") or []
    }
    return [(name, count, asked, selectors.get(name, {})) for name, count, asked in jobset_pod_sets(props)]


def _queue_problems(
    jobset: Mapping[str, Any], queue: Mapping[str, Any], flavors: Mapping[str, Any], namespaces: Mapping[str, Any]
) -> list[str]:
    """Why Kueue could never admit ``jobset`` from ``queue`` (Kueue flavorassigner.go: per requested
    resource, the group that covers it; a flavor whose node labels contradict the pod's selector is skipped;
    the pod set's total must fit a flavor's nominal quota)."""
    meta = jobset.get("metadata") or {}
    name, namespace = meta.get("name"), meta.get("namespace")
    cq_name = (queue.get("metadata") or {}).get("name")
    spec = queue.get("spec") or {}
    ns_labels = {
        **(((namespaces.get(str(namespace)) or {}).get("metadata") or {}).get("labels") or {}),
        "kubernetes.io/metadata.name": str(namespace),  # every namespace carries its name as a label
    }
    if not _selects(spec.get("namespaceSelector"), ns_labels):
        return [f"ClusterQueue {cq_name} does not admit namespace {namespace} (JobSet {name})"]
    problems = []
    groups = spec.get("resourceGroups") or []
    for pod_set, count, asked, selector in _pod_sets(jobset):
        for resource, amount in asked.items():
            group = next((g for g in groups if resource in (g.get("coveredResources") or [])), None)
            if group is None:
                problems.append(
                    f"JobSet {name} ({pod_set}) asks for {resource}, which ClusterQueue {cq_name} does not cover"
                )
                continue
            best = 0.0
            for flavor in group.get("flavors") or []:
                labels = ((flavors.get(flavor.get("name")) or {}).get("spec") or {}).get("nodeLabels") or {}
                if any(key in selector and selector[key] != value for key, value in labels.items()):
                    continue  # its nodes are not the ones the pods ask for
                quota: Mapping[str, Any] = next(
                    (r for r in flavor.get("resources") or [] if r.get("name") == resource), {}
                )
                best = max(best, quantity(quota.get("nominalQuota", "0")))
            if amount * count > best:
                problems.append(
                    f"JobSet {name} ({pod_set}) asks for {amount * count:g} {resource} but ClusterQueue {cq_name} "
                    f"offers at most {best:g} on a flavor its pods fit"
                )
    return problems


def _queue_fits(args: StackValidationArgs, report: Report) -> None:
    resources = list(args.resources)
    locals_ = _by_name(resources, LOCAL_QUEUE)
    if not locals_:
        return
    clusters, flavors = _by_name(resources, CLUSTER_QUEUE), _by_name(resources, RESOURCE_FLAVOR)
    namespaces = _by_name(resources, "kubernetes:core/v1:Namespace")
    for r in resources:
        if r.resource_type != JOBSET:
            continue
        meta = r.props.get("metadata") or {}
        queue_name = (meta.get("labels") or {}).get(QUEUE_LABEL)
        if not queue_name:
            report(
                f"JobSet {meta.get('name')} names no LocalQueue ({QUEUE_LABEL}) while the stack has one: it "
                "bypasses Kueue and competes with queued runs for the slice"
            )
            continue
        local = locals_.get(str(queue_name))
        if local is None:
            continue  # a queue managed elsewhere: not in this stack to judge
        queue = clusters.get(str((local.get("spec") or {}).get("clusterQueue")))
        if queue is None:
            continue
        for problem in _queue_problems(r.props, queue, flavors, namespaces):
            report(f"{problem}: Kueue would never admit it; size the ClusterQueue to the pools (tpu-rl:kueue)")


kueue_queue_fits = StackValidationPolicy(
    name="kueue-queue-fits",
    description="Every step is queued, and its queue can admit it (namespace, covered resources, flavors, quota).",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Keep the queues tpu-rl renders (tpu-rl:kueue), or size the ClusterQueue to the slice.",
    validate=_validation(_queue_fits),
)


POLICIES = [
    no_secrets_in_workloads,
    tpu_node_pool_shape,
    gke_control_plane,
    no_open_control_plane,
    no_broad_project_iam,
    scoped_bucket_grants,
    secrets_encryption,
    bucket_hardening,
    bucket_deletion_guard,
    no_ttl_on_managed_jobs,
    bounded_retries,
    pinned_images,
    trusted_registries,
    least_privilege_pods,
    private_publish,
    model_revision_pinned,
    cost_attribution_labels,
    tpu_budget,
    kueue_queue_fits,
]
