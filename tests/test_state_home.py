"""A stack's state home and key, decided from the repository's stack files (tools/state_home.py): dev and prod in one
Google project get different buckets, keys and key rings; a home, key or name that is another stack's, the project's
shared bucket or key of earlier versions, a protected stack's key in the shared ring, a URL or organization that
disagrees with the recorded one, a Pulumi Cloud home without its organization and a passphrase for a protected stack
are refused in one line; the home is written into a stack file as the CLI writes one, every other line kept. Stack
files are the CLI's (tests/data/stacks/: `pulumi config set` and `pulumi stack init --secrets-provider` output),
edited as `pulumi config set` would."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest
import yaml

from tests.stack_homes import KEY, RING_KEY, SHARED, STACKS, cli_file, repo
from tools import state_home
from tools.stack_files import ROOT
from tools.state_home import Home, StateRefusedError, decide, with_record


def refused(root: Path, stack: str, **kwargs) -> str:
    with pytest.raises(StateRefusedError) as caught:
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
    assert KEY.format("prod") == "projects/acme-tpu/locations/global/keyRings/pulumi-state-prod/cryptoKeys/state"
    assert dev.organization == prod.organization == "", "a self-managed backend has no organizations"


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
    cloud = {"tpu-rl:stateBackend": "https://api.pulumi.com", "tpu-rl:stateOrganization": "acme"}
    root = repo(tmp_path, dev=cli_file(config=cloud))
    home = decide("dev", root)
    assert (home.secrets_provider, home.passphrase, home.bucket) == ("", False, ""), "Pulumi Cloud's own provider"
    assert home.organization == "acme" and decide("dev", root, organization="acme") == home
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


def test_a_key_another_stack_encrypts_with_is_refused_and_names_the_move(tmp_path):
    other = f"gcpkms://{KEY.format('qa')}"
    root = repo(tmp_path, dev=cli_file(provider=other), qa=cli_file(provider=other))
    line = refused(root, "dev")
    assert f"secrets key {KEY.format('qa')} encrypts stack qa's secrets too (Pulumi.qa.yaml)" in line
    assert line.endswith("make state-bucket STACK=dev, then make state-move STACK=dev (" + state_home.MOVE_HELP + ")")
    assert decide("dev", root, shared_key_ok=True).key == KEY.format("qa"), "what the move starts from"


# ---------------------------------------------------------------------------------------------
# The homes of earlier versions


@pytest.mark.parametrize("protect", [False, True], ids=["dev", "protected"])
def test_the_projects_shared_bucket_and_key_of_earlier_versions_are_refused_for_every_stack(tmp_path, protect):
    """Every stack of the project used them: their readers and decrypters are every stack's, so no stack may keep
    them as its home, protected or not; `make state-bucket` and `make state-move` (``shared_key_ok``) may."""
    legacy = {"tpu-rl:stateBackend": "gs://acme-tpu-pulumi-state"}
    root = repo(tmp_path, prod=cli_file(provider=f"gcpkms://{KEY.format('prod')}", protect=protect, config=legacy))
    line = refused(root, "prod")
    assert line.startswith(
        "stack prod's state home gs://acme-tpu-pulumi-state (recorded in Pulumi.prod.yaml) is the project's shared "
        "state bucket of earlier versions"
    )
    assert line.endswith("make state-bucket STACK=prod, then make state-move STACK=prod (" + state_home.MOVE_HELP + ")")
    assert decide("prod", root, shared_key_ok=True).backend == "gs://acme-tpu-pulumi-state-prod", (
        "make state-bucket and make state-move give it a bucket of its own"
    )
    (root / "Pulumi.prod.yaml").write_text(cli_file(provider=f"gcpkms://{KEY.format('prod')}", protect=protect))
    assert "(given as STATE_BACKEND) is the project's shared state bucket" in refused(
        root, "prod", explicit="gs://acme-tpu-pulumi-state/prod"
    )
    (root / "Pulumi.prod.yaml").write_text(cli_file(provider=SHARED, protect=protect))
    line = refused(root, "prod")
    assert "is the project's shared key of earlier versions, which encrypted every stack's secrets" in line
    assert decide("prod", root, shared_key_ok=True).key.endswith("/pulumi-secrets"), "what the move starts from"


def test_a_protected_stacks_key_in_the_shared_ring_is_refused_and_another_stacks_is_warned_of(tmp_path):
    """A grant on a key ring is inherited by every key in it, and roles/cloudkms.admin holds
    cloudkms.keyRings.setIamPolicy: whoever administers one stack's key there could grant itself the others'."""
    ring = {stack: f"gcpkms://{RING_KEY.format(stack)}" for stack in ("dev", "prod")}
    root = repo(tmp_path, dev=cli_file(provider=ring["dev"]), prod=cli_file(provider=ring["prod"], protect=True))
    line = refused(root, "prod")
    assert line.startswith(
        f"stack prod is protected (tpu-rl:protect: true) and its secrets key {RING_KEY.format('prod')}"
    )
    assert "set the ring's IAM policy, which every key in it inherits" in line
    assert state_home.ring_warning(decide("prod", root, shared_key_ok=True)) is not None
    dev = decide("dev", root)
    warning = state_home.ring_warning(dev)
    assert warning is not None and warning.startswith(f"warning: stack dev's secrets key {RING_KEY.format('dev')} is")
    assert state_home.ring_warning(decide("dev", root, secrets_provider=ring["dev"])) == warning
    (root / "Pulumi.dev.yaml").write_text(cli_file(provider=f"gcpkms://{KEY.format('dev')}"))
    assert state_home.ring_warning(decide("dev", root)) is None, "a ring of its own"


# ---------------------------------------------------------------------------------------------
# A Pulumi Cloud home's organization


def test_a_pulumi_cloud_home_needs_its_organization_and_a_self_managed_one_takes_none(tmp_path):
    """A Cloud stack name without an organization resolves in each operator's default one (pulumi/pulumi
    pkg/backend/httpstate/backend.go New, ParseStackReference): a teammate with another default would make a second
    stack of the name there."""
    root = repo(tmp_path, prod=cli_file(config={"tpu-rl:stateBackend": "https://api.pulumi.com"}))
    line = refused(root, "prod")
    assert line.startswith("stack prod's state home https://api.pulumi.com names no organization: each operator's")
    assert line.endswith("make stack STACK=prod STATE_ORG=<organization> (docs/state.md#where-the-state-lives)")
    home = decide("prod", root, organization="acme")
    assert home.organization == "acme"
    assert "is not a Pulumi Cloud organization's name" in refused(root, "prod", organization="acme/prod")
    (root / "Pulumi.prod.yaml").write_text(cli_file())
    assert "STATE_BACKEND=https://api.pulumi.com STATE_ORG=<organization>" in refused(
        root, "prod", explicit="https://api.pulumi.com"
    )
    assert "a self-managed backend, which has no organizations: leave STATE_ORG out" in refused(
        root, "prod", organization="acme"
    )
    cloud = {"tpu-rl:stateBackend": "https://api.pulumi.com", "tpu-rl:stateOrganization": "acme"}
    (root / "Pulumi.prod.yaml").write_text(cli_file(config=cloud))
    assert "leave STATE_ORG out (every command uses the recorded organization)" in refused(
        root, "prod", organization="other"
    )


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
    with pytest.raises(StateRefusedError, match="add it under config: yourself"):
        with_record("config: {gcp:project: acme-tpu}\n", "gs://acme-state", "Pulumi.dev.yaml")


def test_record_writes_once_and_says_so(tmp_path, capsys):
    root = repo(tmp_path, dev=cli_file())
    home = decide("dev", root)
    state_home.record(home, root)
    state_home.record(home, root)
    assert capsys.readouterr().out.count("recorded tpu-rl:stateBackend: gs://acme-tpu-pulumi-state-dev") == 1
    assert decide("dev", root).origin == "recorded"


def test_a_cloud_homes_organization_is_recorded_with_it_or_after_it(tmp_path, capsys):
    root = repo(tmp_path, prod=cli_file())
    state_home.record(decide("prod", root, explicit="https://api.pulumi.com", organization="acme"), root)
    assert capsys.readouterr().out.splitlines() == [
        "recorded tpu-rl:stateBackend: https://api.pulumi.com in Pulumi.prod.yaml: commit it, so that every clone and "
        "CI job finds the state there",
        "recorded tpu-rl:stateOrganization: acme in Pulumi.prod.yaml: commit it, so that every clone and CI job finds "
        "stack prod in that organization",
    ]
    assert (
        (root / "Pulumi.prod.yaml")
        .read_text()
        .endswith("  tpu-rl:stateBackend: https://api.pulumi.com\n  tpu-rl:stateOrganization: acme\n")
    )
    assert decide("prod", root).organization == "acme"


def test_select_prints_the_home_the_provider_and_the_organization_and_warns_of_the_shared_ring(tmp_path, capsys):
    """`tools.state select`, as the Makefile reads it: three lines on stdout; the shared ring's warning on stderr."""
    from tools import state

    ring = f"gcpkms://{RING_KEY.format('dev')}"
    cloud = {"tpu-rl:stateBackend": "https://api.pulumi.com", "tpu-rl:stateOrganization": "acme"}
    root = repo(tmp_path, dev=cli_file(provider=ring), qa=cli_file(config=cloud))
    assert state.main(["select", "--stack", "dev", "--root", str(root)]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == ["gs://acme-tpu-pulumi-state-dev", ring, ""]
    assert err.startswith("warning: stack dev's secrets key ") and err.count("\n") == 1
    assert state.main(["select", "--stack", "qa", "--root", str(root)]) == 0
    assert capsys.readouterr() == ("https://api.pulumi.com\n\nacme\n", "")


def test_a_recorded_value_is_rewritten_on_its_own_line_and_nothing_else(tmp_path):
    text = cli_file(config={"tpu-rl:stateBackend": "gs://acme-tpu-pulumi-state  # the shared one"})
    written = state_home.with_value(text, "Pulumi.prod.yaml", "tpu-rl:stateBackend", "gs://acme-tpu-pulumi-state-prod")
    added = [d for d in difflib.ndiff(text.splitlines(), written.splitlines()) if d[:2] in ("+ ", "- ")]
    assert added == [
        "-   tpu-rl:stateBackend: gs://acme-tpu-pulumi-state  # the shared one",
        "+   tpu-rl:stateBackend: gs://acme-tpu-pulumi-state-prod  # the shared one",
    ]
    with pytest.raises(StateRefusedError, match="set it under config: yourself"):
        state_home.with_value("config: {tpu-rl:stateBackend: gs://a-1}\n", "x", "tpu-rl:stateBackend", "gs://b-1")
