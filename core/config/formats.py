"""The text formats a configuration value must have: each a ``Text`` reader (a full-match pattern and the words a
refusal shows), named for what it reads (a project id, a zone, a bucket, an image reference, a Hub repository...);
and the markers of the values ``load`` reads with their own functions (MaxText's extra arguments, the authorized
networks, the image registries)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.config.values import Text

PROJECT_ID = Text(r"[a-z][a-z0-9-]{4,28}[a-z0-9]", "a project id: 6-30 lowercase letters, digits, hyphens")
REGION = Text(r"[a-z]+-[a-z]+[0-9]{1,2}", "a region such as us-east5")
ZONE = Text(r"[a-z]+-[a-z]+[0-9]{1,2}-[a-z]", "a zone such as us-east5-b")
CLUSTER_NAME = Text(
    r"[a-z]([a-z0-9-]{0,18}[a-z0-9])?",
    "a lowercase letter first, then lowercase letters, digits or hyphens, at most 20 characters, no trailing hyphen",
)
BUCKET_NAME = Text(
    r"(?!goog)(?!.*g(oo|00)gle)[a-z0-9][a-z0-9_-]{1,61}[a-z0-9]",
    "3-63 lowercase letters, digits, hyphens or underscores, starting and ending with a letter or digit, not "
    'starting with "goog" and not containing "google"',
)
NAMESPACE = Text(
    r"(?!kube-)(?!gke-)(?!gmp-)(?!(default|jobset-system|config-management-system|istio-system)$)"
    r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?",
    "a DNS-1123 label of our own (not default, jobset-system or a GKE-owned kube-*, gke-*, gmp-* namespace)",
)
MACHINE_TYPE = Text(
    r"[a-z][a-z0-9]{0,9}-[a-z0-9]+(-[a-z0-9]+){0,3}", "a Compute Engine machine type such as n2-standard-64"
)
TPU_MACHINE_TYPE = Text(MACHINE_TYPE.pattern, "a TPU VM machine type such as ct6e-standard-4t")
"""The same shape, named by a TPU example: which types a TPU version offers is the catalogue's (core/tpu.py)."""
RESERVATION = Text(
    r"([a-z]([-a-z0-9]{0,61}[a-z0-9])?)|(projects/[a-z][a-z0-9-]{4,28}[a-z0-9]/reservations/[a-z]([-a-z0-9]{0,61}[a-z0-9])?)",
    "a reservation name, or projects/PROJECT/reservations/NAME for a shared reservation",
)
REVISION = Text(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,99}", "a branch, tag or 40-character commit of the repository")
REGISTRY = Text(
    r"[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?(:[0-9]{1,5})?(/[a-z0-9]([a-z0-9._-]{0,126}[a-z0-9])?){1,4}",
    "a registry host and repository path such as us-docker.pkg.dev/my-project/my-repo",
)
IMAGE = Text(
    r"(?!(?i:.*:latest)$)[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?(:[0-9]{1,5})?(/[a-z0-9._-]+)+"
    r"(:[A-Za-z0-9._-]{1,128}|@sha256:[0-9a-f]{64})",
    "an image with a version tag or an @sha256 digest (:latest, in any case, is not reproducible), "
    "from a registry of tpu-rl:images.registries",
)
VERSION_PREFIX = Text(
    r"1\.[0-9]{2}\.([0-9]{1,2}(-gke\.[0-9]{1,10})?)?", 'a GKE version prefix such as "1.35." or "1.35.2"'
)
HOLD = Text(
    r"20[0-9]{2}-[01][0-9]-[0-3][0-9]/20[0-9]{2}-[01][0-9]-[0-3][0-9]",
    "two UTC dates START/END such as 2026-12-01/2026-12-29 (at most 30 days apart)",
)
KMS_KEY = Text(
    r"create|projects/[a-z][a-z0-9-]{4,28}[a-z0-9]/locations/[a-z]+-[a-z]+[0-9]{1,2}/keyRings/[A-Za-z0-9_-]{1,63}"
    r"/cryptoKeys/[A-Za-z0-9_-]{1,63}",
    "create, or a key projects/PROJECT/locations/REGION/keyRings/RING/cryptoKeys/KEY",
)
DISK_IMAGE = Text(
    r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?",
    "a Compute Engine image name of gcp:project (1-63 lowercase letters, digits, hyphens)",
)
HUB_CACHE = Text(
    r"gs://(?!goog)(?![a-z0-9_-]*g(oo|00)gle)[a-z0-9][a-z0-9_-]{1,61}[a-z0-9]/([A-Za-z0-9][A-Za-z0-9._-]{0,100}/){1,8}",
    "a gs:// folder such as gs://my-project-tpu-rl-hub/hub/ (a bucket name, then at least one folder, ending in /)",
)
STATE_BACKEND = Text(
    r"gs://(?!goog)(?![a-z0-9_-]*g(oo|00)gle)[a-z0-9][a-z0-9_-]{1,61}[a-z0-9](/(?!\.\.?(/|$))[A-Za-z0-9._-]{1,100}){0,8}"
    r"|https://[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?(:[0-9]{1,5})?"
    r"|file://(~|/)[A-Za-z0-9._~/-]{0,400}",
    "where the stack's Pulumi state lives: gs://BUCKET or gs://BUCKET/PREFIX (a bucket of the stack's own), a "
    "Pulumi Cloud URL such as https://api.pulumi.com, or file:///DIR (outside the checkout)",
)
IAM_MEMBER = Text(
    r"(user|serviceAccount|group):[A-Za-z0-9._%+-]{1,100}@[A-Za-z0-9.-]{1,200}|domain:[a-z0-9.-]{1,200}"
    r"|principal(Set)?://[!-~]{1,400}",
    "an IAM member named on purpose: user:, serviceAccount: or group: with an email, domain:, principal:// or "
    "principalSet:// (never a project's convenience member or allUsers/allAuthenticatedUsers)",
)
"""An IAM member a stack names as its own (https://cloud.google.com/iam/docs/principal-identifiers): what `make
state-bucket` grants the state (``MEMBERS=``, ``READERS=``) and ``tpu-rl:access`` lists."""
WORKLOAD_IDENTITY_POOL = Text(
    r"projects/[0-9]{1,20}/locations/global/workloadIdentityPools/[a-z0-9-]{4,32}",
    "a Workload Identity pool projects/NUMBER/locations/global/workloadIdentityPools/ID (the project's number)",
)
STACK_NAME = Text(
    r"[A-Za-z0-9_.-]{1,100}", "a Pulumi stack name such as prod (letters, digits, hyphens, underscores, periods)"
)
KUBE_CONTEXT = Text(
    r"[A-Za-z0-9][A-Za-z0-9_.:@/-]{0,252}",
    "a kubeconfig context's name: letters, digits and _ . : @ / - (gke_<project>_<region>_<cluster> for GKE)",
)
CLOCK = Text(r"([01][0-9]|2[0-3]):[0-5][0-9]", "a UTC time HH:MM such as 09:00")
STATE_ORGANIZATION = Text(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}", "a Pulumi Cloud organization's name")
QUEUE_NAME = Text(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", "a LocalQueue name (a DNS-1123 label)")
TOKEN = Text(r"\S{1,512}", "a Hugging Face read token")
WRITE_TOKEN = Text(r"\S{1,512}", "a Hugging Face write token")
HUB_REPO = Text(
    r"(?!.*(--|\.\.))(?!.*\.git$)[A-Za-z0-9]([A-Za-z0-9._-]{0,94}[A-Za-z0-9])?/[A-Za-z0-9]([A-Za-z0-9._-]{0,94}[A-Za-z0-9])?",
    "a Hub model repository `namespace/name` (letters, digits, '-', '_', '.'; at most 96 characters each, "
    "no '--' or '..', not ending in .git), or empty for no publication",
)


@dataclass(frozen=True)
class _Marker:
    """A reader that passes the raw value on: ``load`` reads these fields with their own functions."""

    allowed: str

    def __call__(self, key: str, value: Any) -> Any:
        return value

    def describe(self) -> str:
        return self.allowed


MAXTEXT_ARGS = _Marker("MaxText key: value pairs")
"""``training.extraArgs``: checked against MaxText's key table by ``load.read_extra_args``."""
NETWORKS = _Marker("list of CIDRs")
"""``authorizedNetworks``: a list checked by ``core.config.lists.read_networks``."""
REGISTRIES = _Marker("list of registry paths")
"""``images.registries``: a list checked by ``core.config.lists.read_registries``."""
IAM_MEMBERS = _Marker("list of IAM members")
"""``access.members``, ``access.readers``: a list checked by ``core.config.lists.read_members``."""
