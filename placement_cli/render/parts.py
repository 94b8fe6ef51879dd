"""The parts a report is shown in: placement rows, counts per device and task, the reasons, the
device mapping, oneDNN's names, failure panels. They return; the commands print."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from placement_cli import messages
from placement_cli.devices import DeviceName, DeviceSpec
from placement_cli.i18n import Wording, _, shown
from placement_cli.model import (
    AS_REQUESTED,
    FREE,
    LOGGED,
    SOFT_FALLBACK,
    WITH_RESOURCE,
    Cause,
    Origin,
    Placement,
    PlacementFailure,
    Report,
    reason_counts,
)
from placement_cli.model.filtered import Filtered
from placement_cli.model.ops import onednn_base
from placement_cli.render.hints import hint
from placement_cli.render.rows import MIDDLE, WRAP, Column, RowTable
from placement_cli.render.text import clean, format_result, literal, pad_left
from placement_cli.render.view import Hints, View
from placement_cli.render.wrap import wrapped

_PALETTE = ("cyan", "magenta", "green", "yellow", "blue", "bright_red", "bright_cyan", "bright_magenta")
_STATUS_STYLE = {AS_REQUESTED: "green", FREE: "dim", SOFT_FALLBACK: "bold yellow", WITH_RESOURCE: "cyan"}


def _device_styles(devices: Iterable[str]) -> dict[str, str]:
    return {d: _PALETTE[i % len(_PALETTE)] for i, d in enumerate(sorted(set(devices)))}


def shown_placements(report: Report) -> list[Placement]:
    """What a table shows: run tables hide TensorFlow's plumbing (kept in JSON)."""
    if not report.ran:
        return list(report.placements)
    return [p for p in report.placements if not p.plumbing]


def task_key(spec: DeviceSpec | None) -> tuple[str, int]:
    """The task a device belongs to: (job, task index), TensorFlow's defaults filled in."""
    if spec is None:
        return "localhost", 0
    return spec.job or "localhost", spec.task or 0


def task_label(key: tuple[str, int]) -> str:
    return f"{key[0]}/{key[1]}"


def several_tasks(placements: Iterable[Placement]) -> bool:
    """True when the placements name more than one job/task (a ps/worker cluster's logs)."""
    return len({task_key(p.spec) for p in placements}) > 1


def _ordered(placements: list[Placement]) -> list[Placement]:
    groups: dict[Wording | None, int] = {}
    for p in placements:
        groups.setdefault(p.group, len(groups))
    if any(g is not None for g in groups):
        return sorted(placements, key=lambda p: (groups[p.group], p.line))
    if several_tasks(placements):  # task by task, worker/2 before worker/10
        return sorted(placements, key=lambda p: (task_key(p.spec), p.canonical, p.line))
    return sorted(placements, key=lambda p: (p.canonical, p.line))


def table_rows(placements: list[Placement], fold_repeats: bool) -> list[tuple[Placement, int]]:
    """The rows of a placement table, in order. Run tables show a placement repeated with the same
    request, device, status and reason (an eager op run in a loop, a function called again) once,
    with how many times it happened."""
    ordered = _ordered(placements)
    if not fold_repeats:
        return [(p, 1) for p in ordered]
    counts: dict[tuple[object, ...], list[Any]] = {}  # [placement, times]
    for p in ordered:
        key = (p.group, p.node, p.op, p.requested, p.canonical, p.status, p.reason)
        if key in counts:
            counts[key][1] += 1
        else:
            counts[key] = [p, 1]
    return [(p, n) for p, n in counts.values()]


def rows_table(rows: list[tuple[Placement, int]], *, title: str | None = None, caption: str | None = None,
               fit: bool = True) -> RowTable:
    """Node, op, requested, assigned, status (and times, why), one section per device or group.
    Devices and statuses are never cut; node names are cut in the middle, reasons wrap."""
    placements = [p for p, _ in rows]
    styles = _short_styles(placements)
    grouped = any(p.group for p in placements)
    by_task = not grouped and several_tasks(placements)
    show_times = any(n > 1 for _, n in rows)
    show_reason = any(p.reason for p in placements)
    status_styles = {shown(s): style for s, style in _STATUS_STYLE.items()}
    columns = [Column(_("node"), MIDDLE, min_width=16), Column(_("op"), MIDDLE, min_width=10), Column(_("requested")),
               Column(_("assigned"), style=styles.get), Column(_("status"), style=status_styles.get)]
    if grouped:
        columns.insert(0, Column(_("group")))
    elif by_task:
        columns.insert(0, Column(_("task")))
    if show_times:
        columns.append(Column(_("times"), justify="right", quiet="1"))
    if show_reason:
        columns.append(Column(_("why"), WRAP, min_width=16))
    table = RowTable(title=_("Placements") if title is None else title, columns=columns, caption=caption, fit=fit)
    previous: Wording | None = None
    requested_names: dict[str | None, str] = {}
    for p, times in rows:
        section = (p.group or "") if grouped else p.canonical
        if p.requested not in requested_names:
            requested_names[p.requested] = clean(p.requested.short) if p.requested else "-"
        requested = requested_names[p.requested] if p.requested or p.status != LOGGED else "?"
        row = [clean(p.node) or "-", clean(p.op) or "-", requested, clean(p.short), shown(p.status)]
        if grouped:
            row.insert(0, clean(shown(p.group)) or "-")
        elif by_task:
            row.insert(0, clean(task_label(task_key(p.spec))))
        if show_times:
            row.append(str(times))
        if show_reason:
            row.append(clean(shown(p.reason)))
        table.add_row(*row, new_section=previous is not None and section != previous)
        previous = section
    return table


def _short_styles(placements: list[Placement]) -> dict[str, str]:
    by_canonical = _device_styles({p.canonical for p in placements})
    return {p.short: by_canonical[p.canonical] for p in {p.canonical: p for p in placements}.values()}


def placement_table(report: Report, fit: bool = True) -> RowTable:
    """Every row of the report's placement table."""
    visible = shown_placements(report)
    return rows_table(table_rows(visible, report.ran), caption=plumbing_caption(report, visible, View()), fit=fit)


def plumbing_caption(report: Report, visible: list[Placement], view: View) -> str | None:
    hidden = len(report.placements) - len(visible)
    return _("{hidden} placements of TensorFlow's plumbing (_Arg/_Retval, eager ops' wrapper functions) "
             "not shown ({everything})").format(hidden=hidden, everything=view.everything) if hidden else None


def reasons_table(report: Report, fit: bool = True) -> RowTable | None:
    """Each reason once, with how many placements it explains: the short answer to "why here?"."""
    found = reason_counts([p for p in report.placements if not p.plumbing])  # a run table's rows: no plumbing
    if not found:
        return None
    table = RowTable(_("Why here?"), [Column(_("reason"), WRAP, min_width=16), Column(_("ops"), justify="right"),
                                      Column(_("for example"), WRAP, min_width=16)], fit=fit)
    for reason, n, examples in found:
        table.add_row(clean(shown(reason)), str(n), ", ".join(clean(e) for e in examples))
    return table


def _onednn_original(op: str) -> str:
    """What oneDNN's op stands for: ``_MklMatMul`` -> MatMul, ``_MklNativeFusedMatMul`` -> a MatMul
    fused with the ops after it (its bias add, its activation)."""
    original = onednn_base(op) or op
    if original.startswith("Fused") and len(original) > len("Fused"):
        return _("{op} fused with the ops after it").format(op=original.removeprefix("Fused"))
    return original


def onednn_note(report: Report, placements: bool = True) -> Text | None:
    """Once per report: which op names are oneDNN's (``_MklMatMul``), and what the program wrote.
    On CPUs where oneDNN's rewrites apply, TensorFlow logs and executes its ops under these names;
    tables and JSON keep TensorFlow's name. ``placements``: the report's placements are shown."""
    ops = {op for op, _count in report.executed or ()}
    if placements:
        ops |= {p.op for p in report.placements if p.op}
    renamed = sorted(op for op in ops if onednn_base(op))
    if not renamed:
        return None
    originals = sorted({_onednn_original(op) for op in renamed})
    matmul = any("MatMul" in name for name in originals)
    if len(renamed) == 1:
        text = _("{op} is oneDNN's version of {original}: TensorFlow ran the program's {original} with oneDNN "
                 "on the CPU and logged it under oneDNN's name.").format(op=renamed[0], original=originals[0])
    else:
        text = _("{ops} are oneDNN's versions of {originals}: TensorFlow ran the program's ops with oneDNN on "
                 "the CPU and logged them under oneDNN's names.").format(ops=", ".join(renamed),
                                                                       originals=", ".join(originals))
    if matmul:
        text += " " + _("tf.matmul (and a Dense layer) make a MatMul.")
    text += " " + _("TF_ENABLE_ONEDNN_OPTS=0 turns these rewrites off.")
    return Text(clean(text), style="italic")


def counts_table(report: Report, filtered: Filtered | None = None) -> RenderableType:
    """Placements per device, with the full device name where the width allows it. Device names are
    never cut."""
    caption = None
    if filtered is not None and filtered.filters.active:
        caption = _("{count} of {total} placements match {filters}").format(
            count=report.placement_count, total=filtered.total, filters=filtered.filters.describe())
    per_device = Narrowing(_counts(report, caption, full=True), _counts(report, caption, full=False))
    tasks = _task_counts(report)
    return per_device if tasks is None else Group(tasks, per_device)


def _device_tasks(by_device: dict[DeviceName, int]) -> dict[DeviceName, tuple[str, int]]:
    return {d: task_key(d.spec) for d in by_device}


def _task_counts(report: Report) -> Table | None:
    """Placements per job/task, when the report names more than one task; None otherwise."""
    by_device = report.by_device
    tasks = _device_tasks(by_device)
    if len(set(tasks.values())) < 2:
        return None
    ops: dict[tuple[str, int], int] = {}
    devices: dict[tuple[str, int], int] = {}
    for device, n in by_device.items():
        ops[tasks[device]] = ops.get(tasks[device], 0) + n
        devices[tasks[device]] = devices.get(tasks[device], 0) + 1
    total = sum(ops.values()) or 1
    table = Table(title=_("Per task"), title_justify="left")
    for heading in (_("task"), _("devices"), _("ops"), _("share")):
        table.add_column(heading, justify="left" if heading == _("task") else "right", no_wrap=True)
    for key in sorted(ops):
        table.add_row(literal(task_label(key)), str(devices[key]), str(ops[key]), f"{100 * ops[key] / total:.0f}%")
    return table


def _counts(report: Report, caption: str | None, *, full: bool) -> Table:
    by_device = report.by_device
    styles = _device_styles(by_device)
    total = sum(by_device.values()) or 1
    table = Table(title=_("Per device"), title_justify="left", caption=literal(caption) if caption else None,
                  caption_justify="left")
    shorts = {d: clean(d.short) for d in by_device}
    table.add_column(_("device"), no_wrap=True)
    if full:
        table.add_column(_("full name"), no_wrap=True)
    table.add_column(_("ops"), justify="right", no_wrap=True)
    table.add_column(_("share"), justify="right", no_wrap=True)
    tasks = _device_tasks(by_device)
    ordered = sorted(by_device.items(), key=lambda item: (tasks[item[0]], item[0]))
    several = len(set(tasks.values())) > 1  # a section per job/task
    for i, (device, n) in enumerate(ordered):
        name = [literal(device)] if full else []
        last_of_task = several and i + 1 < len(ordered) and tasks[ordered[i + 1][0]] != tasks[device]
        table.add_row(Text(shorts[device], style=styles[device]), *name, str(n), f"{100 * n / total:.0f}%",
                      end_section=last_of_task)
    return table


@dataclass(frozen=True)
class Narrowing:
    """The wide renderable where it fits the width, else the narrow one."""

    wide: RenderableType
    narrow: RenderableType

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        fits = Measurement.get(console, options.update(width=10**6), self.wide).maximum <= options.max_width
        yield self.wide if fits else self.narrow


def mapping_renderable(report: Report) -> RenderableType | None:
    if report.device_mapping:
        table = Table(title=_("Device mapping"), title_justify="left")
        table.add_column(_("device"), no_wrap=True)
        table.add_column(_("description"), overflow="fold")
        for m in report.device_mapping:
            table.add_row(literal(m.device.short), literal(m.description))
        return table
    if report.mapping_seen:
        return Text(_("Device mapping: no known devices (a CPU has no description)."))
    return None


def gpu_remedy(cause: Cause | None) -> str | None:
    """One line, where a run or a task stopped because GPU memory or a GPU library handle could not be
    had: so, and TensorFlow's remedies (memory growth, a memory fraction) and one GPU per task."""
    return shown(messages.GPU_TAKEN) if cause is not None and cause.gpu_taken else None


def result_cause(result: object) -> Cause | None:
    """Why a result's run stopped, where its model knows: a cluster's failed task, a run's error, a training's."""
    run = getattr(result, "run", None)
    if run is not None and getattr(run, "cause", None) is not None:
        return run.cause  # type: ignore[no-any-return]
    if isinstance(result, Report):
        if result.training is not None and result.training.cause is not None:
            return result.training.cause
        return next((f.cause for f in result.errors if f.cause is not None), None)
    return None


def failure_panel(failure: PlacementFailure, origin: Origin = Origin.RUN, hints: Hints | None = None) -> Panel:
    """One placement error of a report from ``origin``, explained: node, request, what exists, how to proceed."""
    run = origin is Origin.RUN
    hints = hints or Hints(source="program" if run else "log")
    available = ", ".join(d.short for d in failure.available_devices) or _("(not listed)")
    body = Text()
    for label, value in (
        (_("node"), failure.node or "-"),
        (_("requested"), failure.requested_device.short if failure.requested_device else "-"),
        *(((_("group requires"), failure.group_device.short),) if failure.group_device else ()),
        (_("available"), available),
        (_("TensorFlow says"), failure.says or "-"),
    ):
        body.append(f"{pad_left(label, 16)}: ", style="bold")
        body.append(clean(value) + "\n")
    remedy = gpu_remedy(failure.cause)
    if remedy:
        body.append("\n" + remedy + "\n", style="bold")
    body.append("\n" + hint(failure, hints), style="italic")
    title = _("Placement failed") if run else _("Placement error in the log")
    return Panel(wrapped(body), title=literal(f"{title} ({failure.kind})"), border_style="red", title_align="left")


def result_renderable(result: object) -> Text:
    return Text(_("result: {value}").format(value=clean(format_result(result))), style="bold")
