"""Help cannot drift: every command has help text with an example, and names its values as its text does."""

import re

import pytest
import typer.main
from typer.testing import CliRunner

from placement_cli.cli import app

runner = CliRunner()
COMMANDS = sorted(c.name or c.callback.__name__ for c in app.registered_commands)


def test_all_commands_listed() -> None:
    assert {"show", "parse"} <= set(COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_help_has_example(command: str) -> None:
    result = runner.invoke(app, [command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"Usage: placement {command} "), lines[0]  # the program's name, not typer's
    assert re.search(rf"\bExample: placement {command}\b", " ".join(result.stdout.split())), result.stdout


def test_root_help_and_version() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0 and "show" in result.stdout
    version = runner.invoke(app, ["--version"])
    assert version.exit_code == 0 and version.stdout.startswith("placement ")


@pytest.mark.parametrize("command", COMMANDS)
def test_help_names_values_as_the_text_does(command: str) -> None:
    """Metavars are FILE, SCRIPT, DEV, N, REGEX..., never typer's {files}, <str> or <int range>."""
    result = runner.invoke(app, [command, "--help"], env={"COLUMNS": "200"})
    assert not re.search(r"\{[a-z_]+\}|<str>|<int[^>]*>|<text>|<integer>", result.stdout), result.stdout
    click_command = typer.main.get_command(app).commands[command]
    for param in click_command.params:
        if getattr(param, "is_flag", False) or (param.param_type_name == "option" and param.type.name == "choice"):
            continue
        assert param.metavar and param.metavar.strip("[].").replace(",", "").replace("|", "").replace("-", "").isupper(), \
            (command, param.name, param.metavar)
        assert param.metavar in result.stdout
    words = set(re.findall(r"\b[A-Z]{2,}\b", " ".join(p.help or "" for p in click_command.params)))
    metavars = " ".join(p.metavar or "" for p in click_command.params)
    for word in words & {"FILE", "DEV", "N", "REGEX", "OP", "SCRIPT"}:
        assert word in metavars, f"{command}: the help speaks of {word} but no option takes a {word}"
