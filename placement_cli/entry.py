"""The `placement` command's entry point: a Ctrl-C while Python still loads the command line (its
imports, typer reading the arguments, before the command's own handling is in force) is an
interruption like any later one: one line and exit 130, never a traceback. Once a signal has ended
the command, the process ends with that exit code: a second Ctrl-C, SIGTERM or SIGHUP arriving while
Python shuts down (its handlers put back to the defaults) cannot turn exit 130 into a death by signal."""

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
