"""Two inputs compared (`placement diff`): device names normalised, graph nodes matched by task and
name, eager ops counted per op and device; pure, no TensorFlow."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any

from placement_cli.devices import DeviceSpec, DeviceSpecError, parse_device
from placement_cli.exceptions import UsageProblem
from placement_cli.filters import Filters, compile_node, device_matcher, onednn_base, op_matcher
from placement_cli.i18n import _
from placement_cli.logparse.saved import Tallied, record_fields
from placement_cli.model import LOGGED, Change, DiffSide, PlacementDiff, link_totals

# A record as compared: (node or None, op, device, status or None); the device as a log printed it, or a
# saved report's canonical name.
Fields = tuple[str | None, str | None, str, str | None]


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


def _log_records(side: Tallied) -> _Records:
    def graph(record: Any) -> Fields:
        node, op, device = record_fields(record)
        return node, op, device, None

    def eager(record: Any) -> Fields:
        op, device = record
        return None, op.decode("utf-8", "replace"), device.decode("utf-8", "replace"), None

    return _Records(side.records or Counter(), side.eager or Counter(), graph, eager)


def _report_records(side: Tallied) -> _Records:
    graph: Counter[Hashable] = Counter()
    eager: Counter[Hashable] = Counter()
    for p in side.report.placements:
        status = None if p.status == LOGGED else str(p.status)
        if p.node is None or p.kind == "eager":
            eager[(None, p.op, p.canonical, status)] += 1
        else:
            graph[(p.node, p.op, p.canonical, status)] += 1
    return _Records(graph, eager, lambda r: r, lambda r: r)  # type: ignore[arg-type,return-value]


def _filtered(records: _Records, filters: Filters, devices: _Devices) -> _Records:
    """Only the records every filter matches (as parse's filters match placements)."""
    tests: list[Callable[[Fields], bool]] = []
    if filters.device:
        on = device_matcher(filters.device)
        tests.append(lambda f: on(devices.spec(f[2])))
    if filters.op:
        is_op = op_matcher(filters.op)
        tests.append(lambda f: is_op(f[1]))
    if filters.node:
        pattern = compile_node(filters.node)
        tests.append(lambda f: bool(f[0]) and pattern.search(f[0]) is not None)

    def keep(counter: Counter[Hashable], fields: Callable[[Hashable], Fields]) -> Counter[Hashable]:
        return Counter({r: n for r, n in counter.items() if all(test(fields(r)) for test in tests)})

    return _Records(keep(records.graph, records.fields), keep(records.eager, records.eager_fields),
                    records.fields, records.eager_fields)


def _surplus(mine: Counter[Hashable], theirs: Counter[Hashable]) -> dict[Hashable, int]:
    """The records ``mine`` holds more often than ``theirs`` (the rest are the same on both sides)."""
    found = {}
    for record, n in mine.items():
        extra = n - theirs.get(record, 0)
        if extra > 0:
            found[record] = extra
    return found


# One side's record of a group, decoded: (canonical device, op as printed, status, count).
Entry = tuple[str, "str | None", "str | None", int]


def _decoded(records: dict[Hashable, int], fields: Callable[[Hashable], Fields], devices: _Devices,
             places: dict[str, tuple[tuple[str, int, int], str]], eager: bool) -> dict[tuple[Any, ...], list[Entry]]:
    """The records by group: a graph node by task and name; an eager op by task and op, oneDNN's
    renaming undone (``_MklMatMul`` is MatMul)."""
    found: dict[tuple[Any, ...], list[Entry]] = {}
    for record, n in records.items():
        node, op, device, status = fields(record)
        place = places.get(device)
        if place is None:
            spec = devices.spec(device)
            place = places[device] = (spec.job or "localhost", spec.replica or 0, spec.task or 0), spec.canonical
        task, canonical = place
        key = (task, (onednn_base(op or "") or op) if eager else node)
        entry = (canonical, op, status, n)
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


def _one_side(key: tuple[Any, ...], entries: list[Entry], eager: bool, old: bool, into: list[Change]) -> None:
    """A group only one side has: every placement of it is only there."""
    node = None if eager else key[1]
    if len(entries) == 1:
        canonical, op, status, n = entries[0]
        into.append(Change(node, op, canonical, None, status, None, n, eager) if old else
                    Change(node, op, None, canonical, None, status, n, eager))
        return
    counts, op, statuses = _merged(entries)
    for device in sorted(counts):
        into.append(Change(node, op, device, None, statuses[device], None, counts[device], eager) if old else
                    Change(node, op, None, device, None, statuses[device], counts[device], eager))


def _paired(key: tuple[Any, ...], old_entries: list[Entry], new_entries: list[Entry], eager: bool,
            moved: list[Change], removed: list[Change], added: list[Change]) -> int:
    """A group both sides have: what stays, what moved (devices paired in order), what is only on one
    side (appended); how many placements stayed."""
    node = None if eager else key[1]
    old, old_op, old_statuses = _merged(old_entries)
    new, new_op, new_statuses = _merged(new_entries)
    op = new_op or old_op
    stayed = {d: min(n, new[d]) for d, n in old.items() if d in new}
    olds = [[d, n - stayed.get(d, 0)] for d, n in sorted(old.items()) if n > stayed.get(d, 0)]
    news = [[d, n - stayed.get(d, 0)] for d, n in sorted(new.items()) if n > stayed.get(d, 0)]
    i = j = 0
    while i < len(olds) and j < len(news):
        count = min(olds[i][1], news[j][1])
        moved.append(Change(node, op, olds[i][0], news[j][0], old_statuses[olds[i][0]], new_statuses[news[j][0]],
                            count, eager))
        olds[i][1] -= count
        news[j][1] -= count
        i += olds[i][1] == 0
        j += news[j][1] == 0
    removed += [Change(node, old_op or op, d, None, old_statuses[d], None, n, eager) for d, n in olds[i:] if n]
    added += [Change(node, new_op or op, None, d, None, new_statuses[d], n, eager) for d, n in news[j:] if n]
    return sum(stayed.values())


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
    """What moved from ``old`` to ``new``; placements only one of them has."""
    devices = _Devices()
    sides = []
    for tallied in (old, new):
        records = _report_records(tallied) if tallied.saved else _log_records(tallied)
        if filters.active:
            records = _filtered(records, filters, devices)
        sides.append(records)
    counts_only = [t.saved and not t.report.placements and t.report.placement_count > 0 for t in (old, new)]
    if filters.active and any(counts_only):
        name = (old, new)[counts_only.index(True)].name
        raise UsageProblem(_("{name} holds only counts per device (saved with --summary): {filters} cannot narrow "
                             "it").format(name=name, filters=filters.describe()))
    if filters.active or not all(t.saved or t.report.counted is not None for t in (old, new)):
        by_device = [_by_device(r, devices) if not c else Counter(t.report.by_device)
                     for r, t, c in zip(sides, (old, new), counts_only)]
    else:
        by_device = [Counter(t.report.by_device) for t in (old, new)]
    moved: list[Change] = []
    removed: list[Change] = []
    added: list[Change] = []
    unchanged = 0
    if not any(counts_only):
        a, b = sides
        for eager, mine, theirs in ((False, a.graph, b.graph), (True, a.eager, b.eager)):
            old_extra, new_extra = _surplus(mine, theirs), _surplus(theirs, mine)
            unchanged += sum(mine.values()) - sum(old_extra.values())
            places: dict[str, tuple[tuple[str, int, int], str]] = {}
            olds = _decoded(old_extra, a.eager_fields if eager else a.fields, devices, places, eager)
            news = _decoded(new_extra, b.eager_fields if eager else b.fields, devices, places, eager)
            both = olds.keys() & news.keys()
            start = len(removed), len(added)
            for key in _sorted(both):
                unchanged += _paired(key, olds[key], news[key], eager, moved, removed, added)
            for found, old_side, into, first in ((olds, True, removed, start[0]), (news, False, added, start[1])):
                paired = len(into) > first  # rows of groups both sides have, before the others: order them all
                for key in _sorted(found.keys() - both):
                    _one_side(key, found[key], eager, old_side, into)
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
    )


def _order(key: tuple[Any, ...]) -> tuple[Any, ...]:
    task, name = key
    return task, name or ""


def _sorted(keys: Iterable[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Groups by task and name (an op of a saved report's eager placement may be None)."""
    keys = list(keys)
    try:
        return sorted(keys)
    except TypeError:
        return sorted(keys, key=_order)


def _row_order(change: Change) -> tuple[Any, ...]:
    return change.node or "", change.op or "", change.device


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
