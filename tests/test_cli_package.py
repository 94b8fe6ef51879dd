"""The CLI's own machinery: the one error funnel (--traceback: the traceback, exit 3), the app that runs
only the command named, and help and the real entry point built from the same commands."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import placement_cli.logparse
from placement_cli.cli import app
from placement_cli.i18n import language
from placement_cli.cli import app_for
from placement_cli.cli.commands import COMMANDS, command, command_name
from placement_cli.cli.outcome import Json, Outcome

LOG = Path(__file__).parent / "fixtures" / "logs" / "tf2.21" / "guide_matmul_plain.log"
runner = CliRunner()


def _boom(*args: object, **kwargs: object) -> None:
    raise RuntimeError("boom [red]x")


def test_an_internal_error_is_one_line_and_exit_3(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(placement_cli.logparse, "parse_paths", _boom)
    result = runner.invoke(app, ["parse", str(LOG)])
    assert result.exit_code == 3
    assert result.stderr == "placement: internal error: RuntimeError: boom [red]x (rerun with --traceback)\n"
    assert result.stdout == ""


def test_an_internal_error_follows_lang(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(placement_cli.logparse, "parse_paths", _boom)
    result = runner.invoke(app, ["parse", "--lang", "zh", str(LOG)])
    assert language() == "en"  # the invocation's language ended with it
    assert result.exit_code == 3
    assert result.stderr == "placement: 内部错误：RuntimeError：boom [red]x（加 --traceback 重新运行可看到调用栈）\n"


def test_traceback_shows_the_traceback_and_still_exits_3(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(placement_cli.logparse, "parse_paths", _boom)
    result = runner.invoke(app, ["--traceback", "parse", str(LOG)])
    assert result.exit_code == 3
    assert result.stderr.startswith("Traceback (most recent call last):")
    assert result.stderr.rstrip().endswith("RuntimeError: boom [red]x")


@pytest.mark.parametrize("args, command", [(["parse", "x.log"], "parse"), (["--traceback", "show", "--json"], "show"),
                                           (["demo", "--help"], "demo")])
def test_only_the_command_named_is_built(args: list[str], command: str) -> None:
    built = app_for(args)
    assert [command_name(info) for info in built.registered_commands] == [command]
    assert built.registered_callback is app.registered_callback  # --traceback, --version: the same root


@pytest.mark.parametrize("args", [[], ["--help"], ["-h", "parse"], ["--version"], ["--help", "parse"], ["nosuch"],
                                  ["--", "parse"]])
def test_anything_else_gets_the_whole_app(args: list[str]) -> None:
    assert app_for(args) is app


def test_every_command_is_registered_once_in_the_help_order() -> None:
    assert tuple(command_name(info) for info in app.registered_commands) == tuple(COMMANDS)


def test_the_entry_point_prints_what_the_whole_app_prints() -> None:
    """`python -m placement_cli` (one command built) and the whole app agree to the byte."""
    whole_app = "import sys; from placement_cli.cli import app; app(sys.argv[1:], prog_name='placement')"
    env = {"COLUMNS": "100", "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    for args in (["parse", str(LOG), "--json"], ["parse", "--help"], ["parse"], ["parse", str(LOG), "--top", "0"],
                 ["--traceback", "parse", str(LOG), "--op", "Nope"]):
        one = subprocess.run([sys.executable, "-m", "placement_cli", *args], capture_output=True, text=True, env=env,
                             check=False)
        whole = subprocess.run([sys.executable, "-c", whole_app, *args], capture_output=True, text=True, env=env,
                               check=False)
        assert (one.returncode, one.stdout, one.stderr) == (whole.returncode, whole.stdout, whole.stderr), args


def test_a_new_command_is_declared_in_its_own_module_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """command() registers it, guarded, and what is true of it (runs on this machine alone) is said
    where it is declared: no list elsewhere names it."""
    monkeypatch.setattr(app, "registered_commands", list(app.registered_commands))

    @command(one_machine=True)
    def hello() -> Outcome:
        """Say hello. Example: placement hello"""
        return Outcome(output=[Json({"hello": 1})])

    result = runner.invoke(app, ["hello"], env={"TF_CONFIG": '{"task": {"type": "worker"}}'})
    assert result.exit_code == 0 and '"hello": 1' in result.stdout
    assert "`placement hello` runs on this machine alone" in result.stderr
    quiet = runner.invoke(app, ["parse", str(LOG)], env={"TF_CONFIG": '{"task": {"type": "worker"}}'})
    assert quiet.exit_code == 0 and "TF_CONFIG" not in quiet.stderr


def test_a_signal_exit_code_is_worked_out_in_one_place() -> None:
    import signal

    from placement_cli.cli.outcome import ExitCode, signalled

    assert signalled(signal.SIGTERM) is ExitCode.TERMINATED and signalled(signal.SIGHUP) is ExitCode.HUNG_UP
    assert signalled(signal.SIGINT) is ExitCode.INTERRUPTED
