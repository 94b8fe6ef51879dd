"""A closed output (``| head -1``) after a successful run is no error: every command exits with the
run's own code, not rich's SystemExit(1)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import LOGS
from processes import patience

LOG = min(LOGS.rglob("*.log"))


@pytest.mark.parametrize("args", [
    ("demo", "--list"),
    ("parse", str(LOG)),
    ("tower", "--soft", "--copies"),
    ("demo", "--step", "1", "--no-pause"),
])
def test_a_reader_that_closed_the_pipe_leaves_the_exit_code_alone(args: tuple[str, ...]) -> None:
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line: every write meets EPIPE
    try:
        done = subprocess.run([sys.executable, "-m", "placement_cli", *args], stdout=write,
                              stderr=subprocess.PIPE, text=True, timeout=patience(300))
    finally:
        os.close(write)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr


def test_what_stderr_says_stands_when_the_reader_closed_the_pipe(tmp_path: Path) -> None:
    """`diff` of a report saved narrowed by a filter says so on stderr after its output: a reader that took
    what it wanted (`| head -c 1000`) cut the output and, with it, that line. The line stands; the
    code is the diff's own (1: they differ)."""
    device = "/job:localhost/replica:0/task:0/device:{}"
    log = tmp_path / "run.log"
    log.write_text("".join(f"n{i}/op: (MatMul): {device.format('GPU:0' if i % 2 else 'CPU:0')}\n" for i in range(4000)))
    other = tmp_path / "other.log"
    other.write_text(log.read_text().replace("GPU:0", "GPU:1"))
    saved = subprocess.run([sys.executable, "-m", "placement_cli", "parse", "--json", "--device", "GPU", str(log)],
                           capture_output=True, check=True, timeout=patience(300)).stdout
    (tmp_path / "narrowed.json").write_bytes(saved)
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run([sys.executable, "-m", "placement_cli", "diff", "--json", str(tmp_path / "narrowed.json"),
                               str(other)], stdout=write, stderr=subprocess.PIPE, text=True, timeout=patience(300))
    finally:
        os.close(write)
    assert done.returncode == 1, done.stderr[-2000:]
    assert "narrowed.json was saved narrowed by --device GPU" in done.stderr and "Traceback" not in done.stderr
