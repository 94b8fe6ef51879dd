"""Two inputs compared (`placement diff`): device names normalised, graph nodes matched by graph and
name, eager ops counted per op and device; pure, no TensorFlow.

Identity: a node is its graph and its name. The graph is the tf.function that holds it, named without
TensorFlow's global trace counter (``__inference_step_17`` is ``step`` whatever else was traced before
it; a function traced twice is ``step`` and ``step#2``, in trace order); a Session's graph, where a log
names none. The task a node was placed on is where it went, not who it is: a node placed several times
(the copies of one graph each worker of a between-graph cluster placed on its own task) is the multiset
of its devices, paired device for device, then within a task, then in order."""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any

from placement_cli.devices import DeviceSpec, DeviceSpecError, parse_device
from placement_cli.exceptions import UsageProblem
from placement_cli.filters import Filters, compile_node, device_matcher, onednn_base, op_matcher
from placement_cli.i18n import _
from placement_cli.logparse.functions import SEPARATOR, function_key, trace_counters
from placement_cli.logparse.saved import Tallied, record_fields
from placement_cli.model import LOGGED, Change, DiffSide, PlacementDiff, link_totals

# A record as compared: (node or None, op, device, status or None, graph or None); the device as a log
# printed it, or a saved report's canonical name; the graph as TensorFlow named the function.
Fields = tuple[str | None, str | None, str, str | None, str | None]


class _Devices:
    """Device names read once each (a log names a few devices millions of times)."""

    def __init__(self) -> None:
        self.specs: dict[str, DeviceSpec] = {}

    def spec(self, device: str) -> DeviceSpec:
        spec = self.specs.get(device)
        if spec is None:
            try:
                spec = parse_device(device, logged=True)
            except DeviceSpecError:  # the parser read it as a device; a saved report may hold anything
                spec = DeviceSpec(device_type=device)
            self.specs[device] = spec
        return spec


@dataclass
class _Records:
    """One side's placements as counts of records, with what each record says."""

    graph: Counter[Hashable]
    eager: Counter[Hashable]
    fields: Callable[[Hashable], Fields]
    eager_fields: Callable[[Hashable], Fields]
    traces: dict[str, list[int]]  # each function's trace counters on this side (see functions.function_key)
    named: bool = False  # some node's graph is known (a report saved before graphs were recorded names none)


def _log_records(side: Tallied) -> _Records:
    tails: dict[bytes, tuple[str | None, str]] = {}  # "(Op): device" read once each (a few per log)
    graphs: dict[bytes, str | None] = {b"": None}

    def graph(record: Any) -> Fields:
        function, _sep, rest = record.rpartition(SEPARATOR)
        node, _sep, tail = rest.partition(b": ")  # a node name holds no ": "
        found = tails.get(tail)
        if found is None:
            _node, op, device = record_fields(b"n: " + tail)
            found = tails[tail] = (op, device)
        name = graphs.get(function)
        if name is None and function:
            name = graphs[function] = function.decode("utf-8", "replace")
        return node.decode("utf-8", "replace"), found[0], found[1], None, name

    def eager(record: Any) -> Fields:
        op, device = record
        return None, op.decode("utf-8", "replace"), device.decode("utf-8", "replace"), None, None

    eagers = side.eager or Counter()
    # every function a placer line was settled to was executed: its eager lines name each trace
    traces = trace_counters(op.decode("utf-8", "replace") for op, _device in eagers)
    records = side.records or Counter()
    return _Records(records, eagers, graph, eager, traces, any(SEPARATOR in r for r in records))


def _report_records(side: Tallied) -> _Records:
    graph: Counter[Hashable] = Counter()
    eager: Counter[Hashable] = Counter()
    for p in side.report.placements:
        status = None if p.status == LOGGED else str(p.status)
        if p.node is None or p.kind == "eager":
            eager[(None, p.op, p.canonical, status, None)] += 1
        else:
            graph[(p.node, p.op, p.canonical, status, p.graph)] += 1
    traces = trace_counters([p.graph for p in side.report.placements] +
                            [p.op for p in side.report.placements if p.kind == "eager"])
    return _Records(graph, eager, lambda r: r, lambda r: r, traces,  # type: ignore[arg-type,return-value]
                    any(p.graph for p in side.report.placements))


def _filtered(records: _Records, filters: Filters) -> _Records:
    """Only the records the op and node filters match (as parse's filters match placements); the device
    filter applies after matching (what left or entered the device)."""
    tests: list[Callable[[Fields], bool]] = []
    if filters.op:
        is_op = op_matcher(filters.op)
        tests.append(lambda f: is_op(f[1]))
    if filters.node:
        pattern = compile_node(filters.node)
        tests.append(lambda f: bool(f[0]) and pattern.search(f[0]) is not None)
    if not tests:
        return records

    def keep(counter: Counter[Hashable], fields: Callable[[Hashable], Fields]) -> Counter[Hashable]:
        return Counter({r: n for r, n in counter.items() if all(test(fields(r)) for test in tests)})

    return _Records(keep(records.graph, records.fields), keep(records.eager, records.eager_fields),
                    records.fields, records.eager_fields, records.traces, records.named)


def _surplus(mine: Counter[Hashable], theirs: Counter[Hashable]) -> dict[Hashable, int]:
    """The records ``mine`` holds more often than ``theirs`` (the rest are the same on both sides)."""
    found = {}
    get = theirs.get
    for record, n in mine.items():
        extra = n - get(record, 0)
        if extra > 0:
            found[record] = extra
    return found


# One side's record of a group, decoded: (canonical device, op as printed, status, count).
Entry = tuple[str, "str | None", "str | None", int]
# A device as compared: (its task, its canonical name).
Place = tuple[tuple[str, int, int], str]


def _decoded(records: dict[Hashable, int], fields: Callable[[Hashable], Fields], devices: _Devices,
             places: dict[str, Place], eager: bool, traces: dict[str, list[int]] | None
             ) -> dict[str, list[Entry]]:
    """The records by group: a graph node by graph and name; an eager op by op, oneDNN's renaming undone
    (``_MklMatMul`` is MatMul) and a function's trace counter dropped."""
    found: dict[str, list[Entry]] = {}
    keys: dict[str | None, Any] = {}  # a graph's identity ("": a Session's graph, or none known)
    for record, n in records.items():
        node, op, device, status, graph = fields(record)
        place = places.get(device)
        if place is None:
            spec = devices.spec(device)
            place = places[device] = (spec.job or "localhost", spec.replica or 0, spec.task or 0), spec.canonical
        if eager:
            key = "\0" + (function_key(onednn_base(op or "") or op, traces) or "")
        else:  # "graph\0name": one string, which sorts fast (a million of them)
            graph_key = keys.get(graph)
            if graph_key is None:  # traces None: graphs are not compared
                graph_key = keys[graph] = ("" if traces is None else function_key(graph, traces) or "") + "\0"
            key = graph_key + (node or "")
        entry = (place[1], op, status, n)
        entries = found.get(key)
        if entries is None:
            found[key] = [entry]
        else:
            entries.append(entry)
    return found


def _merged(entries: list[Entry]) -> tuple[dict[str, int], str | None, dict[str, str | None]]:
    """One side's devices of a group, counted (records spelled apart may name one device), its op
    and each device's first status."""
    counts: dict[str, int] = {}
    statuses: dict[str, str | None] = {}
    op = None
    for canonical, entry_op, status, n in entries:
        counts[canonical] = counts.get(canonical, 0) + n
        statuses.setdefault(canonical, status)
        op = op or entry_op
    return counts, op, statuses


def _names(key: str, eager: bool) -> tuple[str | None, str | None]:
    """A group's graph and node as rows name them (None for a Session's graph, and for eager ops)."""
    graph, _sep, node = key.partition("\0")
    return (None, None) if eager else (graph or None, node or None)


def _one_side(key: str, entries: list[Entry], eager: bool, old: bool, into: list[Change],
              on: Callable[[str], bool]) -> None:
    """A group only one side has: every placement of it is only there."""
    graph, node = _names(key, eager)
    if len(entries) == 1:
        canonical, op, status, n = entries[0]
        if on(canonical):
            into.append(Change(node, op, canonical, None, status, None, n, eager, graph) if old else
                        Change(node, op, None, canonical, None, status, n, eager, graph))
        return
    counts, op, statuses = _merged(entries)
    for device in sorted(counts):
        if on(device):
            into.append(Change(node, op, device, None, statuses[device], None, counts[device], eager, graph) if old
                        else Change(node, op, None, device, None, statuses[device], counts[device], eager, graph))


def _pairs(olds: list[list[Any]], news: list[list[Any]], task_of: Callable[[str], Any]
           ) -> list[tuple[str, str, int]]:
    """Devices paired as moves: within a task first, then in order (each list: [device, count], spent)."""
    found = []
    for same_task in (True, False):
        for o in olds:
            for n in news:
                if not o[1]:
                    break
                if n[1] and (not same_task or task_of(o[0]) == task_of(n[0])):
                    count = min(o[1], n[1])
                    found.append((o[0], n[0], count))
                    o[1] -= count
                    n[1] -= count
    return found


def _paired(key: str, old_entries: list[Entry], new_entries: list[Entry], eager: bool,
            moved: list[Change], removed: list[Change], added: list[Change], on: Callable[[str], bool],
            task_of: Callable[[str], Any]) -> int:
    """A group both sides have: what stays, what moved (devices paired within a task first, then in
    order), what is only on one side (appended); how many placements stayed (on the device filtered for)."""
    graph, node = _names(key, eager)
    old, old_op, old_statuses = _merged(old_entries)
    new, new_op, new_statuses = _merged(new_entries)
    op = new_op or old_op
    stayed = {d: min(n, new[d]) for d, n in old.items() if d in new}
    olds = [[d, n - stayed.get(d, 0)] for d, n in sorted(old.items()) if n > stayed.get(d, 0)]
    news = [[d, n - stayed.get(d, 0)] for d, n in sorted(new.items()) if n > stayed.get(d, 0)]
    for source, target, count in _pairs(olds, news, task_of):
        if on(source) or on(target):
            moved.append(Change(node, op, source, target, old_statuses[source], new_statuses[target], count, eager,
                                graph))
    removed += [Change(node, old_op or op, d, None, old_statuses[d], None, n, eager, graph)
                for d, n in olds if n and on(d)]
    added += [Change(node, new_op or op, None, d, None, new_statuses[d], n, eager, graph)
              for d, n in news if n and on(d)]
    return sum(n for d, n in stayed.items() if on(d))


def _by_device(records: _Records, devices: _Devices) -> Counter[str]:
    counts: Counter[str] = Counter()
    for counter, fields in ((records.graph, records.fields), (records.eager, records.eager_fields)):
        per_device: Counter[str] = Counter()
        for record, n in counter.items():
            per_device[fields(record)[2]] += n
        for device, n in per_device.items():
            counts[devices.spec(device).canonical] += n
    return counts


def compare(old: Tallied, new: Tallied, filters: Filters = Filters()) -> PlacementDiff:
    """What moved from ``old`` to ``new``; placements only one of them has. ``--device`` narrows the
    answer, not the inputs: what left the device or entered it is a move, never "only on one side"."""
    collecting = gc.isenabled()
    gc.disable()  # a million rows hold no cycles: the collector would walk them again and again
    try:
        return _compare(old, new, filters)
    finally:
        if collecting:
            gc.enable()


def _compare(old: Tallied, new: Tallied, filters: Filters) -> PlacementDiff:
    devices = _Devices()
    sides = []
    for tallied in (old, new):
        records = _report_records(tallied) if tallied.saved else _log_records(tallied)
        sides.append(_filtered(records, filters))
    counts_only = [t.saved and not t.report.placements and t.report.placement_count > 0 for t in (old, new)]
    if filters.active and any(counts_only):
        name = (old, new)[counts_only.index(True)].name
        raise UsageProblem(_("{name} holds only counts per device (saved with --summary): {filters} cannot narrow "
                             "it").format(name=name, filters=filters.describe()))
    on: Callable[[str], bool] = lambda canonical: True  # noqa: E731
    if filters.device:
        matcher, known = device_matcher(filters.device), {}

        def on(canonical: str) -> bool:
            found = known.get(canonical)
            if found is None:
                found = known[canonical] = bool(matcher(devices.spec(canonical)))
            return found

    if filters.op or filters.node or not all(t.saved or t.report.counted is not None for t in (old, new)):
        by_device = [_by_device(r, devices) if not c else Counter(t.report.by_device)
                     for r, t, c in zip(sides, (old, new), counts_only)]
    else:
        by_device = [Counter(t.report.by_device) for t in (old, new)]
    if filters.device:
        by_device = [Counter({d: n for d, n in counts.items() if on(d)}) for counts in by_device]
    moved: list[Change] = []
    removed: list[Change] = []
    added: list[Change] = []
    unchanged = 0
    task_of = _task_of(devices)
    by_name = False  # one side names graphs, the other none: nodes matched by name alone
    if not any(counts_only):
        a, b = sides
        for eager, mine, theirs in ((False, a.graph, b.graph), (True, a.eager, b.eager)):
            old_extra, new_extra = _surplus(mine, theirs), _surplus(theirs, mine)
            fields = a.eager_fields if eager else a.fields
            if filters.device:
                unchanged += sum(min(n, theirs[r]) for r, n in mine.items()
                                 if r in theirs and on(devices.spec(fields(r)[2]).canonical))
            else:
                unchanged += sum(mine.values()) - sum(old_extra.values())
            places: dict[str, Place] = {}
            # a side that names no node's graph (a report saved before placement recorded graphs) is
            # matched with the other by names alone
            graphs = eager or a.named == b.named
            by_name = by_name or (not graphs and bool(mine) and bool(theirs))
            olds = _decoded(old_extra, fields, devices, places, eager, a.traces if graphs else None)
            news = _decoded(new_extra, b.eager_fields if eager else b.fields, devices, places, eager,
                            b.traces if graphs else None)
            both = olds.keys() & news.keys()
            start = len(removed), len(added)
            for key in _sorted(both):
                unchanged += _paired(key, olds[key], news[key], eager, moved, removed, added, on, task_of)
            for found, old_side, into, first in ((olds, True, removed, start[0]), (news, False, added, start[1])):
                paired = len(into) > first  # rows of groups both sides have, before the others: order them all
                for key in _sorted(found.keys() - both):
                    entries = found[key]
                    if len(entries) == 1 and not eager:  # the usual row, made here (a million of them)
                        canonical, op, status, n = entries[0]
                        if on(canonical):
                            graph, _sep, node = key.partition("\0")
                            graph, node = graph or None, node or None
                            into.append(Change(node, op, canonical, None, status, None, n, False, graph) if old_side
                                        else Change(node, op, None, canonical, None, status, n, False, graph))
                    else:
                        _one_side(key, entries, eager, old_side, into, on)
                if paired:
                    into[first:] = sorted(into[first:], key=_row_order)
    names = sorted(set(by_device[0]) | set(by_device[1]), key=_device_order(devices))
    return PlacementDiff(
        old=_side(old, by_device[0], counts_only[0]),
        new=_side(new, by_device[1], counts_only[1]),
        moved=tuple(moved), added=tuple(added), removed=tuple(removed),
        by_device=tuple((d, by_device[0][d], by_device[1][d]) for d in names),
        unchanged=unchanged,
        filters=filters.to_dict() if filters.active else None,
        unnamed=(old.name if not sides[0].named else new.name) if by_name else None,
    )


def _task_of(devices: _Devices) -> Callable[[str], tuple[Any, ...]]:
    def task(canonical: str) -> tuple[Any, ...]:
        spec = devices.spec(canonical)
        return spec.job or "localhost", spec.replica or 0, spec.task or 0

    return task


def _sorted(keys: Iterable[str]) -> list[str]:
    """Groups by graph and name."""
    return sorted(keys)


def _row_order(change: Change) -> tuple[Any, ...]:
    return change.node or "", change.graph or "", change.op or "", change.device


def _device_order(devices: _Devices) -> Callable[[str], tuple[Any, ...]]:
    def order(canonical: str) -> tuple[Any, ...]:
        spec = devices.spec(canonical)
        return (spec.job or "localhost", spec.replica or 0, spec.task or 0, spec.device_type or "",
                spec.device_index if spec.device_index is not None else -1, canonical)

    return order


def _side(tallied: Tallied, by_device: Counter[str], counts_only: bool) -> DiffSide:
    copies = tallied.report.copies
    return DiffSide(tallied.name, tallied.saved, sum(by_device.values()),
                    None if copies is None else link_totals(copies), counts_only)
