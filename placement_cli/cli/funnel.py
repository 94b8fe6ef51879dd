"""Diagnostics on stderr, and THE place an exception becomes an exit code."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import sys
import traceback

import typer
from typer.main import get_current_context  # type: ignore[attr-defined]  # typer's (click's)

from placement_cli.cli.outcome import ExitCode, signalled
from placement_cli.exceptions import ARRIVED, DeviceSpecError, InputError, Terminated, UsageProblem, signal_exception
from placement_cli.i18n import N_, _, translated
from placement_cli.messages import clean

TRACEBACK = "placement.traceback"  # the context's meta key: --traceback for this invocation


def say(message: str) -> None:
    """One diagnostic line on stderr, never wrapped, control characters removed (nothing if stderr is closed)."""

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
    try:
        return bool(get_current_context().meta.get(TRACEBACK))
    except RuntimeError:  # no command line being run (a test calling a helper)
        return False


def internal(exc: BaseException) -> typer.Exit:
    """An unexpected error: exit 3 with one line; with --traceback, its traceback instead (exit 3 too)."""
    if _traceback_wanted():
        with contextlib.suppress(OSError, ValueError, AttributeError):  # stderr closed: the code still says it
            traceback.print_exception(exc, file=sys.stderr)
        return typer.Exit(int(ExitCode.INTERNAL))
    return fail(ExitCode.INTERNAL, _("internal error: {kind}: {error} (rerun with --traceback)").format(
        kind=type(exc).__name__, error=exc))


# Errors of writing to a closed, full or broken output (stdout, a --save-log file).
_OUTPUT_ERRNOS = frozenset({errno.EPIPE, errno.ENOSPC, errno.EBADF, errno.EIO, errno.EDQUOT, errno.EFBIG})
TERMINATING = {"SIGTERM": N_("terminated"), "SIGHUP": N_("hung up")}


def signal_said(signum: int) -> str:
    """What placement says when a signal it received (and passed on) ended the run: interrupted, terminated, hung up."""

    name = signal.Signals(signum).name
    return _("interrupted") if name == "SIGINT" else translated(TERMINATING.get(name, name))


def _usage_error(exc: BaseException) -> bool:
    return isinstance(exc, (InputError, UsageProblem, DeviceSpecError))


def funnel(exc: BaseException, code: int = ExitCode.OK) -> BaseException:
    """THE place an exception becomes an exit code. ``code``: what the command had decided when it
    happened, kept when only the output could not be written (a failed run keeps its 1)."""

    if isinstance(exc, (typer.Exit, typer.Abort, typer.BadParameter)):
        return exc
    exc = _signal_behind(exc)
    if isinstance(exc, Terminated):
        return fail(signalled(exc.signum), translated(TERMINATING[signal.Signals(exc.signum).name]))
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

    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)
