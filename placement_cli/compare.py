"""Two inputs compared (`placement diff`): device names normalised, graph nodes matched by graph and
name, eager ops counted per op and device; pure, no TensorFlow.

Identity: a node is its graph and its name. The graph is the tf.function that holds it, named without
TensorFlow's global trace counter (``__inference_step_17`` is ``step`` whatever else was traced before
it; a function traced twice is ``step`` and ``step#2``, in trace order); a Session's graph, where a log
names none, the second Session to place a name on a task ``#2`` (records.number_repeats). The task a
node was placed on is where it went, not who it is: a node placed several times (the copies of one graph
each worker of a between-graph cluster placed on its own task) is the multiset of its devices, paired
device for device, then within a task, then in order."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable
from typing import Any

from placement_cli.collector import paused
from placement_cli.devices import DeviceNames
from placement_cli.exceptions import UsageProblem
from placement_cli.filters import compile_node, device_matcher, op_matcher
from placement_cli.i18n import _, english
from placement_cli.logparse.functions import function_key, trace_counters
from placement_cli.logparse.records import Records, Repeats, escaped_name, name_text, paired_repeats
from placement_cli.logparse.saved import Tallied, record_fields
from placement_cli.model import LOGGED, Change, DiffSide, PlacementDiff, PlacementKind, link_totals
from placement_cli.model.filtered import Filters
from placement_cli.pairing import (
    Fields,
    Place,
    Rest,
    SideRecords,
    Walk,
    decoded,
    everywhere,
    matched_by_name,
    one_side,
    paired_group,
    record_parts,
)


def _graph_key(traces: dict[str, list[int]]) -> Callable[[bytes], bytes]:
    def key(function: bytes) -> bytes:
        found = function_key(name_text(function), traces) or ""  # a report's lone surrogate kept
        return escaped_name(found.encode("utf-8", "surrogatepass"))

    return key


def _log_records(side: Tallied) -> SideRecords:
    rests: dict[bytes, Rest] = {}  # "(Op): device" read once each (a few per log)

    def rest(text: bytes) -> Rest:
        found = rests.get(text)
        if found is None:
            _node, op, device = record_fields(b"n: " + text.replace(b"\0", b": "))
            found = rests[text] = (op, device, None)
        return found

    def eager(record: Any) -> Fields:
        op, device = record
        return None, op.decode("utf-8", "replace"), device.decode("utf-8", "replace"), None, None

    eagers = side.eager or Counter()
    # every function a placer line was settled to was executed: its eager lines name each trace
    traces = trace_counters(op.decode("utf-8", "replace") for op, _device in eagers)
    records = side.records if side.records is not None else Records()
    lines = records.sorted_lines(_graph_key(traces), number=not eagers)  # see records.number_repeats
    return SideRecords(lines, rest, eagers, eager, traces, bool(records.named), records.unique)


def prepared(side: Tallied) -> None:
    """What ``compare`` first makes of a log, made now (``read_pair`` runs this on the core that read
    the log): its records as lines, sorted."""
    if not side.saved:
        _log_records(side)


def _report_records(side: Tallied) -> SideRecords:
    eager: Counter[Hashable] = Counter()
    codes: dict[Rest, bytes] = {}
    rests: dict[bytes, Rest] = {}
    lines = []
    traces = trace_counters([p.graph for p in side.report.placements] +
                            [p.op for p in side.report.placements if p.kind == PlacementKind.EAGER])
    key = _graph_key(traces)
    keys: dict[str, bytes] = {}
    repeats = None if side.report.sessions_numbered or any(p.kind == PlacementKind.EAGER for p in side.report.placements) \
        else Repeats()  # a report narrowed after its Sessions' nodes were numbered holds their numbers
    for p in side.report.placements:
        status = None if p.status == LOGGED else english(p.status)
        if p.node is None or p.kind == PlacementKind.EAGER:
            eager[(None, p.op, p.canonical, status, None)] += 1
            continue
        said = (p.op, p.canonical, status)
        code = codes.get(said)
        if code is None:  # what the record says, spelled out (repr: one text per record, with no NUL or
            # newline in it, whatever a report's strings hold): equal records of two reports are equal lines
            code = codes[said] = repr(said).encode()
            rests[code] = said
        graph = keys.get(p.graph or "")
        if graph is None:
            graph = keys[p.graph or ""] = key(p.graph.encode("utf-8", "surrogatepass")) if p.graph else b""
        if not p.graph and repeats:  # a Session's node placed again on its task: ``#k`` (records.number_repeats)
            graph = repeats.graph(p.node, p.canonical)
        lines.append(graph + b"\0" + _node_bytes(p.node) + b"\0" + code)
    lines.sort()
    return SideRecords(lines, rests.__getitem__, eager, lambda r: r, traces,  # type: ignore[arg-type,return-value]
                    any(p.graph for p in side.report.placements))


def _node_bytes(node: str) -> bytes:
    return escaped_name(node.encode("utf-8", "surrogatepass"))


def _filtered(records: SideRecords, filters: Filters) -> SideRecords:
    """Only the records the op and node filters match (as parse's filters match placements); the device
    filter applies after matching (what left or entered the device)."""
    tests: list[Callable[[str | None, str | None], bool]] = []
    if filters.op:
        is_op = op_matcher(filters.op)
        tests.append(lambda node, op: is_op(op))
    if filters.node:
        pattern = compile_node(filters.node)
        tests.append(lambda node, op: bool(node and pattern.search(node) is not None))
    if not tests:
        return records

    def keep_line(line: bytes) -> bool:
        _graph, raw, rest = record_parts(line)
        node = name_text(raw)
        op = records.rest(rest)[0]
        return all(test(node, op) for test in tests)

    def keep_eager(record: Hashable) -> bool:
        _node, op, *_rest = records.eager_fields(record)
        return all(test(None, op) for test in tests)

    return SideRecords([line for line in records.lines if keep_line(line)],
                    records.rest, Counter({r: n for r, n in records.eager.items() if keep_eager(r)}),
                    records.eager_fields, records.traces, records.named, records.unique)


def _by_device(records: SideRecords, devices: DeviceNames) -> Counter[str]:
    counts: Counter[str] = Counter()
    for rest, n in Counter(record_parts(line)[2] for line in records.lines).items():
        counts[devices.spec(records.rest(rest)[1]).canonical] += n
    per_device: Counter[str] = Counter()
    for record, n in records.eager.items():
        per_device[records.eager_fields(record)[2]] += n
    for device, n in per_device.items():
        counts[devices.spec(device).canonical] += n
    return counts


def compare(old: Tallied, new: Tallied, filters: Filters = Filters()) -> PlacementDiff:
    """What moved from ``old`` to ``new``; placements only one of them has. ``--device`` narrows the
    answer, not the inputs: what left the device or entered it is a move, never "only on one side"."""
    with paused():  # a million rows hold no cycles: the collector would walk them again and again
        return _compare(old, new, filters)


def _compare(old: Tallied, new: Tallied, filters: Filters) -> PlacementDiff:
    devices = DeviceNames()
    sides = []
    for tallied in (old, new):
        records = _report_records(tallied) if tallied.saved else _log_records(tallied)
        sides.append(_filtered(records, filters))
    vouched = any(t.report.sessions_numbered for t in (old, new))  # its numbers are the whole run's
    paired = paired_repeats(sides[0].lines, sides[1].lines, keep=vouched)
    for side, lines in zip(sides, paired):
        if lines is not side.lines:  # a Session's numbered node one node again: it may have records apart
            side.lines, side.unique = lines, False
    counts_only = [t.saved and not t.report.placements and t.report.placement_count > 0 for t in (old, new)]
    if (filters.op or filters.node) and any(counts_only):  # counts per device are narrowed by --device alone
        name = (old, new)[counts_only.index(True)].name
        raise UsageProblem(_("{name} holds only counts per device (saved with --summary): {filters} cannot narrow "
                             "it").format(name=name, filters=filters.describe()))
    on: Callable[[str], bool] | None = None
    if filters.device:
        matcher = device_matcher(filters.device)
        known: dict[str, bool] = {}

        def on(canonical: str) -> bool:
            found = known.get(canonical)
            if found is None:
                found = known[canonical] = bool(matcher(devices.spec(canonical)))
            return found

    def counted(t: Tallied) -> Counter[str]:  # a saved report's own names (hand-made, older) normalised too
        found: Counter[str] = Counter()
        for device, n in t.report.by_device.items():
            found[devices.spec(device).canonical] += n
        return found

    if filters.op or filters.node or not all(t.saved or t.report.counted is not None for t in (old, new)):
        by_device = [_by_device(r, devices) if not c else counted(t) for r, t, c in zip(sides, (old, new), counts_only)]
    else:
        by_device = [counted(t) for t in (old, new)]
    if on is not None:
        by_device = [Counter({d: n for d, n in counts.items() if on(d)}) for counts in by_device]
    task_of = devices.task
    walk = Walk(sides[0], sides[1], devices, on, task_of)
    # a report saved before placement recorded graphs is matched with a side that names graphs by names
    # alone: it ran tf.functions (its eager ops call them) yet names no node's graph. A log, or a report
    # that ran none, names none because its nodes are a Session's graph's: matched by graph and name.
    unnamed = 0 if sides[1].named else 1
    by_name = (sides[0].named != sides[1].named and bool(sides[0].lines) and bool(sides[1].lines)
               and (old, new)[unnamed].saved and bool(sides[unnamed].traces))
    removed: list[Change] = []
    added: list[Change] = []
    if not any(counts_only):
        if by_name:
            walk.sides = matched_by_name(sides[0]), matched_by_name(sides[1])
        walk.run()
        a, b = sides
        # every eager record is grouped before any is matched: one record may be another group on the other
        # side (``__inference_f_48`` is f's first trace in one log, its second in the other)
        places: dict[str, Place] = {}
        olds = decoded(a.eager, a.eager_fields, devices, places, True, a.traces)
        news = decoded(b.eager, b.eager_fields, devices, places, True, b.traces)
        both = olds.keys() & news.keys()
        for key in sorted(both):  # groups by graph and name
            walk.unchanged += paired_group(key, olds[key], news[key], True, walk.moved, removed, added,
                                           on or everywhere, task_of)
        for found, old_side, into in ((olds, True, removed), (news, False, added)):
            for key in sorted(found.keys() - both):
                one_side(key, found[key], True, old_side, into, on or everywhere)
        walk.rows[0].extend(sorted(removed, key=_row_order))
        walk.rows[1].extend(sorted(added, key=_row_order))
    names = sorted(set(by_device[0]) | set(by_device[1]), key=_device_order(devices))
    return PlacementDiff(
        old=_side(old, by_device[0], counts_only[0]),
        new=_side(new, by_device[1], counts_only[1]),
        moved=tuple(walk.moved), added=walk.changes(1), removed=walk.changes(0),
        by_device=tuple((d, by_device[0][d], by_device[1][d]) for d in names),
        unchanged=walk.unchanged,
        filters=filters.to_dict() if filters.active else None,
        unnamed=(old.name if not sides[0].named else new.name) if by_name else None,
    )


def _row_order(change: Change) -> tuple[Any, ...]:
    return change.node or "", change.graph or "", change.op or "", change.device


def _device_order(devices: DeviceNames) -> Callable[[str], tuple[Any, ...]]:
    def order(canonical: str) -> tuple[Any, ...]:
        return (*devices.spec(canonical).order, canonical)

    return order


def _side(tallied: Tallied, by_device: Counter[str], counts_only: bool) -> DiffSide:
    copies, cost = tallied.report.copies, tallied.report.cost
    return DiffSide(tallied.name, tallied.saved, sum(by_device.values()),
                    None if copies is None else link_totals(copies), counts_only,
                    None if cost is None else cost.times())
