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
        f.writelines(f"n{i}: (MatMul): /job:localhost/replica:0/task:0/device:CPU:{i % 3}\n" for i in range(20000))
    proc = subprocess.run(f'"{sys.executable}" -m placement_cli parse "{big}" --all --json | head -c 10; '
                          'exit ${PIPESTATUS[0]}', shell=True, executable="/bin/bash", capture_output=True, timeout=patience(120))
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stderr.decode() == ""


def test_a_non_blocking_pipe_gets_the_whole_output(tmp_path: object) -> None:
    """A pipe left non-blocking by the process that started placement (O_NONBLOCK on a description
    it shares) refused what did not fit at once, and the buffered writer dropped part of it: JSON with
    bytes missing from its middle, exit 0. The output is written blocking, and the pipe left as it was."""
    import fcntl
    import threading
    import time

    big = os.path.join(str(tmp_path), "big.log")
    with open(big, "w") as f:
        f.writelines(f"n{i}: (MatMul): /job:localhost/replica:0/task:0/device:CPU:{i % 3}\n" for i in range(20000))
    args = [sys.executable, "-m", "placement_cli", "parse", big, "--all", "--json"]
    expected = subprocess.run(args, capture_output=True, timeout=patience(120), check=True).stdout
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETFL, fcntl.fcntl(write_end, fcntl.F_GETFL) | os.O_NONBLOCK)
    got = bytearray()

    def slowly() -> None:  # a reader slower than the writer: the pipe fills
        with os.fdopen(read_end, "rb", buffering=0) as pipe:
            while chunk := pipe.read(65536):
                got.extend(chunk)
                time.sleep(0.002)

    reader = threading.Thread(target=slowly)
    reader.start()
    proc = subprocess.run(args, stdout=write_end, stderr=subprocess.PIPE, timeout=patience(120), check=False)
    assert not os.get_blocking(write_end)  # as the parent left it
    os.close(write_end)
    reader.join(patience(60))
    assert proc.returncode == 0, proc.stderr.decode()
    assert bytes(got) == expected
