"""The `placement` command's entry point: a Ctrl-C while Python still loads the command line (its
imports, typer reading the arguments, before the command's own handling is in force) is an
interruption like any later one: one line and exit 130, never a traceback. Once a signal has ended
the command, the process ends with that exit code: a second Ctrl-C, SIGTERM or SIGHUP arriving while
Python shuts down (its handlers put back to the defaults) cannot turn exit 130 into a death by signal,
and neither can CPython's memory of an interrupt the command caught (see _forget_caught_interrupts)."""

from __future__ import annotations

import sys

# the exit codes of a command a signal ended (SIGHUP, SIGINT, SIGTERM: 128 + the signal's number)
_SIGNALLED = {129: "SIGHUP", 130: "SIGINT", 143: "SIGTERM"}


def _interrupted() -> None:  # noqa: D103
    try:
        sys.stderr.write("placement: interrupted\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    raise SystemExit(130)


def _stay_ended() -> None:
    """The command ended by a signal: the same signals arriving again are ignored until the process
    is gone (its exit code is decided; nothing is left to interrupt)."""
    import signal  # noqa: PLC0415

    for name in _SIGNALLED.values():
        try:
            signal.signal(getattr(signal, name), signal.SIG_IGN)
        except (ValueError, OSError, AttributeError):  # not the main thread, or no such signal here
            pass


def _forget_caught_interrupts() -> None:
    """Run as ``python -m placement_cli``, CPython remembers whether a KeyboardInterrupt ended any
    ``exec`` of a string (dataclasses, namedtuple and typing build their code that way, in whatever
    module a Ctrl-C lands) and, once the interpreter has finished, kills its own process with SIGINT
    even though that interrupt was caught and the command chose its exit code (seen: ``cluster``
    interrupted while it started, exit 130 printed, killed by SIGINT). Each ``exec`` of a string
    resets that memory when it starts, and an empty one ends without an interrupt to remember."""
    exec("")  # noqa: S102 - an empty string: nothing runs


def main() -> None:
    """`placement` and `python -m placement_cli`."""
    try:
        try:
            from placement_cli.cli import main as run  # noqa: PLC0415

            run()
        except KeyboardInterrupt:
            _interrupted()
    except SystemExit as exc:
        if exc.code in _SIGNALLED:
            _stay_ended()
        raise
    finally:
        _forget_caught_interrupts()
