"""The names of a stack's state home and the shapes that tell any stack's state bucket or key (``core.state_names``),
called directly: what ``tools/state_home.py`` gives a stack that records no home, and what the policy pack refuses a
grant on (``policy/tpu_rl_policies/targets.py``). Each name is the exact text a stack of another name or an earlier
version's layout would not have."""

from __future__ import annotations

import pytest

from core import state_names as names

pytestmark = pytest.mark.pure

P = "my-project"
RINGS = f"projects/{P}/locations/global/keyRings"


def test_a_stack_gets_a_bucket_ring_and_key_named_after_it() -> None:
    assert names.state_bucket(P, "dev") == "my-project-pulumi-state-dev"
    assert names.state_bucket("example.com:my-project", "dev") == "my-project-pulumi-state-dev"
    assert names.ring_id("prod") == "pulumi-state-prod"
    assert names.state_ring(P, "prod") == f"{RINGS}/pulumi-state-prod"
    assert names.state_key(P, "prod") == f"{RINGS}/pulumi-state-prod/cryptoKeys/state"


def test_the_earlier_layouts_names() -> None:
    assert names.legacy_bucket("example.com:my-project") == "my-project-pulumi-state"
    assert names.shared_ring_key(P, "dev") == f"{RINGS}/pulumi-state/cryptoKeys/tpu-rl-dev"


def test_a_domain_scoped_project_names_its_buckets_with_its_last_part() -> None:
    assert names.project_part("example.com:my-project") == "my-project"
    assert names.project_part("my-project") == "my-project"


def test_a_keys_ring_is_its_first_six_parts() -> None:
    assert names.ring_of(f"{RINGS}/pulumi-state-dev/cryptoKeys/state") == f"{RINGS}/pulumi-state-dev"
    assert names.ring_of(f"{RINGS}/cryptoKeys/cryptoKeys/k") == f"{RINGS}/cryptoKeys"  # a ring may be named so
    assert names.ring_of(f"{RINGS}/r/cryptoKeys/k/cryptoKeyVersions/1") == f"{RINGS}/r"
    assert names.ring_of(f"{RINGS}/r") == f"{RINGS}/r"


@pytest.mark.parametrize(
    ("key", "shared", "legacy"),
    [
        (f"{RINGS}/pulumi-state/cryptoKeys/tpu-rl-dev", True, False),
        (f"{RINGS}/pulumi-state/cryptoKeys/pulumi-secrets", True, True),
        (f"{RINGS}/pulumi-state", False, False),
        (f"{RINGS}/pulumi-state-dev/cryptoKeys/state", False, False),
        (f"{RINGS}/pulumi-state-dev/cryptoKeys/pulumi-secrets", False, False),
        (f"{RINGS}/xpulumi-state/cryptoKeys/k", False, False),
    ],
    ids=[
        "a-stacks-key",
        "the-projects-key",
        "the-ring-itself",
        "an-own-ring",
        "an-own-rings-legacy-name",
        "a-lookalike",
    ],
)
def test_a_key_of_the_shared_ring_and_the_projects_shared_key(key: str, shared: bool, legacy: bool) -> None:
    assert (names.in_shared_ring(key), names.is_legacy_key(key)) == (shared, legacy)


@pytest.mark.parametrize(
    ("url", "bucket"),
    [
        ("gs://my-project-pulumi-state-dev", "my-project-pulumi-state-dev"),
        ("gs://my-bucket/some/prefix", "my-bucket"),
        ("https://api.pulumi.com", ""),
        ("file:///home/me/state", ""),
        ("s3://my-bucket", ""),
    ],
    ids=["a-bucket", "a-folder-of-one", "pulumi-cloud", "a-file", "another-cloud"],
)
def test_a_homes_bucket_is_a_gs_urls_host_alone(url: str, bucket: str) -> None:
    assert names.backend_bucket(url) == bucket


@pytest.mark.parametrize(
    ("bucket", "recorded", "state"),
    [
        ("my-project-pulumi-state", "", True),
        ("my-project-pulumi-state-dev", "", True),
        ("gs://my-project-pulumi-state-dev/.pulumi", "", True),
        ("projects/_/buckets/my-project-pulumi-state-prod", "", True),
        ("my-project-pulumi-state-a.b_c-d", "", True),
        ("pulumi-state", "", False),
        ("my-project-pulumi-state-", "", False),
        ("my-project-pulumi-statex", "", False),
        ("my-project-pulumi-state-a/b", "", True),
        ("my-bucket", "gs://my-bucket", True),
        ("gs://my-bucket", "gs://my-bucket/prefix", True),
        ("my-bucket", "gs://other-bucket", False),
        ("my-bucket", "", False),
        ("", "https://api.pulumi.com", False),
        ("", "file:///home/me/state", False),
    ],
    ids=[
        "the-shared-one",
        "a-stacks",
        "a-url",
        "a-resource-name",
        "a-stack-of-any-name",
        "no-project",
        "no-stack-after-the-dash",
        "a-lookalike",
        "a-path-in-one",
        "the-recorded-home",
        "the-recorded-home-with-a-prefix",
        "another-recorded-home",
        "nothing-recorded",
        "a-name-not-known-with-a-cloud-home",
        "a-name-not-known-with-a-file-home",
    ],
)
def test_a_state_bucket_by_its_shape_or_as_the_recorded_home(bucket: str, recorded: str, state: bool) -> None:
    assert names.is_state_bucket(bucket, recorded) is state


def test_a_keys_name_of_a_secrets_provider_or_as_it_is() -> None:
    name = f"{RINGS}/pulumi-state-dev/cryptoKeys/state"
    assert names.key_name(f"gcpkms://{name}?version=1") == name
    assert names.key_name(f"gcpkms:///{name}/") == name
    assert names.key_name(name) == name


@pytest.mark.parametrize(
    ("key", "state"),
    [
        (f"{RINGS}/pulumi-state-dev/cryptoKeys/state", True),
        (f"gcpkms://{RINGS}/pulumi-state-dev/cryptoKeys/state", True),
        (f"gcpkms://{RINGS}/pulumi-state-dev/cryptoKeys/state?version=1", True),
        (f"{RINGS}/pulumi-state-dev/cryptoKeys/state/", True),
        (f"{RINGS}/pulumi-state-dev/cryptoKeys/state/cryptoKeyVersions/1", True),
        (f"{RINGS}/pulumi-state-dev", True),
        (f"{RINGS}/pulumi-state/cryptoKeys/pulumi-secrets", True),
        (f"projects/{P}/locations/us-east5/keyRings/pulumi-state-dev/cryptoKeys/k", True),
        (f"{RINGS}/pulumi-statex/cryptoKeys/state", False),
        (f"{RINGS}/other/cryptoKeys/state", False),
        (f"{RINGS}/pulumi-state-dev/cryptoKeys", True),
        (f"projects/{P}/keyRings/pulumi-state-dev/cryptoKeys/state", False),
        ("pulumi-state-dev", False),
        (f"gcpkms://{RINGS}/pulumi-state-dev?x=1", True),
        (f"/{RINGS}/pulumi-state-dev/cryptoKeys/state", True),
        (f"{RINGS}/pulumi-stateX", False),
    ],
    ids=[
        "a-stacks-key",
        "as-a-secrets-provider",
        "with-a-query",
        "with-a-trailing-slash",
        "a-version",
        "a-ring",
        "the-shared-rings",
        "in-another-location",
        "a-lookalike-ring",
        "another-ring",
        "anything-under-the-ring",
        "no-location",
        "a-bare-id",
        "a-ring-with-a-query",
        "a-leading-slash",
        "a-lookalike-ring-alone",
    ],
)
def test_a_state_key_or_ring_in_any_location(key: str, state: bool) -> None:
    assert names.is_state_key(key) is state
