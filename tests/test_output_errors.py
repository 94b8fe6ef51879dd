"""A closed, full or early-closed output: one line and an honest exit code, never an internal error."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import LOGS
from processes import patience

LOG = str(LOGS / "tf0.x" / "guide_towers.log")


def run(args: list[str], **kwargs: object) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "100"}
    return subprocess.run([sys.executable, "-m", "placement_cli", *args], env=env, capture_output=False,
                          timeout=patience(60), **kwargs)  # type: ignore[call-overload]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("extra", [[], ["--json"]])
def test_a_full_output_is_exit_2_with_one_line(extra: list[str]) -> None:
    with open("/dev/full", "wb") as full:
        proc = run(["parse", LOG, *extra], stdout=full, stderr=subprocess.PIPE)
    assert proc.returncode == 2
    assert proc.stderr.decode().strip() == "placement: cannot write the output: No space left on device"


@pytest.mark.parametrize("extra", [[], ["--json"]])
def test_a_closed_stdout_is_exit_2_with_one_line(extra: list[str]) -> None:
    proc = subprocess.run(f'"{sys.executable}" -m placement_cli parse "{LOG}" {" ".join(extra)} >&-', shell=True,
                          capture_output=False, stderr=subprocess.PIPE, timeout=patience(60))
    assert proc.returncode == 2
    assert "standard output is closed" in proc.stderr.decode() and "Traceback" not in proc.stderr.decode()


def test_a_reader_that_stops_early_is_no_error(tmp_path: object) -> None:
    big = os.path.join(str(tmp_path), "big.log")
    with open(big, "w") as f:
        for i in range(20000):
            f.write(f"n{i}: (MatMul): /job:localhost/replica:0/task:0/device:CPU:{i % 3}\n")
    proc = subprocess.run(f'"{sys.executable}" -m placement_cli parse "{big}" --all --json | head -c 10; '
                          'exit ${PIPESTATUS[0]}', shell=True, executable="/bin/bash", capture_output=True, timeout=patience(120))
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stderr.decode() == ""
