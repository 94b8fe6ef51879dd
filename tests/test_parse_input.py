"""What `placement parse` accepts as a log: encodings, NULs, compressed files, standard input."""

from __future__ import annotations

import bz2
import codecs
import gzip
import json
import lzma
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import LOGS
from placement_cli.cli import app

runner = CliRunner()
BARE = "MatMul: (MatMul): /job:localhost/replica:0/task:0/device:CPU:0\n"
GLOG = "I0000 00:00:1795232759.847888    3899 placer.cc:162] MatMul: (MatMul): /job:localhost/replica:0/task:0/device:CPU:0\n"
TOWERS = LOGS / "tf0.x" / "guide_towers.log"


def parse(*args: str, stdin: bytes | None = None, expect: int = 0):
    result = runner.invoke(app, ["parse", "--json", *args], input=stdin)
    assert result.exit_code == expect, result.output
    return (json.loads(result.stdout) if expect == 0 else None), result.stderr


def write(tmp_path: Path, data: bytes, name: str = "x.log") -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


@pytest.mark.parametrize(("encoding", "bom"), [
    ("utf-16-le", True), ("utf-16-be", True), ("utf-16-le", False), ("utf-16-be", False), ("utf-32-le", True),
])
def test_wide_encodings_with_or_without_bom(tmp_path: Path, encoding: str, bom: bool) -> None:
    boms = {"utf-16-le": codecs.BOM_UTF16_LE, "utf-16-be": codecs.BOM_UTF16_BE, "utf-32-le": codecs.BOM_UTF32_LE}
    text = TOWERS.read_text()
    data, _ = parse(write(tmp_path, (boms[encoding] if bom else b"") + text.encode(encoding)))
    expected, _ = parse(str(TOWERS))
    assert data == expected


def test_utf8_bom_is_not_part_of_the_first_node(tmp_path: Path) -> None:
    data, _ = parse(write(tmp_path, codecs.BOM_UTF8 + BARE.encode()))
    assert data["placements"][0]["node"] == "MatMul"
    assert data["summary"]["lines"] == 1


def test_each_file_of_a_stream_has_its_own_bom(tmp_path: Path) -> None:
    first = write(tmp_path, codecs.BOM_UTF8 + GLOG.encode(), "err.log")
    second = write(tmp_path, codecs.BOM_UTF16_LE + BARE.encode("utf-16-le"), "out.log")
    data, _ = parse(first, second)
    assert [p["node"] for p in data["placements"]] == ["MatMul"]  # the two copies paired


def test_a_nul_line_does_not_make_a_log_binary(tmp_path: Path) -> None:
    """A crash or logrotate's copytruncate leaves NULs in a text log: judged by proportion."""
    crashed = GLOG.encode() + b"\0" * 4000 + b"\n" + BARE.encode() + b"\0\0\0" + GLOG.encode()
    data, _ = parse(write(tmp_path, crashed))
    assert data["summary"]["placements"] == 2
    assert data["summary"]["lines"] == 4


def test_copytruncate_hole_before_the_text(tmp_path: Path) -> None:
    data, _ = parse(write(tmp_path, b"\0" * (3 << 20) + BARE.encode()))
    assert data["summary"]["placements"] == 1


@pytest.mark.parametrize(("content", "needle"), [
    (bytes(range(256)) * 40, "not a text log (binary data)"),
    (b"\0" * 5000, "not a text log (only NUL bytes)"),
    (b"\x7fELF\x02\x01\x01" + bytes(range(1, 32)) * 200, "not a text log (binary data)"),
])
def test_binary_is_still_rejected(tmp_path: Path, content: bytes, needle: str) -> None:
    path = write(tmp_path, content)
    _, stderr = parse(path, expect=2)
    assert f"{path}: {needle}" in stderr
    assert len(stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(("name", "compress", "kind"), [
    ("x.log.gz", gzip.compress, "gzip"), ("x.log.bz2", bz2.compress, "bzip2"), ("x.log.xz", lzma.compress, "xz"),
])
def test_compressed_logs_are_read_and_said_so(tmp_path: Path, name: str, compress, kind: str) -> None:
    path = write(tmp_path, compress(TOWERS.read_bytes()), name)
    data, stderr = parse(path)
    expected, _ = parse(str(TOWERS))
    assert data == expected
    assert f"{path}: {kind}-compressed, reading it decompressed" in stderr


def test_gzip_on_stdin_and_concatenated_members(tmp_path: Path) -> None:
    data, stderr = parse("-", stdin=gzip.compress(GLOG.encode()) + gzip.compress(BARE.encode()))
    assert data["summary"]["placements"] == 1 and data["summary"]["lines"] == 2
    assert "<stdin>: gzip-compressed" in stderr


def test_corrupt_gzip_is_exit_2_one_line(tmp_path: Path) -> None:
    path = write(tmp_path, gzip.compress(TOWERS.read_bytes() * 50)[:-300], "cut.log.gz")
    _, stderr = parse(path, expect=2)
    assert f"{path}: corrupt gzip data" in stderr
    assert "Traceback" not in stderr


def test_stdin_twice_reads_it_once_as_cat_does() -> None:
    data, _ = parse("-", "-", stdin=TOWERS.read_bytes())
    assert data["summary"]["placements"] == 7


def test_empty_stdin_is_still_an_error() -> None:
    _, stderr = parse("-", "-", stdin=b"", expect=2)
    assert "empty input" in stderr


def test_overlong_line_keeps_line_numbers_and_its_ends(tmp_path: Path) -> None:
    """A line of megabytes keeps its head and tail only, so memory stays bounded."""
    huge = b"Cannot colocate nodes 'x' and " + b"y" * (4 << 20) + b"\n"
    data, _ = parse(write(tmp_path, huge + b"x" * (3 << 20) + b"\n" + BARE.encode()))
    assert data["placements"][0]["line"] == 3
    assert data["errors"][0]["kind"] == "colocation"


def test_captured_text_is_never_refused_as_binary() -> None:
    """`trace` and the notebook API parse what they captured: a script may print anything."""
    from placement_cli.logparse import parse_text

    report = parse_text("\x01\x02\x07" * 5000 + "\n" + BARE + "\ud800\0\n")
    assert report.placement_count == 1


@pytest.mark.parametrize("start", ["BZh91AY&SY", "a\0b\0c\0d\0" * 50, "\ufeff"],
                         ids=["bzip2-magic", "utf16-like-nuls", "bom"])
def test_captured_text_is_read_as_the_text_it_is(start: str) -> None:
    """What a program printed is placement's own text: a start that looks like a compressed file
    or like UTF-16 does not make it one (capture() and trace read it with parse_text)."""
    from placement_cli.logparse import parse_text

    report = parse_text(start + "\nMatMul: (MatMul): /job:localhost/replica:0/task:0/device:CPU:0\n")
    assert [p.node for p in report.placements] == ["MatMul"]


@pytest.mark.parametrize("args", [["parse", "-"], ["diff", "-", "OTHER"], ["check", "-", "--max-on", "CPU=1"]])
def test_a_closed_stdin_is_exit_2_saying_so(tmp_path: Path, args: list[str]) -> None:
    """``placement parse - <&-`` (standard input closed: Python's sys.stdin is None) was an internal error,
    exit 3 (AttributeError). Nothing to read is bad input: exit 2, saying standard input is closed."""
    import subprocess
    import sys

    other = tmp_path / "other.log"
    other.write_text("MatMul: (MatMul): /job:localhost/replica:0/task:0/device:CPU:0\n")
    command = [sys.executable, "-m", "placement_cli", *[str(other) if a == "OTHER" else a for a in args]]
    result = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
                            preexec_fn=lambda: os.close(0), cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "standard input is closed" in result.stderr and "internal error" not in result.stderr
