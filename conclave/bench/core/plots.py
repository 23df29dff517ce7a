"""PNG plots for the report, drawn with matplotlib's Agg backend (no display needed).

Suites put raw data in `SuiteResult.series`; two shapes are understood, under any key:
- distributions: `{label: [number, ...]}`: one box per label (latencies, in ms);
- curves: `{label: [[x, y], ...]}`: one line per label (throughput vs agents,
  completion rate vs deadline, ...).
Known keys get titles and axis names (`PLOT_LABELS`); others are titled by their key.
matplotlib is imported on the first plot, not with the module: it takes about half a second,
which every `conclave` command (the CLI imports the benches) would otherwise pay.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

PLOT_LABELS: dict[str, tuple[str, str, str]] = {
    # key: (title, x axis, y axis)
    "latency_ms": ("Latency distribution", "", "ms"),
    "throughput_vs_agents": ("Throughput vs agents", "agents", "operations / s"),
    "completion_vs_deadline": ("Completion vs deadline", "deadline (ms)", "completed (%)"),
}


def _pyplot() -> ModuleType:
    import matplotlib

    matplotlib.use("Agg")  # before pyplot: never needs a display, also in CI
    import matplotlib.pyplot

    return matplotlib.pyplot


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def series_shape(data: Any) -> str | None:
    """'distribution', 'curve', or None for data the report cannot plot."""
    if not isinstance(data, dict) or not data:
        return None
    values = list(data.values())
    if not all(isinstance(v, list) and v for v in values):
        return None
    if all(all(_is_number(x) for x in v) for v in values):
        return "distribution"
    pairs = all(
        all(isinstance(p, list | tuple) and len(p) == 2 and all(map(_is_number, p)) for p in v)
        for v in values
    )
    return "curve" if pairs else None


def plot_series(suite: str, key: str, data: Any, out_dir: Path) -> Path | None:
    """Draw one series as a PNG next to the report; None when its shape is unknown."""
    shape = series_shape(data)
    if shape is None:
        return None
    title, xlabel, ylabel = PLOT_LABELS.get(key, (key.replace("_", " "), "", ""))
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(7, 4), dpi=100)
    try:
        if shape == "distribution":
            labels = list(data)
            axes.boxplot([data[label] for label in labels], showfliers=True)
            axes.set_xticks(range(1, len(labels) + 1), labels, rotation=20, ha="right")
            values = [v for label in labels for v in data[label] if v > 0]
            if values and max(values) > 50 * min(values):
                axes.set_yscale("log")  # cold starts next to warm calls: keep both readable
        else:
            for label, points in data.items():
                xs, ys = zip(*sorted(points), strict=True)
                axes.plot(xs, ys, marker="o", label=label)
            axes.legend(fontsize="small")
        axes.set_title(f"{suite}: {title}")
        axes.set_xlabel(xlabel)
        axes.set_ylabel(ylabel)
        axes.grid(alpha=0.3)
        figure.tight_layout()
        path = out_dir / f"{suite}-{key}.png"
        figure.savefig(path)
    finally:
        plt.close(figure)
    return path
