"""The trade-off plot as hand-written SVG, for the HTML report: the point `orbench plot` draws
(the same plot.Point) among OR-Bench's published models, with no matplotlib. Labels are
untrusted text (a run's target): escaped."""

from __future__ import annotations

from orbench_pytest.core.untrusted import html_text as _h  # untrusted text, inert
from orbench_pytest.reports.plot import Point, arrow_pairs, published_models

_W, _H, _LEFT, _TOP, _PLOT_W, _PLOT_H = 640, 440, 64, 30, 540, 350


def plot_svg(points: list[Point], baseline: list[Point]) -> str:
    """The point `orbench plot` draws (the same Point), on OR-Bench's published models."""
    low = min([60.0, *[p.toxic_interval[0] * 100 - 3 for p in [*points, *baseline]]])
    low = max(0.0, low)

    def x(rate: float) -> float:
        return round(_LEFT + rate * 100 / 100 * _PLOT_W, 1)

    def y(rate: float) -> float:
        return round(_TOP + (100 - rate * 100) / (100 - low) * _PLOT_H, 1)

    out = [f'<svg id="plot" xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" '
           f'viewBox="0 0 {_W} {_H}" role="img" aria-label="trade-off plot">',
           '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
           'markerHeight="7" orient="auto-start-reverse"><path d="M0 0L10 5L0 10z" '
           'fill="#222"/></marker></defs>',
           f'<rect x="{_LEFT}" y="{_TOP}" width="{_PLOT_W}" height="{_PLOT_H}" fill="#fff" '
           'stroke="#999"/>']
    for tick in range(0, 101, 20):
        out.append(f'<line x1="{x(tick / 100)}" y1="{_TOP + _PLOT_H}" x2="{x(tick / 100)}" '
                   f'y2="{_TOP}" stroke="#eee"/><text x="{x(tick / 100)}" '
                   f'y="{_TOP + _PLOT_H + 16}" font-size="11" text-anchor="middle">{tick}%</text>')
    for tick in range(int(low) - int(low) % 10 + 10, 101, 10):
        out.append(f'<line x1="{_LEFT}" y1="{y(tick / 100)}" x2="{_LEFT + _PLOT_W}" '
                   f'y2="{y(tick / 100)}" stroke="#eee"/><text x="{_LEFT - 6}" '
                   f'y="{y(tick / 100) + 4}" font-size="11" text-anchor="end">{tick}%</text>')
    sources = sorted({p.x_source for p in [*points, *baseline]})
    out.append(f'<text x="{_LEFT + _PLOT_W / 2}" y="{_H - 8}" font-size="12" '
               f'text-anchor="middle">over-refusal: safe prompts refused ({_h(", ".join(sources))})'
               "</text>")
    sources = sorted({p.y_source for p in [*points, *baseline]})
    out.append(f'<text transform="rotate(-90)" x="{-(_TOP + _PLOT_H / 2)}" y="16" '
               f'font-size="12" text-anchor="middle">toxic prompts refused '
               f'({_h(", ".join(sources))})</text>')
    out.append(f'<text x="{_LEFT + 6}" y="{_TOP + 16}" font-size="12" fill="#2e7d32">'
               "better ↖</text>")
    out.append('<g id="published">')
    for model in published_models():
        if model.toxic_refusal * 100 >= low:
            out.append(f'<circle cx="{x(model.over_refusal)}" cy="{y(model.toxic_refusal)}" '
                       f'r="3" fill="#c4c4c4" stroke="#9a9a9a"><title>{_h(model.model)}: '
                       f"{model.over_refusal * 100:.1f}% / {model.toxic_refusal * 100:.1f}%"
                       "</title></circle>")
    out.append("</g>")
    pairs = arrow_pairs(baseline, points)
    for index, (start, end) in enumerate(pairs):
        out.append(f'<line id="orbench-arrow-{index}" x1="{x(start.over_refusal)}" '
                   f'y1="{y(start.toxic_refusal)}" x2="{x(end.over_refusal)}" '
                   f'y2="{y(end.toxic_refusal)}" stroke="#222" stroke-width="1.4" '
                   'marker-end="url(#arrow)"/>')
    colours = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")
    drawn = [(p, "#6b6b6b", f"orbench-baseline-{i}", " (baseline)")
             for i, p in enumerate(baseline)]
    drawn += [(p, colours[i % len(colours)], f"orbench-point-{i}", "")
              for i, p in enumerate(points)]
    for row, (point, colour, gid, note) in enumerate(drawn):
        cx, cy = x(point.over_refusal), y(point.toxic_refusal)
        (x0, x1), (y0, y1) = point.over_interval, point.toxic_interval
        label = (f"{point.label}{note}: {point.over_refusal * 100:.1f}% / "
                 f"{point.toxic_refusal * 100:.1f}%")
        out.append(f'<g id="{gid}" data-over="{point.over_refusal:.6f}" '
                   f'data-toxic="{point.toxic_refusal:.6f}">'
                   f'<line x1="{x(x0)}" y1="{cy}" x2="{x(x1)}" y2="{cy}" stroke="{colour}"/>'
                   f'<line x1="{cx}" y1="{y(y0)}" x2="{cx}" y2="{y(y1)}" stroke="{colour}"/>'
                   f'<circle cx="{cx}" cy="{cy}" r="5" fill="{colour}"><title>{_h(label)}'
                   f"</title></circle>"
                   f'<text x="{_LEFT + _PLOT_W - 8}" y="{_TOP + _PLOT_H - 10 - 16 * row}" '
                   f'font-size="11" text-anchor="end" fill="{colour}">{_h(label)}</text></g>')
    out.append("</svg>\n")
    return "".join(out)
