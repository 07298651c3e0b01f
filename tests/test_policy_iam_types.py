"""Every IAM grant type of the pinned pulumi-gcp is judged by the pack (``core/data/gcp-iam-types.json``, written by
``make iam-types`` from the provider's own registration of its resource classes)."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

import pytest

from core import iam_types
from tests import analyzer
from tools import gcp_iam_types

pytestmark = pytest.mark.pure

policies = importlib.import_module("policy.tpu_rl_policies")
GRANTS = analyzer.pack_policy("iam-service-accounts-only")


def _installed() -> Path:
    spec = importlib.util.find_spec("pulumi_gcp")
    assert spec is not None and spec.origin is not None
    return Path(spec.origin).parent


def test_the_list_is_the_pinned_providers_every_iam_grant_type():
    """Fails when the installed (locked) pulumi-gcp moved, or has an IAM grant type the list lacks: `make iam-types`."""
    version, types = gcp_iam_types.read(_installed())
    assert version == iam_types.VERSION, "pulumi-gcp moved: run `make iam-types`"
    missing = sorted(set(types) - iam_types.IAM_TYPES)
    assert missing == [], f"IAM types the pack does not judge: {missing[:5]}: run `make iam-types`"
    assert frozenset(types) == iam_types.IAM_TYPES
    assert iam_types.DATA.read_text() == gcp_iam_types.render(version, types)
    assert gcp_iam_types.main(["--check"]) == 0


def test_both_spellings_and_every_kind_are_listed():
    assert {
        "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember",
        "gcp:secretmanager/secretIamMember:SecretIamMember",
        "gcp:secretmanager/secretIamBinding:SecretIamBinding",
        "gcp:storage/bucketIAMPolicy:BucketIAMPolicy",
        "gcp:projects/iAMMember:IAMMember",
        "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember",
    } <= iam_types.IAM_TYPES
    assert len(iam_types.IAM_TYPES) > 400
    not_grants = {"gcp:projects/iAMCustomRole:IAMCustomRole", "gcp:projects/iAMAuditConfig:IAMAuditConfig"}
    assert not (not_grants | {"gcp:projects/iamMemberRemove:IamMemberRemove"}) & iam_types.IAM_TYPES


def test_the_generator_reads_the_registration_and_keeps_only_grants():
    tokens = [
        "gcp:a/bIamMember:BIamMember",
        "gcp:a/bIAMBinding:BIAMBinding",
        "gcp:a/iAMPolicy:IAMPolicy",
        "gcp:a/bIamMemberRemove:BIamMemberRemove",
        "gcp:a/bIamAuditConfig:BIamAuditConfig",
        "gcp:a/bucket:Bucket",
        "aws:iam/rolePolicy:IamPolicy",
    ]
    assert iam_types.grant_types(tokens) == [
        "gcp:a/bIAMBinding:BIAMBinding",
        "gcp:a/bIamMember:BIamMember",
        "gcp:a/iAMPolicy:IAMPolicy",
    ]


def test_a_provider_without_its_registration_is_one_error_line(tmp_path, capsys, monkeypatch):
    (tmp_path / "pulumi-plugin.json").write_text('{"version": "9.9.9"}')
    (tmp_path / "__init__.py").write_text("# no resource modules\n")
    monkeypatch.setattr(gcp_iam_types, "_package", lambda: tmp_path)
    assert gcp_iam_types.main(["--check"]) == 1
    assert (
        capsys.readouterr().err
        == f"error: {tmp_path}/__init__.py registers no resource modules: the generator needs updating\n"
    )


def _judge(type_: str, props: dict) -> list[str]:
    pack = analyzer.Pack({"all": "mandatory"}, policies=[GRANTS])
    resource = analyzer.Resource(type_, "grant", f"urn:pulumi:dev::tpu-rl::{type_}::grant", props)
    return [f.message for f in pack.analyze(resource)]


def test_every_listed_type_is_judged():
    """allUsers as a member of any grant type the provider has: refused; the stack's own shape passes."""
    for type_ in sorted(iam_types.IAM_TYPES):
        kind = iam_types.grant_kind(type_)
        props = {"role": "roles/x"} | ({"members": ["allUsers"]} if kind == "Binding" else {"member": "allUsers"})
        if kind == "Policy":
            props = {"policyData": '{"bindings": [{"role": "roles/x", "members": ["allUsers"]}]}'}
        found = _judge(type_, props)
        assert any("allUsers is not a service account" in m for m in found), (type_, found)
        if kind == "Member":
            assert _judge(type_, {"role": "roles/x", "member": "serviceAccount:a@p.iam.gserviceaccount.com"}) == []
        else:
            assert any("(authoritative)" in m for m in found), (type_, found)


def test_a_grant_type_the_list_lacks_is_refused_naming_the_command():
    (found,) = _judge("gcp:newservice/thingIamMember:ThingIamMember", {"member": "allUsers"})
    assert "gcp:newservice/thingIamMember:ThingIamMember is an IAM grant type" in found
    assert "make iam-types" in found
    assert _judge("gcp:newservice/thing:Thing", {"member": "allUsers"}) == []
