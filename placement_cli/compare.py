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

import operator
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, TypeAlias

from placement_cli.collector import paused
from placement_cli.devices import DeviceNames
from placement_cli.exceptions import UsageProblem
from placement_cli.filters import compile_node, device_matcher, op_matcher
from placement_cli.model.filtered import Filters
from placement_cli.model.ops import onednn_base
from placement_cli.i18n import _
from placement_cli.logparse.functions import function_key, trace_counters
from placement_cli.logparse.records import (Records, Repeats, adjacent_repeats, escaped_name, name_text, node_groups,
                                           paired_repeats)
from placement_cli.logparse.saved import Tallied, record_fields
from placement_cli.model import LOGGED, Change, DiffSide, PlacementDiff, PlacementKind, link_totals
from placement_cli.model.diff import Changes, Entry, RowAfters, pair_devices, plain_text, same_op

# A record as compared: (node or None, op, device, status or None, graph or None); the device as a log
# printed it, or a saved report's canonical name; the graph as TensorFlow named the function.
Fields = tuple[str | None, str | None, str, str | None, str | None]


# A graph record as compared: b"GRAPH\0NODE\0REST" (see logparse.records), sorted; REST is read by the
# side's ``rest`` into (op, device, status): a log's "(Op): device" as printed, a saved report's own code.
Rest = tuple[str | None, str, str | None]


@dataclass
class _Records:
    """One side's placements: graph records as sorted lines, eager ones counted, with what each says."""

    lines: list[bytes]
    rest: Callable[[bytes], Rest]
    eager: Counter[Any]  # of an eager record's key: (op, device) bytes for a log, a report's own
    eager_fields: Callable[[Hashable], Fields]
    traces: dict[str, list[int]]  # each function's trace counters on this side (see functions.function_key)
    named: bool = False  # some node's graph is known (a report saved before graphs were recorded names none)
    unique: bool = False  # known: no node has two records (records.Records.unique)


def _graph_key(traces: dict[str, list[int]]) -> Callable[[bytes], bytes]:
    def key(function: bytes) -> bytes:
        found = function_key(name_text(function), traces) or ""  # a report's lone surrogate kept
        return escaped_name(found.encode("utf-8", "surrogatepass"))

    return key


def _log_records(side: Tallied) -> _Records:
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
    return _Records(lines, rest, eagers, eager, traces, bool(records.named), records.unique)


def prepared(side: Tallied) -> None:
    """What ``compare`` first makes of a log, made now (``read_pair`` runs this on the core that read
    the log): its records as lines, sorted."""
    if not side.saved:
        _log_records(side)


def _report_records(side: Tallied) -> _Records:
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
        status = None if p.status == LOGGED else str(p.status)
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
    return _Records(lines, rests.__getitem__, eager, lambda r: r, traces,  # type: ignore[arg-type,return-value]
                    any(p.graph for p in side.report.placements))


def _node_bytes(node: str) -> bytes:
    return escaped_name(node.encode("utf-8", "surrogatepass"))


def _group_names(group: bytes) -> tuple[str | None, str | None]:
    """A record's ``GRAPH\0NODE`` as a row's graph and node (None: a Session's graph)."""
    graph, _sep, node = group.partition(b"\0")
    return name_text(graph) or None, name_text(node)  # a node "" (a saved report's) is one, not eager ops


def _filtered(records: _Records, filters: Filters) -> _Records:
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
        _graph, raw, rest = _parts(line)
        node = name_text(raw)
        op = records.rest(rest)[0]
        return all(test(node, op) for test in tests)

    def keep_eager(record: Hashable) -> bool:
        _node, op, *_rest = records.eager_fields(record)
        return all(test(None, op) for test in tests)

    return _Records([line for line in records.lines if keep_line(line)],
                    records.rest, Counter({r: n for r, n in records.eager.items() if keep_eager(r)}),
                    records.eager_fields, records.traces, records.named, records.unique)


# A group as rows name it: an eager op's key (see _decoded), or a graph record's (graph, node).
Group: TypeAlias = "str | tuple[str | None, str | None]"
# A device as compared: (its task, its canonical name).
Place = tuple[tuple[str, int, int], str]


def _decoded(records: dict[Hashable, int], fields: Callable[[Hashable], Fields], devices: DeviceNames,
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
            place = places[device] = spec.task_key, spec.canonical
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


def _merged(entries: list[Entry]) -> tuple[dict[str, int], dict[str, str | None], dict[str, str | None]]:
    """One side's devices of a group, counted (records spelled apart may name one device), and each
    device's op (``_MklMatMul`` on CPU:0, ``MatMul`` on GPU:0) and first status."""
    counts: dict[str, int] = {}
    ops: dict[str, str | None] = {}
    statuses: dict[str, str | None] = {}
    for canonical, entry_op, status, n in entries:
        counts[canonical] = counts.get(canonical, 0) + n
        statuses.setdefault(canonical, status)
        op = ops.get(canonical)  # records of several ops on one device: the least, whatever their order
        ops[canonical] = entry_op if op is None or (entry_op is not None and entry_op < op) else op
    return counts, ops, statuses


def _names(key: Group, eager: bool) -> tuple[str | None, str | None]:
    """A group's graph and node as rows name them (None for a Session's graph, and for eager ops); a
    graph record's group is its (graph, node) already."""
    if isinstance(key, tuple):
        return key
    graph, _sep, node = key.partition("\0")
    return (None, None) if eager else (graph or None, node)


def _one_side(key: Group, entries: list[Entry], eager: bool, old: bool, into: list[Change],
              on: Callable[[str], bool]) -> None:
    """A group only one side has: every placement of it is only there."""
    graph, node = _names(key, eager)
    if len(entries) == 1:
        canonical, op, status, n = entries[0]
        if on(canonical):
            into.append(Change(node, op, canonical, None, status, None, n, eager, graph) if old else
                        Change(node, op, None, canonical, None, status, n, eager, graph))
        return
    counts: dict[tuple[str, str], int] = {}  # per device and op: a name two graphs of a Session gave two ops
    statuses: dict[tuple[str, str], str | None] = {}
    for canonical, op, status, n in entries:
        counts[canonical, op or ""] = counts.get((canonical, op or ""), 0) + n
        statuses.setdefault((canonical, op or ""), status)
    for device, op in sorted(counts):
        if on(device):
            n, status = counts[device, op], statuses[device, op]
            into.append(Change(node, op or None, device, None, status, None, n, eager, graph) if old
                        else Change(node, op or None, None, device, None, status, n, eager, graph))


def _paired(key: Group, old_entries: list[Entry], new_entries: list[Entry], eager: bool,
            moved: list[Change], removed: list[Change], added: list[Change], on: Callable[[str], bool],
            task_of: Callable[[str], Any]) -> int:
    """A group both sides have: what stays, what moved (devices paired within a task first, then in
    order), what is only on one side (appended); how many placements stayed (on the device filtered for)."""
    graph, node = _names(key, eager)
    kept, old_entries, new_entries = same_op(old_entries, new_entries)
    old, old_ops, old_statuses = _merged(old_entries)
    new, new_ops, new_statuses = _merged(new_entries)
    op = next(filter(None, (*new_ops.values(), *old_ops.values())), None)
    stayed = {d: min(n, new[d]) for d, n in old.items() if d in new}
    olds: list[list[Any]] = [[d, n - stayed.get(d, 0)] for d, n in sorted(old.items()) if n > stayed.get(d, 0)]
    news: list[list[Any]] = [[d, n - stayed.get(d, 0)] for d, n in sorted(new.items()) if n > stayed.get(d, 0)]
    for source, target, count in pair_devices(olds, news, task_of):
        if on(source) or on(target):
            moved.append(Change(node, new_ops[target] or old_ops[source] or op, source, target, old_statuses[source],
                                new_statuses[target], count, eager, graph))
    removed += [Change(node, old_ops[d] or op, d, None, old_statuses[d], None, n, eager, graph)
                for d, n in olds if n and on(d)]
    added += [Change(node, new_ops[d] or op, None, d, None, new_statuses[d], n, eager, graph)
              for d, n in news if n and on(d)]
    return sum(n for d, n in (*stayed.items(), *kept.items()) if on(d))


def _by_device(records: _Records, devices: DeviceNames) -> Counter[str]:
    counts: Counter[str] = Counter()
    for rest, n in Counter(_parts(line)[2] for line in records.lines).items():
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


class _Walk:
    """Two sides' sorted graph records walked together, node by node (``GRAPH\0NODE``: a line up to its
    last NUL): a record both sides hold stays; a node's records only one side holds are rows of that
    side, kept as the lines themselves until a row is read; a node both sides hold with different
    records is paired device by device (``_paired``)."""

    def __init__(self, old: _Records, new: _Records, devices: DeviceNames, on: Callable[[str], bool] | None,
                 task_of: Callable[[str], Any]) -> None:
        self.sides = old, new
        self.devices, self.on, self.task_of = devices, on, task_of
        self.moved: list[Change] = []
        self.rows: tuple[list[Any], list[Any]] = ([], [])  # removed, added: lines, (line, count), Changes
        self.lines_in = [0, 0]  # of each side's rows, how many are lines (a placement each)
        self.unchanged = 0
        self._said: list[dict[bytes, tuple[str | None, str, str | None]]] = [{}, {}]

    def said(self, side: int, rest: bytes) -> tuple[str | None, str, str | None]:
        """A record's op, canonical device and status."""
        found = self._said[side].get(rest)
        if found is None:
            op, device, status = self.sides[side].rest(rest)
            found = self._said[side][rest] = (op, self.devices.spec(device).canonical, status)
        return found

    def kept(self, side: int, line: bytes) -> bool:
        return self.on is None or self.on(self.said(side, _parts(line)[2])[1])

    def in_place(self, a: list[bytes], b: list[bytes]) -> tuple[list[bytes], list[bytes]]:
        """The records the two sides hold at the same place of their sorted order (two runs of one program
        place mostly the same nodes the same way) stay; what is left of each side (sorted still), to be
        matched by node: the two sides as they are where none is at the start, middle or end (two logs whose
        names all differ, or one with nodes the other lacks early on: the walk matches what is the same)."""
        n = min(len(a), len(b))
        if not any(any(map(operator.eq, a[at : at + STRETCH], b[at : at + STRETCH]))
                   for at in {0, max(0, n // 2 - STRETCH // 2), max(0, n - STRETCH)}):
            return a, b
        left: tuple[list[bytes], list[bytes]] = ([], [])
        for start in range(0, n, STRETCH):
            end = min(start + STRETCH, n)
            olds, news = a[start:end], b[start:end]
            if olds == news:  # by the list comparison's own loop
                self.unchanged += end - start if self.on is None else sum(self.kept(0, x) for x in olds)
                continue
            if all(map(operator.ne, olds, news)):  # nothing in place (two logs whose names differ)
                left[0].extend(olds)
                left[1].extend(news)
                continue
            for x, y in zip(olds, news):
                if x == y:
                    self.unchanged += self.kept(0, x)
                else:
                    left[0].append(x)
                    left[1].append(y)
        left[0].extend(a[n:])
        left[1].extend(b[n:])
        return left

    def run(self) -> None:
        a, b = self.in_place(self.sides[0].lines, self.sides[1].lines)  # each sorted, as each side's lines are
        i = j = 0
        na, nb = len(a), len(b)
        while i < na and j < nb:
            x, y = a[i], b[j]
            if x == y:  # the same record, at other places of the two sides' order
                self.unchanged += self.kept(0, x)
                i += 1
                j += 1
                continue
            gx, gy = x[: x.find(b"\0", x.find(b"\0") + 1)], y[: y.find(b"\0", y.find(b"\0") + 1)]
            if gx != gy:
                # every record before the other side's next node is of a node that side does not hold
                side, lines, at, other = (0, a, i, gy) if gx < gy else (1, b, j, gx)
                end = bisect_left(lines, other, at)
                if end > at:
                    self.one_side(side, lines[at:end])
                    if side == 0:
                        i = end
                    else:
                        j = end
                    continue
            i, j = self.node(min(gx, gy), (a, b), i, j)
        self.one_side(0, a[i:])
        self.one_side(1, b[j:])

    def node(self, group: bytes, sides: tuple[list[bytes], list[bytes]], i: int, j: int) -> tuple[int, int]:
        """The records of one node (``group``) from ``i`` and ``j`` on in the two sides' sorted ``sides``:
        what stays, moves, is one side's."""
        prefix = group + b"\0"
        runs = []
        for lines, at in zip(sides, (i, j)):
            end = at
            while end < len(lines) and lines[end].startswith(prefix):
                end += 1
            runs.append(lines[at:end])
        olds, news = Counter(runs[0]), Counter(runs[1])
        for line, n in olds.items():
            if line in news:
                self.unchanged += min(n, news[line]) if self.kept(0, line) else 0
        old_extra, new_extra = olds - news, news - olds
        key = _group_names(group)
        if old_extra and new_extra:
            self.unchanged += _paired(key, self.entries(0, old_extra), self.entries(1, new_extra), False,
                                      self.moved, self.rows[0], self.rows[1], self.on or _everywhere, self.task_of)
        else:
            for side, extra in ((0, old_extra), (1, new_extra)):
                if extra:
                    self.one_side(side, sorted(extra.elements()))
        return i + len(runs[0]), j + len(runs[1])

    def entries(self, side: int, lines: Counter[bytes]) -> list[Entry]:
        return [(canonical, op, status, n) for line, n in lines.items()
                for op, canonical, status in [self.said(side, _parts(line)[2])]]

    def one_side(self, side: int, lines: list[bytes]) -> None:
        """Records (sorted) of nodes the other side does not hold: a row each, a node's records
        counted per device."""
        if not lines:
            return
        into = self.rows[side]
        groups = [] if self.sides[side].unique else node_groups(lines)
        if not groups or (self.on is None and not adjacent_repeats(groups)):  # a record per node: lines are rows
            kept = lines if self.on is None else [line for line in lines if self.kept(side, line)]
            into.extend(kept)
            self.lines_in[side] += len(kept)
            return
        start = 0
        while start < len(lines):
            end = start + 1
            while end < len(lines) and groups[end] == groups[start]:
                end += 1
            if end - start == 1:
                if self.kept(side, lines[start]):
                    into.append(lines[start])
                    self.lines_in[side] += 1
            else:
                _one_side(_group_names(groups[start]), self.entries(side, Counter(lines[start:end])),
                          False, side == 0, into, self.on or _everywhere)
            start = end

    def changes(self, side: int) -> Changes:
        graphs: dict[bytes, str | None] = {b"": None}
        afters_for: dict[tuple[Callable[[str], str], bool], RowAfters] = {}  # a row's JSON after its node

        def make(item: Any) -> Change:
            if isinstance(item, Change):
                return item
            line, n = (item, 1) if isinstance(item, bytes) else item
            graph_key, node, rest = _parts(line)
            graph = graphs.get(graph_key)
            if graph is None and graph_key:
                graph = graphs[graph_key] = name_text(graph_key)
            op, canonical, status = self.said(side, rest)
            name = name_text(node)
            return (Change(name, op, canonical, None, status, None, n, False, graph) if side == 0 else
                    Change(name, op, None, canonical, None, status, n, False, graph))

        def afters(quote: Callable[[str], str], decoded: bool = False) -> RowAfters:
            """The JSON of a row after its node's string (``, "op": ...}``), per (graph, rest), as ``quote``
            writes strings; ``decoded``: graph and rest given as text (of valid UTF-8), and the node's
            closing quote written first."""
            found = afters_for.get((quote, decoded))
            if found is None:
                def after(graph_key: bytes, rest: bytes) -> str:
                    row = make(graph_key + b"\0\0" + rest)._replace(node=None)
                    return "".join(f", {quote(k)}: {'null' if v is None else quote(v) if isinstance(v, str) else v}"
                                   for k, v in list(row.side_dict().items())[1:]) + "}"

                found = afters_for[quote, decoded] = RowAfters(
                    (lambda graph, rest: '"' + after(graph.encode(), rest.encode())) if decoded else after)
            return found

        def text(items: list[Any], quote: Callable[[str], str], encode: Callable[[Any], str], separator: str) -> str:
            fast = plain_text(items, quote, self.lines_in[side] == len(self.rows[side]), afters(quote, decoded=True),
                              separator)
            if fast is not None:  # the usual rows: a line each, names JSON takes as they are
                return fast
            after = afters(quote)
            found: list[str] = []
            append = found.append
            for item in items:  # a million rows: each line's own work only
                parts = item.split(b"\0", 2) if type(item) is bytes else ()
                if len(parts) != 3:
                    append(encode(item))
                    continue
                graph_key, node, rest = parts
                append('{"node": ' + quote(name_text(node)) + after[graph_key, rest])
            return separator.join(found)

        def count(items: list[Any]) -> int:
            if items is self.rows[side] and self.lines_in[side] == len(items):  # lines only: a placement each
                return len(items)
            others = [item for item in items if type(item) is not bytes]
            return len(items) - len(others) + sum(item.count if isinstance(item, Change) else item[1]
                                                  for item in others)

        return Changes(self.rows[side], make, count, text)


STRETCH = 64  # records compared at once, where the two sides are likely the same


def _parts(line: bytes) -> tuple[bytes, bytes, bytes]:
    """A sorted record's graph, node and rest (see logparse.records)."""
    parts = line.split(b"\0", 2)
    return (parts[0], parts[1], parts[2]) if len(parts) == 3 else (b"", parts[-1], b"")


def _everywhere(_canonical: str) -> bool:
    return True


def _by_name(records: _Records) -> _Records:
    """The records with no graph named: matched by node name alone."""
    lines = sorted(line[line.find(b"\0"):] for line in records.lines)
    return _Records(lines, records.rest, records.eager, records.eager_fields, records.traces, False)


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
    walk = _Walk(sides[0], sides[1], devices, on, task_of)
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
            walk.sides = _by_name(sides[0]), _by_name(sides[1])
        walk.run()
        a, b = sides
        # every eager record is grouped before any is matched: one record may be another group on the other
        # side (``__inference_f_48`` is f's first trace in one log, its second in the other)
        places: dict[str, Place] = {}
        olds = _decoded(a.eager, a.eager_fields, devices, places, True, a.traces)
        news = _decoded(b.eager, b.eager_fields, devices, places, True, b.traces)
        both = olds.keys() & news.keys()
        for key in sorted(both):  # groups by graph and name
            walk.unchanged += _paired(key, olds[key], news[key], True, walk.moved, removed, added, on or _everywhere,
                                      task_of)
        for found, old_side, into in ((olds, True, removed), (news, False, added)):
            for key in sorted(found.keys() - both):
                _one_side(key, found[key], True, old_side, into, on or _everywhere)
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
    copies = tallied.report.copies
    return DiffSide(tallied.name, tallied.saved, sum(by_device.values()),
                    None if copies is None else link_totals(copies), counts_only)
