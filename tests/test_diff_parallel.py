"""`placement diff` of two big logs reads them at once, NEW in a forked child (placement_cli.forked):
the answer, the notes and the exit code are those of reading them one after the other; a child that
fails or is interrupted leaves nothing behind (hand-made logs in TF 2.21's wording: no TensorFlow)."""

from __future__ import annotations

import gzip
import json
import os
import pickle
import signal
import threading
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from placement_cli import forked
from placement_cli.cli import app
from placement_cli.compare import compare, prepared
from placement_cli.logparse import parallel, saved
from placement_cli.logparse.records import Records

runner = CliRunner()
CPU, GPU0, GPU1 = (f"/job:localhost/replica:0/task:0/device:{d}" for d in ("CPU:0", "GPU:0", "GPU:1"))


def placed(node: str, op: str, device: str) -> str:
    """TF 2.21's two copies of one placement (stdout's, then glog's)."""
    return (f"{node}: ({op}): {device}\n"
            f"I0000 00:00:1795233561.662419    2368 placer.cc:162] {node}: ({op}): {device}\n")


def executed(op: str) -> str:
    return f"I0000 00:00:1795233568.753412    2368 execute.cc:1775] Executing op {op} in device {CPU}\n"


def program(trace: int, moved: bool) -> str:
    """Graph nodes, a node placed twice, a tf.function retraced (its counter differs between runs) and
    eager ops: what diff matches by graph and name."""
    body = "".join(placed(f"block_{i}/MatMul", "MatMul", GPU1 if moved and i % 7 == 0 else GPU0) for i in range(60))
    twice = placed("shared/Add", "AddV2", CPU) + placed("shared/Add", "AddV2", GPU0 if moved else CPU)
    function = placed("x", "_Arg", CPU) + placed("MatMul", "MatMul", GPU0) + executed(f"__inference_step_{trace}")
    only = placed("old_only/Relu", "Relu", CPU) if not moved else placed("new_only/Relu", "Relu", GPU0)
    return body + twice + function + only + executed("MatMul") * 3


@pytest.fixture
def at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every log counts as big, and a second core is at hand (whatever this machine has)."""
    monkeypatch.setattr(parallel, "SPLIT_MIN", 1)
    monkeypatch.setattr(forked, "available", lambda: True)


def logs(tmp_path: Path) -> tuple[str, str]:
    old, new = tmp_path / "old.log", tmp_path / "new.log"
    old.write_text(program(17, moved=False))
    new.write_text(program(23, moved=True))
    return str(old), str(new)


def diff_json(*args: str, expect: int) -> tuple[dict[str, Any], str]:
    result = runner.invoke(app, ["diff", "--json", *args])
    assert result.exit_code == expect, (result.stdout, result.stderr)
    return json.loads(result.stdout), result.stderr


def test_two_logs_read_at_once_give_the_answer_of_reading_them_in_turn(tmp_path: Path, at_once: None,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    old, new = logs(tmp_path)
    read: list[int] = []
    real = saved._read
    monkeypatch.setattr(saved, "_read", lambda path, *a, **k: read.append(os.getpid()) or real(path, *a, **k))
    together, _ = diff_json(old, new, expect=1)
    assert read == [os.getpid()]  # OLD here, NEW in the child (whose list this process never sees)
    monkeypatch.setattr(forked, "available", lambda: False)
    apart, _ = diff_json(old, new, expect=1)
    assert len(read) == 3 and together == apart
    assert together["summary"]["moved"] == 10 and {r["node"] for r in together["moved"]} >= {"block_0/MatMul",
                                                                                           "shared/Add"}
    assert [r["node"] for r in together["removed"]] == ["old_only/Relu"]
    assert [r["node"] for r in together["added"]] == ["new_only/Relu"]
    assert together["summary"]["unchanged"] > 0  # the function's nodes, matched across its retrace


def test_the_child_s_notes_are_said_after_old_s(tmp_path: Path, at_once: None) -> None:
    old, new = tmp_path / "old.log.gz", tmp_path / "new.log.gz"
    old.write_bytes(gzip.compress(program(1, moved=False).encode()))
    new.write_bytes(gzip.compress(program(2, moved=True).encode()))
    _, stderr = diff_json(str(old), str(new), expect=1)
    said = [line for line in stderr.splitlines() if "compressed" in line]
    assert said == [f"placement: {old}: gzip-compressed, reading it decompressed",
                    f"placement: {new}: gzip-compressed, reading it decompressed"], stderr


def test_a_child_that_fails_leaves_new_to_be_read_here(tmp_path: Path, at_once: None,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever goes wrong in the child, NEW is read here: the same answer, or the input's own error."""
    old, new = logs(tmp_path)
    parent, real = os.getpid(), saved._read

    def failing_in_child(path: str, *args: Any, **kwargs: Any) -> Any:
        if os.getpid() != parent:
            raise RuntimeError("the child's read failed")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(saved, "_read", failing_in_child)
    expected = compare(saved.read_tallied(old), saved.read_tallied(new))
    assert compare(*saved.read_pair(old, new, prepare=prepared)) == expected
    broken = tmp_path / "broken.json"
    broken.write_text('{"placements": 1}' + " " * 100)  # JSON, but no report: the child fails on it too
    forked_run = runner.invoke(app, ["diff", old, str(broken)])
    monkeypatch.setattr(forked, "available", lambda: False)
    in_turn = runner.invoke(app, ["diff", old, str(broken)])
    assert (forked_run.exit_code, forked_run.stderr) == (in_turn.exit_code, in_turn.stderr) == (
        2, f"placement: {broken}: JSON, but not a report saved by placement --json (no \"placements\" and \"summary\")\n")


def test_a_failure_reading_old_ends_the_child_with_it(tmp_path: Path, at_once: None,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    old, new = logs(tmp_path)
    started: list[int] = []
    real_fork = os.fork

    def fork() -> int:
        pid = real_fork()
        if pid:
            started.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", fork)
    parent = os.getpid()

    def slow_child_failing_parent(path: str, *args: Any, **kwargs: Any) -> Any:
        if os.getpid() != parent:
            signal.pause()  # the child would read forever: only the parent can end it
        raise KeyboardInterrupt

    monkeypatch.setattr(saved, "_read", slow_child_failing_parent)
    with pytest.raises(KeyboardInterrupt):
        saved.read_pair(old, new, prepare=prepared)
    assert len(started) == 1
    with pytest.raises(ChildProcessError):  # killed and reaped: no child of this process is left
        os.waitpid(started[0], os.WNOHANG)


def test_forked_gives_the_child_s_result_or_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(forked, "available", lambda: True)  # on one core too: what is tested is the passing
    with forked.started(lambda: {"lines": [b"a", b"b"] * 50_000}) as theirs:
        assert theirs() == {"lines": [b"a", b"b"] * 50_000}  # bigger than a pipe holds: read as it comes

    def fails() -> None:
        raise ValueError("in the child")

    with forked.started(fails) as theirs:
        assert theirs() is None


def test_no_child_is_forked_beside_another_thread() -> None:
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert not forked.available()
        with forked.started(lambda: 1) as theirs:
            assert theirs() is None
    finally:
        stop.set()
        other.join()


@pytest.mark.parametrize("lines", [None, [], [b""], [b"\0a\0(Op)\0/device:CPU:0", b"g\0b\0x"] * 70_001])
def test_records_travel_as_texts_and_come_back_the_same(lines: list[bytes] | None) -> None:
    records = Records()
    if lines is not None:
        records.update(line.replace(b"\0", b": ") for line in lines)
        made = records.sorted_lines(lambda function: function)
    back = pickle.loads(pickle.dumps(records))
    assert back.lines(lambda function: b"other") == (made if lines is not None else [])
    assert back.sorted_lines(lambda function: b"other") == sorted(back.lines(lambda function: function))


def test_a_saved_report_is_read_here(tmp_path: Path, at_once: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A big report saved with --json is no log: read in this process (its placements would travel one
    by one), beside a log or another report, with the answer of reading it in turn."""
    old, new = logs(tmp_path)
    report = tmp_path / "new.json"
    report.write_text(runner.invoke(app, ["parse", "--json", new]).stdout)
    monkeypatch.setattr(forked, "started", lambda work: pytest.fail("a child was started"))
    for pair in ((old, str(report)), (str(report), old)):
        sides = saved.read_pair(*pair, prepare=prepared)
        assert compare(*sides) == compare(saved.read_tallied(pair[0]), saved.read_tallied(pair[1]))


_PARENT_KILLED_WHILE_ITS_CHILD_WORKS = r"""
import os, signal, sys
from placement_cli import forked
forked.available = lambda: True
def work():
    print(os.getpid(), flush=True)  # the child's pid, for the test
    signal.pause()
with forked.started(work) as theirs:
    theirs()
"""


def test_a_child_ends_when_its_parent_is_killed() -> None:
    """SIGKILL gives the parent no chance to end its child: the kernel does (a child working on for no
    one, seconds long on a big log, is an orphan a user finds in ps)."""
    import subprocess
    import sys
    import time

    from processes import patience

    parent = subprocess.Popen([sys.executable, "-c", _PARENT_KILLED_WHILE_ITS_CHILD_WORKS], stdout=subprocess.PIPE,
                              text=True)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + patience(60)
    while os.path.exists(f"/proc/{child}") and time.monotonic() < deadline:
        try:
            with open(f"/proc/{child}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] == "Z":  # ended, waiting for init to reap it
                    break
        except FileNotFoundError:  # reaped between the two looks
            break
        time.sleep(0.05)
    else:
        if os.path.exists(f"/proc/{child}"):
            os.kill(child, signal.SIGKILL)
            raise AssertionError("the child outlived its killed parent")
