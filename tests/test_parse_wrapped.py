"""Records a console wrapped or a notebook flushed in pieces are read as one, when that is certain."""

from __future__ import annotations

import re

import pytest

from conftest import LOGS
from placement_cli.logparse import parse_text
from placement_cli.logparse.reader import clean

DEV = "/job:localhost/replica:0/task:0/device:GPU:0"
CASES = sorted(LOGS.glob("*/*.log"))


def hard_wrap(text: str, width: int) -> str:
    """A console ``width`` columns wide, copied out: rows cut mid-word, blanks at row ends dropped."""
    rows = []
    for line in text.split("\n"):
        while len(line) > width:
            rows.append(line[:width].rstrip(" "))
            line = line[width:]
        rows.append(line.rstrip(" "))
    return "\n".join(rows)


def essence(text: str) -> tuple:
    """What a log says, whatever its line numbers."""
    report = parse_text(text)
    return (
        sorted(repr((p.node, p.op, p.device, p.kind)) for p in report.placements),
        sorted(repr(e.to_dict()) for e in report.errors),
        sorted(repr(m.to_dict()) for m in report.device_mapping),
        sorted(repr({**i.to_dict(), "line": None}) for i in report.ignored),
    )


# Two processes' bytes in one line: cut by a console, such a line's second row can be a whole placer
# copy of its own ("nitialized/VarIsInitializedOp: (VarIsInitializedOp): /job:ps/..."), which no
# reader can tell from one. The log is read right unwrapped (test_parse_dialects.py).
UNWRAPPABLE = {"interleaved_processes.log"}
# Markdown escapes a log when it is pasted, after a console wrapped it: wrapped that way round.
PASTED = {"github_pasted.log"}


def pasted_wrap(text: str, width: int) -> str:
    """The console's rows of the log as it was before the paste, each escaped as the paste escapes it."""
    plain = clean(text.encode("utf-8")).decode("utf-8")
    return "\n".join(re.sub(r"([\\_\[\]*`])", r"\\\1", row) for row in hard_wrap(plain, width).split("\n"))


@pytest.mark.parametrize("width", [80, 100, 120])
@pytest.mark.parametrize("log", [c for c in CASES if c.name not in UNWRAPPABLE], ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_hard_wrapped_log_reads_like_the_original(log, width: int) -> None:
    text = log.read_text(encoding="utf-8", errors="replace").replace("\r\n", "\n")
    wrapped = pasted_wrap(text, width) if log.name in PASTED else hard_wrap(text, width)
    assert essence(wrapped) == essence(text)


def test_windows_console_example_from_the_issue() -> None:
    """Too few rows to tell the console's width: the cut key words are still joined."""
    log = (
        "tensorflow.python.framework.errors_impl.InvalidArgumentError: Cannot assign a de\n"
        "vice for operation 'MatMul': Operation was explicitly assigned to /device:GPU:0\n"
        "but available devices are [ /job:localhost/replica:0/task:0/device:CPU:0 ]. Make\n"
        " sure the device specification refers to a valid device.\n"
        "Traceback (most recent call last):\n"
    )
    (error,) = parse_text(log).errors
    assert (error.kind, error.node, error.requested_device) == ("device_not_found", "MatMul", "/device:GPU:0")
    assert error.available_devices == ("/job:localhost/replica:0/task:0/device:CPU:0",)
    assert error.message.endswith("]. Make sure the device specification refers to a valid device.")


@pytest.mark.parametrize("cut", [3, 8, 10, 12, 15, 19, 33, 50, 70])
def test_any_cut_of_the_key_words_is_joined(cut: int) -> None:
    """Wherever the key words are cut, as long as three letters or more go on the next line
    (fewer are too common a start of a line; a console's width, once known, covers them)."""
    line = "Cannot assign a device for operation 'b': Could not satisfy explicit device specification"
    log = f"InvalidArgumentError: {line[:cut].rstrip()}\n{line[cut:]} '/device:GPU:2'\n"
    (error,) = parse_text(log).errors
    assert (error.node, error.requested_device) == ("b", "/device:GPU:2")


def test_a_device_index_cut_by_the_wrap_is_whole_again() -> None:
    rows = [f"I0000 00:00:1795232759.847888    3899 placer.cc:162] tower_{t}/MatMul: (MatMul): {DEV[:-1]}12"
            for t in "abcd"]
    width = len(rows[0]) - 1
    noise = [f"2018-05-02 14:03:{s}.873712: I T:\\src\\tensorflow\\core\\platform\\{name}.cc:140] " + "words " * 40
             for s, name in (("09", "cpu_feature_guard"), ("10", "gpu_device"), ("11", "direct_session"))]
    wrapped = hard_wrap("\n".join(noise + rows) + "\n", width)
    assert f"{rows[0][:-1]}\n2\n" in wrapped
    devices = {p.device for p in parse_text(wrapped).placements}
    assert devices == {DEV[:-1] + "12"}


def test_notebook_fragments_join_only_when_certain() -> None:
    log = "\n".join([
        f"a: (Const): {DEV}",
        "(Mul): " + DEV,  # its head was flushed elsewhere: no node "(Mul)", nothing joined to a placement
        "mul: ",
        "(Mul): " + DEV,  # joins "mul: " (one way only)
        "xy",
        "c: ",
        "(AddV2): " + DEV,  # "c: " and "xyc: " both would make a placement: not certain, not joined
        "I0000 00:00:1795232759.847888    3899 placer.cc:162] Mat",
        f"Mul: (MatMul): {DEV}",  # completes the truncated glog copy, not a node "Mul"
        f"b: (Const): {DEV[:-8]}",
        DEV[-8:],
    ]) + "\n"
    nodes = [(p.node, p.line) for p in parse_text(log).placements]
    assert nodes == [("a", 1), ("mul", 3), ("MatMul", 8), ("b", 10)]


def test_notebook_capture_fixture_counts_each_placement_once() -> None:
    report = parse_text((LOGS / "tf2.21" / "notebook_flushed_chunks.log").read_text())
    nodes = sorted(p.node or p.op for p in report.placements)
    assert nodes == sorted(["x", "y", "mul", "MatMul", "add", "Identity", "identity_RetVal", "mul/y", "add/y",
                            "__inference_step_16"])
