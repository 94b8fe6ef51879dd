"""Which of a traced program's output bytes are TensorFlow's log lines, decided chunk by chunk.

TensorFlow writes placement twice: ``placer.cc`` prints ``node: (Op): device`` on stdout (printf)
and logs the same text on stderr behind a glog/absl prefix; eager ops and the Device mapping are
logged on stderr only. A line is TensorFlow's only if it has that shape *where TensorFlow writes
it*: a glog line of a C++ file on the channel that carries stderr, a Device mapping's device lines
right after its header, and a bare ``node: (Op): device`` on the stdout channel only when its glog
twin comes with it. Everything else is the program's: passed on unchanged, bytes as they came.

The hot path is a few literal searches over each chunk; regexes run only over chunks holding a
candidate, and nothing but TensorFlow's placement lines and the program's placement-error lines is
kept (written to ``parsed`` for the log parser).
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import BinaryIO

from placement_cli.logparse.failures import TRIGGER, needs_continuation
from placement_cli.logparse.placer import DEVICE, NORMALISE

HOLD = 0.03  # an incomplete last line that may be the start of a TF line waits at most this long
PAIR_WAIT = 0.25  # a bare ``node: (Op): device`` line waits this long for its glog twin
TWIN_TTL = 5.0  # a glog placer line pairs with a bare copy printed at most this long after it
LONGEST = 16384  # a partial line longer than this is never held

_PREFIX = (rb"(?:(?P<sev>[IWEF])\d{4} \d\d:\d\d:\d+\.\d+ +\d+ "  # absl: I0000 00:00:1795.5 6213 placer.cc:162]
           rb"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: (?P<sev2>[IWEF]) )"  # TF <= 2.15: 2024-01-02 10:00:00.5: I
           rb"(?P<file>[^\s\]:]+):\d+\] (?P<msg>[^\n]*)")
_ABSL = rb"WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR[ \t\r]*"
# One whole glog line (the chunk is prefixed with a newline so every line starts after one).
_GLOG = re.compile(rb"\n(?:" + _PREFIX + rb"|(?P<absl>" + _ABSL + rb"))(?=\n)")
_GLOG_AT = re.compile(rb"(?:" + _PREFIX + rb")\n")
_NODE = rb"[^\s:]+(?::[^\s:]+)*"
_PLACED = _NODE + rb": \([^\s()]*\)(?:: )?" + DEVICE  # TF 2.x ``node: (Op): device``; TF 1.x ``(Op)/job:``
_BARE = re.compile(rb"\n(?P<bare>" + _PLACED + rb")[ \t\r]*(?=\n)")
_PLACER_MSG = re.compile(_PLACED + rb"[ \t\r]*")
_EAGER_MSG = re.compile(rb"Executing op \S+ (?:in device|on task) " + DEVICE + rb"[ \t\r]*")
_MAPPING_LINE = re.compile(rb"/(?:job|device):\S+ -> [^\n]*\n")
_PLACERS = (b"placer.cc", b"simple_placer.cc")
_CONTINUATION = b"To enable the following instructions:"  # the second line of cpu_feature_guard's notice
# Could an incomplete line still become one of the lines above? (only ever a heuristic for holding)
_GLOG_START = re.compile(rb"[IWEF]\d{0,4}(?: [\d:.]*(?: +\d*(?: [^\s\]]*(?:\] [^\n]*)?)?)?)?"
                         rb"|\d{1,4}(?:-[\d-]*(?: [\d:.]*(?:: ?(?:[IWEF](?: [^\s\]]*(?:\] [^\n]*)?)?)?)?)?)?")
_BARE_START = re.compile(rb"[^\s:]+(?::[^\s:]+)*(?::(?: (?:\([^\s()]*(?:\)(?::? ?(?:/[^\s]*)?)?)?)?)?)?")
_ABSL_TEXT = b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
SEVERITY = {b"I": 0, b"W": 1, b"E": 2, b"F": 3}


def _key(body: bytes) -> bytes:
    return body.replace(*NORMALISE).rstrip(b" \t\r")


@dataclass
class _Waiting:
    """A bare placer line on a stdout channel whose glog twin has not been seen yet."""

    line: bytes
    key: bytes
    deadline: float


@dataclass
class Channel:
    """One stream from the child: its stdout, its stderr, or both through one pipe or pty."""

    name: str
    stdout: bool
    stderr: bool
    out: list[bytes] = field(default_factory=list)  # decided bytes, to write to this channel's sink
    pending: bytes = b""  # undecided bytes: an incomplete line, or everything after a waiting bare line
    held_since: float | None = None
    midline: bool = False  # part of the current line was passed on already: the rest is the program's
    waiting: _Waiting | None = None
    in_mapping: bool = False  # the last line was a Device mapping header or one of its device lines
    after_hidden: bool = False  # the last line was a TF line kept off the terminal
    error_open: bool = False  # the next line continues a placement error
    eof: bool = False

    def take(self) -> bytes:
        data = b"".join(self.out)
        self.out.clear()
        return data


class _Twins:
    """Glog placer lines seen recently whose bare copy has not come yet."""

    def __init__(self) -> None:
        self.by_key: dict[bytes, deque[float]] = {}
        self.order: deque[tuple[float, bytes]] = deque()

    def add(self, key: bytes, now: float) -> None:
        self.by_key.setdefault(key, deque()).append(now)
        self.order.append((now, key))
        while self.order and self.order[0][0] < now - TWIN_TTL:
            seen, old = self.order.popleft()
            times = self.by_key.get(old)
            if times and times[0] <= seen:
                times.popleft()
                if not times:
                    del self.by_key[old]

    def take(self, key: bytes) -> bool:
        times = self.by_key.get(key)
        if not times:
            return False
        times.popleft()
        if not times:
            del self.by_key[key]
        return True


class Splitter:
    """Feeds each channel's bytes through; TF's placement lines go to ``parsed`` (and to the
    terminal only with ``echo_placement``), TF's other lines below ``min_level`` are hidden as
    TF_CPP_MIN_LOG_LEVEL would hide them, and every other byte is the program's."""

    def __init__(self, parsed: BinaryIO, *, echo_placement: bool = False, min_level: int = 0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.parsed = parsed
        self.echo_placement = echo_placement
        self.min_level = min_level
        self.clock = clock
        self.channels: list[Channel] = []
        self.twins = _Twins()
        self.prepaired: dict[bytes, int] = {}  # glog lines already paired by looking ahead
        self.placement_lines = 0
        self._started = False

    def channel(self, name: str, *, stdout: bool, stderr: bool) -> Channel:
        ch = Channel(name, stdout, stderr)
        self.channels.append(ch)
        return ch

    # -- feeding ---------------------------------------------------------------------------

    def feed(self, ch: Channel, data: bytes) -> None:
        ch.pending += data
        self._drain(ch)

    def close(self, ch: Channel) -> None:
        """The channel ended: nothing of it is undecided any more."""
        ch.eof = True
        self._drain(ch)
        if ch.pending:
            ch.out.append(ch.pending)
            ch.pending = b""

    def tick(self) -> None:
        """Pass on what waited long enough."""
        for ch in self.channels:
            self._drain(ch)

    def deadline(self) -> float | None:
        """When ``tick`` next has something to release."""
        times = [ch.waiting.deadline for ch in self.channels if ch.waiting]
        times += [ch.held_since + HOLD for ch in self.channels if ch.held_since is not None and not ch.waiting]
        return min(times, default=None)

    def _drain(self, ch: Channel) -> None:
        while ch.pending or ch.waiting:
            if ch.waiting and not self._resolve(ch):
                return
            if not ch.pending:
                return
            data = ch.pending
            if ch.midline:
                newline = data.find(b"\n")
                if newline < 0:
                    ch.out.append(data)
                    ch.pending = b""
                    return
                ch.out.append(data[: newline + 1])
                data = data[newline + 1 :]
                ch.midline = False
            end = data.rfind(b"\n") + 1
            if end:
                stop = self._lines(ch, data, end)
                ch.pending = data[stop:]
                ch.held_since = None
                if ch.waiting:
                    continue
            else:
                ch.pending = data
            self._tail(ch)
            return

    def _tail(self, ch: Channel) -> None:
        """An incomplete last line: held briefly if it may be the start of a TF line, else passed on."""
        tail = ch.pending
        if not tail:
            return
        now = self.clock()
        if not ch.eof and len(tail) < LONGEST and self._may_be_tf(ch, tail):
            if ch.held_since is None:
                ch.held_since = now
            if now - ch.held_since < HOLD:
                return
        ch.out.append(tail)
        ch.pending = b""
        ch.held_since = None
        ch.midline = True

    def _may_be_tf(self, ch: Channel, tail: bytes) -> bool:
        if ch.stderr and (_GLOG_START.fullmatch(tail) or _ABSL_TEXT.startswith(tail)):
            return True
        if ch.stderr and ch.in_mapping and tail.startswith(b"/"):
            return True
        return ch.stdout and _BARE_START.fullmatch(tail) is not None

    # -- whole lines -----------------------------------------------------------------------

    def _lines(self, ch: Channel, data: bytes, end: int) -> int:
        """Decide the whole lines in ``data[:end]``; returns where it stopped (``end``, or the end of
        a bare line that now waits for its twin)."""
        pos = 0
        if ch.error_open:  # the line after a placement error that continues on it
            newline = data.find(b"\n") + 1
            self._parse(data[:newline])
            ch.error_open = False
        if b"Cannot " in data or b"Could not satisfy" in data:
            self._errors(ch, data, end)
        if ch.stderr and (ch.in_mapping or ch.after_hidden):
            pos = self._continuations(ch, data, pos, end)
        matches: list[re.Match[bytes]] = []
        body = None
        if ch.stderr and (b"] " in data or b"absl::" in data):
            body = b"\n" + data[:end]
            matches += _GLOG.finditer(body, pos)
        if ch.stdout and b"/job:" in data:
            body = body or b"\n" + data[:end]
            found = list(_BARE.finditer(body, pos))
            if found:
                matches = sorted(matches + found, key=lambda m: m.start()) if matches else found
        if not matches:
            ch.out.append(data[pos:end] if pos else data[:end])
            return end
        for m in matches:
            start, stop = m.start(), m.end()  # the line, with its newline, in ``data``
            if start < pos:
                continue
            if m.re is _BARE:
                ch.out.append(data[pos:start])
                pos = stop
                if not self._bare(ch, data, start, stop, m.group("bare")):
                    return stop  # waits for its twin; what follows is undecided
                continue
            keep = self._glog(ch, m, data[start:stop])
            if keep is None:  # the program's (a Python absl line): leave it in the flow
                continue
            ch.out.append(data[pos:start])
            if keep:
                ch.out.append(data[start:stop])
            pos = self._continuations(ch, data, stop, end)
        ch.out.append(data[pos:end])
        return end

    def _glog(self, ch: Channel, m: re.Match[bytes], line: bytes) -> bool | None:
        """A glog-shaped line on a stderr channel: True to show it, False to keep it off the
        terminal, None when it is not TensorFlow's."""
        ch.in_mapping = ch.after_hidden = False
        if m.group("absl"):
            shown = self.min_level < 1
            ch.after_hidden = not shown
            return shown
        file, msg = m.group("file"), m.group("msg")
        if file.endswith(b".py"):  # Python's absl logging writes the same prefix: the program's own
            return None
        placer = file.rsplit(b"/", 1)[-1] in _PLACERS and _PLACER_MSG.fullmatch(msg)
        if placer or _EAGER_MSG.fullmatch(msg) or msg.startswith(b"Device mapping"):
            self._parse(line)
            self.placement_lines += 1
            if placer:
                self._twin_seen(_key(msg))
            ch.in_mapping = msg.startswith(b"Device mapping")
            return self.echo_placement
        shown = SEVERITY[m.group("sev") or m.group("sev2")] >= self.min_level
        ch.after_hidden = not shown
        return shown

    def _continuations(self, ch: Channel, data: bytes, pos: int, end: int) -> int:
        """Lines that continue the TF line before them: a Device mapping's device lines, and the
        second line of a hidden start-up notice."""
        while pos < end and ch.in_mapping:
            m = _MAPPING_LINE.match(data, pos)
            if m is None:
                ch.in_mapping = False
                break
            self._parse(m.group())
            if self.echo_placement:
                ch.out.append(m.group())
            pos = m.end()
        if pos < end and ch.after_hidden:
            ch.after_hidden = False
            if data.startswith(_CONTINUATION, pos):
                pos = data.find(b"\n", pos) + 1
        return pos

    # -- bare placer copies ----------------------------------------------------------------

    def _bare(self, ch: Channel, data: bytes, start: int, stop: int, body: bytes) -> bool:
        """True when decided now (paired: TF's; consumed), False when it waits for its twin."""
        key = _key(body)
        if self.twins.take(key) or (ch.stderr and self._ahead(data, stop, key)):
            if self.echo_placement:
                ch.out.append(data[start:stop])
            return True
        ch.waiting = _Waiting(data[start:stop], key, self.clock() + PAIR_WAIT)
        return False

    def _ahead(self, data: bytes, pos: int, key: bytes) -> bool:
        """Is the glog twin already in this channel's bytes after ``pos``? (one pipe or pty for both)"""
        at = data.find(b"] " + key + b"\n", pos, pos + 65536)
        if at < 0:
            return False
        start = data.rfind(b"\n", pos, at) + 1 or pos
        m = _GLOG_AT.match(data, start)
        if m is None or m.start("msg") != at + 2 or m.group("file").rsplit(b"/", 1)[-1] not in _PLACERS:
            return False
        self.prepaired[key] = self.prepaired.get(key, 0) + 1
        return True

    def _twin_seen(self, key: bytes) -> None:
        count = self.prepaired.get(key)
        if count:
            self.prepaired[key] = count - 1
            return
        for ch in self.channels:
            if ch.waiting and ch.waiting.key == key:
                if self.echo_placement:
                    ch.out.append(ch.waiting.line)
                ch.waiting = None
                return
        self.twins.add(key, self.clock())

    def _resolve(self, ch: Channel) -> bool:
        """Settle a waiting bare line if its twin came or its time ran out; True once settled."""
        waiting = ch.waiting
        assert waiting is not None
        if self.twins.take(waiting.key) or (ch.stderr and self._ahead(ch.pending, 0, waiting.key)):
            if self.echo_placement:
                ch.out.append(waiting.line)
        elif ch.eof or self.clock() >= waiting.deadline:
            ch.out.append(waiting.line)  # no twin: the program printed it
        else:
            return False
        ch.waiting = None
        return True

    # -- what the parser gets --------------------------------------------------------------

    def _errors(self, ch: Channel, data: bytes, end: int) -> None:
        """Lines naming a placement error (a traceback's last line, an error the program printed)."""
        last = -1
        for m in TRIGGER.finditer(data, 0, end):
            if m.start() <= last:
                continue
            start = data.rfind(b"\n", 0, m.start()) + 1
            last = data.find(b"\n", m.start())
            line = data[start : last + 1]
            if needs_continuation(line.decode("utf-8", "replace")):
                after = data.find(b"\n", last + 1)
                if after < 0:
                    ch.error_open = True
                else:
                    line, last = data[start : after + 1], after
            self._parse(line.replace(b"\0", b"\xef\xbf\xbd"))

    def _parse(self, line: bytes) -> None:
        if not self._started:
            self._started = True
            if line.startswith((b"\xff\xfe", b"\xfe\xff")):  # not a UTF-16 log: just bytes
                line = b"\xef\xbf\xbd" + line[2:]
        self.parsed.write(line)
