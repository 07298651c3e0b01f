"""`pulumi destroy` in the engine model (``tests.engine``): its order, what ``protect`` and ``deletedWith`` do
with and without a preview, and a walk up -> steps done -> destroy that lists every billable object created
against what was deleted. Engine functions are cited as ``sg.go`` (``step_generator.go``), ``step.go`` and
``deployment_executor.go`` (revisions in ``tests/engine.py``)."""

from __future__ import annotations

import copy
import os

import pytest

from infra.k8s.manifests import RELEASES_IN_STATE, helm_release_problem
from tests.engine import BILLED, CLUSTER, HELM_RELEASE, STEP_TYPES
from tests.lifecycle_walk import settings
from tests.scenario import STEPS, before_up, names, releases_env, serve_helm
from tools.stack_files import ROOT
from workloads.specs import step_manifests as manifests

# The whole module is the slow tier (`make test-slow`, in CI; docs/testing.md "Timings"): each test runs the
# program or a step for real against loopback servers, seconds apiece. The fast tier keeps the same boundaries
# in pure form (the builders' and readers' own tests).
pytestmark = pytest.mark.slow

GUARD = "tpu-rl:lifecycle:DestroyGuard"
UNPROTECTED = ["tpu-rl:protect=false"]
HAND_DELETIONS = {
    "bucket storage": "tpu-rl:forceDestroy false keeps a bucket that holds objects",
}
"""What a destroy of the prod example (unprotected first) leaves billed, and why: the hand-deletion list of
docs/destroy.md "Destroy". The stack's Cloud KMS key (gke.secretsEncryptionKey: create) is deleted with
deletion_policy DELETE: its versions are scheduled for destruction and stop billing."""
KMS_KEY = "gcp:kms/cryptoKey:CryptoKey"


@pytest.fixture
def stack(stack, monkeypatch):
    """The scenario stack (``tests/conftest.py``) whose Helm storage the loopback cluster serves, so the program's
    check of each release before its install or upgrade reads what the model's Helm did."""
    return serve_helm(stack, monkeypatch)


@pytest.fixture
def dev(stack):
    stack.stack_file = ROOT / "Pulumi.dev.yaml"
    return stack


def test_walk_up_steps_done_destroy_leaves_nothing_billed(dev):
    """dev (forceDestroy, no KMS key): everything billed that the stack caused to exist is gone after destroy.
    The CPU steps' scratch is an emptyDir, so no disk ever exists; the cluster's deletion removes emptyDir data
    (``gcloud container clusters delete``: "Data stored in host hostPath and emptyDir volumes")."""
    first = dev.up()
    assert first.error is None, first.error
    assert [w.split(":")[0] for w in dev.written] == list(STEPS)
    created = {key.rsplit("::", 1)[-1]: why for key, why in dev.cloud.ever.items()}
    pools = BILLED["gcp:container/nodePool:NodePool"]
    assert created == {
        "cluster": BILLED[CLUSTER],
        "system-pool": pools,
        "cpu-pool": pools,
        "tpu-pool-0": pools,
        "nat": BILLED["gcp:compute/routerNat:RouterNat"],
        "bucket": BILLED["gcp:storage/bucket:Bucket"],
    }, "every billable object the stack caused to exist: no step claims a disk, no Service makes a load balancer"

    destroyed = dev.destroy()
    assert destroyed.errors == [], destroyed.errors
    assert dev.state == {}
    left = dev.cloud.now(dev._live_objects())
    assert left == {}, f"created {sorted(created)}, left {left}"


def test_with_a_claimed_scratch_the_walk_finds_the_disks_destroy_leaves(dev, monkeypatch):
    """The same walk with the scratch as it was (a generic ephemeral volume): each CPU step's disk lives as
    long as its Pod object, which a finished Job keeps, and destroy deletes no Kubernetes object (deletedWith
    the cluster), so the disks are left to the cluster's deletion, which does not guarantee them."""

    def claimed(scratch_gib: int) -> dict:
        claim = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": f"{scratch_gib}Gi"}}}
        return {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": claim}}}

    monkeypatch.setattr(manifests, "scratch_volume", claimed)
    assert dev.up().error is None
    disks = sorted(key for key in dev.cloud.ever if key.startswith("disk"))
    assert [d.split("/")[-2].rsplit("-", 1)[0].split("-")[-1] for d in disks] == ["convert", "export"]
    dev.destroy()
    assert sorted(dev.cloud.now(dev._live_objects())) == disks, "left by the cluster's deletion"


def test_destroy_of_the_prod_example_in_order_leaves_only_what_the_readme_says_to_delete_by_hand(stack):
    """prod, unprotected first: destroy's order, then what is left. The bucket holds the run's outputs and
    forceDestroy is false, so its delete fails, and the engine cancels the deletes not yet started (step_executor.go
    cancelDueToError): what it depends on (the APIs) and what comes in a later antichain stay, none of which bills;
    the Cloud KMS key is deleted before (deletion_policy DELETE: google-beta resource_kms_crypto_key.go
    resourceKMSCryptoKeyDelete schedules every version for destruction), so none of its versions bills after
    destroy."""
    assert stack.up(overrides=UNPROTECTED).error is None
    key = stack.urn(KMS_KEY, "secrets-key")
    assert stack.state[key].inputs["deletionPolicy"] == "DELETE"
    assert stack.cloud.ever[key] == BILLED[KMS_KEY] == "Cloud KMS key versions", "listed among what bills"
    # sg.go ScheduleDeletes with dependency_graph.go DependenciesOf (dependencies, property dependencies,
    # deletedWith, the provider, the parent): each resource is deleted after every resource that depends on it.
    order = {urn: i for i, chain in enumerate(stack.schedule(list(stack.state))) for urn in chain}
    for urn, rec in stack.state.items():
        assert all(order[dep] > order[urn] for dep in rec.depends_on() & set(order)), urn
    cluster = next(u for u, r in stack.state.items() if r.type == CLUSTER)
    steps = [u for u, r in stack.state.items() if r.type in STEP_TYPES]
    assert all(order[s] < order[cluster] and stack.state[s].deleted_with == cluster for s in steps)

    destroyed = stack.destroy()
    assert destroyed.errors == [
        f"Error trying to delete bucket {stack.steps().export.output_uri.split('/')[2]} containing objects without "
        "`force_destroy` set to true"
    ]
    left = stack.cloud.now(stack._live_objects())
    assert sorted(left.values()) == sorted(HAND_DELETIONS)
    assert destroyed.outcomes[key] == "deleted" and key not in left, "no key version bills after destroy"
    kept = {r.type for r in stack.state.values() if r.custom}
    assert kept == {
        "gcp:storage/bucket:Bucket",
        "gcp:projects/service:Service",
        "pulumi-python:dynamic/storage:BucketIdentity",
        "gcp:compute/network:Network",
        "gcp:serviceaccount/account:Account",
        "gcp:kms/keyRing:KeyRing",
        "gcp:projects/serviceIdentity:ServiceIdentity",
    }, "the bucket and what it needs (the APIs, its identity check), and the deletes the failure cancelled"


def test_a_protected_stacks_destroy_loses_nothing_with_or_without_a_preview(stack):
    """With a preview (the default): step.go DeleteStep.Apply checks protect before its dry-run branch, so the
    preview refuses and apply.go PreviewThenPromptThenExecute returns before anything is deleted.

    Without one (--skip-preview) the deletes run. Nothing depends on a guard (one on the platform, one per step
    object: program/stack.py) and together they depend on every resource. sg.go ScheduleDeletes takes, round by
    round, the condemned resources with no condemned dependencies, then reverses the rounds: a resource's antichain
    comes after those of everything that depends on it, so each guard's delete comes before the delete of anything
    it guards (the first antichain is the guard of the deepest step alone, not every guard: a guard of a shallower
    part sits in a later one). Each guard's delete is refused (deleteProtectedError, which step_executor.go
    cancelDueToError records and continues past: one error per guard) and deployment_executor.go performPostSteps
    leaves every transitive dependency of a refused one, every other resource, out of the later antichains: no
    provider is called and nothing is dropped (deletedWith would drop an object: step.go isDeletedWith looks at the
    *planned* deletes).

    Why the guards exist: a state without them (a stack last updated before they were) loses every Kubernetes object,
    the Helm releases included, while they still run, and the unprotected resources around the protected ones (the
    NAT) are deleted before their refusals are reached."""
    assert stack.up().error is None
    before = copy.deepcopy(stack.state)
    billed = dict(stack.cloud.now(stack._live_objects()))
    guards = [u for u, r in before.items() if r.type == GUARD]
    assert sorted(g.rsplit("::", 1)[-1] for g in guards) == [
        "tpu-rl-protect",
        "tpu-rl-protect-release-jobset",
        "tpu-rl-protect-release-kueue",
        *(f"tpu-rl-protect-scripts-{i}" for i in range(1, 6)),
        *(f"tpu-rl-protect-step-{i}" for i in range(1, 6)),
    ]
    schedule = stack.schedule(list(before))
    round_of = {urn: i for i, chain in enumerate(schedule) for urn in chain}
    assert [stack.state[u].type for u in schedule[0]] == [GUARD], "the first round of deletes is a guard's"
    for guard in guards:
        assert all(round_of[guard] < round_of[dep] for dep in stack.dependencies_of(guard)), guard
    covered = set().union(*(stack.dependencies_of(g) for g in guards))
    assert covered == set(before) - set(guards), "every other resource is behind a guard"
    refusals = sorted(f"resource {g!r} cannot be deleted\nbecause it is protected" for g in guards)

    previewed = stack.destroy()
    assert sorted(previewed.errors) == refusals, "one refusal per guard"
    assert stack.state == before and previewed.calls == []

    skipped = stack.destroy(skip_preview=True)
    assert sorted(skipped.errors) == refusals
    assert {skipped.outcomes[g] for g in guards} == {"refused"}
    assert set(skipped.outcomes.values()) == {"refused", "skipped"} and skipped.calls == []
    assert stack.state == before, "nothing left the state"
    assert stack.cloud.now(stack._live_objects()) == billed
    assert all(stack.cluster.get("JobSet", "tpu-rl", n) for n in names(stack).values())

    for guard in guards:  # a state without the guards
        del stack.state[guard]
    unguarded = stack.destroy(skip_preview=True)
    outcome = {u.rsplit("::", 1)[-1]: what for u, what in unguarded.outcomes.items()}
    assert all(outcome[n] == "dropped" for n in ("jobset", "kueue", "namespace", *names(stack).values()))
    assert all(stack.cluster.get("JobSet", "tpu-rl", n) for n in names(stack).values()), "they still run"
    assert outcome["tpu-pool-0"] == "refused" and outcome["nat"] == "deleted"


def test_a_protected_resource_removed_from_the_program_is_refused_and_kept_without_a_preview(stack):
    """`up --skip-preview` after a change that removes a protected resource (a second slice's pool): its delete
    at the end of the `up` is refused and it stays in the state; the resources removed with it that depend on
    it (the old training run) are deleted for real; nothing is dropped."""
    two = [
        "tpu-rl:tpu.slices=2",
        "tpu-rl:training.iciExpertParallelism=1",
        "tpu-rl:training.rolloutTensorParallelism=32",
    ]
    assert stack.up(overrides=two).error is None
    old_train = names(stack, two)["train"]
    pool = next(u for u, r in stack.state.items() if r.name == "tpu-pool-1")
    one = stack.up()
    assert str(one.error) == f"resource {pool!r} cannot be deleted\nbecause it is protected"
    assert pool in stack.state and one.resources[pool] == "refused"
    assert one.actions[old_train] == "delete" and stack.cluster.get("JobSet", "tpu-rl", old_train) is None
    assert "dropped" not in one.resources.values()


def test_destroy_never_waits_or_fails_on_run_state(dev):
    """The program does not run (destroy.go Destroy: a null source): a failed training and a running export
    change nothing; the Jobs are deleted with the cluster."""
    assert "failed" in str(dev.up({"train": "fail"}).error)
    destroyed = dev.destroy()
    assert destroyed.errors == [] and dev.state == {} and dev.clock == 0
    assert dev.cloud.now(dev._live_objects()) == {}


# -- every destroy path, then `up` again ---------------------------------------------------------------------------
# Engine: pulumi v3.259.0 step.go DeleteStep.Apply (isDeletedWith), sg.go ScheduleDeletes, deployment_executor.go
# performPostSteps, journal.go (pending creates). Provider: pulumi-kubernetes v4.32.0 helm_release.go helmCreate /
# helmUpdate / Delete, through helm v3.20.2 pkg/action install.go availableName and upgrade.go errPending.


def test_after_a_destroy_without_preview_of_an_unprotected_stack_up_creates_it_again(dev):
    """--skip-preview on dev: the Kubernetes objects are dropped (deletedWith the cluster, whose delete is planned)
    and the cluster's delete takes them and Helm's storage with it: the next `up` installs the charts afresh."""
    assert dev.up().error is None
    destroyed = dev.destroy(skip_preview=True)
    assert destroyed.errors == [] and dev.state == {} and dev.helm == {}
    again = dev.up()
    assert again.error is None, again.error
    assert set(dev.helm.values()) == {(1, "deployed")}


def test_a_destroy_whose_cluster_delete_fails_stops_the_next_make_up_with_the_one_command_until_it_is_finished(
    dev, monkeypatch
):
    """The cluster's delete fails (here GKE's deletion protection; a GKE error or a runner killed during the
    10-minute delete is the same): every object deletedWith the cluster was already dropped from the state
    (isDeletedWith looks at the planned deletes) while the cluster, and Helm's releases in it, stay `deployed`. The
    next `up` would create the releases again and Helm would refuse the install: "cannot re-use a name that is still
    in use" (install.go availableName; helm_release.go helmCreate leaves ``replace`` false).

    What the state holds is the engine's to know, so `make up` reads it first (``tools.state releases``: `pulumi
    stack export`). The state holds the cluster but not the releases, so it reads Helm's storage in that cluster
    (the kubeconfig the cluster's outputs make) and stops before `pulumi up` with one line naming the one command:
    finish the destroy once its cause is fixed (the second destroy deletes the cluster with the releases), after
    which `make up` installs them afresh. Before `pulumi up`, because the engine would start creating again what the
    destroy deleted (the node pools, the TPU slice's included) before the program reads the cluster. The program
    checks again (``KubernetesPlatform._helm_free``, with the releases `make up` hands it) when that read could not
    be made. (``helm uninstall`` would clear the name too, but deletes Kueue's CRDs and every queued Workload with
    its chart; ``pulumi refresh`` reads only what the state holds; the program cannot import the release:
    ``import_`` is a plain string of the options, fixed before the kubeconfig, an Output, resolves.)"""
    assert before_up(dev, monkeypatch) is None, "a new stack: no state, no cluster to read"
    assert os.environ[RELEASES_IN_STATE] == ""
    assert dev.up().error is None
    read = len(dev.cluster.requests)
    assert before_up(dev, monkeypatch) is None and os.environ[RELEASES_IN_STATE] == "jobset,kueue"
    assert len(dev.cluster.requests) == read, "the state holds both releases: the cluster is not read"
    cluster = dev.urn(CLUSTER, "cluster")
    dev.state[cluster].inputs["deletionProtection"] = True
    destroyed = dev.destroy(skip_preview=True)
    outcome = {u.rsplit("::", 1)[-1]: what for u, what in destroyed.outcomes.items()}
    assert outcome["cluster"] == "failed" and outcome["jobset"] == outcome["kueue"] == "dropped"
    assert outcome["tpu-pool-0"] == "deleted", "the TPU slice's pool went before the cluster's delete failed"
    stranded = {("jobset-system", "jobset"): (1, "deployed"), ("kueue-system", "kueue"): (1, "deployed")}
    assert dev.helm == stranded

    monkeypatch.delenv(RELEASES_IN_STATE)
    state, read = copy.deepcopy(dev.state), len(dev.cluster.requests)
    line = helm_release_problem(
        "jobset",
        "jobset-system",
        (1, "deployed"),
        in_state=frozenset(),
        stack="dev",
        context=settings(dev.name, dev.overrides).kube_context,
    )
    assert line is not None and "\n" not in line and line.endswith(": make destroy STACK=dev")
    assert before_up(dev, monkeypatch) == line, "make up stops before `pulumi up`"
    assert RELEASES_IN_STATE not in os.environ
    reads = dev.cluster.requests[read:]
    assert reads and all(path.startswith("/api/v1/namespaces/jobset-system/secrets?") for path in reads), reads
    assert dev.state == state and dev.helm == stranded, "nothing touched"

    # The program's own check, when `make up` could not read the cluster: the same line, before any Helm call, but
    # only once the engine has created the node pools again (the TPU slice's included).
    assert releases_env(dev, monkeypatch) == ""
    assert dev.preview().error is None, "a preview does not read Helm's storage: the check is `up`'s"
    stuck = dev.up()
    assert str(stuck.error) == line
    assert not [call for call in stuck.calls if call[1].endswith(("::jobset", "::kueue"))], "no Helm call"
    assert stuck.actions == {} and dev.helm == stranded, "no step is touched, Helm's storage as it was"
    assert ("Create", dev.urn("gcp:container/nodePool:NodePool", "tpu-pool-0")) in stuck.calls
    monkeypatch.delenv(RELEASES_IN_STATE)  # `pulumi up` by hand: the state is unknown, Helm's own refusal
    assert str(dev.up().error) == "cannot re-use a name that is still in use"

    dev.state[cluster].inputs["deletionProtection"] = False  # the cause fixed (GKE: deletion_protection false)
    finished = dev.destroy(skip_preview=True)  # make destroy STACK=dev
    assert finished.errors == [] and dev.state == {} and dev.helm == {}
    assert before_up(dev, monkeypatch) is None and os.environ[RELEASES_IN_STATE] == ""
    again = dev.up()
    assert again.error is None, again.error
    assert set(dev.helm.values()) == {(1, "deployed")}


def test_make_up_after_an_up_that_failed_between_the_cluster_and_the_releases_reads_the_cluster_and_goes_on(
    dev, monkeypatch
):
    """The state holds the cluster and no release, and Helm's storage holds none either (the `up` that created the
    cluster failed before the releases' installs): `make up` reads the cluster, finds nothing, and `up` installs
    them."""
    assert dev.up().error is None
    for urn in [u for u, r in dev.state.items() if r.type == HELM_RELEASE]:
        del dev.state[urn]
    dev.helm.clear()
    read = len(dev.cluster.requests)
    assert before_up(dev, monkeypatch) is None and os.environ[RELEASES_IN_STATE] == ""
    assert len(dev.cluster.requests) == read + 2, "jobset's and kueue's revisions read"
    again = dev.up()
    assert again.error is None, again.error
    assert set(dev.helm.values()) == {(1, "deployed")}


@pytest.mark.parametrize(("release", "namespace"), [("jobset", "jobset-system"), ("kueue", "kueue-system")])
def test_a_runner_killed_during_a_helm_install_stops_up_with_the_one_command_then_up_succeeds(
    dev, release, namespace, monkeypatch
):
    """The create was in flight: a pending create, not a resource (journal.go), so the next `up` would install again
    and Helm would refuse the name its pending-install revision holds. The program reads Helm's storage before the
    release's install (``KubernetesPlatform._helm_free``) and stops with infra.k8s.manifests.helm_release_problem's
    line, naming the one command (helm uninstall: a killed first install has nothing to go back to), before any
    Helm call; after the command, `up` succeeds. As `make up` runs it: the pending create counts as held by the state
    (``tools.state_export.releases_in_state``), and the pending status names its own command either way."""
    assert before_up(dev, monkeypatch) is None
    dev.kill_helm_install = release
    killed = dev.up()
    assert f"killed while installing {release}" in str(killed.error)
    dev.kill_helm_install = ""
    assert dev.helm[(namespace, release)] == (1, "pending-install")
    urn = next(u for u in dev.pending_creates if u.endswith(f"::{release}"))
    assert urn not in dev.state
    assert before_up(dev, monkeypatch) is None, "a pending create counts as held: the program names the command"
    assert release in os.environ[RELEASES_IN_STATE].split(",")

    stuck = dev.up()
    context = settings(dev.name, dev.overrides).kube_context
    line = helm_release_problem(release, namespace, (1, "pending-install"), stack=dev.name, context=context)
    assert str(stuck.error) == line and line.endswith(
        f"helm --kube-context {context} uninstall {release} -n {namespace}"
    )
    assert ("Create", urn) not in stuck.calls and dev.helm[(namespace, release)] == (1, "pending-install")
    assert stuck.actions == {}, "no step is touched"

    del dev.helm[(namespace, release)]  # helm uninstall <release> -n <namespace>
    assert before_up(dev, monkeypatch) is None
    again = dev.up()
    assert again.error is None, again.error
    assert dev.helm[(namespace, release)] == (1, "deployed")
    assert {dev.state[u].name for u in dev.state if dev.state[u].type == HELM_RELEASE} == {"jobset", "kueue"}


def test_a_killed_upgrade_stops_up_with_the_rollback_before_helm_refuses_it(dev):
    """A runner killed while Helm upgraded a release leaves its newest revision pending-upgrade, and the state the
    inputs before the upgrade (the update was in flight), so the next `up` upgrades again and Helm would refuse it
    ("another operation (install/upgrade/rollback) is in progress": upgrade.go errPending, which names no fix). The
    program stops before the upgrade with the rollback; after it, the upgrade goes through."""
    assert dev.up().error is None
    release = dev.urn(HELM_RELEASE, "kueue")
    dev.state[release].inputs["timeout"] = 600  # the inputs of the version before this one: an upgrade is planned
    dev.helm[("kueue-system", "kueue")] = (2, "pending-upgrade")  # killed during that upgrade
    stuck = dev.up()
    context = settings(dev.name, dev.overrides).kube_context
    assert str(stuck.error) == helm_release_problem(
        "kueue", "kueue-system", (2, "pending-upgrade"), stack=dev.name, context=context
    )
    assert str(stuck.error).endswith(f": helm --kube-context {context} rollback kueue -n kueue-system")
    assert ("Update", release) not in stuck.calls
    dev.helm[("kueue-system", "kueue")] = (3, "deployed")  # helm rollback kueue -n kueue-system: revision 3
    again = dev.up()
    assert again.error is None, again.error
    assert ("Update", release) in again.calls and dev.helm[("kueue-system", "kueue")] == (4, "deployed")


TPU_POOL_FAILS = (
    "tpu-pool-0",
    "Error waiting for creating GKE NodePool: the reservation cannot hold the slice",
    ("tpu-rl-protect-release-kueue",),
)
"""The prod stack's TPU pool create fails once both Helm releases are installed and their guards registered (its
operation runs for minutes; ``tests.engine.Stack.fail_create``)."""


def _first_up_fails_at_the_tpu_pool(stack) -> None:
    stack.fail_create = TPU_POOL_FAILS
    first = stack.up()
    stack.fail_create = None
    assert f"creating {TPU_POOL_FAILS[0]}: {TPU_POOL_FAILS[1]}" in str(first.error)
    guards = {r.name for r in stack.state.values() if r.type == GUARD and r.dependencies}
    assert guards == {"tpu-rl-protect-release-jobset", "tpu-rl-protect-release-kueue"}, (
        "no platform guard (it depends on the pool), no step, no step guard on anything: only the releases' own"
    )
    assert {r.inputs["name"] for r in stack.state.values() if r.type == HELM_RELEASE} == {"jobset", "kueue"}
    assert not stack.steps_in_state()


def test_a_first_up_that_fails_at_the_tpu_pool_then_a_destroy_without_preview_then_make_up(stack, monkeypatch):
    """A protected stack whose first `up` fails inside the platform never registers the platform's guard. Each Helm
    release's own guard, registered once its create returned, is refused by ``pulumi destroy --skip-preview``
    (``step.go`` ``DeleteStep.Apply``: protect first) and keeps the release, and everything it depends on, out of the
    later antichains (``performPostSteps``): the releases stay in the state, Helm's storage is untouched, `make up`
    finds nothing stranded and the next `up` finishes the platform and runs the steps."""
    _first_up_fails_at_the_tpu_pool(stack)
    helm = dict(stack.helm)
    destroyed = stack.destroy(skip_preview=True)
    outcome = {u.rsplit("::", 1)[-1]: what for u, what in destroyed.outcomes.items()}
    assert outcome["tpu-rl-protect-release-jobset"] == outcome["tpu-rl-protect-release-kueue"] == "refused"
    assert outcome["jobset"] == outcome["kueue"] == outcome["cluster"] == "skipped", "kept in the state"
    assert {r.inputs["name"] for r in stack.state.values() if r.type == HELM_RELEASE} == {"jobset", "kueue"}
    assert (
        stack.helm == helm == {("jobset-system", "jobset"): (1, "deployed"), ("kueue-system", "kueue"): (1, "deployed")}
    )
    assert before_up(stack, monkeypatch) is None, "make up: nothing stranded"
    assert os.environ[RELEASES_IN_STATE] == "jobset,kueue"
    again = stack.up()
    assert again.error is None, again.error
    assert {r.name for r in stack.state.values() if r.type == GUARD} >= {"tpu-rl-protect", "tpu-rl-protect-step-1"}


def test_a_state_without_the_release_guards_strands_them_and_make_up_names_helm_uninstall(stack, monkeypatch):
    """The same, from a state an earlier version wrote (no guard of its own on a release): the destroy drops both
    releases (``deletedWith`` the cluster, whose delete is planned) while the protected cluster keeps them, so `make
    destroy` is refused and finishing the destroy is no way out. `make up` stops before `pulumi up` with the release's
    ``helm uninstall``; once run, `make up` goes on and installs it anew."""
    _first_up_fails_at_the_tpu_pool(stack)
    for urn in [u for u, r in stack.state.items() if r.type == GUARD]:
        del stack.state[urn]
    destroyed = stack.destroy(skip_preview=True)
    outcome = {u.rsplit("::", 1)[-1]: what for u, what in destroyed.outcomes.items()}
    assert outcome["jobset"] == outcome["kueue"] == "dropped" and outcome["cluster"] == "refused"
    line = before_up(stack, monkeypatch)
    context = settings(stack.name, stack.overrides).kube_context  # the stack's cluster, not the shell's current one
    assert line == (
        "Helm release jobset-system/jobset is deployed in the cluster (revision 1) but not in stack prod's state: a "
        "destroy dropped it from the state (it is deleted with the cluster) while the cluster, protected, stays, and "
        f"Helm refuses to install it again. Uninstall it, then `make up` again (it installs it anew): helm "
        f"--kube-context {context} uninstall jobset -n jobset-system"
    )
    del stack.helm[("jobset-system", "jobset")]  # helm --kube-context <context> uninstall jobset -n jobset-system
    line = before_up(stack, monkeypatch)
    assert line is not None and line.endswith(f": helm --kube-context {context} uninstall kueue -n kueue-system")
    del stack.helm[("kueue-system", "kueue")]
    assert before_up(stack, monkeypatch) is None
    again = stack.up()
    assert again.error is None, again.error
    assert set(stack.helm.values()) == {(1, "deployed")}
