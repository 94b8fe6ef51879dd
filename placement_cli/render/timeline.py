"""A timed run's step as pictures: an SVG timeline (one lane per device, its kernels as bars, its copies
as arrows between lanes, coloured by device as the graph's pictures are) and Chrome trace-event JSON
that Perfetto and chrome://tracing open, each op carrying its placement's status and reason."""

from __future__ import annotations

import html
import json
from typing import Any

from placement_cli.devices import DeviceName
from placement_cli.i18n import _, english, shown
from placement_cli.messages import duration
from placement_cli.model import Report
from placement_cli.model.cost import COPY, Cost, TimelineEvent
from placement_cli.render.graph import (
    CROSSING,
    FONT_SIZE,
    LEFT,
    TITLE_SIZE,
    colour_of,
    cut_cells,
    device_order,
    text_width,
)
from placement_cli.render.text import clean

UNKNOWN = "?"  # the lane of events whose device nothing says
LANE_H, BAR_H, HEAD = 34, 18, 64
LABEL_W = 120  # the lanes' names, left of the time axis
PLOT_W = 900
AXIS_PAD = 40  # room right of the axis for its last label


def _lane(device: DeviceName | None) -> str:
    if device is None:
        return UNKNOWN
    return device.spec.canonical if device.spec is not None else str(device)


def _lanes(report: Report, cost: Cost) -> tuple[str, ...]:
    """Every device the step used, in device order; the report's devices first get their colours."""
    found = {p.canonical for p in report.placements if not p.plumbing}
    found.update(_lane(e.device) for e in cost.timeline)
    found.update(_lane(e.target) for e in cost.timeline if e.kind == COPY)
    return tuple(sorted(found, key=lambda d: (d == UNKNOWN, device_order(d))))


def _title(report: Report, cost: Cost) -> str:
    what = clean(shown(report.title)) if report.title else "placement"
    return _("{what}: one measured step, the median of {steps} ({wall})").format(
        what=what, wall=duration(cost.timeline_wall), steps=cost.steps)


def _wall(cost: Cost) -> float:
    """The time axis: the drawn step's wall time, or its last event's end where that comes later."""
    ends = [e.start + e.duration for e in cost.timeline]
    return max([cost.timeline_wall, *ends])


def _hover(e: TimelineEvent) -> str:
    lines = [f"{e.node} ({e.op})", f"{duration(e.duration)} at +{duration(e.start)}"]
    if e.kind == COPY:
        lines.append(f"{_short(e.device)} -> {_short(e.target)}" + ("" if e.bytes is None else f", {e.bytes:,} B"))
    if e.status:
        lines.append(shown(e.status) + (f": {shown(e.reason)}" if e.reason else ""))
    return clean("\n".join(lines))


def _short(device: DeviceName | None) -> str:
    return UNKNOWN if device is None else device.short


def render_timeline_svg(report: Report) -> str:
    """The median measured step, one lane per device; nothing installed needed to draw or view it."""
    cost = report.cost
    assert cost is not None
    lanes = _lanes(report, cost)
    known = tuple(d for d in lanes if d != UNKNOWN)
    wall = _wall(cost) or 1.0
    title = _title(report, cost)
    width = max(LEFT * 2 + LABEL_W + PLOT_W + AXIS_PAD, LEFT * 2 + text_width(title, TITLE_SIZE, bold=True))
    height = HEAD + LANE_H * len(lanes) + 30
    top = {d: HEAD + i * LANE_H for i, d in enumerate(lanes)}

    def x(us: float) -> float:
        return round(LEFT + LABEL_W + PLOT_W * us / wall, 2)

    def colour(d: str) -> str:
        return colour_of(known, d) if d in known else "#cccccc"

    e = html.escape
    out = [(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" font-family="DejaVu Sans, Liberation Sans, Arial, '
            f'Noto Sans CJK SC, Microsoft YaHei, sans-serif" font-size="{FONT_SIZE}">'),
           f'<title>{e(title)}</title>',
           ('<defs><marker id="copy" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" '
            f'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="{CROSSING}"/></marker></defs>'),
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{LEFT}" y="20" font-size="{TITLE_SIZE}" font-weight="bold">{e(title)}</text>',
           f'<text x="{LEFT}" y="38" fill="#555">{e(_("bars: kernels by device; red arrows: copies between devices; hover for each one"))}</text>']
    for i in range(5):  # the time axis
        at = wall * i / 4
        out.append(f'<line x1="{x(at)}" y1="{HEAD - 8}" x2="{x(at)}" y2="{height - 24}" stroke="#ddd"/>'
                   f'<text x="{x(at)}" y="{height - 10}" text-anchor="middle" fill="#555">{e(duration(at))}</text>')
    for d in lanes:
        name = cut_cells(clean(DeviceName(d).short if d != UNKNOWN else _("unknown device")), 18)
        out.append(f'<g class="lane" data-device="{e(d)}"><rect x="2" y="{top[d]}" width="{width - 4}" '
                   f'height="{LANE_H - 4}" fill="{colour(d)}" fill-opacity="0.18" stroke="#999"/>'
                   f'<text x="{LEFT}" y="{top[d] + 20}" font-weight="bold">{e(name)}</text><title>{e(d)}</title></g>')
    for ev in cost.timeline:
        if ev.kind == COPY:
            continue
        d = _lane(ev.device)
        x1, x2 = x(ev.start), x(ev.start + ev.duration)
        bar = max(x2 - x1, 1.0)
        label = cut_cells(clean(ev.node.rsplit("/", 1)[-1]), max(0, int(bar / (FONT_SIZE * 0.62)) - 1)) if bar > 30 else ""
        out.append(f'<g class="op" data-device="{e(d)}" data-node="{e(clean(ev.node))}"><title>{e(_hover(ev))}</title>'
                   f'<rect x="{x1}" y="{top[d] + 6}" width="{bar:.2f}" height="{BAR_H}" fill="{colour(d)}" '
                   'stroke="#333" stroke-width="0.5"/>'
                   + (f'<text x="{x1 + 3}" y="{top[d] + 19}">{e(label)}</text>' if label else "") + "</g>")
    for ev in cost.timeline:  # copies last, on top
        if ev.kind != COPY:
            continue
        a, b = _lane(ev.device), _lane(ev.target)
        x1, x2 = x(ev.start), x(ev.start + ev.duration)
        y1, y2 = top[a] + LANE_H // 2, top[b] + LANE_H // 2 - (6 if top[b] > top[a] else -6)
        out.append(f'<g class="copy" data-from="{e(a)}" data-to="{e(b)}"><title>{e(_hover(ev))}</title>'
                   f'<line x1="{x1}" y1="{y1}" x2="{max(x2, x1 + 1)}" y2="{y2}" stroke="{CROSSING}" stroke-width="2" '
                   'marker-end="url(#copy)"/></g>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def render_chrome_trace(report: Report) -> str:
    """The median measured step as Chrome's trace-event JSON: one thread per device, each kernel a
    complete event whose args hold its placement; each copy an event on its source and a flow arrow to
    its target. Times in microseconds from the step's start."""
    cost = report.cost
    assert cost is not None
    lanes = _lanes(report, cost)
    tid = {d: i + 1 for i, d in enumerate(lanes)}
    events: list[dict[str, Any]] = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0,
                                     "args": {"name": english(report.title) or "placement"}}]
    for d in lanes:
        events.append({"ph": "M", "name": "thread_name", "pid": 1, "tid": tid[d],
                       "args": {"name": DeviceName(d).short if d != UNKNOWN else "unknown device"}})
        events.append({"ph": "M", "name": "thread_sort_index", "pid": 1, "tid": tid[d], "args": {"sort_index": tid[d]}})
    for n, ev in enumerate(cost.timeline):
        lane = _lane(ev.device)
        args: dict[str, Any] = {"op": ev.op, "device": ev.device, "graph": ev.graph,
                                "status": english(ev.status), "reason": english(ev.reason)}
        if ev.kind == COPY:
            args.update(to=ev.target, bytes=ev.bytes)
        events.append({"ph": "X", "name": ev.node, "cat": "copy" if ev.kind == COPY else "op", "pid": 1,
                       "tid": tid[lane], "ts": round(ev.start, 3), "dur": round(ev.duration, 3), "args": args})
        if ev.kind == COPY:
            events.append({"ph": "s", "id": n, "name": "copy", "cat": "copy", "pid": 1, "tid": tid[lane],
                           "ts": round(ev.start, 3)})
            events.append({"ph": "f", "id": n, "name": "copy", "cat": "copy", "pid": 1,
                           "tid": tid[_lane(ev.target)], "ts": round(ev.start + ev.duration, 3)})
    return json.dumps({"traceEvents": events, "displayTimeUnit": "ms",
                       "otherData": {"steps": cost.steps, "warmup": cost.warmup, "source": cost.source,
                                     "wall_us": cost.wall.to_dict()}}, ensure_ascii=False, indent=1) + "\n"
