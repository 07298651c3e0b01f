"""What `make up` reads of a stack's state before `pulumi up`, from ``pulumi stack export`` (which takes no lock):
the Helm releases it holds (``releases_in_state``), the digests its last `up` pinned the images' tags to
(``pins_in_state``), the Cloud KMS keys it holds (``keys_in_state``), the cluster it holds (``state_cluster``) and a
release a destroy dropped from the state while that cluster keeps it (``stranded_release``). ``python -m tools.state
releases`` runs them (tools/state.py)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from core.errors import TpuRlError
from core.names import PROJECT
from core.redact import scrub

HELM_RELEASE = "kubernetes:helm.sh/v3:Release"


CLUSTER = "gcp:container/cluster:Cluster"
CRYPTO_KEY = "gcp:kms/cryptoKey:CryptoKey"


STACK_TYPE = "pulumi:pulumi:Stack"
"""The stack's own resource, whose outputs are the program's ``pulumi.export``s."""


EXPORT_TIMEOUT = 120.0
"""How long ``pulumi stack export`` may take (seconds) before ``make up`` goes on without the state's releases."""


DEPLOYMENT_VERSIONS = (3, 4)
"""The deployment schemas this reads (pulumi sdk/go/common/apitype/core.go: ``DeploymentSchemaVersionCurrent`` 3,
``DeploymentSchemaVersionLatest`` 4, both ``DeploymentV3``)."""


class StateError(TpuRlError):
    """The state cannot be located, created or read (one line)."""


def releases_in_state(export: str) -> list[str]:
    """The names of the Helm releases (``kubernetes:helm.sh/v3:Release``) that the output of ``pulumi stack export``
    holds, sorted.

    The shape is the CLI's (pulumi v3.259.0 ``pkg/cmd/pulumi/stack/stack_export.go`` writes the backend's
    ``apitype.UntypedDeployment``: ``{"version": N, "deployment": DeploymentV3}``; sdk/go/common/apitype/core.go:
    ``resources`` of ``ResourceV3`` with ``urn``, ``type``, ``inputs``; ``pending_operations`` of ``OperationV2``
    with ``resource`` and ``type``). A new stack's deployment is ``null`` (diy ``CreateStack`` saves an empty
    deployment): no release. A release with a create pending (``"type": "creating"``, which the journal carries
    into every later snapshot: pkg/backend/journal.go) counts as held: its runner was killed while Helm installed
    it, and the state cannot say whether Helm's revision is its own, so ``up`` does not claim a destroy dropped it.
    A release is named by its ``name`` input (the program sets it), else its output. Anything else raises
    ``StateError``: ``make up`` then compares nothing."""
    try:
        document = json.loads(export)
    except json.JSONDecodeError as err:
        raise StateError(f"`pulumi stack export` gave no JSON ({err.msg})") from None
    if not isinstance(document, dict) or document.get("version") not in DEPLOYMENT_VERSIONS:
        version = document.get("version") if isinstance(document, dict) else None
        raise StateError(f"`pulumi stack export` gave a deployment of schema version {version!r}, not 3 or 4")
    deployment = document.get("deployment")
    deployment = {} if deployment is None else deployment
    if not isinstance(deployment, dict):
        raise StateError("`pulumi stack export` gave a deployment that is not an object")
    resources = list(deployment.get("resources") or [])
    for operation in deployment.get("pending_operations") or []:
        if isinstance(operation, dict) and operation.get("type") == "creating":
            resources.append(operation.get("resource"))
    names = set()
    for resource in resources:
        if not isinstance(resource, dict) or resource.get("type") != HELM_RELEASE:
            continue
        name = (resource.get("inputs") or {}).get("name") or (resource.get("outputs") or {}).get("name")
        if not isinstance(name, str) or not name or "," in name:
            urn = scrub(str(resource.get("urn")), limit=200)
            raise StateError(f"the state's Helm release {urn} has no name this can read")
        names.add(name)
    return sorted(names)


def pins_in_state(export: str) -> dict[str, str]:
    """The digests the state's last `up` pinned its tagged images to (the stack's ``images`` output:
    ``core.images.pins_of_outputs``), configured reference -> digest; none when the state has no such output (a new
    stack, an older version, the offline plan's tags). ``make up`` hands them to the program
    (``core.images.PINS_IN_STATE``), so a tag that moved upstream since renames no step."""
    from core.images import pins_of_outputs

    document = json.loads(export)
    for resource in ((document.get("deployment") or {}).get("resources")) or []:
        if isinstance(resource, dict) and resource.get("type") == STACK_TYPE and not resource.get("delete"):
            return pins_of_outputs((resource.get("outputs") or {}).get("images"))
    return {}


def steps_in_state(export: str) -> dict[str, object]:
    """The version that wrote the state (its ``version`` output, "" before 0.1.0) and each step's name (its ``steps``
    output), as ``core.version.STEPS_IN_STATE`` holds them; no steps for a state without that output."""
    document = json.loads(export)
    for resource in ((document.get("deployment") or {}).get("resources")) or []:
        if isinstance(resource, dict) and resource.get("type") == STACK_TYPE and not resource.get("delete"):
            outputs = resource.get("outputs") or {}
            steps = outputs.get("steps")
            held = steps.items() if isinstance(steps, dict) else ()
            names = {step: found.get("name") for step, found in held if isinstance(found, dict)}
            version = outputs.get("version") if isinstance(outputs.get("version"), str) else ""
            return {"version": version, "steps": {k: v for k, v in names.items() if isinstance(v, str)}}
    return {"version": "", "steps": {}}


def keys_in_state(export: str) -> list[str]:
    """The ids of the Cloud KMS keys (``gcp:kms/cryptoKey:CryptoKey``) the exported state holds, sorted, for ``make up``
    to hand the program (``core.names.KEYS_IN_STATE``): a key the state holds is the stack's own, whatever
    cluster uses it. A key is named by its inputs as the provider names it (``{keyRing}/cryptoKeys/{name}``:
    magic-modules ``CryptoKey.yaml`` ``id_format``); one with a create pending counts (its runner was killed while the
    provider created it, so it may be this stack's)."""
    document = json.loads(export)
    deployment = document.get("deployment") or {}
    resources: list[Any] = [r for r in deployment.get("resources") or [] if isinstance(r, dict) and not r.get("delete")]
    for operation in deployment.get("pending_operations") or []:
        if isinstance(operation, dict) and operation.get("type") == "creating":
            resources.append(operation.get("resource"))
    keys = set()
    for resource in resources:
        if not isinstance(resource, dict) or resource.get("type") != CRYPTO_KEY:
            continue
        inputs = resource.get("inputs") or {}
        ring, name = inputs.get("keyRing"), inputs.get("name")
        if isinstance(ring, str) and isinstance(name, str) and ring and name and "," not in ring + name:
            keys.add(f"{ring}/cryptoKeys/{name}")
    return sorted(keys)


def state_cluster(export: str) -> tuple[str, str] | None:
    """The endpoint and CA certificate of the GKE cluster the exported state holds, from its outputs
    (``endpoint``, ``masterAuth.clusterCaCertificate``, what the program's kubeconfig is built from:
    ``infra.gcp.cluster``); None when the state holds no cluster, or either is not a plain string (a secret the
    export leaves encrypted)."""
    document = json.loads(export)
    for resource in ((document.get("deployment") or {}).get("resources")) or []:
        if isinstance(resource, dict) and resource.get("type") == CLUSTER and not resource.get("delete"):
            outputs = resource.get("outputs") or {}
            endpoint = outputs.get("endpoint")
            ca = (outputs.get("masterAuth") or {}).get("clusterCaCertificate")
            if isinstance(endpoint, str) and endpoint and isinstance(ca, str) and ca:
                return endpoint, ca
            return None
    return None


def cluster_protected(export: str) -> bool:
    """Whether the exported state's GKE cluster is protected (``protect``: a protected stack's, ``tpu-rl:protect``):
    a destroy does not delete it, so a release such a destroy dropped is cleared with ``helm uninstall``, not by
    finishing the destroy (``infra.k8s.manifests.helm_release_problem``)."""
    document = json.loads(export)
    for resource in ((document.get("deployment") or {}).get("resources")) or []:
        if isinstance(resource, dict) and resource.get("type") == CLUSTER and not resource.get("delete"):
            return resource.get("protect") is True
    return False


def platform_releases(kueue_install: bool) -> list[tuple[str, str]]:
    """The Helm releases the program installs (``infra.k8s.platform.KubernetesPlatform``): name and namespace of
    JobSet's, and of Kueue's with ``tpu-rl:kueue.enabled`` (``Settings.kueue.install``)."""
    from infra.k8s.kueue import NAMESPACE as KUEUE_NAMESPACE  # here: every state command imports this module
    from infra.k8s.manifests import JOBSET_NAMESPACE

    return [("jobset", JOBSET_NAMESPACE), *([("kueue", KUEUE_NAMESPACE)] if kueue_install else [])]


def stranded_release(
    stack: str,
    export: str,
    held: Iterable[str],
    releases: Iterable[tuple[str, str]],
    read: Callable[[str], Any] | None = None,
    *,
    context: str,
) -> str | None:
    """The one line that stops `make up` before `pulumi up` (None: nothing to stop for): one of the program's
    ``releases`` (``platform_releases``) that the state does not hold, in a cluster the state holds, whose Helm
    storage has a revision of it (``helm_release_problem`` with the state's releases ``held``). The cluster is read
    only when such a release may exist: the state holds the cluster and lacks a release. ``read`` makes the reader
    of a kubeconfig (default ``infra.k8s.live.ClusterReader``); a cluster it cannot read raises
    ``infra.k8s.live.ClusterReadError``. The line's command names the cluster by its kubeconfig ``context``
    (``Settings.kube_context``).

    Why before `pulumi up` and not only in the program: after a destroy whose cluster delete failed, the state
    holds the cluster without what the destroy deleted (its node pools, the TPU slice's included), so the engine
    starts creating those again at once, while the program's own check (``KubernetesPlatform._helm_free``) runs
    once the cluster's provider is configured; an `up` the program fails still waits for the creates in flight
    (the engine does not cancel a step it started)."""
    held = frozenset(held)
    missing = [(name, namespace) for name, namespace in releases if name not in held]
    if not missing:
        return None
    cluster = state_cluster(export)
    if cluster is None:
        return None
    from infra.k8s import live
    from infra.k8s.kubeconfig import build_kubeconfig
    from infra.k8s.manifests import helm_release_problem

    protected = cluster_protected(export)
    reader = (read or live.ClusterReader)(build_kubeconfig(f"{PROJECT}-{stack}", *cluster))
    try:
        for name, namespace in missing:
            newest = reader.helm_release(namespace, name)
            problem = helm_release_problem(
                name, namespace, newest, in_state=held, stack=stack, protected=protected, context=context
            )
            if problem:
                return problem
    finally:
        reader.close()
    return None


def export_state(stack: str, timeout: float = EXPORT_TIMEOUT) -> str:
    """The output of ``pulumi stack export --stack <stack>``, run with a bound. The export reads the latest
    checkpoint without the stack's lock (pulumi v3.259.0 ``pkg/backend/diy/backend.go`` ``ExportDeployment`` calls
    no ``Lock``, unlike ``ImportDeployment``; Pulumi Cloud: ``pkg/backend/httpstate/client/client.go``
    ``ExportStackDeployment``, a GET of the stack's ``export``), so it neither waits for nor blocks the `pulumi up`
    that follows."""
    import subprocess  # here: every state command imports this module, `releases` alone runs a process

    try:
        done = subprocess.run(
            ["pulumi", "stack", "export", "--stack", stack],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise StateError(f"`pulumi stack export` of stack {stack} took more than {timeout:.0f} s") from None
    except OSError as err:
        raise StateError(f"cannot run `pulumi stack export`: {scrub(str(err), limit=200)}") from None
    if done.returncode != 0:
        said = next((line for line in done.stderr.splitlines() if line.strip()), f"exit {done.returncode}")
        raise StateError(f"`pulumi stack export` of stack {stack} failed: {scrub(said, limit=200)}")
    return done.stdout
