"""`placement diff`: what moved between two runs (or logs, or saved reports) of a program."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import repeat
from operator import itemgetter
from typing import TYPE_CHECKING, Any, NamedTuple, overload

from placement_cli.i18n import Wording, english
from placement_cli.model.copies import LinkTotal
from placement_cli.model.fields import count, known_total, optional_text, text
from placement_cli.model.report import STATUSES

if TYPE_CHECKING:
    from placement_cli.model.cost import StepTimes


class Change(NamedTuple):
    """Placements of one node (or, for eager ops, ``count`` runs of one op) that moved, or that
    only one side has. Devices are canonical; a status is None where the input does not know it.
    (Frozen: a named tuple, a fifth of a dataclass's cost for the million a big diff may hold.)"""

    node: str | None  # None: eager ops, which have no names
    op: str | None
    source: str | None  # the old device; None for a placement only NEW has
    target: str | None  # the new device; None for a placement only OLD has
    old_status: Wording | None = None
    new_status: Wording | None = None
    count: int = 1  # type: ignore[assignment]  # the field hides tuple.count, never called on a Change
    eager: bool = False
    # the tf.function whose graph holds the node, without TensorFlow's trace counter ("step"; the second
    # trace of one function "step#2"); for an eager op, None. None: a Session's graph, or not known
    graph: str | None = None

    @property
    def device(self) -> str:
        """The one device of a placement only one side has."""
        return self.target if self.source is None else self.source  # type: ignore[return-value]

    @property
    def status(self) -> Wording | None:
        return self.new_status if self.source is None else self.old_status

    def moved_dict(self) -> dict[str, Any]:
        return {"node": self.node, "op": self.op, "graph": self.graph, "from": self.source, "to": self.target,
                "old_status": english(self.old_status), "new_status": english(self.new_status), "count": self.count}

    def side_dict(self) -> dict[str, Any]:
        return {"node": self.node, "op": self.op, "graph": self.graph, "device": self.device, "status": english(self.status),
                "count": self.count}

    @classmethod
    def from_moved_dict(cls, c: Any) -> Change:
        node = optional_text(c.get("node"))
        return cls(node, optional_text(c.get("op")), optional_text(c.get("from")), optional_text(c.get("to")),
                   _status(c.get("old_status")), _status(c.get("new_status")), count(c.get("count", 1)),
                   node is None, optional_text(c.get("graph")))

    @classmethod
    def from_side_dict(cls, c: Any, side: str) -> Change:
        """A row only one side has: ``side`` "new" (added) or "old" (removed)."""
        node, device, status = optional_text(c.get("node")), text(c["device"]), _status(c.get("status"))
        source, target = (None, device) if side == "new" else (device, None)
        return cls(node, optional_text(c.get("op")), source, target, status if side == "old" else None,
                   status if side == "new" else None, count(c.get("count", 1)), node is None,
                   optional_text(c.get("graph")))


def _status(value: Any) -> Wording | None:
    """A status as a diff's JSON writes it (its English), read back as the status it names."""
    found = optional_text(value)
    return None if found is None else STATUSES.get(found, found)


# One side's record of a group, decoded: (canonical device, op as printed, status, count).
Entry = tuple[str, "str | None", "str | None", int]


def same_op(olds: list[Entry], news: list[Entry]) -> tuple[dict[str, int], list[Entry], list[Entry]]:
    """The placements of one op on one device both sides hold, per device; what is left of each side
    (as two logs' equal records stay before a node's others are paired: a row names the op that moved)."""
    counts: list[dict[tuple[str, str | None], list[Any]]] = [{}, {}]
    for found, entries in zip(counts, (olds, news)):
        for canonical, op, status, n in entries:
            found.setdefault((canonical, op), [0, status])[0] += n
    kept: dict[str, int] = {}
    for at, (n, _status) in counts[0].items():
        other = counts[1].get(at)
        if other:
            same = min(n, other[0])
            counts[0][at][0] -= same
            other[0] -= same
            kept[at[0]] = kept.get(at[0], 0) + same
    left = [[(canonical, op, status, n) for (canonical, op), (n, status) in found.items() if n] for found in counts]
    return kept, left[0], left[1]


def pair_devices(olds: list[list[Any]], news: list[list[Any]], task_of: Callable[[str], Any]
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


# what JSON writes escaped in a string (in a batch of records, NUL and newline are their separators)
_JSON_ESCAPED = bytes(range(1, 32)).replace(b"\n", b"") + b'"\\'


def plain_rows(items: list[Any], quote: Callable[[str], str], lines: bool = False
               ) -> tuple[Iterable[str], list[str], list[str]] | None:
    """``items`` as their graphs, nodes and rests (texts), where every one is a record line
    (b"GRAPH\\0NODE\\0REST", a row of one placement; known beforehand where ``lines``) whose names are
    valid UTF-8 that ``quote`` writes as they are; None where one is not. The batch is decoded and split
    as one text, each line cut by ``str.partition`` (a line split apart one by one took twice as long);
    lines of no tf.function (the usual log: each begins with its graph's NUL) are cut once."""
    if not items or (not lines and list(map(type, items)).count(bytes) != len(items)):
        return None
    batch = b"\n".join(items)
    if len(batch.translate(None, _JSON_ESCAPED)) != len(batch) or batch.count(b"\n") != len(items) - 1:
        return None  # (a newline of a saved report's name: its own line would be cut there)
    try:
        text = batch.decode("utf-8")  # an escaped NUL (an invalid sequence) fails here too
    except UnicodeDecodeError:
        return None
    if not text.isascii() and quote("\u00e9") != '"\u00e9"':  # --ascii: every other letter escaped
        return None
    n = len(items)  # lines, as the batch's newlines are (counted above): no name holds one
    graphs: Iterable[str]
    unnamed = text[1:].split("\n\0") if text[:1] == "\0" else ()
    if len(unnamed) == n:  # every line begins with a NUL, its graph's ("", no tf.function's): "NODE\0REST" each
        cut = list(map(str.partition, unnamed, repeat("\0")))
        graphs = repeat("", n)
    else:
        first = list(map(str.partition, text.split("\n"), repeat("\0")))
        if not all(map(itemgetter(1), first)):
            return None
        graphs = map(itemgetter(0), first)
        cut = list(map(str.partition, map(itemgetter(2), first), repeat("\0")))
    if not all(map(itemgetter(1), cut)):
        return None
    return graphs, list(map(itemgetter(0), cut)), list(map(itemgetter(2), cut))


def plain_text(items: list[Any], quote: Callable[[str], str], lines: bool, tails: Mapping[tuple[str, str], str],
               separator: str) -> str | None:
    """``items``' rows as JSON joined by ``separator``, where ``plain_rows`` cuts them: made as one list of
    pieces (no text of a row on its own), each node followed by its ``tails`` of (graph, rest) (the row
    after the node's name: ``", "op": ...}``); None where ``plain_rows`` cannot."""
    found = plain_rows(items, quote, lines)
    if found is None:
        return None
    graphs, nodes, rests = found
    pieces = [separator + '{"node": "'] * (3 * len(nodes))
    pieces[0] = '{"node": "'
    pieces[1::3] = nodes
    pieces[2::3] = map(tails.__getitem__, zip(graphs, rests))
    return "".join(pieces)


class RowAfters(dict[tuple[Any, Any], str]):
    """A row's JSON after its node, per (graph, rest), made on first use."""

    def __init__(self, make: Callable[[Any, Any], str]) -> None:
        super().__init__()
        self.make = make

    def __missing__(self, key: tuple[Any, Any]) -> str:
        found = self[key] = self.make(*key)
        return found


# Rows' JSON joined (items, quote, the JSON of an item as its Change writes it, separator).
RowsText = Callable[[list[Any], Callable[[str], str], Callable[[Any], str], str], str]


class Changes(Sequence[Change]):
    """Rows of a diff made as they are read: ``items`` holds, per row, whatever ``make`` turns into
    its Change (a Change itself passes through). A big diff's million rows stay a list of references
    to the records it compared, not a million tuples of strings."""

    def __init__(self, items: list[Any], make: Callable[[Any], Change], counts: Callable[[list[Any]], int],
                 text: RowsText | None = None) -> None:
        self.items, self.make, self._counts = items, make, counts
        # items' rows (side_dict) as compact JSON, straight from what each item holds, given json's string
        # quoting: a million rows written without a million dicts
        self.text = text
        self._total: int | None = None

    def side_text(self, index: slice, quote: Callable[[str], str], encode: Callable[[dict[str, Any]], str],
                  separator: str) -> str:
        """The rows of ``index`` as ``encode(change.side_dict())`` would write them, joined by ``separator``."""
        items = self.items[index]
        if self.text is not None:
            return self.text(items, quote, lambda item: encode(self.make(item).side_dict()), separator)
        return separator.join([encode(self.make(item).side_dict()) for item in items])

    def __len__(self) -> int:
        return len(self.items)

    @overload
    def __getitem__(self, index: int) -> Change: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Change, ...]: ...

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return tuple(map(self.make, self.items[index]))
        return self.make(self.items[index])

    def __iter__(self) -> Iterator[Change]:
        return map(self.make, self.items)

    def __eq__(self, other: object) -> bool:
        return tuple(self) == tuple(other) if isinstance(other, (tuple, list, Changes)) else NotImplemented

    __hash__ = None  # type: ignore[assignment]

    @property
    def total(self) -> int:
        """The placements the rows stand for (a row's count), without making the rows."""
        if self._total is None:
            self._total = self._counts(self.items)
        return self._total


def total(changes: Sequence[Change]) -> int:
    """The placements ``changes`` stand for."""
    return changes.total if isinstance(changes, Changes) else sum(c.count for c in changes)


class Rows(Sequence[dict[str, Any]]):
    """A diff's rows as JSON objects, each made as it is read (the JSON writer writes them a batch at a
    time: a million rows are never a million dicts at once)."""

    def __init__(self, changes: Sequence[Change], row: Callable[[Change], dict[str, Any]]) -> None:
        self.changes, self.row = changes, row

    def __len__(self) -> int:
        return len(self.changes)

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, index: slice) -> list[dict[str, Any]]: ...

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return [self.row(c) for c in self.changes[index]]
        return self.row(self.changes[index])

    def __eq__(self, other: object) -> bool:
        return list(self) == other if isinstance(other, list) else NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to a list, so unhashable as a list is

    def text(self, index: slice, quote: Callable[[str], str], encode: Callable[[dict[str, Any]], str],
             separator: str) -> str:
        """The rows of ``index`` as compact JSON (``encode`` of each one's dict) joined by ``separator``,
        made the fastest way the rows know."""
        if self.row is Change.side_dict and isinstance(self.changes, Changes):
            return self.changes.side_text(index, quote, encode, separator)
        return separator.join([encode(item) for item in self[index]])


@dataclass(frozen=True)
class DiffSide:
    """One of the two inputs, as the comparison saw it."""

    name: str  # the file as given, "standard input" for -
    saved: bool  # a report saved with --json (else a log)
    placements: int  # after the filters
    copies: tuple[LinkTotal, ...] | None = None  # copies per link and step, where the report has them
    counts_only: bool = False  # a saved `parse --summary` report: only counts per device
    times: StepTimes | None = None  # a timed report's (--time): per step, its wall, devices' busy time, links

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.name, "kind": "report" if self.saved else "log", "placements": self.placements,
                "counts_only": self.counts_only}

    @classmethod
    def from_dict(cls, s: Any) -> DiffSide:
        """A side as a diff's summary has it (its copies are the summary's own entry)."""
        return cls(name=text(s["source"]), saved=s.get("kind") == "report", placements=count(s["placements"]),
                   counts_only=bool(s.get("counts_only")))


@dataclass(frozen=True)
class PlacementDiff:
    """Two inputs compared after normalising device names and pairing TensorFlow's copies: graph
    nodes by their graph (a tf.function, its trace counter dropped) and name, a node placed several
    times as the multiset of its devices, whatever task they belong to; eager ops as counts per op and
    device."""

    old: DiffSide
    new: DiffSide
    moved: Sequence[Change] = ()
    added: Sequence[Change] = ()  # only in NEW
    removed: Sequence[Change] = ()  # only in OLD
    by_device: tuple[tuple[str, int, int], ...] = ()  # (canonical device, old count, new count)
    unchanged: int = 0  # placements on the same device on both sides
    filters: dict[str, Any] | None = None  # the filters that narrowed both sides, where any did
    # the side that names no node's graph (a report saved before graphs were recorded) where the other
    # does: nodes were matched by name alone; None: by graph and name
    unnamed: str | None = None

    @property
    def counts_only(self) -> bool:
        return self.old.counts_only or self.new.counts_only

    @property
    def same(self) -> bool:
        if self.counts_only:
            return all(old == new for _device, old, new in self.by_device)
        return not (self.moved or self.added or self.removed)

    @property
    def copies(self) -> bool:
        """Both sides carry their copies between devices."""
        return self.old.copies is not None and self.new.copies is not None

    @property
    def times(self) -> bool:
        """Both sides were timed (--time)."""
        return self.old.times is not None and self.new.times is not None

    def to_dict(self, lazy: bool = False) -> dict[str, Any]:
        """The comparison as JSON data; ``lazy``: its rows as Rows, made as the JSON writer reads them."""
        summary: dict[str, Any] = {
            "same": self.same,
            "old": self.old.to_dict(),
            "new": self.new.to_dict(),
            "unchanged": self.unchanged,
            "moved": total(self.moved),
            "added": total(self.added),
            "removed": total(self.removed),
        }
        if self.unnamed is not None:
            summary["matched_by_name_only"] = True
        if self.old.copies is not None and self.new.copies is not None:  # self.copies, told to the checker
            summary["copies"] = {side: {"links": [t.to_dict() for t in totals],
                                        "copies": sum(t.copies for t in totals),
                                        "per_step_bytes": _bytes(totals)}
                                 for side, totals in (("old", self.old.copies), ("new", self.new.copies))}
        if self.old.times is not None and self.new.times is not None:
            summary["time"] = {"old": self.old.times.to_dict(), "new": self.new.times.to_dict()}
        data: dict[str, Any] = {
            "moved": Rows(self.moved, Change.moved_dict) if lazy else [c.moved_dict() for c in self.moved],
            "added": Rows(self.added, Change.side_dict) if lazy else [c.side_dict() for c in self.added],
            "removed": Rows(self.removed, Change.side_dict) if lazy else [c.side_dict() for c in self.removed],
            "by_device": {device: {"old": old, "new": new} for device, old, new in self.by_device},
            "summary": summary,
        }
        if self.filters is not None:
            data["filters"] = self.filters
        return data

    @classmethod
    def from_dict(cls, data: Any) -> PlacementDiff:
        """A diff as its JSON has it (``same`` and the totals follow from its rows)."""
        summary = data["summary"]
        old, new = DiffSide.from_dict(summary["old"]), DiffSide.from_dict(summary["new"])
        copies = summary.get("copies")
        if copies is not None:
            old, new = (replace(s, copies=tuple(map(LinkTotal.from_dict, copies[name]["links"])))
                        for s, name in ((old, "old"), (new, "new")))
        times = summary.get("time")
        if times is not None:
            from placement_cli.model.cost import StepTimes  # noqa: PLC0415 - start-up: only timed reports need it

            old, new = (replace(s, times=StepTimes.from_dict(times[name])) for s, name in ((old, "old"), (new, "new")))
        return cls(old, new, moved=tuple(map(Change.from_moved_dict, data["moved"])),
                   added=tuple(Change.from_side_dict(c, "new") for c in data["added"]),
                   removed=tuple(Change.from_side_dict(c, "old") for c in data["removed"]),
                   by_device=tuple((text(d), count(n["old"]), count(n["new"])) for d, n in data["by_device"].items()),
                   unchanged=count(summary["unchanged"]), filters=data.get("filters"),
                   unnamed="" if summary.get("matched_by_name_only") else None)


def _bytes(totals: tuple[LinkTotal, ...] | None) -> int | None:
    return known_total(t.bytes for t in totals or ())
