"""`make rehearse STACK=<stack> [STEP=<step>]`: every step of the stack's plan rehearsed on this machine, on CPU,
with the libraries its image has, before any TPU is billed (docs/first-run.md "Rehearse first").

    python -m tools.rehearse --stack NAME [--step STEP] [--python312 PYTHON]

For each step the offline plan renders (``tools.plan``, the stack's own configuration), in order, it runs what the
step's container runs up to its first accelerator call (``tools.rehearse.run``): the step's ConfigMap and script as
rendered, MaxText's own code at the adopted release, the image's package set (``tools.rehearse.venv``), against a
Cloud Storage emulator that holds what the steps before it wrote and a loopback Hub serving a small model of the
base's structure and small datasets of the real schemas (``tools.rehearse.cloud``, ``inside/assets.py``). Prints one
line per step (what ran, in seconds, what was not and why); exit 0 when every step passed, 1 with the failing step's
line (its log names the rest), 2 for bad input (an unknown stack or step, a stack file the program refuses).

What it does not show: anything on the slice (Pathways, the TPU, vLLM's rollouts, the training steps themselves),
the cluster's scheduling, and the real model's size (the small model has the base's structure, not its weights).
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from core.errors import BadInputError, UnavailableError
from core.knobs import DATASETS
from core.names import HF_SECRET, HF_WRITE_SECRET
from core.settings import Settings
from core.steps import STEPS, StepName
from tools.notices import hide_python_version_notice
from tools.rehearse import run, sandbox, venv
from tools.rehearse.cloud import Cloud
from tools.rehearse.hub_repos import Hub, StandIns
from tools.stack_files import ROOT, load_stack
from workloads.container.checkpoint_scan import COMMIT_FILE
from workloads.specs.step_specs import plan_workflow

STAND_IN_SECRETS = {
    HF_SECRET: "hf_rehearsalSTANDinTOKEN000000000000",
    HF_WRITE_SECRET: "hf_rehearsalWRITEtoken0000000000000",
}
"""The Secrets' values the rehearsal's pods hold (the loopback Hub takes any token)."""
ASSET_SECONDS = 600


class RehearseInputError(BadInputError):
    """A step the plan does not hold (one line, exit 2)."""


class RehearsalFailedError(UnavailableError):
    """A step failed its rehearsal (its line, exit 1)."""


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tools.rehearse", description=__doc__.splitlines()[0])
    parser.add_argument("--stack", required=True)
    parser.add_argument(
        "--step", default="", help="rehearse this step alone, on the bucket as the last rehearsal left it"
    )
    parser.add_argument("--python312", default="", help="the Python 3.12 to make the venv with")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="override a key, as make plan's --set"
    )
    return parser.parse_args(argv)


def plan_pods(stack: str, overrides: list[str] | None = None) -> list[sandbox.StepPod]:
    """The steps' pods as the offline plan renders them for the stack file (and ``overrides``)."""
    from tools.plan.cli import plan_stack

    secrets = {"tpu-rl:hfToken": STAND_IN_SECRETS[HF_SECRET], "tpu-rl:hfWriteToken": STAND_IN_SECRETS[HF_WRITE_SECRET]}
    plan, _ = plan_stack(ROOT / f"Pulumi.{stack}.yaml", overrides or (), stack=stack, secrets=secrets)
    return sandbox.step_pods(plan.kubernetes_objects())


def assets(made: venv.Venv, model: str) -> Path:
    """The small model and datasets (``inside/assets.py``), made once per venv and version of the program."""
    program = run.INSIDE / "assets.py"
    stamp = (made.folder / "tpu-rl-rehearse.json").read_bytes() + program.read_bytes()
    folder = venv.BUILD / f"assets-{model}-{hashlib.sha256(stamp).hexdigest()[:12]}"
    if (folder / "small.json").exists():
        return folder
    work = folder.with_name(folder.name + ".partial")
    env = {"PYTHONPATH": str(made.package.parent), "JAX_PLATFORMS": "cpu", "HOME": str(venv.BUILD)}
    done = subprocess.run(
        [str(made.python), str(program), str(work), model],
        env=env,
        capture_output=True,
        text=True,
        timeout=ASSET_SECONDS,
        check=False,
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
        raise RehearsalFailedError(f"the rehearsal's small model could not be made ({last})")
    work.rename(folder)
    return folder


def settings_env(world: Cloud, made: venv.Venv, small: Path) -> dict[str, str]:
    """The rehearsal's settings over every container's environment (each named in the output)."""
    return {
        "JAX_PLATFORMS": "cpu",  # the container's proxy,cpu: the proxy is the slice
        "STORAGE_EMULATOR_HOST": world.gcs_url,  # google-cloud-storage and gcsfs
        "TENSORSTORE_GCS_HTTP_URL": world.gcs_url,  # orbax's arrays (tensorstore's gcs driver)
        "GOOGLE_AUTH_TOKEN_FOR_TESTING": "rehearsal-stand-in",  # tensorstore's credentials against the emulator
        "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false",  # gcsfs's bucket-type probe is a gRPC API the emulator has not
        "NO_GCE_CHECK": "True",
        "GOOGLE_CLOUD_PROJECT": "rehearse",
        "HF_ENDPOINT": world.hub_url,
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_HUB_DISABLE_XET": "1",
        "NO_PROXY": "127.0.0.1,localhost",
        **run.python_env(made.python, small),
    }


def stood_in(step: StepName) -> list[tuple[StepName, StepName]]:
    """The outputs a step reads that the rehearsal stands in for (the catalogue, ``core.steps.STEPS``): a step on the
    slice leaves checkpoints the rehearsal cannot make, so the MaxText checkpoint that step itself reads stands in
    for its last one. Pairs (the slice's step, the step whose output stands in)."""
    found = []
    for read in STEPS[step].reads:
        facts = STEPS[read]
        if facts.holds_tpu and facts.output == "checkpoints":
            found += [(read, source) for source in facts.reads if STEPS[source].output == "maxtext-checkpoint"]
    return found


def stand_in_checkpoint(world: Cloud, on_slice: Any, source: Any, training: Any) -> str:
    """What the slice's step leaves for the step after it, stood in: ``source``'s checkpoint as its last one."""
    target = f"{on_slice.artifact_uri}{training.final_step}/model_params/"
    copied = world.copy_folder(source.artifact_uri, target, marker=COMMIT_FILE)
    return (
        f"{STEPS[on_slice.step].noun}'s last checkpoint stood in by the {STEPS[source.step].noun}'s weights: {copied} "
        f"objects at {target}, committed (MaxText's Linen layout; tunix writes an NNX-RL one, which to_huggingface "
        "reads too)"
    )


def heads(hub: Hub) -> dict[tuple[str, str], str]:
    """Every branch of the Hub's repositories: (repository, branch) -> commit."""
    return {(repo.id, branch): oid for repo in hub.repos.values() for branch, oid in repo.branches.items()}


def written(hub: Hub, before: dict[tuple[str, str], str]) -> list[str]:
    """What a step wrote to the Hub: each branch made or moved since ``before``, with what it now holds."""
    lines = []
    for (repo_id, branch), oid in sorted(heads(hub).items()):
        if before.get((repo_id, branch)) == oid:
            continue
        repo = hub.repos[repo_id]
        tree = repo.commits[oid].tree
        in_lfs = sum(blob.lfs for blob in tree.values())
        size = sum(len(blob.data) for blob in tree.values()) / 1e6
        visibility = "private" if repo.private else "public"
        lines.append(
            f"the Hub's {repo_id} ({visibility}) @{branch} is commit {oid[:12]}: {len(tree)} files, {size:.1f} MB, "
            f"{in_lfs} in LFS ({', '.join(sorted(tree))})"
        )
    return lines


def describe(outcome: run.Outcome, wrote: Sequence[str] = ()) -> str:
    ran = ", ".join(dict.fromkeys(outcome.calls)) or "nothing"
    said = [s for s in outcome.said if not s.startswith(("failed: ", "not run: "))]
    closing = [f"it said: {outcome.closing}"] if outcome.closing and not said and outcome.code == 0 else []
    facts = "; ".join([*said, *closing, *wrote])
    skipped = "; ".join(s.removeprefix("not run: ") for s in outcome.said if s.startswith("not run: "))
    verdict = "passed" if outcome.code == 0 else f"FAILED (exit {outcome.code})"
    line = f"{outcome.step}: {verdict} in {outcome.seconds:.0f} s; ran {ran}"
    if facts:
        line += f"; {facts}"
    if skipped:
        line += f"; not run: {skipped}"
    return line


def main(argv: list[str] | None = None) -> int:
    hide_python_version_notice()  # the tool's own google-cloud-storage (the stand-in checkpoint's copy)
    args = parse(argv)
    settings = load_stack(args.stack, overrides=args.set)[0]
    pods = plan_pods(args.stack, args.set)
    names = [p.step for p in pods]
    if args.step and args.step not in names:
        raise RehearseInputError(f"stack {args.stack} has no step {args.step!r}: its steps are {', '.join(names)}")
    out = venv.BUILD / f"run-{args.stack}"
    if args.step:
        pods = [pods[names.index(args.step)]]
        if names.index(args.step) and not (out / "gcs").exists():
            raise RehearseInputError(
                f"step {args.step} reads what the steps before it wrote: run make rehearse STACK={args.stack} first"
            )
    else:
        shutil.rmtree(out / "gcs", ignore_errors=True)  # the bucket as a first `up` finds it
    print(rehearse(settings, pods, out, args.python312))
    return 0


def rehearse(settings: Settings, pods: list[sandbox.StepPod], out: Path, python312: str = "") -> str:
    """Rehearse ``pods`` in order, in ``out`` (its ``gcs/`` is the bucket as it is), printing a line per step; the
    closing line, or ``RehearsalFailedError`` with the failing step's."""
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    made = venv.ensure(python312, log=out / "venv.log")
    print(
        f"venv: {made.folder.relative_to(ROOT)} ({'made' if made.made else 'reused'} in "
        f"{time.monotonic() - started:.0f} s): "
        f"MaxText {venv.MAXTEXT_VERSION}'s post-training package list, with "
        + "; ".join(f"{name} ({why})" for name, why in venv.STOOD_IN.items())
        + "; the image's GitHub packages not installed: "
        + "; ".join(f"{name} ({why})" for name, why in venv.NOT_IN_LIST.items()),
        flush=True,
    )
    model = settings.model.spec
    folder = assets(made, model.maxtext_name)
    cloud = Cloud(out, StandIns(STAND_IN_SECRETS[HF_SECRET], STAND_IN_SECRETS[HF_WRITE_SECRET])).start()
    try:
        cloud.bucket(settings.bucket_name)
        cloud.serve("model", model.hf_repo, folder / "model")
        for dataset in DATASETS.values():
            repo = dict(dataset.keys)["dataset_name"]
            cloud.serve("dataset", repo, folder / "datasets" / repo.replace("/", "__"))
        env = settings_env(cloud, made, folder / "small.json")
        print(
            "rehearsal settings: "
            + " ".join(f"{k}={v}" for k, v in env.items() if not k.startswith("REHEARSE_") and k != "LANG"),
            flush=True,
        )
        steps = {step.step: step for step in plan_workflow(settings)}
        for pod in pods:
            for slice_step, source in stood_in(pod.step):
                print(stand_in_checkpoint(cloud, steps[slice_step], steps[source], settings.training), flush=True)
            environment = sandbox.environment(pod, STAND_IN_SECRETS, env)
            before = heads(cloud.hub)
            outcome = run.run_step(pod, out / pod.step, made.package, environment, out / f"{pod.step}.log")
            print(describe(outcome, written(cloud.hub, before)), flush=True)
            if outcome.code != 0:
                raise RehearsalFailedError(
                    f"stack {settings.stack}'s step {outcome.step} failed its rehearsal: {outcome.last[:400]} "
                    f"(its log: {outcome.log})"
                )
    finally:
        cloud.stop()
    hub = f"the Hub sent {cloud.hub.sent / 1e6:.1f} MB in {len(cloud.hub.requests)} requests"
    return (
        f"rehearsal of stack {settings.stack}: {len(pods)} step(s) passed in {time.monotonic() - started:.0f} s; {hub}"
    )
