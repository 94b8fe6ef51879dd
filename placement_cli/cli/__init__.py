"""The command line: the app, its options and emit() in app.py; a module per command family."""

from __future__ import annotations

import sys

from placement_cli.cli import check, cluster, demo, diff, parse, run, trace, training  # noqa: F401 - each registers its commands
from placement_cli.cli.app import COMMANDS, app, app_for, command_name
from placement_cli.cli.options import speaks

# --help lists them in this order; a command not named there comes last (tests/test_cli_package.py asks for its place)
app.registered_commands.sort(key=lambda info: (*COMMANDS, command_name(info)).index(command_name(info)))
for _info in app.registered_commands:  # every command takes --lang
    if _info.callback is not None:
        _info.callback = speaks(_info.callback)


def main() -> None:
    """`placement` and `python -m placement_cli`."""
    app_for(sys.argv[1:])(prog_name="placement")


__all__ = ["app", "main"]
