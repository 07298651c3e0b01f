"""The publication (``tpu-rl:publish``): its step as the builders make it, its container command run through a
real ``bash`` against fake-gcs-server and a loopback Hub with the real ``huggingface_hub`` client (LFS mode: Xet
needs the Hub's storage service), the write token's preflight and the program's wiring under the mock runtime.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.config.values import ConfigError
from core.names import HF_SECRET, HF_WRITE_SECRET
from infra.k8s.live import ClusterReader
from tests.conftest import put
from tests.fake_hub_write import (
    FINE_ACME,
    FINE_READ,
    PRIVATE_REPO,
    PUBLIC_REPO,
    READ_ONLY,
    WRITE,
    Blob,
    WritableHub,
    new_repo,
)
from tests.fake_kube import step_pod
from tests.hf_files import LANGUAGE, VISION, model_files
from tests.lifecycle_walk import settings
from tests.loopback import serve
from tests.world import fake_world
from workloads.hub_replies import Account, account
from workloads.preflight import PreflightError, check_publish_access, published_revision, token_denial
from workloads.specs.commands import CARD_DIR, PUBLISH_WORK
from workloads.specs.step_specs import branch_of, plan_workflow

REPO = "acme/gemma4-grpo"
BASE_REPO = "google/gemma-4-26b-a4b-it"
PUBLISHING = [f"tpu-rl:publish.repo={REPO}"]


def publish_step(*overrides: str):
    return plan_workflow(settings("prod", [*PUBLISHING, *overrides])).publish


def container(step) -> dict:
    return step.manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]


def env_of(step) -> dict[str, object]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container(step)["env"]}


# ---------------------------------------------------------------------------------------------
# The step, as the builders make it


@pytest.mark.pure
def test_no_repository_no_publish_step_and_the_other_steps_are_the_same():
    without = plan_workflow(settings("prod", []))
    with_ = plan_workflow(settings("prod", PUBLISHING))
    assert without.publish is None and [s.step for s in without.steps] == ["convert", "train", "export"]
    assert [s.name for s in with_.steps[:3]] == [s.name for s in without.steps], "publishing renames nothing"
    assert with_.publish is not None and with_.publish.step == "publish"


@pytest.mark.pure
def test_the_publish_step_reads_the_write_token_and_only_it():
    step = publish_step()
    env = env_of(step)
    assert env["HF_TOKEN"] == {"secretKeyRef": {"name": HF_WRITE_SECRET, "key": "token"}}
    assert HF_WRITE_SECRET != HF_SECRET
    assert env["TPU_RL_PUBLISH_REPO"] == REPO
    assert env["TPU_RL_PUBLISH_PRIVATE"] == "true"
    assert env["TPU_RL_PUBLISH_BRANCH"] == branch_of(step.step_id) == f"tpu-rl-{step.step_id}"
    others = plan_workflow(settings("prod", PUBLISHING)).steps[:3]
    for other in others:
        text = json.dumps(other.manifest)
        assert HF_WRITE_SECRET not in text, f"{other.step} must not see the write token"
    pod = step.manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert {"name": "card", "configMap": {"name": f"{step.name}-card"}} in pod["volumes"]
    assert {"name": "card", "mountPath": CARD_DIR, "readOnly": True} in container(step)["volumeMounts"]
    assert container(step)["resources"]["requests"]["memory"] == "32Gi", "it streams files, it holds no model"


@pytest.mark.pure
def test_the_publish_step_is_content_addressed():
    base = publish_step()
    export = plan_workflow(settings("prod", PUBLISHING)).export
    assert base.input_uri == export.artifact_uri and base.output_uri.endswith(f"/publish/{base.step_id}/")
    assert base.artifact_uri == base.output_uri + "published.json"
    public = publish_step("tpu-rl:publish.private=false")
    other_repo = publish_step("tpu-rl:publish.repo=acme/other")
    retrained = publish_step("tpu-rl:training.learningRate=2e-6")
    slower = publish_step("tpu-rl:workflow.timeouts.publish=8h")
    assert len({base.name, public.name, other_repo.name, retrained.name}) == 4, "each uploads to its own branch"
    assert slower.name == base.name, "the deadline is operational"
    assert env_of(public)["TPU_RL_PUBLISH_PRIVATE"] == "false"


@pytest.mark.pure
@pytest.mark.parametrize(
    ("repo", "ok"),
    [
        ("acme/gemma4-grpo", True),
        ("a/b", True),
        ("Org_1/model.v2-final", True),
        ("acme/" + "m" * 96, True),
        ("acme/" + "m" * 97, False),
        ("acme", False),
        ("acme/x/y", False),
        ("acme/-model", False),
        ("acme/model-", False),
        ("acme/mo--del", False),
        ("acme/mo..del", False),
        ("acme/model.git", False),
        ("acme/model name", False),
        ("https://huggingface.co/acme/model", False),
    ],
)
def test_the_repository_id_follows_the_hubs_rules(repo, ok):
    if ok:
        assert settings("prod", [f"tpu-rl:publish.repo={repo}"]).publish.repo == repo
    else:
        with pytest.raises(ConfigError, match="tpu-rl:publish.repo"):
            settings("prod", [f"tpu-rl:publish.repo={repo}"])


@pytest.mark.pure
def test_publishing_is_off_with_the_workflow():
    off = settings("prod", [*PUBLISHING, "tpu-rl:workflow.enabled=false"])
    assert off.publish.repo is None, "provision only: there is no export to publish"


# ---------------------------------------------------------------------------------------------
# The container command, through bash, against fake-gcs-server and the loopback Hub


def export_files() -> dict[str, bytes]:
    """The export as the export step leaves it: the whole base model (the trained language model and the rest)."""
    return model_files({**LANGUAGE, **VISION}, shards=2)


def run_publish(step, gcs, hub_url: str, tmp_path: Path, token: str = WRITE) -> subprocess.CompletedProcess:
    """The step's container command as the pod runs it: its environment from the manifest (the token from
    its Secret), ``python3`` the real interpreter, the card and scratch paths in ``tmp_path``."""
    assert container(step)["command"] == ["/bin/bash", "/tpu-rl/run.sh"]  # the step's ConfigMap's script
    card, work, files = tmp_path / "card", tmp_path / "scratch-publish", tmp_path / "tpu-rl"
    files.mkdir(exist_ok=True)
    for name, text in step.scripts["data"].items():
        (files / name).write_text(text)
    script = step.script.replace(CARD_DIR, str(card)).replace(PUBLISH_WORK, str(work)).replace("/tpu-rl/", f"{files}/")
    (files / "run.sh").write_text(script)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    shim = bin_dir / "python3"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')  # the project's interpreter, as the image's
    shim.chmod(0o755)
    env = {k: v for k, v in env_of(step).items() if isinstance(v, str)}
    env.update(
        PATH=f"{bin_dir}:/usr/bin:/bin",
        HF_TOKEN=token,
        HF_HOME=str(tmp_path / "hf-home"),
        HF_ENDPOINT=hub_url,
        HF_HUB_DISABLE_XET="1",  # the loopback Hub speaks LFS; the image uploads through Xet
        HF_HUB_DISABLE_TELEMETRY="1",
        STORAGE_EMULATOR_HOST=os.environ["STORAGE_EMULATOR_HOST"],
        NO_GCE_CHECK="True",
        NO_PROXY="127.0.0.1,localhost",
    )
    return subprocess.run(["bash", str(files / "run.sh")], env=env, capture_output=True, text=True, timeout=60)


def lay_out(gcs, step, card: Path) -> None:
    bucket = step.input_uri.removeprefix("gs://").split("/")[0]
    gcs.create_bucket(bucket)
    prefix = step.input_uri.removeprefix(f"gs://{bucket}/")
    put(gcs, bucket, prefix, data=b"")  # the export's own folder marker
    for name, data in export_files().items():
        put(gcs, bucket, prefix + name, data=data)
    card.mkdir(exist_ok=True)
    (card / "README.md").write_text("---\nlicense: apache-2.0\n---\n\n# the card\n")
    (card / "reward-curve.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 64)


@pytest.mark.slow
def test_the_container_uploads_the_export_and_its_card_to_the_branch_then_a_rerun_sends_nothing(gcs, tmp_path):
    step = publish_step()
    lay_out(gcs, step, tmp_path / "card")
    hub = WritableHub.fresh()
    # An existing private repository whose main holds an earlier model: the run's branch starts there, and
    # holds the run only.
    existing = new_repo(REPO, private=True, created_by="alice")
    main = existing.head("main").tree
    existing.commit("main", "an earlier model", {**main, "old-model.safetensors": Blob(b"old", lfs=True)})
    hub.repos[REPO] = existing
    with serve(hub) as url:
        done = run_publish(step, gcs, url, tmp_path)
        assert done.returncode == 0, done.stderr
        branch = branch_of(step.step_id)
        repo = hub.repos[REPO]
        assert repo.private
        tree = repo.head(branch).tree
        assert set(tree) == {*export_files(), "README.md", "reward-curve.png", ".gitattributes"}
        assert "old-model.safetensors" in repo.head("main").tree, "main keeps what it had"
        for name, data in export_files().items():
            assert tree[name].data == data, name
        commit = repo.branches[branch]
        assert repo.branches["main"] != commit, "main is never written"
        record = json.loads(
            gcs.bucket(step.artifact_uri.split("/")[2]).blob(step.artifact_uri.split("/", 3)[3]).download_as_bytes()
        )
        assert record == {"repo": REPO, "branch": branch, "commit": commit, "private": True}
        assert WRITE not in done.stdout + done.stderr

        # The pod restarted (or the next `up` re-ran the step): the same upload, nothing sent, the same commit.
        hub.requests.clear()
        again = run_publish(step, gcs, url, tmp_path)
        assert again.returncode == 0, again.stderr
        assert not [r for r in hub.requests if r.startswith("PUT ") or "/commit/" in r], hub.requests
        assert repo.branches[branch] == commit

        # What the program reads back after the step: the branch's commit and every file with its size.
        revision = published_revision(REPO, branch, WRITE, url)
        assert revision is not None, "the branch was published"
        found, files = revision
        assert found == commit
        assert {n: files[n] for n in export_files()} == {n: len(d) for n, d in export_files().items()}


@pytest.mark.slow
def test_a_private_run_never_uploads_to_a_public_repository(gcs, tmp_path):
    step = publish_step(f"tpu-rl:publish.repo={PUBLIC_REPO}")
    lay_out(gcs, step, tmp_path / "card")
    hub = WritableHub.fresh()
    with serve(hub) as url:
        done = run_publish(step, gcs, url, tmp_path)
    assert done.returncode == 3, done.stderr
    assert f"{PUBLIC_REPO} exists and is public" in done.stderr
    assert branch_of(step.step_id) not in hub.repos[PUBLIC_REPO].branches
    assert not [r for r in hub.requests if r.startswith("PUT ") or "/commit/" in r]


@pytest.mark.slow
def test_a_rejected_token_fails_the_step_in_one_line_without_the_token(gcs, tmp_path):
    step = publish_step()
    lay_out(gcs, step, tmp_path / "card")
    with serve(WritableHub.fresh()) as url:
        done = run_publish(step, gcs, url, tmp_path, token="hf_revokedTOKENvalue0123456789")
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if line.startswith("tpu-rl publish:")]
    assert len(lines) == 1 and f"uploading to {REPO}@{branch_of(step.step_id)} failed" in lines[0]
    assert "revokedTOKEN" not in done.stdout + done.stderr


@pytest.mark.slow
def test_an_empty_export_is_refused(gcs, tmp_path):
    step = publish_step()
    bucket = step.input_uri.split("/")[2]
    gcs.create_bucket(bucket)
    with serve(WritableHub.fresh()) as url:
        done = run_publish(step, gcs, url, tmp_path)
    assert done.returncode == 3 and "holds no files" in done.stderr


# ---------------------------------------------------------------------------------------------
# The write token's preflight


@pytest.fixture(scope="module")
def hub():
    hub = WritableHub.fresh()
    hub.repos["contrib/hers"] = new_repo("contrib/hers", private=True, created_by="alice")
    hub.repos["contrib/theirs"] = new_repo("contrib/theirs", private=True, created_by="bob")
    with serve(hub) as url:
        yield url


@pytest.mark.parametrize(
    ("repo", "private", "token", "words"),
    [
        ("acme/new-model", True, WRITE, None),
        ("alice/new-model", True, WRITE, None),
        ("bosses/new-model", True, WRITE, None),
        ("contrib/new-model", True, WRITE, None),  # a contributor may create a repository
        ("contrib/hers", True, WRITE, None),  # and write to one of its own, as the Hub answers
        ("contrib/theirs", True, WRITE, "tpu-rl:hfWriteToken cannot write to contrib/theirs"),
        (PRIVATE_REPO, True, WRITE, None),
        (PUBLIC_REPO, False, WRITE, None),
        ("acme/new-model", True, FINE_ACME, None),
        (PUBLIC_REPO, True, WRITE, "exists and is public, and tpu-rl:publish.private is true"),
        ("acme/new-model", True, READ_ONLY, "tpu-rl:hfWriteToken is a read token"),
        ("viewers/new-model", True, WRITE, "whose role in viewers is read"),
        ("strangers/new-model", True, WRITE, "who is not a member of strangers"),
        ("acme/new-model", True, FINE_READ, "fine-grained token without write access to acme"),
        ("acme/new-model", True, "hf_invalidTOKENvalue", "tpu-rl:hfWriteToken was rejected by Hugging Face (401)"),
    ],
)
@pytest.mark.slow
def test_the_write_token_is_checked_before_anything_is_created(hub, repo, private, token, words):
    if words is None:
        assert check_publish_access(repo, private, token, endpoint=hub)
        return
    with pytest.raises(PreflightError) as caught:
        check_publish_access(repo, private, token, endpoint=hub)
    message = str(caught.value)
    assert words in message and "\n" not in message and token not in message


@pytest.mark.pure
def test_an_organization_role_below_contributor_cannot_publish():
    def who(role: str | None) -> Account:
        return account(
            {
                "name": "alice",
                "orgs": [{"name": "org", "roleInOrg": role}],
                "auth": {"accessToken": {"role": "write"}},
            }
        )

    for role in ("write", "admin", "contributor"):  # a contributor's existing repository: the Hub's auth-check decides
        assert token_denial(who(role), "org/model", exists=True) is None, role
    for below in ("read", None, "owner?"):
        denial = token_denial(who(below), "org/model", exists=False)
        assert denial is not None and "publishing needs write or admin" in denial, below


@pytest.mark.pure
def test_a_fine_grained_token_needs_repo_write_scoped_to_the_namespace():
    def who(entity: str, permissions: list[str], kind: str = "org") -> Account:
        scoped = [{"entity": {"type": kind, "name": entity}, "permissions": permissions}]
        access = {"role": "fineGrained", "fineGrained": {"scoped": scoped}}
        return account(
            {"name": "alice", "orgs": [{"name": "acme", "roleInOrg": "write"}], "auth": {"accessToken": access}}
        )

    assert token_denial(who("acme", ["repo.write"]), "acme/m", exists=True) is None
    assert token_denial(who("acme", ["repo.content.read"]), "acme/m", exists=True)
    assert token_denial(who("other", ["repo.write"]), "acme/m", exists=True), "scoped elsewhere"
    # Scoped to the repository itself: it may write to it, not create it.
    assert token_denial(who("acme/m", ["repo.write"], "model"), "acme/m", exists=True) is None
    assert token_denial(who("acme/m", ["repo.write"], "model"), "acme/m", exists=False)
    assert token_denial(who("acme/other", ["repo.write"], "model"), "acme/m", exists=True)


# ---------------------------------------------------------------------------------------------
# `pulumi up` of a publishing stack (the engine of tests/engine.py, the loopback cluster, fake-gcs-server)


def publishing_up(stack, monkeypatch, tmp_path, hub_url: str, hub, partial: list[bool] | None = None) -> None:
    """A publishing stack whose publish step runs its real container command (while ``partial`` holds True,
    one shard is then missing from the branch, as if it were changed behind the step's back)."""
    monkeypatch.setenv("HF_ENDPOINT", hub_url)
    # Only a verified export is published: the Hub also serves the base model the export check reads.
    stack.overrides = [o for o in stack.overrides if not o.startswith("tpu-rl:workflow.verifyExport")] + PUBLISHING
    stack.secrets = {"tpu-rl:hfToken": READ_ONLY, "tpu-rl:hfWriteToken": WRITE}
    stack.export_files = export_files()  # the export step's output: the whole model, as the export check wants
    base = new_repo(BASE_REPO, created_by="google")
    files = model_files({**LANGUAGE, **VISION}, 2)
    tree = {name: Blob(data, lfs=name.endswith(".safetensors")) for name, data in files.items()}
    base.commit("main", "Gemma 4", {**base.head("main").tree, **tree})
    hub.repos[BASE_REPO] = base
    stack.base_commit = base.head("main").oid  # what the conversion resolved main to and recorded
    card = tmp_path / "card"

    def publisher(step):
        card.mkdir(exist_ok=True)
        (card / "README.md").write_text("---\nlicense: apache-2.0\n---\n")  # the ConfigMap's file, as mounted
        done = run_publish(step, stack.gcs, hub_url, tmp_path)
        assert done.returncode == 0, done.stderr
        if partial and partial[0]:
            tree = hub.repos[REPO].head(branch_of(step.step_id)).tree
            tree.pop(min(n for n in tree if n.endswith(".safetensors")))

    stack.publisher = publisher


DIGEST = "us-docker.pkg.dev/cloud-tpu-images/maxtext-images/tpu_post_training@sha256:" + "e" * 64


def export_ends_and_the_token_rotates(stack, monkeypatch, tmp_path) -> None:
    """When the export ends its pod says what it ran, and the cluster rotates its token: the card's digests
    are read hours after the first reads of `up`, whose credential has expired by then."""
    from tests.scenario import auth_plugin, credential

    issued = tmp_path / "credential.json"
    issued.write_text(credential(stack.cluster.token))
    auth_plugin(tmp_path, monkeypatch, f'cat "{issued}"\n')
    write_outputs = stack.write_outputs

    def ends(obj):
        write_outputs(obj)
        if obj["metadata"]["labels"]["app.kubernetes.io/component"] == "export":
            pod = step_pod(obj, "export", "running")
            pod["spec"]["containers"] = [{"name": "export", "image": container(stack.steps().export)["image"]}]
            pod["status"] = {"phase": "Succeeded", "containerStatuses": [{"name": "export", "imageID": DIGEST}]}
            stack.cluster.core[("pods", "tpu-rl")] = [pod]
            stack.cluster.token = "rotated-token"
            issued.write_text(credential("rotated-token"))

    monkeypatch.setattr(stack, "write_outputs", ends)


@pytest.mark.slow
def test_up_publishes_the_verified_export_and_outputs_its_commit_then_up_again_uploads_nothing(
    stack, monkeypatch, tmp_path
):
    hub = WritableHub.fresh()
    export_ends_and_the_token_rotates(stack, monkeypatch, tmp_path)
    with serve(hub) as url:
        publishing_up(stack, monkeypatch, tmp_path, url, hub)
        preview = stack.preview()
        assert preview.error is None, preview.error
        name = f"{stack.steps().publish.name}-card"
        shown = next(r for r in preview.plan.resources if r["name"] == name)
        assert shown["inputs"]["metadata"]["name"] == name, "a preview shows the card before the run's numbers"
        first = stack.up()
        assert first.error is None, first.error
        publish = stack.steps().publish
        branch = branch_of(publish.step_id)
        commit = hub.repos[REPO].branches[branch]
        outputs = first.plan.outputs
        assert outputs["hubRepoUrl"] == f"https://huggingface.co/{REPO}"
        assert outputs["hubRevision"] == branch and outputs["hubCommit"] == commit
        assert first.actions[publish.name] == "create"
        card = next(r for r in first.plan.resources if r["name"] == f"{publish.name}-card")
        readme = card["inputs"]["data"]["README.md"]
        assert f'revision="{branch}"' in readme and "base_model: google/gemma-4-26b-a4b-it" in readme
        assert f"`{DIGEST}`" in readme, "the digest the export's pod ran, read with a fresh credential"
        assert card["options"]["ignoreChanges"] == ["data", "binaryData"], "a run's card is written once"
        text = json.dumps(first.plan.resources) + json.dumps(outputs)
        assert WRITE not in text, "the write token is a secret everywhere"
        assert first.plan.raw_inputs["hf-write-token"]["stringData"] == {"token": WRITE}, "its own Secret holds it"
        assert WRITE not in json.dumps(first.plan.raw_inputs["hf-token"]), "not the read token's Secret"

        hub.requests.clear()
        again = stack.up()
        assert again.error is None and again.actions[publish.name] == "same"
        assert not [r for r in hub.requests if r.startswith(("PUT ", "POST "))], "nothing uploaded again"
        assert again.plan.outputs["hubCommit"] == commit

        # The write token was revoked since: the Hub cannot say whether the branch is whole, which is no reason
        # to publish again; the outputs come from the step's record.
        stack.secrets = {**stack.secrets, "tpu-rl:hfWriteToken": "hf_revokedTOKENvalue0123456789"}
        revoked = stack.up()
        assert revoked.error is None and revoked.actions[publish.name] == "same", revoked.error
        assert revoked.plan.outputs["hubCommit"] == commit
        warned = [w for w in revoked.plan.warnings() if "cannot check the publication" in w]
        assert warned and "tpu-rl:hfWriteToken was rejected by Hugging Face (401)" in warned[0]
        assert "revokedTOKEN" not in " ".join(revoked.plan.warnings())


@pytest.mark.slow
def test_a_branch_without_the_export_fails_up_and_the_next_up_publishes_again(stack, monkeypatch, tmp_path):
    hub = WritableHub.fresh()
    partial = [True]
    with serve(hub) as url:
        publishing_up(stack, monkeypatch, tmp_path, url, hub, partial)
        failed = stack.up()
        message = str(failed.error)
        publish = stack.steps().publish
        assert f"{REPO}@tpu-rl-" in message and "does not hold the export" in message and "(missing)" in message
        assert f"the next `make up STACK={stack.name}` runs {publish.name} again" in message and "\n" not in message

        partial[0] = False
        again = stack.up()
        assert again.error is None, again.error
        assert again.actions[publish.name] == "replace", "the completed step whose branch is incomplete is retried"
        tree = hub.repos[REPO].head(branch_of(publish.step_id)).tree
        assert set(export_files()) <= set(tree), "the retry uploaded what was missing"


@pytest.mark.slow
def test_a_deleted_branch_or_a_stray_file_is_published_again_by_the_next_up(stack, monkeypatch, tmp_path):
    """tpu-rl's branches are its own: the next `up` puts back what it published (a preview only says so)."""
    hub = WritableHub.fresh()
    with serve(hub) as url:
        publishing_up(stack, monkeypatch, tmp_path, url, hub)
        assert stack.up().error is None
        publish = stack.steps().publish
        branch = branch_of(publish.step_id)
        repo = hub.repos[REPO]

        del repo.branches[branch]
        preview = stack.preview()
        assert preview.error is None, preview.error
        said = [w for w in preview.plan.warnings() if f"has no branch {branch}" in w]
        assert said and f"`make up STACK={stack.name}` will retry it" in said[0]
        again = stack.up()
        assert again.error is None and again.actions[publish.name] == "replace", again.error
        assert set(export_files()) <= set(repo.head(branch).tree)

        head = repo.head(branch)
        repo.commit(branch, "someone's file", {**head.tree, "notes.txt": Blob(b"mine")})
        third = stack.up()
        assert third.error is None and third.actions[publish.name] == "replace", third.error
        assert "notes.txt" not in repo.head(branch).tree, "deleted on the branch by the upload"
        assert third.plan.outputs["hubCommit"] == repo.branches[branch]


# ---------------------------------------------------------------------------------------------
# The program's preflight of a publishing stack (the read check is test_preflight's: here it passes)

REAL = ["gcp:project=real-project-1", "tpu-rl:tpu.reservation=res-a", 'tpu-rl:authorizedNetworks=["198.18.0.0/15"]']
READ = "hf_readTOKENforTHEbaseMODEL0123456789"


def up_with(write_token: str, monkeypatch, hub_url: str, *overrides: str):
    from tools.plan import plan_stack
    from tools.stack_files import ROOT
    from workloads import preflight

    monkeypatch.setenv("HF_ENDPOINT", hub_url)
    monkeypatch.setattr(preflight, "check_model_access", lambda *a, **k: preflight.BaseModel("a" * 40, "apache-2.0"))
    monkeypatch.setattr(preflight, "check_dataset_access", lambda *a, **k: "b" * 40)  # tests/test_preflight.py
    return plan_stack(
        ROOT / "Pulumi.prod.yaml",
        [*REAL, *PUBLISHING, *overrides],
        preflight=True,
        world=functools.partial(fake_world, cluster=ClusterReader),
        secrets={"tpu-rl:hfToken": READ, "tpu-rl:hfWriteToken": write_token},
        raise_errors=False,
    )[0]


@pytest.mark.parametrize(
    ("token", "words"),
    [
        (READ, "preflight: tpu-rl:hfWriteToken is the read token (tpu-rl:hfToken)"),
        (READ_ONLY, "preflight: tpu-rl:hfWriteToken is a read token: publishing needs a write token"),
        (WRITE, None),
    ],
)
@pytest.mark.slow
def test_the_write_token_stops_up_before_any_resource(token, words, monkeypatch):
    with serve(WritableHub.fresh()) as url:
        plan = up_with(token, monkeypatch, url)
    if words is None:
        assert plan.resources and not str(plan.error).startswith("preflight"), plan.error
        return
    assert str(plan.error).startswith(words) and plan.resources == [], "nothing is registered"
    assert token not in str(plan.error)


def test_the_read_token_is_refused_as_the_write_token_with_the_preflight_off_too(monkeypatch):
    with serve(WritableHub.fresh()) as url:
        plan = up_with(READ, monkeypatch, url, "tpu-rl:workflow.preflight=false")
    assert str(plan.error).startswith("preflight: tpu-rl:hfWriteToken is the read token") and plan.resources == []


@pytest.mark.pure
def test_only_a_verified_export_is_published():
    with pytest.raises(ConfigError) as caught:
        settings("prod", [*PUBLISHING, "tpu-rl:workflow.verifyExport=false"])
    assert str(caught.value) == (
        'tpu-rl:publish.repo = "acme/gemma4-grpo" is invalid: needs tpu-rl:workflow.verifyExport true: only an '
        "export compared with the base model is published"
    )


@pytest.mark.pure
def test_the_publish_script_is_strict_mode_the_folder_then_the_program_from_its_configmap():
    import shlex

    from workloads.specs.commands import PUBLISHED, mark_folder, publish_script

    script = publish_script("gs://b/m/export/abc/", "gs://b/m/publish/def/")
    marked = mark_folder("gs://b/m/publish/def/", ("gs://b/m/export/abc/",))
    head = f"set -euo pipefail\n{marked}\n"
    assert script.startswith(head) and script.endswith("\n")
    folder = ["python3", "/tpu-rl/mark_folder.py", "gs://b/m/publish/def/", "gs://b/m/export/abc/"]
    assert shlex.split(marked) == folder, "the folder once the account may read the export and write it"
    last = script[len(head) : -1]
    assert shlex.split(last) == [
        "exec",
        "python3",
        "/tpu-rl/publish_hub.py",
        "gs://b/m/export/abc/",
        CARD_DIR,
        PUBLISH_WORK,
        "gs://b/m/publish/def/" + PUBLISHED,
    ]


@pytest.mark.pure
def test_the_publish_steps_scratch_holds_the_export():
    step = publish_step()
    pod = step.manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    scratch = next(v for v in pod["volumes"] if v["name"] == "scratch")
    request = scratch["emptyDir"]["sizeLimit"]
    assert request == f"{settings('prod', []).model.spec.weights_gib + 20}Gi"


@pytest.mark.pure
def test_the_card_config_map_holds_the_readme_and_the_curve():
    import base64

    from workloads.specs.card_config import REWARD_IMAGE, card_config_map, card_metadata

    s = settings("prod", PUBLISHING)
    step = plan_workflow(s).publish
    assert step is not None
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
    cm = card_config_map(card_metadata(s, f"{step.name}-card", step.step_id), "# card\n", png)
    assert cm["apiVersion"] == "v1" and cm["kind"] == "ConfigMap"
    assert cm["metadata"] == {
        "name": f"{step.name}-card",
        "namespace": "tpu-rl",
        "labels": {
            "app.kubernetes.io/name": "tpu-rl",
            "app.kubernetes.io/instance": "tpu-rl-prod",
            "app.kubernetes.io/component": "publish",
            "tpu-rl/step-id": step.step_id,
        },
    }
    assert cm["data"] == {"README.md": "# card\n"}
    assert cm["binaryData"] == {REWARD_IMAGE: base64.b64encode(png).decode()} and REWARD_IMAGE == "reward-curve.png"
    assert "binaryData" not in card_config_map(card_metadata(s, "c", step.step_id), "# card\n", None), "no curve"


@pytest.mark.parametrize("name", ["../../escaped.safetensors", "/abs.json", "sub/config.json", "notes\n.json"])
@pytest.mark.slow
def test_an_export_object_that_is_not_a_model_file_stops_the_upload_and_nothing_is_written_outside(
    gcs_folders, tmp_path, name
):
    """Names come from the GCS listing; a path built from one stays in the model folder or the step
    stops (exit 3) before anything is downloaded there or uploaded."""
    step = publish_step()
    lay_out(gcs_folders, step, tmp_path / "card")
    bucket, _, prefix = step.input_uri.removeprefix("gs://").partition("/")
    gcs_folders.bucket(bucket).blob(prefix + name).upload_from_string(b"{}")
    hub = WritableHub.fresh()
    with serve(hub) as url:
        done = run_publish(step, gcs_folders, url, tmp_path)
    assert done.returncode == 3, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("tpu-rl publish:")]
    assert len(lines) == 1 and "the export holds an object that is not a file of a model folder" in lines[0]
    assert not list(tmp_path.rglob("escaped.safetensors")) and not list(tmp_path.rglob("abs.json"))
    assert not [r for r in hub.requests if r.startswith("PUT ") or "/commit/" in r], "nothing uploaded"


RECORD = {
    "title": "Held-out questions",
    "summary": "4 of 5 correct",
    "columns": ["question", "expected", "answer", "correct"],
    "rows": [["Janet's ducks lay 16 eggs per day ...", "18", "18", "yes"]],
}


@pytest.mark.slow
def test_up_with_the_evaluation_puts_its_record_in_the_outputs_and_the_card_and_retries_a_missing_one(
    stack, monkeypatch, tmp_path
):
    """The evaluation (a catalogue entry, a builder and a program, nothing else) goes the generic way: created
    after the verified export with its own account, checked, summarised in ``steps``, and the publication's card
    waits for it and shows its record; a completed evaluation without its record is run again by the next `up`.
    The card names the dataset's commit, read from the training run's record, as do the stack's outputs."""
    from tests.engine import DATASET_COMMIT

    hub = WritableHub.fresh()
    with serve(hub) as url:
        publishing_up(stack, monkeypatch, tmp_path, url, hub)
        stack.overrides = [*stack.overrides, "tpu-rl:workflow.steps.evaluate=true"]
        stack.record = b"{}"  # a completed evaluation that left no record
        failed = stack.up()
        evaluate = stack.steps()["evaluate"]
        error = str(failed.error)
        assert f"the step finished but its record {evaluate.artifact_uri} is missing or is not a step record" in error
        assert f"the next `make up STACK={stack.name}` runs {evaluate.name} again" in error
        assert stack.steps().publish.name not in failed.actions, "the publication waits for the evaluation"

        stack.record = json.dumps(RECORD).encode()
        done = stack.up()
        assert done.error is None, done.error
        assert done.plan.outputs["steps"]["evaluate"]["summary"] == "4 of 5 correct"
        names = [r["name"] for r in done.plan.resources]
        assert {"evaluate-sa", "evaluate-ksa"} <= set(names)
        card = next(r for r in done.plan.resources if r["name"] == f"{stack.steps().publish.name}-card")
        readme = card["inputs"]["data"]["README.md"]
        assert "## Held\\-out questions\n\n4 of 5 correct\n" in readme, "plain text: every punctuation escaped"
        tree = f"https://huggingface.co/datasets/nvidia/OpenMathInstruct-2/tree/{DATASET_COMMIT}"
        assert f"- commit: [{DATASET_COMMIT}]({tree})\n" in readme, "the dataset's commit, from the run's record"
        assert done.plan.outputs["steps"]["train"]["datasetCommit"] == DATASET_COMMIT
        assert r"| Janet\'s ducks lay 16 eggs per day \.\.\. | 18 | 18 | yes |" in readme
