"""A comparison's tally of one log's placer records (``placement diff``): text, a record a line.

A record is a placer line's "node: (Op): device" as printed (the guide era's "node: device"), a
tf.function's behind its name and SEPARATOR; the two copies TensorFlow prints of one placement are
one record. Repeats are kept as lines, so the halves of a parallel read join as two texts. A
million records take about the size of their text, where counting them in a dict took three times
that; ``lines`` turns the text into what a comparison walks, once."""

from __future__ import annotations

import ctypes
import operator
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Hashable, Iterable
from itertools import islice
from typing import Any

from placement_cli.devices import DeviceNames
from placement_cli.logparse.functions import SEPARATOR

PIECE = 4 << 20  # the text turned into lines a piece at a time
PIECE_LINES = 50_000  # lines sent as one text


class Records:
    """One input's placer records, in the order they were settled, repeats kept: texts (``chunks``),
    one per part of the input read apart."""

    __slots__ = ("_lines", "_sorted", "_texts", "chunks", "named", "unique")

    def __init__(self) -> None:
        self.chunks = [bytearray()]
        self.named: bool | None = None  # some record belongs to a tf.function (known once ``lines`` ran)
        self._lines: list[bytes] | None = None
        self._sorted = False
        self._texts: list[bytes] | None = None  # lines as texts, from a pickle
        self.unique = False  # known: no node has two records (``number_repeats`` or ``sorted_lines`` tell,
        # on the core that read the input: a comparison's rows are then the records themselves)

    @property
    def size(self) -> int:
        return sum(map(len, self.chunks))

    def update(self, items: Iterable[bytes] | Records, function: bytes | None = None) -> None:
        """Add ``items`` (records of ``function``, None: of no tf.function), or another Records' texts
        (taken as they are: a big text is not copied)."""
        if isinstance(items, Records):
            self.chunks += items.chunks
            self.chunks.append(bytearray())
            return
        prefix = b"" if function is None else function + SEPARATOR
        joined = (b"\n" + prefix).join(items)
        if joined:
            text = self.chunks[-1]
            text += prefix
            text += joined
            text += b"\n"

    def take(self) -> list[bytearray]:
        """The texts, handed over (this Records is left empty): what a parallel read's child sends."""
        chunks, self.chunks = self.chunks, [bytearray()]
        return chunks

    def counted(self) -> Counter[bytes]:
        """Each record (behind its function's name and SEPARATOR) and how often it was placed; from the
        texts, so before ``lines``."""
        return Counter(line for text in self.chunks for line in bytes(text).split(b"\n")[:-1])

    def lines(self, graph_key: Callable[[bytes], bytes], number: bool = True) -> list[bytes]:
        """The records as ``GRAPH \\0 NODE \\0 REST``, each ": " of a record a NUL (REST: "(Op)\\0device",
        the guide era's "device"; GRAPH: ``graph_key`` of the record's function, b"" for none), in the
        order they were read (``sorted_lines``: sorted). Made once (the texts are released as they are
        read); a later call returns the same list whatever its ``graph_key``. ``number``: a Session's node
        placed again is ``#k`` (``number_repeats``)."""
        if self._lines is None and self._texts is not None:
            split: list[bytes] = []
            while self._texts:  # each text let go once split
                split += self._texts.pop(0).split(b"\n")
            self._lines, self._texts = split, None
        if self._lines is not None:
            return self._lines
        self.named = any(SEPARATOR in text for text in self.chunks)
        lines: list[bytes] = []
        keys: dict[bytes, bytes] = {}
        while self.chunks:
            text = self.chunks.pop(0)
            start = len(lines)
            at = 0
            while at < len(text):  # a few MB at a time: the copies a piece needs stay small
                end = text.find(b"\n", min(at + PIECE, len(text) - 1)) + 1 or len(text)
                piece = bytes(text[at:end])
                at = end
                if not self.named:  # the usual log: made at the speed of bytes.replace, not line by line
                    piece = b"\0" + piece.replace(b": ", b"\0").replace(b"\n", b"\n\0")
                lines += piece.split(b"\n")
                lines.pop()  # after the piece's last newline
            del text
            if not self.named:
                continue
            for i in range(start, len(lines)):
                function, sep, record = lines[i].partition(SEPARATOR)
                if not sep:
                    function, record = b"", function
                key = keys.get(function)
                if key is None:
                    key = keys[function] = graph_key(function) if function else b""
                lines[i] = key + b"\0" + record.replace(b": ", b"\0")
        self.chunks = [bytearray()]
        if number:
            self.unique = number_repeats(lines)
        self._lines = lines
        return lines

    def __getstate__(self) -> dict[str, object]:
        """Pickled (a parallel read's child sends its Records): the lines as texts of PIECE_LINES lines
        each, not a million objects (a line holds no newline)."""
        lines = self._lines
        texts = None if lines is None else [b"\n".join(lines[at : at + PIECE_LINES])
                                            for at in range(0, len(lines), PIECE_LINES)]
        return {"chunks": self.chunks, "named": self.named, "sorted": self._sorted, "lines": texts,
                "unique": self.unique}

    def __setstate__(self, state: dict[str, Any]) -> None:
        # the texts split by ``lines`` (the unpickler holds what it made until it is done: split here,
        # the lines and all their texts would be held at once)
        self.chunks, self.named, self._sorted = state["chunks"], state["named"], state["sorted"]
        self._lines, self._texts = None, state["lines"]
        self.unique = state["unique"]

    def sorted_lines(self, graph_key: Callable[[bytes], bytes], number: bool = True) -> list[bytes]:
        """``lines``, sorted (in place, once): a node's records next to each other, nodes in order of
        graph and name; ``unique`` then known either way (on the core that read the input, where a
        comparison of two logs whose names all differ would find each line's node on one core after)."""
        lines = self.lines(graph_key, number)
        if not self._sorted:
            if not self.unique:  # told before sorting: the lines read in the order they lie in memory (sorted, 0.15 s
                # for a million-line log's; this way 0.1 s, and a set's 20 MiB more at the peak of a diff)
                nodes = {line[: line.find(b"\0", 1)] for line in lines} if not (self.named or number) else \
                    set(node_groups(lines))  # (unnamed and unnumbered, each line is "\0NODE\0REST")
                self.unique = len(nodes) == len(lines)
                del nodes
            lines.sort()
            self._sorted = True
        return lines


def repeat_graph(n: int) -> bytes:
    """The graph of the ``n``-th graph without a function name (a Session's) to place a node on one task."""
    return b"#%d" % n


class Repeats:
    """Placements of no tf.function, in the order they were read, numbered: the k-th of one node on one
    task (k >= 2) is graph ``#k`` (``number_repeats``; a saved report's placements alike)."""

    def __init__(self) -> None:
        self.seen: dict[tuple[Hashable, tuple[str, int, int]], int] = {}
        self.devices = DeviceNames()

    def graph(self, node: Hashable, device: str) -> bytes:
        place = (node, self.devices.task(device))
        n = self.seen[place] = self.seen.get(place, 0) + 1
        return repeat_graph(n) if n > 1 else b""


def node_groups(lines: list[bytes]) -> list[bytes]:
    """Each record's ``GRAPH\\0NODE`` (the line up to its second NUL): which node it is."""
    return [line[: line.find(b"\0", line.find(b"\0") + 1)] for line in lines]


def adjacent_repeats(groups: list[bytes]) -> bool:
    """Some node's group is next to itself (sorted records: some node has two records)."""
    return any(map(operator.eq, groups, islice(groups, 1, None)))


def number_repeats(lines: list[bytes]) -> bool:
    """Records (``GRAPH \\0 NODE \\0 REST``, in the order they were read) of a node of no tf.function
    placed again on the same task, in place: the k-th is graph ``#k`` (k >= 2). TensorFlow places a
    Session's graph once, so a node placed again on one task is another Session's same-named node (two
    Sessions of one model, a sweep over devices): its identity is its Session's order, as a retraced
    function's is ``f#2``; a between-graph cluster's copies, one per task, stay one node. Only for an
    input that ran no eager op: else such nodes may be the single-op functions eager ops of several
    threads are wrapped in, logged in whatever order the threads ran. True: no node placed twice and no
    function's record (each record is its node's only one)."""
    groups = [line[: line.find(b"\0", 1)] if line[:1] == b"\0" else None for line in lines]  # None: a function's
    functions = groups.count(None)
    if len(set(groups)) == len(groups) - functions + (functions > 0):  # no node placed twice (the usual big log)
        return not functions
    counts = Counter(group for group in groups if group is not None)
    repeats = Repeats()
    for i, group in enumerate(groups):
        if group is not None and counts[group] > 1:  # the device: the rest's last field (REST has no NUL
            device = lines[i][len(group) + 1:].rpartition(b"\0")[2]  # in the guide era's "device")
            graph = repeats.graph(group, device.decode("utf-8", "replace"))
            if graph:
                lines[i] = graph + lines[i]
    return False


def paired_repeats(a: list[bytes], b: list[bytes], keep: bool = False) -> tuple[list[bytes], list[bytes]]:
    """Two sides' sorted records, a Session's node known by its order (``#k``, see ``number_repeats``) only
    where both sides place it as often: else (one more Session on one side, a node one side lacks) its
    records are one node's again, a multiset of devices, as they were before Sessions were told apart."""
    def numbered(lines: list[bytes]) -> tuple[int, int, dict[bytes, set[bytes]]]:
        start, end = bisect_left(lines, b"#"), bisect_left(lines, b"$")
        found: dict[bytes, set[bytes]] = {}
        for line in lines[start:end]:
            graph, _sep, rest = line.partition(b"\0")
            found.setdefault(rest[: rest.find(b"\0")], set()).add(graph)
        return start, end, found

    if keep:  # a side narrowed by filters holds some of its numbers: numbered in its whole run, they stand
        return a, b
    sides = numbered(a), numbered(b)
    nodes = sides[0][2].keys() | sides[1][2].keys()
    loose = {node for node in nodes if sides[0][2].get(node) != sides[1][2].get(node)}
    if not loose:
        return a, b
    out = []
    for lines, (start, end, _found) in zip((a, b), sides):
        kept: list[bytes] = []
        freed: list[bytes] = []
        for line in lines[start:end]:
            rest = line[line.find(b"\0"):]
            (freed if rest[1: rest.find(b"\0", 1)] in loose else kept).append(line)
        freed = [line[line.find(b"\0"):] for line in freed]
        out.append(sorted(lines[:start] + freed) + kept + lines[end:])
    return out[0], out[1]


# A NUL in a graph's or node's name (a saved report may hold any string; a log's never holds one) is
# written as the overlong b"\xc0\x80", which no UTF-8 text holds: a record's NULs stay its separators.
ESCAPED_NUL = b"\xc0\x80"


def escaped_name(name: bytes) -> bytes:
    """A graph's or node's name as a record holds it."""
    return name.replace(b"\0", ESCAPED_NUL) if b"\0" in name else name


def name_text(name: bytes) -> str:
    """A graph's or node's name of a record, as the input gave it: a saved report's lone surrogate
    (encoded with surrogatepass) comes back as itself, bytes no text decodes as U+FFFD."""
    name = name.replace(ESCAPED_NUL, b"\0") if ESCAPED_NUL in name else name
    try:
        return name.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return name.decode("utf-8", "replace")


def release(records: Records | None) -> None:
    """After a big read, hand the memory its parse freed back to the system: glibc keeps it for the
    process's reuse, so the second input's read would start from the first one's peak, not from what
    its records hold (diff of two million-line logs: 65 MB held, not 90)."""
    if records is None or records.size < BIG:
        return
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError, TypeError):  # not glibc: nothing to hand back this way
        pass


BIG = 8 << 20  # records of a smaller read: what a trim could hand back is not worth a call
