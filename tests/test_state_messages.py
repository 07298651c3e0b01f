"""Every line the state tools refuse or stop with, reviewed word for word in tests/data/state-messages.tsv
(`TPU_RL_UPDATE_MESSAGES=1` rewrites it; check the diff): each is one line naming what is wrong and what to run."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fake_state_apis import clients, fake_state_apis
from tests.stack_homes import KEY, SHARED, cli_file, repo
from tools import shared_names, state_access, state_bucket, state_move
from tools.stack_files import ROOT
from tools.state_export import StateError
from tools.state_home import Home, decide, with_record
from tools.state_lookup import Known

pytestmark = pytest.mark.usefixtures("google_clients")

MESSAGES = ROOT / "tests" / "data" / "state-messages.tsv"
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
        "shared-key": lambda: decide("dev", root),
        "secrets-provider-loses": lambda: decide("dev", root, secrets_provider="passphrase", shared_key_ok=True),
        "passphrase-protected": lambda: decide("local", root, explicit=outside),
        "passphrase-protected-stack": lambda: decide("salted", root),
        "bucket-name": lambda: decide("europe-west4-production", root),
        "key-name": lambda: decide("prod.eu", root),
        "record-flow-mapping": lambda: with_record("config: {gcp:project: acme-tpu}\n", "gs://b-1", "Pulumi.dev.yaml"),
    }


def tool_lines(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Callable[[], object]]:
    from dataclasses import replace

    from tools import state, state_lookup

    shared = Known("gs://acme-tpu-pulumi-state", "the project's shared state bucket of earlier versions")
    cloud = "https://api.pulumi.com (Pulumi Cloud, where the CLI is logged in): `pulumi stack ls` at "
    cloud += "https://api.pulumi.com failed: error: 401 Unauthorized"

    def new(found: Known | None, failures: list[str], exists: bool = True, home: Home = PROD) -> object:
        monkeypatch.setattr(state_lookup, "found_elsewhere", lambda *a, **k: (found, failures))
        monkeypatch.setattr(state, "_storage", object)
        monkeypatch.setattr(state, "_bucket_exists", lambda storage, bucket: exists)
        return state._new(home, tmp)

    return {
        "new-found-elsewhere": lambda: new(shared, []),
        "new-found-elsewhere-recorded": lambda: new(shared, [], home=replace(PROD, origin="recorded")),
        "new-cannot-tell": lambda: new(None, [cloud]),
        "new-no-bucket": lambda: new(None, [], exists=False),
        "members": lambda: state_bucket.parse_members("user:ops@acme.example,projectViewer:acme-tpu", "MEMBERS"),
        "setup-missing": lambda: raise_line(state_bucket.setup_missing("acme-tpu", ["storage.buckets.get"])),
        "move-not-a-source": lambda: state_move.move(PROD, tmp, "https://api.pulumi.com"),
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


def world_lines() -> dict[str, str]:
    """The lines `make state-bucket` and the check before each command stop with, on the loopback APIs."""
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
            return state_bucket.create(home, readers=(), storage=storage, kms=kms, services=services, **kwargs)

        catch(
            "bucket-not-a-bucket",
            lambda: make(Home("dev", "https://api.pulumi.com", "recorded", "", False, "acme-tpu", "us-east5")),
        )
        catch("bucket-no-caller", lambda: make(writers=()))
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
