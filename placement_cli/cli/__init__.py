"""The command line. commands.py: the app, each command registered and guarded; a module per command
family, loaded when it is needed: a command line runs with the one module that declares its command
(app_for), --help and the whole app (``from placement_cli.cli import app``) load them all."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import typer

from placement_cli.cli import commands
from placement_cli.cli.options import speaks


def load(modules: tuple[str, ...]) -> None:
    """Import the command modules named (each registers its commands on the app), every command
    taking --lang, the commands in the order --help lists them (one not in COMMANDS last)."""
    for module in modules:
        importlib.import_module(f"{__name__}.{module}")
    for info in commands.app.registered_commands:
        if info.callback is not None:
            info.callback = speaks(info.callback)
    order = tuple(commands.COMMANDS)
    commands.app.registered_commands.sort(
        key=lambda info: (*order, commands.command_name(info)).index(commands.command_name(info)))


def whole_app() -> typer.Typer:
    """The app with every command."""
    load(tuple(dict.fromkeys(commands.COMMANDS.values())))
    return commands.app


def app_for(args: list[str]) -> typer.Typer:
    """The app to run for ``args``: only the command named, when nothing but --traceback comes before
    it (typer builds every registered command's options at start, and each command's module loads
    what it runs: ten other commands cost more than parsing a log); the whole app for --help,
    --version and anything else."""
    for arg in args:
        if arg == "--traceback":
            continue
        module = commands.COMMANDS.get(arg)
        if module is None:
            return whole_app()
        load((module,))
        one = commands.new_app()
        one.registered_callback = commands.app.registered_callback
        one.registered_commands = [info for info in commands.app.registered_commands
                                   if commands.command_name(info) == arg]
        return one
    return whole_app()


def main() -> None:
    """`placement` and `python -m placement_cli`."""
    app_for(sys.argv[1:])(prog_name="placement")


def __getattr__(name: str) -> Any:
    if name == "app":  # the whole app: every command's module loaded
        return whole_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["app", "app_for", "load", "main", "whole_app"]
