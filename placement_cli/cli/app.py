"""The typer app, exit codes, the one error funnel, signal handling, and emit(): where an outcome is printed."""

from __future__ import annotations

import contextlib
import errno
import functools
import sys
from collections.abc import Callable, Iterable
from enum import IntEnum
from typing import Annotated, Any, NamedTuple, TypeVar

import typer
from typer.core import TyperGroup

from placement_cli import __version__
from placement_cli.i18n import N_, _, speaking, translated

class _Invocation(TyperGroup):
    """The app's root command: each invocation speaks its own language (its --lang, else the locale's,
    chosen once by the option), and the language from before is back when it ends (tests, a notebook)."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        with speaking():
            return super().main(*args, **kwargs)


def _typer() -> typer.Typer:
    """An app with placement's settings (the commands are registered on ``app``)."""
    return typer.Typer(
        cls=_Invocation,
        name="placement",
        help="See where TensorFlow places every op, and why.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,  # plain help: rich help costs 2x the start-up time
        context_settings={"help_option_names": ["-h", "--help"]},
    )


app = _typer()

# The order `placement --help` lists the commands in (each module registers its own, with command()).
COMMANDS = ("show", "tower", "errors", "devices", "inspect", "parse", "diff", "check", "trace", "train", "cluster",
            "mirrored", "demo")
_TRACEBACK = "placement.traceback"  # the context's meta key: --traceback for this invocation


class ExitCode(IntEnum):
    OK = 0
    PLACEMENT_FAILED = 1  # TensorFlow could not place the graph, or a run did not produce its result
    USAGE = 2  # bad usage or unreadable input
    INTERNAL = 3  # a bug in placement itself; --traceback shows it
    HUNG_UP = 129  # SIGHUP (the terminal closed), as shells count it
    INTERRUPTED = 130  # Ctrl-C (SIGINT), as shells count it
    TERMINATED = 143  # SIGTERM (kill, a job scheduler), as shells count it


def signalled(signum: int) -> ExitCode:
    """The exit code of a command a signal ended, as shells count it: 128 + its number."""
    return ExitCode(128 + signum)


F = TypeVar("F", bound=Callable[..., Any])


# --- what a command returns (frozen: named tuples, which cost a fifth of a dataclass at every start-up) ---

class Said(NamedTuple):
    """A line on stderr, in its place among what the command prints."""

    text: str


class Json(NamedTuple):
    """One JSON document on stdout."""

    value: Any


class Verbatim(NamedTuple):
    """Printed as it is (TensorFlow's log, a rule): no ASCII stand-ins; ``soft_wrap`` keeps lines whole."""

    renderable: Any
    soft_wrap: bool = False


class Pause(NamedTuple):
    """Wait for Enter before what follows (the demo's steps); the prompt goes to the terminal."""

    prompt: str


class Pictures(NamedTuple):
    """The files a command writes beside what it prints (checked before it runs)."""

    svg: str | None = None
    dot: str | None = None
    graph_svg: str | None = None
    force: bool = False
    command: str = "placement"


class Ending(NamedTuple):
    """How a command ends once its output is printed: its exit code and the lines said last."""

    code: int = ExitCode.OK
    notices: tuple[str, ...] = ()


class Outcome(NamedTuple):
    """What a command did. ``output`` is printed in order: renderables (tables, panels), Json, Said,
    Verbatim and Pause; a lazy iterable is printed as it is made (the demo's steps run as they are
    shown), and ``finish`` then says how it ended. Then the pictures are written, the notices said,
    and the command exits with its code."""

    code: int = ExitCode.OK  # an ExitCode, or the exit code of the script trace ran
    output: Iterable[Any] = ()
    pictures: Pictures = Pictures()
    graph: Any = None  # what --dot and --graph-svg draw
    notices: tuple[str, ...] = ()
    keep_code: bool = False  # a picture that cannot be written is said, the code stays (trace: the script's)
    finish: Callable[[], Ending] | None = None
    output_closed: bool = False  # nowhere to print (trace: the script closed its stdout): exit with the code
    # the output is a program's too (trace): once a reader closed it, placement says nothing more after the
    # program's own last words; else the notices still say what they say of the inputs
    program_output: bool = False


# --- diagnostics and exit codes -------------------------------------------------------------------

def say(message: str) -> None:
    """One diagnostic line on stderr, never wrapped, control characters removed (nothing if stderr is closed)."""
    from placement_cli.messages import clean  # noqa: PLC0415 - no rich: a Ctrl-C while rich loads still gets its line

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


def fail(code: int, message: str) -> typer.Exit:
    say(message)
    return typer.Exit(int(code))


def _traceback_wanted() -> bool:
    from typer.main import get_current_context  # type: ignore[attr-defined]  # noqa: PLC0415 - typer's (click's)

    try:
        return bool(get_current_context().meta.get(_TRACEBACK))
    except RuntimeError:  # no command line being run (a test calling a helper)
        return False


def internal(exc: BaseException) -> typer.Exit:
    """An unexpected error: exit 3 with one line; with --traceback, its traceback instead (exit 3 too)."""
    if _traceback_wanted():
        import traceback  # noqa: PLC0415

        with contextlib.suppress(OSError, ValueError, AttributeError):  # stderr closed: the code still says it
            traceback.print_exception(exc, file=sys.stderr)
        return typer.Exit(int(ExitCode.INTERNAL))
    return fail(ExitCode.INTERNAL, _("internal error: {kind}: {error} (rerun with --traceback)").format(
        kind=type(exc).__name__, error=exc))


# Errors of writing to a closed, full or broken output (stdout, a --save-log file).
_OUTPUT_ERRNOS = frozenset({errno.EPIPE, errno.ENOSPC, errno.EBADF, errno.EIO, errno.EDQUOT, errno.EFBIG})
_TERMINATING = {"SIGTERM": N_("terminated"), "SIGHUP": N_("hung up")}


def signal_said(signum: int) -> str:
    """What placement says when a signal it received (and passed on) ended the run: interrupted, terminated, hung up."""
    import signal  # noqa: PLC0415

    name = signal.Signals(signum).name
    return _("interrupted") if name == "SIGINT" else translated(_TERMINATING.get(name, name))


def _usage_error(exc: BaseException) -> bool:
    from placement_cli.exceptions import DeviceSpecError, InputError, UsageProblem  # noqa: PLC0415

    return isinstance(exc, (InputError, UsageProblem, DeviceSpecError))


def funnel(exc: BaseException, code: int = ExitCode.OK) -> BaseException:
    """THE place an exception becomes an exit code. ``code``: what the command had decided when it
    happened, kept when only the output could not be written (a failed run keeps its 1)."""
    from placement_cli.exceptions import Terminated  # noqa: PLC0415

    if isinstance(exc, (typer.Exit, typer.Abort, typer.BadParameter)):
        return exc
    exc = _signal_behind(exc)
    if isinstance(exc, Terminated):
        import signal  # noqa: PLC0415

        return fail(signalled(exc.signum), translated(_TERMINATING[signal.Signals(exc.signum).name]))
    if isinstance(exc, KeyboardInterrupt):
        return fail(ExitCode.INTERRUPTED, _("interrupted"))
    if not isinstance(exc, Exception):
        return exc  # SystemExit, GeneratorExit: not ours to translate
    if _usage_error(exc):
        return fail(ExitCode.USAGE, str(exc))
    if isinstance(exc, BrokenPipeError):  # | head -1: the reader has all it wanted, which is no error
        silence_stdout()
        return typer.Exit(int(code))
    if isinstance(exc, OSError) and exc.errno in _OUTPUT_ERRNOS:
        silence_stdout()
        where = f"{exc.filename}: " if exc.filename else ""
        # a run that failed keeps its 1; output that could not be written is never a success
        return fail(code or ExitCode.USAGE, f"cannot write the output: {where}{exc.strerror or exc}")
    return internal(exc)


def _signal_behind(exc: BaseException) -> BaseException:
    """The Ctrl-C, SIGTERM or SIGHUP an error stands for: a Ctrl-C landing while TensorFlow loaded an
    extension module came out as "ImportError: initialization failed" (pybind11's, the interrupt its
    cause), or as TensorFlow Lite's lazy import's RuntimeError naming it in words only, an internal
    error with exit 3. An error after a signal arrived is that signal. ``exc`` itself when none did."""
    from placement_cli.exceptions import ARRIVED, Terminated, signal_exception  # noqa: PLC0415

    seen: set[int] = set()
    behind: BaseException | None = exc
    while behind is not None and id(behind) not in seen:
        if isinstance(behind, (KeyboardInterrupt, Terminated)):  # the first signal decides: a second one
            return signal_exception(ARRIVED[0]) if ARRIVED else behind  # raised over it as the command ended
        seen.add(id(behind))
        behind = behind.__cause__ or behind.__context__
    if ARRIVED and isinstance(exc, Exception):  # told as another error, its cause lost (TensorFlow's lazy imports)
        return signal_exception(ARRIVED[0])
    return exc


def silence_stdout() -> None:
    """stdout is a closed pipe: point fd 1 at /dev/null so python's flush at exit stays quiet."""
    import os  # noqa: PLC0415

    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)


def option_callback(fn: F) -> F:
    """An option's callback runs while the command line is read, outside ``guarded``: an exception
    it did not mean (a bug) is an internal error too (exit 3, its traceback behind --traceback),
    never a bare traceback with exit 1."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, typer.BadParameter):
            raise
        except Exception as exc:  # noqa: BLE001 - the one funnel: an unexpected failure becomes exit 3
            raise internal(exc) from None

    return wrapper  # type: ignore[return-value]


# --- signals and the guard --------------------------------------------------------------------------

def _raise_terminated(signum: int, _frame: Any) -> None:
    from placement_cli.exceptions import ARRIVED, Terminated  # noqa: PLC0415

    ARRIVED.append(signum)
    raise Terminated(signum)


def _catch_termination() -> dict[int, Any]:
    """SIGTERM and SIGHUP raise Terminated (unless ignored), Ctrl-C its KeyboardInterrupt, each arrival
    kept (exceptions.ARRIVED); the handlers they had, to put back."""
    import signal  # noqa: PLC0415

    from placement_cli.exceptions import interrupt  # noqa: PLC0415

    saved: dict[int, Any] = {}
    try:
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            saved[signal.SIGINT] = signal.signal(signal.SIGINT, interrupt)
    except ValueError:  # not the main thread: signals stay as they are
        return saved
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


def _one_machine(command: str) -> None:
    """A TF_CONFIG left in the environment leaves it before TensorFlow starts, and the user is told once."""
    from placement_cli.messages import cut  # noqa: PLC0415
    from placement_cli.runtime.startup import drop_cluster_config  # noqa: PLC0415

    stale = drop_cluster_config()
    if stale is not None:
        value = cut(" ".join(stale.split()), 60, "\N{HORIZONTAL ELLIPSIS}")  # one line, cut to fit one
        say(_("TF_CONFIG is set ({value}) and ignored: `placement {command}` runs on this machine alone "
              "(cluster and inspect read TF_CONFIG)").format(value=value, command=command))


def command(*, one_machine: bool | Callable[[dict[str, Any]], bool] = False, own_signals: bool = False,
            **settings: Any) -> Callable[[Callable[..., Outcome]], Callable[..., None]]:
    """Register a command on the app, guarded; what is true of it is said here, where it is declared.
    ``one_machine``: it runs TensorFlow on this machine alone (a TF_CONFIG in the environment is not
    its own: dropped, and said), or a test of its arguments saying when; ``own_signals``: it handles
    SIGTERM and SIGHUP itself (trace forwards every signal to its script). ``settings``: typer's."""

    def register(fn: Callable[..., Outcome]) -> Callable[..., None]:
        return app.command(**settings)(guarded(fn, one_machine=one_machine, own_signals=own_signals))

    return register


def guarded(fn: Callable[..., Outcome], *, one_machine: bool | Callable[[dict[str, Any]], bool] = False,
            own_signals: bool = False) -> Callable[..., None]:
    """A command: run it, emit() its outcome; every exception goes through the funnel. SIGTERM and
    SIGHUP end a command like Ctrl-C does (unless it has ``own_signals``)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        from placement_cli.exceptions import ARRIVED  # noqa: PLC0415

        ARRIVED.clear()  # this command's signals, not an earlier one's in the same process (a notebook, tests)
        saved = {} if own_signals else _catch_termination()
        if one_machine(kwargs) if callable(one_machine) else one_machine:
            _one_machine(fn.__name__)
        try:
            try:
                outcome = fn(*args, **kwargs)
            except BaseException as exc:  # noqa: BLE001 - the one funnel names every ending
                raise funnel(exc) from None
            emit(outcome)
        finally:
            outputs = sys.modules.get("placement_cli.outputs")  # loaded only by commands that write files
            if outputs is not None:
                outputs.remove_empty_made()
            _restore_signals(saved)

    return wrapper


# --- emit ------------------------------------------------------------------------------------------

class _Printer:
    """stdout for one emit(): a console made when first needed (recording with --svg)."""

    def __init__(self, record: bool) -> None:
        self.record = record
        self._console: Any = None
        self.pausing = True

    @property
    def printed(self) -> bool:
        """Whether anything went to stdout's console (what --svg draws)."""
        return self._console is not None

    @property
    def console(self) -> Any:
        if self._console is None:
            from placement_cli.render.console import make_console  # noqa: PLC0415 - keeps --help fast

            self._console = make_console(record=self.record)
        return self._console

    def show(self, item: Any) -> None:
        if isinstance(item, Said):
            say(item.text)
        elif isinstance(item, Json):
            from placement_cli.render.console import unicode_stream  # noqa: PLC0415
            from placement_cli.render.json import write  # noqa: PLC0415

            write(item.value, sys.stdout, ascii_only=not unicode_stream(sys.stdout))  # long lists as encoded
            sys.stdout.write("\n")
            sys.stdout.flush()  # a closed or full output fails here, inside the command, with its exit code
        elif isinstance(item, Verbatim):
            self.console.print(item.renderable, soft_wrap=item.soft_wrap)
        elif isinstance(item, Pause):
            self.pause(item.prompt)
        else:
            from placement_cli.render.console import AsciiSafe  # noqa: PLC0415

            self.console.print(AsciiSafe(item), crop=False)
            sys.stdout.flush()

    def pause(self, prompt: str) -> None:
        """The prompt goes to the terminal: stdout when it is one, else stderr (> file keeps only the
        steps). End of input: no one to press Enter, go on unpaused."""
        if not self.pausing:
            return
        from placement_cli.render.console import AsciiSafe, is_terminal, make_console  # noqa: PLC0415

        asking = self.console if is_terminal(sys.stdout) else make_console(sys.stderr)
        asking.print(AsciiSafe(prompt), end="")
        asking.file.flush()
        from placement_cli.runtime.wakeup import read_line  # noqa: PLC0415

        if not read_line(sys.stdin):
            asking.print()
            self.pausing = False


def emit(outcome: Outcome) -> None:
    """Print the outcome, write its pictures, say its notices, and exit with its code."""
    if outcome.output_closed:  # | head -1: the report has nowhere to go, which is no error
        silence_stdout()
        raise typer.Exit(int(outcome.code))
    pictures = outcome.pictures
    printer = _Printer(record=pictures.svg is not None)
    code, notices = outcome.code, outcome.notices
    try:
        try:
            for item in outcome.output:
                printer.show(item)
        except BaseException as exc:
            from placement_cli.exceptions import Terminated  # noqa: PLC0415

            # the slides keep what was shown; nothing shown yet: a file --force would replace stays as it is
            if isinstance(exc, (KeyboardInterrupt, Terminated)) and pictures.svg is not None and printer.printed:
                _save_pictures(printer, pictures, None, code, keep_code=True)
            if isinstance(exc, BrokenPipeError) and not outcome.program_output:  # | head -c took what it wanted
                for notice in notices:
                    say(notice)
            raise
        if outcome.finish is not None:
            ending = outcome.finish()
            code, notices = ending.code, notices + ending.notices
        _save_pictures(printer, pictures, outcome.graph, code, keep_code=outcome.keep_code)
        for notice in notices:
            say(notice)
    except BaseException as exc:  # noqa: BLE001 - the one funnel names every ending
        raise funnel(exc, code) from None
    raise typer.Exit(int(code))


def _save_pictures(printer: _Printer, pictures: Pictures, graph: Any, code: int, *, keep_code: bool) -> None:
    """Write what the command printed (--svg) and the graph (--dot, --graph-svg). A file that cannot
    be written after all (its folder went away, a read-only or full disk) is one line and exit 2, or
    the command's own code; with ``keep_code``, the line only."""
    from placement_cli.exceptions import UsageProblem  # noqa: PLC0415

    wanted: list[tuple[str, str, Callable[[], str]]] = []
    if pictures.svg is not None:
        from placement_cli.render.svg import render_svg  # noqa: PLC0415

        wanted.append(("--svg", pictures.svg, lambda: render_svg(printer.console, pictures.command)))
    if graph is not None:
        from placement_cli.render.graph import render_dot, render_graph_svg  # noqa: PLC0415

        if pictures.dot is not None:
            wanted.append(("--dot", pictures.dot, lambda: render_dot(graph)))
        if pictures.graph_svg is not None:
            wanted.append(("--graph-svg", pictures.graph_svg, lambda: render_graph_svg(graph)))
    if not wanted:
        return
    from placement_cli.outputs import write_file  # noqa: PLC0415

    for option, path, render in wanted:
        try:
            write_file(path, render(), pictures.force)
        except UsageProblem as exc:  # the file appeared meanwhile: kept, and a failed run keeps its 1
            problem = str(exc)
        except BrokenPipeError:  # --svg /dev/stdout | head -1: the reader has all it wanted
            raise
        except OSError as exc:
            problem = _("{option} {path}: cannot write it ({why})").format(option=option, path=path,
                                                                           why=exc.strerror or exc)
        else:
            continue
        failed = fail(code or ExitCode.USAGE, problem)
        if not keep_code:
            raise failed


# --- the app ----------------------------------------------------------------------------------------

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
    ctx.meta[_TRACEBACK] = traceback
    if sys.stdout is None and ctx.invoked_subcommand != "trace":  # `placement show >&-`
        raise fail(ExitCode.USAGE, "standard output is closed: there is nowhere to write the report")


def command_name(info: Any) -> str:
    name: str = info.name or info.callback.__name__.lower().replace("_", "-")
    return name


def app_for(args: list[str]) -> typer.Typer:
    """The app to run for ``args``: only the command named, when nothing but --traceback comes before
    it (typer builds every registered command's options at start: ten other commands cost more than
    parsing a log); the whole app for --help, --version and anything else."""
    for arg in args:
        if arg == "--traceback":
            continue
        found = [info for info in app.registered_commands if command_name(info) == arg]
        if not found:
            return app
        one = _typer()
        one.registered_callback = app.registered_callback
        one.registered_commands = found
        return one
    return app
