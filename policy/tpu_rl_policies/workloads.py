"""The steps' Jobs and JobSets and the pods of any resource: no TTL, bounded retries, pinned images from trusted
registries, least privilege on the node, a pinned model revision."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
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

from core.config.schema import IMAGE_REGISTRIES
from core.printed_commands import ANY_STACK, pulumi_config_set

from .grants import REPOSITORY, _text, own_resources
from .pods import _asks_tpu, _name, command_text, kind_of, pod_containers, pods, stray_images
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
    max_backoff, max_restarts = config.get("maxBackoffLimit", 256), config.get("maxRestarts", 3)
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
    """Every container (init and ephemeral too) of every pod of a resource of any kind."""
    for pod in pods(resource_type, props):
        yield from pod_containers(pod.spec)


DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
"""A Docker tag (distribution/reference): what follows the last ``:`` of the last path component."""


def image_tag(image: str) -> str | None:
    """The tag of an image reference (None: untagged; ``registry:5000/name`` has no tag)."""
    last = image.split("@", 1)[0].rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else None


def _shown(image: Any) -> str:
    return str(image) if image not in (None, "") else "(none)"


def _pinned_images(args: ResourceValidationArgs, props: dict[str, Any], report: Report) -> None:
    # `digests`: every image by digest. `pulumi up` and `pulumi preview` pin each tag to the digest its registry gives
    # it before anything is registered (program.stack), so a stack whose previews run the program for real
    # can require it; the offline plan reads no registry and shows the tags as configured (off by default).
    digests = _config(args).get("digests") is True
    for container in _all_containers(args.resource_type, props):
        image = container.get("image")
        text = image if isinstance(image, str) else ""
        by_digest = DIGEST.search(text) is not None
        tag = image_tag(text) if "@" not in text else None
        # `latest` in any case: registries treat tags case-sensitively, so `:LATEST` is just as mutable.
        tagged = tag is not None and TAG.fullmatch(tag) is not None and tag.lower() != "latest"
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


def _trusted_registries(args: StackValidationArgs, resources: list[Resource], report: Report) -> None:
    """Every container's image comes from a trusted upstream registry: directly, or through one of the stack's own
    Artifact Registry remote repositories in the same stack whose upstream is one (``tpu-rl:images.mirror``). A
    repository path of the stack's project is trusted by what it pulls from, never by a prefix: another repository
    of the project may hold anything its writers pushed."""
    listed = tuple(str(r) for r in (_config(args).get("registries") or IMAGE_REGISTRIES))
    own = own_resources(resources)
    own_paths = tuple(f"-docker.pkg.dev/{project}" for project in own.projects)
    project_wide = [r for r in listed if any(path in r for path in own_paths) and ".pkg.dev/" in r]
    for entry in project_wide:
        report(
            f"the policy config's registries list {entry}, a path of the stack's own project: list trusted upstream "
            "registries; the stack's mirrors are trusted by their upstream (tpu-rl:images.mirror, no entry needed)"
        )
    registries = tuple(r for r in listed if r not in project_wide)
    mirrors = {
        (_text(r.props.get("project")), _text(r.props.get("location")), _text(r.props.get("repositoryId"))): r
        for r in resources
        if r.resource_type == REPOSITORY
    }
    for r in resources:
        found = pods(r.resource_type, r.props)
        for pod in found:
            for container in pod_containers(pod.spec):
                with judging():
                    image = container.get("image")
                    text = image if isinstance(image, str) else ""
                    where = f"{kind_of(r.resource_type)} {_name(r)}: container {container.get('name')}"
                    _judge_image(where, _shown(image), text, registries, mirrors, r.urn, report)


def _judge_image(
    where: str,
    shown: str,
    text: str,
    registries: tuple[str, ...],
    mirrors: dict[tuple[str, str, str], Resource],
    urn: str,
    report: Report,
) -> None:
    match = AR_IMAGE.fullmatch(text)
    mirror = mirrors.get((match["project"], match["location"], match["repository"])) if match else None
    if mirror is None or match is None:
        if not _trusted(text, registries):
            report(
                f"{where}: image {shown} is not from a trusted registry ({', '.join(registries)}); it would run "
                "with the Hugging Face token and a bucket identity",
                urn,
            )
        return
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
        properties={"registries": {"type": "array", "items": {"type": "string"}, "default": list(IMAGE_REGISTRIES)}}
    ),
    validate=_guarded_stack(_trusted_registries),
)


def _known_workload_kinds(args: ResourceValidationArgs, props: dict[str, Any], report: Report) -> None:
    strays = stray_images(args.resource_type, props)
    if not strays:
        return
    paths = [f"{where}.image" for where, _ in strays]
    shown = ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
    name = _m(props.get("metadata")).get("name") or args.name
    report(
        f"{kind_of(args.resource_type)} {name} ({args.resource_type}) runs images outside any pod spec ({shown}): an "
        "unknown workload kind, whose pods' host access and service account the pack does not see; run it as a Job "
        "or JobSet"
    )


known_workload_kinds = ResourceValidationPolicy(
    name="known-workload-kinds",
    description="Every image a Kubernetes object carries is a container of a pod spec the pack judges.",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Run workloads as Jobs or JobSets (workloads/specs/step_manifests.py).",
    validate=_guarded_resource(_known_workload_kinds),
)


ALLOWED_CAPABILITIES = frozenset(("NET_BIND_SERVICE",))
HOST_NAMESPACES = {"hostPID": "process", "hostIPC": "IPC"}


def _least_privilege_pods(args: ResourceValidationArgs, props: dict[str, Any], report: Report) -> None:
    """Where tpu-rl uses the node, and nowhere else: the TPU workers (pods that ask for ``google.com/tpu``) have the
    host network and the node's ``/tmp``; the Pathways head (the coordinator of a JobSet with TPU workers) has the
    host network. No pod shares the node's process or IPC namespace; no container is privileged, adds a
    capability, may escalate its privileges or runs as a Windows host process."""
    found = pods(args.resource_type, props)
    if not found:
        return
    tpu_jobset = kind_of(args.resource_type) == "JobSet" and any(_asks_tpu(p.spec, malformed=False) for p in found)
    for pod in found:
        for container in pod_containers(pod.spec):
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
    for pod in found:
        spec = pod.spec
        tpu = _asks_tpu(spec, malformed=False)
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
            volume = _m(volume)
            if volume.get("hostPath") is None:
                continue
            host_path = _m(volume.get("hostPath")).get("path")
            if host_path != "/tmp" or not tpu:
                report(
                    f"volume {volume.get('name')} mounts the node's {host_path}: only the Pathways workers on "
                    "TPU hosts mount a host path (/tmp)"
                )


least_privilege_pods = ResourceValidationPolicy(
    name="least-privilege-pods",
    description=(
        "No privileged container, added capability or privilege escalation; no host PID or IPC; the host network "
        "and a host path (/tmp) only where the Pathways head and TPU workers need them."
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
