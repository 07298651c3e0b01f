"""A change that would replace the artifacts bucket (its name, location or project) is refused at plan time in every
stack (``infra.gcp.storage.BucketIdentity``): the check itself, the dynamic provider as the engine calls it, how it is
stored, where the program registers it, and (slow tier) a dev stack's `up` and preview in the engine model
(``tests.engine``: the provider's ``check`` called with the state's inputs, as ``step_generator.go``
``continueStepsFromImport`` and ``pulumi/dynamic/__main__.py`` ``Check`` do)."""

from __future__ import annotations

import base64

import dill
import pytest
from pulumi.dynamic.dynamic import serialize_provider

from infra.gcp.storage import IDENTITY_KEYS, BucketIdentityProvider, identity_problem, identity_urn
from tests.conftest import one
from tests.engine import BUCKET
from tests.scenario import STEPS
from tools.stack_files import ROOT

IDENTITY = "pulumi-python:dynamic/storage:BucketIdentity"
URN = identity_urn("dev", "tpu-rl", "tpu-rl:gcp:ArtifactBucket", "bucket-identity")
OLD = {"name": "p-tpu-rl-dev", "location": "US-EAST5", "project": "p", "urn": URN}


@pytest.mark.pure
def test_a_new_stack_or_an_unchanged_bucket_passes():
    assert identity_problem({}, OLD) is None, "nothing recorded: a new stack, or the first `up` with the check"
    assert identity_problem(OLD, dict(OLD)) is None
    assert identity_problem(OLD, {**OLD, "urn": "urn:pulumi:renamed::tpu-rl::x::bucket-identity"}) is None


@pytest.mark.pure
@pytest.mark.parametrize("key", list(IDENTITY_KEYS))
def test_a_change_of_any_replacing_argument_is_one_line_naming_the_key_and_the_override(key):
    new = {**OLD, key: "other"}
    problem = identity_problem(OLD, new)
    assert problem is not None and "\n" not in problem
    assert problem.startswith(
        "refusing to replace the artifacts bucket gs://p-tpu-rl-dev, which holds every earlier run: "
        f"{IDENTITY_KEYS[key]} ({key}: {OLD[key]} -> other) changed. Set the old value back; "
    )
    assert problem.endswith(
        f"run `tpu-rl pulumi --stack dev -- state delete '{URN}' --yes`, then `make up STACK=dev`"
    ), "the stack the URN names, in its own home"


@pytest.mark.pure
def test_the_provider_fails_check_and_never_replaces_itself():
    provider = BucketIdentityProvider()
    moved = {**OLD, "location": "EUROPE-WEST4"}
    failed = provider.check(OLD, moved)
    assert [f.property for f in failed.failures] == [""] and failed.inputs == moved
    assert "gcp:region (location: US-EAST5 -> EUROPE-WEST4)" in failed.failures[0].reason
    assert provider.check({}, moved).failures == [], "after `pulumi state delete`: recorded afresh"
    assert provider.diff("p/p-tpu-rl-dev", OLD, dict(OLD)).changes is False
    after = provider.diff("p/p-tpu-rl-dev", OLD, moved)
    assert after.changes is True and after.replaces == [], "an update: it holds nothing"
    assert provider.create(OLD).id == "p/p-tpu-rl-dev"


def test_the_provider_is_stored_by_reference():
    """The state holds the pickled provider (``__provider``): a class in an importable module is its module and
    name; renaming either breaks every stack that has the resource (its check, diff and destroy load it)."""
    pickled = base64.b64decode(serialize_provider(BucketIdentityProvider()))
    assert b"infra.gcp.storage" in pickled and b"BucketIdentityProvider" in pickled and len(pickled) < 200
    assert type(dill.loads(pickled)) is BucketIdentityProvider


@pytest.mark.slow
@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_stack_registers_the_identity_before_the_bucket(stack, request):
    plan = request.getfixturevalue(f"{stack}_plan")
    identity = one(plan, IDENTITY, "bucket-identity")
    bucket = one(plan, BUCKET, "bucket")
    assert {k: identity["inputs"][k] for k in IDENTITY_KEYS} == {k: bucket["inputs"][k] for k in IDENTITY_KEYS}
    assert identity["inputs"]["urn"] == identity_urn(stack, "tpu-rl", "tpu-rl:gcp:ArtifactBucket", "bucket-identity")
    assert "bucket-identity" in bucket["options"]["dependsOn"], "the bucket is registered only once it passed"
    assert not identity["options"].get("protect"), "in every stack, protected or not"


@pytest.mark.slow
def test_a_dev_stack_refuses_a_new_bucket_name_at_preview_and_up_until_the_identity_is_dropped(stack):
    """dev (protect off, forceDestroy on): a new tpu-rl:bucketName would replace the bucket (google provider
    ForceNew), creating the new one and deleting the old with every run in it. The identity's Check refuses it at the
    preview and at the `up`, before the bucket is registered; `pulumi state delete` of the identity is the override,
    after which the replacement goes ahead (and the next change is refused again)."""
    stack.stack_file = ROOT / "Pulumi.dev.yaml"
    assert stack.up().error is None
    (urn,) = [u for u, r in stack.state.items() if r.type == IDENTITY]
    bucket = stack.urn(BUCKET, "bucket")
    old_name = stack.state[bucket].inputs["name"]
    renamed = ["tpu-rl:bucketName=tpu-rl-moved-bucket"]

    for run in (stack.preview(overrides=renamed), stack.up(overrides=renamed)):
        message = str(run.error)
        assert message.startswith(
            f"{IDENTITY} resource 'bucket-identity' has a problem: refusing to replace the artifacts bucket "
            f"gs://{old_name}, which holds every earlier run: tpu-rl:bucketName (name: {old_name} -> "
            "tpu-rl-moved-bucket) changed."
        ), message
        stack_name = urn.split("::")[0].rpartition(":")[2]
        assert message.endswith(
            f"run `tpu-rl pulumi --stack {stack_name} -- state delete '{urn}' --yes`, then `make up STACK={stack_name}`"
        )
        assert bucket not in run.resources and run.actions == {}, "the bucket and the steps are not reached"
    assert stack.state[bucket].inputs["name"] == old_name

    del stack.state[urn]  # pulumi state delete '<urn>' --yes
    moved = stack.up(overrides=renamed)
    assert moved.error is None, moved.error
    assert moved.resources[bucket] == "replace" and stack.state[bucket].inputs["name"] == "tpu-rl-moved-bucket"
    assert [w.split(":")[0] for w in stack.written[-3:]] == list(STEPS), "every step runs again into the new bucket"
    again = stack.up()
    assert "refusing to replace the artifacts bucket gs://tpu-rl-moved-bucket" in str(again.error)
