"""Rich renderables for a Report; they return, the commands print."""

from __future__ import annotations

import re
from collections.abc import Iterable

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from placement_cli.devices import short_name
from placement_cli.model import AS_REQUESTED, FREE, LOGGED, SOFT_FALLBACK, Placement, PlacementFailure, Report

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_PALETTE = ("cyan", "magenta", "green", "yellow", "blue", "bright_red", "bright_cyan", "bright_magenta")
# Plumbing of TensorFlow's eager wrappers and functions: hidden from run tables (kept in JSON).
_INTERNAL_OPS = frozenset({"_Arg", "_Retval", "_DeviceArg", "_DeviceRetval"})
_STATUS_STYLE = {AS_REQUESTED: "green", FREE: "dim", SOFT_FALLBACK: "bold yellow"}


def clean(text: str | None) -> str:
    """Log text made safe to show: no escape sequences or other control characters."""
    return _CONTROL.sub("\N{REPLACEMENT CHARACTER}", text) if text else ""


def literal(text: str | None, style: str = "") -> Text:
    """Text shown exactly as written (``[red]`` stays ``[red]``)."""
    return Text(clean(text) or "-", style=style)


def _device_styles(devices: Iterable[str]) -> dict[str, str]:
    return {d: _PALETTE[i % len(_PALETTE)] for i, d in enumerate(sorted(set(devices)))}


def _shown(report: Report, run: bool) -> list[Placement]:
    if not run:
        return list(report.placements)
    return [p for p in report.placements if p.op not in _INTERNAL_OPS and not p.wrapper]


def _ordered(placements: list[Placement]) -> list[Placement]:
    groups: dict[str | None, int] = {}
    for p in placements:
        groups.setdefault(p.group, len(groups))
    if any(g is not None for g in groups):
        return sorted(placements, key=lambda p: (groups[p.group], p.line))
    return sorted(placements, key=lambda p: (p.canonical, p.line))


def _repeats(placements: list[Placement], run: bool) -> list[tuple[Placement, int]]:
    """Run tables show a placement repeated with the same request, device, status and reason
    (an eager op run in a loop, a function called again) once, with how many times it happened."""
    if not run:
        return [(p, 1) for p in placements]
    counts: dict[tuple[object, ...], list] = {}
    for p in placements:
        key = (p.group, p.node, p.op, p.requested, p.canonical, p.status, p.reason)
        if key in counts:
            counts[key][1] += 1
        else:
            counts[key] = [p, 1]
    return [(p, n) for p, n in counts.values()]


def placement_table(report: Report, run: bool = False) -> Table:
    """Node, op, requested, assigned, status (and why), one section per device or group."""
    shown = _shown(report, run)
    styles = _device_styles(p.canonical for p in shown)
    grouped = any(p.group for p in shown)
    hidden = len(report.placements) - len(shown)
    caption = (f"{hidden} placements of TensorFlow's plumbing (_Arg/_Retval, eager ops' wrapper functions) "
               "not shown (--json has all)") if hidden else None
    table = Table(title="Placements", title_justify="left", expand=False, caption=caption, caption_justify="left")
    if grouped:
        table.add_column("group")
    for name in ("node", "op", "requested", "assigned", "status"):
        table.add_column(name)
    rows = _repeats(_ordered(shown), run)
    show_times = any(n > 1 for _, n in rows)
    if show_times:
        table.add_column("times", justify="right")
    show_reason = any(p.reason for p in shown)
    if show_reason:
        table.add_column("why")
    previous: str | None = None
    for p, times in rows:
        section = (p.group or "") if grouped else p.canonical
        if table.row_count and section != previous:
            table.add_section()
        previous = section
        requested = short_name(p.requested) if p.requested else ("?" if p.status == LOGGED else "-")
        row = [
            literal(p.node),
            literal(p.op),
            literal(requested),
            literal(p.short, styles[p.canonical]),
            literal(p.status, _STATUS_STYLE.get(p.status, "")),
        ]
        if grouped:
            row.insert(0, literal(p.group))
        if show_times:
            row.append(Text(str(times)))
        if show_reason:
            row.append(literal(p.reason) if p.reason else Text(""))
        table.add_row(*row)
    return table


def reasons_table(report: Report) -> Table | None:
    """Each reason once, with how many placements it explains: the short answer to "why here?"."""
    from placement_cli.why import reason_counts  # noqa: PLC0415 - only run reports have reasons

    found = reason_counts(report.placements)
    if not found:
        return None
    table = Table(title="Why here?", title_justify="left")
    table.add_column("reason")
    table.add_column("ops", justify="right")
    table.add_column("for example")
    for reason, n, examples in found:
        table.add_row(literal(reason), str(n), literal(", ".join(examples)))
    return table


def counts_table(report: Report) -> Table:
    """Placements per device, with the full device name."""
    by_device = report.by_device
    styles = _device_styles(by_device)
    total = sum(by_device.values()) or 1
    table = Table(title="Per device", title_justify="left")
    table.add_column("device")
    table.add_column("full name")
    table.add_column("ops", justify="right")
    table.add_column("share", justify="right")
    for device, n in sorted(by_device.items()):
        table.add_row(literal(short_name(device), styles[device]), literal(device), str(n), f"{100 * n / total:.0f}%")
    return table


def mapping_renderable(report: Report) -> RenderableType | None:
    if report.device_mapping:
        table = Table(title="Device mapping", title_justify="left")
        table.add_column("device")
        table.add_column("description")
        for m in report.device_mapping:
            table.add_row(literal(short_name(m.device)), literal(m.description))
        return table
    if report.mapping_seen:
        return Text("Device mapping: no known devices (a CPU has no description).")
    return None


_PROGRAM_HINT = ("Fix in the program: pin to a device that exists, or allow soft placement "
                 "(ConfigProto(allow_soft_placement=True) in TF1, tf.config.set_soft_device_placement(True) in TF2).")


def _hint(failure: PlacementFailure, run: bool) -> str:
    if not run:
        return _PROGRAM_HINT
    if failure.kind == "no_kernel":
        return ("This op has no kernel for the requested device type. Rerun with --soft to let "
                "TensorFlow run it on a device that has one, or pin it elsewhere.")
    if failure.kind == "colocation":
        return "Ops that must share a device were pinned apart. Pin them together, or rerun with --soft."
    return ("Rerun with --soft to let TensorFlow fall back to a device that exists, pin to a device "
            "listed by `placement devices`, or use --cpus N with /cpu:K devices to try the same lesson "
            "across several (logical) devices on this machine.")


def failure_panel(failure: PlacementFailure, run: bool = True) -> Panel:
    """One placement error, explained: node, request, what exists, how to proceed."""
    available = ", ".join(short_name(d) for d in failure.available_devices) or "(not listed)"
    body = Text()
    for label, value in (
        ("node", failure.node or "-"),
        ("requested", short_name(failure.requested_device) if failure.requested_device else "-"),
        ("available", available),
        ("TensorFlow says", failure.message.splitlines()[0] if failure.message else "-"),
    ):
        body.append(f"{label:>16}: ", style="bold")
        body.append(clean(value) + "\n")
    body.append("\n" + _hint(failure, run), style="italic")
    title = "Placement failed: InvalidArgumentError" if run else "Placement error in the log"
    return Panel(body, title=f"{title} ({failure.kind})", border_style="red", title_align="left")


def result_renderable(result: object) -> Text:
    return Text(f"result: {format_result(result)}", style="bold")


def format_result(result: object) -> str:
    if isinstance(result, list):
        return "[" + ", ".join(format_result(x) for x in result) + "]"
    if isinstance(result, float) and result.is_integer():
        return str(int(result))
    return str(result)


def copies_table(report: Report) -> RenderableType:
    """The executed graph's copies between devices."""
    if not report.copies:
        return Text("No copies between devices: every op that exchanges tensors shares a device.")
    table = Table(title="Copies between devices (_Send/_Recv)", title_justify="left")
    table.add_column("tensor")
    table.add_column("from")
    table.add_column("to")
    for c in report.copies:
        table.add_row(literal(c.tensor), literal(short_name(c.source)), literal(short_name(c.target)))
    return table


def report_renderables(report: Report, *, run: bool, summary: bool = False) -> list[RenderableType]:
    """Everything a command shows for a report, in reading order."""
    parts: list[RenderableType] = []
    if report.title:
        parts.append(Text(report.title, style="bold underline"))
    if not summary:
        mapping = mapping_renderable(report)
        if mapping is not None:
            parts.append(mapping)
        if report.placements:
            parts.append(placement_table(report, run=run))
    if report.placement_count:
        parts.append(counts_table(report))
    reasons = reasons_table(report) if run else None
    if reasons is not None:
        parts.append(reasons)
    if report.copies is not None:
        parts.append(copies_table(report))
    parts.extend(failure_panel(f, run) for f in report.errors)
    if run and report.result is not None:
        parts.append(result_renderable(report.result))
    return parts


def report_group(report: Report, *, run: bool, summary: bool = False) -> Group:
    return Group(*report_renderables(report, run=run, summary=summary))
