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


GLOG = b"I0000 00:00:1795232759.847888    3899 "
CPU = b"/job:localhost/replica:0/task:0/device:CPU:0"


def test_only_tensorflow_s_placement_lines_are_taken_out_of_what_an_fd_received() -> None:
    from placement_cli.runtime.fdcapture import placement_lines

    stderr = (GLOG + b"placer.cc:162] MatMul: (MatMul): " + CPU + b"\n"
              + GLOG + b"execute.cc:1775] Executing op MatMul in device " + CPU + b"\n"
              + GLOG + b"direct_session.cc:382] Device mapping:\n"
              + b"/job:localhost/replica:0/task:0/device:GPU:0 -> device: 0, name: NVIDIA H200\n"
              + b"the program's line \x00\xff\r\n"
              + b"a.device: " + CPU + b"\n"  # a print that looks like a placement
              + GLOG + b"other.cc:1] x: (Y): " + CPU + b"\n"  # the placer's shape, not the placer
              + b"Executing op Lookalike in device " + CPU + b"\n")
    kept, found = placement_lines(stderr, 2)
    assert found == 4
    assert kept == stderr[stderr.index(b"the program's"):]
    stdout = b"MatMul: (MatMul): " + CPU + b"\nprogress 50%\rprogress 100%\r"
    assert placement_lines(stdout, 1) == (b"progress 50%\rprogress 100%\r", 1)


def test_lines_a_capture_added_from_python_are_taken_out_as_often_as_added() -> None:
    from collections import Counter

    from placement_cli.runtime.fdcapture import placement_lines

    line = b"Executing op AddV2 in device " + CPU + b"\n"
    kept, found = placement_lines(line * 3, 2, Counter({line: 2}))
    assert (kept, found) == (line, 2)  # the third is the program's own


def test_what_tensorflow_s_python_listener_writes_is_recognised_whole() -> None:
    from placement_cli.runtime.fdcapture import is_placement_text

    eager = b"Executing op MatMul in device " + CPU + b"\n"
    assert is_placement_text(eager) and is_placement_text(eager * 2)
    assert not is_placement_text(eager[:-1])  # a part of a line: not yet
    assert is_placement_text(b"Device mapping: no known devices.\n")
    assert is_placement_text(b"Device mapping:\n/job:localhost/replica:0/task:0/device:GPU:0 -> device: 0\n")
    assert not is_placement_text(eager + b"hello\n")
    assert not is_placement_text(b"tf.print output\n")


def test_split_capture_keeps_each_fd_apart_in_order_and_restores_them() -> None:
    code = (
        "import os\n"
        "from placement_cli.runtime.fdcapture import SplitCapture\n"
        "cap = SplitCapture()\n"
        "cap.start()\n"
        "os.write(1, b'out\\n'); os.write(2, b'err 1\\n'); cap.write(2, b'added\\n'); os.write(2, b'err 2\\n')\n"
        "received = cap.stop()\n"
        "os.write(1, b'after\\n')\n"
        "print(repr(received))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout == "after\n{1: b'out\\n', 2: b'err 1\\nadded\\nerr 2\\n'}\n"
    assert proc.stderr == ""


STREAMS = r'''
import os, sys
from placement_cli import notebook
from placement_cli.runtime.fdcapture import SplitCapture

CPU = "/job:localhost/replica:0/task:0/device:CPU:0"
# Code whose module is TensorFlow's, as the frame of a write from TensorFlow's listener is.
from_tf = {"__name__": "tensorflow.python.eager.listener", "sys": sys}

def tf_write(text):
    exec("sys.stdout.write(text)", {**from_tf, "text": text})

import io, logging
handled = io.StringIO()
logging.getLogger("tensorflow").addHandler(logging.StreamHandler(handled))
outer = notebook._Streams()
outer.start()
logging.getLogger("tensorflow").warning(f"Executing op Logged in device {CPU}")
logging.getLogger("tensorflow").warning("a warning of TensorFlow's")
print("user print", flush=True)
tf_write(f"Executing op MatMul in device {CPU}\n")
mapping = "Device mapping:\n" + "".join(f"/job:localhost/replica:0/task:0/device:GPU:{i} -> device: {i}, {'x' * 80}\n" for i in range(12))
for start in range(0, len(mapping), 900):
    tf_write(mapping[start:start + 900])
sys.stdout.write(f"Executing op Lookalike in device {CPU}\n")  # the program's own, from its own code
tf_write("tf.print output\n")
os.write(1, b"c-level \x00 line\n")
inner = notebook._Streams()
inner.start()
tf_write(f"Executing op AddV2 in device {CPU}\n")
print("inner print", flush=True)
got_inner = inner.stop()
got_outer = outer.stop()
print("INNER", repr(got_inner[2]))
print("OUTER", repr(got_outer[2]))
print("RESTORED", sys.stdout is sys.__stdout__ or type(sys.stdout).__name__)
print("HANDLED", repr(handled.getvalue()))
'''


def test_streams_keep_tensorflow_s_python_level_lines_and_pass_the_rest_on() -> None:
    proc = subprocess.run([sys.executable, "-c", STREAMS], capture_output=True, timeout=60)
    out = proc.stdout.decode("utf-8", "replace")
    assert proc.returncode == 0, proc.stderr.decode()
    lines = out.splitlines()
    # live and in order: the program's prints, TF's other text; the fds' at the end of the block
    assert lines[:5] == ["user print", "Executing op Lookalike in device /job:localhost/replica:0/task:0/device:CPU:0",
                         "tf.print output", "inner print", "c-level \x00 line"]
    assert "Executing op MatMul" not in out.split("INNER")[0] and "Device mapping" not in out.split("INNER")[0]
    inner = next(line for line in lines if line.startswith("INNER "))
    outer = next(line for line in lines if line.startswith("OUTER "))
    assert "AddV2" in inner and "MatMul" not in inner
    assert "AddV2" in outer and "MatMul" in outer and outer.count("device: ") == 12  # the mapping, whole
    assert "RESTORED True" in lines
    assert "Logged" in outer  # a placement line TensorFlow logged through Python's logging
    assert "HANDLED \"a warning of TensorFlow's\\n\"" in lines  # its other records reach their handlers


def test_split_capture_takes_more_than_a_pipe_holds() -> None:
    from placement_cli.runtime.fdcapture import SplitCapture

    line = b"y" * 1023 + b"\n"
    cap = SplitCapture()
    cap.start()
    try:
        for _ in range(11 * 1024):
            os.write(2, line)
    finally:
        received = cap.stop()
    assert len(received[2]) == 11 * 1024 * 1024 and received[1] == b""
