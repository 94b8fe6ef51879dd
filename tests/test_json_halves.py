"""A JSON document with long lists is written by two processes (placement_cli.render.json: a forked
child writes the second half of the rows into a file, then its text follows): the bytes are those one
process writes, whatever the output is (a file, a file opened to append, a pipe, a text buffer, a
stream in another encoding), whatever the rows hold, and where the child fails; a full output fails as
any write does."""

from __future__ import annotations

import io
import json
import math
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from processes import patience

from placement_cli import forked
from placement_cli.render import json as rendered

ROWS = 600  # over several batches of the BATCH the tests set


def document() -> dict[str, Any]:
    """Two long lists and the small parts around them; names in other scripts, lone surrogates, quotes
    and control characters, numbers that are not finite on both sides of the middle."""
    odd = ["caf\u00e9", "\u4e2d\u6587", 'q"uote', "ctl\x01", "lone\ud800", "\U0001f600"]
    first = [{"node": f"n{i}/{odd[i % len(odd)]}", "device": "/GPU:0", "ratio": i / 7} for i in range(ROWS)]
    second = [{"node": f"m{i}", "loss": float("nan") if i % 97 == 5 else i} for i in range(ROWS // 2)]
    first[3]["ratio"] = float("inf")
    first[ROWS - 2]["ratio"] = -math.inf
    return {"summary": {"rows": ROWS}, "first": first, "between": [1, 2], "second": second, "end": None}


@pytest.fixture
def halves(monkeypatch: pytest.MonkeyPatch) -> None:
    """The two-process write from a few hundred rows on (forking allowed beside the test runner's
    threads: the child only writes its rows)."""
    monkeypatch.setattr(rendered, "BATCH", 16)
    monkeypatch.setattr(rendered, "HALVES", 100)
    monkeypatch.setattr(forked, "available", lambda: True)


def alone(ascii_only: bool = False) -> str:
    """The document as one process writes it."""
    out = io.StringIO()
    saved = rendered.HALVES
    rendered.HALVES = 10**12
    try:
        rendered.write(document(), out, ascii_only=ascii_only)
    finally:
        rendered.HALVES = saved
    return out.getvalue()


def test_one_process_writes_what_the_tests_expect(halves: None) -> None:
    text = alone()
    data = json.loads(text)
    assert len(data["first"]) == ROWS and data["second"][5]["loss"] is None
    assert {entry["path"] for entry in data["non_finite"]} >= {".first[3].ratio", f".first[{ROWS - 2}].ratio",
                                                               ".second[5].loss"}
    assert "\\ud800" in text  # a lone surrogate is written as its escape


def test_into_a_file_and_a_file_opened_to_append(halves: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                 ) -> None:
    copied: list[int] = []
    copy = rendered._copied
    monkeypatch.setattr(rendered, "_copied", lambda fd, offset, size, out: copied.append(size) or copy(fd, offset, size, out))
    target = tmp_path / "out.json"
    with target.open("w", encoding="utf-8") as out:
        rendered.write(document(), out)
    assert target.read_text(encoding="utf-8") == alone()
    assert len(copied) == 2 and min(copied) > 0  # the child wrote rows of both lists (the middle is in the first)
    target.write_text("kept\n", encoding="utf-8")
    with target.open("a", encoding="utf-8") as out:  # O_APPEND: the kernel's copy may refuse it
        rendered.write(document(), out)
    assert target.read_text(encoding="utf-8") == "kept\n" + alone()


@pytest.mark.parametrize("ascii_only", [False, True])
def test_into_a_text_buffer_in_pieces_that_split_characters(halves: None, monkeypatch: pytest.MonkeyPatch,
                                                            ascii_only: bool) -> None:
    monkeypatch.setattr(rendered, "COPIED", 7)  # pieces that end inside a character's UTF-8 bytes
    out = io.StringIO()
    rendered.write(document(), out, ascii_only=ascii_only)
    assert out.getvalue() == alone(ascii_only)


def test_into_a_pipe(halves: None) -> None:
    read_end, write_end = os.pipe()
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(os.fdopen(read_end, "rb").read()))
    reader.start()  # reading before the writing starts: the document is larger than the pipe holds
    with os.fdopen(write_end, "w", encoding="utf-8") as out:
        rendered.write(document(), out)
    reader.join(patience(60))
    assert got and got[0].decode("utf-8") == alone()


def test_in_another_encoding(halves: None, tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    with target.open("w", encoding="utf-16") as out:
        rendered.write(document(), out)
    assert target.read_text(encoding="utf-16") == alone()


def test_a_child_that_fails_leaves_its_rows_to_the_parent(halves: None, monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path) -> None:
    def fails(self: Any) -> Any:
        raise RuntimeError("the child failed")

    monkeypatch.setattr(rendered._Theirs, "written", fails)
    target = tmp_path / "out.json"
    with target.open("w", encoding="utf-8") as out:
        rendered.write(document(), out)
    assert target.read_text(encoding="utf-8") == alone()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_full_output_fails_as_any_write_does(halves: None) -> None:
    with pytest.raises(OSError) as failed, open("/dev/full", "w", encoding="utf-8") as out:
        rendered.write(document(), out)
        out.flush()
    assert failed.value.errno == 28  # ENOSPC


WRITER = r"""
import runpy, sys
from placement_cli.render import json as rendered
rendered.HALVES, rendered.BATCH = int(sys.argv[1]), 16
sys.argv = ["placement", *sys.argv[2:]]
runpy.run_module("placement_cli", run_name="__main__")
"""


def test_diff_json_of_two_logs_is_the_same_written_by_two_processes(tmp_path: Path) -> None:
    """End to end: ``placement diff --json`` into a file and into a pipe, the two-process write against
    the one-process one (a process each, as a user runs it)."""
    device = "/job:localhost/replica:0/task:0/device:{}"
    for side, prefix in (("old", "a"), ("new", "b")):
        placed = [f"{prefix}{i}/cafe: (MatMul): {device.format('GPU:0' if i % 3 else 'CPU:0')}" for i in range(400)]
        (tmp_path / f"{side}.log").write_text("".join(  # TF 2.21's two copies of each placement
            f"{line}\nI0000 00:00:1795233561.662419    2368 placer.cc:162] {line}\n" for line in placed), encoding="utf-8")
    args = ["diff", "--json", str(tmp_path / "old.log"), str(tmp_path / "new.log")]
    outputs = []
    for halves in (10**12, 100):
        with (tmp_path / f"{halves}.json").open("wb") as out:
            proc = subprocess.run([sys.executable, "-c", WRITER, str(halves), *args], stdout=out,
                                  stderr=subprocess.PIPE, timeout=patience(60), check=False)
        assert proc.returncode == 1, proc.stderr.decode()
        piped = subprocess.run([sys.executable, "-c", WRITER, str(halves), *args], capture_output=True,
                               timeout=patience(60), check=False)
        assert piped.returncode == 1, piped.stderr.decode()
        outputs += [(tmp_path / f"{halves}.json").read_bytes(), piped.stdout]
    assert len(set(outputs)) == 1
    assert json.loads(outputs[0])["summary"]["removed"] == 400
