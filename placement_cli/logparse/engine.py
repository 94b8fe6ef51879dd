"""Streams any mix of log dialects through one compiled regex, chunk by chunk."""

from __future__ import annotations

import codecs
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import BinaryIO

from placement_cli.devices import DeviceSpec, parse_device
from placement_cli.logparse import eager, glog, mapping, placer
from placement_cli.logparse.failures import TRIGGER, failure_from_text, needs_continuation
from placement_cli.model import DeviceMapping, Placement, PlacementFailure, Report

CHUNK = 1 << 20
_PAIRING_WINDOW = 200_000  # unpaired copies remembered; beyond that the oldest is forgotten

# Dispatch table: the dialects in the order their groups appear after the prefix marker.
DIALECTS = (placer, eager, mapping)
_FULL = re.compile(
    rb"(?m)^" + glog.PREFIX + rb"(?:" + rb"|".join(d.PATTERN for d in DIALECTS) + rb")"
)
# --summary needs no device mapping: a smaller pattern, and findall + Counter in C.
_COUNT = re.compile(rb"(?m)^" + glog.PREFIX + rb"(?:" + placer.PATTERN + rb"|" + eager.PATTERN + rb")")


class InputError(Exception):
    """Input that is not a readable text log."""


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


class _Pairing:
    """Counts a placement once when both its stdout copy and its glog copy appear.

    Per (node, op, device) it keeps ``glog copies - bare copies`` seen so far; the
    number of placements is max(bare, glog), so a second run of the same node
    (two more copies) counts again.
    """

    def __init__(self) -> None:
        self.surplus: dict[tuple[bytes, bytes, bytes], int] = {}

    def add(self, key: tuple[bytes, bytes, bytes], prefixed: bool, count: int = 1) -> int:
        """Record ``count`` copies of one form; return how many new placements that makes."""
        before = self.surplus.pop(key, 0)
        after = before + count if prefixed else before - count
        if after:
            self.surplus[key] = after
            if len(self.surplus) > _PAIRING_WINDOW:
                del self.surplus[next(iter(self.surplus))]
        gained = max(after, 0) - max(before, 0)
        return gained if prefixed else count + gained


def _chunks(stream: BinaryIO, name: str) -> Iterator[bytes]:
    """Yield chunks of whole lines; the last complete line is held back one chunk so a
    wrapped continuation is always seen together with its first line."""
    first = stream.read(CHUNK)
    if not first:
        raise InputError(f"{name}: empty input (0 bytes)")
    decoder = None
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


def parse_streams(sources: Iterable[tuple[str, BinaryIO]], *, keep: bool = True) -> Report:
    """Parse one or more logs as one stream (line numbers run on across them)."""
    pairing = _Pairing()
    failures = _Failures()
    placements: list[Placement] = []
    mappings: dict[str, str] = {}
    mapping_seen = False
    specs: dict[bytes, DeviceSpec] = {}
    counts: Counter[bytes] = Counter()
    newlines = 0
    last = b""

    def spec_of(device: bytes) -> DeviceSpec:
        spec = specs.get(device)
        if spec is None:
            spec = specs[device] = parse_device(_decode(device))
        return spec

    for name, stream in sources:
        for chunk in _chunks(stream, name):
            if TRIGGER.search(chunk):
                failures.scan(chunk)
            if not keep:
                for (marker, node, op, dev, eop, edev), n in Counter(_COUNT.findall(chunk)).items():
                    if eop:
                        counts[edev] += n
                    else:
                        counts[dev] += pairing.add((node, op, dev), bool(marker), n)
            else:
                pos, line = 0, newlines + 1
                for m in _FULL.finditer(chunk):
                    line += chunk.count(b"\n", pos, m.start())
                    pos = m.start()
                    marker, node, op, dev, eop, edev, header, mdev, mdesc, mcont = m.groups()
                    if dev:
                        if pairing.add((node, op, dev), bool(marker)):
                            kind = "placer" if op else "legacy"
                            placements.append(Placement(_decode(node), _decode(op) if op else None,
                                                        _decode(dev), spec_of(dev), kind, line))
                    elif edev:
                        placements.append(Placement(None, _decode(eop), _decode(edev), spec_of(edev), "eager", line))
                    elif header:
                        mapping_seen = True
                    elif mdev:
                        mapping_seen = True
                        desc = _decode(mdesc).strip()
                        if mcont:
                            desc = f"{desc} {_decode(mcont).strip()}"
                        mappings.setdefault(_decode(mdev), desc)
            newlines += chunk.count(b"\n")
            last = chunk
    counted = None
    if not keep:
        counted = tuple((spec_of(dev).canonical, n) for dev, n in counts.items() if n)
        merged: Counter[str] = Counter()
        for canonical, n in counted:
            merged[canonical] += n
        counted = tuple(merged.items())
    return Report(
        placements=tuple(placements),
        device_mapping=tuple(DeviceMapping(d, desc) for d, desc in mappings.items()),
        errors=failures.result(),
        lines=_line_count(newlines, last),
        mapping_seen=mapping_seen,
        counted=counted,
    )
