"""The digest of an image's tag, read from a loopback registry that speaks the Docker Registry HTTP API V2 as
Artifact Registry does: the 401 with its Bearer challenge, the token endpoint, the manifest's
``Docker-Content-Digest``, the JSON errors; a Google access token only to an Artifact Registry host's own token
endpoint; every failure one line, within the budget by the wall clock. And the pure side: references, pins, outputs."""

from __future__ import annotations

import base64
import hashlib
import json
import time
from urllib.parse import parse_qs, urlsplit

import pytest

from core import deadline, images
from core.settings import ImageSettings
from infra.gcp.registry import MANIFEST_TYPES, RegistryError, resolve_digest
from tests.loopback import QuietHandler, serve

MANIFEST = json.dumps(
    {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": "sha256:" + "a" * 64,
                "size": 1234,
                "platform": {"architecture": "amd64", "os": "linux"},
            }
        ],
    }
).encode()
DIGEST = "sha256:" + hashlib.sha256(MANIFEST).hexdigest()
NAME = "cloud-tpu-images/maxtext-images/tpu_post_training"
TAG = "0.2.4"
FAST = deadline.Budget(2.0, 1.0, 1.0, "test")


class Registry(QuietHandler):
    """Artifact Registry's V2 answers for one repository with one tag. Class attributes steer it per test."""

    token = "registry-token"
    digest_header = True
    failures: list[int] = []
    seen: list[tuple[str, str, dict[str, str]]] = []
    behave = ""

    def _errors(self, status: int, code: str, message: str, **headers: str) -> None:
        self.send_body(status, json.dumps({"errors": [{"code": code, "message": message}]}).encode(), **headers)

    def _serve(self) -> None:
        type(self).seen.append((self.command, self.path, dict(self.headers)))
        if self.misbehave(type(self).behave):
            return
        path = urlsplit(self.path).path
        host = self.headers["Host"]
        if path == "/v2/token":
            query = parse_qs(urlsplit(self.path).query)
            if query.get("scope") != [f"repository:{NAME}:pull"] or query.get("service") != [host]:
                self._errors(400, "DENIED", "bad scope")
                return
            self.send_json(200, {"token": type(self).token, "expires_in": 3600})
            return
        if type(self).failures:
            self._errors(type(self).failures.pop(0), "UNAVAILABLE", "try later")
            return
        if self.headers.get("Authorization") != f"Bearer {type(self).token}":
            challenge = f'Bearer realm="http://{host}/v2/token",service="{host}",scope="repository:{NAME}:pull"'
            self._errors(401, "UNAUTHORIZED", "authentication required", **{"WWW-Authenticate": challenge})
            return
        if path != f"/v2/{NAME}/manifests/{TAG}":
            self._errors(404, "MANIFEST_UNKNOWN", "manifest unknown")
            return
        assert self.headers["Accept"].split(", ")[0] == MANIFEST_TYPES[0]
        extra = {"Docker-Content-Digest": DIGEST} if type(self).digest_header else {}
        self.send_body(200, MANIFEST, MANIFEST_TYPES[0], **extra)

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self._serve()

    def do_HEAD(self) -> None:  # noqa: N802
        self._serve()


@pytest.fixture
def registry():
    Registry.token, Registry.digest_header, Registry.failures, Registry.seen, Registry.behave = (
        "registry-token",
        True,
        [],
        [],
        "",
    )
    with serve(Registry) as url:
        yield url


def image(host: str = "us-docker.pkg.dev", tag: str = TAG) -> str:
    return f"{host}/{NAME}:{tag}"


def test_the_tag_resolves_to_the_registrys_digest_through_its_token(registry):
    assert resolve_digest(image("registry.example.com"), endpoint=registry, token=lambda: None) == DIGEST
    methods = [(m, urlsplit(p).path) for m, p, _ in Registry.seen]
    assert methods == [
        ("HEAD", f"/v2/{NAME}/manifests/{TAG}"),
        ("GET", "/v2/token"),
        ("HEAD", f"/v2/{NAME}/manifests/{TAG}"),
    ]


def test_without_a_digest_header_the_digest_is_the_manifests_sha256(registry):
    Registry.digest_header = False
    assert resolve_digest(image(), endpoint=registry, token=lambda: None) == DIGEST
    assert Registry.seen[-1][0] == "GET"


def test_a_pinned_image_is_its_own_digest_without_a_call():
    pinned = f"us-docker.pkg.dev/{NAME}@{DIGEST}"
    assert resolve_digest(pinned, endpoint="http://127.0.0.1:9", token=lambda: pytest.fail("no call")) == DIGEST


def test_a_google_token_goes_only_to_an_artifact_registry_hosts_own_token_endpoint(registry):
    asked = []

    def token():
        asked.append(True)
        return "ya29.secret"

    resolve_digest(image("us-docker.pkg.dev"), endpoint=registry, token=token)
    (auth,) = [h.get("Authorization") for m, p, h in Registry.seen if p.startswith("/v2/token")]
    assert auth == "Basic " + base64.b64encode(b"oauth2accesstoken:ya29.secret").decode()
    Registry.seen.clear()
    resolve_digest(image("registry.example.com"), endpoint=registry, token=token)
    assert len(asked) == 1, "no Google token for another registry"
    assert all("ya29" not in str(h) for _, _, h in Registry.seen)


def test_an_unknown_tag_is_one_line_naming_the_setting(registry):
    with pytest.raises(RegistryError) as err:
        resolve_digest(image(tag="9.9.9"), key="images.maxtext", endpoint=registry, token=lambda: None)
    text = str(err.value)
    assert "\n" not in text and text.startswith("tpu-rl:images.maxtext (")
    assert "has no tag '9.9.9'" in text and "HTTP 404" in text


def test_a_token_endpoint_without_a_token_is_one_line(registry):
    Registry.token = ""  # the token endpoint answers no token
    with pytest.raises(RegistryError, match="without a token"):
        resolve_digest(image(), endpoint=registry, token=lambda: None)


def test_a_refused_read_says_which_role_reads_it(registry):
    Registry.failures = [403]
    with pytest.raises(RegistryError, match=r"HTTP 403.*roles/artifactregistry\.reader"):
        resolve_digest(image(), endpoint=registry, token=lambda: None)


def test_a_busy_registry_is_asked_again_within_the_budget(registry):
    Registry.failures = [503, 429]
    waits: list[float] = []
    assert resolve_digest(image(), endpoint=registry, token=lambda: None, sleep=waits.append) == DIGEST
    assert waits == [0.5, 1.0]


def test_a_registry_that_stays_down_fails_in_one_line(registry):
    Registry.failures = [503] * 10
    with pytest.raises(RegistryError) as err:
        resolve_digest(image(), endpoint=registry, token=lambda: None, sleep=lambda s: None)
    assert "HTTP 503" in str(err.value) and "pin the image by digest" in str(err.value)


@pytest.mark.slow
def test_a_hanging_registry_ends_within_the_budget(registry):
    Registry.behave = "hang"
    started = time.monotonic()
    with pytest.raises(RegistryError, match="within 2 s"):
        resolve_digest(image(), endpoint=registry, token=lambda: None, budget=FAST, sleep=lambda s: None)
    assert time.monotonic() - started < 4


@pytest.mark.slow
def test_a_hanging_registry_whose_last_try_times_out_first_is_still_the_budgets_line(registry):
    """Four tries, each ended by its own read timeout (0.3 s) well inside the budget: the hang is told as the
    budget's line, never as a dropped connection (the race the previous test can lose either way)."""
    Registry.behave = "hang"
    with pytest.raises(RegistryError) as err:
        resolve_digest(
            image(),
            endpoint=registry,
            token=lambda: None,
            budget=deadline.Budget(5.0, 1.0, 0.3, "test"),
            sleep=lambda s: None,
        )
    assert "did not give the tag's digest within 5 s" in str(err.value) and "dropped" not in str(err.value)


def test_nothing_listening_is_one_line():
    with pytest.raises(RegistryError, match="cannot reach|dropped the connection"):
        resolve_digest(image(), endpoint="http://127.0.0.1:9", token=lambda: None, budget=FAST, sleep=lambda s: None)


# The pure side: references, pins and the stack output.

CONFIGURED = ImageSettings(
    f"us-docker.pkg.dev/{NAME}:{TAG}",
    "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/server@" + "sha256:" + "1" * 64,
    "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/proxy_server:v1",
    ("us-docker.pkg.dev/cloud-tpu-images",),
)


@pytest.mark.pure
@pytest.mark.parametrize(
    ("text", "parts"),
    [
        (f"us-docker.pkg.dev/{NAME}:{TAG}", ("us-docker.pkg.dev", NAME, TAG, None)),
        (f"us-docker.pkg.dev/{NAME}@{DIGEST}", ("us-docker.pkg.dev", NAME, None, DIGEST)),
        (f"us-docker.pkg.dev/{NAME}:{TAG}@{DIGEST}", ("us-docker.pkg.dev", NAME, TAG, DIGEST)),
        ("localhost:5000/a/b:1", ("localhost:5000", "a/b", "1", None)),
        ("registry.example.com:5000/a", ("registry.example.com:5000", "a", None, None)),
    ],
)
def test_a_reference_splits_into_host_name_tag_and_digest(text, parts):
    ref = images.parse(text)
    assert (ref.host, ref.name, ref.tag, ref.digest) == parts


@pytest.mark.pure
@pytest.mark.parametrize("text", ["ubuntu:22.04", f"us-docker.pkg.dev/{NAME}@sha256:abc", "us-docker.pkg.dev"])
def test_a_reference_without_a_host_or_with_a_bad_digest_is_refused(text):
    with pytest.raises(ValueError):
        images.parse(text)


@pytest.mark.pure
def test_the_tagged_images_are_pinned_and_the_pinned_one_kept():
    assert images.to_resolve(CONFIGURED) == {"maxtext": CONFIGURED.maxtext, "pathwaysProxy": CONFIGURED.pathways_proxy}
    proxy = "sha256:" + "2" * 64
    running = images.pin_images(CONFIGURED, {"maxtext": DIGEST, "pathwaysProxy": proxy})
    assert running.maxtext == f"us-docker.pkg.dev/{NAME}@{DIGEST}"
    assert running.pathways_proxy == f"us-docker.pkg.dev/cloud-tpu-v2-images/pathways/proxy_server@{proxy}"
    assert running.pathways_server == CONFIGURED.pathways_server
    assert running.registries == CONFIGURED.registries
    assert images.pin_images(running, {}) == running, "pinned again: the same images, so the same step names"
    with pytest.raises(ValueError):
        images.pin_images(CONFIGURED, {"maxtext": "sha256:short"})


@pytest.mark.pure
def test_the_images_output_records_each_digest_or_none():
    running = images.pin_images(CONFIGURED, {"maxtext": DIGEST})
    out = images.image_outputs(CONFIGURED, running)
    assert out["maxtext"] == {"configured": CONFIGURED.maxtext, "image": running.maxtext, "digest": DIGEST}
    assert out["pathwaysServer"]["digest"] == "sha256:" + "1" * 64
    assert out["pathwaysProxy"] == {
        "configured": CONFIGURED.pathways_proxy,
        "image": CONFIGURED.pathways_proxy,
        "digest": None,
    }


# The wiring: `up` pins before anything is registered, and the step names hash the digest.


def _names(plan):
    return {step.step: step.name for step in plan}


def _jobset_images(plan):
    found = set()
    for step in plan:
        for job in step.manifest["spec"]["replicatedJobs"]:
            found |= {c["image"] for c in job["template"]["spec"]["template"]["spec"]["containers"]}
    return found


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_up_pins_the_tagged_images_and_the_step_names_hash_the_digest(stack):
    from program.stack import _pinned_images
    from tests.lifecycle_walk import settings, workflow

    s = settings(stack, [])
    plan = workflow(s)
    read = []

    def answer(digest):
        def resolve(image, *, key):
            read.append((key, image))
            return digest

        return resolve

    pinned, pinned_plan = _pinned_images(s, plan, answer(DIGEST), None)
    assert read == [("images.maxtext", s.images.maxtext)], "only the image named by tag is read"
    maxtext = images.parse(s.images.maxtext).pinned(DIGEST)
    assert pinned.images.maxtext == maxtext and maxtext in _jobset_images(pinned_plan)
    assert all("@sha256:" in image for image in _jobset_images(pinned_plan)), "every image runs by digest"
    before, after = _names(plan), _names(pinned_plan)
    assert all(before[step] != after[step] for step in before), "each step runs MaxText: a new image, a new name"
    # Another up reading the same digest plans the same steps; a digest the tag moved to is a new step.
    assert _names(_pinned_images(s, plan, answer(DIGEST), None)[1]) == after
    unread = _pinned_images(pinned, pinned_plan, answer("sha256:" + "c" * 64), None)
    assert unread == (pinned, pinned_plan), "a pinned image is not read again"
    moved = _names(_pinned_images(s, plan, answer("sha256:" + "b" * 64), None)[1])
    assert all(moved[step] != after[step] for step in after)


def test_up_stops_with_one_line_per_image_it_cannot_read():
    import pulumi

    from program.stack import _pinned_images
    from tests.lifecycle_walk import settings, workflow

    def refuse(image, *, key):
        raise RegistryError(f"tpu-rl:{key} ({image}): us-docker.pkg.dev has no tag (HTTP 404)")

    tagged = f"us-docker.pkg.dev/cloud-tpu-v2-images/pathways/proxy_server:{TAG}"
    s = settings("dev", [f"tpu-rl:images.pathwaysProxy={tagged}"])
    with pytest.raises(pulumi.RunError) as err:
        _pinned_images(s, workflow(s), refuse, None)
    lines = str(err.value).splitlines()
    assert [line.split(" (")[0] for line in lines] == [
        "images: tpu-rl:images.maxtext",
        "images: tpu-rl:images.pathwaysProxy",
    ]


@pytest.mark.slow
def test_the_offline_plan_reads_no_registry_and_records_the_images_as_configured(prod_plan):
    from core.config.workflow_keys import DEFAULT_IMAGES

    out = prod_plan.outputs["images"]
    assert {key: value["configured"] for key, value in out.items()} == DEFAULT_IMAGES
    assert out["maxtext"]["image"] == DEFAULT_IMAGES["maxtext"] and out["maxtext"]["digest"] is None
    assert out["pathwaysServer"]["digest"] == DEFAULT_IMAGES["pathwaysServer"].split("@")[1]
