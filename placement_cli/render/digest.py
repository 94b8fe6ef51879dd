"""The digest of a report longer than a screen: per op type and device, per name scope and device,
and every row worth a look with its reason (the commands add per device, why, and the errors)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.text import Text

from placement_cli import messages
from placement_cli.devices import short_name
from placement_cli.i18n import Wording, _, shown
from placement_cli.model import SOFT_FALLBACK, WITH_RESOURCE, Placement, Report
from placement_cli.render.parts import counts_table, rows_table, table_rows
from placement_cli.render.rows import MIDDLE, Column, RowTable
from placement_cli.render.text import clean
from placement_cli.render.view import View

MAX_KEYS = 15  # rows of a per-op or per-scope table; the rest are summed into one "(N more)" row
MAX_DEVICE_COLUMNS = 8  # more devices than this: the least used share an "other" column
MAX_SCOPE_DEPTH = 3
EAGER_SCOPE = messages.EAGER_SCOPE  # the scopes that are no name
TOP_SCOPE = messages.TOP_SCOPE


def scope_of(node: str | None, depth: int) -> Wording:
    """A node's name scope (its name up to the last ``/``), at most ``depth`` levels deep."""
    return _scopes(node, depth)[-1]


def _scopes(node: str | None, deepest: int) -> list[Wording]:
    """A node's name scope at each level from 1 to ``deepest``, its name split once."""
    if node is None:  # eager ops (a node "" is a node at the top)
        return [EAGER_SCOPE] * deepest
    parts = node.split("/", deepest)
    last = len(parts) - 1  # a scope is a name up to a "/", never the whole name
    if not last:
        return [TOP_SCOPE] * deepest
    return ["/".join(parts[: min(depth, last)]) for depth in range(1, deepest + 1)]


def scope_depth(nodes: Iterable[str | None]) -> int:
    """The deepest scope level (at most MAX_SCOPE_DEPTH) that still gives at most MAX_KEYS scopes."""
    return scope_counts((node, "", 1) for node in nodes)[0]


def scope_counts(rows: Iterable[tuple[str | None, str, int]]) -> tuple[int, Counter[tuple[Wording, str]]]:
    """``rows`` (node, device, count) counted per name scope and device at ``scope_depth``'s depth (the
    deepest level, at most MAX_SCOPE_DEPTH, that gives at most MAX_KEYS scopes), in one pass: a
    million rows are read once, and a level is no longer counted once it has too many scopes."""
    levels = range(1, MAX_SCOPE_DEPTH + 1)
    counts: dict[int, Counter[tuple[Wording, str]]] = {depth: Counter() for depth in levels}
    scopes: dict[int, set[Wording]] = {depth: set() for depth in levels}
    deepest = MAX_SCOPE_DEPTH  # the deepest level still counted
    for node, device, n in rows:
        for depth, scope in enumerate(_scopes(node, deepest), start=1):
            counts[depth][scope, device] += n
            if depth > 1:
                known = scopes[depth]
                if scope not in known:
                    known.add(scope)
                    if len(known) > MAX_KEYS:  # too many at this level: the answer is a shallower one
                        deepest = depth - 1
                        break
    return deepest, counts[deepest]


def worth_a_look(p: Placement) -> bool:
    """Not where it asked (a soft fallback), or a reason is due (e.g. on a CPU while a GPU exists); an
    eager op that runs with its resource, as TensorFlow always runs it, is not one."""
    return p.status == SOFT_FALLBACK or (bool(p.reason) and p.status != WITH_RESOURCE)


@dataclass
class CrossTab:
    """Counts by key (op type, scope) and device: one column per device when that fits the width,
    else one section per device; device names are never cut."""

    title: str
    key: str
    counts: Counter[tuple[str, str]]  # (key, canonical device) -> placements
    fit: bool = True

    def _devices(self) -> tuple[list[str], dict[str, str]]:
        totals: Counter[str] = Counter()
        for (_key, device), n in self.counts.items():
            totals[device] += n
        ranked = [d for d, _ in sorted(totals.items(), key=lambda t: (-t[1], t[0]))]
        kept = ranked if len(ranked) <= MAX_DEVICE_COLUMNS else ranked[: MAX_DEVICE_COLUMNS - 1]
        column = {d: clean(short_name(d)) for d in kept}
        column.update({d: _("other") for d in ranked[len(kept):]})
        return list(dict.fromkeys(column[d] for d in sorted(kept) + ranked[len(kept):])), column

    def wide(self) -> RowTable:
        names, column = self._devices()
        by_key: dict[str, Counter[str]] = {}
        for (key, device), n in self.counts.items():
            by_key.setdefault(key, Counter())[column[device]] += n
        ranked = sorted(by_key, key=lambda k: (-sum(by_key[k].values()), k))
        table = RowTable(self.title, [Column(self.key, MIDDLE, min_width=12)]
                         + [Column(n, justify="right") for n in names] + [Column(_("total"), justify="right")],
                         fit=self.fit)
        for key in ranked[:MAX_KEYS]:
            table.add_row(clean(key), *(_count(by_key[key][n]) for n in names), str(sum(by_key[key].values())))
        rest = ranked[MAX_KEYS:]
        if rest:
            summed: Counter[str] = sum((by_key[k] for k in rest), Counter())
            table.add_row(_("({count} more)").format(count=len(rest)), *(_count(summed[n]) for n in names),
                          str(sum(summed.values())),
                          new_section=True)
        return table

    def long(self) -> RowTable:
        per_device = max(3, MAX_KEYS // max(1, len({d for _, d in self.counts})))
        table = RowTable(self.title, [Column(_("device")), Column(self.key, MIDDLE, min_width=12),
                                      Column(_("ops"), justify="right")], fit=self.fit)
        by_device: dict[str, Counter[str]] = {}
        for (key, device), n in self.counts.items():
            by_device.setdefault(device, Counter())[key] += n
        for device in sorted(by_device):
            ranked = sorted(by_device[device].items(), key=lambda t: (-t[1], t[0]))
            name = clean(short_name(device))
            for i, (key, n) in enumerate(ranked[:per_device]):
                table.add_row(name, clean(key), str(n), new_section=i == 0)
            rest = ranked[per_device:]
            if rest:
                table.add_row(name, _("({count} more)").format(count=len(rest)), str(sum(n for _, n in rest)))
        return table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        wide = self.wide()
        if self.fit and wide.__rich_measure__(console, options).minimum > options.max_width:
            yield self.long()
        else:
            yield wide


def _count(n: int) -> str:
    return str(n) if n else "-"


def digest_renderables(report: Report, visible: list[Placement], rows: int, *, view: View) -> list[RenderableType]:
    """What a report with more rows than fit a screen shows instead of its placement table."""
    note = _("{rows} rows do not fit a screen ({screen} rows): a digest follows. {more}.").format(
        rows=rows, screen=view.screen_rows, more=view.more_rows)
    parts: list[RenderableType] = [Text(note, style="italic"), counts_table(report, view.filtered)]
    by_op: Counter[tuple[str, str]] = Counter((p.op or "?", p.canonical) for p in visible)
    parts.append(CrossTab(_("Per op type and device"), _("op"), by_op, view.fit))
    depth, scoped = scope_counts((p.node, p.canonical, 1) for p in visible)
    by_scope: Counter[tuple[str, str]] = Counter()
    for (scope, device), n in scoped.items():
        by_scope[shown(scope), device] += n
    levels = _("first level") if depth == 1 else _("first {depth} levels").format(depth=depth)
    parts.append(CrossTab(_("Per name scope ({levels}) and device").format(levels=levels), _("scope"), by_scope,
                          view.fit))
    hidden = len(report.placements) - len(visible)
    if hidden:  # Per device counts every placement; these two count the rows a table would show
        parts.append(Text(_("Per op type and per name scope leave out {hidden} placements of TensorFlow's plumbing "
                            "(_Arg/_Retval, eager ops' wrapper functions), which Per device counts ({everything})")
                          .format(hidden=hidden, everything=view.everything), style="italic"))
    if report.ran:
        parts.append(_worth_a_look(visible, view))
    else:
        parts.append(Text(_("A log alone does not say what each op asked for: `placement trace` runs the program "
                            "and shows which ops did not land where they asked, and why."), style="italic"))
    return parts


def _worth_a_look(shown: list[Placement], view: View) -> RenderableType:
    rows = table_rows([p for p in shown if worth_a_look(p)], fold_repeats=True)
    # ops that run where their resource lives are not where they asked, by TensorFlow's rule: said, not listed
    resourced = sum(1 for p in shown if p.status == WITH_RESOURCE)
    ruled = _("{count} ops run with their resource (a variable's or iterator's device, TensorFlow's rule, not a "
              "fallback): not listed here.").format(count=resourced) if resourced else None
    if not rows:
        return Text(ruled or _("Every op sits where it asked, or asked for nothing and needs no reason."),
                    style="italic")
    cap = max(view.screen_rows, 1)
    more = len(rows) - cap
    said = [_("{more} more rows worth a look: {narrow}").format(more=more, narrow=view.narrow)] if more > 0 else []
    return rows_table(_every_reason_first(rows, cap),
                      title=_("Worth a look (not where they asked, or on a CPU while a GPU exists)"),
                      caption=" ".join([*said, *([ruled] if ruled else [])]) or None, fit=view.fit)


def _every_reason_first(rows: list[tuple[Placement, int]], cap: int) -> list[tuple[Placement, int]]:
    """At most ``cap`` rows, taken from each reason in turn so that every reason shows up, in table order."""
    if len(rows) <= cap:
        return rows
    by_reason: dict[Wording | None, list[int]] = {}
    for i, (p, _times) in enumerate(rows):
        by_reason.setdefault(p.reason, []).append(i)
    queues = list(by_reason.values())
    taken: list[int] = []
    depth = 0
    while len(taken) < cap:
        taken.extend(q[depth] for q in queues if depth < len(q))
        depth += 1
    return [rows[i] for i in sorted(taken[:cap])]
