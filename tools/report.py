"""Report of a training run: reward curves, before/after accuracy, config diff, chip-hours vs the estimate.

    python -m tools.report (--stack NAME | --config-file FILE | --run-uri gs://.../train/<hash>/) --out DIR

Writes ``DIR/report.json`` (every TensorBoard scalar tag unchanged, the parsed evaluations), PNG plots
(matplotlib, headless) and ``DIR/report.html``, one self-contained page. Reads GCS only (ADC, or
``STORAGE_EMULATOR_HOST``); a config or GCS problem is one line on stderr and exit 2.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from core.config.diff import config_diff
from core.errors import BadInputError, TpuRlError
from core.estimate import STARTUP_GOAL_MINUTES, STARTUP_MINUTES, restarted
from core.redact import scrub
from core.settings import Settings
from core.steps import STEPS
from core.tpu import CAPACITY_MODES
from tools.notices import hide_python_version_notice
from tools.process import entry_point, report
from tools.report_html import render_html
from tools.report_info import RunInfo
from workloads.observe.plots import plot
from workloads.observe.run_data import RunData, reward_tag
from workloads.observe.scalars import ROLLOUT_PREFIXES


class ReportError(BadInputError):
    """The report cannot be made (one line): exit 2 for what the operator gave, or the exit code of the read that
    failed (1 for an unreadable cluster or a GCS that did not answer)."""


# ---------------------------------------------------------------------------------------------
# Run information


def info_from_settings(settings: Settings, raw: dict[str, str], secret_keys: frozenset[str]) -> RunInfo:
    """The run of a stack's current configuration."""
    from core.estimate import estimate_for
    from workloads.specs.step_specs import plan_workflow

    plan = plan_workflow(settings)
    return RunInfo(
        output_uri=plan.train.output_uri,
        stack=settings.stack,
        model=settings.model.spec.name,
        chips=settings.total_chips,
        capacity=settings.tpu.capacity,
        version=settings.tpu.version,
        steps={s.step: {"name": s.name, "stepId": s.step_id, "outputUri": s.output_uri} for s in plan.steps},
        config_diff=config_diff(raw, secret_keys),
        estimate=estimate_for(settings).to_output(),
        publish_uri=plan.publish.artifact_uri if plan.publish else None,
        record_uris={s.step: s.artifact_uri for s in plan.steps if s.output == "record"},
    )


# ---------------------------------------------------------------------------------------------
# report.json, plots, report.html


def report_json(info: RunInfo, data: RunData) -> dict[str, Any]:
    """The report's data: run, last step, every scalar tag unchanged, the evaluations, chip-hours."""
    record = data.evaluations.run
    chips = info.chips or (record.slice.chips if record and 0 < record.slice.chips <= 100_000 else None)
    estimate = (info.estimate or {}).get("trainStartupMinutes")
    first = estimate or STARTUP_MINUTES
    return {
        "run": {
            **info.to_json(),
            "logs": data.evaluations.logs,
            "record": record.model_dump(mode="json", by_alias=True) if record else None,
        },
        "steps": data.last_step,
        "scalars": data.scalars.to_json(),
        "stepOffsets": {prefix: 1 for prefix in ROLLOUT_PREFIXES},
        "attempts": [a.to_json() for a in data.scalars.attempts],
        "evaluation": data.evaluations.to_json(),
        "summary": data.summary(chips or 0),
        "truncated": data.scalars.truncated,
        "untimed": data.scalars.untimed,
        "startup": {
            "attempts": info.startup,
            "billing": info.billing,
            "estimateMinutes": estimate,
            "restartEstimateMinutes": {"newNodes": restarted(first), "sameNodes": restarted(first, same_nodes=True)},
            "goalMinutes": STARTUP_GOAL_MINUTES,
            "restarts": restarts_against_the_goal(info.startup),
            "drill": restart_drill(info.startup, restarted(first, same_nodes=True)),
            "clusterNote": info.cluster_note or None,
        },
    }


def restarts_against_the_goal(attempts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each finished restart's start-up (``Startup.goal_met``: not None) against the start-up goal
    (``core.estimate.STARTUP_GOAL_MINUTES``): its minutes, and whether it met it."""
    return [
        {"attempt": a["attempt"], "minutes": round(a["seconds"] / 60, 1), "met": a["goalMet"]}
        for a in attempts
        if a["goalMet"] is not None
    ]


def restart_drill(attempts: list[dict[str, Any]], estimate: dict[str, int]) -> dict[str, Any] | None:
    """The restart drill's measurement (``tpu-rl:workflow.restartDrill``, docs/restart-drill.md): the run's first
    start and the drill's restart (``Startup.drill``), each component measured in minutes beside the model's restart
    on the same nodes (``estimate``: ``core.estimate.restarted`` with ``same_nodes``), and the restart against the
    goal (``goalMet``: None until it reached its first step); None when the run has had no drill restart."""
    restart = next((a for a in attempts if a.get("drill")), None)
    if restart is None:
        return None
    first = next((a for a in attempts if a["attempt"] == restart["attempt"] - 1), None)

    def measured(attempt: dict[str, Any] | None) -> dict[str, float]:
        return {c["name"]: round(c["seconds"] / 60, 1) for c in attempt["components"]} if attempt else {}

    before, after = measured(first), measured(restart)
    names = sorted(dict.fromkeys([*before, *after, *estimate]), key=_startup_order)
    return {
        "attempt": restart["attempt"],
        "done": restart["done"],
        "components": [
            {"name": n, "first": before.get(n), "restart": after.get(n), "estimate": estimate.get(n)} for n in names
        ],
        "firstMinutes": round(first["seconds"] / 60, 1) if first else None,
        "restartMinutes": round(restart["seconds"] / 60, 1),
        "estimateMinutes": sum(estimate.values()),
        "goalMinutes": STARTUP_GOAL_MINUTES,
        "met": restart["goalMet"],
    }


def _startup_order(name: str) -> tuple[int, int]:
    """Where a start-up component falls in the start-up (``workloads.observe.startup.COMPONENTS``): by the milestone
    it ends at, a merged one (``nodes+images+Pathways``) after the single one that ends there."""
    from workloads.observe.startup import COMPONENTS

    parts = name.split("+")
    return (COMPONENTS.index(parts[-1]) if parts[-1] in COMPONENTS else len(COMPONENTS), len(parts))


def _read_record(client: Any, uri: str) -> dict[str, Any] | None:
    """A step's record as read from GCS (bounded), None while it has none; ``StorageError`` when GCS cannot say."""
    from workloads.observe.artifacts import bounded, step_record

    found = bounded(client, f"reading {uri}", lambda call: step_record(client, uri, **call))
    return found.to_json() if found else None


def write_report(info: RunInfo, data: RunData, out: Path) -> dict[str, Any]:
    """``report.json``, the PNG plots and ``report.html`` in ``out`` (``core.outdir``: all or nothing,
    never through a link, a user's own files left alone)."""
    from core.outdir import write_files

    report = report_json(info, data)
    plots = plot(data)
    files: dict[str, bytes | str] = {"report.json": json.dumps(report, indent=2, sort_keys=True) + "\n"}
    files.update({name: png for _, name, png in plots})
    files["report.html"] = render_html(report, info, plots)
    write_files(out, files)
    return report


# ---------------------------------------------------------------------------------------------
# Command line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.report", description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--stack", help="the run of Pulumi.<STACK>.yaml's current configuration")
    source.add_argument("--config-file", type=Path, help="the run of this stack config file")
    source.add_argument("--run-uri", help="any run: its training output, gs://BUCKET/MODEL/train/HASH/")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="override a key (--path syntax)"
    )
    parser.add_argument(
        "--capacity",
        type=str.lower,
        choices=CAPACITY_MODES,
        help="price the measured chip-hours at this capacity (with --run-uri)",
    )
    parser.add_argument("--out", type=Path, required=True, help="folder for report.json, the plots and report.html")
    parser.add_argument("--kubeconfig", type=Path, help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    parser.add_argument("--context", help="context of the stack's cluster (default: gke_<project>_<region>_<cluster>)")
    args = parser.parse_args(argv)
    hide_python_version_notice()  # before the Google client libraries are imported
    try:
        return _run(args)
    except TpuRlError as err:
        return report(err)


def _run(args: argparse.Namespace) -> int:
    from core.config import ConfigError
    from core.outdir import check
    from tools.stack_files import StackFileError, load_stack
    from workloads.observe.artifacts import StorageError, open_client
    from workloads.observe.run_data import gather

    check(args.out)  # before anything is read: a bad --out is one line, and nothing is created
    if args.run_uri:
        if not (args.run_uri.startswith("gs://") and args.run_uri.endswith("/")):
            raise ReportError(f"--run-uri {args.run_uri!r}: expected gs://BUCKET/MODEL/train/HASH/ (with the slash)")
        info = RunInfo(output_uri=args.run_uri, capacity=args.capacity)
    else:
        try:
            settings, raw, secret_keys = load_stack(args.stack, args.config_file, args.set)
        except (ConfigError, StackFileError) as err:
            raise ReportError(str(err)) from None
        if not settings.workflow.enabled:
            raise ReportError(f"stack {settings.stack} runs no workflow (tpu-rl:workflow.enabled is false)")
        info = info_from_settings(settings, raw, secret_keys)
    kubeconfig, stack = None, None if args.run_uri else settings
    if stack is not None:
        kubeconfig, info.cluster_note = _kubeconfig(stack, args)
    else:
        info.cluster_note = "a run given by its URI: the start-up is read from its logs alone (no cluster)"
    try:
        client = open_client()
        data = gather(client, info.output_uri)
        # The base's record is beside the MaxText checkpoint the conversion leaves (core.steps Output).
        converted = (facts.name for facts in STEPS.values() if facts.output == "maxtext-checkpoint")
        convert = next((info.steps[name] for name in converted if name in info.steps), None)
        if convert:
            from workloads.observe.artifacts import bounded, source_record

            output = convert["outputUri"]
            found = bounded(client, f"reading {output}", lambda call: source_record(client, output, **call))
            info.base = found.model_dump(include={"repo", "revision", "commit"}) if found else None
        from workloads.observe.artifacts import bounded, dataset_record

        output_uri = info.output_uri
        staged = bounded(client, f"reading {output_uri}", lambda call: dataset_record(client, output_uri, **call))
        info.dataset = staged.model_dump(include={"repo", "revision", "commit"}) if staged else None
        for step, uri in info.record_uris.items():
            info.records[step] = _read_record(client, uri)
        if info.publish_uri:
            from workloads.observe.artifacts import bounded, published_record

            uri = info.publish_uri
            info.published = bounded(client, f"reading {uri}", lambda call: published_record(client, uri, **call))
        from workloads.observe.artifacts import bounded
        from workloads.observe.startup import read_log_attempts

        output_uri = info.output_uri
        attempts = bounded(
            client,
            f"reading the logs under {output_uri}logs/",
            lambda call: read_log_attempts(client, output_uri, **call),
        )
    except StorageError as err:
        raise ReportError(f"cannot read the run at {info.output_uri}: {err}", exit_code=err.exit_code) from None
    record = data.evaluations.run  # the run's own text, parsed where it was read (evaluations.RunRecord)
    if record is not None:
        info.model = info.model or record.model[:40] or None
        info.chips = info.chips or (record.slice.chips if 0 < record.slice.chips <= 100_000 else None)
        info.version = info.version or record.slice.version or None
    _startups(info, data, attempts, stack, kubeconfig)
    write_report(info, data, args.out)
    tag = reward_tag(data.scalars)  # the event files' own text: printed as a terminal would draw it, no secret
    print(
        f"wrote {args.out / 'report.json'}, {args.out / 'report.html'} and the plots "
        f"(last step {data.last_step}, reward tag {None if tag is None else scrub(tag, limit=200)})"
    )
    return 0


def _kubeconfig(settings: Settings, args: argparse.Namespace) -> tuple[dict[str, Any] | None, str]:
    """The stack's kubeconfig, or why the cluster is not read (the report goes on from the logs)."""
    from tools.status import StatusError, kubeconfig_for

    try:
        return kubeconfig_for(settings, args.kubeconfig, args.context), ""
    except StatusError as err:
        return None, f"the cluster's side of the start-up is not shown: {err}"


def _startups(
    info: RunInfo, data: RunData, attempts: list[Any], settings: Settings | None, kubeconfig: dict[str, Any] | None
) -> None:
    """Each attempt's start-up and the slice's billing into ``info`` (``workloads.observe.startup``): the live objects
    are read when the stack's cluster is known; a cluster that cannot be read is a note, not a failure (the report
    is of the run's files)."""
    import time

    from core.boundary import BoundaryError
    from infra.k8s import live
    from workloads.observe.startup import read_cluster_facts, slice_billing, startups

    facts = None
    if settings is not None and kubeconfig is not None:
        from workloads.specs.step_specs import plan_workflow

        reader = live.ClusterReader(kubeconfig)
        try:
            name = plan_workflow(settings).train.name
            facts = read_cluster_facts(reader, settings.namespace, name, settings.slice.gke_accelerator)
        except (live.ClusterReadError, BoundaryError) as err:
            info.cluster_note = f"the cluster's side of the start-up is not shown: {scrub(str(err), limit=300)}"
        finally:
            reader.close()
    now = time.time()
    chips = info.chips or 0
    info.startup = [s.to_json(chips) for s in startups(attempts, facts, [a.start for a in data.scalars.attempts], now)]
    if settings is not None:
        info.billing = slice_billing(info.capacity, chips, facts, now).to_json()


if __name__ == "__main__":
    entry_point(main)
