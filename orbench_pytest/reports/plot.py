"""`orbench plot` and `orbench compare`: runs placed on OR-Bench's trade-off plane.

x: over-refusal (safe prompts refused, OR-Bench-Hard-1K when the run has it), y: toxic prompts
refused (OR-Bench-Toxic when the run has it); top-left is better. The 32 models OR-Bench
published are grey reference points (orbench_pytest/data/published_rates.csv).

The point maths are pure Python (Spearman's rank correlation: core/statistics.py); matplotlib
(extra `plot`) is imported only to draw.
"""

from __future__ import annotations

import csv
import dataclasses
import io
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from orbench_pytest.core.errors import ConfigError
from orbench_pytest.core.statistics import spearman
from orbench_pytest.core.untrusted import clip
from orbench_pytest.gate.decision import OVER_REFUSAL, TOXIC_ACCEPTANCE, row_rate, tally
from orbench_pytest.reports.document import ItemRecord, RunRecord

OVER_REFUSAL_SUITE = "or-bench-hard-1k"
TOXIC_SUITE = "or-bench-toxic"
PAPER_SPEARMAN = 0.89  # OR-Bench (arXiv:2405.20947) across its 32 models
SYSTEM_PROMPT_SHOWN = 40  # characters of a system prompt a run's label quotes


@dataclass(frozen=True)
class Point:
    """One run (or one variant of a run) on the plane; rates in [0, 1]."""

    label: str
    over_refusal: float
    over_interval: tuple[float, float]
    toxic_refusal: float
    toxic_interval: tuple[float, float]
    x_source: str  # the suite the x rate comes from, or "all safe prompts"
    y_source: str
    variant: str = ""  # set when the run has several variants (baselines pair by it)


@dataclass(frozen=True)
class Published:
    model: str
    over_refusal: float
    toxic_refusal: float


def published_models() -> list[Published]:
    text = resources.files("orbench_pytest").joinpath("data/published_rates.csv").read_text(
        encoding="utf-8")
    return [Published(row["model"], float(row["hard_1k_rejection_pct"]) / 100,
                      float(row["toxic_rejection_pct"]) / 100)
            for row in csv.DictReader(io.StringIO(text))]


def points_of(run: RunRecord, label: str | None = None) -> list[Point]:
    """One point per variant: over-refusal on Hard-1K (else every safe prompt), toxic refusal
    on OR-Bench-Toxic (else every toxic prompt). Unanswered prompts count for neither.

    The rates are the gate's own: the suite's gate row as the run decided it when the file
    carries one, else the gate's computation over the same items (with --orbench-samples the
    mean of the prompts' refusal fractions, never a majority vote)."""
    name = label or run.label()
    variants = run.variants()
    points = []
    for variant in variants:
        answered = [i for i in run.items if i.variant == variant and not i.error]
        safe = [i for i in answered if i.expect == "comply"]
        toxic = [i for i in answered if i.expect == "refuse"]
        safe, x_source = _prefer(safe, OVER_REFUSAL_SUITE, "all safe prompts")
        toxic, y_source = _prefer(toxic, TOXIC_SUITE, "all toxic prompts")
        if not safe or not toxic:
            missing = "safe (expect: comply)" if not safe else "toxic (expect: refuse)"
            raise ConfigError(f"{run.source}: no answered {missing} prompts"
                              f"{f' in variant {variant}' if variant else ''}: the plot needs "
                              "both over-refusal and toxic refusal")
        over, over_interval = _gate_rate(run, safe, x_source, variant, OVER_REFUSAL)
        accepted, (low, high) = _gate_rate(run, toxic, y_source, variant, TOXIC_ACCEPTANCE)
        shown = variant if len(variants) > 1 else ""
        point_label = f"{name} [{shown}]" if shown else name
        points.append(Point(point_label, over, over_interval, 1.0 - accepted,
                            (1.0 - high, 1.0 - low), x_source,
                            y_source, shown))
    return points


def run_labels(runs: Sequence[RunRecord]) -> list[str]:
    """A label per run that tells it from the others: its target, and where two runs share a
    target, what differs between them (target version, system prompt, else the file name)."""
    names = [run.label() for run in runs]
    labels = list(names)
    for name in set(names):
        same = [i for i, other in enumerate(names) if other == name]
        if len(same) < 2:
            continue
        told = [f for f in (_version_of, _system_prompt_of)
                if len({f(runs[i]) for i in same}) > 1]
        keys = {i: tuple(f(runs[i]) for f in told) for i in same}
        for i in same:
            parts = list(keys[i])
            if list(keys.values()).count(keys[i]) > 1:  # still a tie: the file tells them
                parts.append(runs[i].source)
            labels[i] = f"{name} ({', '.join(parts)})"
    return labels


def _version_of(run: RunRecord) -> str:
    fingerprint = run.run.target_fingerprint
    version = fingerprint.version if fingerprint is not None else None
    return f"version {version}" if version else "no version"


def _system_prompt_of(run: RunRecord) -> str:
    prompts = [v.system_prompt for v in run.run.variants]
    if not prompts or all(p is None for p in prompts):
        return "no system prompt"
    shown = "; ".join(clip(p or "none", SYSTEM_PROMPT_SHOWN) for p in prompts)
    return f"system prompt {shown!r}"


def _gate_rate(run: RunRecord, items: list[ItemRecord], source: str, variant: str,
               name: str) -> tuple[float, tuple[float, float]]:
    """The gate's rate for these items: its row's check when the run wrote one for `source`
    (a suite), else the gate's own computation over them (pooled as one row)."""
    for raw in run.gate_rows or ():
        if (raw.suite, raw.variant, raw.category) != (source, variant, None):
            continue
        for check in raw.checks:
            if check.name == name and check.rate is not None:
                return check.rate, check.interval
    pooled = [dataclasses.replace(item.as_result(), suite=source, category="")
              for item in items]
    (row,) = [row for key, row in tally(pooled).items() if key[2] is None]
    found = row_rate(row, name)
    assert found is not None  # items is not empty
    return found


def _prefer(items: list[ItemRecord], suite: str,
            fallback: str) -> tuple[list[ItemRecord], str]:
    chosen = [item for item in items if item.suite == suite]
    return (chosen, suite) if chosen else (items, fallback)


def published_spearman() -> float:
    models = published_models()
    return spearman([m.over_refusal for m in models], [m.toxic_refusal for m in models])


# --- drawing --------------------------------------------------------------------------------
def draw(points: Sequence[Point], out_stem: Path, baseline: Sequence[Point] = (),
         title: str | None = None) -> list[Path]:
    """Write OUT_STEM.png and OUT_STEM.svg; an arrow from each baseline point to the
    candidate point of the same variant (or to every candidate, for one baseline point)."""
    try:
        import matplotlib
    except ImportError:
        raise ConfigError("orbench plot needs matplotlib: pip install "
                          "'orbench-pytest[plot]'") from None
    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 6), dpi=120)
    try:
        _draw_published(ax)
        # gids name the artists in the SVG: tests (and curious readers) can find each point.
        for index, point in enumerate(baseline):
            _draw_point(ax, point, color="#6b6b6b", marker="s", note="baseline",
                        gid=f"orbench-baseline-{index}")
        colors = plt.get_cmap("tab10")
        for index, point in enumerate(points):
            _draw_point(ax, point, color=colors(index % 10), marker="o", note=None,
                        gid=f"orbench-point-{index}")
        for index, (start, end) in enumerate(arrow_pairs(baseline, points)):
            arrow = ax.annotate("", xy=(end.over_refusal * 100, end.toxic_refusal * 100),
                                xytext=(start.over_refusal * 100, start.toxic_refusal * 100),
                                arrowprops={"arrowstyle": "-|>", "color": "black", "lw": 1.4,
                                            "shrinkA": 6, "shrinkB": 6})
            if arrow.arrow_patch is not None:  # always drawn: arrowprops are given
                arrow.arrow_patch.set_gid(f"orbench-arrow-{index}")
        _axes(ax, [*points, *baseline], title)
        out_stem.parent.mkdir(parents=True, exist_ok=True)
        written = []
        for suffix in (".png", ".svg"):
            path = out_stem.with_suffix(suffix)
            fig.savefig(path, bbox_inches="tight")
            written.append(path)
        return written
    finally:
        plt.close(fig)


def _draw_published(ax: Any) -> None:
    models = published_models()
    ax.scatter([m.over_refusal * 100 for m in models],
               [m.toxic_refusal * 100 for m in models], s=22, color="#c4c4c4",
               edgecolor="#9a9a9a", linewidth=0.5, zorder=1, gid="orbench-published",
               label=f"OR-Bench published models ({len(models)})")
    for model in _labelled(models):
        ax.annotate(model.model, (model.over_refusal * 100, model.toxic_refusal * 100),
                    xytext=(3, -2), textcoords="offset points", fontsize=5.5,
                    color="#9a9a9a", zorder=1)


def _labelled(models: Sequence[Published]) -> list[Published]:
    """Models whose name fits beside their point: in a crowd only the first is named."""
    kept: list[Published] = []
    for model in sorted(models, key=lambda m: (m.over_refusal, -m.toxic_refusal)):
        crowded = any(abs(model.over_refusal - other.over_refusal) < 0.11
                      and abs(model.toxic_refusal - other.toxic_refusal) < 0.025
                      for other in kept)
        if not crowded:
            kept.append(model)
    return kept


def _draw_point(ax: Any, point: Point, *, color: Any, marker: str, note: str | None,
                gid: str) -> None:
    x, y = point.over_refusal * 100, point.toxic_refusal * 100
    xerr = [[x - point.over_interval[0] * 100], [point.over_interval[1] * 100 - x]]
    yerr = [[y - point.toxic_interval[0] * 100], [point.toxic_interval[1] * 100 - y]]
    label = f"{point.label} ({note})" if note else point.label
    bars = ax.errorbar([x], [y], xerr=xerr, yerr=yerr, fmt=marker, color=color,
                       markersize=7, capsize=3, elinewidth=1.1, zorder=3,
                       label=f"{label}: {x:.1f}% / {y:.1f}%")
    bars.lines[0].set_gid(gid)


def arrow_pairs(baseline: Sequence[Point], points: Sequence[Point]) -> list[tuple[Point, Point]]:
    if not baseline:
        return []
    if len(baseline) == 1:
        return [(baseline[0], point) for point in points]
    by_variant = {p.variant: p for p in baseline}
    return [(by_variant[p.variant], p) for p in points if p.variant in by_variant]


def _axes(ax: Any, points: Sequence[Point], title: str | None) -> None:
    x_sources = sorted({p.x_source for p in points})
    y_sources = sorted({p.y_source for p in points})
    ax.set_xlabel(f"over-refusal: safe prompts refused, % ({', '.join(x_sources)})")
    ax.set_ylabel(f"toxic prompts refused, % ({', '.join(y_sources)})")
    ax.set_xlim(-2, 102)
    low = min([60.0, *[p.toxic_interval[0] * 100 - 3 for p in points]])
    ax.set_ylim(max(-2.0, low), 101.5)
    ax.grid(True, color="#eeeeee", zorder=0)
    ax.text(0.01, 0.99, "better ↖", transform=ax.transAxes, ha="left",
            va="top", fontsize=9, color="#2e7d32")
    ax.set_title(title or "Toxic refusal against over-refusal (bars: 95% Wilson intervals)",
                 fontsize=10)
    ax.legend(loc="lower right", fontsize=7, framealpha=0.9)
