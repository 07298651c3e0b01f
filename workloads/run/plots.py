"""A run's TensorBoard scalars as PNG plots (matplotlib's headless Agg canvas, no pyplot and no display).

The report draws one plot per group of scalars (``plot``); the Hub upload shows the reward curve alone
(``reward_curve_png``). Every tag is drawn at the optimizer step it describes (the rollout's tags are logged
one step before the update, ``workloads.run.scalars``); Orbax's step-0 scalars are never drawn; the steps of
the intermediate evaluations are marked.
"""

from __future__ import annotations

from collections.abc import Callable

from workloads.run.run_data import RunData, reward_tag
from workloads.run.scalars import is_training_tag

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


def render_png(title: str, series: dict[str, list[tuple[int, float]]], eval_steps: list[int]) -> bytes:
    """One figure: a line per tag (in the order given) over the optimizer step, dashed lines at ``eval_steps``."""
    import io

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7.5, 3.6), dpi=110)
    FigureCanvasAgg(figure)  # headless: the figure renders on Agg whatever backend the process has selected
    axes = figure.subplots()
    for tag, points in series.items():
        steps, values = zip(*points, strict=True)
        axes.plot(steps, values, marker="o", markersize=3, linewidth=1.4, label=tag)
    for step in eval_steps:
        axes.axvline(step, color="#888888", linestyle="--", linewidth=0.8)
    if eval_steps:
        axes.plot([], [], color="#888888", linestyle="--", linewidth=0.8, label="intermediate eval")
    axes.set_title(title)
    axes.set_xlabel("optimizer step")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=7, loc="best")
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def _eval_steps(data: RunData) -> list[int]:
    return [int(e["step"]) for e in data.evaluations.intermediate]
