"""A run's TensorBoard scalars as PNG plots (matplotlib's headless Agg canvas, no pyplot and no display).

The report draws one plot per group of scalars (``plot``); the Hub upload shows the reward curve alone
(``reward_curve_png``). Every tag is drawn at the optimizer step it describes (the rollout's tags are logged
one step before the update, ``workloads.observe.scalars``); Orbax's step-0 scalars are never drawn; the steps of
the intermediate evaluations are marked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from core.terminal import visible
from workloads.observe.run_data import RunData, reward_tag
from workloads.observe.scalars import is_training_tag

PLOTS: tuple[tuple[str, str, Callable[[str], bool]], ...] = (
    ("reward", "Reward", lambda tag: "reward" in tag and "advantage" not in tag),
    ("loss", "Loss", lambda tag: tag.endswith("/loss") or tag.endswith("_loss")),
    ("kl", "KL divergence", lambda tag: tag.rsplit("/", 1)[-1] == "kl" or "/kl" in tag),
    ("entropy", "Entropy", lambda tag: "entropy" in tag),
    ("length", "Completion length", lambda tag: "length" in tag),
)
"""(file name stem, title, which training tags it draws)."""


def plot(data: RunData) -> list[tuple[str, str, bytes]]:
    """One PNG per group of scalars found (reward, loss, KL, entropy, length): (title, file name, bytes)."""
    eval_steps = _eval_steps(data)
    series = {t: data.scalars.aligned(t) for t in data.scalars.series if is_training_tag(t)}
    files = []
    for name, title, wanted in PLOTS:
        tags = sorted(t for t in series if wanted(t) and series[t])
        if tags:
            files.append((title, f"{name}.png", render_png(title, {t: series[t] for t in tags}, eval_steps)))
    return files


def reward_curve_png(data: RunData) -> bytes | None:
    """The reward curve of the run's reward tag (``run_data.reward_tag``: the one its final reward is read
    from) as a PNG, or None when the run logged no reward scalar."""
    tag = reward_tag(data.scalars)
    points = data.scalars.aligned(tag) if tag else []
    if tag is None or not points:
        return None
    return render_png("Reward", {tag: points}, _eval_steps(data))


PLOTTABLE = 1e300
"""The largest magnitude drawn: matplotlib's tick locator overflows near the float maximum (``arange: cannot
compute length`` at 1.7e308); a run's values past it are left out of the plot (``report.json`` keeps them)."""


def render_png(title: str, series: dict[str, list[tuple[int, float]]], eval_steps: list[int]) -> bytes:
    """One figure: a line per tag (in the order given) over the optimizer step, dashed lines at ``eval_steps``.

    Tags and titles are text from the run: drawn as text, never parsed as matplotlib's math (``$...$``, whose
    syntax errors would stop the report), and as a terminal would draw them (``core.terminal.visible``: a control
    character has no glyph, and matplotlib's warning would print it raw); values out of ``PLOTTABLE`` are left out,
    the legend says how many."""
    import io

    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    with matplotlib.rc_context({"text.parse_math": False}):
        figure = Figure(figsize=(7.5, 3.6), dpi=110)
        FigureCanvasAgg(figure)  # headless: the figure renders on Agg whatever backend the process has selected
        axes = figure.subplots()
        _draw(axes, title, series, eval_steps)
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png")
        return buffer.getvalue()


def _draw(axes: Any, title: str, series: dict[str, list[tuple[int, float]]], eval_steps: list[int]) -> None:
    for tag, points in series.items():
        kept = [(step, value) for step, value in points if abs(value) <= PLOTTABLE]
        left_out = len(points) - len(kept)
        label = visible(tag) if not left_out else f"{visible(tag)} ({left_out} out of range, not drawn)"
        if not kept:
            axes.plot([], [], label=label)
            continue
        steps, values = zip(*kept, strict=True)
        axes.plot(steps, values, marker="o", markersize=3, linewidth=1.4, label=label)
    for step in eval_steps:
        axes.axvline(step, color="#888888", linestyle="--", linewidth=0.8)
    if eval_steps:
        axes.plot([], [], color="#888888", linestyle="--", linewidth=0.8, label="intermediate eval")
    axes.set_title(title)
    axes.set_xlabel("optimizer step")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=7, loc="best")
    axes.figure.tight_layout()


def _eval_steps(data: RunData) -> list[int]:
    return [int(e["step"]) for e in data.evaluations.intermediate]
