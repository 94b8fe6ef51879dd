"""What a log went through on its way to the user: a terminal's colours, Markdown's escapes, a
second process writing into the same file. Each recorded quirk reads as the log it came from."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import LOGS
from placement_cli.cli import app
from placement_cli.logparse import parse_paths, parse_text
from placement_cli.logparse.reader import clean
from processes import patience

runner = CliRunner()
PLAIN = LOGS / "tf2.21" / "eager_lambda_function.log"  # a real TF 2.21 run: eager ops, two tf.functions
DEVICE = "/job:localhost/replica:0/task:0/device:CPU:0"
OP_NAME = re.compile(r"[A-Za-z0-9_<>]+")


def rows(path: Path) -> Counter:
    return Counter((p.node, p.op, p.device) for p in parse_paths([str(path)]).placements)


def test_a_coloured_log_reads_as_the_plain_one() -> None:
    """Severity colours, a bold file name, erase-line, OSC 8 links, charset switches (what a
    colourising logger or a CI view leaves): every placement, on its own line number."""
    assert parse_paths([str(LOGS / "misc" / "coloured_ci.log")]).to_dict() == parse_paths([str(PLAIN)]).to_dict()


def test_a_log_pasted_from_an_issue_reads_as_the_plain_one() -> None:
    pasted = parse_paths([str(LOGS / "misc" / "github_pasted.log")])
    plain = parse_paths([str(PLAIN)])
    assert pasted.placements == plain.placements
    assert {p.node for p in pasted.placements} >= {"_EagerConst", "output_RetVal", "identity_RetVal"}
    error = parse_paths([str(LOGS / "tf2.21" / "guide_matmul_gpu2.log")]).errors[0]
    assert pasted.errors == (error,)  # "[ /job:... ]" and "[[MatMul]]" unescaped too


def test_interleaved_processes_invent_nothing() -> None:
    """Another process's writes inside the glog lines: what is read is some of what both logged,
    never a node or an op that neither did (".cc:162]_Arg" is no op)."""
    both = rows(PLAIN) + rows(LOGS / "tf2.21" / "ps_worker_cluster.log")
    read = rows(LOGS / "misc" / "interleaved_processes.log")
    assert not read - both
    assert sum(read.values()) >= sum(both.values()) - 3
    assert all(OP_NAME.fullmatch(op) for _node, op, _device in read if op is not None)


@pytest.mark.parametrize("sequence", [
    "\x1b[32m", "\x1b[1;31m", "\x1b[0m", "\x1b[m", "\x1b[K", "\x1b[2K", "\x1b[38;5;208m", "\x1b[38;2;1;2;3m",
    "\x1b(B", "\x1b)0", "\x1b7", "\x1b=", "\x1b]0;title\x07", "\x1b]8;;http://x/y\x1b\\", "\x1bP1$r0m\x1b\\",
    "\x0f", "\x07", "\x08",
])
def test_every_kind_of_control_sequence_is_left_out(sequence: str) -> None:
    line = f"{sequence}x{sequence}/y{sequence}: ({sequence}MatMul{sequence}): {sequence}{DEVICE}{sequence}\n"
    text = "\x1b[0m\n" + line  # the ESC that lets control bytes be cleaned may stand on another line
    report = parse_text(text)
    assert [(p.node, p.op, p.device, p.line) for p in report.placements] == [("x/y", "MatMul", DEVICE, 2)]


def test_cleaning_keeps_lines_tabs_and_carriage_returns() -> None:
    data = b"a\t\x1b[31mb\r\n\x1b]8;;unterminated link\nc\x1b[\n\\_d \\[e\\] C:\\tmp\n"
    assert clean(data) == b"a\tb\r\n\nc\n_d [e] C:\\tmp\n"
    assert clean(b"C:\\Users\\x\\placer.cc:874] a: (Op): /job:y\n") == b"C:\\Users\\x\\placer.cc:874] a: (Op): /job:y\n"


def test_a_bold_file_name_counts_every_placement(tmp_path: Path) -> None:
    glog = "I0000 00:00:1795528205.5 16177 \x1b[1mplacer.cc\x1b[0m:162] n{i}: (Const): " + DEVICE + "\n"
    path = tmp_path / "bold.log"
    path.write_text("".join(glog.format(i=i) for i in range(200)))
    for args in ([], ["--summary"]):
        result = runner.invoke(app, ["parse", "--json", *args, str(path)])
        assert result.exit_code == 0, result.output
        assert '"placements": 200' in result.stdout


def test_markdown_escapes_in_node_op_and_device_names() -> None:
    text = ("I0000 00:00:1.5 1 placer.cc:162\\] \\_EagerConst: (\\_EagerConst): /job:my\\_job/replica:0/task:0/device:CPU:0\n"
            "Executing op \\_Arg in device /job:localhost/replica:0/task:0/device:XLA\\_CPU:0\n")
    report = parse_text(text)
    assert [(p.node, p.op, p.device) for p in report.placements] == [
        ("_EagerConst", "_EagerConst", "/job:my_job/replica:0/task:0/device:CPU:0"),
        (None, "_Arg", "/job:localhost/replica:0/task:0/device:XLA_CPU:0")]


@pytest.mark.parametrize("op", [".cc:162]_Arg", "placer.cc:162]_Arg", "Mat Mul", "a/b", "[red]x", "Mul:0", ""])
def test_an_op_that_is_no_op_name_leaves_the_line_out(op: str) -> None:
    text = f"I0000 00:00:1.5 1 placer.cc:162] n: ({op}): {DEVICE}\nn: ({op}): {DEVICE}\nExecuting op {op} in device {DEVICE}\n"
    assert parse_text(text).placements == ()


def test_nul_inside_a_line_glues_no_name_together(tmp_path: Path) -> None:
    """A NUL run at a line's start is a hole the text goes on after (copytruncate); one inside a
    line would glue two pieces into a name never logged: the line is kept, with U+FFFD there."""
    path = tmp_path / "holes.log"
    path.write_bytes(b"\0" * 5000 + f"a: (Const): {DEVICE}\nto\0\0wer/b: (Const): {DEVICE}\n".encode())
    result = runner.invoke(app, ["parse", "--json", str(path)])
    assert result.exit_code == 0, result.output
    assert '"node": "a"' in result.stdout and "tower" not in result.stdout
    assert '"lines": 2' in result.stdout


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
@pytest.mark.parametrize("via_pipe", [False, True])
def test_an_endless_nul_stream_is_refused_promptly(via_pipe: bool) -> None:
    import subprocess
    import sys

    command = [sys.executable, "-m", "placement_cli", "parse", "-" if via_pipe else "/dev/zero"]
    with open("/dev/zero", "rb") as zero:
        done = subprocess.run(command, stdin=zero if via_pipe else subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=patience(60), check=False)
    assert done.returncode == 2
    assert done.stderr.strip().endswith("not a text log (only NUL bytes)")
    assert len(done.stderr.strip().splitlines()) == 1
