"""Line charts as inline SVG, drawn on the server: no script, nothing fetched, so the console's
Content-Security-Policy (`default-src 'none'`) needs nothing added for them.

One chart is a few series over the same minutes: a polyline each, and a circle per point
holding its figures (`data-series`, `data-minute`, `data-value`, and a `<title>` the browser
shows on hover), so what is drawn can be read back exactly.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from gateway.http.console.page_layout import esc

WIDTH, HEIGHT = 640, 180
_LEFT, _RIGHT, _TOP, _BOTTOM = 56, 12, 12, 24


@dataclass(frozen=True)
class Series:
    name: str
    colour: str
    points: Sequence[tuple[int, float]]  # (epoch minute, value), oldest first


def _clock(minute: int) -> str:
    return time.strftime("%H:%M", time.gmtime(minute * 60))


def _figure(value: float) -> str:
    return f"{value:.0f}" if value >= 100 or value == int(value) else f"{value:.2g}"


def line_chart(label: str, unit: str, minutes: Sequence[int], series: Sequence[Series]) -> str:
    """An `<svg>` plotting `series` over `minutes` (the x axis, oldest first), y from 0 to the
    highest point; `unit` names the y axis (in the legend and each point's title)."""
    first, last = minutes[0], minutes[-1]
    top = max((v for s in series for _, v in s.points), default=0.0) or 1.0
    plot_w, plot_h = WIDTH - _LEFT - _RIGHT, HEIGHT - _TOP - _BOTTOM

    def x(minute: int) -> float:
        return _LEFT + (minute - first) / max(last - first, 1) * plot_w

    def y(value: float) -> float:
        return _TOP + plot_h - value / top * plot_h

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{WIDTH}"'
        f' height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img"'
        f' aria-label="{esc(label)}" data-chart="{esc(label)}">',
        f"<title>{esc(label)}</title>",
        f'<rect x="{_LEFT}" y="{_TOP}" width="{plot_w}" height="{plot_h}" fill="#fafafa"'
        ' stroke="#ccc"/>',
        f'<text x="{_LEFT - 4}" y="{_TOP + 10}" text-anchor="end" font-size="11">'
        f"{esc(_figure(top))}</text>",
        f'<text x="{_LEFT - 4}" y="{_TOP + plot_h}" text-anchor="end" font-size="11">0</text>',
        f'<text x="{_LEFT}" y="{HEIGHT - 6}" font-size="11">{_clock(first)}</text>',
        f'<text x="{WIDTH - _RIGHT}" y="{HEIGHT - 6}" text-anchor="end" font-size="11">'
        f"{_clock(last)} UTC</text>",
    ]
    for s in series:
        if not s.points:
            continue
        line = " ".join(f"{x(m):.1f},{y(v):.1f}" for m, v in s.points)
        parts.append(
            f'<polyline points="{line}" fill="none" stroke="{s.colour}" stroke-width="1.5"/>'
        )
        for minute, value in s.points:
            parts.append(
                f'<circle cx="{x(minute):.1f}" cy="{y(value):.1f}" r="3" fill="{s.colour}"'
                f' data-series="{esc(s.name)}" data-minute="{minute}" data-value="{value:g}">'
                f"<title>{_clock(minute)} {esc(s.name)}: {esc(_figure(value))} {esc(unit)}"
                "</title></circle>"
            )
    legend = "".join(
        f'<span class="legend" style="color:{s.colour}">&#9632; {esc(s.name)}</span> '
        for s in series
    )
    return "".join(parts) + f'</svg><div>{legend}<span class="note">({esc(unit)})</span></div>'
