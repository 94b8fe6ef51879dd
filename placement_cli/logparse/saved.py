"""One input of `diff` and `check`: a placement log of any TensorFlow version, standard input, or a
report saved with ``--json`` by any command, told apart by its content (never by its name)."""

from __future__ import annotations

import codecs
import importlib
import io
import json
import os
import re
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, replace
from typing import Any, BinaryIO, cast

from placement_cli import forked
from placement_cli.exceptions import InputError
from placement_cli.i18n import N_, _, translated
from placement_cli.logparse import parallel, reader
from placement_cli.logparse.causes import headline
from placement_cli.logparse.engine import FunctionsRun, tally_streams
from placement_cli.logparse.reader import holds_functions
from placement_cli.logparse.records import Records, release
from placement_cli.model import Report

_JSON_ARRAY = re.compile(r'\[\s*(\]|\{\s*")')
SNIFF = 64 << 10  # the bytes looked at to tell a saved report from a log
# What other commands save: a document of theirs holds no one run's placements.
_NOT_PLACEMENTS = (
    ("cases", N_("a `placement errors` catalogue")),
    ("physical", N_("a `placement devices` inventory")),
    ("source", N_("a `placement inspect` answer")),
    ("failures", N_("a `placement check` verdict")),
    ("moved", N_("a `placement diff` comparison")),
)


class _Recording:
    """A stream that keeps what is read from it, so it can be read again (what a decompressor needs
    for the first 4 KiB of text: a few KiB of gzip or xz, at most a 900 kB block of bzip2)."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream, self.kept = stream, bytearray()

    def read(self, size: int = -1) -> bytes:
        data = self.stream.read(size)
        self.kept += data
        return data

    def readable(self) -> bool:
        return True


def _text_head(stream: BinaryIO) -> tuple[bytes, BinaryIO, str]:
    """The raw head, a stream that gives every raw byte again, and the decompressed, decoded start of
    the text."""
    head = reader.read_full(stream, SNIFF)
    raw = cast(BinaryIO, reader.Prepend(head, stream))
    text_head = head
    for magic, _kind, module, opener in reader.COMPRESSED:
        if head.startswith(magic):
            recording = _Recording(stream)
            lib = importlib.import_module(module)
            source = reader.Prepend(head, recording)
            try:
                opened = getattr(lib, opener)(fileobj=source, mode="rb") if module == "gzip" else \
                    getattr(lib, opener)(source, mode="rb")
                text_head = reader.read_full(opened, 4096)
            except Exception:  # noqa: BLE001 - corrupt data: the log reader says so, with its words
                text_head = b""
            raw = cast(BinaryIO, reader.Prepend(head + bytes(recording.kept), stream))
            break
    encoding, bom = reader.encoding_of(text_head)
    start = codecs.getincrementaldecoder(encoding)("replace").decode(text_head[bom:bom + 4096])
    return head, raw, start


def _looks_saved(start: str) -> bool:
    """A JSON object, or a JSON array (``[]``, ``[{"``), which is read as JSON to say it is no report
    rather than counted as a log without placements."""
    start = start.lstrip(" \t\r\n\0")
    return start.startswith("{") or _JSON_ARRAY.match(start) is not None


def _load_json(raw: BinaryIO, name: str) -> Any:
    """The whole input as JSON (compressed, UTF-8/16/32 as a log may be); InputError if it is none."""
    opened = reader.open_text(raw, name, SNIFF, None)
    assert opened is not None
    _layout, blocks = opened
    text = b"".join(blocks).decode("utf-8", "replace")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        if isinstance(exc, json.JSONDecodeError) and exc.msg == "Extra data" and exc.lineno == 2:
            raise InputError(_("{name}: one JSON document per line (JSON lines), not a report saved by placement "
                               "--json: give the log's own text (the messages, one a line)").format(
                name=name)) from None
        raise InputError(_("{name}: starts like a saved report but is not valid JSON ({why})").format(
            name=name, why=str(exc)[:120])) from None


@dataclass(frozen=True)
class Tallied:
    """An input as a comparison reads it: a saved report whole; a log's placements counted per record
    (``records``: "node: (Op): device" as printed, pairs of copies counted once; ``eager``: (op,
    device)), with ``report`` holding its counts per device, errors and lines."""

    name: str
    report: Report
    records: Records | None = None  # None: a saved report (its placements are in ``report``)
    eager: Counter[tuple[bytes, bytes]] | None = None

    @property
    def saved(self) -> bool:
        return self.records is None


def saved_among(paths: list[str]) -> tuple[Report | None, BinaryIO | None, InputError | None]:
    """``parse``'s inputs told apart: the Report of a lone input saved with --json (None: logs; text that
    only starts like JSON, such as JSON lines, is read as a log, as parse always read it), and standard
    input's bytes again where they were read to tell, and why the first input that starts like JSON is
    none (raised where the logs hold no placement: a truncated report, JSON lines). InputError for JSON
    that is no report, or for a report among other inputs (a report is no log to read in one stream with
    others)."""
    stdin: BinaryIO | None = None
    refused: InputError | None = None
    for path in paths:
        name = "standard input" if path == "-" else path
        if path == "-":
            if stdin is not None:  # a second "-" reads what the first left: nothing
                continue
            head, stdin, start = _text_head(reader.stdin_stream())
            if not (head and _looks_saved(start)):
                continue
            whole = stdin.read()
            stdin = io.BytesIO(whole)
            data = _json_or_none(io.BytesIO(whole), name)
        elif os.path.isfile(path):
            try:
                with open(path, "rb") as stream:
                    head, raw, start = _text_head(stream)
                    if not (head and _looks_saved(start)):
                        continue
                    data = _json_or_none(raw, name)
            except OSError:  # parse says why it cannot read it
                continue
        else:
            continue
        if isinstance(data, InputError):  # read as a log: where it holds no placement, this says why
            refused = refused or data
            continue
        report = report_from_dict(data, name)
        if len(paths) > 1:
            raise InputError(_("{name}: a report saved with --json, which parse reads alone, not in one stream with "
                               "other inputs (diff compares two)").format(name=name))
        return report, stdin, None
    return None, stdin, refused


def _json_or_none(raw: BinaryIO, name: str) -> Any:
    """The JSON document, or the InputError that says why the text is none."""
    try:
        return _load_json(raw, name)
    except InputError as exc:
        return exc


def read_input(path: str, *, note: Callable[[str], None] | None = None) -> Report:
    """A log (``parse`` reads it), ``-`` for standard input, or a report saved with ``--json`` by any
    command; InputError (exit 2) for input that is neither."""
    return _read(path, note, tally=False).report


def read_tallied(path: str, *, note: Callable[[str], None] | None = None) -> Tallied:
    """As read_input, but a log is counted per record (what ``diff`` compares), at ``parse
    --summary``'s speed: a big file in two halves at once."""
    return _read(path, note, tally=True)


def read_pair(old: str, new: str, *, note: Callable[[str], None] | None = None,
              prepare: Callable[[Tallied], object] = lambda _side: None) -> tuple[Tallied, Tallied]:
    """``old`` and ``new`` as read_tallied reads them, ``prepare`` run on each as soon as it is read,
    in the process that read it. Two big log files are read at once, each whole, NEW in a forked child
    that sends back what it read and prepared (two files on two cores: each file's halves one after the
    other paid twice for the split, and left ``prepare`` to one core); its notes are said after OLD's.
    A child that fails (a file it cannot read) is not trusted: NEW is read here, and says what is wrong."""

    def read(path: str, said: Callable[[str], None] | None, split: bool) -> Tallied:
        side = _read(path, said, tally=True, split=split)
        prepare(side)
        return side

    if not (parallel.can_split(old) and parallel.can_split(new) and _is_log(old) and _is_log(new)
            and forked.available()):  # a saved report is read here: its placements would travel one by one
        return read(old, note, True), read(new, note, True)

    def child() -> tuple[Tallied, list[str]]:
        notes: list[str] = []
        return read(new, notes.append, False), notes

    with forked.started(child) as theirs:
        first = read(old, note, False)
        found = theirs()
    if found is None:
        return first, read(new, note, True)
    second, notes = found
    if note is not None:
        for line in notes:
            note(line)
    return first, second


def _is_log(path: str) -> bool:
    """``path`` reads as a log (not a saved report); False too where it cannot be read."""
    try:
        with open(path, "rb") as stream:
            return not _looks_saved(_text_head(stream)[2])
    except OSError:
        return False


def _read(path: str, note: Callable[[str], None] | None, tally: bool, split: bool = True) -> Tallied:
    name = "<stdin>" if path == "-" else path
    with ExitStack() as stack:
        if path == "-":
            stream: BinaryIO = reader.stdin_stream()
        else:
            if os.path.isdir(path):
                raise InputError(_("{path}: is a directory, not a log file").format(path=path))
            try:
                stream = stack.enter_context(open(path, "rb"))
            except FileNotFoundError:
                raise InputError(_("{path}: no such file").format(path=path)) from None
            except OSError as exc:
                raise InputError(_("{path}: cannot read ({why})").format(path=path, why=exc.strerror or exc)) from None
        head, raw, start = _text_head(stream)
        shown = "standard input" if path == "-" else path
        if not head:
            raise InputError(_("{name}: empty input (0 bytes)").format(name=shown))
        refused: InputError | None = None  # text that starts like JSON but is none: a log, if it holds placements
        if _looks_saved(start):
            whole = raw.read() if path == "-" else b""  # standard input is read again as a log where it is no JSON
            try:
                data = _load_json(io.BytesIO(whole) if path == "-" else raw, shown)
            except InputError as exc:
                refused = exc
                raw = io.BytesIO(whole) if path == "-" else _text_head(stack.enter_context(open(path, "rb")))[1]
            else:
                return Tallied(shown, report_from_dict(data, shown))
        read = _read_log(path, name, raw, note, tally, split)
        if refused is not None and not (read.report.placement_count or read.report.errors or read.report.ignored):
            raise refused  # a truncated report, JSON lines: no log either
        return read


# The first bytes of a log that are looked at for a tf.function's name before it is read: where one is, the
# log is read by thread from its start; where none is, as one that runs no tf.function, again by thread if
# it runs one after all (a log whose first call comes late is read about twice).
FUNCTIONS_HEAD = 8 << 20


def _read_log(path: str, name: str, raw: BinaryIO, note: Callable[[str], None] | None, tally: bool,
              split: bool) -> Tallied:
    """``raw`` (``path``'s bytes) read as a log: a big file in two halves at once where ``split``."""
    shown = "standard input" if path == "-" else path
    if tally and split and path != "-" and parallel.can_split(path):  # a big file: its halves at once, as parse --summary counts it
        halves = parallel.split_tally(path)
        if halves is not None:
            release(halves[1].tally)
            return Tallied(shown, halves[0], halves[1].tally, halves[1].eager_tally)
    if not tally or path == "-" or holds_functions(path, limit=FUNCTIONS_HEAD):  # each placer line by its thread
        report, parser = tally_streams([(name, raw)], note=note, keep=not tally, tally=tally)
    else:  # read as a text that runs no tf.function (at a count's speed), again by thread where it runs one
        said: list[str] = []  # (what the reading says: once, from the reading that counts)
        again = False
        try:
            report, parser = tally_streams([(name, raw)], note=said.append, tally=True, keep=False,
                                           functions_known=False, watch=True)
        except FunctionsRun:
            again, said = True, []
        finally:
            if note is not None:
                for line in said:
                    note(line)
        if again:  # (out of the handler: the first reading's state is let go before the second's)
            with open(path, "rb") as stream:
                report, parser = tally_streams([(name, _text_head(stream)[1])], note=note, keep=False, tally=True)
    release(parser.tally)
    return Tallied(shown, report, parser.tally, parser.eager_tally) if tally else Tallied(shown, report)


def _what(data: Any) -> str | None:
    """What a JSON document that is no placement report is, where another command saved it."""
    if isinstance(data, dict):
        for key, what in _NOT_PLACEMENTS:
            if key in data:
                return what
    return None


def report_from_dict(data: Any, name: str = "<report>") -> Report:
    """A Report again from what ``Report.to_dict`` (any command's ``--json``) wrote; InputError for a
    document that is not one."""
    if not (isinstance(data, dict) and isinstance(data.get("placements"), list)
            and isinstance(data.get("summary"), dict)):
        what = _what(data)
        if what is not None:
            raise InputError(_("{name}: {what}, not a report of placements (save one with --json from "
                               "show, tower, parse, trace, train, mirrored or cluster)").format(
                name=name, what=translated(what)))
        raise InputError(_("{name}: JSON, but not a report saved by placement --json (no \"placements\" and "
                           "\"summary\")").format(name=name))
    try:
        report = Report.from_dict(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InputError(_("{name}: a saved report with a field that is not as placement writes it ({why})").format(
            name=name, why=f"{type(exc).__name__}: {exc}"[:160])) from None
    # what a failure's message says went wrong is the parser's to read (a multi-error message's first root)
    return replace(report, errors=tuple(replace(e, headline=headline(e.message)) for e in report.errors))


def record_fields(record: bytes) -> tuple[str, str | None, str]:
    """A tallied placer record (``node: (Op): device``, or the guide era's ``node: device``) as its
    node, op (None in the guide era's) and device as printed. A node name holds no ": "."""
    node, _sep, rest = record.partition(b": ")
    if rest.startswith(b"("):
        op, _sep, device = rest[1:].partition(b"): ")
        return node.decode("utf-8", "replace"), op.decode("utf-8", "replace"), device.decode("utf-8", "replace")
    return node.decode("utf-8", "replace"), None, rest.decode("utf-8", "replace")
