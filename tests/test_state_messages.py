"""Every line the state tools refuse or stop with, reviewed word for word in tests/data/state-messages.tsv
(`TPU_RL_UPDATE_MESSAGES=1` rewrites it; check the diff): each is one line naming what is wrong and what to run."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fake_state_apis import admin_clients, clients, fake_state_apis
from tests.stack_homes import KEY, RING_KEY, SHARED, cli_file, repo
from tools import shared_names, state, state_access, state_bucket, state_lookup, state_move
from tools.stack_access import with_access
from tools.stack_files import ROOT
from tools.state_export import StateError
from tools.state_home import Home, decide, ring_warning, with_record
from tools.state_lookup import Known

pytestmark = pytest.mark.usefixtures("google_clients")

MESSAGES = ROOT / "tests" / "data" / "state-messages.tsv"
BUCKET_EXISTS = state._bucket_exists
"""``tools.state new``'s look at the bucket, kept before ``tool_lines`` replaces it for its cases."""
PROD = Home(
    "prod",
    "gs://acme-tpu-pulumi-state-prod",
    "default",
    f"gcpkms://{KEY.format('prod')}",
    False,
    "acme-tpu",
    "us-east5",
)


def home_refusals(tmp: Path) -> dict[str, Callable[[], object]]:
    outside = f"file://{tmp / 'state'}"
    root = repo(
        tmp,
        dev=cli_file(provider=SHARED),
        prod=cli_file(provider=SHARED, protect=True, config={"tpu-rl:stateBackend": "gs://acme-prod-state"}),
        qa=cli_file(config={"tpu-rl:stateBackend": "gs://acme-prod-state/qa"}),
        staging=cli_file(
            provider=f"gcpkms://{KEY.format('staging')}", config={"tpu-rl:stateBackend": "s3://acme-state"}
        ),
        local=cli_file(protect=True),
        ringmate=cli_file(provider=f"gcpkms://{KEY.format('staging')}"),
        legacy=cli_file(config={"tpu-rl:stateBackend": "gs://acme-tpu-pulumi-state"}),
        ringed=cli_file(provider=f"gcpkms://{RING_KEY.format('ringed')}", protect=True),
        cloud=cli_file(config={"tpu-rl:stateBackend": "https://api.pulumi.com"}),
        orged=cli_file(config={"tpu-rl:stateOrganization": "acme"}),
        cloudorg=cli_file(config={"tpu-rl:stateBackend": "https://api.pulumi.com", "tpu-rl:stateOrganization": "acme"}),
        salted=cli_file(provider=None, protect=True, config={"tpu-rl:stateBackend": "gs://acme-salted-state"}),
        blank=(ROOT / "Pulumi.dev.yaml").read_text(),
        **{
            "prod.eu": cli_file(config={"tpu-rl:stateBackend": "gs://acme-prod-eu-state"}),
            "europe-west4-production": cli_file(project="acme-tpu-project-named-at-length"),
        },
    )
    return {
        "stack-name": lambda: decide("prod/../dev", root),
        "no-stack-file": lambda: decide("ci", root),
        "no-project": lambda: decide("blank", root),
        "recorded-not-a-home": lambda: decide("staging", root),
        "state-backend-disagrees": lambda: decide("prod", root, explicit="gs://acme-dev-state", shared_key_ok=True),
        "backend-url-disagrees": lambda: decide("dev", root, env_url="https://api.pulumi.com", shared_key_ok=True),
        "inside-checkout": lambda: decide("local", root, explicit=f"file://{root / '.pulumi-state'}"),
        "shared-bucket": lambda: decide("qa", root),
        "shared-key": lambda: decide("ringmate", root),
        "legacy-key": lambda: decide("dev", root),
        "legacy-bucket": lambda: decide("legacy", root),
        "shared-ring-protected": lambda: decide("ringed", root),
        "shared-ring-warning": lambda: raise_line(ring_warning(decide("ringed", root, shared_key_ok=True))),
        "cloud-no-organization": lambda: decide("cloud", root),
        "organization-self-managed": lambda: decide("orged", root),
        "organization-disagrees": lambda: decide("cloudorg", root, organization="other"),
        "organization-name": lambda: decide("cloud", root, organization="acme/prod"),
        "secrets-provider-loses": lambda: decide("dev", root, secrets_provider="passphrase", shared_key_ok=True),
        "passphrase-protected": lambda: decide("local", root, explicit=outside),
        "passphrase-protected-stack": lambda: decide("salted", root),
        "bucket-name": lambda: decide("europe-west4-production", root),
        "key-name": lambda: decide("prod.eu", root),
        "record-flow-mapping": lambda: with_record("config: {gcp:project: acme-tpu}\n", "gs://b-1", "Pulumi.dev.yaml"),
        "record-access-flow-list": lambda: with_access(
            "config:\n  tpu-rl:access:\n    members: [user:ops@acme.example]\n",
            "Pulumi.dev.yaml",
            "members",
            ("user:dev@acme.example",),
        ),
    }


def tool_lines(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Callable[[], object]]:
    from dataclasses import replace

    from tools import state_lookup

    shared = Known(
        "gs://acme-tpu-pulumi-state",
        "the project's shared state bucket of earlier versions",
        "move it to a bucket and key of its own (make state-bucket STACK=prod, then make state-move STACK=prod)",
    )
    login = Known("file:///srv/old-state", "where the Pulumi CLI is logged in (~/.pulumi/credentials.json)")
    cloud = (
        "https://api.pulumi.com (where the Pulumi CLI is logged in (~/.pulumi/credentials.json)): `pulumi stack ls` at "
    )
    cloud += "https://api.pulumi.com failed: error: 401 Unauthorized"

    def new(found: Known | None, failures: list[str], exists: bool = True, home: Home = PROD) -> object:
        monkeypatch.setattr(state_lookup, "known", lambda *a, **k: state_lookup.Lookup([]))
        monkeypatch.setattr(state_lookup, "found_elsewhere", lambda *a, **k: (found, failures))
        monkeypatch.setattr(state, "_storage", object)
        monkeypatch.setattr(state, "_bucket_exists", lambda storage, bucket, stack: exists)
        return state._new(home, tmp)

    return {
        "new-found-elsewhere": lambda: new(login, []),
        "new-found-elsewhere-recorded": lambda: new(login, [], home=replace(PROD, origin="recorded")),
        "new-found-in-shared-bucket": lambda: new(shared, []),
        "new-cannot-tell": lambda: new(None, [cloud]),
        "new-no-bucket": lambda: new(None, [], exists=False),
        "members": lambda: state_bucket.parse_members("user:ops@acme.example,projectViewer:acme-tpu", "MEMBERS"),
        "setup-missing": lambda: raise_line(state_bucket.setup_missing("acme-tpu", ["storage.buckets.get"])),
        "move-not-a-source": lambda: state_move.move(PROD, tmp, "https://api.pulumi.com"),
        "move-not-written": lambda: rekey(tmp),
        "move-old-key-unreadable": lambda: state_move._release(PROD, Unreadable(), KEY.format("prod"), "", None),
        "lookup-no-client": lambda: state_lookup.listed("s3://acme-state?region=us-east-1", None),
        "lookup-whoami": lambda: raise_line(whoami_lines(tmp)),
        "new-other-organization": lambda: new(
            Known(
                "https://api.pulumi.com",
                "Pulumi Cloud, in the organization ops-team and not acme",
                "if that is the stack, record its organization instead (tpu-rl:stateOrganization: ops-team in "
                "Pulumi.prod.yaml); else rename one of the two (pulumi stack rename)",
            ),
            [],
            home=replace(PROD, backend="https://api.pulumi.com", origin="recorded", organization="acme"),
        ),
        "shared-cluster-name": lambda: shared_names.refuse_shared("qa", names(tmp / "cluster", "tpu-rl-prod")),
        "shared-bucket-name": lambda: shared_names.refuse_shared(
            "qa", names(tmp / "bucket", "tpu-rl-qa", "  tpu-rl:bucketName: acme-tpu-tpu-rl-prod\n")
        ),
        "two-hub-cache-writers": lambda: shared_names.refuse_shared(
            "qa",
            names(
                tmp / "cache",
                "tpu-rl-qa",
                "  tpu-rl:model:\n    hubCache: gs://acme-hub/hub/\n    hubCacheWriter: qa\n",
            ),
        ),
    }


def names(tmp: Path, cluster: str, extra: str = "") -> Path:
    """Stack files qa (named ``cluster``, with ``extra`` lines) and prod of one project; prod shares the Hub cache
    with prod as its writer."""
    tmp.mkdir(parents=True, exist_ok=True)
    root = repo(tmp)
    (root / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    head = "config:\n  gcp:project: acme-tpu\n"
    cache = "  tpu-rl:model:\n    hubCache: gs://acme-hub/hub/\n    hubCacheWriter: prod\n"
    (root / "Pulumi.prod.yaml").write_text(f"{head}  tpu-rl:clusterName: tpu-rl-prod\n{cache}")
    (root / "Pulumi.qa.yaml").write_text(f"{head}  tpu-rl:clusterName: {cluster}\n{extra}")
    return root


def raise_line(line: str | None) -> None:
    raise StateError(line)


class Unreadable:
    """A Cloud KMS client without credentials."""

    def get_crypto_key(self, **kwargs: object) -> object:
        from google.auth.exceptions import DefaultCredentialsError

        raise DefaultCredentialsError("Your default credentials were not found.")


def rekey(tmp: Path) -> object:
    """`pulumi stack change-secrets-provider` that leaves the stack file as it was (run from another checkout)."""
    import subprocess

    (tmp / "rekey").mkdir()
    root = repo(tmp / "rekey", prod=cli_file(provider=f"gcpkms://{RING_KEY.format('prod')}"))
    done = subprocess.CompletedProcess([], 0, "", "")
    return state_move._rekey(PROD, root, f"gcpkms://{KEY.format('prod')}", lambda *a, **k: done)


def whoami_lines(tmp: Path) -> str:
    """The warning for a credentials file the CLI encrypted, then the failure when `pulumi whoami` fails too."""
    import json
    import subprocess

    (tmp / "whoami").mkdir()
    (tmp / "whoami" / "credentials.json").write_text(json.dumps({"$pulumiSecureStore": 1, "data": "eA=="}))
    env = {"PULUMI_HOME": str(tmp / "whoami")}
    url = json.dumps({"url": "gs://acme-old-state"})
    _, (warning,), _ = state_lookup.logins(env, lambda *a, **k: subprocess.CompletedProcess([], 0, url, ""))
    failing = subprocess.CompletedProcess([], 255, "", "error: the credential store is locked")
    _, _, (failure,) = state_lookup.logins(env, lambda *a, **k: failing)
    return f"{warning} | {failure}"


def world_lines() -> dict[str, str]:
    """The lines `make state-bucket` and the check before each command stop with, on the loopback APIs."""
    from dataclasses import replace

    found: dict[str, str] = {}

    def catch(case: str, run: Callable[[], object]) -> None:
        try:
            run()
        except StateError as err:
            found[case] = str(err)

    with fake_state_apis() as fake:
        storage, kms, services = clients(fake)

        def make(home: Home = PROD, **kwargs) -> object:
            kwargs.setdefault("writers", ("user:ops@acme.example",))
            kwargs.setdefault("project_number", fake.project_number)
            return state_bucket.create(home, readers=(), storage=storage, kms=kms, services=services, **kwargs)

        catch(
            "bucket-not-a-bucket",
            lambda: make(Home("dev", "https://api.pulumi.com", "recorded", "", False, "acme-tpu", "us-east5")),
        )
        catch("bucket-no-caller", lambda: make(writers=()))
        fake.project_held = set()
        catch("project-number", lambda: state_bucket.project_number(admin_clients(fake)[3], "acme-tpu"))
        fake.project_held = None
        fake.services["storage.googleapis.com"] = "ENABLED"
        catch("access-no-bucket", lambda: state_access.check(PROD, "write", storage=storage, kms=kms))
        make(Home("dev", PROD.backend, "default", PROD.secrets_provider, False, "acme-tpu", "us-east5"))
        catch("bucket-another-stacks", make)
        fake.buckets[PROD.bucket]["labels"] = {}
        catch("key-another-stacks", make)
        fake.keys[PROD.key]["labels"] = {}
        fake.objects[PROD.bucket] = [".pulumi/stacks/tpu-rl/dev.json", ".pulumi/stacks/other/qa.json"]
        catch("bucket-holds-others", make)
        fake.objects[PROD.bucket] = []
        fake.held = {"storage.objects.get"}
        found["access-missing-read"] = str(state_access.check(PROD, "read", storage=storage, kms=kms))
        now = [0.0]
        catch(
            "access-not-propagated",
            lambda: state_bucket.wait_for_access(
                PROD, storage, kms, clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s)
            ),
        )
        fake.held = None
        fake.buckets[PROD.bucket]["projectNumber"] = "999999999999"
        catch("bucket-another-project", make)
        fake.buckets[PROD.bucket]["projectNumber"] = fake.project_number
        fake.forbidden.add(PROD.bucket)
        catch("bucket-cannot-tell", make)
        catch("new-bucket-cannot-tell", lambda: BUCKET_EXISTS(storage, PROD.bucket, PROD.stack))
        fake.forbidden.clear()
        folder = replace(PROD, backend=f"{PROD.backend}/tpu-rl/prod", origin="STATE_BACKEND")
        fake.objects[PROD.bucket] = ["tpu-rl/prod/.pulumi/meta.yaml", "exports/model.safetensors"]
        catch("bucket-folder-shares", lambda: make(folder))
        fake.objects[PROD.bucket] = []
        fake.unapplied = True
        fake.key_policies[PROD.key] = [{"role": "roles/cloudkms.cryptoKeyDecrypter", "members": ["allUsers"]}]
        catch("key-read-back", make)
    return found


def messages(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    found: dict[str, str] = {}
    (tmp / "home").mkdir()
    for case, run in {**home_refusals(tmp / "home"), **tool_lines(tmp, monkeypatch)}.items():
        try:
            run()
        except StateError as err:
            found[case] = str(err)
        else:
            raise AssertionError(f"{case}: nothing was refused")
    return {**found, **world_lines()}


def read_messages() -> dict[str, str]:
    rows = MESSAGES.read_text().splitlines() if MESSAGES.exists() else []
    return dict(row.split("\t", 1) for row in rows if row)


def test_every_line_is_one_line_and_the_reviewed_one(tmp_path, monkeypatch):
    found = {case: text.replace(str(tmp_path), "<tmp>") for case, text in messages(tmp_path, monkeypatch).items()}
    assert all("\n" not in text and "\t" not in text for text in found.values())
    if os.environ.get("TPU_RL_UPDATE_MESSAGES"):
        MESSAGES.write_text("".join(f"{case}\t{text}\n" for case, text in found.items()))
    assert found == read_messages()


@pytest.mark.parametrize("case", ["shared-key", "passphrase-protected", "new-found-elsewhere", "access-missing-read"])
def test_a_line_names_what_to_run(case):
    text = read_messages()[case]
    assert "make " in text or "ALLOW_PASSPHRASE=1" in text, text
