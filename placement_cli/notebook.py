"""A Python API for notebooks and scripts: ``with placement_cli.capture() as report: ...``."""

from __future__ import annotations

import io
import sys
import threading
import warnings
from dataclasses import replace
from types import TracebackType
from typing import Any, Literal, cast

from rich.console import Console, Group
from rich.panel import Panel
from rich.text import Text

from placement_cli import logparse
from placement_cli.messages import parseable
from placement_cli.model import Origin, Placement, Report
from placement_cli.model.facts import Facts
from placement_cli.model.kinds import PlacementKind
from placement_cli.render.json import dumps
from placement_cli.render.table import Hints, View, clean, report_renderables
from placement_cli.rules import assert_holds
from placement_cli.runtime import private
from placement_cli.runtime.capture import fdcapture, pystreams
from placement_cli.runtime.facts import placed_before
from placement_cli.runtime.trace.recording import Recorder
from placement_cli.runtime.trace.timed import Timing, timing_settings
from placement_cli.tfrules import compiled_calls
from placement_cli.why import explain, facts_from_dict, xla_lines

_WIDTH = 120
# A fragment for a notebook cell: inline styles only, nothing that restyles the page around it.
_HTML_FRAGMENT = ('<pre style="white-space:pre;overflow-x:auto;line-height:normal;'
                  "font-family:Menlo,'DejaVu Sans Mono',consolas,'Courier New',monospace\">{code}</pre>")


class CaptureWarning(UserWarning):
    """capture() could not see everything TensorFlow placed inside the block."""


# Shown every time, not once per line of code: a re-run cell that captured nothing must say so again.
warnings.filterwarnings("always", category=CaptureWarning, append=True)

# Blocks entered and not yet ended, in every thread: TensorFlow's log and fds 1/2 are the process's,
# so blocks of two threads that overlap cannot tell their ops apart.
_OPEN_BLOCKS: list[_Block] = []
_OPEN_LOCK = threading.Lock()
# Set once TensorFlow's context started with placement logging on: it then logs for the whole process.
_STAYS_ON = False
# What a block whose eager ops went unlogged tells the user to do (the pytest plugin tells its own).
FIRST_OP_ADVICE = "Enter capture() before TensorFlow's first op (in a notebook: restart the kernel and run it first)"


class CapturedReport:
    """Empty inside the ``with`` block; the parsed placement log once it ends.

    ``complete`` is False when capture() could not see what TensorFlow placed (``problems`` says why);
    ``notes`` says what stays changed in this process."""

    def __init__(self) -> None:
        self.report = Report(origin=Origin.RUN)
        self.problems: tuple[str, ...] = ()
        self.notes: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        return not self.problems

    @property
    def placements(self) -> tuple[Placement, ...]:
        return self.report.placements

    @property
    def errors(self) -> tuple[Any, ...]:
        return self.report.errors

    @property
    def by_device(self) -> dict[str, int]:
        return {str(device): n for device, n in self.report.by_device.items()}

    @property
    def log(self) -> str:
        return self.report.log or ""

    def to_dict(self) -> dict[str, Any]:
        data = self.report.to_dict()
        data["capture"] = {"complete": self.complete, "problems": list(self.problems), "notes": list(self.notes)}
        return data

    def check(self, *, max_on: Any = None, expect: Any = None, no_fallback: bool = False,
              max_copy_bytes: int | None = None, ignore: Any = None, ignore_op: Any = None,
              include_plumbing: bool = False, allow_placement_errors: bool = False, max_copy_time: str | None = None,
              max_busy: Any = None) -> Any:
        """The rules of `placement check` against this report (``max_on={"CPU": 0}``,
        ``expect={"^tower_0/": "GPU:0"}``, ``no_fallback=True``, ``max_copy_bytes=N``, with time=True
        ``max_copy_time="2ms"`` and ``max_busy={"CPU": 10}``, ``ignore``, ``ignore_op``; placement errors
        fail it unless ``allow_placement_errors``): AssertionError naming each rule that failed and its nodes (also when the
        capture was incomplete: rules judged on part of the placements prove nothing); ValueError
        for a rule that is malformed or that this report cannot judge. Returns the CheckResult."""

        __tracebackhide__ = True  # pytest shows the test's line, not this one
        if self.problems:
            raise AssertionError("placement check: the capture is incomplete, so no rule can be judged: "
                                 + "; ".join(self.problems))
        return assert_holds(self.report, name="the captured report", max_on=max_on, expect=expect,
                            no_fallback=no_fallback, max_copy_bytes=max_copy_bytes, ignore=ignore,
                            ignore_op=ignore_op, include_plumbing=include_plumbing,
                            allow_placement_errors=allow_placement_errors, max_copy_time=max_copy_time,
                            max_busy=max_busy)

    def to_json(self) -> str:
        return dumps(self.to_dict())

    def renderables(self) -> list[Any]:
        """What the report shows, in reading order, with the notebook API's names where the CLI's
        renderer would name its own options."""


        parts: list[Any] = []
        if self.problems:
            body = Text("\n".join(f"- {clean(p)}" for p in self.problems))
            parts.append(Panel(body, title="Capture incomplete", title_align="left", border_style="red"))
        # hints say how to fix the program, and pointers name the API, not the CLI's options
        parts.extend(report_renderables(self.report, view=View(api=True, hints=Hints(source="program"))))
        if not self.report.placements and not self.report.errors and self.complete:
            parts.append(Text("No placements were logged inside the block."))
        parts.extend(Text(clean(note), style="dim") for note in self.notes)
        return parts

    def __rich__(self) -> Any:
        return Group(*self.renderables())

    def _render(self, html: bool) -> str:

        # force_jupyter=False: inside Jupyter rich would display the report itself, a second time.
        console = Console(file=io.StringIO(), width=_WIDTH, record=html, force_jupyter=False, emoji=False,
                          force_terminal=html, color_system="truecolor" if html else None, legacy_windows=False)
        console.print(self.__rich__())
        if html:
            return console.export_html(inline_styles=True, code_format=_HTML_FRAGMENT)
        return cast(io.StringIO, console.file).getvalue()  # the StringIO it was made with

    def _repr_html_(self) -> str:
        return self._render(html=True)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        """One rendering per display: IPython shows the HTML where it can, the text elsewhere."""
        return {"text/plain": self._render(html=False), "text/html": self._render(html=True)}

    def __str__(self) -> str:
        return self._render(html=False)

    def __repr__(self) -> str:
        state = "" if self.complete else ", INCOMPLETE"
        return (f"<placement report: {self.report.placement_count} placements, "
                f"{len(self.report.errors)} errors{state}>")


def capture(enable_logging: bool = True, *, time: bool = False, warmup: int = 2, steps: int = 10) -> Capture:
    """Capture TensorFlow's placement log for the code inside the block, then parse it and say why
    ops sit where they do. Enter it before TensorFlow runs its first op (see docs/capture.md).
    ``time=True``: TensorFlow's profiler runs in the block too: what each device, op, copy and placement
    costs per call of its most called tf.function, the first ``warmup`` calls left out, at most ``steps``
    measured (``report.cost``)."""
    return Capture(enable_logging, time=time, timed=timing_settings(warmup, steps))


class Capture:
    """The context manager. Each ``with`` gets its own block and a new report, also when the same
    object is entered again inside its own block (a nested capture) or after it. Never raises at
    the end of a block it entered, so the block's own exception always propagates."""

    def __init__(self, enable_logging: bool, advice: str = FIRST_OP_ADVICE, *, time: bool = False,
                 timed: tuple[int, int] = (2, 10)) -> None:
        self.enable_logging = enable_logging
        self.advice = advice
        self.time, self.timed = time, timed
        self._blocks: list[_Block] = []  # entered and not yet exited, innermost last

    def __enter__(self) -> CapturedReport:
        block = _Block(self.enable_logging, self.advice, timed=self.timed if self.time else None)
        block.enter()
        self._blocks.append(block)
        return block.result

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> Literal[False]:
        if not self._blocks:
            raise RuntimeError("placement_cli.capture(): __exit__ without a matching __enter__")
        block = self._blocks.pop()
        block.exit(exc)
        if block.result.problems:
            warnings.warn("placement_cli.capture(): " + " ".join(block.result.problems), CaptureWarning, stacklevel=2)
        return False


class _Block:
    """One ``with`` block of a capture: what it changed, and its report."""

    def __init__(self, enable_logging: bool, advice: str = FIRST_OP_ADVICE, timed: tuple[int, int] | None = None) -> None:
        self.enable_logging = enable_logging
        self.advice = advice
        self.timed = timed  # time=True: calls of the step left out, the most steps measured
        self.timing: Timing | None = None
        self.result = CapturedReport()
        self.streams = pystreams.Streams()
        self.recorder: Any = None
        self.undo: Any = None
        self.started: bool | None = None
        self.thread = threading.get_ident()
        self.shared = False  # a block of another thread was open while this one was

    def enter(self) -> None:
        with _OPEN_LOCK:
            for other in _OPEN_BLOCKS:
                if other.thread != self.thread:
                    other.shared = self.shared = True
            _OPEN_BLOCKS.append(self)
        try:
            self._enter()
        except BaseException:
            with _OPEN_LOCK:
                _OPEN_BLOCKS.remove(self)
            raise

    def _enter(self) -> None:
        pystreams.tf_log_level()  # before the program can change it inside a block
        tf = _tensorflow()
        self.started = private.context_initialized()  # before the block: TF ignores logging switched on later
        with fdcapture.interrupts_deferred():  # all of it or nothing
            try:
                self.streams.start()
                if self.enable_logging:
                    self.recorder = Recorder(tf, copies=False)
                    self.undo = self.recorder.install()
                if self.timed is not None:  # last: the profiler sees the block, not placement's own set-up
                    recorder = self.recorder
                    self.timing = Timing(tf, *self.timed, lambda: list(recorder.graphs.graphs.values()) if recorder else [])
                    self.timing.start(recorder)
            except BaseException:
                self._restore([])
                raise

    def exit(self, exc: BaseException | None) -> None:
        with _OPEN_LOCK:
            if self in _OPEN_BLOCKS:
                _OPEN_BLOCKS.remove(self)
        problems: list[str] = []
        if self.shared:
            problems.append("capture() ran in another thread at the same time: TensorFlow's placement log (and what "
                            "the program writes to fds 1 and 2) belongs to the whole process, so this report cannot "
                            "tell this thread's ops from the other's: it may hold ops of the other thread and miss "
                            "some of its own. Capture one thread at a time.")
        taken = fdcapture.Separated()
        if self.timing is not None:  # first: the profiler stops where the block's code did
            try:
                self.timing.finish()
            except Exception as error:  # noqa: BLE001 - the block's outcome is the user's
                self.timing.error = _why(error)
        try:
            with fdcapture.interrupts_deferred():  # Ctrl-C lands once everything is back in place
                self._restore(problems)
        finally:  # the program's output reaches the user even then
            try:
                taken = self.streams.hand_on(self._known_nodes())
            except Exception as error:  # noqa: BLE001 - the block's outcome is the user's; ours is a report line
                problems.append(f"could not read what was written: {_why(error)}")
        try:
            self._build(taken, exc, problems)
        except Exception as error:  # noqa: BLE001
            log = _text(taken.log.get(1, b"")) + _text(taken.log.get(2, b""))
            self.result.report = Report(log=log, origin=Origin.RUN)
            self.result.problems = (*problems, f"the report could not be built: {_why(error)}")

    def _known_nodes(self) -> frozenset[tuple[str, str]]:
        """(name, op type as the placer logs it) of every graph the block's recorder kept."""
        if self.recorder is None:
            return frozenset()
        found: set[tuple[str, str]] = set()
        try:
            for graph in list(self.recorder.graphs.graphs.values()):
                for op in graph.get_operations():
                    found.add((op.name, op.type))
                    if op.type == "Placeholder":  # a function's argument
                        found.add((op.name, "_Arg"))
        except Exception:  # noqa: BLE001 - without names, such lines stay the program's (and the report says so)
            return frozenset()
        return frozenset(found)

    def _restore(self, problems: list[str]) -> None:
        """Undo the patches and put the streams back, each whatever the other did."""
        try:
            if self.undo is not None:
                undo, self.undo = self.undo, None
                undo()
        except Exception as error:  # noqa: BLE001
            problems.append(f"could not undo its TensorFlow patches: {_why(error)}")
        finally:
            try:
                self.streams.restore()
            except Exception as error:  # noqa: BLE001
                problems.append(f"could not read what was written: {_why(error)}")

    def _build(self, taken: fdcapture.Separated, exc: BaseException | None, problems: list[str]) -> None:
        notes: list[str] = []
        report = _parse(taken, exc)
        facts = Facts()
        if self.recorder is not None:
            try:
                facts = facts_from_dict(self.recorder.facts())
                notes.extend(f"Requests and reasons that need it are unknown: {missing}." for missing in facts.missing)
            except Exception as error:  # noqa: BLE001 - placements stand without their reasons
                notes.append(f"Requests and reasons are unknown: reading the graphs failed ({_why(error)}).")
            if self.recorder.kept_on:
                notes.append("The program switched placement logging off inside the block "
                             "(tf.debugging.set_log_device_placement(False)): capture() kept it on until the block "
                             "ended, so the report is whole; the program's setting holds from then on.")
            elif self.recorder.switched_off:
                problems.append("The program switched placement logging off inside the block "
                                "(tf.debugging.set_log_device_placement(False)): what it placed after that may be "
                                "missing from the report.")
        placements = explain(report.placements, facts)
        compiled = compiled_calls(placements, facts.compiled, xla_lines(report.placements, facts))
        report = replace(report, placements=placements, compiled=compiled, origin=Origin.RUN)
        if self.timing is not None:
            report = self.timing.report(report, notes)
        traced = _traced()
        if traced:
            problems.append("This program runs under `placement trace`, which takes TensorFlow's log itself: "
                            "capture() cannot see what the block placed. The trace's report has these placements.")
        if taken.unsure:
            problems.append(f"{taken.unsure} line(s) on stdout end like TensorFlow's placement line written right "
                            "after the program's own unfinished line, and with TensorFlow's INFO lines hidden "
                            "(TF_CPP_MIN_LOG_LEVEL) there is no copy on stderr to say where it starts: they were "
                            "left in the output as written and not counted.")
        self._note_logging_stays_on()
        if not traced:  # under trace, the reason is said above
            problems.extend(self._logging_problems(report))
            problems.extend(_functions_placed_before(report))
        notes.extend(self._logging_notes())
        self.result.report = report
        self.result.problems = tuple(problems)
        self.result.notes = tuple(notes)

    def _logging_problems(self, report: Report) -> list[str]:
        """Whether TensorFlow logged eager placements at all: the gotcha, or a log level that hides them."""

        if any(p.kind == PlacementKind.EAGER for p in report.placements) or not self.enable_logging:
            return []
        logged = _eager_ops_logged(self.recorder.tf)
        if logged is None and self.started is None:
            why = private.unavailable().get("context_initialized", "a private API is missing")
            return [("No eager placements were logged, and whether TensorFlow had started before capture() cannot "
                    f"be told ({why}): if it had, eager ops and tf.functions inside the block are missing.")]
        if logged is not False:
            return []
        level = pystreams.tf_log_level()
        hidden = (f"TF_CPP_MIN_LOG_LEVEL={level} hides TensorFlow's INFO lines, eager placements among them "
                  "(set it to 0 before importing TensorFlow)") if level not in ("", "0") else ""
        if self.started and not _STAYS_ON:
            return ["Eager ops and tf.functions inside the block were not logged (tf.compat.v1.Sessions were): "
                    "TensorFlow had already run an op before capture() began, and it ignores placement logging "
                    "switched on after that. " + self.advice + (f"; also, {hidden}." if hidden else ".")]
        return [f"Eager ops inside the block were not logged: {hidden or 'TensorFlow hid its INFO lines'}."]

    def _note_logging_stays_on(self) -> None:
        """TensorFlow's context started inside this block with our logging on: it logs from now on."""

        global _STAYS_ON  # noqa: PLW0603 - a fact about the whole process
        if self.recorder is not None and not self.recorder.previous_logging and self.started is False \
                and private.context_initialized():
            _STAYS_ON = True
            pystreams.quiet_notebook_streams()

    def _logging_notes(self) -> list[str]:
        notes = []
        if _STAYS_ON and pystreams.QUIETED:
            notes.append("Placement logging stays on in this process (TensorFlow started inside a capture() with it "
                         "on and cannot switch it off again); its placement lines outside capture() are kept out of "
                         "this notebook's cells (the kernel's own terminal still gets them).")
        elif _STAYS_ON:
            notes.append("Placement logging stays on in this process: TensorFlow started inside a capture() with it "
                         "on and cannot switch it off again, so later eager ops and new tf.functions print "
                         "placement lines outside capture() too (tf.compat.v1.Sessions do not). Restart Python (the "
                         "notebook's kernel) to stop them.")
        return notes


def _functions_placed_before(report: Report) -> list[str]:
    """The block called tf.functions whose bodies TensorFlow placed before it began (it logs a function's
    placements once, as it first places it): their ops are missing, the capture is incomplete."""

    calls = [p.op for p in report.placements if p.kind == PlacementKind.EAGER and p.op]
    logged = [(p.node, p.op) for p in report.placements if p.kind != PlacementKind.EAGER and p.node and p.op]
    try:
        found = placed_before(calls, logged) if calls else []
    except Exception:  # noqa: BLE001 - the placements stand; whether some are missing stays unsaid
        found = []
    if not found:
        return []
    return [(f"The block called {', '.join(found)}, which TensorFlow had placed before the block began (it logs a "
            "tf.function's placements once, when it first runs it, not at later calls): the ops of its body are "
            "missing from this report. Capture the function's first call (in pytest: a test that calls a tf.function "
            "other tests ran already sees only its call; make the function in the test, or capture where it first "
            "runs).")]


def log_from_the_start(tf: Any) -> bool:
    """Placement logging on before TensorFlow's context starts, for a process where capture() may
    run after other code ran TensorFlow ops (the pytest plugin): TensorFlow then logs every op from
    its first, and capture() sees them whatever ran before. False: too late (the context started)
    or cannot tell; logging is then left as it was."""

    if private.context_initialized() is not False:
        return False
    tf.debugging.set_log_device_placement(True)
    return True


def _tensorflow() -> Any:
    tf = sys.modules.get("tensorflow")
    if tf is None:
        import tensorflow  # noqa: PLC0415

        tf = tensorflow
    return tf


def _why(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def _text(data: bytes) -> str:
    text = data.decode("utf-8", "replace")
    return text if not text or text.endswith("\n") else text + "\n"


def _parse(taken: fdcapture.Separated, exc: BaseException | None) -> Report:
    """Parse TensorFlow's lines of what stdout and stderr received as one log, stdout first, with the
    line numbers of ``report.log``. A stdout copy of the placer's line is parsed only where stderr has
    no twin (a log level that hides glog's INFO lines), and such copies come first, as they were
    printed before the eager op that ran their function. Errors are read from all of it. Bytes that
    are not text are parsed around, never a reason to refuse."""

    out, err = _text(taken.log.get(1, b"")), _text(taken.log.get(2, b""))
    bare = logparse.parse_text(parseable(_text(taken.tensorflow.get(1, b""))))
    glog = logparse.parse_text(parseable(_text(taken.tensorflow.get(2, b""))))
    offset = out.count("\n")
    placements = [*bare.placements, *(replace(p, line=p.line + offset) for p in glog.placements)]
    errors = [*logparse.parse_text(parseable(out)).errors, *logparse.parse_text(parseable(err)).errors]
    if exc is not None:  # a placement error raised in the block is in its message, not in the log
        errors.extend(logparse.parse_text(parseable(_exception_text(exc))).errors)
    mapping = {m.device: m for m in (*bare.device_mapping, *glog.device_mapping)}
    return Report(placements=tuple(placements), device_mapping=tuple(mapping.values()),
                  errors=tuple(dict.fromkeys(errors)), lines=offset + err.count("\n"),
                  mapping_seen=bare.mapping_seen or glog.mapping_seen, log=out + err)


def _traced() -> bool:
    """Whether `placement trace` runs this program with TensorFlow's log on pipes of its own."""
    child = sys.modules.get("placement_cli.runtime.trace.child")
    return bool(child is not None and child.TRACED)


def _exception_text(exc: BaseException) -> str:
    try:
        return f"{type(exc).__name__}: {exc}\n"
    except Exception:  # noqa: BLE001 - an exception whose str() fails says nothing about placement
        return ""





def _eager_ops_logged(tf: Any) -> bool | None:
    """Run one tiny eager op under a capture of its own and see whether TensorFlow logged it (None:
    cannot tell without starting TensorFlow's context, which the program may still want to configure)."""

    if private.context_initialized() is not True:
        return None
    probe = pystreams.Streams(keep=False)
    try:
        with tf.init_scope():
            if not tf.executing_eagerly():
                return None  # TF1-style graph mode: only Sessions place, and they log
            with fdcapture.interrupts_deferred():  # one tiny op: never left holding the fds
                try:
                    probe.start()
                    with tf.device("/cpu:0"):
                        tf.identity(tf.zeros([]))
                finally:
                    probe.restore()
            taken = probe.hand_on()
    except Exception:  # noqa: BLE001 - cannot tell
        return None
    return any(fdcapture.has_eager_line(data) for data in taken.tensorflow.values())

