"""fd-level capture: C-level writes to fds 1 and 2 are caught, even past a pipe's size."""

import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_cli.runtime.capture.fdcapture import capture_fds
from processes import patience


def test_captures_raw_fd_writes_and_restores() -> None:
    with capture_fds() as cap:
        os.write(1, b"to-fd-1\n")
        os.write(2, b"to-fd-2\n")
    assert cap.text == "to-fd-1\nto-fd-2\n"


def test_libc_buffered_printf_is_flushed_into_the_capture() -> None:
    code = (
        "import ctypes\n"
        "from placement_cli.runtime.capture.fdcapture import capture_fds\n"
        "libc = ctypes.CDLL(None)\n"
        "with capture_fds() as cap:\n"
        "    libc.printf(b'from-printf\\n')\n"
        "print('CAPTURED=' + repr(cap.text))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=patience(60)).stdout
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
    from placement_cli.runtime.capture.fdcapture import separate

    stderr = (GLOG + b"placer.cc:162] MatMul: (MatMul): " + CPU + b"\n"
              + GLOG + b"execute.cc:1775] Executing op MatMul in device " + CPU + b"\n"
              + GLOG + b"direct_session.cc:382] Device mapping:\n"
              + b"/job:localhost/replica:0/task:0/device:GPU:0 -> device: 0, name: NVIDIA H200\n"
              + b"the program's line \x00\xff\r\n"
              + b"a.device: " + CPU + b"\n"  # a print that looks like a placement
              + GLOG + b"other.cc:1] x: (Y): " + CPU + b"\n"  # the placer's shape, not the placer
              + b"Executing op Lookalike in device " + CPU + b"\n")
    copy = b"MatMul: (MatMul): " + CPU + b"\n"
    lookalike = b"mine: (MatMul): " + CPU + b"\n"  # the copy's shape, printed by the program: no twin
    stdout = copy + lookalike + b"progress 50%\rprogress 100%\r"
    taken = separate({1: stdout, 2: stderr})
    assert taken.shown[2] == stderr[stderr.index(b"the program's"):]
    assert taken.shown[1] == lookalike + b"progress 50%\rprogress 100%\r"
    assert taken.log == {1: stdout, 2: stderr}
    # only TensorFlow's lines are left to parse, on their own lines; the stdout copy is its twin's
    kept = taken.tensorflow[2].splitlines()
    assert kept[:4] == stderr.splitlines()[:4] and not any(kept[4:])
    assert taken.tensorflow[1] == b"\n\n"  # line for line: the unfinished last line has none


def test_the_blank_line_that_ends_a_gpu_mapping_is_tensorflow_s_not_the_program_s() -> None:
    """Before: a script captured on a GPU machine got a blank line on stderr it never wrote."""
    from placement_cli.runtime.capture.fdcapture import separate

    mapping = (GLOG + b"direct_session.cc:382] Device mapping:\n/job:localhost/replica:0/task:0/device:GPU:0 -> "
               b"device: 0, name: NVIDIA H200, pci bus id: 0000:00:06.0, compute capability: 9.0a\n\n")
    stderr = b"mine\n" + mapping + b"\nmine too\n"
    taken = separate({2: stderr})
    assert taken.shown[2] == b"mine\n\nmine too\n" and taken.log[2] == stderr
    assert taken.tensorflow[2].splitlines()[1:4] == mapping.splitlines()


def test_where_info_lines_are_hidden_whole_copies_of_the_placer_s_shape_count_and_glued_ones_do_not() -> None:
    from placement_cli.runtime.capture.fdcapture import separate

    copy = b"MatMul: (MatMul): " + CPU + b"\n"
    glued = b"step=42input: (_Arg): " + CPU + b"\n"  # no twin says where TensorFlow's line starts
    stdout = copy + glued + b"a.device: " + CPU + b"\n"
    taken = separate({1: stdout, 2: b""}, info_hidden=True)
    assert taken.shown[1] == glued + b"a.device: " + CPU + b"\n"
    assert taken.tensorflow[1] == copy + b"\n\n" and taken.unsure == 1
    visible = separate({1: stdout, 2: b""}, info_hidden=False)  # no twins, none hidden: the program's
    assert visible.shown[1] == stdout and visible.unsure == 0
    # a node of the program's own graphs says where TensorFlow's line starts (the longest name that fits)
    known = separate({1: stdout, 2: b""}, info_hidden=True, known={("input", "_Arg"), ("put", "_Arg"), ("x", "Mul")})
    assert known.shown[1] == b"step=42" + b"a.device: " + CPU + b"\n" and known.unsure == 0
    assert known.tensorflow[1] == copy + b"input: (_Arg): " + CPU + b"\n\n"


def test_a_tensorflow_line_after_the_program_s_unfinished_line_is_split_off_it() -> None:
    from placement_cli.runtime.capture.fdcapture import separate

    arg = b"input: (_Arg): " + CPU + b"\n"
    stdout = b"step=42" + arg + b"\ndone\n"
    stderr = b"err=" + GLOG + b"placer.cc:162] " + arg + b"partial" + GLOG + b"execute.cc:1] Executing op Mul in device " + CPU + b"\n"
    taken = separate({1: stdout, 2: stderr})
    assert taken.shown == {1: b"step=42\ndone\n", 2: b"err=partial"}
    assert taken.tensorflow[1] == b"\n\n\n"  # its twin on fd 2 counts it
    assert taken.tensorflow[2] == GLOG + b"placer.cc:162] " + arg + GLOG + b"execute.cc:1] Executing op Mul in device " + CPU + b"\n"
    # a twin only says so where its body ends the line: a prefix of the program's stays the program's
    lookalike = b"x: (A): " + CPU + arg
    assert separate({1: lookalike, 2: GLOG + b"placer.cc:1] " + arg}).shown[1] == b"x: (A): " + CPU


def test_lines_a_capture_added_from_python_join_the_log_never_the_program_s_bytes() -> None:
    from placement_cli.runtime.capture.fdcapture import separate

    line = b"Executing op AddV2 in device " + CPU + b"\n"
    stderr = b"first\nunfinished" + b" line\n"
    taken = separate({2: stderr}, [(len(b"first\nunf"), line), (0, line)])
    assert taken.shown[2] == stderr  # what the program wrote, whole, even where a line was cut into
    assert taken.log[2] == line + b"first\n" + line + b"unfinished line\n"
    assert taken.tensorflow[2] == line + b"\n" + line + b"\n"
    assert separate({}, [(0, line)]).log == {2: line}


def test_what_tensorflow_s_python_listener_writes_is_recognised_whole() -> None:
    from placement_cli.runtime.capture.fdcapture import is_placement_text

    eager = b"Executing op MatMul in device " + CPU + b"\n"
    assert is_placement_text(eager) and is_placement_text(eager * 2)
    assert not is_placement_text(eager[:-1])  # a part of a line: not yet
    assert is_placement_text(b"Device mapping: no known devices.\n")
    assert is_placement_text(b"Device mapping:\n/job:localhost/replica:0/task:0/device:GPU:0 -> device: 0\n")
    # as the listener writes a GPU machine's (an H200's, in a notebook kernel): a blank line ends the list
    h200 = (b"Device mapping:\n/job:localhost/replica:0/task:0/device:GPU:0 -> device: 0, name: NVIDIA H200, "
            b"pci bus id: 0000:00:06.0, compute capability: 9.0a\n\n")
    assert is_placement_text(h200)
    assert not is_placement_text(h200 + b"\n") and not is_placement_text(b"Device mapping:\n\n")
    assert not is_placement_text(eager + b"hello\n")
    assert not is_placement_text(b"tf.print output\n")


def test_split_capture_keeps_each_fd_apart_in_order_and_restores_them() -> None:
    code = (
        "import os\n"
        "from placement_cli.runtime.capture.fdcapture import SplitCapture\n"
        "cap = SplitCapture()\n"
        "cap.start()\n"
        "os.write(1, b'out\\n'); os.write(2, b'err 1\\n'); cap.write(2, b'added\\n'); os.write(2, b'err 2\\n')\n"
        "received = cap.stop()\n"
        "os.write(1, b'after\\n')\n"
        "print(repr(received))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=patience(60))
    assert proc.stdout == "after\n{1: b'out\\n', 2: b'err 1\\nadded\\nerr 2\\n'}\n"
    assert proc.stderr == ""


STREAMS = r'''
import os, sys
from placement_cli.runtime.capture import pystreams
from placement_cli.runtime.capture.fdcapture import SplitCapture

CPU = "/job:localhost/replica:0/task:0/device:CPU:0"
# Code whose module is TensorFlow's, as the frame of a write from TensorFlow's listener is.
from_tf = {"__name__": "tensorflow.python.eager.listener", "sys": sys}

def tf_write(text):
    exec("sys.stdout.write(text)", {**from_tf, "text": text})

import io, logging
handled = io.StringIO()
logging.getLogger("tensorflow").addHandler(logging.StreamHandler(handled))
outer = pystreams.Streams()
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
inner = pystreams.Streams()
inner.start()
tf_write(f"Executing op AddV2 in device {CPU}\n")
print("inner print", flush=True)
got_inner = inner.stop()
got_outer = outer.stop()
print("INNER", repr(got_inner.log[2]))
print("OUTER", repr(got_outer.log[2]))
print("RESTORED", sys.stdout is sys.__stdout__ or type(sys.stdout).__name__)
print("HANDLED", repr(handled.getvalue()))
'''


def test_streams_keep_tensorflow_s_python_level_lines_and_pass_the_rest_on() -> None:
    proc = subprocess.run([sys.executable, "-c", STREAMS], capture_output=True, timeout=patience(60))
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
    from placement_cli.runtime.capture.fdcapture import SplitCapture

    line = b"y" * 1023 + b"\n"
    cap = SplitCapture()
    cap.start()
    try:
        for _ in range(11 * 1024):
            os.write(2, line)
    finally:
        received = cap.stop()
    assert len(received[2]) == 11 * 1024 * 1024 and received[1] == b""


PLACED = [(f"node{i}/{op.lower()}", op) for i, op in enumerate(["MatMul", "_Arg", "_Retval", "AddV2", "Identity"])]


def tensorflow_writes(event: tuple[str, int]) -> tuple[bytes, bytes, bytes]:
    """What TensorFlow writes for one event, each line whole: (fd 1, fd 2, through Python)."""
    kind, i = event
    name, op = PLACED[i % len(PLACED)]
    if kind == "placer":
        body = f"{name}: ({op}): ".encode() + CPU + b"\n"
        return body, GLOG + b"placer.cc:162] " + body, b""
    if kind == "eager":
        return b"", GLOG + f"execute.cc:1775] Executing op {op} in device ".encode() + CPU + b"\n", b""
    if kind == "python":
        return b"", b"", f"Executing op {op} in device ".encode() + CPU + b"\n"
    # a Session's mapping on a GPU machine: its list of devices ends with a blank line (the H200 run's log)
    return b"", (GLOG + b"direct_session.cc:382] Device mapping:\n"
                 + b"/job:localhost/replica:0/task:0/device:GPU:0 -> device: 0, name: x\n\n"), b""


def replay(steps: list[tuple[str, object]]) -> tuple[dict[int, bytes], list[tuple[int, bytes]], dict[int, bytes]]:
    """The fds' contents and the Python-level lines a capture would hold after ``steps``, and the
    program's own bytes by fd."""
    fds = {1: bytearray(), 2: bytearray()}
    mine = {1: bytearray(), 2: bytearray()}
    diverted: list[tuple[int, bytes]] = []
    for kind, what in steps:
        if kind == "user":
            fd, data = what  # type: ignore[misc]
            fds[fd] += data
            mine[fd] += data
            continue
        out, err, python = tensorflow_writes(what)  # type: ignore[arg-type]
        fds[1] += out
        fds[2] += err
        if python:
            diverted.append((len(fds[2]), python))
    return {fd: bytes(d) for fd, d in fds.items()}, diverted, {fd: bytes(d) for fd, d in mine.items()}


def rows(report: object) -> list[tuple[object, ...]]:
    return [(p.kind, p.node, p.op, p.canonical) for p in report.placements]  # type: ignore[attr-defined]


NOISE = st.one_of(st.binary(max_size=40), st.sampled_from([b"", b"\x00", b"step=42", b"\r", b"x\n", b"I", b"0",
                                                            b"a: (MatMul): " + CPU, b"/job:"]))
EVENT = st.tuples(st.sampled_from(["placer", "eager", "python", "mapping"]), st.integers(0, 20))
STEPS = st.lists(st.one_of(st.tuples(st.just("tf"), EVENT),
                           st.tuples(st.just("user"), st.tuples(st.sampled_from([1, 2]), NOISE))), max_size=40)


@settings(max_examples=300, deadline=None)
@given(STEPS)
def test_random_program_bytes_around_tensorflow_s_lines_come_back_exactly_and_change_no_placement(
        steps: list[tuple[str, object]]) -> None:
    from placement_cli.notebook import _parse
    from placement_cli.runtime.capture.fdcapture import separate

    received, diverted, mine = replay(steps)
    taken = separate(received, diverted)
    assert taken.shown == mine  # byte for byte, whatever the program wrote
    clean_received, clean_diverted, _ = replay([step for step in steps if step[0] == "tf"])
    report, clean = _parse(taken, None), _parse(separate(clean_received, clean_diverted), None)
    assert rows(report) == rows(clean)
    assert len(report.placements) == sum(1 for kind, _ in steps if kind == "tf" and _[0] != "mapping")
    lines = report.log.split("\n")
    for p in report.placements:  # each placement's line number points at its line in report.log
        assert lines[p.line - 1].endswith(p.canonical) and (p.node or p.op) in lines[p.line - 1]


OUT_OF_ORDER = r'''
import os, signal
from placement_cli.runtime.capture import fdcapture
from placement_cli.runtime.capture.fdcapture import SplitCapture

def where():
    return [os.readlink(f"/proc/self/fd/{fd}") for fd in (1, 2)]

before = where()
a = SplitCapture(); a.start(); os.write(1, b"a1\n")
b = SplitCapture(); b.start(); os.write(1, b"b1\n")
got_a = a.stop(); os.write(1, b"b2\n")  # the outer one stops first: fd 1 stays with the inner one
got_b = b.stop()
reached = False
try:
    with fdcapture.interrupts_deferred():
        os.kill(os.getpid(), signal.SIGINT)
        reached = True
    interrupted = "late"
except KeyboardInterrupt:
    interrupted = "after the block"
print(repr(got_a), repr(got_b), before == where(), fdcapture._ORIGINALS, reached, interrupted)
'''


def test_split_captures_stopped_out_of_order_put_every_fd_back_and_ctrl_c_waits_for_it() -> None:
    proc = subprocess.run([sys.executable, "-c", OUT_OF_ORDER], capture_output=True, text=True, timeout=patience(60))
    assert proc.stdout == ("{1: b'a1\\n', 2: b''} {1: b'b1\\nb2\\n', 2: b''} True {} True after the block\n"), proc.stderr


_DIES = r"""
import os, sys
from placement_cli.runtime.capture.fdcapture import {how}
line = b"F0000 00:00:1795557014.587480    4303 parse_flags_from_env.cc:234] Unknown flag in TF_XLA_FLAGS: --bogus\x1b[2J\n"
{start}
os.write(1, b"I0000 00:00:1.5    4303 placer.cc:162] a: (Const): /job:localhost/replica:0/task:0/device:CPU:0\n")
os.write(2, b"E0000 00:00:1.5    4303 x.cc:1] an error, not the end\n" + line)
os._exit(1)  # as LOG(QFATAL) ends a process: no Python code runs after
"""


@pytest.mark.parametrize(("how", "start"), [("capture_fds", "held = capture_fds(); held.__enter__()"),
                                            ("SplitCapture", "held = SplitCapture(); held.start()")])
def test_tensorflow_s_last_words_are_told_when_it_ends_the_process_inside_a_capture(how: str, start: str) -> None:
    """TensorFlow ends a process from C++ (an unknown flag in TF_XLA_FLAGS): its FATAL line, written
    into the capture, reaches the user's stderr (control bytes made harmless); the rest stays unshown."""
    done = subprocess.run([sys.executable, "-c", _DIES.format(how=how, start=start)], capture_output=True, timeout=patience(60))
    assert done.returncode == 1
    assert done.stdout == b""
    assert done.stderr.decode() == ("placement: TensorFlow ended the process: F0000 00:00:1795557014.587480    4303 "
                                    "parse_flags_from_env.cc:234] Unknown flag in TF_XLA_FLAGS: --bogus?[2J\n")


def test_a_capture_that_ends_leaves_no_watcher_and_says_nothing() -> None:
    script = ("import os, sys\nfrom placement_cli.runtime.capture.fdcapture import capture_fds\n"
              "with capture_fds():\n    os.write(2, b'F0000 00:00:1.5    1 x.cc:1] not the end\\n')\n"
              "def parent(pid):\n    try:\n        with open(f'/proc/{pid}/stat', 'rb') as f:\n"
              "            return int(f.read().rsplit(b')', 1)[1].split()[1])\n"
              "    except (OSError, IndexError, ValueError):\n        return None  # ended while /proc was read\n"
              "print(len([p for p in os.listdir('/proc') if p.isdigit() and parent(p) == os.getpid()]))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=patience(60))
    assert (done.returncode, done.stdout, done.stderr) == (0, "0\n", "")


def test_a_capture_ends_at_once_while_a_process_forked_inside_it_still_runs() -> None:
    """A process forked inside the capture holds every fd placement had, the watcher's pipe too: the
    capture still ends when placement says so, not when that process exits."""
    script = ("import os, signal, sys, time\nfrom placement_cli.runtime.capture.fdcapture import capture_fds\n"
              "with capture_fds():\n    pid = os.fork()\n    if pid == 0:\n        time.sleep(60)\n        os._exit(0)\n"
              "    start = time.monotonic()\n"
              "took = time.monotonic() - start\nos.kill(pid, signal.SIGKILL)\nos.waitpid(pid, 0)\nprint(took < 8)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=patience(50))
    assert (done.returncode, done.stdout, done.stderr) == (0, "True\n", "")
