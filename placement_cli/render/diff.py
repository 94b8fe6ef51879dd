"""`placement diff` as tables: what moved, what only one side has, the devices side by side, the
copies; a digest when the rows do not fit a screen. Renderers return, the command prints."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from rich.console import Group, RenderableType
from rich.text import Text

from placement_cli import messages
from placement_cli.devices import short_name
from placement_cli.i18n import Wording, _, english, shown
from placement_cli.messages import duration
from placement_cli.model import (
    Change,
    LinkTotal,
    PlacementDiff,
)
from placement_cli.model.diff import total
from placement_cli.model.report import STATUSES
from placement_cli.render.digest import MAX_KEYS, CrossTab, scope_counts
from placement_cli.render.rows import MIDDLE, Column, RowTable
from placement_cli.render.text import KeptTail, clean
from placement_cli.render.view import View

if TYPE_CHECKING:
    from placement_cli.model.cost import LinkCost, StepTimes

_EXAMPLES = 3  # names a digest row gives as examples


def _status(status: Wording | None) -> str:
    return "-" if status is None else clean(shown(STATUSES.get(english(status), status)))


def _device(canonical: str | None) -> str:
    return clean(short_name(canonical)) if canonical else "-"


def _name(change: Change) -> str:
    """The node, and the tf.function whose graph holds it (two functions' MatMuls are two nodes)."""
    if change.node is None:
        return shown(messages.EAGER_SCOPE)
    return clean(change.node if change.graph is None else f"{change.graph}: {change.node}")


def _counted(changes: Sequence[Change]) -> bool:
    return any(c.count > 1 or c.eager for c in changes)


def moved_table(changes: Sequence[Change], fit: bool) -> RowTable:
    statuses = any(c.old_status or c.new_status for c in changes)
    counts = _counted(changes)
    columns = [Column(_("node"), MIDDLE, min_width=16), Column(_("op"), MIDDLE, min_width=10),
               Column(_("old device")), Column(_("new device"))]
    if statuses:
        columns += [Column(_("old status")), Column(_("new status"))]
    if counts:
        columns.append(Column(_("count"), justify="right"))
    table = RowTable(_("Moved ({count})").format(count=total(changes)), columns, fit=fit)
    for c in changes:
        row = [_name(c), clean(c.op) or "-", _device(c.source), _device(c.target)]
        if statuses:
            row += [_status(c.old_status), _status(c.new_status)]
        if counts:
            row.append(str(c.count))
        table.add_row(*row)
    return table


def side_table(title: str, changes: Sequence[Change], fit: bool) -> RowTable:
    statuses = any(c.status for c in changes)
    counts = _counted(changes)
    columns = [Column(_("node"), MIDDLE, min_width=16), Column(_("op"), MIDDLE, min_width=10), Column(_("device"))]
    if statuses:
        columns.append(Column(_("status")))
    if counts:
        columns.append(Column(_("count"), justify="right"))
    table = RowTable(title, columns, fit=fit)
    for c in changes:
        row = [_name(c), clean(c.op) or "-", _device(c.device)]
        if statuses:
            row.append(_status(c.status))
        if counts:
            row.append(str(c.count))
        table.add_row(*row)
    return table


def moved_digest(changes: Sequence[Change], fit: bool) -> RowTable:
    """Moves summed per op type and pair of devices, with a few names each."""
    found: dict[tuple[str, str, str], tuple[int, list[str]]] = {}
    for c in changes:
        key = (c.op or "?", c.source or "", c.target or "")
        n, names = found.get(key, (0, []))
        if len(names) < _EXAMPLES and c.node is not None:
            names.append(_name(c))  # with its function: two functions' MatMuls are two nodes
        found[key] = (n + c.count, names)
    ranked = sorted(found.items(), key=lambda t: (-t[1][0], t[0]))
    table = RowTable(_("Moved ({count}), per op type").format(count=total(changes)),
                     [Column(_("op"), MIDDLE, min_width=10), Column(_("old device")), Column(_("new device")),
                      Column(_("count"), justify="right"), Column(_("for example"), MIDDLE, min_width=16)], fit=fit)
    for (op, source, target), (n, names) in ranked[:MAX_KEYS]:
        table.add_row(clean(op), _device(source), _device(target), str(n), ", ".join(names) or "-")
    rest = ranked[MAX_KEYS:]
    if rest:
        table.add_row(_("({count} more)").format(count=len(rest)), "", "", str(sum(n for _k, (n, _e) in rest)), "",
                      new_section=True)
    return table


def side_digest(title: str, changes: Sequence[Change], fit: bool) -> list[RenderableType]:
    """Placements only one side has, per op type and device, then per name scope and device."""
    by_op: Counter[tuple[str, str]] = Counter()

    def rows() -> Iterator[tuple[str | None, str, int]]:
        for c in changes:  # read once: a big diff's rows are made as they are read
            by_op[c.op or "?", c.device] += c.count
            yield c.node, c.device, c.count

    _depth, scoped = scope_counts(rows())
    by_scope: Counter[tuple[str, str]] = Counter()
    for (scope, device), n in scoped.items():
        by_scope[shown(scope), device] += n
    count = sum(by_op.values())
    return [CrossTab(_("{title} ({count}), per op type").format(title=title, count=count), _("op"), by_op, fit),
            CrossTab(_("{title} ({count}), per name scope").format(title=title, count=count), _("scope"), by_scope,
                     fit)]


def devices_table(diff: PlacementDiff, fit: bool) -> RowTable:
    table = RowTable(_("Per device"), [Column(_("device")), Column(_("full name")), Column(_("old"), justify="right"),
                                       Column(_("new"), justify="right"), Column(_("change"), justify="right")],
                     fit=fit)
    for device, old, new in diff.by_device:
        table.add_row(_device(device), clean(device), str(old), str(new), f"{new - old:+d}" if new != old else "=")
    return table


def copies_table(old: tuple[LinkTotal, ...], new: tuple[LinkTotal, ...], fit: bool) -> RowTable:
    table = RowTable(_("Copies between devices per step"),
                     [Column(_("from")), Column(_("to")), Column(_("old copies"), justify="right"),
                      Column(_("old bytes"), justify="right"), Column(_("new copies"), justify="right"),
                      Column(_("new bytes"), justify="right")], fit=fit)
    olds = {(t.source, t.target): t for t in old}
    news = {(t.source, t.target): t for t in new}

    def cells(total: LinkTotal | None, get: Callable[[LinkTotal], int | None]) -> str:
        if total is None:
            return "0"
        value = get(total)
        return "?" if value is None else f"{value:,}"

    for link in sorted(set(olds) | set(news)):
        o, n = olds.get(link), news.get(link)
        table.add_row(_device(link[0]), _device(link[1]), cells(o, lambda t: t.copies), cells(o, lambda t: t.bytes),
                      cells(n, lambda t: t.copies), cells(n, lambda t: t.bytes))
    return table


def times_table(old: StepTimes, new: StepTimes, fit: bool) -> RowTable:
    """Two timed reports side by side: the step's wall time, each device's busy time, each link's copies."""
    table = RowTable(_("Time per step"), [Column(_("what")), Column(_("old"), justify="right"),
                                          Column(_("new"), justify="right"), Column(_("change"), justify="right")],
                     fit=fit)

    def change(a: float | None, b: float | None) -> str:
        if a is None or b is None or not a > 0 or not math.isfinite(b):
            return "-"
        return f"{(b - a) / a:+.0%}" if b < 10 * a else f"x{b / a:.3g}"

    def cell(value: float | None) -> str:
        return "-" if value is None else duration(value)

    table.add_row(_("step (wall)"), cell(old.wall), cell(new.wall), change(old.wall, new.wall))
    olds, news = dict(old.devices), dict(new.devices)
    for i, device in enumerate(sorted(set(olds) | set(news), key=lambda d: (d.spec is None, d.spec.order if d.spec else (), d))):
        a, b = olds.get(device), news.get(device)
        table.add_row(_("{device} busy").format(device=_device(device)), cell(a), cell(b), change(a, b),
                      new_section=i == 0)
    old_links = {(t.source, t.target): t for t in old.links}
    new_links = {(t.source, t.target): t for t in new.links}
    for i, link in enumerate(sorted(set(old_links) | set(new_links), key=lambda k: (str(k[0]), str(k[1])))):
        o, n = old_links.get(link), new_links.get(link)
        name = _("copies {source} -> {target}").format(source=_device(link[0]), target=_device(link[1]))
        table.add_row(name, _link(o), _link(n), change(o.time if o else None, n.time if n else None),
                      new_section=i == 0)
    return table


def _link(t: LinkCost | None) -> str:
    if t is None:
        return "0"
    return f"{duration(t.time)} ({'?' if t.bytes is None else f'{t.bytes:,} B'})"


def _header(templates: tuple[str, str], count: int, name: str) -> KeptTail:
    """"OLD: NAME (N placements)": the count stays with its words when the line wraps."""
    text = shown(messages.counted(templates, count, name=name))
    at = text.rfind(name)
    start = at + len(name) if at >= 0 else 0
    return KeptTail(text, len(text) - len(text[start:].lstrip()))


def diff_renderables(diff: PlacementDiff, view: View | None = None) -> list[RenderableType]:
    """Everything `placement diff` shows, in reading order."""
    view = view or View()
    old, new = diff.old, diff.new
    parts: list[RenderableType] = [
        _header(messages.DIFF_OLD, old.placements, clean(old.name)),
        _header(messages.DIFF_NEW, new.placements, clean(new.name))]
    if diff.counts_only:
        parts.append(Text(_("One side holds only counts per device (a report saved with --summary): only the "
                            "counts are compared."), style="italic"))
    rows = len(diff.moved) + len(diff.added) + len(diff.removed)
    digest = not view.all_rows and rows > view.screen_rows
    if digest:
        parts.append(Text(_("{rows} rows do not fit a screen ({screen} rows): a digest follows. {more}.").format(
            rows=rows, screen=view.screen_rows, more=_("--all prints every row; --json prints everything")),
            style="italic"))
    if diff.moved:
        parts.append(moved_digest(diff.moved, view.fit) if digest else moved_table(diff.moved, view.fit))
    for title, changes in ((_("Only in OLD"), diff.removed), (_("Only in NEW"), diff.added)):
        if not changes:
            continue
        if digest and len(changes) > MAX_KEYS:
            parts.extend(side_digest(title, changes, view.fit))
        else:
            parts.append(side_table(_("{title} ({count})").format(title=title, count=total(changes)),
                                    changes, view.fit))
    parts.append(devices_table(diff, view.fit))
    if diff.copies:
        parts.append(copies_table(diff.old.copies or (), diff.new.copies or (), view.fit))
    if diff.old.times is not None and diff.new.times is not None:
        parts.append(times_table(diff.old.times, diff.new.times, view.fit))
    elif diff.old.times is not None or diff.new.times is not None:
        parts.append(Text(_("Only {side} was timed (--time): the times are compared when both are.").format(
            side="OLD" if diff.old.times is not None else "NEW"), style="italic"))
    parts.append(Text(summary_line(diff), style="bold"))
    return parts


def summary_line(diff: PlacementDiff) -> str:
    """One line: the same placements, or how many moved, left and came."""
    if diff.same:
        if diff.counts_only:
            return _("Same counts per device.")
        return _("Same placements: {count} on the same devices.").format(count=diff.unchanged)
    if diff.counts_only:
        return _("The counts per device differ.")
    return _("{moved} moved, {removed} only in OLD, {added} only in NEW; {same} on the same devices.").format(
        moved=total(diff.moved), removed=total(diff.removed),
        added=total(diff.added), same=diff.unchanged)


def diff_group(diff: PlacementDiff, view: View | None = None) -> Group:
    return Group(*diff_renderables(diff, view))
