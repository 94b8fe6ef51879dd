"""A timed run's tables: time per step per device, the ops that take most, the copies per link, and
the placements that cost most with TensorFlow's reason for each."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import RenderableType
from rich.text import Text

from placement_cli.devices import DeviceName
from placement_cli.i18n import Wording, _, shown
from placement_cli.messages import duration
from placement_cli.model import Report
from placement_cli.render.rows import Column, RowTable
from placement_cli.render.text import clean
from placement_cli.render.view import View

if TYPE_CHECKING:
    from placement_cli.model.cost import Cost, Spread

TOP_OPS = 10


def spread(s: Spread) -> str:
    """``5.31 ms (4.9 ms..6.1 ms)``: the mean, and the range over the measured steps."""
    if s.low == s.high:
        return duration(s.mean)
    return f"{duration(s.mean)} ({duration(s.low)}..{duration(s.high)})"


def _bytes(n: int | None) -> str:
    return "?" if n is None else f"{n:,} B"


def _device(device: DeviceName | None) -> str:
    return _("unknown") if device is None else clean(device.short)


def _node(node: str, function: str | None, several: bool) -> str:
    """A node, and the tf.function whose graph holds it where the rows come from several graphs."""
    return clean(node) if not several else f"{clean(node)} ({clean(function) if function else '-'})"


def _why(status: Wording | None, reason: Wording | None) -> str:
    said = [clean(shown(w)) for w in (status, reason) if w]
    return ": ".join(said) if said else _("unknown")


def timed_renderables(report: Report, view: View | None = None) -> list[RenderableType]:
    """A report's times (--time), or why it has none; nothing for a run that was not timed."""
    parts: list[RenderableType] = []
    if report.cost is not None:
        parts.extend(cost_renderables(report.cost, view))
    if report.timing_error is not None:
        what = _("No times: {why}") if report.cost is None else _("Times: {why}")
        parts.append(Text(what.format(why=clean(report.timing_error)), style="italic"))
    return parts


def cost_renderables(cost: Cost, view: View | None = None) -> list[RenderableType]:
    """Everything --time shows of a run."""
    view = view or View()
    parts: list[RenderableType] = [] if cost.steps == 0 else [_headline(cost)]
    if cost.steps == 0:
        if cost.step and cost.calls:
            said = (_("No step was measured: {step} ran once and the warm-up leaves out the first {warmup} "
                      "(--warmup, capture's warmup=)") if cost.calls == 1 else
                    _("No step was measured: {step} ran {calls} times and the warm-up leaves out the first {warmup} "
                      "(--warmup, capture's warmup=)")).format(step=clean(cost.step), calls=cost.calls,
                                                              warmup=cost.warmup)
        else:
            said = _("No step was measured: no tf.function or Session ran while the profiler was on.")
        parts.append(Text(said, style="italic"))
        return parts
    if cost.overlapped:
        parts.append(Text(_("Calls of {step} ran at once (from several threads): a step runs from one call's start to "
                            "the next's, and the times of calls that overlap add up.").format(step=clean(cost.step or "")),
                          style="italic"))
    devices = RowTable(_("Time per step, per device"), [
        Column(_("device")), Column(_("busy"), justify="right"), Column(_("share"), justify="right"),
        Column(_("idle"), justify="right"), Column(_("ops"), justify="right")], fit=view.fit)
    for d in cost.devices:
        devices.add_row(_device(d.device), spread(d.busy), f"{d.share:.0%}", duration(d.idle), str(d.ops))
    parts.append(devices if cost.devices else Text(_("No kernel was timed on any device."), style="italic"))
    if cost.ops:
        ops = RowTable(_("Ops that take the most time per step"), [
            Column(_("node")), Column(_("op")), Column(_("device")), Column(_("time"), justify="right"),
            Column(_("status / reason"))], fit=view.fit)
        several = len({o.function for o in cost.ops}) > 1  # two tf.functions may each have a MatMul
        shown_ops = cost.ops if view.all_rows else cost.ops[:TOP_OPS]
        for o in shown_ops:
            ops.add_row(_node(o.node, o.function, several), clean(o.op), _device(o.device), spread(o.time),
                        _why(o.status, o.reason))
        if len(cost.ops) > len(shown_ops):
            ops.caption = _("{shown} of {total} timed nodes (--all or --json has them all)").format(
                shown=len(shown_ops), total=len(cost.ops))
        parts.append(ops)
    parts.extend(_copies(cost, view))
    if cost.costly:
        costly = RowTable(_("Costly placements, per step"), [
            Column(_("node")), Column(_("device")), Column(_("why there")), Column(_("own time"), justify="right"),
            Column(_("of device"), justify="right"), Column(_("copies caused"), justify="right"),
            Column(_("copy time"), justify="right")], fit=view.fit)
        several = len({c.function for c in cost.costly}) > 1
        for c in cost.costly:
            caused = "0" if not c.copies else f"{c.copies:g} ({_bytes(c.copy_bytes)})"
            costly.add_row(_node(c.node, c.function, several), _device(c.device), _why(c.status, c.reason), duration(c.time),
                           f"{c.share:.0%}", caused, duration(c.copy_time) if c.copies else "-")
        costly.caption = _("a copy is charged to its reader, which runs away from its input, or to the end "
                           "TensorFlow moved by a rule (a soft fallback, a resource's device)")
        parts.append(costly)
    return parts


def _headline(cost: Cost) -> Text:
    what = _("one call of {function}").format(function=clean(cost.step)) if cost.step else _("one step")
    template = _("Timed: 1 step after {warmup} warm-up, {what} takes {wall}") if cost.steps == 1 else \
        _("Timed: {steps} steps after {warmup} warm-up, {what} takes {wall}")
    line = Text(template.format(steps=cost.steps, warmup=cost.warmup, what=what, wall=spread(cost.wall)), style="bold")
    overhead = cost.overhead
    if overhead is not None and cost.plain is not None:
        if overhead <= max(cost.plain.stdev, cost.wall.stdev):
            said = _("; without the profiler {plain} (its cost is within the steps' own spread)")
        else:
            said = _("; without the profiler {plain} (its cost: {overhead} a step)")
        line.append(said.format(plain=spread(cost.plain), overhead=duration(overhead)), style="dim")
    line.append(_("; the profiler took {time} to start, stop and read").format(time=duration(cost.collect * 1e6)),
                style="dim")
    return line


def _copies(cost: Cost, view: View) -> list[RenderableType]:
    links = cost.links
    if not links:
        return [Text(_("No copies between devices in the measured steps."), style="italic")]
    table = RowTable(_("Copies per link, per step"), [
        Column(_("from")), Column(_("to")), Column(_("copies"), justify="right"), Column(_("bytes"), justify="right"),
        Column(_("time"), justify="right")], fit=view.fit)
    for t in links:
        table.add_row(_device(t.source), _device(t.target), f"{t.copies:g}", _bytes(t.bytes), duration(t.time))
    parts: list[RenderableType] = [table]
    shared = sorted({_device(d) for t in links if t.physical is False for d in (t.source, t.target)})
    if shared:
        parts.append(Text(_("{devices} are logical devices sharing one memory: a copy between them hands a buffer "
                            "over, its time is the hand-over's, not a transfer's.").format(devices=", ".join(shared)),
                          style="italic"))
    return parts
