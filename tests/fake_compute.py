"""A loopback Compute Engine, Service Usage, Cloud Quotas, Cloud KMS, GKE (``clusters.list``: ``GET
/v1/projects/<p>/locations/-/clusters``, https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/
projects.locations.clusters/list) and Cloud Storage (JSON API ``buckets.get``) API for the capacity preflight: the REST
paths the official clients call (google-cloud-compute ``transports/rest_base.py``, among them ``images.get``:
``GET /compute/v1/projects/<p>/global/images/<name>``, google-cloud-kms
``key_management_service/transports/rest_base.py``, google-cloud-storage ``Client.get_bucket``:
``GET /storage/v1/b/<bucket>``), their JSON (camelCase, int64 as strings) and Google's error
bodies (``{"error": {code, message, errors[{reason}], details[ErrorInfo]}}``), so the real clients parse real
shapes; the zone's machine, accelerator and disk types (``ZONE_OFFERS``), the project's quotas across all regions
(``projects.get``, ``GLOBAL_ENOUGH`` unless a test sets others) and its networks (``networks.get``), and Resource
Manager's ``projects.testIamPermissions`` (v3: a POST of ``{"permissions": [...]}`` answered with the subset held,
``{}`` for none); a route may also answer raw bytes (``raw``: not JSON, gzip, a bomb) for the hostile-reply tests. See
/work/notes/compute-api.md for where each shape comes from."""

from __future__ import annotations

import contextlib
import copy
import json
import re
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.loopback import LoopbackServer

ZONE_URL = "https://www.googleapis.com/compute/v1/projects/{project}/zones/{zone}"


def reservation(
    name: str,
    *,
    project: str,
    zone: str,
    count: int,
    in_use: int = 0,
    machine_type: str = "ct6e-standard-4t",
    specific: bool = True,
    status: str = "READY",
) -> dict[str, Any]:
    """A ``compute#reservation`` as ``reservations.get`` answers it."""
    zone_url = ZONE_URL.format(project=project, zone=zone)
    return {
        "kind": "compute#reservation",
        "id": "4213987462318",
        "name": name,
        "status": status,
        "zone": zone_url,
        "selfLink": f"{zone_url}/reservations/{name}",
        "specificReservationRequired": specific,
        "specificReservation": {
            "count": str(count),
            "inUseCount": str(in_use),
            "assuredCount": str(count),
            "instanceProperties": {"machineType": machine_type},
        },
        "shareSettings": {"shareType": "LOCAL"},
    }


def aggregate_reservation(
    name: str,
    *,
    project: str,
    zone: str,
    chips: int,
    in_use: int = 0,
    family: str = "VM_FAMILY_CLOUD_TPU_LITE_POD_SLICE_CT6E",
) -> dict[str, Any]:
    """An aggregate TPU reservation (``aggregateReservation``: chips of a VM family, no machine type), as
    ``reservations.get`` answers it."""
    zone_url = ZONE_URL.format(project=project, zone=zone)

    def resources(count: int) -> list[dict[str, Any]]:
        return [{"accelerator": {"acceleratorCount": count, "acceleratorType": f"{zone_url}/acceleratorTypes/ct6e"}}]

    return {
        "kind": "compute#reservation",
        "id": "4213987462319",
        "name": name,
        "status": "READY",
        "zone": zone_url,
        "selfLink": f"{zone_url}/reservations/{name}",
        "specificReservationRequired": True,
        "aggregateReservation": {
            "vmFamily": family,
            "workloadType": "BATCH",
            "reservedResources": resources(chips),
            "inUseResources": resources(in_use) if in_use else [],
        },
    }


def quota_info(project: str, quota: str, entries: list[tuple[dict[str, str], int, list[str]]]) -> dict[str, Any]:
    """A Cloud Quotas ``QuotaInfo`` of compute.googleapis.com: one ``dimensionsInfos`` entry per
    (dimensions, limit, applicable locations); int64 as strings, as the REST API writes them."""
    return {
        "name": f"projects/{project}/locations/global/services/compute.googleapis.com/quotaInfos/{quota}",
        "quotaId": quota,
        "metric": "compute.googleapis.com/tpus",
        "service": "compute.googleapis.com",
        "containerType": "PROJECT",
        "dimensions": ["region", "tpu_family"] if "FAMILY" in quota else ["region"],
        "dimensionsInfos": [
            {"dimensions": dims, "details": {"value": str(limit)}, "applicableLocations": locations}
            for dims, limit, locations in entries
        ],
    }


def quota_path(project: str, quota: str) -> str:
    return f"/v1/projects/{project}/locations/global/services/compute.googleapis.com/quotaInfos/{quota}"


def region(name: str, quotas: Mapping[str, tuple[float, float]]) -> dict[str, Any]:
    """A ``compute#region`` with its quotas (metric -> (limit, usage))."""
    return {
        "kind": "compute#region",
        "name": name,
        "status": "UP",
        "quotas": [{"metric": m, "limit": limit, "usage": usage} for m, (limit, usage) in sorted(quotas.items())],
    }


GLOBAL_ENOUGH: dict[str, tuple[float, float]] = {
    "CPUS_ALL_REGIONS": (2048, 0),
    "GPUS_ALL_REGIONS": (0, 0),
    "NETWORKS": (15, 1),
    "SUBNETWORKS": (175, 0),
    "FIREWALLS": (200, 4),
    "ROUTERS": (20, 0),
    "ROUTES": (250, 0),
    "IN_USE_ADDRESSES": (4, 0),
    "STATIC_ADDRESSES": (8, 0),
    "IMAGES": (100, 0),
    "SNAPSHOTS": (1000, 0),
    "INSTANCE_TEMPLATES": (100, 0),
}
"""The project's quotas across all regions (limit, usage) that hold any example stack, the slices' vCPUs on
``CPUS_ALL_REGIONS`` included (prod: 16 + 64 + 8 x 180): a project with its default network (one network, its four
firewall rules) and quotas raised for TPU work."""


def project_info(name: str, quotas: Mapping[str, tuple[float, float]]) -> dict[str, Any]:
    """A ``compute#project`` as ``projects.get`` answers it (https://cloud.google.com/compute/docs/reference/rest/v1/
    projects/get; ``gcloud compute project-info describe`` prints the same): its quotas across all regions (metric ->
    (limit, usage), JSON numbers as a region's are) beside its metadata, default service account and XPN status."""
    return {
        "kind": "compute#project",
        "id": "7939884504553816957",
        "creationTimestamp": "2026-10-08T07:32:50.892-07:00",
        "name": name,
        "commonInstanceMetadata": {"kind": "compute#metadata", "fingerprint": "duDIfUPUEew="},
        "quotas": [{"metric": m, "limit": limit, "usage": usage} for m, (limit, usage) in sorted(quotas.items())],
        "selfLink": f"https://www.googleapis.com/compute/v1/projects/{name}",
        "defaultServiceAccount": "394500313768-compute@developer.gserviceaccount.com",
        "xpnProjectStatus": "UNSPECIFIED_XPN_PROJECT_STATUS",
        "defaultNetworkTier": "PREMIUM",
        "vmDnsSetting": "ZONAL_ONLY",
    }


def network(name: str, *, project: str, region: str = "us-east5") -> dict[str, Any]:
    """A custom-mode ``compute#network`` as ``networks.get`` answers it: the stack's VPC (``infra.gcp.network``: no
    auto subnets, regional routing, MTU 8896) with its one subnet."""
    url = f"https://www.googleapis.com/compute/v1/projects/{project}"
    return {
        "kind": "compute#network",
        "id": "6154318276438219921",
        "creationTimestamp": "2026-11-30T09:00:00.000-08:00",
        "name": name,
        "selfLink": f"{url}/global/networks/{name}",
        "selfLinkWithId": f"{url}/global/networks/6154318276438219921",
        "autoCreateSubnetworks": False,
        "subnetworks": [f"{url}/regions/{region}/subnetworks/{name.removesuffix('-net')}-subnet"],
        "routingConfig": {"routingMode": "REGIONAL", "bgpBestPathSelectionMode": "LEGACY"},
        "mtu": 8896,
        "networkFirewallPolicyEnforcementOrder": "AFTER_CLASSIC_FIREWALL",
    }


def instance(name: str, machine_type: str, *, project: str, zone: str, boot_gb: int = 100) -> dict[str, Any]:
    """A ``compute#instance`` as ``instances.list`` lists it: its machine type URL and its boot disk (int64 as a
    string, ``boot: true``)."""
    zone_url = ZONE_URL.format(project=project, zone=zone)
    return {
        "kind": "compute#instance",
        "name": name,
        "machineType": f"{zone_url}/machineTypes/{machine_type}",
        "disks": [
            {
                "kind": "compute#attachedDisk",
                "type": "PERSISTENT",
                "mode": "READ_WRITE",
                "boot": True,
                "autoDelete": True,
                "index": 0,
                "diskSizeGb": str(boot_gb),
                "source": f"{zone_url}/disks/{name}",
            }
        ],
    }


ZONE_OFFERS: dict[str, dict[str, int]] = {
    "machineTypes": {
        "e2-standard-4": 4,
        "e2-standard-8": 8,
        "e2-medium": 2,
        "n2-standard-64": 64,
        "n4-standard-32": 32,
        "n4-standard-64": 64,
        "ct6e-standard-1t": 44,
        "ct6e-standard-4t": 180,
        "ct6e-standard-8t": 180,
        "tpu7x-standard-4t": 224,  # tests/test_catalogue_entries.py's fictitious new TPU
    },
    "acceleratorTypes": {"ct6e": 0},
    "diskTypes": {"pd-standard": 0, "pd-balanced": 0, "pd-ssd": 0, "hyperdisk-balanced": 0},
}
"""What the loopback zone offers (name -> guest CPUs of a machine type), the example stacks' types among them."""


def offer(kind: str, name: str, *, project: str, zone: str, guest_cpus: int = 0) -> dict[str, Any]:
    """A zone's ``machineTypes.get`` / ``acceleratorTypes.get`` / ``diskTypes.get`` reply, the fields Compute
    writes (int64 as strings; a machine type's ``zone`` is the zone's name, the others' its URL)."""
    zone_url = ZONE_URL.format(project=project, zone=zone)
    base = {"id": "3013006", "name": name, "selfLink": f"{zone_url}/{kind}/{name}"}
    if kind == "machineTypes":
        return {
            **base,
            "kind": "compute#machineType",
            "description": f"{guest_cpus} vCPUs",
            "guestCpus": guest_cpus,
            "memoryMb": guest_cpus * 4096,
            "maximumPersistentDisks": 128,
            "maximumPersistentDisksSizeGb": "263168",
            "zone": zone,
            "isSharedCpu": False,
        }
    if kind == "acceleratorTypes":
        return {
            **base,
            "kind": "compute#acceleratorType",
            "description": name,
            "zone": zone_url,
            "maximumCardsPerInstance": 8,
        }
    return {
        **base,
        "kind": "compute#diskType",
        "description": name,
        "validDiskSize": "10GB-65536GB",
        "zone": zone_url,
        "defaultDiskSizeGb": "100",
    }


DISKS_ENOUGH: dict[str, tuple[float, float]] = {"SSD_TOTAL_GB": (4096, 0), "HDB_TOTAL_GB": (8192, 0)}
"""Disk quotas (limit, usage) that hold the example stacks' pools at their maximum."""

_OFFER_PATH = re.compile(
    r"/compute/v1/projects/([^/]+)/zones/([^/]+)/(machineTypes|acceleratorTypes|diskTypes)/([^/]+)"
)
PERMISSIONS_PATH = re.compile(r"/v3/projects/([^/:]+):testIamPermissions")


def key_ring(name: str) -> dict[str, Any]:
    """A KeyRing as Cloud KMS's REST API returns it (``projects.locations.keyRings.get``)."""
    return {"name": name, "createTime": "2026-10-01T09:00:00.000000Z"}


def crypto_key(
    name: str,
    purpose: str = "ENCRYPT_DECRYPT",
    primary: str | None = "ENABLED",
    *,
    version: int = 1,
    rotation: bool = True,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A CryptoKey as Cloud KMS's REST API returns it (``projects.locations.keyRings.cryptoKeys.get``): its primary
    version ``version`` in state ``primary`` (None: no primary); ``rotation`` False: no rotation period nor next
    rotation time, as terraform-provider-google's ``disableCryptoKeyRotation`` leaves it (a PATCH of both to null);
    ``labels`` as a stack writes them (``Settings.labels``).
    A version scheduled for destruction carries its ``destroyTime``; a destroyed one its ``destroyEventTime`` too
    (``projects.locations.keyRings.cryptoKeys.cryptoKeyVersions``, CryptoKeyVersion)."""
    key: dict[str, Any] = {
        "name": name,
        "purpose": purpose,
        "createTime": "2026-10-01T09:00:01.000000Z",
        "versionTemplate": {"algorithm": "GOOGLE_SYMMETRIC_ENCRYPTION", "protectionLevel": "SOFTWARE"},
        "destroyScheduledDuration": "2592000s",
    }
    if rotation:
        key |= {"rotationPeriod": "7776000s", "nextRotationTime": "2026-12-30T09:00:01Z"}
    if labels:
        key["labels"] = dict(labels)
    if primary:
        key["primary"] = {
            "name": f"{name}/cryptoKeyVersions/{version}",
            "state": primary,
            "createTime": "2026-10-01T09:00:01.000000Z",
            "generateTime": "2026-10-01T09:00:01.000000Z",
            "algorithm": "GOOGLE_SYMMETRIC_ENCRYPTION",
            "protectionLevel": "SOFTWARE",
        }
        if primary in ("DESTROY_SCHEDULED", "DESTROYED"):
            key["primary"]["destroyTime"] = DESTROY_TIME
        if primary == "DESTROYED":
            key["primary"]["destroyEventTime"] = DESTROY_TIME
    return key


DESTROY_TIME = "2027-01-03T08:45:54.123456Z"
"""When a version a destroy scheduled for destruction is destroyed: the destroy's time + the key's
``destroyScheduledDuration`` (30 days)."""


def key_after_destroy(
    name: str, state: str = "DESTROY_SCHEDULED", version: int = 3, labels: dict[str, str] | None = None
) -> dict[str, Any]:
    """A CryptoKey as ``pulumi destroy`` leaves one the stack created (deletion_policy DELETE: terraform-provider-google
    ``resourceKMSCryptoKeyDelete``): every version scheduled for destruction (``clearCryptoKeyVersions``; its primary,
    here version ``version`` after two rotations, included: https://cloud.google.com/kms/docs/key-states "an enabled
    primary key version can be ... scheduled for destruction or destroyed"), rotation off
    (``disableCryptoKeyRotation``); ``state`` DESTROYED once the 30 days have passed, DISABLED once restored."""
    return crypto_key(name, primary=state, version=version, rotation=False, labels=labels)


CLUSTERS_PATH = re.compile(r"/v1/projects/([^/]+)/locations/-/clusters")
"""GKE's ``projects.locations.clusters.list`` over every location (``ListClustersResponse``)."""


def gke_cluster(name: str, location: str, key: str = "", *, decryption_keys: tuple[str, ...] = ()) -> dict[str, Any]:
    """A Cluster as GKE's REST API lists it (the fields the capacity check reads, with a few others): Secrets
    encrypted with ``key`` (``databaseEncryption``: ``ENCRYPTED`` and its ``keyName``; "" none), and
    ``decryption_keys`` still read for existing objects (``decryptionKeys``, output only)."""
    cluster: dict[str, Any] = {
        "name": name,
        "location": location,
        "status": "RUNNING",
        "selfLink": f"https://container.googleapis.com/v1/projects/p/locations/{location}/clusters/{name}",
        "resourceLabels": {"app": "tpu-rl"},
    }
    encryption: dict[str, Any] = {"state": "ENCRYPTED", "keyName": key, "currentState": "CURRENT_STATE_ENCRYPTED"}
    if not key:
        encryption = {"state": "DECRYPTED", "currentState": "CURRENT_STATE_DECRYPTED"}
    if decryption_keys:
        encryption["decryptionKeys"] = list(decryption_keys)
    cluster["databaseEncryption"] = encryption
    return cluster


def image(
    name: str,
    *,
    project: str,
    zone: str = "us-east5-b",
    disk_gb: int = 100,
    status: str = "READY",
    deprecated: str | None = None,
) -> dict[str, Any]:
    """A ``compute#image`` as ``images.get`` answers it (https://cloud.google.com/compute/docs/reference/rest/v1/images):
    one made from the disk of gke-disk-image-builder's VM (``sourceDisk``), int64 as strings, its ``status`` and, when
    ``deprecated`` names a state, its ``DeprecationStatus`` (``deprecated.state``)."""
    reply: dict[str, Any] = {
        "kind": "compute#image",
        "id": "5318008472112233",
        "creationTimestamp": "2026-12-01T01:00:00.000-08:00",
        "name": name,
        "description": "",
        "sourceType": "RAW",
        "status": status,
        "archiveSizeBytes": "4822030336",
        "diskSizeGb": str(disk_gb),
        "sourceDisk": f"{ZONE_URL.format(project=project, zone=zone)}/disks/{name}-disk",
        "sourceDiskId": "884421337001",
        "selfLink": f"https://www.googleapis.com/compute/v1/projects/{project}/global/images/{name}",
        "labelFingerprint": "42WmSpB8rSM=",
        "storageLocations": ["us"],
        "architecture": "X86_64",
    }
    if deprecated:
        reply["deprecated"] = {"state": deprecated}
    return reply


IMAGE_PATH = re.compile(r"/compute/v1/projects/([^/]+)/global/images/([^/]+)")
PROJECT_PATH = re.compile(r"/compute/v1/projects/([^/]+)")
NETWORK_PATH = re.compile(r"/compute/v1/projects/([^/]+)/global/networks/([^/]+)")


def bucket(
    name: str,
    location: str = "US-EAST5",
    *,
    uniform: bool = True,
    location_type: str = "region",
    data_locations: list[str] | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A bucket as Cloud Storage's JSON API answers ``buckets.get`` (``projection=noAcl``, what
    ``storage.Client.get_bucket`` asks for): its location upper-case, its ``iamConfiguration`` (uniform bucket-level
    access and its legacy twin ``bucketPolicyOnly``), a configurable dual-region's ``customPlacementConfig``
    (https://cloud.google.com/storage/docs/json_api/v1/buckets)."""
    access: dict[str, Any] = {"enabled": uniform}
    if uniform:
        access["lockedTime"] = "2027-02-28T09:00:00.000Z"
    reply: dict[str, Any] = {
        "kind": "storage#bucket",
        "selfLink": f"https://www.googleapis.com/storage/v1/b/{name}",
        "id": name,
        "name": name,
        "projectNumber": "123456789012",
        "generation": "1764838800000000",
        "metageneration": "1",
        "location": location,
        "storageClass": "STANDARD",
        "etag": "CAE=",
        "timeCreated": "2026-11-30T09:00:00.000Z",
        "updated": "2026-11-30T09:00:00.000Z",
        "softDeletePolicy": {"retentionDurationSeconds": "604800", "effectiveTime": "2026-11-30T09:00:00.000Z"},
        "iamConfiguration": {
            "bucketPolicyOnly": dict(access),
            "uniformBucketLevelAccess": access,
            "publicAccessPrevention": "inherited",
        },
        "locationType": location_type,
        "rpo": "DEFAULT",
    }
    if data_locations:
        reply["customPlacementConfig"] = {"dataLocations": data_locations}
    if labels:
        reply["labels"] = labels
    return reply


def policy(name: str, *bindings: dict[str, Any]) -> dict[str, Any]:
    """A bucket's IAM policy as Cloud Storage's JSON API answers ``buckets.getIamPolicy`` with
    ``optionsRequestedPolicyVersion=3`` (https://cloud.google.com/storage/docs/json_api/v1/buckets/getIamPolicy): the
    bucket's own convenience bindings (the project's owners and editors, its viewers), then ``bindings``."""
    own = [
        {"role": "roles/storage.legacyBucketOwner", "members": ["projectEditor:p", "projectOwner:p"]},
        {"role": "roles/storage.legacyBucketReader", "members": ["projectViewer:p"]},
    ]
    return {
        "kind": "storage#policy",
        "resourceId": f"projects/_/buckets/{name}",
        "version": 3,
        "etag": "CAY=",
        "bindings": [*own, *bindings],
    }


def binding(role: str, member: str, prefix: str | None, bucket: str = "shared-hub") -> dict[str, Any]:
    """One role of one member, bounded to ``prefix`` as a stack's grants are (``infra.gcp.access.BucketGrant``)."""
    found: dict[str, Any] = {"role": role, "members": [member]}
    if prefix is not None:
        found["condition"] = {
            "title": "convert objectUser prefixes",
            "description": f"tpu-rl: only under {prefix}",
            "expression": f'resource.name.startsWith("projects/_/buckets/{bucket}/objects/{prefix}")',
        }
    return found


def bucket_not_found() -> tuple[int, dict[str, Any]]:
    """Cloud Storage's 404 for a bucket that does not exist (its JSON API error body)."""
    message = "The specified bucket does not exist."
    return 404, {
        "error": {
            "code": 404,
            "message": message,
            "errors": [{"message": message, "domain": "global", "reason": "notFound"}],
        }
    }


BUCKET_PATH = re.compile(r"/storage/v1/b/([^/]+)")
BUCKET_PERMISSIONS_PATH = re.compile(r"/storage/v1/b/([^/]+)/iam/testPermissions")
BUCKET_POLICY_PATH = re.compile(r"/storage/v1/b/([^/]+)/iam")


def error(code: int, message: str, reason: str, *, service: str | None = None) -> dict[str, Any]:
    """Google's JSON error body; ``service``: a SERVICE_DISABLED ErrorInfo for that API."""
    status = {400: "INVALID_ARGUMENT", 403: "PERMISSION_DENIED", 404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED"}.get(
        code, "UNAVAILABLE"
    )
    body: dict[str, Any] = {
        "code": code,
        "status": status,
        "message": message,
        "errors": [{"message": message, "domain": "usageLimits" if service else "global", "reason": reason}],
    }
    if service:
        body["details"] = [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": "SERVICE_DISABLED",
                "domain": "googleapis.com",
                "metadata": {"service": service, "consumer": "projects/42"},
            }
        ]
    return {"error": body}


def not_found(path: str) -> tuple[int, dict[str, Any]]:
    resource = path.split("/compute/v1/", 1)[-1]
    return 404, error(404, f"The resource '{resource}' was not found", "notFound")


class FakeCompute:
    """Routes -> (status, JSON); a route may also hang (``hang``) or fail a number of times first (``flaky``)."""

    def __init__(self) -> None:
        self.routes: dict[str, tuple[int, dict[str, Any]]] = {}
        self.raw: dict[str, tuple[int, dict[str, str], bytes]] = {}
        """Routes answered with these bytes as they are (status, headers, body), not as JSON."""
        self.flaky: dict[str, list[tuple[int, dict[str, Any]]]] = {}
        self.hang: set[str] = set()
        self.requests: list[str] = []
        self.services: dict[str, str] = {}
        """Service Usage: API name -> ENABLED | DISABLED (absent: ENABLED)."""
        self.service_usage_error: tuple[int, dict[str, Any]] | None = None
        self.offers: dict[str, dict[str, int]] = copy.deepcopy(ZONE_OFFERS)
        """What every zone offers (``ZONE_OFFERS``); a test removes a type to make the zone refuse it."""
        self.permissions: set[str] | None = None
        """What the caller holds on each project (Resource Manager ``testIamPermissions``); None: everything."""
        self.bodies: list[Any] = []
        """The JSON bodies POSTed, in order."""
        self.buckets: dict[str, dict[str, Any]] = {}
        """Cloud Storage: bucket name -> its ``buckets.get`` reply (``bucket``); any other bucket does not exist."""
        self.bucket_permissions: set[str] | None = None
        """What the caller holds on every bucket of ``buckets`` (``buckets.testIamPermissions``); None: everything."""
        self.clusters: list[dict[str, Any]] = []
        """GKE: every cluster of every project (``gke_cluster``), as ``clusters.list`` answers them."""
        self.bucket_policies: dict[str, dict[str, Any]] = {}
        """Cloud Storage: bucket name -> its ``buckets.getIamPolicy`` reply (``policy``; absent: its own bindings)."""
        self.images: dict[tuple[str, str], dict[str, Any]] = {}
        """Compute Engine: (project, image name) -> its ``images.get`` reply (``image``); any other is not found."""
        self.project_quotas: dict[str, tuple[float, float]] = dict(GLOBAL_ENOUGH)
        """Compute Engine: every project's quotas across all regions (``projects.get``, ``project_info``)."""
        self.networks: set[tuple[str, str]] = set()
        """Compute Engine: (project, network name) of the networks that exist (``networks.get``); any other is not
        found."""
        self.url = ""

    def answer(
        self, path: str, query: dict[str, list[str]], body: Any = None
    ) -> tuple[int, dict[str, Any]] | tuple[int, dict[str, str], bytes] | None:
        self.requests.append(path)
        if path in self.hang:
            return None
        if path in self.raw:
            return self.raw[path]
        if self.flaky.get(path):
            return self.flaky[path].pop(0)
        if path.endswith("/services:batchGet"):
            if self.service_usage_error:
                return self.service_usage_error
            names = query.get("names", [])
            return 200, {
                "services": [
                    {
                        "name": n,
                        "parent": n.split("/services/")[0],
                        "state": self.services.get(n.rsplit("/", 1)[-1], "ENABLED"),
                        "config": {"name": n.rsplit("/", 1)[-1]},
                    }
                    for n in names
                ]
            }
        if path in self.routes:
            return self.routes[path]
        if CLUSTERS_PATH.fullmatch(path):
            return 200, ({"clusters": copy.deepcopy(self.clusters)} if self.clusters else {})
        if match := _OFFER_PATH.fullmatch(path):
            project, zone, kind, name = match.groups()
            if name in self.offers[kind]:
                return 200, offer(kind, name, project=project, zone=zone, guest_cpus=self.offers[kind][name])
        if match := PROJECT_PATH.fullmatch(path):
            return 200, project_info(match.group(1), self.project_quotas)
        if (match := NETWORK_PATH.fullmatch(path)) and match.groups() in self.networks:
            name, network_name = match.groups()
            return 200, network(network_name, project=name)
        if (match := IMAGE_PATH.fullmatch(path)) and match.groups() in self.images:
            project, name = match.groups()
            return 200, self.images[project, name]
        if (match := BUCKET_PERMISSIONS_PATH.fullmatch(path)) and match.group(1) in self.buckets:
            # Cloud Storage's reply: the subset of ``permissions`` held, the field left out when none is
            # (https://cloud.google.com/storage/docs/json_api/v1/buckets/testIamPermissions).
            asked = query.get("permissions", [])
            held = [p for p in asked if self.bucket_permissions is None or p in self.bucket_permissions]
            return 200, {"kind": "storage#testIamPermissionsResponse", **({"permissions": held} if held else {})}
        if (match := BUCKET_POLICY_PATH.fullmatch(path)) and match.group(1) in self.buckets:
            name = match.group(1)
            if query.get("optionsRequestedPolicyVersion") != ["3"]:
                # "If the optionsRequestedPolicyVersion is for an older version that doesn't support part of the
                # requested IAM policy, the request fails" (buckets/getIamPolicy): version 1 has no conditions.
                return 400, error(400, "Policy with conditions requires policy version 3", "invalid")
            return 200, self.bucket_policies.get(name, policy(name))
        if match := BUCKET_PATH.fullmatch(path):
            name = match.group(1)
            return (200, self.buckets[name]) if name in self.buckets else bucket_not_found()
        if PERMISSIONS_PATH.fullmatch(path) and isinstance(body, dict):
            asked = body.get("permissions", [])
            held = [p for p in asked if self.permissions is None or p in self.permissions]
            return 200, ({"permissions": held} if held else {})
        return not_found(path)


class _Handler(BaseHTTPRequestHandler):
    server: Any
    disable_nagle_algorithm = True  # the headers and the body are two writes: both go out at once

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"null")
        self.server.fake.bodies.append(body)
        self._reply(body)

    def do_GET(self) -> None:  # noqa: N802
        self._reply(None)

    def _reply(self, body: Any) -> None:
        parts = urlsplit(self.path)
        found = self.server.fake.answer(parts.path, parse_qs(parts.query), body)
        if found is None:
            time.sleep(60)  # never answers within any budget
            return
        if len(found) == 3:
            code, headers, data = found
        else:
            code, body = found
            headers, data = {"Content-Type": "application/json; charset=UTF-8"}, json.dumps(body).encode()
        self.send_response(code)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client stopped reading at its cap
            self.wfile.write(data)


def serve_project(
    fake: FakeCompute, project: str, quotas: Mapping[str, tuple[float, float]], zone: str = "us-east5-b"
) -> None:
    """``project``'s region (``zone``'s) answers with ``quotas`` (and disk quotas that hold any example stack, where
    ``quotas`` names none) and the zone has no VMs: what the capacity check reads of a project before its
    reservation and quota answers."""
    name = zone.rsplit("-", 1)[0]
    fake.routes[f"/compute/v1/projects/{project}/regions/{name}"] = (200, region(name, {**DISKS_ENOUGH, **quotas}))
    fake.routes[f"/compute/v1/projects/{project}/zones/{zone}/instances"] = (
        200,
        {"kind": "compute#instanceList", "items": []},
    )


@contextmanager
def fake_compute() -> Iterator[FakeCompute]:
    fake = FakeCompute()
    server = LoopbackServer(("127.0.0.1", 0), _Handler)
    server.fake = fake  # type: ignore[attr-defined]
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    server.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()


def serve_reservation(
    fake: FakeCompute, project: str, zone: str = "us-east5-b", name: str = "my-v6e-32-reservation"
) -> None:
    """The prod stack's reservation in ``project``: a v6e-32 slice's 8 VMs (``reservation``)."""
    fake.routes[f"/compute/v1/projects/{project}/zones/{zone}/reservations/{name}"] = (
        200,
        reservation(name, project=project, zone=zone, count=8),
    )


def clients(fake: FakeCompute) -> Any:
    """The capacity check's clients (``infra.gcp.capacity.Clients``), anonymous, on the loopback server ``fake``."""
    from google.auth.credentials import AnonymousCredentials

    from infra.gcp import capacity

    return capacity.Clients(credentials=AnonymousCredentials(), client_options={"api_endpoint": fake.url})
