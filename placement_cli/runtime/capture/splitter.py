"""TensorFlow's log lines, told apart from whatever else a traced program's C code writes.

The traced child sends C stdio's ``stdout`` and ``stderr`` (where TensorFlow's C++ writes: the
placer's printf copy ``node: (Op): device`` on stdout, glog/absl lines on stderr) to placement
through two pipes, while the program's own Python output goes straight to the real stdout and
stderr. This module reads those two pipes: TensorFlow's placement lines are consumed (kept for the
parser; shown only with --log), TF's other lines are shown unless the script's
TF_CPP_MIN_LOG_LEVEL would hide them, and every other byte (another C library's output, binary
data) is passed on unchanged, as it came.

The hot path is a few literal searches over each chunk; the regexes run only over chunks holding
a candidate.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import BinaryIO

from placement_cli.logparse import glog, ignored, mapping, placer, written
from placement_cli.logparse.error_messages import MAX_LINES, TRIGGER, may_hold_failure

HOLD = 0.03  # an incomplete last line that may be the start of a TF line waits at most this long
LONGEST = 16384  # a partial line longer than this is never held

# TensorFlow's lines as logparse spells them (a line the parser would not read is never consumed).
_REPLACEMENT = b"\xef\xbf\xbd"


def may_become_tensorflow_line(tail: bytes, *, stdout: bool) -> bool:
    """Whether an unfinished line could still become one of TensorFlow's log lines (a placer copy on
    stdout; a glog line on stderr)."""
    if stdout:
        return written.PLACER_PARTIAL.fullmatch(tail) is not None
    return bool(written.GLOG_PARTIAL.fullmatch(tail) or glog.ABSL_NOTICE.startswith(tail))


@dataclass
class Channel:
    """C stdio's stdout or stderr of the traced program."""

    name: str
    stdout: bool  # C stdout: TF's printf copies of placements come here
    out: list[bytes] = field(default_factory=list)  # decided bytes, to write to this channel's sink
    pending: bytes = b""  # an incomplete last line, undecided
    held_since: float | None = None
    midline: bool = False  # part of the current line was passed on already: the rest is not TF's
    line_start: bytes = b""  # ... that part (its end), still to be searched for a placement error
    in_mapping: bool = False  # the last line was a Device mapping header or one of its device lines
    mapping_entries: int = 0  # device lines of the Device mapping block now read
    after_hidden: bool = False  # the last line was a TF line kept off the terminal
    error_more: int = 0  # how many of the next lines may still continue a placement error
    eof: bool = False

    def take(self) -> bytes:
        data = b"".join(self.out)
        self.out.clear()
        return data


class Splitter:
    """TF's placement lines go to ``parsed`` (and to the terminal only with ``echo_placement``),
    TF's other lines below ``min_level`` are hidden as TF_CPP_MIN_LOG_LEVEL would hide them, and
    every other byte is passed on."""

    def __init__(self, parsed: BinaryIO, *, echo_placement: bool = False, min_level: int = 0,
                 clock: Callable[[], float] = time.monotonic, hidden_files: frozenset[bytes] = frozenset()) -> None:
        self.parsed = parsed
        self.echo_placement = echo_placement
        self.min_level = min_level
        self.hidden_files = hidden_files  # TensorFlow's lines from these sources are placement's own doing
        self.clock = clock
        self.channels: list[Channel] = []
        self._started = False
        self._batch: list[tuple[int, bytes]] | None = None

    def channel(self, name: str, *, stdout: bool) -> Channel:
        ch = Channel(name, stdout)
        self.channels.append(ch)
        return ch

    def feed(self, ch: Channel, data: bytes) -> None:
        ch.pending += data
        self._drain(ch)

    def close(self, ch: Channel) -> None:
        """The channel ended: nothing of it is undecided any more."""
        ch.eof = True
        self._drain(ch)

    def tick(self) -> None:
        """Pass on incomplete lines that waited long enough."""
        for ch in self.channels:
            if ch.pending:
                self._drain(ch)

    def deadline(self) -> float | None:
        """When ``tick`` next has something to release."""
        return min((ch.held_since + HOLD for ch in self.channels if ch.held_since is not None), default=None)

    def errors(self, text: bytes) -> None:
        """Placement errors in text the program printed elsewhere (its uncaught exception)."""
        if not text.endswith(b"\n"):
            text += b"\n"
        self._errors(Channel("text", stdout=False), text, 0, len(text))

    # -- bytes -----------------------------------------------------------------------------

    def _drain(self, ch: Channel) -> None:
        data = ch.pending
        ch.pending = b""
        if ch.midline:  # the rest of a line whose start was passed on: not TF's
            newline = data.find(b"\n")
            if newline < 0:
                ch.out.append(data)
                ch.line_start = (ch.line_start + data)[-LONGEST:]
                return
            ch.out.append(data[: newline + 1])
            line = ch.line_start + data[: newline + 1]
            if ch.error_more:  # this line comes right after an error: it may continue it
                if line.strip() and not written.LOG_LINE.match(line):
                    self._parse(line)
                    ch.error_more -= 1
                else:
                    ch.error_more = 0
            elif may_hold_failure(line):  # an error may still be in it
                self._errors(ch, line, 0, len(line))
            ch.line_start = b""
            data = data[newline + 1 :]
            ch.midline = False
        end = data.rfind(b"\n") + 1
        if end:
            self._lines(ch, data, end)
            ch.held_since = None
        tail = data[end:]
        if not tail:
            return
        now = self.clock()
        if not ch.eof and len(tail) < LONGEST and self._may_be_tf(ch, tail):
            if ch.held_since is None:
                ch.held_since = now
            if now - ch.held_since < HOLD:
                ch.pending = tail
                return
        ch.out.append(tail)
        ch.held_since = None
        ch.midline = True
        ch.line_start = tail[-LONGEST:]

    def _may_be_tf(self, ch: Channel, tail: bytes) -> bool:
        if ch.stdout:
            return may_become_tensorflow_line(tail, stdout=True)
        return bool(may_become_tensorflow_line(tail, stdout=False)
                    or (ch.in_mapping and tail.startswith(b"/"))
                    or (ch.after_hidden and glog.CONTINUATION.startswith(tail[: len(glog.CONTINUATION)])))

    def _lines(self, ch: Channel, data: bytes, end: int) -> None:
        """Decide the whole lines in ``data[:end]``."""
        pos = scanned = 0
        self._batch = []  # lines for the parser, by where they start: in the order they came
        if ch.error_more:  # lines after a placement error that may continue it
            scanned = self._continued(ch, data, 0, end)
            if scanned:
                self._parse(data[:scanned], 0)
        if may_hold_failure(data[:end]):
            self._errors(ch, data, scanned, end)
        if ch.in_mapping or ch.after_hidden:
            pos = self._continuations(ch, data, pos, end)
        if ch.stdout:
            matches = written.WHOLE_BARE_LINE.finditer(b"\n" + data[:end], pos) if placer.JOB in data else ()
        else:
            matches = written.WHOLE_GLOG_LINE.finditer(b"\n" + data[:end], pos) if b"] " in data or glog.ABSL_NOTICE in data else ()
        for m in matches:
            start, stop = m.start(), m.end()  # the line, with its newline, in ``data``
            if start < pos:
                continue
            shown = self._placed(data[start:stop], start) if ch.stdout else self._glog(ch, m, data[start:stop], start)
            if not shown:
                ch.out.append(data[pos:start])
                pos = stop
            if ch.in_mapping or ch.after_hidden:
                after = self._continuations(ch, data, stop, end)
                pos = after if after > stop else pos
        ch.out.append(data[pos:end] if pos else data[:end])
        batch, self._batch = self._batch, None
        for at, line in sorted(batch, key=lambda item: item[0]):
            self._parse(line, at)

    def _placed(self, line: bytes, at: int) -> bool:
        """A printf copy of a placement: parsed beside its glog twin (the parser pairs them)."""
        self._parse(line, at)
        return self.echo_placement

    def _glog(self, ch: Channel, m: re.Match[bytes], line: bytes, at: int) -> bool:
        """A glog line: True to show it, False to keep it off the terminal."""
        ch.in_mapping = ch.after_hidden = False
        if m.group("absl"):
            shown = self.min_level < 1
            ch.after_hidden = not shown
            return shown
        if m.group("file").rsplit(b"/", 1)[-1] in self.hidden_files:  # the profiler --time started: not the program's
            ch.after_hidden = True
            return False
        msg = m.group("msg")
        placed = placer.placer_file(m.group("file")) and written.PLACER_LINE.fullmatch(msg)
        if placed or written.EAGER_LINE.fullmatch(msg) or msg.startswith(mapping.HEADER) \
                or (msg.startswith(ignored.SPEC_LITERAL) and ignored.PATTERN.match(msg)):  # a request it ignored
            self._parse(line, at)
            ch.in_mapping = msg.startswith(mapping.HEADER)
            ch.mapping_entries = 0
            return self.echo_placement
        shown = glog.severity(m) >= self.min_level
        ch.after_hidden = not shown
        return shown

    def _continuations(self, ch: Channel, data: bytes, pos: int, end: int) -> int:
        """Lines that continue the TF line before them (a Device mapping's device lines, parsed; the
        second line of a hidden start-up notice): returns ``pos``, or the end of those lines when
        they are to be kept off the terminal with it."""
        start = pos
        consumed = ch.after_hidden or not self.echo_placement
        while pos < end and ch.in_mapping:
            m = written.MAPPING_LINE.match(data, pos)
            if m is None:
                if ch.mapping_entries and data.startswith(b"\n", pos):  # the blank line that ends the block
                    pos += 1  # (TensorFlow's own: its device list ends with a newline, and its message too)
                ch.in_mapping = False
                break
            self._parse(m.group(), pos)
            ch.mapping_entries += 1
            pos = m.end()
        if pos < end and ch.after_hidden:
            ch.after_hidden = False
            if data.startswith(glog.CONTINUATION, pos):
                pos = data.find(b"\n", pos) + 1
        return pos if consumed else start

    # -- what the parser gets --------------------------------------------------------------

    def _errors(self, ch: Channel, data: bytes, start: int, end: int) -> None:
        """Lines naming a placement error, with the lines after it where the message may continue
        (the parser decides which do; it reads at most MAX_LINES of one message)."""
        last = -1
        for m in TRIGGER.finditer(data, start, end):
            if m.start() <= last:
                continue
            start = data.rfind(b"\n", 0, m.start()) + 1
            last = data.find(b"\n", m.start(), end)
            last = end - 1 if last < 0 else last
            ch.error_more = MAX_LINES - 1
            last = self._continued(ch, data, last + 1, end) - 1
            self._parse(data[start : last + 1], start)

    @staticmethod
    def _continued(ch: Channel, data: bytes, pos: int, end: int) -> int:
        """Where the lines that may continue an error end: at a blank line, a line of TensorFlow's
        log (it is parsed as such), or after ``error_more`` lines."""
        while ch.error_more and pos < end:
            nxt = data.find(b"\n", pos, end)
            if nxt < 0:
                break
            if not data[pos:nxt].strip() or written.LOG_LINE.match(data, pos, nxt):
                ch.error_more = 0
                break
            pos, ch.error_more = nxt + 1, ch.error_more - 1
        return pos

    def _parse(self, line: bytes, at: int = 0) -> None:
        if self._batch is not None:
            self._batch.append((at, line))
            return
        line = line.replace(b"\0", _REPLACEMENT)  # the parser takes NUL for a binary file
        if not self._started:
            self._started = True
            if line.startswith((b"\xff\xfe", b"\xfe\xff")):  # nor is this a UTF-16 log
                line = _REPLACEMENT + line[2:]
        self.parsed.write(line)
