"""One stack's whole life, in order, each tool meeting the program's own objects: prod, protected, in a project of its
own, its stack file as its set-up leaves it (``tpu-rl:access`` declared: docs/audit.md "The stack's own list",
docs/guardrails.md one-time setup; ``tests/prod_set_up.py``).

1. the first `make up` (its access audit, of the CI set-up alone, finds nothing): the real program through the
   engine's model (``tests.engine``) against the loopback cluster and fake-gcs-server, the slice's eight nodes Ready,
   training writing its run while `up` waits for it; then `tpu-rl status` and `tpu-rl report` (their ``main``, as
   ``tools.tpu_rl`` runs them) on that run;
2. the access audit `make up` runs first for a protected stack (``tools.audit --before-up``), against the loopback
   IAM laid out from the first `up`'s own plan (``tests/plan_iam.py``) and the documented CI set-up, the cluster's
   RBAC the program's Role and RoleBinding beside GKE's defaults: nothing found; then the second `up`: nothing runs
   again;
3. a pull request's preview of a training knob, as the PR workflow judges it (the branch's stack file previewed
   against the stack's state, its digest judged by ``policy/judge_preview.py``): the pack passes it, and refuses the
   same preview with one hostile change of ``tests/preview_digest.py``'s corpus;
4. the deploy workflow's round 0 as CI runs it (``tests/deploy_rounds.py``): the round's check, the stack step on this
   checkout's stack file, and the `make up` line it runs for this stack;
5. a host maintenance GKE schedules on the slice: `tpu-rl maintenance` labels each node, `tpu-rl status` then shows
   it;
6. `make audit`: nothing outside the stack's own list;
7. `make destroy` after protection is lifted as docs/destroy.md "Destroy" says: the `up` that lifts it, the destroy
   that stops at the bucket holding the runs, their folders deleted, the destroy again: nothing billed is left, and
   `tpu-rl status` then says so in one line.

The clock is the walk's (``NOW``) wherever a tool reads it; the program's waits run on the engine's clock."""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from core.errors import BAD_INPUT
from core.tpu import Capacity
from policy import judge_preview
from tests.deploy_rounds import STEPS as DEPLOY_STEPS
from tests.deploy_rounds import check_round, github_answers, index, run_step, stack_step, up_env, with_check_tool, write
from tests.engine import BILLED, BUCKET, CLUSTER, Run, Stack
from tests.fake_iam import PolicedApis, gke_defaults, policed_apis, serve_rbac
from tests.fake_kube import T0, tpu_node
from tests.plan_iam import lay_out_plan
from tests.preview_digest import HOSTILE, digest, hostile, written
from tests.prod_set_up import AUDITED, AUDITED_BEFORE_UP, PROD, audit, checkout, prod_file, set_up_ci
from tests.run_files import upload_run
from tests.scenario import STEPS, before_up, names, serve_helm
from tools import maintenance as maintenance_cli
from tools import status as status_cli
from tools import tpu_rl
from workloads.observe import slice_maintenance
from workloads.observe.run_data import gather
from workloads.observe.slice_maintenance import PERFORM_LABEL, SCHEDULED_LABEL, SliceSize

pytestmark = pytest.mark.slow

NOW = datetime.datetime(2026, 12, 1, 8, 0, tzinfo=datetime.UTC)
"""The walk's clock: what the tools read as the time."""
SCHEDULED = NOW + datetime.timedelta(days=2, hours=3)
"""When GKE schedules the slice's host maintenance."""
KNOB = "learningRate: 3.0e-05"
"""The pull request's change: a training knob, as `pulumi config set --path` writes it under ``tpu-rl:training``."""
CASE = "a JobSet with an image from Docker Hub"
"""The hostile change the pack refuses (``tests/preview_digest.py`` ``HOSTILE``)."""


class _Now(datetime.datetime):
    """``datetime`` whose ``now`` is ``NOW`` (``tools.status`` reads the time through it)."""

    @classmethod
    def now(cls, tz: datetime.tzinfo | None = None) -> Any:
        return NOW.astimezone(tz) if tz is not None else NOW.replace(tzinfo=None)


@pytest.fixture
def prod(stack: Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Stack:
    """The scenario stack (``tests/conftest.py``) whose stack file is prod's in a checkout of its own, whose Helm
    storage and RBAC the loopback cluster serves, on the walk's clock."""
    stack.stack_file = checkout(tmp_path / "repo", prod=prod_file()) / "Pulumi.prod.yaml"
    serve_helm(stack, monkeypatch)
    serve_rbac(monkeypatch)
    monkeypatch.setattr(slice_maintenance, "clock", NOW.timestamp)
    monkeypatch.setattr(status_cli, "datetime", _Now)
    return stack


@pytest.fixture
def iam() -> Any:
    """Prod's project, and dev's beside it, as their set-up leaves them (``tests/prod_set_up.py``), on the loopback IAM
    of ``tests/fake_iam.py``."""
    with policed_apis(PROD) as fake:
        set_up_ci(fake)
        yield fake


@dataclass
class Life:
    """What the walk's stages share: the stack, its checkout's stack file, the kubeconfig of its cluster, the IAM."""

    prod: Stack
    iam: PolicedApis
    folder: Path
    capsys: pytest.CaptureFixture[str]
    monkeypatch: pytest.MonkeyPatch
    kubeconfig: Path = field(init=False)
    stack_file: Path = field(init=False)

    def __post_init__(self) -> None:
        self.stack_file = self.prod.stack_file
        self.kubeconfig = kubeconfig_file(self.prod, self.folder)

    def tool(self, *argv: str) -> tuple[int, list[str], list[str]]:
        """``tpu-rl <argv>`` of this stack's file and cluster, in process (``tools.tpu_rl.run``: the tool's ``main``):
        its code, its lines on stdout and stderr."""
        code = tpu_rl.run([*argv, "--config-file", str(self.stack_file), "--kubeconfig", str(self.kubeconfig)])
        out, err = self.capsys.readouterr()
        return code, out.splitlines(), err.splitlines()

    def audit(self, *, before_up: bool) -> tuple[int, list[str], list[str]]:
        """`make up`'s access audit (``before_up``) or `make audit`'s, of this stack, reading its cluster's RBAC."""
        return audit(self.iam, self.stack_file.parent, self.capsys, before_up=before_up, kubeconfig=self.kubeconfig)

    def make_up(self, outcomes: dict[str, str] | None = None) -> Run:
        """`make up STACK=prod`: its access audit (nothing found), ``tools.state releases`` (nothing stranded), then
        `pulumi up`, which must succeed."""
        said = [AUDITED_BEFORE_UP] if self.prod.loaded().protect else []  # an unprotected stack's is skipped
        assert self.audit(before_up=True) == (0, said, [])
        assert before_up(self.prod, self.monkeypatch) is None
        run = self.prod.up(outcomes)
        assert run.error is None, run.error
        return run


def slice_nodes(stack: Stack, labels: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """The reservation's slice as GKE registers its nodes (one per host, every one Ready), with ``labels``."""
    shape = stack.loaded().slice
    return [
        tpu_node(
            f"gke-tpu-rl-prod-tpu-np-{i}", T0, accelerator=shape.gke_accelerator, topology=shape.topology, labels=labels
        )
        for i in range(shape.hosts)
    ]


def kubeconfig_file(stack: Stack, folder: Path) -> Path:
    """The kubeconfig `gcloud container clusters get-credentials` leaves for the stack's cluster (its context)."""
    path = folder / "kubeconfig"
    path.write_text(yaml.safe_dump(stack.cluster.kubeconfig(context=stack.loaded().kube_context)))
    return path


def trains_while_up_waits(stack: Stack) -> None:
    """At the program's first pause while training runs, the trainer has written its run (TensorBoard events of every
    step to the final one, its logs, the final checkpoint) and the step completes."""
    train, final = stack.steps().train, stack.loaded().training.final_step

    def on_wait(s: Stack) -> None:
        upload_run(s.gcs, train.output_uri, steps=list(range(1, final + 1)), checkpoints=(final,))
        s.finish(train.name)
        s.on_wait = None

    stack.on_wait = on_wait


def lift(stack_file: Path) -> None:
    """``tpu-rl:protect`` and ``tpu-rl:workflow.enabled`` set to false in the stack file, as `tpu-rl pulumi --stack prod
    -- config set` sets them (docs/destroy.md "Destroy")."""
    text = stack_file.read_text()
    text = text.replace("  tpu-rl:protect: true", "  tpu-rl:protect: false")
    text = text.replace("  tpu-rl:workflow:\n    enabled: true\n", "  tpu-rl:workflow:\n    enabled: false\n")
    stack_file.write_text(text)
    config = yaml.safe_load(text)["config"]
    assert config["tpu-rl:protect"] is False and config["tpu-rl:workflow"]["enabled"] is False


def judge(capsys: pytest.CaptureFixture[str], document: Path, stack_file: Path) -> tuple[int, set[str]]:
    """The PR workflow's judge step (``policy/judge_preview.py`` of the base's pack on the preview's digest, with the
    branch's stack file): its exit code, and the policies of its mandatory findings (``Finding.line``'s)."""
    code = judge_preview.main(["prod", str(document), "--stack-file", str(stack_file)])
    lines = capsys.readouterr().out.splitlines()
    return code, {line.split(": ", 2)[1] for line in lines if line.startswith("mandatory: ")}


def rows(out: list[str]) -> dict[str, list[str]]:
    """The status table's rows by step, each split at its runs of two spaces (the columns)."""
    found = {}
    for line in out:
        cells = [c.strip() for c in line.split("  ") if c.strip()]
        if cells and cells[0] in (*STEPS, "STEP"):
            found[cells[0]] = cells
    return found


def size(stack: Stack) -> SliceSize:
    """The slice's size as `make status` judges it: every host of every slice, and whether its nodes are kept (a
    reservation's)."""
    settings = stack.loaded()
    return SliceSize(settings.slice.hosts * settings.tpu.slices, settings.tpu.capacity == Capacity.RESERVATION)


def test_a_protected_stack_from_its_first_up_to_its_destroy(prod, iam, tmp_path, capsys, monkeypatch):
    life = Life(prod, iam, tmp_path, capsys, monkeypatch)
    first = first_up(life)
    second_up(life, first)
    pull_request(life)
    deploy_round(life)
    maintenance(life)
    assert life.audit(before_up=False) == (0, [AUDITED], []), "make audit: nothing outside the stack's own list"
    destroy(life, first)


def first_up(life: Life) -> Run:
    """The first `make up`, then `tpu-rl status` and `tpu-rl report` on its run."""
    prod = life.prod
    settings, step_names, final = prod.loaded(), names(prod), prod.loaded().training.final_step
    prod.cluster.core[("nodes", "")] = slice_nodes(prod)
    trains_while_up_waits(prod)
    first = life.make_up({"train": "run"})
    assert first.actions == {step_names[s]: "create" for s in STEPS}
    assert [w.split(":")[0] for w in prod.written] == list(STEPS)

    code, out, err = life.tool("status")
    assert (code, err) == (0, [])
    table = rows(out)
    assert {step: cells[1:3] for step, cells in table.items() if step != "STEP"} == {
        step: [step_names[step], "succeeded"] for step in STEPS
    }
    plan = prod.steps()
    run = gather(prod.gcs, plan.train.output_uri)
    assert run.last_step == final
    assert table["train"][-1] == status_cli.training_detail(settings, run, False), "the step training reached"
    assert table["convert"][-1] == status_cli.DETAILS[plan.convert.output](prod.gcs, plan.convert)
    assert slice_maintenance.slice_line(slice_maintenance.slice_notices(slice_nodes(prod), "nodes"), size(prod)) in out

    report = life.folder / "report"
    code, _, err = life.tool("report", "--out", str(report))
    assert (code, err) == (0, [])
    assert sorted(p.name for p in report.iterdir() if not p.name.startswith(".")) == [
        "kl.png",
        "length.png",
        "loss.png",
        "report.html",
        "report.json",
        "reward.png",
    ]
    written_report = json.loads((report / "report.json").read_text())
    assert written_report["run"]["stack"] == "prod" and written_report["summary"]["lastStep"] == final
    assert {s: v["name"] for s, v in written_report["run"]["steps"].items()} == step_names
    return first


def second_up(life: Life, first: Run) -> None:
    """What the first `up` made, where the access audit reads it: every grant, account, Workload Identity member, key
    and bucket of its plan in the IAM, its RBAC objects in the cluster beside GKE's defaults. Then the second `make
    up`: nothing runs again."""
    prod = life.prod
    lay_out_plan(life.iam, first.plan)
    for kind in ("Role", "RoleBinding"):
        (resource,) = first.plan.find(f"kubernetes:rbac.authorization.k8s.io/v1:{kind}")
        prod.cluster.put(resource["inputs"])
    for obj in gke_defaults():
        prod.cluster.put(obj)
    second = life.make_up()
    assert second.actions == {name: "same" for name in names(prod).values()}
    assert len(prod.written) == len(STEPS), "no step ran again"


def pull_request(life: Life) -> None:
    """A pull request's change to the stack file, previewed (the branch's stack file, the stack's state) and judged as
    the PR workflow judges it: the program's change passes; the same preview with a hostile change does not."""
    prod = life.prod
    text = life.stack_file.read_text().replace("  tpu-rl:training:\n", f"  tpu-rl:training:\n    {KNOB}\n", 1)
    branch = checkout(life.folder / "branch", prod=text) / "Pulumi.prod.yaml"
    prod.stack_file = branch
    try:
        preview = prod.preview()
    finally:
        prod.stack_file = life.stack_file
    assert preview.error is None, preview.error
    changed = names(prod, ["tpu-rl:training.learningRate=3e-05"])
    assert changed["train"] != names(prod)["train"] and preview.actions[changed["train"]] == "create"
    assert set(preview.plan.urns.values()) <= set(preview.resources), "every resource's step the engine's"
    change, refused_by = HOSTILE[CASE]
    assert refused_by is not None
    verdicts = {}
    for case, judged in (("the change", preview.plan), ("hostile", hostile(preview.plan, change))):
        document = life.folder / f"digest-{case}.json"
        document.write_text(written(digest(judged, "same", ops=preview.resources)))
        verdicts[case] = judge(life.capsys, document, branch)
    assert verdicts["the change"] == (0, set())
    assert verdicts["hostile"][0] == 1 and refused_by <= verdicts["hostile"][1]


def deploy_round(life: Life) -> None:
    """Round 0 of the deploy workflow for prod, each step's bash as CI runs it: the round's check, the stack step in
    this checkout, and the `make up` it runs."""
    root, ci = life.stack_file.parent, life.folder / "ci"
    (ci / "bin").mkdir(parents=True)
    github_answers(ci)
    done, output = check_round(ci, STACK="prod")
    assert done.returncode == 0, done.stderr
    assert dict(line.split("=", 1) for line in output.splitlines()) == {"round": "0", "approved-attempt": "1"}
    assert stack_step(ci, with_check_tool(root), "prod").returncode == 0, "the stack file records its home"
    write(ci / "bin", "make", '#!/bin/bash\necho "$* ${PULUMI_BACKEND_URL-unset}" > "$CALLS"\n')
    up_step = DEPLOY_STEPS[index("make up STACK")]["run"]
    done = run_step(ci, up_step, up_env(ci, UP_MINUTES="5", PULUMI_BACKEND_URL="gs://elsewhere"), cwd=root)
    assert done.returncode == 0, done.stderr
    assert (ci / "calls").read_text() == "up STACK=prod YES=1 unset\n", "this stack's up, its home the file's"
    assert (ci / "output").read_text() == "", "an up that ended asks for no other round"


def maintenance(life: Life) -> None:
    """GKE schedules a host maintenance on the slice; `make maintenance` starts it now (each node labelled), and `make
    status` shows it."""
    prod = life.prod
    scheduled = {SCHEDULED_LABEL: str(int(SCHEDULED.timestamp()))}
    prod.cluster.core[("nodes", "")] = slice_nodes(prod, scheduled)
    code, out, err = life.tool("maintenance")
    assert (code, err) == (0, [])
    nodes = slice_maintenance.slice_notices(slice_nodes(prod, scheduled), "nodes").nodes
    assert out[1 : 1 + len(nodes)] == [maintenance_cli.node_line(node, NOW) for node in nodes]
    assert out[-2:] == maintenance_cli.follow(prod.loaded(), scheduled=True)
    labels = {
        n["metadata"]["name"]: n["metadata"]["labels"].get(PERFORM_LABEL) for n in prod.cluster.core[("nodes", "")]
    }
    assert labels == {node.name: "true" for node in nodes}, "each of the slice's nodes labelled"

    code, out, err = life.tool("status")
    assert (code, err) == (0, [])
    requested = slice_maintenance.slice_notices(slice_nodes(prod, {**scheduled, PERFORM_LABEL: "true"}), "nodes")
    shown = [slice_maintenance.slice_line(requested, size(prod)), *slice_maintenance.status_lines(requested, NOW)]
    assert len(shown) == 3 and all(line in out for line in shown), "scheduled, and requested on every node"


def destroy(life: Life, first: Run) -> None:
    """docs/destroy.md "Destroy": a protected stack's destroy deletes nothing; protection lifted in the stack file and
    `make up` (every step's object deleted, nothing protected); `make destroy` stops at the bucket holding the runs;
    their folders deleted, `make destroy` again: nothing billed is left, and `tpu-rl status` says so in one line."""
    prod = life.prod
    step_names = names(prod)
    refused = prod.destroy()
    assert refused.errors and "deleted" not in refused.outcomes.values(), "a protected stack loses nothing"
    lift(life.stack_file)
    lifting = life.make_up()
    assert lifting.actions == {name: "delete" for name in step_names.values()}
    assert not any(r.protect for r in prod.state.values()), "every protection lifted"
    assert prod.state[prod.urn(CLUSTER, "cluster")].inputs["deletionProtection"] is False

    bucket = prod.urn(BUCKET, "bucket")
    stopped = prod.destroy()
    assert stopped.outcomes[bucket] == "failed" and len(stopped.errors) == 1, "the bucket holds the runs"
    assert list(prod.cloud.now(prod._live_objects()).values()) == [BILLED[BUCKET]]
    name = prod.state[bucket].inputs["name"]
    models = {blob.name.split("/", 1)[0] for blob in prod.gcs.list_blobs(name)}  # gcloud storage ls gs://<bucket>
    assert models == {prod.loaded().model.spec.name}, "one folder per model"
    for model in models:  # gcloud storage rm --recursive gs://<bucket>/<model>/
        for blob in prod.gcs.list_blobs(name, prefix=f"{model}/"):
            blob.delete()
    finished = prod.destroy()
    assert finished.errors == [] and prod.state == {}
    assert prod.cloud.now(prod._live_objects()) == {}, "nothing left that bills"
    assert sorted(prod.cloud.ever.values()) == sorted(
        BILLED[r["type"]] for r in first.plan.resources if r["type"] in BILLED
    ), "what billed while it lived: the billed resources its plan registers, no disk, no load balancer"

    code, out, err = life.tool("status")
    assert (code, out, len(err)) == (BAD_INPUT, [], 1), err
