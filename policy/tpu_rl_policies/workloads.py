"""The steps' Jobs and JobSets and the pods of any resource: no TTL, bounded retries, pinned images from trusted
registries, least privilege on the node, a pinned model revision."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)

from core.config.workflow_keys import IMAGE_REGISTRIES
from core.printed_commands import ANY_STACK, pulumi_config_set

from .grants import REPOSITORY, _text, own_resources
from .pods import (
    Pod,
    _asks_tpu,
    _name,
    command_text,
    host_storage,
    kind_of,
    pod_containers,
    pods,
    unplaced,
    workload_kind,
)
from .properties import _config, _l, _m, _on, _yaml, judging, unseen
from .resources import CONFIG_MAP, JOB, JOBSET, Report, Resource, _guarded_resource, _guarded_stack


def _no_ttl(args: ResourceValidationArgs, props: dict[str, Any], report: Report) -> None:
    if args.resource_type not in (JOB, JOBSET):
        return
    spec = _m(props.get("spec"))
    inner = [spec] + [_m(_m(r).get("template")).get("spec") for r in _l(spec.get("replicatedJobs"))]
    if any("ttlSecondsAfterFinished" in _m(s) for s in inner):
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
    validate=_guarded_resource(_no_ttl),
)


def _above(value: Any, cap: Any) -> bool:
    """A count that is missing, not a number, or above ``cap``."""
    return isinstance(value, bool) or not isinstance(value, (int, float)) or value > cap


def _bounded_retries(args: ResourceValidationArgs, props: dict[str, Any], report: Report) -> None:
    if args.resource_type not in (JOB, JOBSET):
        return
    config = _config(args)
    max_backoff, max_restarts = config["maxBackoffLimit"], config["maxRestarts"]
    spec = _m(props.get("spec"))
    jobs = (
        [("Job", spec)]
        if args.resource_type == JOB
        else [
            (_m(r).get("name", "?"), _m(_m(_m(r).get("template")).get("spec"))) for r in _l(spec.get("replicatedJobs"))
        ]
    )
    for name, job in jobs:
        backoff = job.get("backoffLimit")
        if _above(backoff, max_backoff):
            report(f"{name}: backoffLimit {backoff} is unbounded or above {max_backoff}: a TPU slice retries for hours")
    if args.resource_type == JOBSET:
        restarts = _m(spec.get("failurePolicy")).get("maxRestarts")
        if _above(restarts, max_restarts):
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
    validate=_guarded_resource(_bounded_retries),
)


def _all_containers(resource_type: str, props: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Every container (init and ephemeral too) of every pod of a resource of any kind, and every image of a resource
    of another provider; of a ``podSpecPatch``, those that set an image (the others keep the one of the container they
    patch, judged where it is)."""
    for pod in pods(resource_type, props):
        for container in pod_containers(pod.spec):
            if pod.origin != "patch" or "image" in container:
                yield container


DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
TAGGED = re.compile(r"(?:^|/)[^/:@]+:([A-Za-z0-9_][A-Za-z0-9_.-]{0,127})$")
"""A reference that ends in a Docker tag (distribution/reference): its last path component is a name, ``:`` and the
tag (group 1). ``registry:5000/name`` has none (that ``:`` is in the host), nor has ``name:v1@sha256:...``."""


def _shown(image: Any) -> str:
    return str(image) if image not in (None, "") else "(none)"


def _pinned_images(args: ResourceValidationArgs, props: dict[str, Any], report: Report) -> None:
    # `digests`: every image by digest. `pulumi up` and `pulumi preview` pin each tag to the digest its registry gives
    # it before anything is registered (program.stack), so a stack whose previews run the program for real
    # can require it; the offline plan reads no registry and shows the tags as configured (off by default).
    digests = _config(args)["digests"] is True
    for container in _all_containers(args.resource_type, props):
        image = container.get("image")
        text = image if isinstance(image, str) else ""
        by_digest = DIGEST.search(text) is not None
        tag = TAGGED.search(text)
        # `latest` in any case: registries treat tags case-sensitively, so `:LATEST` is just as mutable.
        tagged = tag is not None and tag.group(1).lower() != "latest"
        if not (by_digest or tagged):
            report(
                f"container {container.get('name')}: image {_shown(image)} is not pinned; use a version tag or a digest"
            )
        elif digests and not by_digest:
            report(
                f"container {container.get('name')}: image {text} is not pinned by digest; `pulumi up` pins each tag "
                "to its registry's digest (the offline plan does not: leave pinned-images' digests off for it)"
            )
        elif "/pathways/" in text and not by_digest:
            report(
                f"container {container.get('name')}: Pathways image {text} must be pinned by digest "
                "(it must match the client's JAX); set tpu-rl:images"
            )


pinned_images = ResourceValidationPolicy(
    name="pinned-images",
    description="No :latest (in any case) or untagged images; Pathways server and proxy images are pinned by digest.",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Set tpu-rl:images to tags or @sha256 digests.",
    config_schema=PolicyConfigSchema(properties={"digests": {"type": "boolean", "default": False}}),
    validate=_guarded_resource(_pinned_images),
)


AR_IMAGE = re.compile(r"(?P<location>[a-z][a-z0-9-]*)-docker\.pkg\.dev/(?P<project>[^/]+)/(?P<repository>[^/@:]+)/.+")
"""An image in an Artifact Registry repository: ``<location>-docker.pkg.dev/<project>/<repository>/<image>``."""


def _upstream(config: dict[str, Any]) -> Any:
    """What a remote repository pulls from (pulumi-gcp ``artifactregistry.Repository`` ``remoteRepositoryConfig``:
    ``commonRepository.uri``, ``dockerRepository.customRepository.uri``, or ``dockerRepository.publicRepository``
    ``DOCKER_HUB``), as a registry path; None when it names none."""
    docker = _m(config.get("dockerRepository"))
    for uri in (_m(config.get("commonRepository")).get("uri"), _m(docker.get("customRepository")).get("uri")):
        if unseen(uri):
            return uri
        if isinstance(uri, str) and uri:
            return uri.removeprefix("https://").removeprefix("http://").rstrip("/")
    public = docker.get("publicRepository")
    if unseen(public):
        return public
    return "docker.io" if public == "DOCKER_HUB" else None


def _trusted(path: str, registries: tuple[str, ...]) -> bool:
    # An image without a registry host is Docker Hub's (docker.io/library/...): never a prefix match here.
    return any(path == registry or path.startswith(f"{registry}/") for registry in registries)


AR_PATH = re.compile(r"(?P<location>[a-z][a-z0-9-]*)-docker\.pkg\.dev/(?P<project>[^/@:]+)(/.*)?")
"""A registry path of Artifact Registry: ``<location>-docker.pkg.dev/<project>[/<repository>...]``."""


def _project_paths(listed: tuple[str, ...], projects: set[str]) -> tuple[str, ...]:
    """The entries of the config's registries that are paths of the stack's own project (``projects``)."""
    out = []
    for entry in listed:
        match = AR_PATH.fullmatch(entry.rstrip("/"))
        if match is not None and match["project"] in projects:
            out.append(entry)
    return tuple(out)


def _trusted_registries(args: StackValidationArgs, resources: list[Resource], report: Report) -> None:
    """Every container's image, and every image a resource of another provider runs, comes from a trusted upstream
    registry: directly, or through one of the stack's own Artifact Registry remote repositories in the same stack whose
    upstream is one (``tpu-rl:images.mirror``). A repository path of the stack's project is trusted by what it pulls
    from, never by a prefix, even where the config lists it: another repository of the project may hold anything its
    writers pushed. Such an entry trusts nothing and is named only where an image relies on it; a mirror of the
    stack's needs none."""
    listed = tuple(str(r) for r in (_config(args)["registries"] or IMAGE_REGISTRIES))
    project_wide = _project_paths(listed, own_resources(resources).projects)
    trust = Trust(tuple(r for r in listed if r not in project_wide), project_wide, _mirrors(resources))
    for r in resources:
        label = f"{kind_of(r.resource_type) or r.resource_type} {_name(r)}"
        for pod in pods(r.resource_type, r.props):
            for container in pod_containers(pod.spec):
                if pod.origin == "patch" and "image" not in container:
                    continue
                with judging():
                    image = container.get("image")
                    text = image if isinstance(image, str) else ""
                    where = f"{label}: container {container.get('name')}"
                    _judge_image(where, _shown(image), text, trust, r.urn, report)


@dataclass(frozen=True)
class Trust:
    """What an image may come from: the config's trusted registries (``registries``), its entries that are paths of
    the stack's own project (``project_wide``, which trust nothing), and the stack's repositories by (project, location,
    repository id)."""

    registries: tuple[str, ...]
    project_wide: tuple[str, ...]
    mirrors: dict[tuple[str, str, str], Resource]


def _mirrors(resources: list[Resource]) -> dict[tuple[str, str, str], Resource]:
    return {
        (_text(r.props.get("project")), _text(r.props.get("location")), _text(r.props.get("repositoryId"))): r
        for r in resources
        if r.resource_type == REPOSITORY
    }


def _judge_image(where: str, shown: str, text: str, trust: Trust, urn: str, report: Report) -> None:
    registries = trust.registries
    match = AR_IMAGE.fullmatch(text)
    mirror = trust.mirrors.get((match["project"], match["location"], match["repository"])) if match else None
    if mirror is None or match is None:
        if _trusted(text, registries):
            return
        listing = next((entry for entry in trust.project_wide if _trusted(text, (entry.rstrip("/"),))), None)
        if listing is not None:
            report(
                f"{where}: image {shown} is from a repository of the stack's own project that is not one of its "
                f"mirrors; the policy config's registries list {listing}, but a path of the stack's project is never "
                "trusted by a listing (its writers decide what it holds): name the image through the stack's mirror "
                "(tpu-rl:images.mirror) or from a trusted upstream",
                urn,
            )
            return
        report(
            f"{where}: image {shown} is not from a trusted registry ({', '.join(registries)}); it would run "
            "with the Hugging Face token and a bucket identity",
            urn,
        )
        return
    _judge_mirror(where, shown, match, mirror, registries, urn, report)


def _judge_mirror(
    where: str,
    shown: str,
    match: re.Match[str],
    mirror: Resource,
    registries: tuple[str, ...],
    urn: str,
    report: Report,
) -> None:
    props = mirror.props
    repository = f"{mirror.name} ({match['location']}-docker.pkg.dev/{match['project']}/{match['repository']})"
    mode = props.get("mode")
    if unseen(mode):
        return
    if mode != "REMOTE_REPOSITORY":
        report(
            f"{where}: image {shown} comes from the stack's repository {repository}, a {mode or 'STANDARD_REPOSITORY'} "
            "whose writers decide what runs: name images through a remote repository of a trusted upstream "
            "(tpu-rl:images.mirror)",
            urn,
        )
        return
    upstream = _upstream(_m(props.get("remoteRepositoryConfig")))
    if unseen(upstream):
        return
    if upstream is None or not _trusted(str(upstream), registries):
        report(
            f"{where}: image {shown} comes through the stack's mirror {repository}, whose upstream "
            f"{upstream or '(none)'} is not a trusted registry ({', '.join(registries)}): point the mirror at a "
            "trusted upstream",
            urn,
        )


trusted_registries = StackValidationPolicy(
    name="trusted-registries",
    description=(
        "Workload images come from the trusted registries, directly or through the stack's own remote repository of "
        "a trusted upstream."
    ),
    severity=Severity.CRITICAL,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Set tpu-rl:images to images of tpu-rl:images.registries; add an upstream to the policy config.",
    config_schema=PolicyConfigSchema(
        properties={
            "registries": {
                "type": "array",
                "items": {"type": "string", "minLength": 1},  # "" would trust every image (a prefix of every path)
                "default": list(IMAGE_REGISTRIES),
            }
        }
    ),
    validate=_guarded_stack(_trusted_registries),
)


def _known_workload_kinds(args: ResourceValidationArgs, props: dict[str, Any], report: Report) -> None:
    with judging():  # what it reads deciding where the pods are; the refusal rests on the pods it found
        found = unplaced(args.resource_type, props)
    if not found:
        return
    paths = [f"{p.where}.image" if p.origin == "stray" else p.where for p in found]
    shown = ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
    kind = kind_of(args.resource_type)
    if kind is None:
        report(
            f"{args.resource_type} {args.name} runs images outside the cluster ({shown}): tpu-rl runs its steps as "
            "JobSets in its cluster, where the pack judges their pods' identity and host access; remove it"
        )
        return
    name = _m(props.get("metadata")).get("name") or args.name
    report(
        f"{kind} {name} ({args.resource_type}) runs containers outside the pod specs of the built-in workload kinds "
        f"({shown}): a custom workload kind, whose pods get their namespace, service account and host access where "
        "the pack does not see; run it as a Job or JobSet"
    )


known_workload_kinds = ResourceValidationPolicy(
    name="known-workload-kinds",
    description=(
        "Containers run only in pod specs of the built-in workload kinds (Pod, the apps kinds, Job, CronJob, JobSet), "
        "matched by full type token; no resource of another provider runs an image."
    ),
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Run workloads as Jobs or JobSets (workloads/specs/step_manifests.py).",
    validate=_guarded_resource(_known_workload_kinds),
)


ALLOWED_CAPABILITIES = frozenset(("NET_BIND_SERVICE",))
HOST_NAMESPACES = {"hostPID": "process", "hostIPC": "IPC"}
VOLUME_SOURCES = frozenset(
    ("emptyDir", "configMap", "secret", "downwardAPI", "projected", "persistentVolumeClaim", "ephemeral", "hostPath")
)
"""The volume sources a pod may use (a host path only as the TPU workers' ``/tmp``; a claim as ``pod-bindings``
judges it): none reaches the node, another pod's storage or an image of its own."""
PROJECTED_SOURCES = frozenset(("configMap", "secret", "downwardAPI", "serviceAccountToken", "clusterTrustBundle"))


def _least_privilege_pods(args: ResourceValidationArgs, props: dict[str, Any], report: Report) -> None:
    """Where tpu-rl uses the node, and nowhere else: the TPU workers (pods that ask for ``google.com/tpu``) have the
    host network and the node's ``/tmp``; the Pathways head (the coordinator of a JobSet with TPU workers) has the
    host network. No pod shares the node's process or IPC namespace; no container is privileged, adds a
    capability, may escalate its privileges or runs as a Windows host process; a seccomp or AppArmor profile is the
    runtime's default; a volume is one of the sources a step uses, and no object names a path of the node elsewhere (a
    PersistentVolume, a custom kind's template); no pod sets what no step sets (``_pod_settings``)."""
    found = pods(args.resource_type, props)
    tpu_jobset = workload_kind(args.resource_type) == "JobSet" and any(
        _asks_tpu(p.spec, malformed=False) for p in found if p.placed
    )
    for pod in found:
        for container in pod_containers(pod.spec):
            _container_privileges(container, report)
    for pod in found:
        if pod.origin == "unread":
            report(
                f"{pod.where} is not a pod spec the pack can read (YAML or JSON of a mapping, no anchors or aliases): "
                "the pod it patches would run unjudged; remove it"
            )
        elif pod.whole:
            _pod_privileges(pod, tpu_jobset, report)
    if args.resource_type.startswith("kubernetes:"):
        judged = {id(p.spec.get("volumes")) for p in found if p.whole}
        label = f"{kind_of(args.resource_type)} {_m(props.get('metadata')).get('name') or args.name}"
        for where, source, path in host_storage(props, "", judged, 0):
            report(
                f"{label}: {where} is the node's {_shown(path)} ({source}): a pod that mounts it, as a volume or "
                "through a claim bound to it, gets the node's files; only the Pathways workers on TPU hosts mount a "
                "host path (/tmp), as a volume of their pod spec"
            )


def _container_privileges(container: dict[str, Any], report: Report) -> None:
    name = container.get("name")
    context = _m(container.get("securityContext"))
    if _on(context.get("privileged")):
        report(
            f"container {name} is privileged: root on the node, with the Hugging Face "
            "token and a bucket identity; no Pathways or MaxText container needs it"
        )
    added = {str(c) for c in _l(_m(context.get("capabilities")).get("add"))}
    if added - ALLOWED_CAPABILITIES:
        report(f"container {name} adds capabilities: remove capabilities.add")
    if _on(context.get("allowPrivilegeEscalation")):
        report(
            f"container {name} allows privilege escalation (allowPrivilegeEscalation: "
            f"{_yaml(context.get('allowPrivilegeEscalation'))}): set it false"
        )
    if _on(_m(context.get("windowsOptions")).get("hostProcess")):
        report(f"container {name} runs as a host process (windowsOptions.hostProcess): remove it")
    if context.get("procMount") not in (None, "Default"):
        report(f"container {name} unmasks /proc (procMount: {context.get('procMount')}): remove it")
    _profiles(context, f"container {name}", report)


PROFILES = {"seccompProfile": "seccomp", "appArmorProfile": "AppArmor"}
PROFILE_ANNOTATIONS = re.compile(
    r"(container\.)?(seccomp\.security\.alpha|apparmor\.security\.beta)\.kubernetes\.io/.*"
)
"""The annotations that set a profile before the fields did (still read by older kubelets)."""
POD_DNS = frozenset((None, "ClusterFirst", "ClusterFirstWithHostNet"))
"""The DNS policies a step uses: the cluster's DNS (``ClusterFirstWithHostNet`` on the host network)."""
UNSET: tuple[Any, ...] = (None, False, "", [], {})


def _profiles(context: dict[str, Any], where: str, report: Report) -> None:
    """A seccomp or AppArmor profile, where set, is the runtime's default: ``Unconfined`` lifts the syscall filter or
    the mandatory access control, a ``Localhost`` profile is a node file the stack does not ship."""
    for key, what in PROFILES.items():
        kind = _m(context.get(key)).get("type")
        if context.get(key) is not None and not unseen(kind) and kind != "RuntimeDefault":
            report(f"{where} sets the {what} profile {kind}: set {key}.type RuntimeDefault, or leave it unset")


def _present(value: Any) -> bool:
    """A pod field set to something (one not known yet is noted, not judged)."""
    return not unseen(value) and value not in UNSET


def _pod_settings(pod: Pod, report: Report) -> None:
    """What no step sets, and each would change where the pod runs, whom it reaches or what it shares: a node chosen
    past the scheduler and Kueue, a priority class that preempts the cluster's own pods, host names and name servers
    of its own, kernel parameters, a process namespace shared across containers, a host port."""
    spec, where = pod.spec, f"pod {pod.where}"
    fields = {
        "nodeName": "is bound to a node past the scheduler and Kueue's quota",
        "priorityClassName": "takes a priority class (system-* ones preempt the cluster's own pods)",
        "priority": "sets a priority of its own",
        "hostAliases": "maps host names to addresses of its own (the Hub's or Cloud Storage's to another server)",
        "dnsConfig": "names resolvers or search domains of its own",
        "shareProcessNamespace": "shares one process namespace across its containers (each reads the others' env)",
    }
    for key, why in fields.items():
        if _present(spec.get(key)):
            report(f"{where} {why} ({key}): no step sets it; remove it")
    dns = spec.get("dnsPolicy")
    if not unseen(dns) and dns not in POD_DNS:
        report(f"{where} sets dnsPolicy {dns}: its names resolve outside the cluster's DNS; use ClusterFirst")
    context = _m(spec.get("securityContext"))
    if _present(context.get("sysctls")):
        report(f"{where} sets kernel parameters (securityContext.sysctls): no step needs one; remove them")
    _profiles(context, where, report)
    for key, value in _m(pod.metadata.get("annotations")).items():
        if (
            PROFILE_ANNOTATIONS.fullmatch(str(key))
            and not unseen(value)
            and value not in ("runtime/default", "docker/default")
        ):
            report(f"{where} annotation {key} sets the profile {value}: remove it, or set runtime/default")
    host_network = _on(spec.get("hostNetwork"))
    for container in pod_containers(spec):
        for port in _l(container.get("ports")):
            port = _m(port)
            host = port.get("hostPort")
            if _present(host) and not (host_network and host == port.get("containerPort")):
                report(
                    f"{where}: container {container.get('name')} opens host port {host}: a port of the node, "
                    "reachable past the cluster's network policies; remove hostPort"
                )


def _pod_privileges(pod: Pod, tpu_jobset: bool, report: Report) -> None:
    spec = pod.spec
    tpu = pod.placed and _asks_tpu(spec, malformed=False)
    for key, namespace in HOST_NAMESPACES.items():
        if _on(spec.get(key)):
            report(
                f"pod {pod.where} shares the node's {namespace} namespace ({key}: {_yaml(spec.get(key))}): it "
                "can see the node's other pods, the Pathways workers and their tokens among them; no step needs it"
            )
    if _on(spec.get("hostNetwork")) and not (tpu or (pod.coordinator and tpu_jobset)):
        report(
            f"pod {pod.where} uses the node's network (hostNetwork: {_yaml(spec.get('hostNetwork'))}): only the "
            "Pathways head and the TPU workers do"
        )
    if _on(_m(_m(spec.get("securityContext")).get("windowsOptions")).get("hostProcess")):
        report(f"pod {pod.where} runs as a host process (windowsOptions.hostProcess): remove it")
    for volume in _l(spec.get("volumes")):
        _volume(_m(volume), tpu, report)
    _pod_settings(pod, report)


def _volume(volume: dict[str, Any], tpu: bool, report: Report) -> None:
    name = volume.get("name")
    if volume.get("hostPath") is not None:
        host_path = _m(volume.get("hostPath")).get("path")
        if host_path != "/tmp" or not tpu:
            report(
                f"volume {name} mounts the node's {host_path}: only the Pathways workers on TPU hosts mount a host "
                "path (/tmp)"
            )
    others = sorted(str(key) for key in volume if key != "name" and key not in VOLUME_SOURCES)
    if others:
        report(
            f"volume {name} is a {', '.join(others)} volume, a source no step uses (it may reach the node, another "
            "pod's storage or an image of its own): mount emptyDir, ConfigMap, Secret, projected or downward API "
            "volumes, or a claim the stack declares"
        )
    for source in _l(_m(volume.get("projected")).get("sources")):
        unknown = sorted(str(key) for key in _m(source) if key not in PROJECTED_SOURCES)
        if unknown:
            report(f"volume {name} projects {', '.join(unknown)}, a source no step uses: project ConfigMaps or Secrets")


least_privilege_pods = ResourceValidationPolicy(
    name="least-privilege-pods",
    description=(
        "No privileged container, added capability or privilege escalation; no host PID or IPC; the host network "
        "and a host path (/tmp) only where the Pathways head and TPU workers need them; only the volume sources the "
        "steps use; no node path anywhere else (a PersistentVolume, a custom kind's template); seccomp and AppArmor "
        "only RuntimeDefault; no host port, host alias, DNS of its own, node name, priority class, sysctl or shared "
        "process namespace."
    ),
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Keep the pod specs of workloads/specs/step_manifests.py (only the TPU workers mount /tmp).",
    validate=_guarded_resource(_least_privilege_pods),
)


def _model_revision(args: ResourceValidationArgs, props: dict[str, Any], report: Report) -> None:
    if args.resource_type not in (JOB, JOBSET, CONFIG_MAP):
        return
    if args.resource_type == CONFIG_MAP:
        # A step's script is a file of its ConfigMap (``bash /tpu-rl/run.sh``): this policy judges one resource, so
        # it reads the script where it is. Data not known yet (the model card's, at a preview) holds no step's
        # script: the program builds those before any resource exists.
        data = props.get("data")
        text = " ".join(v for v in data.values() if isinstance(v, str)) if isinstance(data, dict) else ""
    else:
        text = command_text(props.get("spec"))
    # tpu-rl's conversion resolves the revision once (base_snapshot.py snapshot REPO REVISION gs://...) and
    # converts the commit it printed (--revision="${commit}"); a hand-written Job passes --revision=REVISION.
    snapshot = re.search(r"\ssnapshot\s+'?[^\s'\"]+'?\s+'?([^\s'\"]+)'?\s+'?gs://", text)
    argv = re.search(r"--revision=(?!\$\{)([^\s\"']+)", text)
    match = snapshot or argv
    if match and not re.fullmatch(r"[0-9a-f]{40}", match.group(1)):
        report(
            f"model revision {match.group(1)!r} is a moving ref; pin a commit for reproducible runs "
            f"({pulumi_config_set(ANY_STACK, 'tpu-rl:model.revision', '<commit>')})"
        )


model_revision_pinned = ResourceValidationPolicy(
    name="model-revision-pinned",
    description="The Hugging Face model revision is pinned to a commit.",
    severity=Severity.LOW,
    enforcement_level=EnforcementLevel.ADVISORY,
    remediation_steps="Set tpu-rl:model.revision to the commit the preflight reports.",
    validate=_guarded_resource(_model_revision),
)
