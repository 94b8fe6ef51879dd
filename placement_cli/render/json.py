"""JSON rendering of a Report (the schema SPEC.md fixes)."""

from __future__ import annotations

import codecs
import contextlib
import errno
import io
import json
import math
import os
import re
import tempfile
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from placement_cli import forked
from placement_cli.collector import paused
from placement_cli.i18n import Message, english
from placement_cli.messages import LONE_SURROGATE
from placement_cli.model import Cause, ClusterTask, Report
from placement_cli.model.diff import Rows
from placement_cli.model.filtered import Filtered


def report_dict(report: Report, *, filtered: Filtered | None = None) -> dict[str, Any]:
    """The report as data. Filtered: ``placements`` and ``summary`` describe what matched, ``filters``
    says which filters applied, and ``summary.unfiltered_placements`` counts them all."""
    data = report.to_dict()
    if filtered is not None and filtered.filters.active:
        data["filters"] = filtered.filters.to_dict()
        data["summary"]["unfiltered_placements"] = filtered.total
        if filtered.report.sessions_numbered:
            data["summary"]["sessions_numbered"] = True
    return data


def traced_dict(report: Report, exit_code: int, filtered: Filtered) -> dict[str, Any]:
    """`trace --json`: the report of what the script placed, and the script's exit code."""
    return {**report_dict(report, filtered=filtered), "exit_code": exit_code}


def cluster_traced_dict(report: Report, exit_code: int, filtered: Filtered, tasks: Sequence[ClusterTask],
                        isolated: bool | None, problem: object, cause: Cause | None) -> dict[str, Any]:
    """`trace --cluster --json`: every task's placements, each task as it ran, and what went wrong."""
    return {**traced_dict(report, exit_code, filtered),
            "tasks": [{"job": t.job, "task": t.task, "address": (t.target or "").removeprefix("grpc://") or None,
                       "pid": t.pid, "exit_code": t.exit_code, "ended_by_placement": t.ended_by_placement,
                       "cuda_visible_devices": t.cuda_visible_devices}
                      for t in tasks],
            "isolated": isolated, "error": None if problem is None else english(problem) if isinstance(problem, Message) else str(problem),
            **({"cause": cause.to_dict()} if cause is not None else {})}


def render_json(report: Report, *, filtered: Filtered | None = None,
                ascii_only: bool = False) -> str:
    """One JSON document; run commands add requested/status/reason, result and log."""
    return dumps(report_dict(report, filtered=filtered), ascii_only=ascii_only)


def as_json(value: object) -> str:
    """What JSON writes for a value json does not know: a Message's English text (JSON stays English
    whatever the language shown); anything else is no JSON (TypeError, a bug)."""
    if isinstance(value, Message):
        return value.english
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def dumps(data: Any, *, ascii_only: bool = False) -> str:
    """The one JSON writer of every command: strict JSON, which every parser reads (``jq``,
    JavaScript, strict libraries). A number that is not finite (a diverged loss, an infinite
    ratio) has no JSON spelling: it is written as null, and the document's ``non_finite`` lists
    each one, its place (a jq path) and what it was (``NaN``, ``Infinity``, ``-Infinity``).
    ``ascii_only``: \\u escapes for a stream that cannot encode every character (still lossless).
    A lone surrogate (a saved report's string may hold one) is always written as its \\u escape: no
    UTF-8 stream encodes it, and JSON spells it so.
    A list of ROWS objects or more in the top-level object is written one object a line."""
    if _long(data):
        buffer = io.StringIO()
        write(data, buffer, ascii_only=ascii_only)
        return buffer.getvalue()
    try:  # the usual case, at full speed: every number is finite
        return lone_escaped(json.dumps(data, indent=2, ensure_ascii=ascii_only, allow_nan=False, default=as_json))
    except ValueError:
        pass
    found: list[dict[str, str]] = []
    data = finite(data, "", found)
    if found and isinstance(data, dict):
        data = {**data, "non_finite": found}
    return lone_escaped(json.dumps(data, indent=2, ensure_ascii=ascii_only, allow_nan=False, default=as_json))


def lone_escaped(text: str) -> str:
    """JSON ``text`` with each lone surrogate written as its \\u escape (in JSON text one can only stand
    in a string, where the escape is its spelling); ASCII text, the usual case, is returned as it is."""
    if text.isascii() or LONE_SURROGATE.search(text) is None:
        return text
    return LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


# A list of at least this many objects (a report's placements, a diff's rows) is written one object a
# line, by json's C encoder (its indenting encoder is pure Python: 20 s for a million rows), and written
# as it is encoded, BATCH objects at a time (a million rows are never one string).
ROWS = 64
BATCH = 4096


def _long(data: Any) -> set[str]:
    """The keys of the top-level object whose values are long lists of objects (or Rows, any length)."""
    if not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
        return set()
    return {k for k, v in data.items() if isinstance(v, Rows) or _rows(v)}


def write(data: Any, out: Any, *, ascii_only: bool = False) -> None:
    """``dumps(data)`` written to ``out`` piece by piece. Long lists of HALVES rows in all: a forked child
    writes the last of their rows while this process writes the first MINE percent (``_halves``)."""
    long = _long(data)
    if not long:
        out.write(dumps(data, ascii_only=ascii_only))
        return
    quote = json.encoder.encode_basestring_ascii if ascii_only else json.encoder.encode_basestring
    row = _row_encoder(ascii_only)
    found: list[dict[str, str]] = []
    with _halves(data, long, row, quote) as theirs:
        out.write("{")
        for n, (key, value) in enumerate(data.items()):
            out.write(f"{',' if n else ''}\n  {lone_escaped(quote(key))}: ")
            if key not in long:
                try:
                    text = json.dumps(value, indent=2, ensure_ascii=ascii_only, allow_nan=False, default=as_json)
                except ValueError:
                    text = json.dumps(finite(value, _path(key), found), indent=2, ensure_ascii=ascii_only,
                                      allow_nan=False, default=as_json)
                out.write(lone_escaped(text.replace("\n", "\n  ")))
                continue
            out.write("[\n    " if len(value) else "[")
            with paused():  # a batch's rows and their parts: many objects, no cycles
                start = theirs.start(key)
                _write_rows(value, _path(key), row, quote, found, out, stop=start)
                if start is not None:
                    theirs.copy(key, found, out)
            out.write("\n  ]" if len(value) else "]")
        if found:
            out.write(',\n  "non_finite": ' + json.dumps(found, indent=2, ensure_ascii=ascii_only).replace("\n", "\n  "))
        out.write("\n}")


def _path(key: str) -> str:
    """A key of the top-level object as a jq path."""
    return f".{key}" if _IDENTIFIER.fullmatch(key) else f".[{json.dumps(key)}]"


def _write_rows(value: Any, path: str, row: Callable[[Any, int], Any], quote: Callable[[str], str],
                found: list[dict[str, str]], out: Any, start: int = 0, stop: int | None = None) -> None:
    """A long list's rows from ``start`` to ``stop`` (BATCH-aligned), BATCH at a time (each batch's texts
    joined before it is written)."""
    for at in range(start, len(value) if stop is None else stop, BATCH):
        try:
            if isinstance(value, Rows):  # a diff's rows: written the fastest way they know
                text = value.text(slice(at, at + BATCH), quote, lambda item: "".join(row(item, 0)), ",\n    ")
            else:
                text = ",\n    ".join(["".join(row(item, 0)) for item in value[at : at + BATCH]])
        except ValueError:
            batch = value[at : at + BATCH]
            text = ",\n    ".join(["".join(row(finite(item, f"{path}[{at + i}]", found), 0))
                                   for i, item in enumerate(batch)])
        out.write((",\n    " if at else "") + lone_escaped(text))


# A document whose long lists hold this many rows in all is written by two processes (on two cores):
# this process writes the first MINE percent of the rows, a forked child the rest into a file, then
# the child's text follows (copied by the kernel where the output takes it, COPIED bytes at a time else).
HALVES = 200_000
MINE = 55  # percent of the rows this process writes: the forked child writes its rows slower (20-40%
# slower, measured on two cores), and this process has the child's text to copy after its own
COPIED = 4 << 20


class _Theirs:
    """Where the child's rows start in each long list it writes part of (none: this process writes them
    all) and what it wrote: per list, where in ``file`` its text lies and the numbers it found not finite."""

    def __init__(self, data: dict[str, Any], starts: dict[str, int], row: Callable[[Any, int], Any],
                 quote: Callable[[str], str], file: Any = None, result: Callable[[], Any] | None = None) -> None:
        self.data, self.starts, self.row, self.quote, self.file = data, starts, row, quote, file
        self.result = result
        self._spans: dict[str, tuple[int, int, list[dict[str, str]]]] | None = None

    def start(self, key: str) -> int | None:
        return self.starts.get(key)

    def copy(self, key: str, found: list[dict[str, str]], out: Any) -> None:
        """The rows of ``key`` from its start on: the child's text, or written here if the child failed."""
        if self._spans is None and self.result is not None:
            self._spans = self.result() or {}
            self.result = None
        span = (self._spans or {}).get(key)
        if span is None:
            _write_rows(self.data[key], _path(key), self.row, self.quote, found, out, start=self.starts[key])
            return
        offset, size, theirs_found = span
        _copied(self.file.fileno(), offset, size, out)
        found += theirs_found

    def written(self) -> dict[str, tuple[int, int, list[dict[str, str]]]]:
        """(In the child.) Its rows of each list written into ``file``: where they lie, what was not finite."""
        spans = {}
        fd = self.file.fileno()
        with io.TextIOWrapper(os.fdopen(os.dup(fd), "wb"), encoding="utf-8", newline="") as stream:
            for key, start in self.starts.items():
                stream.flush()
                offset = os.lseek(fd, 0, os.SEEK_CUR)
                found: list[dict[str, str]] = []
                with paused():
                    _write_rows(self.data[key], _path(key), self.row, self.quote, found, stream, start=start)
                stream.flush()
                spans[key] = (offset, os.lseek(fd, 0, os.SEEK_CUR) - offset, found)
        return spans


@contextlib.contextmanager
def _halves(data: dict[str, Any], long: set[str], row: Callable[[Any, int], Any], quote: Callable[[str], str]
            ) -> Iterator[_Theirs]:
    """The child that writes the long lists' rows after the first MINE percent (taken in order: the lists
    after that point whole, the one across it from a BATCH boundary on), started where forking is possible
    and worth it; gone, and its file with it, however the block ends."""
    total = sum(len(data[key]) for key in long)
    starts: dict[str, int] = {}
    if total >= HALVES and forked.available():
        before = 0
        for key in (key for key in data if key in long and len(data[key])):  # the child's rows come last:
            start = max(0, -(-(total * MINE // 100 - before) // BATCH) * BATCH)  # this process writes all
            if start < len(data[key]):  # its own before it waits for the child
                starts[key] = start
            before += len(data[key])
    if not starts:
        yield _Theirs(data, {}, row, quote)
        return
    with tempfile.TemporaryFile() as file:  # unnamed: nothing is left behind, however this process ends
        theirs = _Theirs(data, starts, row, quote, file)
        with forked.started(theirs.written) as result:
            theirs.result = result
            yield theirs


def _copied(fd: int, offset: int, size: int, out: Any) -> None:
    """``size`` bytes of UTF-8 text at ``offset`` of ``fd`` written to ``out``: sent by the kernel where
    ``out`` is a file, pipe or socket that takes UTF-8 bytes as they are, else decoded."""
    target = _raw_target(out)
    sent = 0
    if target is not None:
        out.flush()
        try:
            while sent < size:
                n = os.sendfile(target, fd, offset + sent, size - sent)
                if not n:
                    raise OSError(errno.EIO, "the text to copy ended early")
                sent += n
            return
        except OSError as exc:
            if sent or exc.errno not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
                raise  # a full disk, a closed pipe: as any write to ``out`` would fail
    decoder = codecs.getincrementaldecoder("utf-8")()
    while sent < size:
        chunk = os.pread(fd, min(COPIED, size - sent), offset + sent)
        if not chunk:
            raise OSError(errno.EIO, "the text to copy ended early")
        sent += len(chunk)
        out.write(decoder.decode(chunk, final=sent >= size))


def _raw_target(out: Any) -> int | None:
    """The file descriptor under the text stream ``out`` where it writes UTF-8, None else."""
    try:
        fd = out.fileno()
        encoding = codecs.lookup(out.encoding).name
    except (AttributeError, OSError, LookupError, TypeError, ValueError):
        return None
    return fd if isinstance(fd, int) and encoding == "utf-8" else None


def _rows(value: Any) -> bool:
    return isinstance(value, list) and len(value) >= ROWS and all(type(item) is dict for item in value)


def _row_encoder(ascii_only: bool) -> Any:
    """json's own C encoder, made once: one compact object per call (a non-finite number: ValueError)."""
    c_make = getattr(json.encoder, "c_make_encoder", None)
    encoder = json.JSONEncoder(ensure_ascii=ascii_only, allow_nan=False, default=as_json)
    if c_make is None:  # pragma: no cover - an interpreter without json's C speed-ups
        return lambda item, _level: (encoder.encode(item),)
    quote = json.encoder.encode_basestring_ascii if ascii_only else json.encoder.encode_basestring
    return c_make(None, as_json, quote, None, ": ", ", ", False, False, False)


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def finite(data: Any, path: str, found: list[dict[str, str]]) -> Any:
    """``data`` with every non-finite float as None, each one noted in ``found`` with its jq path
    (``path``: that of ``data``, "" for the document)."""
    if isinstance(data, float) and not math.isfinite(data):
        found.append({"path": path or ".", "value": "NaN" if math.isnan(data) else "Infinity" if data > 0 else "-Infinity"})
        return None
    if isinstance(data, dict):  # a key is text in JSON: a non-finite float key is written as Python spells it
        return {str(k) if isinstance(k, float) else k: finite(v, f"{path}.{k}" if isinstance(k, str) and
                _IDENTIFIER.fullmatch(k) else f"{path or '.'}[{json.dumps(str(k))}]", found) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [finite(v, f"{path or '.'}[{i}]", found) for i, v in enumerate(data)]
    return data
