"""Stack files exactly as the Pulumi CLI writes them, for every secrets provider, through every tool.

The fixtures in ``tests/data/stacks/`` were written in the CLI's format (pulumi
``sdk/go/common/workspace/project.go`` ``ProjectStack``: ``secretsprovider``, ``encryptedkey``,
``encryptionsalt``, then ``config``; yaml.v3 with a 2-space indent; top-level values re-tagged as strings
by ``yamlutil.Edit``; ``--path`` values typed, floats left as strings; ``--secret`` as ``secure:``):
passphrase (``encryptionsalt``), Pulumi Cloud (no header), gcpkms, awskms, azurekeyvault and hashivault
(``secretsprovider`` + ``encryptedkey``), a secret set with ``--secret --path``, and ``Pulumi.dev.yaml``
after the README's set-up commands. The passphrase ones decrypt for real (below), as the CLI would.
"""

from __future__ import annotations

import base64
import hashlib
import json

import pytest
import yaml

from core.config import ConfigError
from tests.fake_hub_datasets import ModelAndDatasetHub
from tests.fake_kube import fake_cluster
from tests.loopback import serve
from tools.plan.cli import main as plan_main
from tools.stack_files import load_stack

DATA = __import__("pathlib").Path(__file__).parent / "data" / "stacks"
PROVIDERS = ("passphrase", "service", "gcpkms", "awskms", "azurekeyvault", "hashivault")
PASSPHRASE = "tpu-rl-fixture-passphrase"
TOKEN = "hf_P64CSviiGfaGvyHKR3RZaW8TxrWD6qmmyS"
"""What the fixtures' hfToken decrypts to (a made-up token)."""


def fixture(name: str):
    return DATA / f"Pulumi.{name}.yaml"


def ciphertexts(name: str) -> list[str]:
    """Every ``secure:`` value of a fixture (and the headers that hold key material)."""
    document = yaml.safe_load(fixture(name).read_text())
    found = [document[k] for k in ("encryptedkey", "encryptionsalt") if k in document]

    def walk(value):
        if isinstance(value, dict):
            if set(value) == {"secure"}:
                found.append(value["secure"])
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(document["config"])
    return found


def never_shown(text: str, name: str) -> None:
    """No ciphertext, no part of one (any 8 characters of its payload) and not the token."""
    assert TOKEN not in text and "hf_P64" not in text
    for value in ciphertexts(name):
        payload = value.split(":")[-1]
        for start in range(0, max(1, len(payload) - 8), 4):
            assert payload[start : start + 8] not in text, f"part of a ciphertext of {name} was shown"


def decrypt(name: str, value: str) -> str:
    """The CLI's passphrase provider (pulumi sdk/go/common/resource/config/crypt.go: PBKDF2-SHA256, 1,000,000
    iterations, AES-256-GCM; pkg/secrets/passphrase/manager.go: the salt holds an encrypted "pulumi")."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    document = yaml.safe_load(fixture(name).read_text())
    _, salt, check = document["encryptionsalt"].split(":", 2)
    key = hashlib.pbkdf2_hmac("sha256", PASSPHRASE.encode(), base64.b64decode(salt), 1_000_000, 32)

    def open_(text: str) -> str:
        version, nonce, sealed = text.split(":")
        assert version == "v1"
        return AESGCM(key).decrypt(base64.b64decode(nonce), base64.b64decode(sealed), None).decode()

    assert open_(check) == "pulumi", "the passphrase unlocks the stack, as `pulumi up` checks it"
    return open_(value)


@pytest.mark.slow
def test_the_passphrase_fixtures_are_real_ciphertext():
    for name in ("passphrase", "readme"):
        document = yaml.safe_load(fixture(name).read_text())
        assert decrypt(name, document["config"]["tpu-rl:hfToken"]["secure"]) == TOKEN
    assert all(len(ciphertexts(n)[-1]) == 92 for n in PROVIDERS), "v1:<nonce>:<37 bytes + tag> is 92 characters"


@pytest.mark.parametrize("name", [*PROVIDERS, "readme"])
def test_a_cli_written_stack_loads_with_the_token_set_but_opaque(name):
    settings, raw, secret_keys = load_stack(None, fixture(name))
    assert settings.hf_token_set and "tpu-rl:hfToken" in secret_keys
    assert raw["tpu-rl:hfToken"] != "" and "v1:" not in raw["tpu-rl:hfToken"] and "AAAB" not in raw["tpu-rl:hfToken"]
    never_shown(json.dumps(raw), name)


def test_values_as_the_cli_types_them_are_read():
    """``--path`` stores ints as ints and floats as strings; top-level values are strings ("true")."""
    settings, _, _ = load_stack(None, fixture("passphrase"))
    assert settings.force_destroy is True
    assert settings.training.knobs["num_batches"] == 10 and settings.training.knobs["learning_rate"] == 3e-05
    assert settings.training.extra_args == {"eval_interval": "5"}
    assert settings.authorized_networks == ("34.120.1.7/32",)
    assert settings.workflow.timeouts["train"] == 6 * 3600
    readme, _, _ = load_stack(None, fixture("readme"))
    assert readme.project == "my-project" and readme.authorized_networks == ("34.120.1.7/32",)
    assert readme.protect is False and readme.force_destroy is True


@pytest.mark.parametrize("name", [*PROVIDERS, "readme"])
@pytest.mark.slow
def test_make_plan_works_and_shows_no_part_of_a_secret(name, tmp_path, capsys):
    out = tmp_path / "plan"
    assert plan_main(["--config-file", str(fixture(name)), "--out", str(out)]) == 0
    printed = capsys.readouterr()
    assert "tpu-rl:hfToken" not in printed.err, "a set secret needs no note"
    written = "".join(p.read_text() for p in out.rglob("*") if p.is_file())
    never_shown(printed.out + printed.err + written, name)
    plan = json.loads((out / "plan.json").read_text())
    secret = next(r for r in plan["resources"] if r["name"] == "hf-token")
    assert secret["inputs"]["stringData"] == {"token": "[secret]"}


def test_a_secret_set_with_path_is_refused_without_showing_it(capsys, tmp_path):
    assert plan_main(["--config-file", str(fixture("nested-secret"))]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(
        "error: tpu-rl:workflow is stored as a secret: only tpu-rl:hfToken and tpu-rl:hfWriteToken may be secret"
    )
    assert "\n" not in err
    never_shown(err, "nested-secret")
    with pytest.raises(ConfigError):
        load_stack(None, fixture("nested-secret"))


@pytest.mark.slow
def test_the_preflight_of_an_encrypted_token_asks_for_it_and_uses_hf_token(monkeypatch, capsys):
    argv = ["--config-file", str(fixture("passphrase")), "--preflight", "--set", "tpu-rl:model.name=gemma4-26b"]
    monkeypatch.delenv("HF_TOKEN", raising=False)
    assert plan_main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "the offline plan does not decrypt tpu-rl:hfToken" in err and "export HF_TOKEN" in err
    with serve(ModelAndDatasetHub) as hub:  # the base model and the dataset, as the preflight reads them
        monkeypatch.setenv("HF_ENDPOINT", hub)
        monkeypatch.setenv("HF_TOKEN", "hf_goodTOKEN")
        assert plan_main(argv) == 0, capsys.readouterr().err


def test_esc_environments_are_named_as_unseen(tmp_path, capsys):
    path = tmp_path / "Pulumi.esc.yaml"
    path.write_text(fixture("passphrase").read_text() + "environment:\n  - acme/tpu-rl-dev\n")
    assert plan_main(["--config-file", str(path)]) == 0
    assert "imports Pulumi ESC environments (acme/tpu-rl-dev)" in capsys.readouterr().err


@pytest.mark.slow
def test_status_and_report_work_on_a_cli_written_stack(tmp_path, gcs, capsys):
    from tools import report, status

    with fake_cluster() as cluster:
        config = cluster.kubeconfig(context="gke_acme-ml-dev_us-east5_tpu-rl-dev")
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(config))
        assert status.main(["--config-file", str(fixture("passphrase")), "--kubeconfig", str(kubeconfig)]) == 0
    gcs.create_bucket("acme-ml-dev-tpu-rl-dev")  # the stack's bucket (the program creates it)
    assert report.main(["--config-file", str(fixture("passphrase")), "--out", str(tmp_path / "report")]) == 0
    printed = capsys.readouterr()
    never_shown(printed.out + printed.err, "passphrase")
    assert (tmp_path / "report" / "report.html").exists()
