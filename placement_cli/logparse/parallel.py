"""``--summary`` of a big file on two cores: the file's second half is counted in a forked child.

The halves meet at a line start where the line before and the line there are both
whole placements, so no record, wrapped row or error message spans the boundary and
each half reads its lines as one pass would. The second half is decoded as the first
(UTF-16 included). Where no such place is found near the middle, the file is
compressed, or the child fails, ``count_split`` returns None and the caller reads the
file in one pass.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import os
import pickle
from typing import Any, BinaryIO

from placement_cli import forked
from placement_cli.collector import paused
from placement_cli.logparse import functions, reader, rejoin
from placement_cli.logparse.engine import Parser
from placement_cli.logparse.reader import CHUNK, Layout, holds_functions, layout_of, newline
from placement_cli.model import Report

SPLIT_MIN = 32 << 20  # smaller files are done before a second process would pay off
SEARCH = 4 << 20  # how far past the middle a boundary is looked for


def can_split(path: str) -> bool:
    return hasattr(os, "fork") and (os.cpu_count() or 1) > 1 and os.path.isfile(path) \
        and os.path.getsize(path) >= SPLIT_MIN


def _is_record(raw: bytes, encoding: str) -> bool:
    text = codecs.decode(raw, encoding, "replace").encode("utf-8", "replace").replace(b"\0", b"")
    return rejoin.is_record(text)


def boundary(path: str, size: int, layout: Layout) -> int | None:
    """A line start at or after the middle between two whole placements, or None."""
    nl = newline(layout.encoding)
    unit = len(nl)
    start = layout.bom + (size // 2 - layout.bom) // unit * unit
    with open(path, "rb") as f:
        f.seek(start)
        window = f.read(SEARCH)
    ends = []  # offsets in window of aligned newlines
    pos = 0
    while True:
        pos = window.find(nl, pos)
        if pos < 0:
            return None
        if pos % unit == 0:
            ends.append(pos)
            if len(ends) >= 3:
                before, at, after = ends[-3:]
                if _is_record(window[before + unit : at], layout.encoding) \
                        and _is_record(window[at + unit : after], layout.encoding):
                    return start + at + unit
        pos += 1


def lines_before(path: str, offset: int, layout: Layout) -> int:
    """How many lines the text before ``offset`` holds (the tail numbers its lines on)."""
    count, left = 0, offset - layout.bom
    decoder = None if layout.encoding == "utf-8" else codecs.getincrementaldecoder(layout.encoding)("replace")
    buffer = bytearray(4 << 20)
    with open(path, "rb", buffering=0) as f:
        f.seek(layout.bom)
        while left > 0:
            n = f.readinto(memoryview(buffer)[: min(left, len(buffer))])
            if not n:
                break
            left -= n
            block = memoryview(buffer)[:n]
            count += buffer.count(b"\n", 0, n) if decoder is None else decoder.decode(block).count("\n")
    return count


def _read_into(channel: Any, text: bytearray) -> bytearray:
    """``text`` filled from ``channel``; EOFError where the channel ends first."""
    view, got = memoryview(text), 0
    while got < len(text):
        n = channel.readinto(view[got:])
        if not n:
            raise EOFError
        got += n
    return text


def count_split(path: str, tally: bool = False) -> Report | None:
    """Count the two halves at once and merge them as if read in one pass; None where
    the file should be read in one pass instead. ``tally``: the report's ``parser`` also holds
    each record's count (engine's tally), as ``split_tally`` returns it."""
    found = split_tally(path, tally)
    return None if found is None else found[0]


def split_tally(path: str, tally: bool = True) -> tuple[Report, Any] | None:
    """count_split's report and the merged parser (with its tally); None as there."""
    if not can_split(path):
        return None
    size = os.path.getsize(path)
    layout = layout_of(path)
    if layout.compression is not None:
        return None
    middle = boundary(path, size, layout)
    if middle is None:
        return None
    lines = lines_before(path, middle, layout)
    known = tally and holds_functions(path)  # a log that runs no tf.function is tallied at a count's speed
    read_end, write_end = os.pipe()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # the child: count the tail, send its state, leave without cleanup handlers
        status = 0
        try:
            os.close(read_end)
            forked.die_with(parent)
            tail: Any = count_range(path, middle, size, layout, start_line=lines, tally=tally,
                                    functions_known=known)
            tail.window.clear()
            tail.lookback = []
            texts = tail.tally.take() if tail.tally is not None else []
            with os.fdopen(write_end, "wb") as out:
                pickle.dump((tail, [len(text) for text in texts]), out, protocol=pickle.HIGHEST_PROTOCOL)
                for text in texts:  # a big tally's texts as they are, after the state that says their sizes
                    out.write(text)
        except BaseException:  # noqa: BLE001 - the parent falls back to one pass
            status = 1
        finally:
            os._exit(status)
    os.close(write_end)
    tail = None
    try:
        head = count_range(path, 0, middle, layout, tally=tally, functions_known=known)
        with os.fdopen(read_end, "rb") as channel:  # read as it comes: a big tally is never held twice
            read_end = -1
            with contextlib.suppress(EOFError, pickle.UnpicklingError, ValueError):  # the child failed
                state, sizes = pickle.load(channel)  # noqa: S301 - our own child's data
                texts = [_read_into(channel, bytearray(n)) for n in sizes]
                if state.tally is not None:
                    state.tally.chunks = texts
                tail = state
    finally:
        if read_end >= 0:
            os.close(read_end)
        _, status = os.waitpid(pid, 0)
    if status != 0 or tail is None:
        return None
    return merge_ranges(head, tail), head


def count_range(path: str, start: int, end: int, layout: reader.Layout, *, start_line: int = 0,
                tally: bool = False, functions_known: bool = True) -> Parser:
    """Per-device counts of the lines in [start, end) of a file, which begin after
    ``start_line`` lines, with the state ``merge_ranges`` needs to pair copies across the
    boundary. ``start`` begins a line that stands on its own (see ``parallel``), so
    nothing before it is needed; the range at the file's start is left open for the next."""
    parser = Parser(keep=False, tally=tally, functions_known=functions_known)
    start = max(start, layout.bom)
    with open(path, "rb") as f:
        f.seek(start)
        stream = io.BufferedReader(_Slice(f, end - start), CHUNK)
        if start > layout.bom:
            parser.held, parser.newlines = [], start_line
            parser.functions = functions.Functions(mid_file=True)
        parser.start_source(layout.wrap)  # the whole file's layout, not one found in this range
        with paused():  # millions of short-lived pieces, no cycles: about 8% of a big count
            for data, body_end in reader.Lines(CHUNK).chunks(reader.decoded(stream, layout.encoding, CHUNK)):
                parser.feed(data, body_end)
    if parser.held is not None:
        parser.close()
    return parser


class _Slice(io.RawIOBase):
    """At most ``size`` bytes of an open file, from where it stands."""

    def __init__(self, f: BinaryIO, size: int) -> None:
        self.f, self.left = f, size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = self.f.readinto(memoryview(buffer)[: min(len(buffer), self.left)])  # type: ignore[attr-defined]
        self.left -= n or 0
        return n or 0


def merge_ranges(head: Parser, tail: Parser) -> Report:
    """One Report from two consecutive ranges, as one pass would have counted them: the
    block the boundary cuts is made whole again, and the bare copies the tail held back
    are settled against the glog lines on both sides."""
    held = list(tail.held or ()) + [([], set())] * 3
    cut_keys = head.block_keys | held[0][1]  # the glog keys of the block the boundary cuts
    before = list(head.window)
    after = [held[1][1], held[2][1]]
    settle = [
        (head.pending, [*before, cut_keys]),  # the head's last whole block
        (head.block_bare + held[1][0], [before[-1] if before else set(), cut_keys, after[0]]),
        (held[2][0], [cut_keys, *after]),
    ]
    for bare, blocks in settle:
        head.count_bare(bare, set().union(*blocks))
    for items, function in head.functions.merge(tail.functions):
        head.settle(items, function)  # the two ranges' parsers are one parse's halves
    head.counts.update(tail.counts)
    if head.tally is not None and tail.tally is not None:
        head.tally.update(tail.tally)
        head.eager_tally.update(tail.eager_tally)
    for failure in tail.failures.result():
        head.failures.seen.setdefault(failure)
    head.specs.update(tail.specs)
    head.newlines = tail.newlines
    head.last = tail.last or head.last
    return head.report()
