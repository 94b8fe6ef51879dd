"""The `placement` command's entry point: a Ctrl-C while Python still loads the command line (its
imports, typer reading the arguments, before the command's own handling is in force) is an
interruption like any later one: one line and exit 130, never a traceback. Once a signal has ended
the command, the process ends with that exit code: a second Ctrl-C, SIGTERM or SIGHUP arriving while
Python shuts down (its handlers put back to the defaults) cannot turn exit 130 into a death by signal,
and neither can CPython's memory of an interrupt the command caught (see _forget_caught_interrupts).
After the command ended, a signal during Python's shutdown is one line and its exit code too, and the
process ends before Python takes its modules down (see _end_quietly)."""

from __future__ import annotations

import atexit
import os
import signal
import sys

from placement_cli.exceptions import ARRIVED, Terminated

# the exit codes of a command a signal ended (SIGHUP, SIGINT, SIGTERM: 128 + the signal's number)
_SIGNALLED = {129: "SIGHUP", 130: "SIGINT", 143: "SIGTERM"}


# the line each signal that ends a command says (SIGHUP, SIGINT, SIGTERM)
_LINES = {1: "hung up", 2: "interrupted", 15: "terminated"}
_SIGINT = 2


def _say(signum: int) -> None:
    """The one line a signal that ended the command says."""
    try:
        sys.stderr.write(f"placement: {_LINES.get(signum, 'terminated')}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _interrupted() -> None:
    _say(_SIGINT)
    raise SystemExit(130)


def _terminated(signum: int) -> None:
    """SIGTERM or SIGHUP arrived before the command's own handling was in force (Python still loading
    the command line): one line and 128 + its number, as later."""
    _say(signum)
    raise SystemExit(128 + signum)


def _raise_terminated(signum: int, _frame: object) -> None:
    _RECEIVED.append(signum)
    ARRIVED.append(signum)
    raise Terminated(signum)


_RECEIVED: list[int] = []  # the SIGTERMs and SIGHUPs this handler saw, in order, and swallowed Ctrl-Cs


def _unraisable(unraisable: object) -> None:
    """A signal's exception raised where Python can only report it (a ``__del__``, a weakref's callback,
    an import lock's): no traceback, and the signal is kept, to end the command with its exit code."""
    exc = getattr(unraisable, "exc_value", None)
    if isinstance(exc, KeyboardInterrupt):
        _RECEIVED.append(_SIGINT)
    elif not isinstance(exc, Terminated):
        sys.__unraisablehook__(unraisable)  # type: ignore[arg-type]


def _ended(signum: int) -> None:
    if signum == _SIGINT:
        _interrupted()
    _terminated(signum)


def _catch_termination_early() -> None:
    """SIGTERM and SIGHUP end the command like Ctrl-C from the first line placement runs: their default
    action killed the process while it loaded the command line (a quarter of a second, more on a busy
    machine), a death by signal with no exit code. An ignored one (``nohup``) stays ignored; each
    command's guard finds this handler in place and keeps it (it raises what the guard's would)."""

    sys.unraisablehook = _unraisable
    for name in ("SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is None:
            continue
        try:
            if signal.getsignal(sig) == signal.SIG_DFL:
                signal.signal(sig, _raise_terminated)
        except (ValueError, OSError):  # not the main thread: signals stay as they are
            return


def _stay_ended() -> None:
    """The command ended by a signal: the same signals arriving again are ignored until the process
    is gone (its exit code is decided; nothing is left to interrupt)."""

    for name in _SIGNALLED.values():
        try:
            signal.signal(getattr(signal, name), signal.SIG_IGN)
        except (ValueError, OSError, AttributeError):  # not the main thread, or no such signal here
            pass


def _late_signal(signum: int, _frame: object) -> None:
    """A signal after the command ended, while Python shuts down (non-daemon threads joined, atexit
    callbacks run: TensorFlow's take a while): one line and 128 + its number, at once. An exception
    here would only be reported ("Exception ignored in atexit callback", a traceback) and lost."""
    _say(signum)

    os._exit(128 + signum)


_DECIDED: list[int] = []  # the exit code the command ended with, once main() is done


def _end_quietly() -> None:
    """A Ctrl-C, SIGTERM or SIGHUP after the command ended ends the process at once, with one line
    and its exit code, never a death by signal with no line: while Python code can still run, they go
    to _late_signal; the last atexit callback (registered first, run last) then ends the process with
    the command's exit code, its output flushed, without Python taking its modules down (TensorFlow's
    take a second and more, and Python has put the signals' default actions back by then)."""

    def end() -> None:
        if not _DECIDED:  # main() did not finish: Python ends as it would
            return
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            try:
                stream.flush()  # type: ignore[union-attr]
            except (OSError, ValueError, AttributeError):
                pass
        from placement_cli.runtime.capture.fds import flush_c_stdio  # noqa: PLC0415 - after the early signal handling is in force

        flush_c_stdio()  # what C code printed and libc still holds: _exit would drop it
        _non_blocking_again()

        os._exit(_DECIDED[0])

    atexit.register(end)


def _late_signals() -> None:
    """The command ended: the signals it would have handled go to _late_signal (ignored ones stay so)."""

    for sig in _LINES:
        try:
            if signal.getsignal(sig) != signal.SIG_IGN:
                signal.signal(sig, _late_signal)
        except (ValueError, OSError):  # not the main thread: signals stay as they are
            return


def _forget_caught_interrupts() -> None:
    """Run as ``python -m placement_cli``, CPython remembers whether a KeyboardInterrupt ended any
    ``exec`` of a string (dataclasses, namedtuple and typing build their code that way, in whatever
    module a Ctrl-C lands) and, once the interpreter has finished, kills its own process with SIGINT
    even though that interrupt was caught and the command chose its exit code (seen: ``cluster``
    interrupted while it started, exit 130 printed, killed by SIGINT). Each ``exec`` of a string
    resets that memory when it starts, and an empty one ends without an interrupt to remember."""
    exec("")  # noqa: S102 - an empty string: nothing runs


_UNBLOCKED: list[int] = []  # standard output and error, made blocking for the command (see _blocking_output)


def _blocking_output() -> None:
    """Standard output and error written blocking for the command: a pipe left non-blocking (O_NONBLOCK,
    set by a parent process that shares it) refuses what does not fit at once, and Python's buffered
    writer then drops part of it (seen: JSON with bytes missing from its middle, exit 0). Non-blocking
    again once the command's output is flushed (_end_quietly)."""

    for fd in (1, 2):
        try:
            if not os.get_blocking(fd):
                os.set_blocking(fd, True)
                _UNBLOCKED.append(fd)
        except OSError:  # closed: what writes to it says so
            pass


def _non_blocking_again() -> None:
    while _UNBLOCKED:
        try:
            os.set_blocking(_UNBLOCKED.pop(), False)
        except OSError:
            pass


def main() -> None:
    """`placement` and `python -m placement_cli`."""
    _end_quietly()
    _blocking_output()
    try:
        try:
            _catch_termination_early()
            from placement_cli.cli import main as run  # noqa: PLC0415 - after the early signal handling is in force

            run()
            _DECIDED.append(0)
        except KeyboardInterrupt:
            _interrupted()
        except Terminated as exc:
            _terminated(exc.signum)
        if _RECEIVED:
            _ended(_RECEIVED[0])
    except SystemExit as exc:
        if exc.code not in _SIGNALLED and _RECEIVED:  # its Terminated was swallowed (raised inside a callback
            _stay_ended()  # whose exceptions Python only reports, an import's lock's): the signal still ends it
            _DECIDED[:] = [128 + _RECEIVED[0]]
            _ended(_RECEIVED[0])
        if exc.code in _SIGNALLED:
            _stay_ended()
        if exc.code is None or isinstance(exc.code, int):
            _DECIDED[:] = [exc.code or 0]
        raise
    finally:
        _forget_caught_interrupts()
        _late_signals()
