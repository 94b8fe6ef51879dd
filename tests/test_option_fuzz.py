"""Every option of every command, fuzzed: a value is taken, or refused with one usage line (exit 2),
never a traceback. Each option's value is read as the command line reads it (its type, then its
callback) without running the command, so no TensorFlow starts; a few values per option also go
through the real command line, with a bad --lang after them that stops the command before its body.
The options whose files and addresses are checked in a command's body are fuzzed through those checks.

The counts of devices (--cpus, --devices, --gpus, --virtual-gpus, --towers, --replicas, --ps,
--workers) have tests of their own caps. A command line cannot hold a NUL, so no value here does.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import typer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from placement_cli import clusterspec
from placement_cli.cli import app
from placement_cli.cli.options import pictures as _pictures
from placement_cli.exceptions import UsageProblem
from placement_cli.i18n import language, speaking
from placement_cli.outputs import check_folder

COMMAND: Any = typer.main.get_command(app)
DEVICE_COUNTS = {"--cpus", "--devices", "--gpus", "--virtual-gpus", "--towers", "--replicas", "--ps", "--workers"}
# what a command needs besides the option read, so only that option can be refused
NEEDS = {"parse": ["-"], "trace": ["script.py"]}


def _options() -> dict[tuple[str, str], Any]:
    """(command, option) -> its parameter, for every option that takes a value."""
    found = {}
    for name, command in sorted(COMMAND.commands.items()):
        for param in command.params:
            option = param.opts[0]
            if option.startswith("--") and not getattr(param, "is_flag", False) and option not in DEVICE_COUNTS:
                found[name, option] = param
    return found


OPTIONS = _options()

# Text as a command line can carry it: any character but NUL, and the surrogates Python gives the
# bytes that are not UTF-8 (U+DC80 to U+DCFF).
_ARGV_BYTES = st.characters(min_codepoint=0xDC80, max_codepoint=0xDCFF)
_CHARS = st.one_of(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), _ARGV_BYTES)
_NUMBERS = st.one_of(st.integers(), st.floats(allow_nan=True, allow_infinity=True)).map(str)
SHAPED = [
    "", " ", "-", "--", "0", "-1", "1e400", "-1e400", "nan", "inf", "9" * 5000, "0x10", "1_000", "\u0663", "\u00b2",
    "a{99999999999}", "(" * 3000, "(\\w+/?)+Z$", "\\", "\x1b[31mred", "[bold]x[/bold]", "\udcff", "\u00e9\u200b", "a\nb",
    "/job:ps/task:0/cpu:0", "/gpu:99999999999999999999", "ps/0 CPU:0", "3-1", "1,,2", "2-", "-2", "zh", "EN",
    "graph", "one-device", "tf2", "MatMul", "_MklMatMul", "__inference_<lambda>_9", "x" * 10_000,
]
VALUES = st.one_of(st.sampled_from(SHAPED), _NUMBERS, st.text(_CHARS, max_size=40),
                   st.from_regex(r"[-/:,a-z0-9 ]{0,12}", fullmatch=True))


def _read(command: str, option: str, value: str) -> None:
    """The value as the command line reads it: taken, or a usage error of one line (exit 2)."""
    param = OPTIONS[command, option]
    ctx = COMMAND.commands[command].make_context(command, list(NEEDS.get(command, [])), resilient_parsing=True)
    try:
        with speaking():  # --lang's callback, called here without an invocation around it, chooses a language
            param.process_value(ctx, value)
    except typer.BadParameter as exc:
        message = exc.format_message()
        assert exc.exit_code == 2 and message and "\n" not in message, (command, option, value, message)
        assert "sys." not in message and "Exceeds the limit" not in message, message  # Python's words, not ours
    except typer.Exit as exc:  # 3: an internal error, said as one
        raise AssertionError((command, option, value, exc.exit_code)) from None


def test_every_option_with_a_value_is_fuzzed() -> None:
    """The list is read from the app: a new option is fuzzed without being named here."""
    for option in ("--node", "--op", "--device", "--top", "--step", "--timeout", "--lang", "--mode", "--reduce",
                   "--api", "--lr", "--steps", "--batch", "--dtype", "--svg", "--cluster-spec", "--save-log"):
        assert option in {o for _, o in OPTIONS}, option
    assert ("trace", "--node") in OPTIONS and ("show", "--device") in OPTIONS


@pytest.mark.parametrize(("command", "option"), sorted(OPTIONS))
@settings(max_examples=60, deadline=None)
@given(value=VALUES)
def test_an_option_takes_a_value_or_refuses_it_in_one_line(command: str, option: str, value: str) -> None:
    _read(command, option, value)


@pytest.mark.parametrize("value", SHAPED)
def test_every_shaped_value_of_every_option(value: str) -> None:
    for command, option in OPTIONS:
        _read(command, option, value)


def _checked(param: Any) -> bool:
    """An option whose value placement checks: a callback, or a parser of its own (typer's ``parser=``)."""
    return param.callback is not None or type(param.type).__name__ == "FuncParamType"


@pytest.mark.parametrize(("command", "option"), [key for key in sorted(OPTIONS) if _checked(OPTIONS[key])
                                                 and (key[1] != "--lang" or key[0] == "parse")])
@pytest.mark.parametrize("value", ["", "a{99999999999}", "\x1b[31mx\ny", "\udcff"])
def test_a_refused_option_is_one_line_on_the_real_command_line(command: str, option: str, value: str) -> None:
    """The refusal as the user sees it: click's usage lines, then one Error line; never a traceback.
    A bad --lang after the option stops any command that would run (parse alone may: it is cheap)."""
    stop = [] if option == "--lang" else ["--lang", "xx"]
    result = CliRunner().invoke(app, [command, option, value, *stop, *NEEDS.get(command, [])], input="")
    assert language() == "en"
    output = result.output
    assert isinstance(result.exception, SystemExit) or result.exception is None, (command, option, output)
    assert "Traceback" not in output and "\x1b" not in output, output
    if stop or result.exit_code:
        assert result.exit_code == 2, (command, option, value, output)
        assert output.rstrip("\n").splitlines()[-1].startswith("Error: Invalid value for '"), output


# Paths: relative, inside the test's folder (check_folder makes what it is given), never "..".
_NAME = st.text(st.one_of(st.characters(blacklist_characters="\x00/", blacklist_categories=("Cs",)), _ARGV_BYTES),
                min_size=1, max_size=300)
_PATHS = st.one_of(
    st.lists(_NAME.filter(lambda n: n not in (".", "..")), min_size=1, max_size=4).map("/".join),
    st.sampled_from(["", ".", "sub", "sub/", "file", "file/x", "missing/x", "link", "dangling", "fifo", "x" * 300,
                     "/dev/null", "/dev/stdout", "/dev/stdin", "/dev/full", "/proc/self/fd/1", "/"]),
)


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The folder the paths are in: a file, a folder, a link to each and a dangling one, a FIFO."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "file").write_text("{}")
    (tmp_path / "link").symlink_to("file")
    (tmp_path / "dangling").symlink_to("missing")
    os.mkfifo(tmp_path / "fifo")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _one_line(call: Any) -> None:
    """Taken, or refused with a UsageProblem (one stderr line, exit 2: the command's guard escapes
    newlines and control characters in it); any other exception is a bug."""
    try:
        call()
    except UsageProblem as exc:
        assert str(exc)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=_PATHS, force=st.booleans(), option=st.sampled_from(["svg", "dot", "graph_svg"]))
def test_a_picture_file_is_taken_or_refused_in_one_line(folder: Path, path: str, force: bool, option: str) -> None:
    _one_line(lambda: _pictures("placement parse", as_json=False, force=force, protect=("file",), **{option: path}))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=_PATHS)
def test_a_tensorboard_folder_is_made_or_refused_in_one_line(folder: Path, path: str) -> None:
    _one_line(lambda: check_folder("--tensorboard", path))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=_PATHS, text=st.one_of(st.text(_CHARS, max_size=80), st.sampled_from([
    '{"ps": ["localhost:2222"], "worker": ["localhost:2223"]}', '{"cluster": {}, "task": {}}', "[]", "null",
    '{"ps": ["localhost:99999999999999999999"]}', '{"ps": {"9999999999999999999999": "h:1"}}', "1e400",
    '{"ps": ["[::1]:2222"]}', '{"task": {"type": "worker", "index": 1e400}}', "[" * 100_000])))
def test_a_cluster_spec_file_is_read_or_refused_in_one_line(folder: Path, path: str, text: str) -> None:
    (folder / "spec.json").write_text(text, errors="surrogatepass")
    _one_line(lambda: clusterspec.from_file("spec.json"))
    if not path.startswith(("fifo", "/dev/stdin", "/proc")):  # read as cat reads them: until a writer closes
        _one_line(lambda: clusterspec.from_file(path))
    _one_line(lambda: clusterspec.from_text(text, "TF_CONFIG"))


@settings(max_examples=150, deadline=None)
@given(target=st.one_of(VALUES, st.from_regex(r"(grpc://)?[a-z0-9.:\[\]]{0,20}(:[0-9]{0,25})?", fullmatch=True)))
def test_an_inspect_target_is_read_or_refused_in_one_line(target: str) -> None:
    _one_line(lambda: clusterspec.from_target(target))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=_PATHS, force=st.booleans())
def test_a_save_log_file_is_opened_or_refused_in_one_line(folder: Path, path: str, force: bool) -> None:
    from placement_cli.outputs import open_save_log

    if path.startswith(("fifo", "/dev/stdin", "/proc")) or path == "/dev/stdout":  # opened as a shell's > opens them
        return
    opened: list[Any] = []
    _one_line(lambda: opened.append(open_save_log(path, "file", force)))
    for stream in opened:
        stream.close()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(paths=st.lists(_PATHS, min_size=1, max_size=3), keep=st.booleans())
def test_a_log_file_is_parsed_or_refused_in_one_line(folder: Path, paths: list[str], keep: bool) -> None:
    from placement_cli.exceptions import InputError
    from placement_cli.logparse import parse_paths

    if any(p.startswith(("fifo", "/dev/stdin", "/dev/stdout", "/proc", "/dev/full")) for p in paths):
        return  # read as cat reads them: until a writer closes
    try:
        parse_paths(paths, keep=keep)
    except InputError as exc:
        assert str(exc)


@pytest.mark.parametrize("argv", [["parse", ""], ["parse", "-", ""], ["diff", "", "x"], ["diff", "x", ""], ["check", ""],
                                  ["check", "x", "--config", ""], ["trace", ""], ["trace", "--", ""]])
def test_an_empty_file_name_is_refused_with_its_reason(argv: list[str]) -> None:
    """'' names no file (as a Path it is the current folder): refused by name, never "': no such file"."""
    result = CliRunner().invoke(app, argv, input="")
    assert result.exit_code == 2, result.output
    last = result.output.rstrip("\n").splitlines()[-1]
    assert last.startswith("Error: Invalid value for '") and "empty file name" in last, result.output
