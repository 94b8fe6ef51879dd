"""How two sides of a diff pair up, record by record: the records each side holds, grouped (a graph node
by its graph and name, an eager op by op), what only one side has, devices paired as moves, and the walk
over two sorted sides node by node (compare.py prepares the sides and says the result)."""

from __future__ import annotations

import operator
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, TypeAlias

from placement_cli.devices import DeviceNames
from placement_cli.logparse.functions import function_key
from placement_cli.logparse.records import adjacent_repeats, name_text, node_groups
from placement_cli.model import Change
from placement_cli.model.diff import Changes, Entry, RowAfters, pair_devices, plain_text, same_op
from placement_cli.model.ops import onednn_base

# A record as compared: (node or None, op, device, status or None, graph or None); the device as a log
# printed it, or a saved report's canonical name; the graph as TensorFlow named the function.
Fields = tuple[str | None, str | None, str, str | None, str | None]


# A graph record as compared: b"GRAPH\0NODE\0REST" (see logparse.records), sorted; REST is read by the
# side's ``rest`` into (op, device, status): a log's "(Op): device" as printed, a saved report's own code.
Rest = tuple[str | None, str, str | None]


@dataclass
class SideRecords:
    """One side's placements: graph records as sorted lines, eager ones counted, with what each says."""

    lines: list[bytes]
    rest: Callable[[bytes], Rest]
    eager: Counter[Any]  # of an eager record's key: (op, device) bytes for a log, a report's own
    eager_fields: Callable[[Hashable], Fields]
    traces: dict[str, list[int]]  # each function's trace counters on this side (see functions.function_key)
    named: bool = False  # some node's graph is known (a report saved before graphs were recorded names none)
    unique: bool = False  # known: no node has two records (records.Records.unique)


# A group as rows name it: an eager op's key (see decoded), or a graph record's (graph, node).
Group: TypeAlias = "str | tuple[str | None, str | None]"
# A device as compared: (its task, its canonical name).
Place = tuple[tuple[str, int, int], str]


def decoded(records: dict[Hashable, int], fields: Callable[[Hashable], Fields], devices: DeviceNames,
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


def merged(entries: list[Entry]) -> tuple[dict[str, int], dict[str, str | None], dict[str, str | None]]:
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


def group_names_of(key: Group, eager: bool) -> tuple[str | None, str | None]:
    """A group's graph and node as rows name them (None for a Session's graph, and for eager ops); a
    graph record's group is its (graph, node) already."""
    if isinstance(key, tuple):
        return key
    graph, _sep, node = key.partition("\0")
    return (None, None) if eager else (graph or None, node)


def one_side(key: Group, entries: list[Entry], eager: bool, old: bool, into: list[Change],
              on: Callable[[str], bool]) -> None:
    """A group only one side has: every placement of it is only there."""
    graph, node = group_names_of(key, eager)
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


def paired_group(key: Group, old_entries: list[Entry], new_entries: list[Entry], eager: bool,
            moved: list[Change], removed: list[Change], added: list[Change], on: Callable[[str], bool],
            task_of: Callable[[str], Any]) -> int:
    """A group both sides have: what stays, what moved (devices paired within a task first, then in
    order), what is only on one side (appended); how many placements stayed (on the device filtered for)."""
    graph, node = group_names_of(key, eager)
    kept, old_entries, new_entries = same_op(old_entries, new_entries)
    old, old_ops, old_statuses = merged(old_entries)
    new, new_ops, new_statuses = merged(new_entries)
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


class Walk:
    """Two sides' sorted graph records walked together, node by node (``GRAPH\0NODE``: a line up to its
    last NUL): a record both sides hold stays; a node's records only one side holds are rows of that
    side, kept as the lines themselves until a row is read; a node both sides hold with different
    records is paired device by device (``paired_group``)."""

    def __init__(self, old: SideRecords, new: SideRecords, devices: DeviceNames, on: Callable[[str], bool] | None,
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
        return self.on is None or self.on(self.said(side, record_parts(line)[2])[1])

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
        key = group_names(group)
        if old_extra and new_extra:
            self.unchanged += paired_group(key, self.entries(0, old_extra), self.entries(1, new_extra), False,
                                      self.moved, self.rows[0], self.rows[1], self.on or everywhere, self.task_of)
        else:
            for side, extra in ((0, old_extra), (1, new_extra)):
                if extra:
                    self.one_side(side, sorted(extra.elements()))
        return i + len(runs[0]), j + len(runs[1])

    def entries(self, side: int, lines: Counter[bytes]) -> list[Entry]:
        return [(canonical, op, status, n) for line, n in lines.items()
                for op, canonical, status in [self.said(side, record_parts(line)[2])]]

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
                one_side(group_names(groups[start]), self.entries(side, Counter(lines[start:end])),
                          False, side == 0, into, self.on or everywhere)
            start = end

    def changes(self, side: int) -> Changes:
        graphs: dict[bytes, str | None] = {b"": None}
        afters_for: dict[tuple[Callable[[str], str], bool], RowAfters] = {}  # a row's JSON after its node

        def make(item: Any) -> Change:
            if isinstance(item, Change):
                return item
            line, n = (item, 1) if isinstance(item, bytes) else item
            graph_key, node, rest = record_parts(line)
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


def record_parts(line: bytes) -> tuple[bytes, bytes, bytes]:
    """A sorted record's graph, node and rest (see logparse.records)."""
    parts = line.split(b"\0", 2)
    return (parts[0], parts[1], parts[2]) if len(parts) == 3 else (b"", parts[-1], b"")


def everywhere(_canonical: str) -> bool:
    return True


def matched_by_name(records: SideRecords) -> SideRecords:
    """The records with no graph named: matched by node name alone."""
    lines = sorted(line[line.find(b"\0"):] for line in records.lines)
    return SideRecords(lines, records.rest, records.eager, records.eager_fields, records.traces, False)


def group_names(group: bytes) -> tuple[str | None, str | None]:
    """A record's ``GRAPH\0NODE`` as a row's graph and node (None: a Session's graph)."""
    graph, _sep, node = group.partition(b"\0")
    return name_text(graph) or None, name_text(node)  # a node "" (a saved report's) is one, not eager ops
