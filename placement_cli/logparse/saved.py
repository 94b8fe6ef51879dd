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

from placement_cli.devices import DeviceSpec, try_parse
from placement_cli.exceptions import InputError
from placement_cli.i18n import N_, _, translated
from placement_cli.logparse import reader
from placement_cli.logparse.error_messages import headline
from placement_cli.logparse.engine import FunctionsRun, holds_functions, tally_streams
from placement_cli.logparse.records import Records, release
from placement_cli.model import (AS_REQUESTED, FREE, LOGGED, SOFT_FALLBACK, WITH_RESOURCE, Cause, Compiled, CompiledOp,
                                 Copy, DeviceMapping, IgnoredRequest, Origin, Placement, PlacementFailure, Report)
from placement_cli.model.kinds import FailureKind, PlacementKind

_JSON_ARRAY = re.compile(r'\[\s*(\]|\{\s*")')
SNIFF = 64 << 10  # the bytes looked at to tell a saved report from a log
_STATUSES = {str(s): s for s in (AS_REQUESTED, FREE, SOFT_FALLBACK, LOGGED, WITH_RESOURCE)}
_KINDS = frozenset(PlacementKind)
_FAILURE_KINDS = frozenset(FailureKind)
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
    from placement_cli import forked  # noqa: PLC0415
    from placement_cli.logparse import parallel  # noqa: PLC0415

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
    if tally and split and path != "-":
        from placement_cli.logparse import parallel  # noqa: PLC0415

        if parallel.can_split(path):  # a big file: its halves at once, as parse --summary counts it
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
        placements = tuple(_placement(p) for p in data["placements"])
        summary = data["summary"]
        counted = None
        by_device = summary.get("by_device")
        if not placements and isinstance(by_device, dict) and by_device:  # parse --summary --json
            counted = tuple((str(k), _count(v)) for k, v in by_device.items())
        copies = data.get("copies")
        report = Report(
            placements=placements,
            device_mapping=tuple(DeviceMapping(_text(m["device"]), _text(m["description"]))
                                 for m in data.get("device_mapping") or ()),
            errors=tuple(_failure(e) for e in data.get("errors") or ()),
            ignored=tuple(_ignored(i) for i in data.get("ignored_requests") or ()),
            lines=_count(summary.get("lines", 0)),
            counted=counted,
            title=_optional_text(data.get("title")),
            result=data.get("result"),
            log=_optional_text(data.get("log")),
            copies=None if copies is None else tuple(_copy(c) for c in copies),
            run_error=_optional_text(data.get("run_error")) or _exited(data.get("exit_code")),
            incomplete=None if not isinstance(data.get("incomplete"), list) else tuple(map(_text, data["incomplete"])),
            executed=None if not isinstance(data.get("executed_ops"), dict) else
            tuple((str(k), _count(v)) for k, v in data["executed_ops"].items()),
            compiled=None if data.get("xla_compiled") is None else tuple(map(_compiled, data["xla_compiled"])),
            saved_filters=_filters(data.get("filters")),
            unfiltered=_optional_int(summary.get("unfiltered_placements")),
            sessions_numbered=summary.get("sessions_numbered") is True,
        )
        return replace(report, origin=Origin.RUN) if knows_requests(report) else report  # a run's saved report
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InputError(_("{name}: a saved report with a field that is not as placement writes it ({why})").format(
            name=name, why=f"{type(exc).__name__}: {exc}"[:160])) from None


def _filters(value: Any) -> tuple[tuple[str, Any], ...]:
    """The filters a report was saved narrowed by (``--json``'s ``filters``), those given."""
    if not isinstance(value, dict):
        return ()
    found: list[tuple[str, Any]] = [(k, _text(value[k])) for k in ("device", "op", "node") if value.get(k) is not None]
    if value.get("top") is not None:
        found.append(("top", _count(value["top"])))
    return tuple(found)


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected text, found {type(value).__name__}")
    return value


def _optional_text(value: Any) -> str | None:
    return None if value is None else _text(value)


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"expected a count, found {value!r}")
    return value


def _dimension(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected a dimension, found {value!r}")
    return value


def _optional_int(value: Any) -> int | None:
    return None if value is None else _count(value)


def _spec(p: dict[str, Any]) -> DeviceSpec:
    """The device from its fields; from its names where a field is missing."""
    if "device_type" in p:
        device_type = _optional_text(p.get("device_type"))
        return DeviceSpec(job=_optional_text(p.get("job")), replica=_optional_int(p.get("replica")),
                          task=_optional_int(p.get("task")), device_type=device_type,
                          device_index=_optional_int(p.get("device_index")))
    spec = try_parse(p.get("canonical")) or try_parse(p.get("device"))
    if spec is None:
        raise ValueError(f"no device in placement {str(p)[:80]}")
    return spec


def _placement(p: Any) -> Placement:
    if not isinstance(p, dict):
        raise TypeError(f"a placement is an object, found {type(p).__name__}")
    kind = p.get("kind", "placer")
    if kind not in _KINDS:
        raise ValueError(f"unknown placement kind {kind!r}")
    status = p.get("status", LOGGED)
    spec = _spec(p)
    return Placement(
        node=_optional_text(p.get("node")),
        op=_optional_text(p.get("op")),
        device=_text(p.get("device", spec.canonical)),
        spec=spec,
        kind=PlacementKind(kind),
        line=_count(p.get("line", 0)),
        requested=_optional_text(p.get("requested")),
        status=_STATUSES.get(status, status if isinstance(status, str) else LOGGED),
        reason=_optional_text(p.get("reason")),
        group=_optional_text(p.get("group")),
        graph=_optional_text(p.get("graph")),
        wrapper=p.get("wrapper") is True,
    )


def _failure(e: Any) -> PlacementFailure:
    kind = _text(e["kind"])  # (first: an entry that is no object fails here, as it always did)
    message = _text(e.get("message", ""))
    if kind not in _FAILURE_KINDS:  # as a placement's kind: only those placement writes
        raise ValueError(f"unknown placement error kind {kind!r}")
    return PlacementFailure(kind=FailureKind(kind), node=_optional_text(e.get("node")),
                            requested_device=_optional_text(e.get("requested_device")),
                            message=message, headline=headline(message),
                            available_devices=tuple(_text(d) for d in e.get("available_devices") or ()),
                            group_device=_optional_text(e.get("group_device")),
                            cause=None if e.get("cause") is None else _cause(e["cause"]))


def _cause(c: Any) -> Cause:
    return Cause(line=_text(c["line"]), kind=_text(c.get("kind", "other")), log_line=_optional_text(c.get("log_line")))


def _ignored(i: Any) -> IgnoredRequest:
    return IgnoredRequest(node=_text(i["node"]), requested=_optional_text(i.get("requested")), cause=_text(i["cause"]),
                          source=_optional_text(i.get("source")), device=_optional_text(i.get("device")),
                          line=_count(i.get("line", 0)), message=_text(i.get("message", "")))


def _copy(c: Any) -> Copy:
    shape = c.get("shape")
    return Copy(tensor=_text(c["tensor"]), source=_text(c["from"]), target=_text(c["to"]),
                dtype=_optional_text(c.get("dtype")),
                shape=None if shape is None else tuple(_dimension(n) for n in shape),
                bytes=_optional_int(c.get("bytes")), producer=_optional_text(c.get("producer")),
                consumer=_optional_text(c.get("consumer")), physical=c.get("physical"),
                computed=bool(c.get("computed", False)))


def _compiled(c: Any) -> Compiled:
    return Compiled(function=_text(c["function"]), device=_text(c["device"]), line=_count(c.get("line", 0)),
                    calls=_count(c.get("calls", 1)),
                    ops=tuple(CompiledOp(node=_text(o["node"]), op=_optional_text(o.get("op")),
                                         requested=_optional_text(o.get("requested")), moved=o.get("moved") is True)
                              for o in c.get("ops") or ()))


def _exited(code: Any) -> str | None:
    """A saved trace report's exit code, as the run error of a program that did not end well."""
    return f"exit code {code}" if isinstance(code, int) and not isinstance(code, bool) and code != 0 else None


def knows_requests(report: Report) -> bool:
    """Whether the report says what each placement asked for (a run's, or a saved run report), which
    a bare log never does: the few requests a log's ignored-request lines give do not make it one."""
    told = {r.node for r in report.ignored if r.cause == "reference_input"}
    return any(p.status != LOGGED and p.node not in told for p in report.placements)


def record_fields(record: bytes) -> tuple[str, str | None, str]:
    """A tallied placer record (``node: (Op): device``, or the guide era's ``node: device``) as its
    node, op (None in the guide era's) and device as printed. A node name holds no ": "."""
    node, _sep, rest = record.partition(b": ")
    if rest.startswith(b"("):
        op, _sep, device = rest[1:].partition(b"): ")
        return node.decode("utf-8", "replace"), op.decode("utf-8", "replace"), device.decode("utf-8", "replace")
    return node.decode("utf-8", "replace"), None, rest.decode("utf-8", "replace")
