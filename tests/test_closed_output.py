"""A closed output (``| head -1``) after a successful run is no error: every command exits with the
run's own code, not rich's SystemExit(1)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import LOGS
from processes import patience

LOG = sorted(LOGS.rglob("*.log"))[0]


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

