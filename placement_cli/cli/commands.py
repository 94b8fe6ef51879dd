"""The typer app: its commands registered and guarded (signals, one machine) and its root options
(outcome.py: what a command returns; funnel.py: exceptions to exit codes; emit.py: where an outcome
is printed; the package, cli/__init__.py: the app a command line runs)."""

from __future__ import annotations

import contextlib
import functools
import signal
import sys
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer
from typer.core import TyperGroup

from placement_cli import __version__
from placement_cli.cli.emit import emit
from placement_cli.cli.funnel import TERMINATING, TRACEBACK, fail, funnel, internal, say
from placement_cli.cli.outcome import ExitCode, Outcome
from placement_cli.exceptions import ARRIVED, Terminated, interrupt
from placement_cli.i18n import _, speaking
from placement_cli.messages import cut
from placement_cli.runtime.startup import drop_cluster_config


class _Invocation(TyperGroup):
    """The app's root command: each invocation speaks its own language (its --lang, else the locale's,
    chosen once by the option), and the language from before is back when it ends (tests, a notebook).
    Kept by the root context, not a frame around the command: TensorFlow's error of a graph built in the
    command lists the frames above it, and the report counts that text's lines."""

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
        kept = contextlib.ExitStack()
        kept.enter_context(speaking())
        try:
            ctx = super().make_context(info_name, args, parent, **extra)
        except BaseException:
            kept.close()
            raise
        ctx.call_on_close(kept.close)  # after the command, whatever ended it
        return ctx


def new_app() -> typer.Typer:
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


app = new_app()

# Every command, in the order `placement --help` lists them, and the module of cli/ that declares it
# (with command()): a run loads that module alone (cli.app_for); --help and the whole app load them all.
COMMANDS = {"show": "run", "tower": "run", "errors": "run", "devices": "run", "inspect": "cluster", "parse": "parse",
            "diff": "diff", "check": "check", "trace": "trace", "train": "training", "cluster": "cluster",
            "mirrored": "training", "demo": "demo"}


F = TypeVar("F", bound=Callable[..., Any])


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
    ARRIVED.append(signum)
    raise Terminated(signum)


def _catch_termination() -> dict[int, Any]:
    """SIGTERM and SIGHUP raise Terminated (unless ignored), Ctrl-C its KeyboardInterrupt, each arrival
    kept (exceptions.ARRIVED); the handlers they had, to put back."""


    saved: dict[int, Any] = {}
    try:
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            saved[signal.SIGINT] = signal.signal(signal.SIGINT, interrupt)
    except ValueError:  # not the main thread: signals stay as they are
        return saved
    for name in TERMINATING:
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
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def _one_machine(command: str) -> None:
    """A TF_CONFIG left in the environment leaves it before TensorFlow starts, and the user is told once."""

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
        ARRIVED.clear()  # this command's signals, not an earlier one's in the same process (a notebook, tests)
        kwargs.pop("lang", None)  # every command's --lang: its callback chose the language (options.speaks)
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
    ctx.meta[TRACEBACK] = traceback
    if sys.stdout is None and ctx.invoked_subcommand != "trace":  # `placement show >&-`
        raise fail(ExitCode.USAGE, "standard output is closed: there is nowhere to write the report")


def command_name(info: Any) -> str:
    name: str = info.name or info.callback.__name__.lower().replace("_", "-")
    return name
