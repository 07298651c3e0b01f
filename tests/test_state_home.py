"""A stack's state home and key, decided from the repository's stack files (tools/state_home.py): dev and prod in one
Google project get different buckets and keys; a home, key or name that is another stack's, a URL that disagrees with
the recorded one and a passphrase for a protected stack are refused in one line; the home is written into a stack
file as the CLI writes one, every other line kept. Stack files are the CLI's (tests/data/stacks/: `pulumi config set`
and `pulumi stack init --secrets-provider` output), edited as `pulumi config set` would."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest
import yaml

from tests.stack_homes import KEY, SHARED, STACKS, cli_file, repo
from tools import state_home
from tools.stack_files import ROOT
from tools.state_home import Home, RefusedError, decide, with_record


def refused(root: Path, stack: str, **kwargs) -> str:
    with pytest.raises(RefusedError) as caught:
        decide(stack, root, **kwargs)
    return str(caught.value)


# ---------------------------------------------------------------------------------------------
# Dev and prod in one project


def test_dev_and_prod_in_one_project_get_a_bucket_and_a_key_each(tmp_path):
    root = repo(tmp_path, dev=cli_file(), prod=cli_file(protect=True))
    dev, prod = decide("dev", root), decide("prod", root)
    assert dev == Home(
        "dev",
        "gs://acme-tpu-pulumi-state-dev",
        "default",
        f"gcpkms://{KEY.format('dev')}",
        False,
        "acme-tpu",
        "us-east5",
    )
    assert prod.backend == "gs://acme-tpu-pulumi-state-prod" and prod.key == KEY.format("prod")
    assert (dev.bucket, dev.prefix) == ("acme-tpu-pulumi-state-dev", "")
    assert not prod.passphrase, "a bucket's new stack is given its own key, never a passphrase"


def test_the_recorded_home_wins_and_the_login_plays_no_part(tmp_path, monkeypatch):
    root = repo(
        tmp_path,
        prod=cli_file(
            provider=f"gcpkms://{KEY.format('prod')}", config={"tpu-rl:stateBackend": "gs://acme-prod-state/tpu-rl"}
        ),
    )
    monkeypatch.setenv("PULUMI_ACCESS_TOKEN", "pul-token")  # a Pulumi Cloud login changes nothing
    home = decide("prod", root)
    assert (home.backend, home.origin, home.bucket, home.prefix) == (
        "gs://acme-prod-state/tpu-rl",
        "recorded",
        "acme-prod-state",
        "tpu-rl",
    )
    assert decide("prod", root, env_url="gs://acme-prod-state/tpu-rl/", explicit="gs://acme-prod-state/tpu-rl") == home


def test_pulumi_cloud_and_a_folder_outside_the_checkout_are_homes_too(tmp_path):
    root = repo(tmp_path, dev=cli_file(config={"tpu-rl:stateBackend": "https://api.pulumi.com"}))
    home = decide("dev", root)
    assert (home.secrets_provider, home.passphrase, home.bucket) == ("", False, ""), "Pulumi Cloud's own provider"
    outside = f"file://{tmp_path / 'state'}"
    (root / "Pulumi.dev.yaml").write_text(cli_file())
    home = decide("dev", root, explicit=outside)
    assert (home.backend, home.origin, home.passphrase) == (outside, "STATE_BACKEND", True), "diy's default: passphrase"


# ---------------------------------------------------------------------------------------------
# Refusals: one line, nothing decided


def test_a_url_that_disagrees_with_the_recorded_home_is_refused(tmp_path):
    root = repo(tmp_path, prod=cli_file(config={"tpu-rl:stateBackend": "gs://acme-prod-state"}))
    line = refused(root, "prod", explicit="gs://acme-dev-state")
    assert "STATE_BACKEND is gs://acme-dev-state, but Pulumi.prod.yaml records" in line
    line = refused(root, "prod", env_url="https://api.pulumi.com")
    assert line.startswith("PULUMI_BACKEND_URL is https://api.pulumi.com, but stack prod's state lives in gs://")
    assert "unset PULUMI_BACKEND_URL" in line
    (root / "Pulumi.prod.yaml").write_text(cli_file())
    assert "its default: Pulumi.prod.yaml records no tpu-rl:stateBackend" in refused(root, "prod", env_url="gs://x-1")


def test_a_bucket_another_stack_keeps_its_state_in_is_refused_whatever_the_prefix(tmp_path):
    root = repo(
        tmp_path,
        dev=cli_file(config={"tpu-rl:stateBackend": "gs://acme-state/dev"}),
        prod=cli_file(config={"tpu-rl:stateBackend": "gs://acme-state/prod"}),
    )
    line = refused(root, "dev")
    assert "is in gs://acme-state, stack prod's state bucket (Pulumi.prod.yaml)" in line and "takes its lock" in line
    (root / "Pulumi.dev.yaml").write_text(cli_file())
    (root / "Pulumi.prod.yaml").write_text(cli_file())
    line = refused(root, "dev", explicit="gs://acme-tpu-pulumi-state-prod")  # prod's default, given for dev
    assert "stack prod's state bucket" in line and "given as STATE_BACKEND" in line


def test_a_key_another_stack_encrypts_with_is_refused_and_the_shared_one_names_the_move(tmp_path):
    root = repo(tmp_path, dev=cli_file(provider=SHARED), prod=cli_file(provider=SHARED, protect=True))
    line = refused(root, "prod")
    assert "(the project's shared key) encrypts stack dev's secrets too (Pulumi.dev.yaml)" in line
    assert line.endswith("make state-bucket STACK=prod, then make state-move STACK=prod (" + state_home.MOVE_HELP + ")")
    assert decide("prod", root, shared_key_ok=True).key.endswith("/pulumi-secrets"), "what the move starts from"


def test_a_secrets_provider_that_would_lose_the_files_secrets_is_refused(tmp_path):
    root = repo(tmp_path, dev=cli_file(provider=f"gcpkms://{KEY.format('dev')}"))
    line = refused(root, "dev", secrets_provider="passphrase")
    assert "would make a new data key and every secret in the file would be lost" in line
    assert decide("dev", root, secrets_provider=f"gcpkms://{KEY.format('dev')}").key == KEY.format("dev")


@pytest.mark.parametrize(
    ("stack", "project", "words"),  # project: gcp:project, or a gs:// home recorded
    [
        ("a-stack-name-long-enough-to-pass-63", "acme-tpu-project-named-at-length", "is not a bucket name"),
        ("Prod", "acme-tpu", "is not a bucket name"),
        ("prod.eu", "acme-tpu", "is not a bucket name"),
        ("prod.eu", "gs://acme-prod-eu-state", "cannot name a Cloud KMS key"),
        ("prod/../dev", "acme-tpu", "is not a stack name"),
    ],
)
def test_a_name_no_bucket_or_key_can_have_is_refused_naming_what_to_set(tmp_path, stack, project, words):
    root = repo(tmp_path)
    if "/" not in stack:
        recorded = {"tpu-rl:stateBackend": project} if project.startswith("gs://") else {}
        (root / f"Pulumi.{stack}.yaml").write_text(cli_file(project=project.removeprefix("gs://"), config=recorded))
    line = refused(root, stack)
    assert words in line and "\n" not in line, line


def test_the_placeholder_project_and_a_missing_stack_file_are_refused(tmp_path):
    root = repo(tmp_path, dev=(ROOT / "Pulumi.dev.yaml").read_text())
    assert "no gcp:project of yours" in refused(root, "dev")
    assert refused(root, "qa").startswith("no stack file Pulumi.qa.yaml")


def test_a_file_backend_inside_the_checkout_is_refused_unless_asked_for(tmp_path):
    root = repo(tmp_path, dev=cli_file())
    inside = f"file://{root / '.pulumi-state'}"
    assert "inside this checkout (.pulumi-state/)" in refused(root, "dev", explicit=inside)
    assert decide("dev", root, explicit=inside, local_ok=True).backend == inside


def test_a_passphrase_is_refused_for_a_protected_stack_unless_allowed_on_purpose(tmp_path):
    outside = f"file://{tmp_path / 'state'}"
    root = repo(tmp_path, prod=cli_file(protect=True))
    line = refused(root, "prod", explicit=outside)
    assert line.startswith("stack prod is protected (tpu-rl:protect: true) and its secrets would be encrypted with a")
    assert line.endswith("or accept the passphrase with ALLOW_PASSPHRASE=1")
    assert decide("prod", root, explicit=outside, allow_passphrase=True).passphrase
    (root / "Pulumi.prod.yaml").write_text(cli_file(provider=None, protect=True))  # `encryptionsalt:` (passphrase)
    assert "protected" in refused(root, "prod")
    assert "protected" in refused(root, "prod", explicit=outside, secrets_provider="passphrase")
    (root / "Pulumi.prod.yaml").write_text(cli_file(provider=None))  # not protected: allowed
    assert decide("prod", root).secrets_provider == "passphrase"


# ---------------------------------------------------------------------------------------------
# Recording the home in the stack file


@pytest.mark.parametrize(
    "path",
    [*sorted(STACKS.glob("Pulumi.*.yaml")), ROOT / "Pulumi.dev.yaml", ROOT / "Pulumi.prod.yaml"],
    ids=lambda p: p.name,
)
def test_the_home_is_appended_to_the_config_block_and_every_other_line_kept(path):
    text = path.read_text()
    written = with_record(text, "gs://acme-tpu-pulumi-state-dev", path.name)
    added = [d for d in difflib.ndiff(text.splitlines(), written.splitlines()) if d[:2] in ("+ ", "- ")]
    assert added == ["+   tpu-rl:stateBackend: gs://acme-tpu-pulumi-state-dev"], added
    before, after = yaml.safe_load(text), yaml.safe_load(written)
    assert after == {**before, "config": {**before["config"], "tpu-rl:stateBackend": "gs://acme-tpu-pulumi-state-dev"}}


def test_a_file_without_a_config_block_gets_one_and_a_flow_mapping_is_refused():
    assert with_record("secretsprovider: passphrase\n", "file:///srv/state", "x") == (
        "secretsprovider: passphrase\nconfig:\n  tpu-rl:stateBackend: file:///srv/state\n"
    )
    with pytest.raises(RefusedError, match="add it under config: yourself"):
        with_record("config: {gcp:project: acme-tpu}\n", "gs://acme-state", "Pulumi.dev.yaml")


def test_record_writes_once_and_says_so(tmp_path, capsys):
    root = repo(tmp_path, dev=cli_file())
    home = decide("dev", root)
    state_home.record(home, root)
    state_home.record(home, root)
    assert capsys.readouterr().out.count("recorded tpu-rl:stateBackend: gs://acme-tpu-pulumi-state-dev") == 1
    assert decide("dev", root).origin == "recorded"
