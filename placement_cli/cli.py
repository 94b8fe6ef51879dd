"""Thin typer commands, and the one place errors become exit codes."""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum, IntEnum
from typing import Annotated, Any, TypeVar

import typer

from placement_cli import __version__
from placement_cli.caps import LESSON_DEVICES, MAX_CPUS, MAX_VIRTUAL_GPUS
from placement_cli.i18n import N_, _, translated

app = typer.Typer(
    name="placement",
    help="See where TensorFlow places every op, and why.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: rich help costs 2x the start-up time
    context_settings={"help_option_names": ["-h", "--help"]},
)


class ExitCode(IntEnum):
    OK = 0
    PLACEMENT_FAILED = 1  # TensorFlow could not place the graph, or a run did not produce its result
    USAGE = 2  # bad usage or unreadable input
    INTERNAL = 3  # a bug in placement itself; --traceback shows it
    HUNG_UP = 129  # SIGHUP (the terminal closed), as shells count it
    INTERRUPTED = 130  # Ctrl-C (SIGINT), as shells count it
    TERMINATED = 143  # SIGTERM (kill, a job scheduler), as shells count it


class Mode(str, Enum):
    graph = "graph"
    eager = "eager"


_state: dict[str, Any] = {"traceback": False, "code": 0}  # code: the exit code a command has decided on so far


F = TypeVar("F", bound=Callable[..., Any])


def _option_callback(fn: F) -> F:
    """An option's callback runs while click reads the command line, outside ``guarded``: an
    exception it did not mean (a bug) is an internal error too (exit 3, its traceback behind
    --traceback), never a bare traceback with exit 1."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, typer.BadParameter):
            raise
        except Exception as exc:
            raise _internal(exc) from None

    return wrapper  # type: ignore[return-value]


def _capped(option: str, low: int, high: int, why: str) -> Callable[[int | None], int | None]:
    """A bounded count whose refusal says why the bound is there."""

    @_option_callback
    def check(value: int | None) -> int | None:
        if value is not None and not low <= value <= high:
            raise typer.BadParameter(f"{value} is out of range: {option} takes {low} to {high} ({why})")
        return value

    return check


JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout instead of tables.")]
SoftOpt = Annotated[bool, typer.Option("--soft/--no-soft", help="allow_soft_placement: fall back to an existing device.")]
ModeOpt = Annotated[Mode, typer.Option("--mode", help="graph: tf.compat.v1.Session as in the guide; eager: TF2 APIs.")]
LogOpt = Annotated[bool, typer.Option("--log", help="Also print the raw log TensorFlow wrote.")]
CpusOpt = Annotated[int | None, typer.Option("--cpus", metavar="N", callback=_capped("--cpus", 1, MAX_CPUS, f"logical CPUs /cpu:0../cpu:{MAX_CPUS - 1}"), help="Split the CPU into N logical devices (/cpu:0../cpu:N-1).")]
AllOpt = Annotated[bool, typer.Option("--all", help="Print every row, however many; without it, a report longer than a screen (40 rows when not a terminal) is shown as a digest.")]
CopiesOpt = Annotated[bool, typer.Option("--copies", help="Show the executed graph's _Send/_Recv copies between devices (graph mode; turns off constant folding, grappler's and the older graph optimizer's, so the guide's matmuls really run).")]
VGpusOpt = Annotated[int | None, typer.Option("--virtual-gpus", metavar="N", callback=_capped("--virtual-gpus", 1, MAX_VIRTUAL_GPUS, "logical GPUs carved out of one physical GPU"), help="Split one physical GPU into N logical GPUs.")]


def _checked(check: Callable[[str], object], tidy: Callable[[str], str] = str.strip) -> Callable[[Any], Any]:
    """An option's callback: ``check(value)`` raises a ValueError (DeviceSpecError, FilterError) for
    a value that TensorFlow or placement would refuse, and its words become the usage error (exit 2).
    Checks import their module when called, so --help stays light."""

    @_option_callback
    def callback(value: str | None) -> str | None:
        if value is None:
            return None
        try:
            check(value)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None
        return tidy(value)

    return callback


def _devices_module() -> Any:
    import placement_cli.devices  # noqa: PLC0415

    return placement_cli.devices


def _compile_node(value: str) -> object:
    from placement_cli.filters import compile_node  # noqa: PLC0415

    return compile_node(value)


def _check_device_filter(value: str) -> object:
    from placement_cli.filters import check_device  # noqa: PLC0415

    return check_device(value)


def _check_op_filter(value: str) -> object:
    from placement_cli.filters import check_op  # noqa: PLC0415

    return check_op(value)


_regex_option = _checked(_compile_node, tidy=str)
_device_filter_option = _checked(_check_device_filter)
_op_filter_option = _checked(_check_op_filter)
_device_option = _checked(lambda value: _devices_module().parse_option_device(value))  # strip: as TF reads it
_gpus_option = _checked(lambda value: _devices_module().parse_option_indices(value), tidy=str)
_devices_option = _checked(lambda value: _devices_module().parse_option_devices(value),
                           tidy=lambda value: ",".join(d.strip() for d in value.split(",")))


class Lang(str, Enum):
    en = "en"
    zh = "zh"


@_option_callback
def _lang_option(value: Lang | None) -> Lang | None:
    """Choose the language before anything is rendered; no --lang: the locale's."""
    from placement_cli.i18n import characters, from_locale, use  # noqa: PLC0415
    from placement_cli.render.console import shows  # noqa: PLC0415

    language = value.value if value else from_locale()
    if not shows(sys.stdout, characters(language)):  # ascii, Big5: Chinese would print as "??"
        if value:
            _say(f"--lang {language}: standard output cannot encode it ({sys.stdout.encoding}); English is used")
        language = "en"
    use(language)
    return value


LangOpt = Annotated[Lang | None, typer.Option("--lang", callback=_lang_option, show_default=False, help="Language of tables, statuses, reasons and hints: en or zh (default: the locale's, LC_ALL/LC_MESSAGES/LANG). --json stays English.")]


# Filters of the commands that read a program's placements (parse, trace); every one ignores case.
DeviceFilterOpt = Annotated[str | None, typer.Option("--device", metavar="DEV", callback=_device_filter_option, help="Only placements on DEV: a device type, a device or a task (GPU, CPU:0, /job:ps, ps/0).")]
OpFilterOpt = Annotated[str | None, typer.Option("--op", metavar="OP", callback=_op_filter_option, help="Only placements of op type OP (MatMul also matches oneDNN's _MklMatMul).")]
NodeFilterOpt = Annotated[str | None, typer.Option("--node", metavar="REGEX", callback=_regex_option, help="Only nodes whose name matches REGEX (Python's syntax, matched in linear time: no backreferences or lookaround).")]
TopOpt = Annotated[int | None, typer.Option("--top", min=1, metavar="N", help="Only the first N placements a table shows (TensorFlow's plumbing not counted).")]

# Pictures: the same options on every command that has what they draw (add them to a new command with
# its parameters and one _pictures(...) call before it runs, one _save_pictures(...) after it printed).
SvgOpt = Annotated[str | None, typer.Option("--svg", metavar="FILE", help="Also write the tables, as printed, to FILE as an SVG (for slides; fonts found offline). Not with --json.")]
DotOpt = Annotated[str | None, typer.Option("--dot", metavar="FILE", help="Write the graph that ran to FILE as Graphviz DOT: nodes coloured and grouped by assigned device, edges between devices red and labelled copy (with bytes under --copies).")]
GraphSvgOpt = Annotated[str | None, typer.Option("--graph-svg", metavar="FILE", help="Write the graph that ran to FILE as an SVG that needs no Graphviz: one lane per device, nodes by depth, copies between devices in red.")]
ForceOpt = Annotated[bool, typer.Option("--force", help="Let the pictures' options overwrite an existing FILE (a link's file; special files such as /dev/null are written into, never replaced).")]
TensorBoardOpt = Annotated[str | None, typer.Option("--tensorboard", metavar="DIR", help="Write a TensorBoard event file in DIR (made if missing): the graph with each node's assigned device, and the run's step stats. Graph mode only.")]

def _console() -> Any:
    """The console reports print on; with --svg, one console for the whole command that records it all."""
    from placement_cli.render.console import make_console  # noqa: PLC0415 - keeps --help fast

    if not _state.get("record"):
        return make_console()
    if _state.get("console") is None:
        _state["console"] = make_console(record=True)
    return _state["console"]


@dataclass(frozen=True)
class Pictures:
    """The files a command writes beside what it prints (checked before it runs)."""

    svg: str | None = None
    dot: str | None = None
    graph_svg: str | None = None
    force: bool = False
    command: str = "placement"


def _pictures(command: str, *, as_json: bool, force: bool, svg: str | None = None, dot: str | None = None,
              graph_svg: str | None = None, protect: tuple[str, ...] = ()) -> Pictures:
    """Check the pictures' files before anything runs (exit 2 for one that cannot be written), and
    start recording the tables when --svg asks for them."""
    from placement_cli.exceptions import UsageProblem  # noqa: PLC0415
    from placement_cli.outputs import check_distinct, check_file  # noqa: PLC0415

    if svg is not None and as_json:
        raise UsageProblem(_("--svg draws the tables, and --json prints none: give one of them"))
    named = (("--svg", svg), ("--dot", dot), ("--graph-svg", graph_svg))
    check_distinct(named)
    for option, path in named:
        if path is not None:
            check_file(option, path, force, protect)
    _state["record"] = svg is not None
    return Pictures(svg, dot, graph_svg, force, command)


def _save_pictures(pictures: Pictures, report: Any = None) -> None:
    """Write what the command printed (--svg) and the graph of ``report`` (--dot, --graph-svg). A file
    that cannot be written after all (its folder went away, a read-only or full disk) is one line and
    exit 2, or the command's own 1."""
    from placement_cli.outputs import write_file  # noqa: PLC0415

    wanted: list[tuple[str, str, Callable[[], str]]] = []
    if pictures.svg is not None:
        from placement_cli.render.svg import render_svg  # noqa: PLC0415

        wanted.append(("--svg", pictures.svg, lambda: render_svg(_console(), pictures.command)))
    if report is not None:
        from placement_cli.render.graph import render_dot, render_graph_svg  # noqa: PLC0415

        if pictures.dot is not None:
            wanted.append(("--dot", pictures.dot, lambda: render_dot(report)))
        if pictures.graph_svg is not None:
            wanted.append(("--graph-svg", pictures.graph_svg, lambda: render_graph_svg(report)))
    from placement_cli.exceptions import UsageProblem  # noqa: PLC0415

    for option, path, render in wanted:
        try:
            write_file(path, render(), pictures.force)
        except UsageProblem as exc:  # the file appeared meanwhile: kept, and a failed run keeps its 1
            raise _fail(ExitCode(_state["code"] or ExitCode.USAGE), str(exc)) from None
        except BrokenPipeError:  # --svg /dev/stdout | head -1: the reader has all it wanted
            raise
        except OSError as exc:
            raise _fail(ExitCode(_state["code"] or ExitCode.USAGE),
                        _("{option} {path}: cannot write it ({why})").format(
                            option=option, path=path, why=exc.strerror or exc)) from None


def _tensorboard(path: str | None, mode: Mode = Mode.graph, pictures: Pictures = Pictures()) -> str | None:
    """--tensorboard's folder, made and checked before TensorFlow runs; refused in eager mode and
    when a picture's file has the same name (the picture could not be written after the run)."""
    if path is None:
        return None
    from placement_cli.outputs import check_distinct, check_folder  # noqa: PLC0415

    if mode is Mode.eager:
        raise typer.BadParameter(_("--tensorboard needs --mode graph (eager ops run without a Session graph to store)"))
    check_distinct((("--svg", pictures.svg), ("--dot", pictures.dot), ("--graph-svg", pictures.graph_svg),
                    ("--tensorboard", path)))
    return check_folder("--tensorboard", path)


def _say_tensorboard(path: str | None, written: bool = True) -> None:
    if path is None:
        return
    if written:
        _say(_("TensorBoard event file written in {path}: see it with  tensorboard --logdir {path}").format(path=path))
    else:  # the devices the graph asked for are no placement: nothing is drawn as if it were one
        _say(_("no TensorBoard event file written in {path}: the run failed before TensorFlow placed its graph").format(
            path=path))


def _ascii_safe(renderable: Any) -> Any:
    from placement_cli.render.console import AsciiSafe  # noqa: PLC0415

    return AsciiSafe(renderable)


def _ascii_only() -> bool:
    from placement_cli.render.console import unicode_stream  # noqa: PLC0415

    return not unicode_stream(sys.stdout)


def _say(message: str) -> None:
    """One diagnostic line on stderr, never wrapped, control characters removed (nothing if stderr is closed)."""
    from placement_cli.render.table import clean  # noqa: PLC0415

    if sys.stderr is None:
        return
    line = "placement: " + clean(message.replace("\r\n", "\n").replace("\n", "\\n").replace("\r", "\\r")) + "\n"
    try:
        try:
            sys.stderr.write(line)
        except UnicodeEncodeError:  # a stream that cannot show every character still gets the line
            encoding = getattr(sys.stderr, "encoding", None) or "ascii"
            sys.stderr.write(line.encode(encoding, "backslashreplace").decode(encoding))
        sys.stderr.flush()
    except (OSError, ValueError):  # stderr closed or full: the exit code still says what happened
        pass


def _fail(code: ExitCode, message: str) -> typer.Exit:
    _say(message)
    return typer.Exit(int(code))


_TERMINATING = {"SIGTERM": N_("terminated"), "SIGHUP": N_("hung up")}
# trace forwards every signal to the script it runs: it keeps its own. (inspect and cluster end their
# children in their cleanups, which Terminated runs.)
_OWN_SIGNALS = frozenset({"trace"})


def _raise_terminated(signum: int, _frame: Any) -> None:
    from placement_cli.exceptions import Terminated  # noqa: PLC0415

    raise Terminated(signum)


def _catch_termination() -> dict[int, Any]:
    """SIGTERM and SIGHUP raise Terminated (unless ignored); the handlers they had, to put back."""
    import signal  # noqa: PLC0415

    saved: dict[int, Any] = {}
    for name in _TERMINATING:
        sig = getattr(signal, name, None)
        if sig is None:
            continue
        try:
            if signal.getsignal(sig) == signal.SIG_DFL:
                saved[sig] = signal.signal(sig, _raise_terminated)
        except ValueError:  # not the main thread: signals stay as they are
            break
    return saved


def _restore_signals(saved: dict[int, Any]) -> None:
    import signal  # noqa: PLC0415

    for sig, handler in saved.items():
        signal.signal(sig, handler)


# The lessons that run on this machine alone: a TF_CONFIG in the environment is not theirs (cluster
# and inspect read it; trace leaves the script's environment as it is).
_ONE_MACHINE = frozenset({"show", "tower", "train", "mirrored", "devices", "errors", "demo"})


def _one_machine(command: str) -> None:
    """A TF_CONFIG left in the environment leaves it before TensorFlow starts, and the user is told once."""
    from placement_cli.runtime.startup import drop_cluster_config  # noqa: PLC0415

    stale = drop_cluster_config()
    if stale is not None:
        value = " ".join(stale.split())  # one line, cut to fit one
        _say(_("TF_CONFIG is set ({value}) and ignored: `placement {command}` runs on this machine alone "
               "(cluster and inspect read TF_CONFIG)").format(
            value=value if len(value) <= 60 else value[:59] + "\N{HORIZONTAL ELLIPSIS}", command=command))


def guarded(fn: F) -> F:
    """Translate domain errors into exit codes; tracebacks only with --traceback. SIGTERM and SIGHUP
    end a command like Ctrl-C does (trace and inspect handle signals themselves)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        saved = {} if fn.__name__ in _OWN_SIGNALS else _catch_termination()
        if fn.__name__ in _ONE_MACHINE and not kwargs.get("list_steps"):  # demo --list starts nothing
            _one_machine(fn.__name__)
        try:
            return _guarded_call(fn, *args, **kwargs)
        finally:
            outputs = sys.modules.get("placement_cli.outputs")  # loaded only by commands that write files
            if outputs is not None:
                outputs.remove_empty_made()
            _restore_signals(saved)

    return wrapper  # type: ignore[return-value]


def _guarded_call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    from placement_cli.exceptions import DeviceSpecError, InputError, Terminated, UsageProblem  # noqa: PLC0415

    try:
        return fn(*args, **kwargs)
    except (typer.Exit, typer.Abort, typer.BadParameter):
        raise
    except Terminated as exc:
        import signal  # noqa: PLC0415

        raise _fail(ExitCode(128 + exc.signum), translated(_TERMINATING[signal.Signals(exc.signum).name])) from None
    except (InputError, UsageProblem, DeviceSpecError) as exc:
        raise _fail(ExitCode.USAGE, str(exc)) from None
    except KeyboardInterrupt:
        raise _fail(ExitCode.INTERRUPTED, _("interrupted")) from None
    except BrokenPipeError:  # | head -1: the reader has all it wanted, which is no error
        _silence_stdout()
        raise typer.Exit(_state["code"]) from None
    except OSError as exc:
        if exc.errno not in _OUTPUT_ERRNOS:
            raise _internal(exc) from None
        _silence_stdout()
        where = f"{exc.filename}: " if exc.filename else ""
        # a run that failed keeps its 1; output that could not be written is never a success
        raise _fail(ExitCode(_state["code"] or ExitCode.USAGE),
                    f"cannot write the output: {where}{exc.strerror or exc}") from None
    except Exception as exc:
        raise _internal(exc) from None


# Errors of writing to a closed, full or broken output (stdout, a --save-log file).
_OUTPUT_ERRNOS = frozenset({errno.EPIPE, errno.ENOSPC, errno.EBADF, errno.EIO, errno.EDQUOT, errno.EFBIG})


def _internal(exc: Exception) -> typer.Exit:
    if _state["traceback"]:
        raise exc
    return _fail(ExitCode.INTERNAL, f"internal error: {type(exc).__name__}: {exc} (rerun with --traceback)")


def _print_report(report: Any, *, as_json: bool, run: bool, show_log: bool = False, summary: bool = False,
                  all_rows: bool = False, hints: Any = None, filtered: Any = None) -> None:
    """The report as JSON, or as tables: every row when they fit a screen or with --all, else a digest.
    Tables keep whole node names when the output is not a terminal (files, pipes)."""
    if filtered is not None and filtered.nothing_matched:
        _say(_("no placements match {filters} (of {total})").format(filters=filtered.filters.describe(),
                                                                      total=filtered.total))
    if as_json:
        from placement_cli.render.json import render_json  # noqa: PLC0415

        sys.stdout.write(render_json(report, run=run, filtered=filtered, ascii_only=_ascii_only()) + "\n")
        sys.stdout.flush()  # a closed or full output fails here, inside the command, with its exit code
        return
    from placement_cli.render.console import AsciiSafe, is_terminal, screen_rows  # noqa: PLC0415
    from placement_cli.render.table import View, report_group  # noqa: PLC0415

    console = _console()
    if show_log:
        _print_log(console, report)
    view = View(all_rows=all_rows, screen_rows=screen_rows(console.file), fit=is_terminal(console.file),
                hints=hints, filtered=filtered)
    console.print(AsciiSafe(report_group(report, run=run, summary=summary, view=view)), crop=False)
    sys.stdout.flush()


def _print_log(console: Any, report: Any) -> None:
    """--log: TensorFlow's log as it wrote it, each line kept whole (also in files and pipes)."""
    from placement_cli.render.table import literal  # noqa: PLC0415

    if report.log:
        console.rule(_("TensorFlow's log"))
        console.print(literal(report.log.rstrip()), soft_wrap=True)
        console.rule()


def _print_json(data: Any) -> None:
    from placement_cli.render.json import dumps  # noqa: PLC0415

    sys.stdout.write(dumps(data, ascii_only=_ascii_only()) + "\n")
    sys.stdout.flush()  # a closed or full output fails here, inside the command, with its exit code


def _load_renderers() -> None:
    import placement_cli.render.json  # noqa: F401, PLC0415
    import placement_cli.render.table  # noqa: F401, PLC0415
    import placement_cli.why  # noqa: F401, PLC0415


def _say_incomplete(incomplete: Any, what: str = "reasons are incomplete (those that need it say unknown)") -> None:
    """One line, whatever the number of private TensorFlow APIs missing, naming them and why."""
    if incomplete:
        _say(f"{what}: TensorFlow's " + "; ".join(incomplete))


def _finish_run(report: Any, as_json: bool, show_log: bool, *, all_rows: bool = False, soft: bool = False,
                pictures: Pictures = Pictures(), tensorboard: str | None = None) -> None:
    from placement_cli.render.table import Hints  # noqa: PLC0415

    if report.result is None:
        _state["code"] = int(ExitCode.PLACEMENT_FAILED)
    _print_report(report, as_json=as_json, run=True, show_log=show_log, all_rows=all_rows,
                  hints=Hints.run_command(soft))
    _save_pictures(pictures, report)
    _say_tensorboard(tensorboard, written=report.result is not None)
    _say_incomplete(report.incomplete)
    if report.result is None:  # a run that did not produce its result never exits 0
        raise typer.Exit(int(ExitCode.PLACEMENT_FAILED))


def _options(soft: bool, mode: Mode, cpus: int | None, virtual_gpus: int | None, copies: bool = False,
             tensorboard: str | None = None, pictures: Pictures = Pictures()) -> Any:
    from placement_cli.runtime.startup import RunOptions  # noqa: PLC0415

    if copies and mode is Mode.eager:
        raise typer.BadParameter("--copies needs --mode graph (eager ops run one by one: no partition graphs)")
    return RunOptions(soft=soft, mode=mode.value, cpus=cpus, virtual_gpus=virtual_gpus, copies=copies,
                      tensorboard=_tensorboard(tensorboard, mode, pictures))


def _version(value: bool) -> None:
    if value:
        typer.echo(f"placement {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    traceback: Annotated[bool, typer.Option("--traceback", help="Show Python tracebacks of unexpected errors.")] = False,
    version: Annotated[bool, typer.Option("--version", is_eager=True, callback=_version, help="Print the version and exit.")] = False,
) -> None:
    """See where TensorFlow places every op, and why.

    Examples: placement show, placement tower --gpus 2,3 --soft, placement parse run.log
    """
    _state.update(traceback=traceback, record=False, console=None, code=0)  # each invocation starts at 0
    if sys.stdout is None and ctx.invoked_subcommand != "trace":  # `placement show >&-`
        raise _fail(ExitCode.USAGE, "standard output is closed: there is nowhere to write the report")


@app.command()
@guarded
def show(
    device: Annotated[str | None, typer.Option("--device", metavar="DEV", callback=_device_option, help="Pin a, b and MatMul to DEV (the guide's /gpu:2 case).")] = None,
    inputs_on: Annotated[str | None, typer.Option("--inputs-on", metavar="DEV", callback=_device_option, help="Pin only a and b to DEV (the guide's /cpu:0 case).")] = None,
    soft: SoftOpt = False,
    mode: ModeOpt = Mode.graph,
    cpus: CpusOpt = None,
    virtual_gpus: VGpusOpt = None,
    copies: CopiesOpt = False,
    log: LogOpt = False,
    all_rows: AllOpt = False,
    lang: LangOpt = None,
    as_json: JsonOpt = False,
    svg: SvgOpt = None,
    dot: DotOpt = None,
    graph_svg: GraphSvgOpt = None,
    tensorboard: TensorBoardOpt = None,
    force: ForceOpt = False,
) -> None:
    """Run the guide's matmul (a 2x3 times b 3x2) with placement logging and show where each op went.

    Example: placement show --device /gpu:2 --soft
    """
    from placement_cli.lessons.guide import matmul  # noqa: PLC0415

    pictures = _pictures("placement show", as_json=as_json, force=force, svg=svg, dot=dot, graph_svg=graph_svg)
    options = _options(soft, mode, cpus, virtual_gpus, copies, tensorboard, pictures)
    report = matmul(device, inputs_on, options)
    _finish_run(report, as_json, log, all_rows=all_rows, soft=soft, pictures=pictures, tensorboard=options.tensorboard)


@app.command()
@guarded
def tower(
    ctx: typer.Context,
    gpus: Annotated[str, typer.Option("--gpus", metavar="N,N|N-N", callback=_gpus_option, help="GPU indices for the towers: 2,3 or 0-3.")] = "2,3",
    devices: Annotated[str | None, typer.Option("--devices", metavar="DEV,DEV", callback=_devices_option, help="Tower devices instead of --gpus, e.g. /cpu:1,/cpu:2.")] = None,
    reduce_on: Annotated[str, typer.Option("--reduce-on", metavar="DEV", callback=_device_option, help="Where tf.add_n sums the towers.")] = "/cpu:0",
    soft: SoftOpt = False,
    mode: ModeOpt = Mode.graph,
    cpus: CpusOpt = None,
    virtual_gpus: VGpusOpt = None,
    copies: CopiesOpt = False,
    log: LogOpt = False,
    all_rows: AllOpt = False,
    lang: LangOpt = None,
    as_json: JsonOpt = False,
    svg: SvgOpt = None,
    dot: DotOpt = None,
    graph_svg: GraphSvgOpt = None,
    tensorboard: TensorBoardOpt = None,
    force: ForceOpt = False,
) -> None:
    """Run the guide's multi-tower graph: one matmul per device, summed with tf.add_n.

    Without GPUs, use --soft to see the fallbacks, or run the towers on logical CPUs.
    Example: placement tower --devices /cpu:1,/cpu:2 --cpus 3
    """
    from placement_cli.devices import lesson_devices, parse_option_indices  # noqa: PLC0415
    from placement_cli.lessons.guide import tower as run_tower  # noqa: PLC0415

    source = ctx.get_parameter_source("gpus")
    if devices and source is not None and source.name != "DEFAULT":
        raise typer.BadParameter("give the towers with --gpus or with --devices, not both", param_hint="--gpus")
    towers = devices.split(",") if devices else [f"/gpu:{i}" for i in parse_option_indices(gpus)]
    lesson_devices("tower", towers, "--devices" if devices else "--gpus", cpus, derive_cpus=False)
    pictures = _pictures("placement tower", as_json=as_json, force=force, svg=svg, dot=dot, graph_svg=graph_svg)
    options = _options(soft, mode, cpus, virtual_gpus, copies, tensorboard, pictures)
    report = run_tower(towers, reduce_on, options)
    _finish_run(report, as_json, log, all_rows=all_rows, soft=soft, pictures=pictures, tensorboard=options.tensorboard)


@app.command()
@guarded
def errors(lang: LangOpt = None, as_json: JsonOpt = False, svg: SvgOpt = None, force: ForceOpt = False) -> None:
    """Run a catalogue of placement failures for real and show each error, and what --soft does instead.

    All cases share one TensorFlow start-up; GPU-only cases are reported as not run on machines without one.
    Example: placement errors --json
    """
    from placement_cli.lessons.failure_cases import catalogue  # noqa: PLC0415

    pictures = _pictures("placement errors", as_json=as_json, force=force, svg=svg)
    found = catalogue()
    if as_json:
        _print_json(found.to_dict())
    else:
        from placement_cli.render.failure_cases import render_catalogue  # noqa: PLC0415

        _console().print(_ascii_safe(render_catalogue(found)))
        _save_pictures(pictures)
    _say_incomplete(found.incomplete, "the catalogue is incomplete (what needs it says unknown or is not run)")


@app.command()
@guarded
def devices(
    cpus: CpusOpt = None,
    virtual_gpus: VGpusOpt = None,
    lang: LangOpt = None,
    as_json: JsonOpt = False,
    svg: SvgOpt = None,
    force: ForceOpt = False,
) -> None:
    """List the physical and logical devices TensorFlow sees, and the Device mapping a Session logs.

    Example: placement devices --cpus 4
    """
    from placement_cli.runtime.inventory import inventory  # noqa: PLC0415
    from placement_cli.render.inventory import render_inventory  # noqa: PLC0415

    pictures = _pictures("placement devices", as_json=as_json, force=force, svg=svg)
    found = inventory(_options(False, Mode.graph, cpus, virtual_gpus))
    if as_json:
        _print_json(found.to_dict())
    else:
        _console().print(_ascii_safe(render_inventory(found)))
        _save_pictures(pictures)


@app.command()
@guarded
def inspect(
    target: Annotated[str | None, typer.Argument(metavar="[TARGET]", help="A task of the cluster: grpc://HOST:PORT or HOST:PORT.", show_default=False)] = None,
    cluster_spec: Annotated[str | None, typer.Option("--cluster-spec", metavar="FILE", help="The cluster as TensorFlow's ClusterSpec JSON ({\"ps\": [\"host:2222\"], \"worker\": [...]}) or a TF_CONFIG object.")] = None,
    timeout: Annotated[float, typer.Option("--timeout", metavar="SECONDS", callback=_timeout_option, help="How long each task may take to answer (0.5 to 60).")] = 5.0,
    lang: LangOpt = None,
    as_json: JsonOpt = False,
    svg: SvgOpt = None,
    force: ForceOpt = False,
) -> None:
    """Ask a running TensorFlow cluster for its tasks and devices, without disturbing it.

    Give one task's target, --cluster-spec FILE, or nothing with TF_CONFIG set. Only devices are
    listed: no op runs and no variable is made. With the tasks known, each is asked about itself
    and a task that does not answer is named (exit 1); with only a target, the master lists every
    task, but cannot say which one is missing when one is.

    Example: placement inspect grpc://localhost:2222 --timeout 3
    """
    from placement_cli import clusterspec  # noqa: PLC0415
    from placement_cli.exceptions import UsageProblem  # noqa: PLC0415

    if target is not None and cluster_spec is not None:
        raise UsageProblem("give a TARGET or --cluster-spec FILE, not both")
    cluster = address = None
    if target is not None:
        address = clusterspec.from_target(target)
    elif cluster_spec is not None:
        cluster = clusterspec.from_file(cluster_spec)
    else:
        cluster = clusterspec.from_environment()
        if cluster is None:
            raise UsageProblem("nothing to inspect: give grpc://HOST:PORT, --cluster-spec FILE, or set TF_CONFIG")
    pictures = _pictures("placement inspect", as_json=as_json, force=force, svg=svg,
                         protect=(cluster_spec,) if cluster_spec else ())
    from placement_cli.runtime.inspect import run  # noqa: PLC0415

    found = run(cluster, address, timeout)  # TensorFlow works in a child process, bounded and killable
    from placement_cli.render.inspect import render_inspection, silent_summary  # noqa: PLC0415

    code = int(ExitCode.OK if found.complete else ExitCode.PLACEMENT_FAILED)
    _state["code"] = code
    if as_json:
        _print_json(found.to_dict())
    else:
        _console().print(_ascii_safe(render_inspection(found)), crop=False)
        sys.stdout.flush()
        _save_pictures(pictures)
    missing = silent_summary(found)
    if missing:
        _say(missing)
    if code:
        raise typer.Exit(code)


@app.command()
@guarded
def parse(
    files: Annotated[list[str], typer.Argument(metavar="FILE...", help="Log files; - reads standard input.", show_default=False)],
    summary: Annotated[bool, typer.Option("--summary", help="Only the counts per device.")] = False,
    device: DeviceFilterOpt = None,
    op: OpFilterOpt = None,
    node: NodeFilterOpt = None,
    top: TopOpt = None,
    all_rows: AllOpt = False,
    lang: LangOpt = None,
    as_json: JsonOpt = False,
    svg: SvgOpt = None,
    force: ForceOpt = False,
) -> None:
    """Parse placement logs of any TensorFlow version (0.x to 2.x), mixed with any other output.

    Several files are read as one stream, so a program's stdout and stderr logs pair up.
    Example: placement parse train.log --summary
    """
    from placement_cli.filters import Filters, apply  # noqa: PLC0415
    from placement_cli.logparse import parse_paths  # noqa: PLC0415

    pictures = _pictures("placement parse", as_json=as_json, force=force, svg=svg, protect=tuple(files))
    filters = Filters(device, op, node, top)
    narrowed = apply(parse_paths(files, keep=not summary or filters.active, note=_say), filters, hide_plumbing=False)
    report = narrowed.report
    _print_report(report, as_json=as_json, run=False, summary=summary, all_rows=all_rows, filtered=narrowed)
    _save_pictures(pictures)
    if not narrowed.total:
        names = ", ".join("standard input" if f == "-" else f for f in files)
        _say(_("no placements found in {names}").format(names=names))


@app.command(context_settings={"allow_interspersed_args": False})
@guarded
def trace(
    script: Annotated[str, typer.Argument(metavar="SCRIPT", help="The Python script to run.", show_default=False)],
    args: Annotated[list[str] | None, typer.Argument(metavar="[ARGS]...", help="Arguments for the script.", show_default=False)] = None,
    device: DeviceFilterOpt = None,
    op: OpFilterOpt = None,
    node: NodeFilterOpt = None,
    top: TopOpt = None,
    save_log: Annotated[str | None, typer.Option("--save-log", metavar="FILE", help="Keep TensorFlow's log (and the script's uncaught error) in FILE.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Let --save-log, --svg, --dot and --graph-svg overwrite an existing FILE.")] = False,
    log: Annotated[bool, typer.Option("--log", help="Echo TensorFlow's placement lines too, as they come.")] = False,
    copies: Annotated[bool, typer.Option("--copies", help="List the _Send/_Recv copies between devices of the script's tf.compat.v1.Session runs (their executed graphs, as grappler left them; asked for once per session and fetch).")] = False,
    all_rows: AllOpt = False,
    lang: LangOpt = None,
    as_json: JsonOpt = False,
    svg: SvgOpt = None,
    dot: DotOpt = None,
    graph_svg: GraphSvgOpt = None,
) -> None:
    """Run your TensorFlow script with placement logging on from its first op, then show its placements.

    placement's options go before SCRIPT; everything after SCRIPT is the script's, untouched.
    The script's own output reaches the terminal live (placement lines are consumed); with
    --json its stdout goes to stderr so the JSON on stdout stays clean. The exit code is the script's.
    The why column explains each op not where its graph asked, or on a CPU while a GPU exists.
    Example: placement trace train.py --epochs 1
    """
    from placement_cli.filters import Filters, apply  # noqa: PLC0415
    from placement_cli.render import words  # noqa: PLC0415
    from placement_cli.render.table import Hints, literal  # noqa: PLC0415
    from placement_cli.runtime.tracer import (  # noqa: PLC0415
        check_script, fresh_line, open_save_log, reopen_closed_stdio, run_traced)

    closed = reopen_closed_stdio()
    check_script(script)
    from placement_cli.outputs import check_distinct  # noqa: PLC0415

    check_distinct((("--save-log", save_log), ("--svg", svg), ("--dot", dot), ("--graph-svg", graph_svg)))
    pictures = _pictures("placement trace", as_json=as_json, force=force, svg=svg, dot=dot, graph_svg=graph_svg,
                         protect=(script,))
    saved = open_save_log(save_log, script, force) if save_log else None
    traced = run_traced(script, args or [], stdout_fd=2 if as_json else 1, echo_log=log, save_log=saved,
                        copies=copies, closed=closed, meanwhile=_load_renderers)
    if 2 not in closed:
        fresh_line(2)  # after the script's own unfinished line, placement's messages start a line of their own
    for note in traced.notes:
        _say(note)
    shown = words.one_line(script)  # the script's name, one way everywhere
    narrowed = apply(traced.report, Filters(device, op, node, top))
    report = narrowed.report
    output_closed = traced.output_closed
    if not output_closed:
        try:
            if as_json:
                from placement_cli.render.json import report_dict  # noqa: PLC0415

                _print_json({**report_dict(report, run=True, filtered=narrowed), "exit_code": traced.exit_code})
                if narrowed.nothing_matched:
                    _say(_("no placements match {filters} (of {total})").format(filters=narrowed.filters.describe(),
                                                                                  total=narrowed.total))
                _trace_pictures(pictures, report)
            else:
                sys.stdout.flush()
                fresh_line(1)
                _console().rule(literal(_("placement: {script} exited with code {code}").format(
                    script=shown, code=traced.exit_code)))
                _print_report(report, as_json=False, run=True, all_rows=all_rows, hints=Hints(source="program"),
                              filtered=narrowed)
                _trace_pictures(pictures, report)
            sys.stdout.flush()
        except BrokenPipeError:
            output_closed = True
    if output_closed:  # | head -1: the report has nowhere to go, which is no error
        _silence_stdout()
        raise typer.Exit(traced.exit_code)
    if not traced.report.placement_count:
        _say(_("no placements found in the output of {script}").format(script=shown))
    if copies and traced.report.copies is None:
        _say(_("no tf.compat.v1.Session ran in {script}: --copies lists the copies of Session runs only").format(
            script=shown))
    raise typer.Exit(traced.exit_code)


def _trace_pictures(pictures: Pictures, report: Any) -> None:
    """trace's pictures: one that cannot be written is said on stderr, and trace still returns the
    script's own exit code (the script ran; its code is the user's)."""
    try:
        _save_pictures(pictures, report)
    except typer.Exit:
        pass


class DType(str, Enum):
    float32 = "float32"
    float64 = "float64"


@_option_callback
def _timeout_option(value: float) -> float:
    import math  # noqa: PLC0415

    if not math.isfinite(value) or not 0.5 <= value <= 60:  # nan passes a range check: it compares false
        raise typer.BadParameter(f"{value} is not a timeout: give seconds from 0.5 to 60")
    return value


@_option_callback
def _lr_option(value: float) -> float:
    import math  # noqa: PLC0415

    if not math.isfinite(value) or not 0 < value <= 100:
        raise typer.BadParameter(f"{value} is not a learning rate: give a number above 0 and at most 100")
    return value


def _training_devices(lesson: str, towers: int | None, devices: str | None, gpus: str | None, cpus: int | None,
                      default: int, first_cpu: int) -> tuple[list[str], int | None]:
    """The towers' (or replicas') devices and the logical CPUs to make: --devices, --gpus, or
    ``default`` logical CPUs from /cpu:``first_cpu`` on; every count held to the lesson's caps."""
    from placement_cli.devices import LESSON_DEVICES, lesson_devices, parse_indices  # noqa: PLC0415
    from placement_cli.exceptions import UsageProblem  # noqa: PLC0415

    unit = LESSON_DEVICES[lesson][1]
    if devices and gpus:
        raise UsageProblem("give --devices or --gpus, not both")
    if devices or gpus:
        chosen = devices.split(",") if devices else [f"/gpu:{i}" for i in parse_indices(gpus or "")]
        if towers is not None and towers != len(chosen):
            raise UsageProblem(f"{towers} {unit} asked for but {len(chosen)} devices given: give one device per "
                               f"{unit.rstrip('s')}")
        # the logical CPUs the devices name, unless --cpus says
        return chosen, lesson_devices(lesson, chosen, "--devices" if devices else "--gpus", cpus, derive_cpus=True)
    count = default if towers is None else towers
    chosen = [f"/cpu:{first_cpu + i}" for i in range(count)]
    option = "--towers" if lesson == "train" else "--replicas"
    return chosen, lesson_devices(lesson, chosen, option, first_cpu + count if cpus is None else cpus, derive_cpus=False)


def _print_training(report: Any, *, as_json: bool, show_log: bool, all_rows: bool, soft: bool | None,
                    filtered: Any) -> None:
    """A training lesson's report: JSON, or its tables (roles, placements or digest, losses, check, copies)."""
    _state["code"] = _training_code(report)  # kept if the output cannot be written
    if filtered.nothing_matched:
        _say(_("no placements match {filters} (of {total})").format(filters=filtered.filters.describe(),
                                                                      total=filtered.total))
    if as_json:
        from placement_cli.render.json import report_dict  # noqa: PLC0415

        _print_json(report_dict(report, run=True, filtered=filtered))
        return
    from placement_cli.render.console import is_terminal, screen_rows  # noqa: PLC0415
    from placement_cli.render.table import Hints, View  # noqa: PLC0415
    from placement_cli.render.training import training_group  # noqa: PLC0415

    console = _console()
    if show_log:
        _print_log(console, report)
    view = View(all_rows=all_rows, screen_rows=screen_rows(console.file), fit=is_terminal(console.file),
                hints=Hints.run_command(soft), filtered=filtered)
    console.print(_ascii_safe(training_group(report, view)), crop=False)


def _training_code(report: Any) -> int:
    """1 when the placement failed, the steps did not all run, a loss is not finite (the training
    diverged), or the gradient check failed."""
    training = report.training
    if report.failed or training is None or not training.complete or training.diverged_at is not None:
        return int(ExitCode.PLACEMENT_FAILED)
    check = training.check
    return int(ExitCode.PLACEMENT_FAILED) if check is not None and not check.passed else int(ExitCode.OK)


def _training_exit(report: Any) -> None:
    """Exit with the lesson's code, saying why when the training diverged or the gradient check failed."""
    from placement_cli.render.training import diverged_message  # noqa: PLC0415

    code = _training_code(report)
    diverged = diverged_message(report.training) if report.training is not None else None
    if diverged is not None:
        _say(diverged)
    check = report.training.check if report.training is not None else None
    if check is not None and not check.passed:
        _say(_("gradient check failed: max relative difference {difference:.3g} > tolerance {tolerance:g}").format(
            difference=check.max_rel, tolerance=check.tolerance))
    if code:
        raise typer.Exit(code)


@app.command()
@guarded
def train(
    towers: Annotated[int | None, typer.Option("--towers", metavar="N", callback=_capped("--towers", 1, LESSON_DEVICES["train"][0], LESSON_DEVICES["train"][2]), help="How many towers (default 2; with --devices or --gpus, one per device).")] = None,
    devices: Annotated[str | None, typer.Option("--devices", metavar="DEV,DEV", callback=_devices_option, help="The towers' devices, e.g. /gpu:0,/gpu:1 (default: logical CPUs /cpu:1../cpu:N).")] = None,
    gpus: Annotated[str | None, typer.Option("--gpus", metavar="N,N|N-N", callback=_gpus_option, help="Towers on these GPUs: 0,1 or 0-3.")] = None,
    steps: Annotated[int, typer.Option("--steps", metavar="N", callback=_capped("--steps", 1, 10_000, "a lesson, not a training job"), help="Training steps to run.")] = 5,
    batch: Annotated[int, typer.Option("--batch", metavar="N", callback=_capped("--batch", 1, 65_536, "synthetic examples made per step"), help="Examples per step, split evenly over the towers.")] = 64,
    lr: Annotated[float, typer.Option("--lr", metavar="RATE", callback=_lr_option, help="Learning rate of the one GradientDescentOptimizer.")] = 0.5,
    dtype: Annotated[DType, typer.Option("--dtype", help="Type of the model and its data.")] = DType.float32,
    check: Annotated[bool, typer.Option("--check", help="Compare the averaged tower gradient with the full-batch gradient on one device (exit 1 beyond the tolerance).")] = False,
    soft: SoftOpt = False,
    cpus: CpusOpt = None,
    virtual_gpus: VGpusOpt = None,
    copies: Annotated[bool, typer.Option("--copies", help="Trace the first step: every _Send/_Recv with its tensor, dtype, shape and bytes, totals per link and per step (both constant folders off).")] = False,
    device: DeviceFilterOpt = None,
    op: OpFilterOpt = None,
    node: NodeFilterOpt = None,
    top: TopOpt = None,
    log: LogOpt = False,
    all_rows: AllOpt = False,
    lang: LangOpt = None,
    as_json: JsonOpt = False,
    svg: SvgOpt = None,
    dot: DotOpt = None,
    graph_svg: GraphSvgOpt = None,
    tensorboard: TensorBoardOpt = None,
    force: ForceOpt = False,
) -> None:
    """Train the cifar10 multi-GPU tower pattern for real: variables on the CPU, a loss and gradients
    per tower, average_gradients and one apply_gradients on the CPU.

    Towers run on logical CPUs by default (--cpus N+1, towers on /cpu:1../cpu:N), on GPUs with
    --gpus or --devices. The placements are grouped by role; the why column says where the towers'
    variable reads went.
    Example: placement train --towers 2 --check --copies
    """
    from placement_cli.filters import Filters, apply  # noqa: PLC0415
    from placement_cli.lessons.train import TrainSpec, check_split  # noqa: PLC0415
    from placement_cli.runtime.startup import RunOptions  # noqa: PLC0415

    chosen, cpus = _training_devices("train", towers, devices, gpus, cpus, default=2, first_cpu=1)
    check_split(batch, len(chosen))
    pictures = _pictures("placement train", as_json=as_json, force=force, svg=svg, dot=dot, graph_svg=graph_svg)
    board = _tensorboard(tensorboard, pictures=pictures)
    from placement_cli.lessons.train import train as run_train  # noqa: PLC0415

    spec = TrainSpec(devices=tuple(chosen), batch=batch, steps=steps, lr=lr, dtype=dtype.value, check=check)
    report = run_train(spec, RunOptions(soft=soft, mode="graph", cpus=cpus, virtual_gpus=virtual_gpus, copies=copies,
                                        tensorboard=board))
    narrowed = apply(report, Filters(device, op, node, top))
    _print_training(narrowed.report, as_json=as_json, show_log=log, all_rows=all_rows, soft=soft, filtered=narrowed)
    _save_pictures(pictures, narrowed.report)
    _say_tensorboard(board, written=report.result is not None)
    _training_exit(report)


def _cluster_progress(event: dict[str, Any]) -> None:
    """A cluster's start-up, a line per task on stderr (cluster, and the demo's cluster step)."""
    if event.get("event") == "isolation" and not event.get("isolated"):
        _say(_("no private network namespace ({why}): the cluster's ports listen on every interface, "
               "unauthenticated, while it runs").format(why=event.get("why")))
    elif event.get("event") == "retry":
        _say(_("a port was taken while the cluster started ({why}); starting again on new ports").format(
            why=event.get("why")))
    elif event.get("event") == "session":
        _say(_("{task}: session up, training").format(task=event["task"]))
    elif event.get("event") == "ready":
        _say(_("{task} ready on {address} (pid {pid}, {seconds} s)").format(
            task=event["task"], address=event["address"], pid=event["pid"], seconds=event["seconds"]))


class Api(str, Enum):
    tf1 = "tf1"
    tf2 = "tf2"


@app.command()
@guarded
def cluster(
    ps: Annotated[int | None, typer.Option("--ps", metavar="N", callback=_capped("--ps", 1, 4, "one process per task on this machine"), help="Parameter-server tasks (default 2).")] = None,
    workers: Annotated[int | None, typer.Option("--workers", metavar="N", callback=_capped("--workers", 1, 8, "one process per task on this machine"), help="Worker tasks (default 2).")] = None,
    steps: Annotated[int, typer.Option("--steps", metavar="N", callback=_capped("--steps", 1, 1000, "a lesson, not a training job"), help="Training steps: each worker's own (async), or global steps (--sync).")] = 5,
    sync: Annotated[bool, typer.Option("--sync", help="SyncReplicasOptimizer: one averaged update per global step, from every worker's gradient.")] = False,
    cluster_spec: Annotated[str | None, typer.Option("--cluster-spec", metavar="FILE", help="The cluster as ClusterSpec JSON or a TF_CONFIG object: jobs ps and worker, local addresses, ports as given (TF_CONFIG is read when set and neither this nor --ps/--workers is given).")] = None,
    copies: Annotated[bool, typer.Option("--copies", help="Trace each worker's first step: the _Send/_Recv copies between tasks.")] = False,
    api: Annotated[Api, typer.Option("--api", help="tf1: between-graph training, each worker its own session (replica_device_setter); tf2: ParameterServerStrategy with a ClusterCoordinator joining as /job:chief.")] = Api.tf1,
    all_rows: AllOpt = False,
    lang: LangOpt = None,
    as_json: JsonOpt = False,
    svg: SvgOpt = None,
    dot: DotOpt = None,
    graph_svg: GraphSvgOpt = None,
    force: ForceOpt = False,
) -> None:
    """Start a real ps/worker cluster on this machine (one process per task, TensorFlow's gRPC
    servers) and train a softmax regression between-graph: variables round-robin over the ps tasks
    (replica_device_setter), compute on the workers, async by default.

    Shows the tasks (address, pid, exit code), every worker's placements by job/task, where each
    variable lives, the loss and global step per worker, and how async and sync differ in what ran.
    On Linux the cluster runs in a private network namespace; elsewhere its ports listen on every
    interface, unauthenticated, while it runs. Every task is ended before the command returns;
    a task that dies or never starts is named (exit 1); Ctrl-C exits 130, SIGTERM 143.
    Example: placement cluster --ps 2 --workers 2 --steps 10 --sync
    """
    from placement_cli import clusterspec  # noqa: PLC0415
    from placement_cli.exceptions import Terminated, UsageProblem  # noqa: PLC0415
    from placement_cli.lessons.cluster import run  # noqa: PLC0415
    from placement_cli.runtime.cluster_launch import check_cluster  # noqa: PLC0415

    described = None
    if cluster_spec is not None:
        if ps is not None or workers is not None:
            raise UsageProblem("give --cluster-spec FILE or --ps/--workers, not both")
        described = clusterspec.from_file(cluster_spec)
    elif ps is None and workers is None:
        described = clusterspec.from_environment()
    elif os.environ.get("TF_CONFIG", "").strip():
        _say(_("TF_CONFIG is set and ignored: --ps and --workers describe the cluster"))
    addresses = check_cluster(described) if described is not None else None
    if addresses is not None:
        ps, workers = len(addresses["ps"]), len(addresses["worker"])
    ps = 2 if ps is None else ps
    workers = 2 if workers is None else workers
    if api is Api.tf2 and (sync or copies):
        raise UsageProblem("--api tf2 takes neither --sync nor --copies (ParameterServerStrategy trains async, "
                           "and its remote functions record no partition graphs)")
    if api is Api.tf2 and addresses is not None:
        raise UsageProblem("--api tf2 with --cluster-spec/TF_CONFIG is not supported: give --ps and --workers")
    pictures = _pictures("placement cluster", as_json=as_json, force=force, svg=svg, dot=dot, graph_svg=graph_svg,
                         protect=(cluster_spec,) if cluster_spec else ())
    request = {"api": api.value, "ps": ps, "workers": workers, "steps": steps, "sync": sync, "copies": copies, "lr": 0.5,
               # a hang guard: --sync workers legitimately wait for each other's gradients, which on
               # a loaded 2-core machine took over 10 s
               "operation_timeout_ms": 30_000 if sync else 10_000, "cluster": addresses}

    try:
        found_run = run(request, _cluster_progress)
    except Terminated as exc:
        _say(_("{signal}: every task of the cluster was ended").format(signal=exc))
        raise typer.Exit(128 + exc.signum) from None  # as shells count a signal: 143 for SIGTERM, 129 for SIGHUP
    from placement_cli.lessons.cluster import build  # noqa: PLC0415

    found = build(found_run, sync=sync, steps=steps, copies=copies, api=api.value)
    code = int(ExitCode.OK if found.complete else ExitCode.PLACEMENT_FAILED)
    if found_run.own_failure:  # placement's supervisor failed, not the cluster: as inspect's own child
        code = int(ExitCode.INTERNAL)
    _state["code"] = code
    if as_json:
        _print_json(found.to_dict())
    else:
        from placement_cli.render.cluster import cluster_group  # noqa: PLC0415
        from placement_cli.render.console import is_terminal, screen_rows  # noqa: PLC0415
        from placement_cli.render.table import View  # noqa: PLC0415

        console = _console()
        view = View(all_rows=all_rows, screen_rows=screen_rows(console.file), fit=is_terminal(console.file))
        console.print(_ascii_safe(cluster_group(found, view)), crop=False)
        sys.stdout.flush()
    _save_pictures(pictures, found.graph)  # the graph: each worker's nodes on its task, the ps nodes drawn once
    if found_run.problem is not None:
        from placement_cli.i18n import shown  # noqa: PLC0415

        _say(shown(found_run.problem))
    if code:
        raise typer.Exit(code)


class Reduce(str, Enum):
    collective = "collective"
    one_device = "one-device"
    hierarchical = "hierarchical"
    nccl = "nccl"


@app.command()
@guarded
def mirrored(
    replicas: Annotated[int | None, typer.Option("--replicas", metavar="N", callback=_capped("--replicas", 1, LESSON_DEVICES["mirrored"][0], LESSON_DEVICES["mirrored"][2]), help="How many replicas (default 2; with --devices or --gpus, one per device).")] = None,
    devices: Annotated[str | None, typer.Option("--devices", metavar="DEV,DEV", callback=_devices_option, help="The replicas' devices, e.g. /gpu:0,/gpu:1 (default: logical CPUs /cpu:0../cpu:N-1).")] = None,
    gpus: Annotated[str | None, typer.Option("--gpus", metavar="N,N|N-N", callback=_gpus_option, help="Replicas on these GPUs: 0,1 or 0-3.")] = None,
    reduce: Annotated[Reduce, typer.Option("--reduce", help="The cross-device all-reduce: collective (MirroredStrategy's default), one-device (ReductionToOneDevice), hierarchical (HierarchicalCopyAllReduce), nccl (NcclAllReduce, GPUs only).")] = Reduce.collective,
    fit: Annotated[bool, typer.Option("--fit", help="Train with Keras fit instead of the custom loop (strategy.run, all_reduce, strategy.reduce).")] = False,
    steps: Annotated[int, typer.Option("--steps", metavar="N", callback=_capped("--steps", 1, 1_000, "a lesson, not a training job"), help="Training steps to run.")] = 3,
    batch: Annotated[int, typer.Option("--batch", metavar="N", callback=_capped("--batch", 1, 8_192, "synthetic 784-feature examples made per step"), help="Global batch per step, split evenly over the replicas.")] = 64,
    lr: Annotated[float, typer.Option("--lr", metavar="RATE", callback=_lr_option, help="Learning rate of plain gradient descent.")] = 0.1,
    cpus: CpusOpt = None,
    virtual_gpus: VGpusOpt = None,
    copies: Annotated[bool, typer.Option("--copies", help="The first step's _Send/_Recv with their bytes (eager run metadata); bytes a collective moves out of sight are computed, and marked so.")] = False,
    device: DeviceFilterOpt = None,
    op: OpFilterOpt = None,
    node: NodeFilterOpt = None,
    top: TopOpt = None,
    log: LogOpt = False,
    all_rows: AllOpt = False,
    lang: LangOpt = None,
    as_json: JsonOpt = False,
    svg: SvgOpt = None,
    dot: DotOpt = None,
    graph_svg: GraphSvgOpt = None,
    force: ForceOpt = False,
) -> None:
    """Train the seed's 784-128-10 Keras model under tf.distribute.MirroredStrategy, for real.

    Replicas run on logical CPUs by default (--cpus N, replicas on /cpu:0../cpu:N-1), on GPUs with
    --gpus or --devices. Shows the replicas, where each variable's copies live, which all-reduce
    was used, the placements grouped per replica, and the loss per step.
    Example: placement mirrored --reduce one-device --copies
    """
    from placement_cli.filters import Filters, apply  # noqa: PLC0415
    from placement_cli.lessons.mirrored import MirroredSpec, check_split  # noqa: PLC0415
    from placement_cli.runtime.startup import RunOptions  # noqa: PLC0415

    chosen, cpus = _training_devices("mirrored", replicas, devices, gpus, cpus, default=2, first_cpu=0)
    check_split(batch, len(chosen))
    pictures = _pictures("placement mirrored", as_json=as_json, force=force, svg=svg, dot=dot, graph_svg=graph_svg)
    from placement_cli.lessons.mirrored import mirrored as run_mirrored  # noqa: PLC0415

    spec = MirroredSpec(devices=tuple(chosen), batch=batch, steps=steps, lr=lr, reduce=reduce.value, fit=fit)
    report = run_mirrored(spec, RunOptions(mode="eager", cpus=cpus, virtual_gpus=virtual_gpus, copies=copies))
    narrowed = apply(report, Filters(device, op, node, top))
    _print_training(narrowed.report, as_json=as_json, show_log=log, all_rows=all_rows, soft=None, filtered=narrowed)
    _save_pictures(pictures, narrowed.report)
    _training_exit(report)


@_option_callback
def _step_option(value: str | None) -> str | None:
    from placement_cli.lessons.demo import select  # noqa: PLC0415 - no TensorFlow: the steps are data

    if value is not None:
        try:
            select(value)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None
    return value


@app.command()
@guarded
def demo(
    list_steps: Annotated[bool, typer.Option("--list", help="List the steps and exit.")] = False,
    step: Annotated[str | None, typer.Option("--step", metavar="K|K-M|K,M", callback=_step_option, help="Run only these steps: 3, 3-5 or 2,4.")] = None,
    pause: Annotated[bool | None, typer.Option("--pause/--no-pause", show_default=False, help="Wait for Enter between steps (default: when stdin and stdout are terminals). With stdout redirected the prompt goes to stderr.")] = None,
    all_rows: AllOpt = False,
    lang: LangOpt = None,
    as_json: JsonOpt = False,
    svg: SvgOpt = None,
    force: ForceOpt = False,
) -> None:
    """Walk through the guide's lessons in order, for a class: each step explains, shows the code
    that runs, runs it live and says what to notice in the result.

    Devices, logging placement, manual placement, a device that does not exist, soft placement,
    towers, copies between devices, then the training lessons (train, mirrored) in one TensorFlow
    start-up, and a real ps/worker cluster (cluster) in processes of its own. Without GPUs the GPU
    steps run on logical CPUs, and say so.
    Example: placement demo --lang zh --step 4-5
    """
    from placement_cli.lessons.demo import STEPS, select  # noqa: PLC0415

    chosen = select(step)
    if list_steps and step is not None:
        raise _fail(ExitCode.USAGE, _("--list lists every step and runs none: use --list or --step, not both"))
    pictures = _pictures("placement demo", as_json=as_json, force=force, svg=svg)
    if list_steps:
        if as_json:
            _print_json({"steps": [{"number": k, "key": s.key, "title": s.title} for k, s in enumerate(STEPS, 1)]})
        else:
            from placement_cli.render.demo import steps_table  # noqa: PLC0415

            _console().print(_ascii_safe(steps_table(STEPS)))
            _save_pictures(pictures)
        return
    from dataclasses import replace  # noqa: PLC0415

    from placement_cli.lessons.demo import start  # noqa: PLC0415

    machine = replace(start(), progress=_cluster_progress)  # the cluster step's tasks, a line each as they start
    if as_json:
        _demo_json(chosen, machine)
        return
    from placement_cli.exceptions import Terminated  # noqa: PLC0415

    try:
        failed = _demo_tables(chosen, machine, _pausing(pause), all_rows)
    except (KeyboardInterrupt, Terminated):  # Ctrl-C at a pause is how a class stops: keep what was shown
        if pictures.svg is not None:
            with contextlib.suppress(typer.Exit):
                _save_pictures(pictures)
        raise
    _save_pictures(pictures)  # the slides hold the steps that failed too
    _demo_failed(failed)


def _pausing(pause: bool | None) -> bool:
    from placement_cli.render.console import is_terminal  # noqa: PLC0415

    return pause if pause is not None else is_terminal(sys.stdin) and is_terminal(sys.stdout)


def _demo_failed(failed: list[str]) -> None:
    if failed:
        _say(_("{count} step(s) failed: {steps}").format(count=len(failed), steps="; ".join(failed)))
        raise typer.Exit(int(ExitCode.PLACEMENT_FAILED))


def _demo_tables(chosen: list[int], machine: Any, pause: bool, all_rows: bool) -> list[str]:
    """Print the chosen steps; the failed ones, named."""
    from placement_cli.lessons.demo import STEPS, gpu_note, run_step  # noqa: PLC0415
    from placement_cli.render.console import is_terminal, make_console, screen_rows  # noqa: PLC0415
    from placement_cli.render.demo import machine_note, pause_prompt, step_group  # noqa: PLC0415
    from placement_cli.render.table import View  # noqa: PLC0415

    console = _console()
    note = machine_note(gpu_note(machine))
    if note is not None:
        console.print(_ascii_safe(note))
    view = View(all_rows=all_rows, screen_rows=screen_rows(console.file), fit=is_terminal(console.file))
    failed: list[str] = []
    for i, k in enumerate(chosen):
        step = STEPS[k - 1]
        if pause and i:
            # the prompt goes to the terminal: stdout when it is one, else stderr (> file keeps only the steps)
            asking = console if is_terminal(sys.stdout) else make_console(sys.stderr)
            asking.print(_ascii_safe(pause_prompt(k, step.title)), end="")
            asking.file.flush()
            if sys.stdin is None or not sys.stdin.readline():  # EOF: no one to press Enter, go on unpaused
                asking.print()
                pause = False
        outcome = run_step(step, machine)
        console.print(_ascii_safe(step_group(k, len(STEPS), step, outcome, step.args(machine), view)), crop=False)
        sys.stdout.flush()
        if not outcome.ok:
            failed.append(f"step {k} ({step.key}): {outcome.problem}")
    if failed:
        _state["code"] = int(ExitCode.PLACEMENT_FAILED)  # kept if a picture cannot be written
    return failed


def _demo_json(chosen: list[int], machine: Any) -> None:
    from placement_cli.lessons.demo import STEPS, gpu_note, run_step  # noqa: PLC0415
    from placement_cli.render.demo import notice_text  # noqa: PLC0415
    from placement_cli.render.json import report_dict  # noqa: PLC0415

    steps, failed = [], []
    for k in chosen:
        step = STEPS[k - 1]
        outcome = run_step(step, machine)
        result = outcome.result
        if outcome.kind in ("report", "training"):
            result = report_dict(result, run=True)
        elif outcome.kind in ("cluster", "inventory"):
            result = result.to_dict()
        steps.append({"number": k, "key": step.key, "title": step.title, "explanation": step.explain,
                      "code": step.source(), "args": step.args(machine), "code_ran": outcome.ran,
                      "ok": outcome.ok, "problem": outcome.problem,
                      "notice": notice_text(outcome, translate=False) if outcome.ok else None, "result": result})
        if not outcome.ok:
            failed.append(f"step {k} ({step.key}): {outcome.problem}")
    _print_json({"gpus": machine.gpus, "note": gpu_note(machine), "steps": steps})
    _demo_failed(failed)


def _silence_stdout() -> None:
    """stdout is a closed pipe: point fd 1 at /dev/null so python's flush at exit stays quiet."""
    import os  # noqa: PLC0415

    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)


def main() -> None:
    app(prog_name="placement")
