"""Help cannot drift: every command has help text with an example."""

import pytest
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
    assert "Example" in result.stdout
    assert "placement " + command in result.stdout


def test_root_help_and_version() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0 and "show" in result.stdout
    version = runner.invoke(app, ["--version"])
    assert version.exit_code == 0 and version.stdout.startswith("placement ")
