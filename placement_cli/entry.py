"""The `placement` command's entry point: a Ctrl-C while Python still loads the command line (its
imports, typer reading the arguments, before the command's own handling is in force) is an
interruption like any later one: one line and exit 130, never a traceback."""

from __future__ import annotations

import sys


def _interrupted() -> None:  # noqa: D103
    try:
        sys.stderr.write("placement: interrupted\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    raise SystemExit(130)


def main() -> None:
    """`placement` and `python -m placement_cli`."""
    try:
        from placement_cli.cli import main as run  # noqa: PLC0415

        run()
    except KeyboardInterrupt:
        _interrupted()
