"""Streams any mix of log dialects through literal-anchored regexes, chunk by chunk.

Each chunk comes with the lines that follow it (``reader.LOOKAHEAD``) and the lines
before it (``rejoin.LOOKBACK``), so a record that spans lines is read the same wherever
the chunks happen to end: what a chunk's records took of the next chunk's lines is
passed on, and the next chunk leaves those lines alone.
"""

from __future__ import annotations

import re
from collections import Counter, deque
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import replace
from operator import attrgetter, itemgetter
from typing import Any, BinaryIO

from placement_cli.devices import DeviceName, DeviceSpec
from placement_cli.logparse import eager, functions, ignored, lazy, mapping, placer, reader, rejoin
from placement_cli.logparse.causes import MAX_CHARS
from placement_cli.logparse.error_messages import MAX_LINES, TRIGGER, may_hold_failure, read_failure
from placement_cli.logparse.records import Records
from placement_cli.model import DeviceMapping, IgnoredRequest, Placement, PlacementFailure, Report
from placement_cli.model.kinds import PlacementKind

CHUNK = reader.CHUNK  # bytes parsed at a time (the property tests vary it)
# A bare stdout copy and its glog twin pair up when at most this many lines apart (up to
# twice as many, depending on where blocks of this many lines end): stdout is
# block-buffered, so its copies lag the glog copies by a few KiB.
PAIR_LINES = 32768
_GLOG = lazy.Pattern(placer.glog_pattern(detailed=True), re.MULTILINE)
_BARE = lazy.Pattern(placer.bare_pattern(detailed=True), re.MULTILINE)
_GLOG_COUNT = lazy.Pattern(placer.glog_pattern(detailed=False), re.MULTILINE)
_BARE_COUNT = lazy.Pattern(placer.bare_pattern(detailed=False), re.MULTILINE)
_EAGER = lazy.Pattern(eager.PATTERN, re.MULTILINE)
_MAPPING = lazy.Pattern(mapping.PATTERN, re.MULTILINE)

Key = bytes  # "node: (Op)/job:..." as printed, once normalised
Note = Callable[[str], None]


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _is_record(line: str) -> bool:
    return rejoin.is_record(line.encode("utf-8", "replace"))


def _after_lines(data: bytes, count: int, start: int = 0) -> int:
    """The offset just after ``count`` newlines from ``start`` (the end if fewer)."""
    if count <= 0:
        return start
    if count < 8:
        pos = start
        for _ in range(count):
            nl = data.find(b"\n", pos)
            if nl < 0:
                return len(data)
            pos = nl + 1
        return pos
    parts = data[start:].split(b"\n", count)
    return len(data) if len(parts) <= count else len(data) - len(parts[-1])


def _last_lines(data: bytes, count: int) -> list[bytes]:
    """The last ``count`` lines of text (its last line ends with a newline, or the text
    ends there): empty lines included."""
    end = len(data) - 1 if data.endswith(b"\n") else len(data)
    start = end
    for _ in range(count):
        start = data.rfind(b"\n", 0, start)
        if start < 0:
            break
    return data[start + 1 : end].split(b"\n") if data else []


class _Lines:
    """Lines of text from an offset, decoded as they are asked for (at most MAX_LINES);
    rows a join took are passed over."""

    def __init__(self, data: bytes, start: int) -> None:
        self.data, self.pos = data, start
        self.cache: list[str] = []
        self.ends: list[int] = []  # where each line's newline is

    def __call__(self, i: int) -> str | None:
        while len(self.cache) <= i:
            if len(self.cache) >= MAX_LINES or self.pos > len(self.data):
                return None
            nl = self.data.find(b"\n", self.pos)
            stop = len(self.data) if nl < 0 else nl
            if self.data[self.pos : stop] != rejoin.CONSUMED:
                self.cache.append(_decode(self.data[self.pos : min(stop, self.pos + 4 * MAX_CHARS)]))
                self.ends.append(stop)
            self.pos = stop + 1
        return self.cache[i]

    def end(self, used: int) -> int:
        """The offset of the newline that ends the first ``used`` lines."""
        self(used - 1)
        return self.ends[min(used, len(self.ends)) - 1]


class _Failures:
    """Collects placement errors, each distinct one once (tracebacks repeat them)."""

    def __init__(self) -> None:
        self.seen: dict[PlacementFailure, None] = {}

    def scan(self, data: bytes, start: int, body_end: int) -> int:
        """Read the errors whose first line lies in data[start:body_end]; the offset where
        the last one read ends (its message may take lines after the body)."""
        end = start - 1
        for hit in TRIGGER.finditer(data, start, body_end):
            if hit.start() <= end:
                continue
            line_start = data.rfind(b"\n", 0, hit.start()) + 1
            lines = _Lines(data, max(line_start, hit.start() - 1024))
            failure, used = read_failure(lines, _is_record)
            end = lines.end(used)
            if failure is not None:
                self.seen.setdefault(failure)
        return end + 1

    def result(self) -> tuple[PlacementFailure, ...]:
        return tuple(self.seen)


def _line_count(total_newlines: int, last: bytes) -> int:
    return total_newlines + (1 if last and not last.endswith(b"\n") else 0)


def _thread_id(found: bytes | None) -> int | None:
    """A thread as absl's prefix names it, as a number (None: the line names none)."""
    return None if found is None else int(found)


def _numbered(data: bytes, base: int, matches: Iterable[re.Match[bytes]]) -> Iterator[tuple[int, re.Match[bytes]]]:
    """Line numbers for matches in increasing order (``data`` starts with an extra newline)."""
    pos, line = 0, base
    for m in matches:
        line += data.count(b"\n", pos, m.start() + 1)
        pos = m.start() + 1
        yield line, m


class Parser:
    """Consumes chunks; glog and eager lines count at once, a bare copy once it is known
    whether its glog twin was printed near it (before or after it).

    "Near" is counted in lines, so that no answer depends on where chunks end: the lines
    are cut in blocks of PAIR_LINES, and a bare copy pairs with a twin in its own block
    or one next to it; its block's bare copies are settled when the next block ends.
    """

    def __init__(self, keep: bool, tally: bool = False, functions_known: bool = True, watch: bool = False) -> None:
        self.keep = keep
        # tally: read where each placer line is, to know its tf.function (False: the text runs none)
        self.attribute = keep or (tally and functions_known)
        self.watch = watch and not self.attribute  # FunctionsRun at the first executed tf.function
        # tally (with keep False): also count each placement's whole record ("node: (Op): device",
        # eager ones as (op, device)), which is all a comparison needs, at a count's speed
        self.tally: Records | None = Records() if tally and not keep else None
        self.eager_tally: Counter[tuple[bytes, bytes]] = Counter()
        self.failures = _Failures()
        self.window: deque[Any] = deque(maxlen=2)  # glog keys of the last two blocks (dicts when keeping)
        self.block_keys: Any = {} if keep else set()  # ... and of the block being read
        self.block_bare: list[Any] = []  # the bare copies of the block being read
        self.pending: list[Any] = []  # ... and of the block before it
        self.placements: list[Placement] = []
        self.ignored: list[IgnoredRequest] = []  # requests the placer logged it ignored (kept only with keep)
        self.counts: Counter[bytes] = Counter()
        self.mappings: dict[str, str] = {}
        self.mapping_seen = False
        self.newlines = 0
        self.last = b""
        self.specs: dict[bytes, DeviceSpec] = {}
        self.wrap: int | None = None  # the console width of the source being read
        self.lookback: list[bytes] = []  # the previous chunk's last lines, as parsed
        self.taken = 0  # lines at the start of the next chunk that a record already took
        self.read_to = 0  # ... and lines there inside an error message already read
        # A parser that starts mid-file (parallel) leaves the bare copies of its first two
        # blocks to merge_ranges, which knows the glog lines before them: at each of its
        # first three block ends, the bare copies it would have settled and the block's keys.
        self.held: list[tuple[list[Any], Any]] | None = None
        # placer lines waiting for their thread's next executed op, which says which tf.function they
        # belong to (kept placements by index, tallied records as their keys)
        self.functions = functions.Functions()

    def start_source(self, wrap: int | None) -> None:
        """A new file: nothing carries over from the last one's lines."""
        self._settle_functions()
        self.wrap, self.lookback, self.taken, self.read_to = wrap, [], 0, 0

    def spec_of(self, device: bytes) -> DeviceSpec:
        spec = self.specs.get(device)
        if spec is None:
            spec = DeviceName(_decode(device)).spec
            if spec is None:  # the device pattern is stricter than the grammar; never abort a parse
                spec = DeviceSpec()
            self.specs[device] = spec
        return spec

    def feed(self, data: bytes, body_end: int | None = None) -> None:
        """One chunk: ``data[:body_end]`` is parsed, the rest only read as context."""
        whole = body_end is None or body_end >= len(data)
        body_end = len(data) if body_end is None or whole else body_end
        body_lines = data.count(b"\n", 0, body_end)
        taken, self.taken = self.taken, 0
        if taken:  # lines a record of the previous chunk took are blank here
            cut = _after_lines(data, taken)
            data = (rejoin.CONSUMED + b"\n") * data.count(b"\n", 0, cut) + data[cut:]
            body_end = len(data) if whole else _after_lines(data, body_lines)
        found, records = self._find(data, body_end, body_lines)
        if self.wrap or rejoin.needed(data, *records):
            data, self.taken = self._rejoin(data, data.count(b"\n") + 1 if whole else body_lines)
            body_end = len(data) if whole else _after_lines(data, body_lines)
            found, records = self._find(data, body_end, body_lines)
        self.taken = max(self.taken, taken - body_lines)
        body = data[:body_end]
        self.lookback = (self.lookback + _last_lines(body, rejoin.LOOKBACK))[-rejoin.LOOKBACK :]
        start = _after_lines(data, self.read_to)
        end = self.failures.scan(data, start, body_end) if may_hold_failure(body) else start
        self.read_to = data.count(b"\n", body_end, end) if end > body_end else 0
        for piece_end, text, glog, eagers, bare, lines, block_ends in found:
            self._count(text, glog, eagers, bare, data[piece_end : _after_lines(data, 1, piece_end)])
            self.newlines += lines
            if block_ends:
                self._end_block()
        self.last = body[-1:]

    def _segments(self, body: bytes, lines: int) -> list[tuple[bytes, int, bool]]:
        """The body (of ``lines`` newlines) cut where blocks of PAIR_LINES lines end:
        each piece, its newlines, and whether it ends a block."""
        pieces, line = [], self.newlines
        while body:
            left = PAIR_LINES - line % PAIR_LINES  # lines until this block ends
            if lines < left:
                pieces.append((body, lines, False))
                break
            cut = len(body) - len(body.split(b"\n", left)[-1])
            pieces.append((body[:cut], left, True))
            body, line, lines = body[cut:], line + left, lines - left
        return pieces

    def _find(self, data: bytes, body_end: int, body_lines: int) -> tuple[list[Any], tuple[int, int]]:
        """The placements of each block's piece of the body, and how many records body
        and look-ahead hold (for rejoin.needed)."""
        found, records, glog_records, piece_end = [], 0, 0, 0
        for piece, lines, block_ends in self._segments(data[:body_end], body_lines):
            piece_end += len(piece)
            text = b"\n" + piece.replace(*placer.NORMALISE)
            if self.keep:
                glog, eagers, bare = list(_GLOG.finditer(text)), list(_EAGER.finditer(text)), list(_BARE.finditer(text))
            elif self.attribute:  # where each line is says which function it belongs to
                glog, eagers = list(_GLOG_COUNT.finditer(text)), list(_EAGER.finditer(text))
                bare = _BARE_COUNT.findall(text)
            else:
                glog, eagers, bare = _GLOG_COUNT.findall(text), _EAGER.findall(text), _BARE_COUNT.findall(text)
            found.append((piece_end, text, glog, eagers, bare, lines, block_ends))
            records += len(glog) + len(eagers) + len(bare)
            glog_records += len(glog)
        if body_end < len(data):
            more = b"\n" + data[body_end:].replace(*placer.NORMALISE)
            extra = len(_GLOG_COUNT.findall(more))
            records += extra + len(_EAGER.findall(more)) + len(_BARE_COUNT.findall(more))
            glog_records += extra
        return found, (records, glog_records)

    def _rejoin(self, data: bytes, body_rows: int) -> tuple[bytes, int]:
        """Join broken records; also how many rows after the body the joins took."""
        context = len(self.lookback)
        lines = self.lookback + data.split(b"\n")
        joins = rejoin.rejoin(lines, context, self.wrap)
        taken = max((last - context - body_rows + 1 for first, last in joins
                     if first - context < body_rows <= last - context), default=0)
        return b"\n".join(lines[context:]), taken

    def _count(self, text: bytes, glog: list[Any], eagers: list[Any], bare: list[Any], ahead: bytes) -> None:
        """Count (or keep) a piece's placements; ``ahead`` is the line after it (a wrapped
        mapping line goes on there)."""
        if self.keep:
            self._feed_full(text, glog, eagers, bare, ahead)
        elif self.attribute:
            records = [m.group(1, 2) for m in glog]
            self.counts.update(map(itemgetter(1), records))
            executed = [m.group(1, 2) for m in eagers]
            self.counts.update(map(itemgetter(1), executed))
            self.block_keys.update(map(itemgetter(0), records))
            self.block_bare += bare
            self.eager_tally.update(executed)
            self._attribute(text, [(m.start(), r[0]) for m, r in zip(glog, records)], eagers)
        else:
            self.counts.update(map(itemgetter(1), glog))
            self.counts.update(map(itemgetter(1), eagers))
            self.block_keys.update(map(itemgetter(0), glog))
            self.block_bare += bare
            if self.tally is not None:  # a text that runs no tf.function: no line belongs to one
                if self.watch and any(functions.function_of(op) for op, _device in eagers):
                    raise FunctionsRun
                self.tally.update(map(itemgetter(0), glog))
                self.eager_tally.update(eagers)

    def _attribute(self, text: bytes, placed: list[tuple[int, Any]], eagers: list[re.Match[bytes]],
                   thread_at: Callable[[int], bytes | None] | None = None) -> None:
        """Placer lines (their offsets in ``text`` and what stands for them) and executed ops, in the
        order the log has them: each line waits for its thread's next executed op. ``thread_at``: the
        thread of the line at an offset, where the caller read it already."""
        found = self.functions
        at = thread_at or (lambda pos: functions.thread_of(text, pos))
        j, n = 0, len(eagers)
        for pos, item in placed:
            while j < n and eagers[j].start() < pos:
                self._executed(eagers[j], at(eagers[j].start()))
                j += 1
            found.placed(at(pos), item)
        for m in eagers[j:]:
            self._executed(m, at(m.start()))

    def _executed(self, m: re.Match[bytes], thread: bytes | None) -> None:
        settled = self.functions.executed(thread, m.group(1))
        if settled is not None:
            self.settle(*settled)

    def settle(self, items: list[Any], function: bytes | None) -> None:
        """Placer lines whose function is known (None: no tf.function's)."""
        if self.keep:
            if function is not None:
                graph = _decode(function)
                for i in items:
                    self.placements[i] = replace(self.placements[i], graph=graph)
        elif self.tally is not None:
            self.tally.update(items, function)

    def _settle_functions(self) -> None:
        for items, function in self.functions.close():
            self.settle(items, function)

    def _feed_full(self, data: bytes, glog: list[Any], eagers: list[Any], bare: list[Any], ahead: bytes) -> None:
        base = self.newlines
        placed = []
        threads = {m.start(): functions.thread_of(data, m.start()) for m in (*glog, *eagers)}  # each line's, once
        for line, m in _numbered(data, base, glog):
            self.block_keys.setdefault(m.group(1), deque()).append(len(self.placements))
            placed.append((m.start(), len(self.placements)))
            self.placements.append(self._placement(m, line, _thread_id(threads[m.start()])))
        self._attribute(data, placed, eagers, threads.__getitem__)
        for line, m in _numbered(data, base, eagers):
            op, dev = m.group(1, 2)
            self.placements.append(Placement(None, _decode(op), _decode(dev), self.spec_of(dev), PlacementKind.EAGER, line,
                                             thread=_thread_id(threads[m.start()])))
        self.block_bare += [(m, line) for line, m in _numbered(data, base, bare)]
        if ignored.LITERAL in data or ignored.RESOURCES_LITERAL in data:
            found = _numbered(data, base, ignored.PATTERN.finditer(data))
            self.ignored += [ignored.request(m, line) for line, m in found]
        full = data + ahead.replace(*placer.NORMALISE) if ahead else data
        for m in _MAPPING.finditer(full):
            if m.start() + 1 >= len(data):
                break  # the line after the piece: the next piece reads it
            _header, device, desc, cont = m.groups()
            self.mapping_seen = True
            if device:
                text = _decode(mapping.clean(desc))
                if cont:
                    text = f"{text} {_decode(mapping.clean(cont))}"
                self.mappings.setdefault(_decode(device), text)

    def _placement(self, m: re.Match[bytes], line: int, thread: int | None = None) -> Placement:
        node, op, dev = m.group(2, 3, 4)
        return Placement(_decode(node), _decode(op) if op else None, _decode(dev), self.spec_of(dev),
                         PlacementKind.PLACER if op else PlacementKind.LEGACY, line, thread=thread)

    def _end_block(self) -> None:
        """A block's glog keys are known: settle the bare copies of the block before it."""
        newest = self.block_keys
        if self.held is not None and len(self.held) < 3:
            self.held.append((self.pending, newest))
        else:
            self._resolve(newest)
        self.window.append(newest)
        self.pending = self.block_bare
        self.block_keys, self.block_bare = ({} if self.keep else set()), []

    def _resolve(self, newest: Any) -> None:
        """The pending bare copies count unless a glog twin is in their block or next to it."""
        if self.keep:
            twins: dict[Key, deque[int]] = {}
            for chunk_keys in (*self.window, newest):
                for key, indexes in chunk_keys.items():
                    twins.setdefault(key, deque()).extend(indexes)
            for m, line in self.pending:
                indexes = twins.get(m.group(1))
                if indexes is None:
                    self.placements.append(self._placement(m, line))
                    continue
                index = indexes.popleft() if len(indexes) > 1 else indexes[0]  # copies pair in order
                twin = self.placements[index]
                if line < twin.line:  # the bare copy was printed first: it stands there, its twin's line kept
                    self.placements[index] = replace(twin, line=line, twin=twin.line)
        else:
            twins = newest.union(*self.window) if self.pending else set()
            self.count_bare(self.pending, twins)
        self.pending = []

    def count_bare(self, bare: list[Any], twins: Collection[bytes]) -> None:
        """Count the bare copies that have no glog twin among ``twins``."""
        single = [(key, dev) for key, dev in bare if key not in twins]
        self.counts.update(map(itemgetter(1), single))
        if self.tally is not None:
            self.tally.update(map(itemgetter(0), single))

    def close(self) -> None:
        """The end of the text: the last block ends, and nothing follows it."""
        self._settle_functions()
        self._end_block()
        if self.held is not None and len(self.held) < 3:
            self.held.append((self.pending, self.block_keys))
            self.pending = []
        else:
            self._resolve(self.block_keys)

    def finish(self) -> Report:
        self.close()
        return self.report()

    def report(self) -> Report:
        counted = None
        if not self.keep:
            merged: Counter[str] = Counter()
            for dev, n in self.counts.items():
                merged[self.spec_of(dev).canonical] += n
            counted = tuple(merged.items())
        return Report(
            placements=ignored.settle(tuple(sorted(self.placements, key=attrgetter("line"))), self.ignored),
            device_mapping=tuple(DeviceMapping(DeviceName(d), desc) for d, desc in self.mappings.items()),
            errors=self.failures.result(),
            lines=_line_count(self.newlines, self.last),
            mapping_seen=self.mapping_seen,
            counted=counted,
            ignored=tuple(self.ignored),
        )


def _feed_source(parser: Parser, stream: BinaryIO, name: str, note: Note | None, empty_ok: bool,
                 known_text: bool = False) -> None:
    opened = reader.open_text(stream, name, CHUNK, note, empty_ok=empty_ok, known_text=known_text)
    if opened is None:
        return
    layout, blocks = opened
    parser.start_source(layout.wrap)
    for data, body_end in reader.Lines(CHUNK).chunks(blocks):
        parser.feed(data, body_end)


def parse_streams(sources: Iterable[tuple[str, BinaryIO]], *, keep: bool = True, note: Note | None = None,
                  known_text: bool = False) -> Report:
    return tally_streams(sources, keep=keep, note=note, known_text=known_text)[0]


class FunctionsRun(Exception):
    """(``watch``) The text executed a tf.function: its placer lines are to be read by thread."""


def tally_streams(sources: Iterable[tuple[str, BinaryIO]], *, keep: bool = True, note: Note | None = None,
                  known_text: bool = False, tally: bool = False, functions_known: bool = True, watch: bool = False
                  ) -> tuple[Report, Parser]:
    """Parse one or more logs as one stream (line numbers run on across them). A source
    named ``<stdin>`` that was already read to its end (``parse - -``) adds nothing;
    ``known_text``: never refuse the input as binary (a log placement captured itself); ``watch`` (a tally
    with ``functions_known`` False): FunctionsRun where the text executes a tf.function after all."""
    parser = Parser(keep, tally, functions_known, watch)
    stdin_read = False
    for name, stream in sources:
        _feed_source(parser, stream, name, note, empty_ok=name == "<stdin>" and stdin_read, known_text=known_text)
        stdin_read = stdin_read or name == "<stdin>"
    return parser.finish(), parser
