"""The README's list of commands and options is the CLI's: a test reads README.md."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer.main

from placement_cli.cli import app

README = (Path(__file__).parent.parent / "README.md").read_text()
ROOT = typer.main.get_command(app)
OPTION = re.compile(r"--[a-z][a-z-]*")


def glance() -> dict[str, str]:
    """The "Options at a glance" table: command -> its cell of arguments and options."""
    table = README.split("Options at a glance", 1)[1].split("\n\n", 2)[1]
    rows = {}
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        rows[cells[0].strip("`")] = cells[1]
    return rows


def options(command) -> set[str]:
    found = set()
    for param in command.params:
        if param.param_type_name == "option":
            found.update(o for o in (*param.opts, *param.secondary_opts) if o.startswith("--"))
    return found


def arguments(command) -> set[str]:
    return {p.metavar for p in command.params if p.param_type_name == "argument"}


def test_every_command_is_in_the_table_and_nothing_else() -> None:
    assert set(glance()) == {"placement"} | {f"placement {name}" for name in ROOT.commands}


@pytest.mark.parametrize("name", sorted(ROOT.commands))
def test_each_commands_options_and_arguments_match(name: str) -> None:
    command = ROOT.commands[name]
    cell = glance()[f"placement {name}"]
    assert set(OPTION.findall(cell)) == options(command), cell
    for argument in arguments(command):
        assert f"`{argument}`" in cell, (argument, cell)
    for metavar in {p.metavar for p in command.params if p.param_type_name == "option" and p.metavar}:
        assert metavar.replace("|", "\\|") in cell, (metavar, cell)


def test_root_options_match() -> None:
    assert set(OPTION.findall(glance()["placement"])) == options(ROOT) - {"--help"}


@pytest.mark.parametrize("name", sorted(ROOT.commands))
def test_each_command_has_its_own_section(name: str) -> None:
    assert re.search(rf"^### `placement {name}\b", README, re.MULTILINE), name
