"""Property tests of the parser: whatever the bytes, encoding and chunk boundaries, one answer.

Lines of every dialect (taken from the recorded fixtures, and made up with random node
names), noise, and records broken in two are shuffled together; the engine's CHUNK is
made tiny so that chunk boundaries (and the look-ahead and look-back around them) fall
everywhere. Each case is small, so the whole module runs in a few seconds.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import string
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("hypothesis", reason="the property tests need hypothesis (pip install -e '.[test]')")
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import LOGS
from placement_cli.exceptions import InputError
from placement_cli.logparse import engine, parallel
from placement_cli.logparse.engine import parse_streams

FIXTURE_LOGS = [log.read_text(encoding="utf-8", errors="replace").splitlines() for log in sorted(LOGS.glob("*/*.log"))]
FIXTURE_LINES = sorted({line for lines in FIXTURE_LOGS for line in lines})
DEVICES = ["/job:localhost/replica:0/task:0/device:CPU:0", "/job:localhost/replica:0/task:0/device:GPU:1",
           "/job:worker/replica:0/task:3/device:GPU:10", "/job:localhost/replica:0/task:0/gpu:0",
           "/job:localhost/replica:0/task:0/device:_CUSTOM:0"]
NODE = st.from_regex(r"[A-Za-z0-9._][A-Za-z0-9_.\-/>]{0,20}", fullmatch=True)
OP = st.sampled_from(["MatMul", "Const", "_Arg", "AddV2", "Identity"])


@st.composite
def records(draw: st.DrawFn) -> str:
    node, op, dev = draw(NODE), draw(OP), draw(st.sampled_from(DEVICES))
    return draw(st.sampled_from([
        f"{node}: ({op}): {dev}",
        f"I0000 00:00:1795232759.847888    3899 placer.cc:162] {node}: ({op}): {dev}",
        f"2018-05-02 14:03:11.535891: I T:\\src\\tensorflow\\core\\common_runtime\\placer.cc:886] {node}: ({op}){dev}",
        f"{node}: {dev}",
        f"I0000 00:00:1795232759.936757   14386 execute.cc:1775] Executing op {op} in device {dev}",
    ]))


NOISE = st.text(alphabet=string.printable.replace("\n", "").replace("\r", "").replace("\x0b", "")
                .replace("\x0c", "") + "é张", max_size=60)


def hard_wrap(lines: list[str], width: int) -> list[str]:
    """What a console ``width`` columns wide shows, copied out (blanks at row ends dropped)."""
    rows = []
    for line in lines:
        while len(line) > width:
            rows.append(line[:width].rstrip(" "))
            line = line[width:]
        rows.append(line.rstrip(" "))
    return rows


@st.composite
def logs(draw: st.DrawFn) -> str:
    """A text log: fixture lines and runs of them (multi-line errors, mapping blocks),
    made-up records (some printed twice, as TF does), noise, records a flushed notebook
    broke in two; sometimes all of it hard-wrapped as a console would."""
    parts: list[str] = []
    for _ in range(draw(st.integers(0, 120))):
        kind = draw(st.integers(0, 10))
        if kind == 10:
            lines = draw(st.sampled_from(FIXTURE_LOGS))
            start = draw(st.integers(0, max(len(lines) - 1, 0)))
            parts += lines[start : start + draw(st.integers(1, 30))]
        elif kind <= 2:
            parts.append(draw(st.sampled_from(FIXTURE_LINES)))
        elif kind <= 5:
            record = draw(records())
            parts.append(record)
            if kind == 5:  # the glog twin of a bare copy, or the reverse
                parts.append(record.split("] ", 1)[-1] if "] " in record else f"I0000 1 placer.cc:9] {record}")
        elif kind <= 7:
            parts.append(draw(NOISE))
        else:
            record = draw(records())
            cut = draw(st.integers(0, len(record)))
            parts += [record[:cut], record[cut:]]
    if draw(st.integers(0, 4)) == 0:
        parts = hard_wrap(parts, draw(st.sampled_from([40, 80, 120])))
    return "\n".join(parts) + draw(st.sampled_from(["", "\n", "\r\n"]))


@contextlib.contextmanager
def chunk_size(size: int) -> Iterator[None]:
    """Chunks of ``size`` bytes (and blocks of 16 lines for pairing copies, in both passes
    compared, so that block ends fall inside these small logs too)."""
    saved = engine.CHUNK
    engine.CHUNK = size
    try:
        yield
    finally:
        engine.CHUNK = saved


@pytest.fixture(autouse=True)
def small_pairing_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "PAIR_LINES", 16)


def parse_bytes(data: bytes, keep: bool = True) -> dict:
    report = parse_streams([("<bytes>", io.BytesIO(data))], keep=keep)
    return report.to_dict()


def encode(text: str, encoding: str) -> bytes:
    boms = {"utf-8-bom": codecs.BOM_UTF8, "utf-16-le": codecs.BOM_UTF16_LE, "utf-16-be": codecs.BOM_UTF16_BE}
    codec = "utf-8" if encoding.startswith("utf-8") else encoding
    return boms.get(encoding, b"") + text.encode(codec, "surrogatepass")


CHUNKS = st.sampled_from([5, 64, 333, 4096])  # 5 bytes: every line ends in another chunk
SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


SETTINGS = settings(SETTINGS, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@SETTINGS
@given(data=st.binary(max_size=3000), size=CHUNKS)
def test_random_bytes_parse_or_are_rejected_as_not_text(data: bytes, size: int) -> None:
    with chunk_size(size):
        try:
            parse_bytes(data)
        except InputError as exc:
            assert "empty input" in str(exc) or "not a text log" in str(exc) or "corrupt" in str(exc)


@SETTINGS
@given(text=logs(), encoding=st.sampled_from(["utf-8", "utf-8-bom", "utf-16-le", "utf-16-be"]))
def test_chunked_and_encoded_equals_one_utf8_pass(text: str, encoding: str) -> None:
    if not text:
        return
    expected = parse_bytes(text.encode())
    for size in (5, 64, 333):
        with chunk_size(size):
            assert parse_bytes(encode(text, encoding)) == expected
    with chunk_size(64):
        summary = parse_bytes(encode(text, encoding), keep=False)
    assert summary["summary"] == expected["summary"]
    assert summary["errors"] == expected["errors"]


@settings(SETTINGS, max_examples=15)
@given(text=logs(), size=st.sampled_from([64, 4096]), encoding=st.sampled_from(["utf-8", "utf-16-le"]))
def test_two_core_split_equals_one_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, size: int,
                                         encoding: str) -> None:
    log = tmp_path / "x.log"
    log.write_bytes(encode(text * 3, encoding))
    monkeypatch.setattr(parallel, "SPLIT_MIN", 1)
    monkeypatch.setattr(parallel.os, "cpu_count", lambda: 2)  # split on a one-CPU machine too
    with chunk_size(size):
        try:
            with log.open("rb") as f:
                one = parse_streams([(str(log), f)], keep=False)
        except InputError:
            return
        split = parallel.count_split(str(log))
    if split is None:  # only where no two whole placements meet near the middle
        assert not text or parallel.boundary(str(log), log.stat().st_size, parallel.layout_of(str(log))) is None
        return
    assert split.by_device == one.by_device
    assert split.lines == one.lines
    assert split.errors == one.errors
