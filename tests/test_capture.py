"""fd-level capture: C-level writes to fds 1 and 2 are caught, even past a pipe's size."""

import os
import subprocess
import sys

from placement_cli.runtime.fdcapture import capture_fds


def test_captures_raw_fd_writes_and_restores() -> None:
    with capture_fds() as cap:
        os.write(1, b"to-fd-1\n")
        os.write(2, b"to-fd-2\n")
    assert cap.text == "to-fd-1\nto-fd-2\n"


def test_libc_buffered_printf_is_flushed_into_the_capture() -> None:
    code = (
        "import ctypes\n"
        "from placement_cli.runtime.fdcapture import capture_fds\n"
        "libc = ctypes.CDLL(None)\n"
        "with capture_fds() as cap:\n"
        "    libc.printf(b'from-printf\\n')\n"
        "print('CAPTURED=' + repr(cap.text))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stdout
    assert out.strip() == "CAPTURED='from-printf\\n'"


def test_more_than_ten_megabytes_does_not_deadlock() -> None:
    line = b"x" * 1023 + b"\n"
    with capture_fds() as cap:
        for _ in range(11 * 1024):
            os.write(2, line)
    assert len(cap.text) == 11 * 1024 * 1024
