"""Filters over a report's placements (--device, --op, --node, --top): pure, no TensorFlow."""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from placement_cli.devices import BARE_TYPE, DeviceSpec, named_by, short_device, short_task, try_parse
from placement_cli.exceptions import FilterError
from placement_cli.i18n import _
from placement_cli.logparse import placer
from placement_cli.logparse.records import Repeats
from placement_cli.messages import quoted
from placement_cli.model import Placement, Report
from placement_cli.model.filtered import Filtered, Filters
from placement_cli.model.kinds import PlacementKind

# oneDNN renames ops on CPUs (MatMul -> _MklMatMul, Conv2D -> _MklNativeConv2D): --op names the op either way.
_ONEDNN_PREFIXES = ("", "_mkl", "_mklnative")
_OP_TYPE = re.compile(placer.OP.decode())  # an op type as the parser reads one
OPTION_LIKE = re.compile(r"--?[A-Za-z]")  # a value that is an option the user meant as one


class NodePattern(Protocol):
    def search(self, text: str) -> object: ...


_RE2_LACKS = ("no backreferences, lookaround, atomic groups, possessive repeats or Python's \\Z, and repeats "
              "at most 1000 times")


def compile_node(pattern: str, option: str = "--node") -> NodePattern:
    """The --node regex (or ``option``'s: check's --expect and --ignore), case-insensitive like the
    other filters; FilterError if empty or malformed. Python's syntax, matched by RE2 in time linear
    in the name, so no pattern can make a filter spin on TensorFlow's long names ("(\\w+/?)+Z$"):
    what only a backtracking matcher does is refused with a message saying so. Where Python and RE2
    read one pattern two ways (``[[:alpha:]]``: RE2's POSIX class, Python's set), RE2's reading is
    the one matched."""
    shown = quoted(pattern)
    if not pattern.strip():
        raise FilterError(f"{option}: give a regex that node names are searched for, e.g. ^tower_0/ or MatMul")
    if OPTION_LIKE.match(pattern):  # ``--node --all``: the regex was left out (check's --ignore refuses it alike)
        raise FilterError(_("{option} {value}: looks like an option, not a regex (was the regex left out? "
                            "write a regex that starts with - as [-]...)").format(option=option, value=shown))
    try:
        pattern.encode("utf-8")
    except UnicodeEncodeError:  # bytes that are not UTF-8 in argv come as lone surrogates
        raise FilterError(f"{option} {shown}: not valid text (bytes that are not UTF-8)") from None
    try:
        with warnings.catch_warnings():  # "possible nested set": RE2's reading is the one used
            warnings.simplefilter("ignore")
            re.compile(pattern)
    except (re.error, OverflowError, RecursionError, MemoryError, ValueError) as exc:
        # re raises more than re.error: OverflowError (a{99999999999}), RecursionError (deep nesting)
        raise FilterError(f"{option} {shown} is not a regex: {exc or type(exc).__name__}") from None
    import re2  # noqa: PLC0415 - only where a regex is given

    options = re2.Options()
    options.case_sensitive = False
    options.log_errors = False  # its own log would go to stderr
    try:
        return _Utf8Search(re2.compile(pattern, options))
    except re2.error as exc:
        why = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise FilterError(f"{option} {shown}: {why} ({option} is matched in linear time, by RE2: "
                          f"{_RE2_LACKS})") from None


@dataclass(frozen=True)
class _Utf8Search:
    """RE2 reads UTF-8: a name holding a lone surrogate is searched with it replaced, never an error."""

    compiled: Any

    def search(self, text: str) -> object:
        try:
            return self.compiled.search(text)
        except UnicodeEncodeError:
            return self.compiled.search(text.encode("utf-8", "replace").decode("utf-8"))


def check_op(value: str) -> None:
    """FilterError for an --op that is empty or that no op could ever be (an op type as the
    parser reads one: [A-Za-z0-9_<>]+), so a typo is a usage error, not an empty table."""
    want = value.strip()
    if not want:
        raise FilterError("--op: give an op type, e.g. MatMul or AddN")
    if not _OP_TYPE.fullmatch(want):
        raise FilterError(f"--op {quoted(value)} is not an op type: letters, digits, _ and <> only "
                          "(e.g. MatMul, AddN, _Recv)")


def device_matcher(value: str) -> Callable[[DeviceSpec], bool]:
    """A test for placements' devices: a bare type (``gpu``), any device spelling TensorFlow accepts
    (``GPU:1``, ``/job:ps``, ``/device:CPU:0``), or a short name as tables print it (``ps/0 CPU:0``)."""
    want = " ".join(value.split())
    upper = want.upper()
    if BARE_TYPE.fullmatch(want):
        return lambda spec: (spec.device_type or "").upper() == upper
    task = short_task(want)
    if task is not None:  # ps/0 (every device of that task), ps/0 CPU:0; localhost/0 too, which tables leave out
        return lambda got: _fold(task).satisfied_by(_fold(got))
    spec = try_parse(want) or short_device(want)
    if spec is not None:
        folded = _fold(spec)
        return lambda got: folded.satisfied_by(_fold(got)) or got.short.upper() == upper
    return lambda got: got.short.upper() == upper


def narrows(kind: str, given: str, saved: str) -> bool:
    """Whether the filter ``--KIND given`` keeps no placement that ``--KIND saved`` leaves out (a report saved
    narrowed by ``saved`` narrowed again by ``given`` then holds what ``given`` alone says). Devices by what
    they name (``CPU:1`` within ``CPU``, ``ps/0 CPU:0`` within ``/job:ps``); ops and regexes only when equal."""
    if " ".join(given.split()).upper() == " ".join(saved.split()).upper():
        return True
    if kind != "device":
        return False
    mine, theirs = named_by(given), named_by(saved)
    if mine is None or theirs is None:
        return False
    fields = ("job", "replica", "task", "device_type", "device_index")
    for field in fields:
        want = getattr(theirs, field)
        if want is None:
            continue
        got = getattr(mine, field)
        if got is None or str(got).upper() != str(want).upper():
            return False
    return True


def widened(said: dict[str, Any], filters: Filters) -> tuple[str, str, str] | None:
    """The first filter given again that ``narrows`` not the one a report was saved narrowed by (``--device
    CPU`` on a report saved with ``--device CPU:1``), as (kind, given, saved); None where none does."""
    for kind in ("device", "op", "node"):
        given, saved = getattr(filters, kind), said.get(kind)
        if given is not None and saved is not None and not narrows(kind, str(given), str(saved)):
            return kind, str(given), str(saved)
    return None


def check_device(value: str) -> None:
    """FilterError for a --device that no placement could ever match (not a type, a device or a
    table's short name), so a typo is a usage error, not an empty table."""
    want = " ".join(value.split())
    if not want:
        raise FilterError("--device: give a device type or a device, e.g. GPU, CPU:0, /job:ps or ps/0")
    if named_by(want) is not None:
        return
    raise FilterError(f"--device {quoted(want)} is not a device: give a type (GPU), a device (CPU:0, /gpu:1, "
                      "/job:ps/task:0) or a task as the tables name it (ps/0, ps/0 CPU:0)")


def _fold(spec: DeviceSpec) -> DeviceSpec:
    return replace(spec, job=spec.job.lower()) if spec.job else spec


def op_matcher(value: str) -> Callable[[str | None], bool]:
    names = {prefix + value.strip().lower() for prefix in _ONEDNN_PREFIXES}
    return lambda op: op is not None and op.lower() in names


def apply(report: Report, filters: Filters, *, hide_plumbing: bool = True) -> Filtered:
    """The placements matching every filter. ``hide_plumbing``: tables do not show TensorFlow's
    plumbing (run reports), so --top does not count it and, with --top, it is left out."""
    total = report.placement_count if report.counted is not None else len(report.placements)
    if not filters.active:
        return Filtered(report, filters, total)
    report = _sessions_numbered(report)
    placements: list[Placement] = list(report.placements)
    if filters.device:
        matches = device_matcher(filters.device)
        wanted = {p.canonical for p in {p.canonical: p for p in placements}.values() if matches(p.spec)}
        placements = [p for p in placements if p.canonical in wanted]  # one test per device, not per row
    if filters.op:
        is_op = op_matcher(filters.op)
        placements = [p for p in placements if is_op(p.op)]
    if filters.node:
        pattern = compile_node(filters.node)
        placements = [p for p in placements if p.node and pattern.search(p.node)]
    if filters.top is not None:
        if hide_plumbing:
            placements = [p for p in placements if not p.plumbing]
        placements = placements[: filters.top]
    return Filtered(replace(report, placements=tuple(placements), counted=None), filters, total)


def _sessions_numbered(report: Report) -> Report:
    """The report with each Session's node placed again on its task named by its order (graph ``#2``, as
    diff names it), before filters leave out the placements that order was counted over; as it was where
    that order means nothing (a run that executed eager ops: see records.number_repeats) or is lost
    already (narrowed before)."""
    if report.sessions_numbered or report.saved_filters or report.counted is not None \
            or any(p.kind == PlacementKind.EAGER for p in report.placements):
        return report
    repeats = Repeats()
    numbered = []
    for p in report.placements:
        if p.node is not None and not p.graph:
            graph = repeats.graph(p.node, p.canonical)
            if graph:
                p = replace(p, graph=graph.decode())
        numbered.append(p)
    return replace(report, placements=tuple(numbered), sessions_numbered=True)


def filtered(report: Report, device: str | None, op: str | None, node: str | None, top: int | None) -> Report:
    """The run report narrowed by the filters given (the signature ``trace`` has always called)."""
    return apply(report, Filters(device, op, node, top)).report
