"""Records that a console or a notebook broke over several lines, joined again where that is certain.

Three ways a record gets broken:

* A console hard-wraps every line longer than its width W, mid-word (the Windows
  console at 80 columns): a line of exactly W characters continues on the next one.
  ``reader.wrap_width`` finds W when a log looks like that; rows are then joined,
  except where the next row stands on its own (a placement, a log line's prefix, a
  traceback line, a ``Device mapping`` line). A row cut at a blank loses that blank to
  the copy, so a row a few characters short joins with a blank when that makes a
  placement, completes an error's key words, or an error or mapping line stops
  mid-sentence there.
* Too few rows to tell the width (a snippet pasted in an issue): an error line whose
  key words were cut (``...Error: Cannot assign a de`` / ``vice for operation ...``)
  joins the line that holds the rest of them.
* A notebook flushes captured output in chunks, and a line may end at a chunk's end,
  leaving fragments such as ``(Mul): /job:localhost/replica:0/task:0/device:GPU:0``.
  A fragment that ends like a placement but is none is joined to the lines before it
  when exactly one way of joining them gives a placement (and none of those lines is
  one, and one of them holds "/job:" whole); a truncated glog copy (``placer.cc:162]
  tower_0/Ma``) joins the line that completes it. Anything else is left alone: a node
  is never invented.

Joined text replaces the first row; each row it took becomes CONSUMED (a NUL, which
the reader removed from the text), so line numbers hold and an error message's
continuation lines are still found after it. Every decision looks only at the rows
of the join and MAX_JOIN rows before it, so chunks with that much context around them
decide as one pass would.
"""

from __future__ import annotations

import re

from placement_cli.logparse import eager, error_messages, ignored, lazy, placer

MAX_JOIN = 16  # rows one record may span
CONSUMED = b"\0"  # what is left of a row that a join took
LOOKBACK = MAX_JOIN  # lines of the previous chunk a fragment may need
_RECORD = lazy.Pattern(rb"(?:" + placer.line_pattern() + rb"|[^\n]*?" + eager.PATTERN + rb")")
_TAIL = lazy.Pattern(rb":\d++[ \t\r]*+$", re.MULTILINE)  # a line that ends like a device name
_GLOG_HEAD = lazy.Pattern(rb"placer\.cc:\d++\] ")
# Lines that start something of their own: a log line's prefix, a mapping line, and the
# lines of a Python traceback and of TensorFlow's node trace that follow an error.
_STARTS_RECORD = lazy.Pattern(
    rb"(?:[IWEF]\d{4} \d\d:\d\d:\d\d|\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d|Device mapping:|/(?:job|device):\S++ -> "
    rb"|[ \t]*+\[\[|[ \t]*+File \"|Traceback \(most recent call last\)|During handling of the above exception"
    # a Python exception's line: "ValueError: ...", "tensorflow.python.framework.errors_impl.InternalError: ..."
    rb"|(?:[a-z_]\w*+\.)*+[A-Z]\w*+(?:(?<=Error)|(?<=Exception))(?: \(see above for traceback\))?: )"
)
# The placer's lines that say it ignored a request (logparse.ignored): a row cut in one goes on
_IGNORED_HEAD = lazy.Pattern(rb"Ignoring (?:device specification|request to colocate node)"
                             rb"|Failed to place the graph without changing")
_MAPPING_LINE = lazy.Pattern(rb"(?:[^\n]*?\] )?/(?:job|device):\S++ -> ")
_DEVICE_AT_END = lazy.Pattern(rb"[\s\S]*" + placer.DEVICE + rb"[ \t\r]*+")
_DEVICE_END = lazy.Pattern(placer.DEVICE + rb"[ \t\r]*+")
_TRIM = 8  # blanks a console copy may have dropped at the end of a row


# An error's key words cut by a line break ("Cannot assign a de" / "vice for operation"):
# a line that starts with the rest of one of them. Found fast: it is anchored on a newline.
_PHRASES = (b"Cannot assign a device", b"Could not satisfy", b"Cannot colocate", b"Malformed device specification",
            b"unknown device.", b"No OpKernel was registered", b"Could not find device for node", b"No registered '",
            b"while parsing the device spec")
# (A rest of one or two letters is too common a start of a line to be told from one.)
_RESTS = tuple(sorted({r for p in _PHRASES for i in range(1, len(p)) if len(r := p[i:].lstrip(b" ")) >= 3},
                      key=len, reverse=True))
_ERROR = b"Error"  # in "InvalidArgumentError: ...", "... (see above for traceback): ...": an error line


def is_record(line: bytes) -> bool:
    """A whole line (no newline) that is a placer or eager placement."""
    return _RECORD.fullmatch(line.replace(*placer.NORMALISE)) is not None


def needed(data: bytes, records: int, glog_records: int) -> bool:
    """Whether text may hold a broken record: a "/job:" outside the ``records``
    placements in it (every join below needs one), a glog copy cut short, or an error
    line that may have its key words cut. Each is what some join needs, so skipping
    the joins when this is False changes nothing: only time is saved."""
    return data.count(b"/job:") > records or data.count(b"placer.cc:") > glog_records or _ERROR in data


class _Rows:
    """Lines being joined, with what is known of them."""

    def __init__(self, lines: list[bytes]) -> None:
        self.lines = lines
        self.records: dict[int, bool] = {}
        self.last: dict[int, int] = {}  # a joined row -> the last row it took, through earlier joins

    def record(self, i: int) -> bool:
        found = self.records.get(i)
        if found is None:
            found = self.records[i] = is_record(self.lines[i])
        return found

    def joined(self, start: int, end: int) -> bytes:
        return b"".join(line.rstrip(b"\r") for line in self.lines[start : end + 1] if line != CONSUMED)

    def commit(self, start: int, end: int, text: bytes) -> None:
        self.lines[start] = text
        self.records[start] = is_record(text)
        last = end
        for i in range(start + 1, end + 1):
            self.lines[i] = CONSUMED
            self.records[i] = False
            last = max(last, self.last.pop(i, i))
        self.last[start] = max(last, self.last.get(start, start))


def cut_phrases(rows: _Rows, first: int) -> None:
    """Join an error line (one that names the error: "...Error: Cannot assign a de") that
    ends with the start of the error's key words to the next, which holds the rest (with
    the blank a console copy dropped at the cut, if there was one)."""
    lines = rows.lines
    for t in range(1, len(lines)):
        line = lines[t].lstrip(b" \t")
        if not line.startswith(_RESTS):
            continue
        h = t - 1  # the row above, past rows a join took
        while h > 0 and lines[h] == CONSUMED:
            h -= 1
        if h < first or _blank(lines[h]) or _ERROR not in lines[h]:
            continue
        head = lines[h].rstrip(b"\r")
        for both in (head + line, head.rstrip(b" \t") + b" " + line):
            found = next((p for p in _PHRASES if p in both[max(len(head) - len(p), 0) : len(head) + len(p)]), None)
            if found is not None and found not in head and not line.startswith(found):
                rows.commit(h, t, both)
                break


def _blank(line: bytes) -> bool:
    return not line.strip(b" \t\r\0")


def fragments(rows: _Rows, first: int) -> None:
    """Join notebook fragments; ``first`` is the first row that may start a join (earlier
    rows are context from the previous chunk)."""
    lines = rows.lines
    last_slash = -MAX_JOIN  # the last row with a "/": every device name has one
    for t in range(len(lines)):
        line = lines[t]
        if b"/" in line:
            last_slash = t
        if t - last_slash >= MAX_JOIN or not _TAIL.search(line):
            continue
        if b"/job:" not in line and len(line.rstrip().split(None, 1)) > 1:
            continue  # a row with a blank in it is no piece of a device name
        tail_is_record = rows.record(t)
        if tail_is_record and _GLOG_HEAD.search(line):
            continue  # a whole glog copy: it starts its own record
        low = t  # rows a join already took (CONSUMED) belong to the row above them
        while low > max(t - MAX_JOIN + 1, 0) and (lines[low - 1] == CONSUMED or (
                not _blank(lines[low - 1]) and not rows.record(low - 1))):
            low -= 1
        if low == t or not any(b"/job:" in lines[i] for i in range(low, t + 1)) \
                or not _may_end_record(rows.joined(low, t)):
            continue  # (a "/job:" cut in two is not joined: the cheap test in needed() relies on it)
        options = []
        for h in range(t - 1, low - 1, -1):
            if lines[h] == CONSUMED or (tail_is_record and not _GLOG_HEAD.search(lines[h])):
                continue  # a placement only ever completes a truncated glog copy
            if is_record(rows.joined(h, t)):
                options.append(h)
            if _GLOG_HEAD.search(lines[h]):
                break  # a glog copy's start: a record never begins before it
        if len(options) == 1 and options[0] >= first:
            rows.commit(options[0], t, rows.joined(options[0], t))


def _may_end_record(text: bytes) -> bool:
    """Cheap test: ``text`` ends with a device name that follows ": " or an eager line's words."""
    text = text.replace(*placer.NORMALISE)
    at = text.rfind(b"/job:")
    return at >= 0 and _DEVICE_END.fullmatch(text, at) is not None \
        and text.endswith((b": ", b"in device ", b"on task "), 0, at)


def wrapped(rows: _Rows, first: int, width: int) -> None:
    """Join the rows of a console hard-wrapped at ``width`` characters."""
    lines = rows.lines
    i = first  # a run that began earlier was joined by the previous chunk
    while i < len(lines):
        end, text = i, lines[i].rstrip(b"\r")
        while end + 1 < len(lines) and end - i + 1 < MAX_JOIN:
            row, nxt = lines[end].rstrip(b"\r"), lines[end + 1].rstrip(b"\r")
            if _blank(nxt) or _STARTS_RECORD.match(nxt):
                break
            size = _chars(row)
            if size == width:
                both = text + nxt
                if (rows.record(end + 1) or is_record(text)) and not is_record(both):
                    break
            elif width - _TRIM <= size < width and not row.endswith((b" ", b"\t")):
                both = text + b" " + nxt.lstrip(b" \t")  # the copy dropped the blanks the row was cut at
                if rows.record(end + 1) or not _trimmed_join(text, nxt, both):
                    break
            else:
                break
            text, end = both, end + 1
        if end > i:
            rows.commit(i, end, text)
        i = end + 1


def _trimmed_join(text: bytes, nxt: bytes, both: bytes) -> bool:
    """Whether a row a few characters short of the width continues on the next: when
    joining makes a placement, completes an error's key words, or an error message or
    a mapping line stops mid-sentence there."""
    if is_record(both) and not is_record(text):
        return True
    spans = error_messages.TRIGGER.search(text[-64:] + b" " + nxt[:64])
    if spans and spans.start() < len(text[-64:]) < spans.end():
        return True
    if nxt.startswith(b"unknown device.") and _DEVICE_AT_END.fullmatch(text):
        return True
    if error_messages.TRIGGER.search(text) and not text.rstrip().endswith(b"."):
        return True
    return _MAPPING_LINE.match(text) is not None or _ignored_open(text, nxt)


def _ignored_open(text: bytes, nxt: bytes) -> bool:
    """Whether a line in which the placer says it ignored a request stops before its end: its key
    words cut, a reference input's line before the device it names, a dropped colocation's quoted
    error mid-sentence."""
    spans = _IGNORED_HEAD.search(text[-64:] + b" " + nxt[:64])
    if spans and spans.start() < len(text[-64:]) < spans.end():
        return True
    head = _IGNORED_HEAD.search(text)
    if head is None:
        return False
    said = ignored.PATTERN.match(text, head.start())
    if head.group().endswith(b"specification"):
        return said is None or not said.group("device")
    if head.group().endswith(b"changing"):  # the resources warning: its candidates follow on lines of their own
        return not text.rstrip().endswith((b".", b"["))
    return not text.rstrip().endswith(b".")


def _chars(line: bytes) -> int:
    return len(line) if line.isascii() else len(line.decode("utf-8", "replace"))


def rejoin(lines: list[bytes], first: int, width: int | None) -> list[tuple[int, int]]:
    """Join broken records in ``lines`` (changed in place) whose first row is at or after
    ``first``; the joined rows, each with the last row it took (also through a row that
    had taken others before being taken itself)."""
    rows = _Rows(lines)
    if width:
        wrapped(rows, first, width)
    cut_phrases(rows, first)
    fragments(rows, first)
    return sorted(rows.last.items())
