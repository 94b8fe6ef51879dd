"""Streams any mix of log dialects through literal-anchored regexes, chunk by chunk."""

from __future__ import annotations

import codecs
import io
import re
from collections import Counter, deque
from collections.abc import Iterable, Iterator
from operator import attrgetter, itemgetter
from dataclasses import replace
from typing import Any, BinaryIO

from placement_cli.devices import DeviceSpec, parse_device
from placement_cli.errors import InputError
from placement_cli.logparse import eager, mapping, placer
from placement_cli.logparse.failures import TRIGGER, failure_from_text, needs_continuation
from placement_cli.model import DeviceMapping, Placement, PlacementFailure, Report

CHUNK = 2 << 20
# A bare stdout copy and its glog twin pair up when they are at most one chunk apart
# (stdout is block-buffered, so its copies lag the glog copies by a few KiB).
_GLOG = re.compile(placer.glog_pattern(detailed=True), re.M)
_BARE = re.compile(placer.bare_pattern(detailed=True), re.M)
_GLOG_COUNT = re.compile(placer.glog_pattern(detailed=False), re.M)
_BARE_COUNT = re.compile(placer.bare_pattern(detailed=False), re.M)
_EAGER = re.compile(eager.PATTERN, re.M)
_MAPPING = re.compile(mapping.PATTERN, re.M)

Key = bytes  # "node: (Op)/job:..." as printed, once normalised


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _chunks(stream: BinaryIO, name: str, checked: bool = False) -> Iterator[bytes]:
    """Yield chunks of whole lines; the last complete line is held back one chunk so a
    wrapped continuation is always seen together with its first line. ``checked``: the
    stream continues a file whose start was already checked for being text."""
    first = stream.read(CHUNK)
    if not first and not checked:
        raise InputError(f"{name}: empty input (0 bytes)")
    decoder = None
    if not checked:
        if first.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
            decoder = codecs.getincrementaldecoder("utf-16")("replace")
        elif b"\0" in first[:65536]:
            raise InputError(f"{name}: not a text log (binary data)")
    carry = b""
    data = first
    while data:
        if decoder is not None:
            data = decoder.decode(data).encode("utf-8")
        buf = carry + data
        cut = buf.rfind(b"\n", 0, max(buf.rfind(b"\n"), 0))
        if cut < 0:
            carry = buf
        else:
            yield buf[: cut + 1]
            carry = buf[cut + 1 :]
        data = stream.read(CHUNK)
    if carry:
        yield carry


class _Failures:
    """Collects placement errors, each distinct one once (tracebacks repeat them)."""

    def __init__(self) -> None:
        self.seen: dict[PlacementFailure, None] = {}

    def scan(self, chunk: bytes) -> None:
        end = -1
        for hit in TRIGGER.finditer(chunk):
            if hit.start() <= end:
                continue
            start = chunk.rfind(b"\n", 0, hit.start()) + 1
            end = chunk.find(b"\n", hit.start())
            end = len(chunk) if end < 0 else end
            text = _decode(chunk[start:end])
            if needs_continuation(text) and end < len(chunk):
                nxt = chunk.find(b"\n", end + 1)
                nxt = len(chunk) if nxt < 0 else nxt
                text = text.rstrip() + " " + _decode(chunk[end + 1 : nxt]).strip()
                end = nxt
            failure = failure_from_text(text)
            if failure is not None:
                self.seen.setdefault(failure)

    def result(self) -> tuple[PlacementFailure, ...]:
        return tuple(self.seen)


def _line_count(total_newlines: int, last: bytes) -> int:
    return total_newlines + (1 if last and not last.endswith(b"\n") else 0)


def _numbered(data: bytes, base: int, matches: Iterable[re.Match[bytes]]) -> Iterator[tuple[int, re.Match[bytes]]]:
    """Line numbers for matches in increasing order (``data`` starts with an extra newline)."""
    pos, line = 0, base
    for m in matches:
        line += data.count(b"\n", pos, m.start() + 1)
        pos = m.start() + 1
        yield line, m


class _Parser:
    """Consumes chunks; glog and eager lines count at once, bare copies one chunk later,
    when it is known whether their glog twin was printed (before or after them)."""

    def __init__(self, keep: bool) -> None:
        self.keep = keep
        self.failures = _Failures()
        self.window: deque[Any] = deque(maxlen=2)  # glog keys of recent chunks (dicts when keeping)
        self.pending: list = []
        self._bare: list = []
        self.placements: list[Placement] = []
        self.counts: Counter[bytes] = Counter()
        self.mappings: dict[str, str] = {}
        self.mapping_seen = False
        self.newlines = 0
        self.last = b""
        self.specs: dict[bytes, DeviceSpec] = {}
        # For a parser that starts mid-file (parse_split): its first chunk's glog keys, and
        # the bare copies it counted as unpaired before it could see the glog lines before it.
        self.first_glog: set[Key] | None = None
        self.first_unpaired: list[tuple[Key, bytes]] | None = None
        self.resolves = 0

    def spec_of(self, device: bytes) -> DeviceSpec:
        spec = self.specs.get(device)
        if spec is None:
            spec = self.specs[device] = parse_device(_decode(device))
        return spec

    def feed(self, chunk: bytes) -> None:
        if TRIGGER.search(chunk):
            self.failures.scan(chunk)
        data = b"\n" + chunk.replace(*placer.NORMALISE)
        if self.keep:
            glog_keys = self._feed_full(data)
        else:
            glog = _GLOG_COUNT.findall(data)
            self.counts.update(map(itemgetter(1), glog))
            self.counts.update(map(itemgetter(1), _EAGER.findall(data)))
            bare = _BARE_COUNT.findall(data)
            glog_keys = set(map(itemgetter(0), glog))
            if self.first_glog is None:
                self.first_glog = glog_keys
        self._resolve(glog_keys)
        self.window.append(glog_keys)
        self.pending = self._bare if self.keep else bare
        self.newlines += chunk.count(b"\n")
        self.last = chunk

    def _feed_full(self, data: bytes) -> dict[Key, int]:
        base = self.newlines
        glog_keys: dict[Key, list[int]] = {}  # key -> indexes of its placements, in order
        for line, m in _numbered(data, base, _GLOG.finditer(data)):
            glog_keys.setdefault(m.group(1), []).append(len(self.placements))
            self.placements.append(self._placement(m, line))
        for line, m in _numbered(data, base, _EAGER.finditer(data)):
            op, dev = m.group(1, 2)
            self.placements.append(Placement(None, _decode(op), _decode(dev), self.spec_of(dev), "eager", line))
        self._bare = [(m, line) for line, m in _numbered(data, base, _BARE.finditer(data))]
        for m in _MAPPING.finditer(data):
            header, device, desc, cont = m.groups()
            self.mapping_seen = True
            if device:
                text = _decode(desc).strip()
                if cont:
                    text = f"{text} {_decode(cont).strip()}"
                self.mappings.setdefault(_decode(device), text)
        return glog_keys

    def _placement(self, m: re.Match[bytes], line: int) -> Placement:
        node, op, dev = m.group(2, 3, 4)
        return Placement(_decode(node), _decode(op) if op else None, _decode(dev), self.spec_of(dev),
                         "placer" if op else "legacy", line)

    def _resolve(self, newest: Any) -> None:
        """Bare copies of the previous chunk count unless a glog twin is within one chunk."""
        self.resolves += 1
        if self.keep:
            twins: dict[Key, list[int]] = {}
            for chunk_keys in (*self.window, newest):
                for key, indexes in chunk_keys.items():
                    twins.setdefault(key, []).extend(indexes)
            for m, line in self.pending:
                indexes = twins.get(m.group(1))
                if indexes is None:
                    self.placements.append(self._placement(m, line))
                    continue
                index = indexes.pop(0) if len(indexes) > 1 else indexes[0]  # copies pair in order
                if line < self.placements[index].line:  # the bare copy was printed first
                    self.placements[index] = replace(self.placements[index], line=line)
        else:
            twins = newest.union(*self.window) if self.pending else set()
            unpaired = [(key, dev) for key, dev in self.pending if key not in twins]
            if self.resolves == 2:  # this resolved the first chunk's bare copies
                self.first_unpaired = unpaired
            self.counts.update(dev for _, dev in unpaired)
        self.pending = []

    def finish(self) -> Report:
        self._resolve({} if self.keep else set())
        counted = None
        if not self.keep:
            merged: Counter[str] = Counter()
            for dev, n in self.counts.items():
                merged[self.spec_of(dev).canonical] += n
            counted = tuple(merged.items())
        return Report(
            placements=tuple(sorted(self.placements, key=attrgetter("line"))),
            device_mapping=tuple(DeviceMapping(d, desc) for d, desc in self.mappings.items()),
            errors=self.failures.result(),
            lines=_line_count(self.newlines, self.last),
            mapping_seen=self.mapping_seen,
            counted=counted,
        )


def count_range(path: str, start: int, end: int, *, last: bool) -> _Parser:
    """Per-device counts of the lines in [start, end) of a file, with the state that
    ``merge_ranges`` needs to pair copies across the boundary."""
    parser = _Parser(keep=False)
    with open(path, "rb") as f:
        f.seek(start)
        reader = io.BufferedReader(_Slice(f, end - start), CHUNK)  # type: ignore[arg-type]
        for chunk in _chunks(reader, path, checked=start > 0):
            parser.feed(chunk)
    if last:  # the head's last bare copies wait for the tail's first glog lines instead
        parser._resolve(set())  # noqa: SLF001
    if parser.resolves < 2:
        parser.first_unpaired = []
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


def merge_ranges(head: _Parser, tail: _Parser) -> Report:
    """One Report from two consecutive ranges: copies pair across the boundary as they
    would have in one pass (the tail's first bare copies against the head's last glog lines)."""
    head_twins = set().union(*head.window)
    for key, dev in tail.first_unpaired or ():
        if key in head_twins:
            tail.counts[dev] -= 1
    head._resolve(tail.first_glog or set())  # noqa: SLF001 - the head's last bare copies
    head.counts.update(tail.counts)
    for failure in tail.failures.result():
        head.failures.seen.setdefault(failure)
    head.specs.update(tail.specs)
    head.newlines += tail.newlines
    head.last = tail.last or head.last
    head.window.clear()
    return head.finish()


def parse_streams(sources: Iterable[tuple[str, BinaryIO]], *, keep: bool = True) -> Report:
    """Parse one or more logs as one stream (line numbers run on across them)."""
    parser = _Parser(keep)
    for name, stream in sources:
        for chunk in _chunks(stream, name):
            parser.feed(chunk)
    return parser.finish()
