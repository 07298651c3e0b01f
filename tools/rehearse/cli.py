"""`make rehearse STACK=<stack> [STEP=<step>]`: every step of the stack's plan rehearsed on this machine, on CPU,
with the libraries its image has, before any TPU is billed (docs/first-run.md "Rehearse first").

    python -m tools.rehearse --stack NAME [--step STEP] [--python312 PYTHON]

For each step the offline plan renders (``tools.plan``, the stack's own configuration), in order, it runs what the
step's container runs up to its first accelerator call (``tools.rehearse.run``): the step's ConfigMap and script as
rendered, MaxText's own code at the adopted release, the image's package set (``tools.rehearse.venv``), against a
Cloud Storage emulator that holds what the steps before it wrote and a loopback Hub serving a small model of the
base's structure and small datasets of the real schemas (``tools.rehearse.world``, ``inside/assets.py``). Prints one
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
from pathlib import Path
from typing import Any

from core.errors import BadInputError, UnavailableError
from core.knobs import DATASETS
from tools.rehearse import run, sandbox, venv
from tools.rehearse.world import World
from tools.stack_files import ROOT, load_stack
from workloads.container.checkpoint_scan import COMMIT_FILE
from workloads.specs.step_specs import plan_workflow

STAND_IN_TOKEN = "hf_rehearsalSTANDinTOKEN000000000000"
"""The Hugging Face token the rehearsal's pods hold (the loopback Hub takes any)."""
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
    return parser.parse_args(argv)


def plan_pods(stack: str) -> list[sandbox.StepPod]:
    from tools.plan.cli import plan_stack

    plan, _ = plan_stack(ROOT / f"Pulumi.{stack}.yaml", stack=stack, secrets={"tpu-rl:hfToken": STAND_IN_TOKEN})
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


def settings_env(world: World, made: venv.Venv, small: Path) -> dict[str, str]:
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


def stand_in_checkpoint(world: World, steps: dict[str, Any], final: int) -> str:
    """What training leaves for the export, stood in: the conversion's weights as the run's last checkpoint."""
    source = steps["convert"].artifact_uri
    target = f"{steps['train'].artifact_uri}{final}/model_params/"
    copied = world.copy_folder(source, target, marker=COMMIT_FILE)
    return (
        f"train -> export: the run's checkpoint stood in by the conversion's weights, {copied} objects at {target} "
        "(MaxText's Linen layout; tunix writes an NNX-RL one, which to_huggingface reads too), committed"
    )


def describe(outcome: run.Outcome) -> str:
    ran = ", ".join(dict.fromkeys(outcome.calls)) or "nothing"
    facts = "; ".join(s for s in outcome.said if not s.startswith(("failed: ", "not run: ")))
    skipped = "; ".join(s.removeprefix("not run: ") for s in outcome.said if s.startswith("not run: "))
    verdict = "passed" if outcome.code == 0 else f"FAILED (exit {outcome.code})"
    line = f"{outcome.step}: {verdict} in {outcome.seconds:.0f} s; ran {ran}"
    if facts:
        line += f"; {facts}"
    if skipped:
        line += f"; not run: {skipped}"
    return line


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    settings = load_stack(args.stack)[0]
    pods = plan_pods(args.stack)
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
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    made = venv.ensure(args.python312, log=out / "venv.log")
    print(
        f"venv: {made.folder.relative_to(ROOT)} ({'made' if made.made else 'reused'} in "
        f"{time.monotonic() - started:.0f} s): "
        f"MaxText {venv.MAXTEXT_VERSION}'s post-training package list, less "
        + "; ".join(f"{name} ({why})" for name, why in venv.LEFT_OUT.items())
        + "; the image's GitHub packages not installed: "
        + "; ".join(f"{name} ({why})" for name, why in venv.NOT_IN_LIST.items()),
        flush=True,
    )
    model = settings.model.spec
    folder = assets(made, model.maxtext_name)
    world = World(out).start()
    try:
        world.bucket(settings.bucket_name)
        world.serve("model", model.hf_repo, folder / "model")
        for dataset in DATASETS.values():
            repo = dict(dataset.keys)["dataset_name"]
            world.serve("dataset", repo, folder / "datasets" / repo.replace("/", "__"))
        env = settings_env(world, made, folder / "small.json")
        print(
            "rehearsal settings: "
            + " ".join(f"{k}={v}" for k, v in env.items() if not k.startswith("REHEARSE_") and k != "LANG"),
            flush=True,
        )
        failed = None
        steps = {step.step: step for step in plan_workflow(settings)}
        for pod in pods:
            if pod.step == "export":
                print(stand_in_checkpoint(world, steps, settings.training.final_step), flush=True)
            stand_ins = {"hf-token": STAND_IN_TOKEN}
            outcome = run.run_step(
                pod, out / pod.step, made.package, sandbox.environment(pod, stand_ins, env), out / f"{pod.step}.log"
            )
            print(describe(outcome), flush=True)
            if outcome.code != 0:
                failed = outcome
                break
    finally:
        world.stop()
    total = time.monotonic() - started
    if failed is not None:
        raise RehearsalFailedError(
            f"stack {args.stack}'s step {failed.step} failed its rehearsal: {failed.last[:400]} "
            f"(its log: {failed.log.relative_to(ROOT)})"
        )
    hub = f"the Hub sent {world.hub.sent / 1e6:.1f} MB in {len(world.hub.requests)} requests"
    print(f"rehearsal of stack {args.stack}: {len(pods)} step(s) passed in {total:.0f} s; {hub}")
    return 0
