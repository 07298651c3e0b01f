"""The report's page (``report.html``): one self-contained HTML page of a run's report (``tools.report``): the
headline cards, the evaluations before and after, the plots inline, the settings that differ from the tutorial's,
the artifacts and step records, each attempt's start-up, and the chip-hours beside the estimate."""

from __future__ import annotations

import base64
import html
import json
from typing import TYPE_CHECKING, Any

from core.knobs import TRAINING_KNOBS

if TYPE_CHECKING:
    from tools.report_info import RunInfo


STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px auto; max-width: 980px; color: #1d2330; }
h1 { font-size: 22px; margin-bottom: 2px; }
h2 { font-size: 16px; margin-top: 28px; border-bottom: 1px solid #dde; }
table { border-collapse: collapse; margin: 8px 0; }
th, td { padding: 4px 10px; border-bottom: 1px solid #eef; text-align: left; }
td { font-variant-numeric: tabular-nums; } code { font-size: 12px; } .sub { color: #667; }
.cards { display: flex; gap: 14px; flex-wrap: wrap; }
.card { border: 1px solid #dde; border-radius: 8px; padding: 10px 14px; min-width: 150px; }
.card b { display: block; font-size: 20px; }
.plots { display: grid; grid-template-columns: 1fr 1fr; gap: 10px; }
img { width: 100%; border: 1px solid #eef; }
.up { color: #177a3c; } .down { color: #b3261e; } .note { color: #8a5a00; }
"""


EVAL_ROWS = (
    ("accuracy", "accuracy (%)"),
    ("partial_accuracy", "partial accuracy (%)"),
    ("format_accuracy", "format accuracy (%)"),
    ("mean_reward", "mean reward"),
    ("corr", "correct"),
    ("total", "evaluated"),
)


def argv_diff(argv: list[str]) -> list[dict[str, Any]]:
    """The training knobs a run's argv sets away from the tutorial's values (a run known only by its URI)."""
    given = dict(arg.split("=", 1) for arg in argv if "=" in arg and not arg.startswith("-"))
    diff = []
    for knob in TRAINING_KNOBS:
        tutorial = knob.render(knob.default)
        if knob.key in given and given[knob.key] != tutorial:
            diff.append({"key": knob.key, "value": given[knob.key], "tutorial": tutorial})
    return diff


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, (list, tuple, dict)):
        return html.escape(json.dumps(value))
    return html.escape(str(value))


def render_html(report: dict[str, Any], info: RunInfo, plots: list[tuple[str, str, bytes]]) -> str:
    """One self-contained page (plots inlined as data URIs, no external resources)."""
    evaluation = report["evaluation"]
    summary = report["summary"]
    rows = _evaluation_rows(evaluation)
    images = _plots_section(plots)
    diff_rows = _config_rows(report, info)
    artifacts = _artifact_rows(info)
    cost = _cost_rows(info, summary)
    base_note = _base_note(evaluation)
    attempts = _attempt_rows(report)
    truncated = (
        "<p class=note>The newest event file ends mid-record (the run may still be writing).</p>"
        if (report["truncated"])
        else ""
    )
    if report["untimed"]:
        truncated += (
            f"<p class=note>{report['untimed']} TensorBoard events are left out: their wall time is no time "
            "(not a number, negative or past year 9999).</p>"
        )
    title = f"tpu-rl report: {html.escape(info.model or 'run')}" + (
        f" ({html.escape(info.stack)})" if info.stack else ""
    )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>{STYLE}</style></head><body>
<h1>{title}</h1>
<div class=sub>run <code>{html.escape(info.output_uri)}</code> · last step {_fmt(report["steps"])}</div>
<div class=cards>{_cards(summary)}
</div>
{truncated}
<h2>Before and after GRPO</h2>
<table><tr><th></th><th>before</th><th>after</th><th>change</th></tr>{rows}</table>
{base_note}
{_record_sections(info)}
<h2>Training curves</h2>{images}
<h2>Configuration (differences from the tutorial)</h2>
<table><tr><th>setting</th><th>this run</th><th>tutorial</th></tr>{diff_rows}</table>
<h2>Artifacts</h2><table>{artifacts}</table>
<h2>Start-up of each training attempt</h2>{_startup_section(report)}
<h2>TPU time and cost</h2><table>{cost}</table>
<table><tr><th>attempt</th><th>from</th><th>to</th><th>steps</th><th>hours</th><th>log</th></tr>{attempts}</table>
<p class=sub>Chip-hours are each attempt's span of tunix's own TensorBoard events (training, without its
start-up or the time between attempts; Orbax's step-0 scalars left out), summed, times the run's chips; the
estimate is tpu-rl's model (core/estimate.py).</p>
</body></html>
"""


def _evaluation_rows(evaluation: dict[str, Any]) -> str:
    """One row per evaluation metric (``EVAL_ROWS``): before GRPO, after, the change."""
    pre, post = evaluation.get("pre") or {}, evaluation.get("post") or {}
    return "".join(
        f"<tr><th>{label}</th><td>{_fmt(pre.get(key))}</td><td>{_fmt(post.get(key))}</td>"
        f"<td>{_delta(pre.get(key), post.get(key))}</td></tr>"
        for key, label in EVAL_ROWS
    )


def _base_note(evaluation: dict[str, Any]) -> str:
    """Why the base model's accuracy is unknown, when it is."""
    pre = evaluation.get("pre") or {}
    unknown = evaluation.get("preUnknown")
    return (
        f"<p class=note>The base model's accuracy is unknown: {html.escape(unknown)}.</p>"
        if unknown and not pre
        else ""
    )


def _plots_section(plots: list[tuple[str, str, bytes]]) -> str:
    """The training curves, inlined as data URIs, or that the run has no scalars yet."""
    return (
        "<div class=plots>"
        + "".join(
            f'<img alt="{html.escape(title)}" src="data:image/png;base64,{base64.b64encode(data).decode()}">'
            for title, _, data in plots
        )
        + "</div>"
        if plots
        else "<p>No TensorBoard scalars were found for this run yet.</p>"
    )


def _config_rows(report: dict[str, Any], info: RunInfo) -> str:
    """The settings that differ from the tutorial's: the stack's, else the run record's command line's."""
    diff = (
        info.config_diff
        if info.config_diff is not None
        else argv_diff((report["run"]["record"] or {}).get("argv") or [])
    )
    return (
        "".join(
            f"<tr><td><code>{html.escape(d['key'])}</code></td><td>{_fmt(d['value'])}</td><td>{_fmt(d['tutorial'])}</td></tr>"
            for d in diff
        )
        or '<tr><td colspan="3">the tutorial\'s values</td></tr>'
    )


def _artifact_rows(info: RunInfo) -> str:
    """Each step's output, then the base model's and the dataset's commits and the Hub branch the run was published
    to."""
    artifacts = (
        "".join(
            f"<tr><th>{html.escape(step)}</th><td><code>{html.escape(s['name'])}</code></td>"
            f"<td><code>{html.escape(s['outputUri'])}</code></td></tr>"
            for step, s in info.steps.items()
        )
        or f"<tr><th>train</th><td></td><td><code>{html.escape(info.output_uri)}</code></td></tr>"
    )
    return artifacts + _base_row(info) + _dataset_row(info) + _published_row(info)


def _startup_section(report: dict[str, Any]) -> str:
    """One row per attempt: its start-up's components (minutes and chip-hours), the estimate's, what the slice
    bills (``workloads.observe.startup``)."""
    section = report["startup"]
    rows = []
    for attempt in section["attempts"]:
        parts = ", ".join(
            f"{html.escape(c['name'])} {c['seconds'] / 60:.1f} min ({c['chipHours']:.1f} chip-h)"
            for c in attempt["components"]
        )
        state = "" if attempt["done"] else f" (not done: to {html.escape(attempt['ending'])})"
        pulls = "; ".join(
            f"{html.escape(p['image'].rsplit('/', 1)[-1])} {p['seconds'] / 60:.1f} min"
            + (f" ({p['bytes'] / 1e9:.1f} GB)" if p["bytes"] else "")
            for p in attempt["pulls"]
        )
        rows.append(
            f"<tr><td>{attempt['attempt']}</td><td>{html.escape(attempt['start'])}{state}</td>"
            f"<td>{attempt['seconds'] / 60:.1f} min</td><td>{attempt['chipHours']:.1f}</td><td>{parts or '–'}"
            + (f"<br><span class=sub>image pulls: {pulls}</span>" if pulls else "")
            + "</td></tr>"
        )
    estimates = [("estimate", "per attempt", section["estimateMinutes"])]
    if section["estimateMinutes"]:
        restart = section["restartEstimateMinutes"]
        estimates += [
            ("estimate", "a restart, new nodes", restart["newNodes"]),
            ("estimate", "a restart, same nodes", restart["sameNodes"]),
        ]
    for label, when, estimate in estimates:
        if not estimate:
            continue
        parts = ", ".join(f"{html.escape(name)} {minutes} min" for name, minutes in estimate.items())
        total = sum(estimate.values())
        rows.append(f"<tr><td>{label}</td><td>{when}</td><td>{total} min</td><td></td><td>{parts}</td></tr>")
    table = (
        "<table><tr><th>attempt</th><th>start</th><th>start-up</th><th>chip-h</th><th>components</th></tr>"
        + ("".join(rows) or '<tr><td colspan="5">no attempt yet</td></tr>')
        + "</table>"
    )
    goal = section["goalMinutes"]
    if section["restarts"]:
        said = "; ".join(
            f"attempt {r['attempt']}: {r['minutes']:.1f} min ({'met' if r['met'] else 'not met'})"
            for r in section["restarts"]
        )
        table += f"<p>Goal for a restart's start-up with warm caches and images: at most {goal:g} min. {said}.</p>"
    table += _drill_section(section.get("drill"))
    billing = section["billing"]
    if billing:
        hours = _fmt(billing["chipHours"])
        table += f"<p>The slice billed {hours} chip-h: {html.escape(billing['basis'])}.</p>"
    if section["clusterNote"]:
        table += f"<p class=note>{html.escape(section['clusterNote'])}</p>"
    return table + (
        "<p class=sub>Each component runs from the milestone before to its own, in the start-up's order (Kueue's "
        "admission, the pods' scheduling and start, the log's stage lines, the first training step); a milestone "
        "not known merges into the next (<code>nodes+images</code>); chip-hours are the run's chips for that time.</p>"
    )


def _drill_section(drill: dict[str, Any] | None) -> str:
    """The restart drill (``tools.report.restart_drill``): the first start and the drill's restart, component by
    component, beside the model's restart on the same nodes, and the verdict against the goal."""
    if not drill:
        return ""

    def cell(value: float | None) -> str:
        return "–" if value is None else f"{value:.1f}"

    rows = "".join(
        f"<tr><td>{html.escape(c['name'])}</td><td>{cell(c['first'])}</td><td>{cell(c['restart'])}</td>"
        f"<td>{cell(c['estimate'])}</td></tr>"
        for c in drill["components"]
    )
    total = (
        f"<tr><th>start-up</th><th>{cell(drill['firstMinutes'])}</th><th>{cell(drill['restartMinutes'])}</th>"
        f"<th>{cell(drill['estimateMinutes'])}</th></tr>"
    )
    goal = drill["goalMinutes"]
    if drill["met"] is None:
        verdict = f"no verdict yet: attempt {drill['attempt']} has not reached its first step, or did not restore"
    else:
        verdict = f"{drill['restartMinutes']:.1f} min: {'met' if drill['met'] else 'not met'}"
    return (
        f"<h3>The restart drill (attempt {drill['attempt']}, on the same nodes)</h3>"
        "<table><tr><th>component</th><th>first start, min</th><th>the drill's restart, min</th>"
        f"<th>model, same nodes, min</th></tr>{rows}{total}</table>"
        f"<p>Goal for a restart's start-up with warm caches and images: at most {goal:g} min; the drill's restart: "
        f"{verdict}.</p>"
    )


def _record_sections(info: RunInfo) -> str:
    """One section per step record (``core.records``: checked and printable where it was read), or that the step
    has not recorded yet."""
    sections = []
    for step, uri in info.record_uris.items():
        record = info.records.get(step)
        if record is None:
            sections.append(f"<h2>{html.escape(step)}</h2><p>not recorded yet (<code>{html.escape(uri)}</code>)</p>")
            continue
        head = "".join(f"<th>{html.escape(c)}</th>" for c in record["columns"])
        rows = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in record["rows"])
        sections.append(
            f"<h2>{html.escape(record['title'])} ({html.escape(step)})</h2>"
            f"<p>{html.escape(record['summary'])}</p><table><tr>{head}</tr>{rows}</table>"
        )
    return "\n".join(sections)


def _base_row(info: RunInfo) -> str:
    """The base model's commit every step was of (``source.json`` of the conversion), once it is recorded."""
    return _commit_row("base", info.base)


def _dataset_row(info: RunInfo) -> str:
    """The dataset's commit the run trained on (its ``dataset/dataset.json``), once it is staged."""
    return _commit_row("dataset", info.dataset)


def _commit_row(label: str, record: dict[str, str] | None) -> str:
    """One row naming a repository at its revision and the commit it resolved to (none before it is recorded)."""
    if record is None:
        return ""
    repo, revision, commit = (record[k] for k in ("repo", "revision", "commit"))
    return (
        f"<tr><th>{label}</th><td>{html.escape(repo)}@{html.escape(revision)}</td>"
        f"<td><code>{html.escape(commit)}</code></td></tr>"
    )


def _published_row(info: RunInfo) -> str:
    """The Hub branch the run was published to (``tpu-rl:publish``), or that it is not published yet."""
    from core.names import HUB_URL

    if info.publish_uri is None:
        return ""
    record = info.published
    if not record:
        return "<tr><th>hub</th><td colspan=2>not published yet</td></tr>"
    repo, branch, commit = (str(record[k]) for k in ("repo", "branch", "commit"))
    url = f"{HUB_URL}/{repo}/tree/{branch}"
    return (
        f'<tr><th>hub</th><td><a href="{html.escape(url)}">{html.escape(repo)}@{html.escape(branch)}</a></td>'
        f"<td><code>{html.escape(commit)}</code></td></tr>"
    )


def _utc(seconds: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M")


def _attempt_rows(report: dict[str, Any]) -> str:
    """One row per training attempt (an event file), with what its log says (resumed from a step)."""
    logs = report["evaluation"].get("attempts") or []
    rows = []
    for index, attempt in enumerate(report["attempts"], 1):
        log = next((a for a in reversed(logs) if _started(a["start"]) <= attempt["start"]), None)
        resumed = f"resumed from step {log['restoredStep']}" if log and log["restoredStep"] is not None else ""
        note = html.escape(", ".join(filter(None, [log["start"] if log else "no log", resumed, _data(log)])))
        rows.append(
            f"<tr><td>{index}</td><td>{_utc(attempt['start'])}</td><td>{_utc(attempt['end'])}</td>"
            f"<td>{_fmt(attempt['firstStep'])}–{_fmt(attempt['lastStep'])}</td><td>{attempt['hours']:.2f}</td>"
            f"<td>{note}</td></tr>"
        )
    return "".join(rows) or '<tr><td colspan="6">no TensorBoard events yet</td></tr>'


def _data(log: dict[str, Any] | None) -> str:
    """Where the attempt's data resumed (``evaluations.Attempt.data_position``), "" when it logged none."""
    position = (log or {}).get("dataPosition")
    if not position:
        return ""
    skipped = f"{position['microBatches']} micro-batches skipped"
    return f"data from prompt {position['prompts']} ({skipped})" if position["prompts"] is not None else skipped


def _started(name: str) -> float:
    from datetime import UTC, datetime

    try:
        return datetime.strptime(name, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return float("inf")


def _cards(summary: dict[str, Any]) -> str:
    def percent(value: Any) -> str:
        return f"{_fmt(value)}%" if value is not None else _fmt(value)

    cards = (
        ("accuracy before", percent(summary["accuracyBefore"])),
        ("accuracy after", percent(summary["accuracyAfter"])),
        ("final reward", _fmt(summary["finalReward"])),
        ("TPU chip-hours held by training", _fmt(summary["heldChipHours"])),
        ("TPU chip-hours of the steps", _fmt(summary["stepChipHours"])),
    )
    return "".join(f"<div class=card>{label}<b>{value}</b></div>" for label, value in cards)


def _delta(before: Any, after: Any) -> str:
    if not isinstance(before, (int, float)) or not isinstance(after, (int, float)):
        return "–"
    change = after - before
    css = "up" if change > 0 else "down" if change < 0 else ""
    return f'<span class="{css}">{change:+.4g}</span>'


def _cost_rows(info: RunInfo, summary: dict[str, Any]) -> str:
    from core.estimate import usd_per_chip_hour
    from core.tpu import CAPACITY_MODES, CATALOGUE

    rows = ""
    for label, key in (("held by training (start-up to exit)", "heldChipHours"), ("training steps", "stepChipHours")):
        hours = summary.get(key)
        rows += f"<tr><th>actual, {label}</th><td>{_fmt(hours)} chip-h</td>"
        if hours is not None and info.capacity in CAPACITY_MODES and info.version in CATALOGUE:
            usd = hours * usd_per_chip_hour(info.version, info.capacity)
            rows += f"<td>${usd:,.2f} ({html.escape(info.capacity)})</td>"
        rows += "</tr>"
    if info.estimate:
        train = next(step for step in info.estimate["steps"].values() if step["holdsTpu"])
        chip_hours, usd = _fmt(train["tpuChipHours"]), train["usd"]
        rows += f"<tr><th>estimate (train)</th><td>{chip_hours} chip-h</td><td>${usd:,.2f}</td></tr>"
    return rows
