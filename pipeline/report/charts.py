"""The report page's charts as inline SVG strings (pure; no JavaScript needed to see them).

    bar_chart("Bytes per token", ["Latin", "Han"], [("tok", [4.1, 1.2])])
    loglog_chart("Rank against count", [("tok", [[1, 900], [2, 400], ...])])
"""

from __future__ import annotations

import math
from html import escape
from typing import Sequence

COLOURS = ("#3b6fb6", "#d9822b", "#3a9a5b", "#b64a6f", "#7a5bb6", "#8a8a3a")
ROW = 16  # height of one bar
LABEL = 130  # width of the category labels
WIDTH = 560


def _fmt(value: float) -> str:
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"


def _legend(names: Sequence[str], y: float) -> str:
    parts = []
    for i, name in enumerate(names):
        x = LABEL + i * 150
        parts.append(f'<rect x="{x}" y="{y}" width="10" height="10" fill="{COLOURS[i % len(COLOURS)]}"/>'
                     f'<text x="{x + 14}" y="{y + 9}">{escape(name)}</text>')
    return "".join(parts)


def bar_chart(title: str, categories: Sequence[str], series: Sequence[tuple[str, Sequence[float | None]]]) -> str:
    """Horizontal grouped bars: one group per category, one bar per series (None: no bar).

    Negative values (differences) grow to the left of a zero line.
    """
    values = [v for _, vs in series for v in vs if v is not None]
    low, high = min([0.0, *values]), max([0.0, *values])
    span = (high - low) or 1.0
    plot = WIDTH - LABEL - 60
    zero = LABEL + plot * (-low) / span
    group = ROW * len(series) + 6
    height = 24 + group * len(categories) + 20
    parts = [f'<svg class="chart" role="img" aria-label="{escape(title)}" viewBox="0 0 {WIDTH} {height}" '
             f'width="{WIDTH}" height="{height}" xmlns="http://www.w3.org/2000/svg">',
             f'<title>{escape(title)}</title>', f'<text class="title" x="0" y="14">{escape(title)}</text>']
    for c, category in enumerate(categories):
        top = 24 + c * group
        parts.append(f'<text x="{LABEL - 6}" y="{top + group / 2 + 2}" text-anchor="end">{escape(category)}</text>')
        for s, (name, vs) in enumerate(series):
            value = vs[c]
            if value is None:
                continue
            x0 = zero + min(0.0, value) * plot / span
            width = abs(value) * plot / span
            y = top + s * ROW
            parts.append(
                f'<rect x="{x0:.1f}" y="{y}" width="{max(width, 0.5):.1f}" height="{ROW - 3}" '
                f'fill="{COLOURS[s % len(COLOURS)]}"><title>{escape(name)}, {escape(category)}: {_fmt(value)}</title></rect>'
                f'<text x="{x0 + width + 3 if value >= 0 else x0 - 3:.1f}" y="{y + ROW - 5}" '
                f'text-anchor="{"start" if value >= 0 else "end"}" class="value">{_fmt(value)}</text>'
            )
    parts.append(f'<line x1="{zero:.1f}" x2="{zero:.1f}" y1="20" y2="{height - 20}" class="axis"/>')
    parts.append(_legend([name for name, _ in series], height - 14))
    parts.append("</svg>")
    return "".join(parts)


def loglog_chart(title: str, series: Sequence[tuple[str, Sequence[Sequence[float]]]]) -> str:
    """Lines through (x, y) points on log-log axes (points with x or y <= 0 are left out)."""
    points = [(x, y) for _, ps in series for x, y in ps if x > 0 and y > 0]
    height, left, bottom, top, right = 300, 60, 40, 24, 20
    parts = [f'<svg class="chart" role="img" aria-label="{escape(title)}" viewBox="0 0 {WIDTH} {height}" '
             f'width="{WIDTH}" height="{height}" xmlns="http://www.w3.org/2000/svg">',
             f'<title>{escape(title)}</title>', f'<text class="title" x="0" y="14">{escape(title)}</text>']
    if points:
        x_max = math.log10(max(x for x, _ in points)) or 1.0
        y_max = math.log10(max(y for _, y in points)) or 1.0

        def at(x: float, y: float) -> tuple[float, float]:
            return (left + (WIDTH - left - right) * math.log10(x) / x_max,
                    height - bottom - (height - bottom - top) * math.log10(y) / y_max)

        for power in range(int(x_max) + 1):
            px, _ = at(10 ** power, 1)
            parts.append(f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{top}" y2="{height - bottom}" class="grid"/>'
                         f'<text x="{px:.1f}" y="{height - bottom + 14}" text-anchor="middle">{_fmt(10 ** power)}</text>')
        for power in range(int(y_max) + 1):
            _, py = at(1, 10 ** power)
            parts.append(f'<line x1="{left}" x2="{WIDTH - right}" y1="{py:.1f}" y2="{py:.1f}" class="grid"/>'
                         f'<text x="{left - 4}" y="{py + 4:.1f}" text-anchor="end">{_fmt(10 ** power)}</text>')
        for s, (name, ps) in enumerate(series):
            path = " ".join("{:.1f},{:.1f}".format(*at(x, y)) for x, y in ps if x > 0 and y > 0)
            parts.append(f'<polyline points="{path}" fill="none" stroke="{COLOURS[s % len(COLOURS)]}" stroke-width="1.5">'
                         f'<title>{escape(name)}</title></polyline>')
        parts.append(f'<text x="{WIDTH - right}" y="{height - 4}" text-anchor="end">rank (log)</text>'
                     f'<text x="4" y="{top + 10}">count (log)</text>')
    parts.append(_legend([name for name, _ in series], height - 12) if len(series) > 1 else "")
    parts.append("</svg>")
    return "".join(parts)
