"""Running a lesson's graph with fds captured, then parsing and explaining what it placed."""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from placement_cli.devices import DeviceName, device_name
from placement_cli.i18n import Wording
from placement_cli.logparse import glog, parse_text
from placement_cli.logparse.causes import cause, essential, headline
from placement_cli.model import Copy, Origin, PlacementFailure, Report
from placement_cli.model.facts import Facts, Span
from placement_cli.model.kinds import FailureKind
from placement_cli.runtime import private, startup
from placement_cli.runtime.capture.fdcapture import capture_fds
from placement_cli.runtime.capture.fds import flush_c_stdio
from placement_cli.runtime.events import write_events
from placement_cli.runtime.facts import GraphRecorder, kernel_checks, kernel_map
from placement_cli.runtime.startup import RunOptions, available_devices
from placement_cli.runtime.stepstats import metadata_run, traced_run
from placement_cli.why import explain

if TYPE_CHECKING:
    from placement_cli.model.cost import Profile

# Written into the captured stream around eager code, then taken out of the log: the lines between
# two marks are what that code made TensorFlow write. Random, so no log line can look like one.
_MARK = f"placement-span-mark-{secrets.token_hex(8)}"


@dataclass
class Trial:
    """What one run produced before parsing: requests, result, error text."""

    graph: Any = None  # graph mode: the graph that ran (requests are read from it)
    groups: dict[str, Wording] = field(default_factory=dict)  # node -> group label (tower)
    spans: list[tuple[str | None, Wording | None, bool]] = field(default_factory=list)  # (request, group, calls_function)
    copies: list[Copy] | None = None
    executed: tuple[tuple[str, int], ...] | None = None  # --copies: op types the traced run executed
    metadata: Any = None  # --copies, --tensorboard: the traced run's RunMetadata (step stats)
    profile: Profile | None = None  # --time: the measured steps, as TensorFlow's profiler saw them
    timing_error: str | None = None  # --time: why no profile came
    result: Any = None
    error: str | None = None  # TensorFlow's message, as raised
    error_class: str | None = None
    error_node: str | None = None  # the op TensorFlow named in the error, when it named one
    error_device: str | None = None  # that op's request
    available: tuple[str, ...] = ()
    timing: bool = False  # --time: the step runs again; its spans were recorded by its first run

    @contextmanager
    def span(self, requested: str | None, group: Wording | None = None, calls_function: bool = False) -> Iterator[None]:
        """Eager code run under ``requested``: every line TensorFlow writes meanwhile is attributed to it."""
        if self.timing:
            yield
            return
        self.spans.append((requested, group, calls_function))
        _mark()
        try:
            yield
        finally:
            _mark()

    def failed(self, exc: Exception) -> None:
        """Keep what TensorFlow raised instead of a result."""
        self.error_class = type(exc).__name__
        self.error = getattr(exc, "message", None) or str(exc) or self.error_class
        op = getattr(exc, "op", None)  # OpError.op: the graph op that failed, when TensorFlow knows it
        if op is not None and isinstance(getattr(op, "name", None), str):
            self.error_node = op.name
            self.error_device = getattr(op, "device", None) or None


def _mark() -> None:
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    flush_c_stdio()  # TensorFlow's printf copies wait in libc's stdout buffer: they belong before the mark
    os.write(2, f"{_MARK}\n".encode())


def split_marks(text: str) -> tuple[str, list[int]]:
    """The log without the marks, and how many of its lines came before each mark."""
    if _MARK not in text:
        return text, []
    lines: list[str] = []
    marks: list[int] = []
    for line in text.split("\n"):
        marked = False
        while (at := line.find(_MARK)) >= 0:
            if line[:at]:  # a line TensorFlow had not finished: it stays a line of its own
                lines.append(line[:at])
            marks.append(len(lines))
            line, marked = line[at + len(_MARK):], True
        if line or not marked:
            lines.append(line)
    return "\n".join(lines), marks


def spans_of(trial: Trial, marks: list[int]) -> tuple[Span, ...]:
    """Each eager span's lines, from the marks written at its start and end."""
    found = []
    for i, (requested, group, calls_function) in enumerate(trial.spans):
        if 2 * i + 1 < len(marks):
            found.append(Span(marks[2 * i] + 1, marks[2 * i + 1], device_name(requested), group, calls_function))
    return tuple(found)


def run_session(tf: Any, sess: Any, fetch: Any, options: RunOptions, trial: Trial) -> Any:
    """sess.run, traced when the copies between devices or TensorBoard's step stats are wanted; then
    run again and timed with --time."""
    value = run_traced_step(tf, sess, fetch, None, options, trial)
    if options.time:
        time_steps(tf, lambda: sess.run(fetch), options, trial, lambda: [sess.graph])
    return value


def run_traced_step(tf: Any, sess: Any, fetch: Any, feed: Any, options: RunOptions, trial: Trial) -> Any:
    """One sess.run: with --copies, traced and its copies kept; with --tensorboard, traced and its
    RunMetadata kept; else plain."""
    if options.copies:
        traced = traced_run(tf, sess, fetch, feed, virtual_gpus=bool(options.virtual_gpus))
        trial.copies, trial.executed, trial.metadata = traced.copies, traced.executed, traced.metadata
        value = traced.value
    elif options.tensorboard:
        value, trial.metadata = metadata_run(tf, sess, fetch, feed)
    else:
        value = sess.run(fetch, feed)
    return value


def time_steps(tf: Any, step: Any, options: RunOptions, trial: Trial, graphs: Any) -> None:
    """--time: ``step`` run again, measured (the first run logged the placements)."""
    from placement_cli.runtime.timing import graph_sizes, timed_steps  # noqa: PLC0415 - start-up: a timed run's

    trial.timing = True
    try:
        trial.profile, trial.timing_error = timed_steps(tf, step, steps=options.time_steps, warmup=options.warmup,
                                                        sizes=graph_sizes(tf, graphs))
    finally:
        trial.timing = False


def run_captured(build: Any, options: RunOptions, title: Wording) -> Report:
    """Run ``build(tf, options) -> Trial`` with fds 1/2 captured, then parse and explain.

    A run that does not produce its result always fails loudly: TensorFlow's own message is
    kept whether or not the parser knows its wording."""
    private.forget()
    recorder = GraphRecorder()
    with capture_fds() as cap:
        tf = startup.tensorflow(options)  # through the module: a test's batch replaces it
        undo = recorder.install()
        try:
            trial = build(tf, options)
        finally:
            undo()
        trial.available = available_devices(tf)
    if trial.graph is not None:
        recorder.add(trial.graph)
    log, marks = split_marks(cap.text)
    if options.time:  # what the profiler said of itself is placement's doing, not the program's
        log = glog.without_profiler_lines(log)
    report = parse_text(log + ("\n" + trial.error if trial.error else ""))
    placements = explain(report.placements, facts_of(recorder, trial, spans_of(trial, marks)))
    copies = None if trial.copies is None else tuple(trial.copies)
    cost = None
    if trial.profile is not None:
        from placement_cli import costs  # noqa: PLC0415 - start-up: only a timed run needs it

        cost = costs.build(trial.profile, placements, copies, virtual_gpus=bool(options.virtual_gpus))
    errors, run_error = outcome(report.errors, trial, log)
    # a graph that never ran carries only the devices it asked for: no event file draws them as placements
    if options.tensorboard and trial.graph is not None and trial.result is not None:
        write_events(tf, trial.graph, placements, trial.metadata, options.tensorboard)
    return replace(report, placements=placements, errors=errors, title=title, result=trial.result, log=log,
                   copies=copies, run_error=run_error, incomplete=private.missing_facts(), executed=trial.executed,
                   edges=recorder.edges(), origin=Origin.RUN, cost=cost, timing_error=trial.timing_error)


def outcome(parsed: tuple[PlacementFailure, ...], trial: Trial,
            log: str | None = None) -> tuple[tuple[PlacementFailure, ...], str | None]:
    """The errors to show, and what stopped the run: a run without its result always has an
    error, in TensorFlow's own words when the parser does not know them, with its cause line (and
    the log's GPU line where the error names none)."""
    if trial.result is not None:
        return parsed, None
    message = essential(trial.error) if trial.error else "the run produced no result"
    run_error = f"{trial.error_class or 'Error'}: {message}"
    if parsed:
        return parsed, run_error
    return (PlacementFailure(kind=FailureKind.RUN_FAILED, node=trial.error_node, requested_device=device_name(trial.error_device),
                             message=message, available_devices=tuple(map(DeviceName, trial.available)),
                             cause=cause(trial.error or "", log), headline=headline(message)),), run_error


def plain(value: Any) -> Any:
    """A fetched value as JSON holds it: nested lists, a string tensor's bytes as text."""
    value = value.tolist() if hasattr(value, "tolist") else value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return [plain(v) for v in value] if isinstance(value, list) else value


def facts_of(recorder: GraphRecorder, trial: Trial, spans: tuple[Span, ...] = ()) -> Facts:
    """What the run's graphs asked for, with the devices and kernels there were. When a tf.function
    graph could not be recorded, a node with no facts may have asked for anything: unknown."""
    kernels = kernel_map()
    known = recorder.functions_recorded
    return Facts(nodes=recorder.nodes(kernels, kernel_checks(trial.available), trial.groups), available=trial.available,
                 kernels=kernels, spans=spans, complete=known, graphs_known=known)
