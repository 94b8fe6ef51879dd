"""What eager ops asked for, in `placement trace` and capture(): the device scope each ran in, joined
to its log line. One eager program (it turns on TensorFlow's XLA devices itself, where this
TensorFlow has them), traced once and captured once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import is_matmul
from trace_helpers import TRACE, assert_clean, environment, run, write
from processes import patience

pytestmark = pytest.mark.tf

PROGRAM = '''
import os, threading
FLAGS_AT_START = os.environ.get("TF_XLA_FLAGS")
os.environ["TF_XLA_FLAGS"] = "--tf_xla_enable_xla_devices"  # the script's own switch, before TensorFlow
import tensorflow as tf
from tensorflow.python.framework import op_callbacks

XLA = any(d.device_type == "XLA_CPU" for d in tf.config.list_logical_devices())
MISSING = "/device:GPU:%d" % len(tf.config.list_logical_devices("GPU"))  # one past the last GPU
x = tf.fill([2, 2], 3.0)  # no device scope: no request
if XLA:
    with tf.device("/device:XLA_CPU:0"):
        y = tf.matmul(x, x)  # XLA_CPU has a MatMul kernel
        s = tf.strings.as_string(y)  # ... and no AsString kernel: soft placement moves it
mine = []
def own(op_type, inputs, attrs, outputs, op_name=None, graph=None):
    mine.append(op_type)
op_callbacks.add_op_callback(own)  # the program's own callback, added and taken away again
with tf.device(MISSING):
    z = tf.abs(x)
op_callbacks.remove_op_callback(own)

@tf.function
def negate(a):
    return tf.math.negative(a)  # a graph op: its request is the function graph's, not the scope's

with tf.device("/cpu:0"):
    negate(x)
try:
    with tf.device(MISSING):
        tf.math.sqrt(x)
        raise ValueError("the program's own error inside a device scope")
except ValueError:
    pass
barrier = threading.Barrier(2)
def other():  # a thread the callback is not in: its ops' requests are unknown, never the main thread's
    barrier.wait()
    for _ in range(20):
        with tf.device("/cpu:0"):
            tf.math.cos(x)
thread = threading.Thread(target=other)
thread.start()
barrier.wait()
for _ in range(20):
    with tf.device(MISSING):
        tf.math.sin(x)
thread.join()
print("XLA", XLA, "MISSING", MISSING, "own saw", len(mine), "flags at start", FLAGS_AT_START, flush=True)
'''

CAPTURE = '''
import os, sys
os.environ["TF_XLA_FLAGS"] = "--tf_xla_enable_xla_devices"  # capture() starts TensorFlow: set before it
import placement_cli
with placement_cli.capture() as report:
    exec(compile(open(sys.argv[1]).read(), sys.argv[1], "exec"))
from tensorflow.python.eager import context
print("CALLBACKS LEFT", len(context.context().op_callbacks))
print("REPORT " + report.to_json().replace("\\n", " "))
from placement_cli.runtime import private
with private.disabled("op_callbacks"):  # a TensorFlow without the API: requests unknown, and said
    with placement_cli.capture() as unknown:
        with tf.device("/cpu:0"):
            tf.math.abs(x)
print("DISABLED " + unknown.to_json().replace("\\n", " "))
'''


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str, Path]:
    tmp = tmp_path_factory.mktemp("eager")
    # the script hides TensorFlow's INFO lines (eager placements among them) before importing it
    write(tmp, 'import os\nos.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"\n' + PROGRAM)
    env = environment(tmp)
    env.pop("TF_XLA_FLAGS", None)
    proc = run([*TRACE, "--json", "prog.py"], tmp, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout), proc.stderr.decode(), tmp


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str]:
    tmp = tmp_path_factory.mktemp("eager_capture")
    write(tmp, PROGRAM)
    write(tmp, CAPTURE, "capture.py")
    proc = subprocess.run([sys.executable, "capture.py", "prog.py"], cwd=tmp, env=environment(tmp), capture_output=True,
                          timeout=patience(300), check=False)
    out = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "CALLBACKS LEFT 0" in out  # the block took its callback away
    return json.loads(out.split("REPORT ", 1)[1].split("\n", 1)[0]), out


def _program(output: str) -> tuple[bool, str]:
    line = next(line for line in output.splitlines() if line.startswith("XLA "))
    words = line.split()
    return words[1] == "True", words[3]


def _eager(data: dict[str, Any], op: str) -> list[dict[str, Any]]:
    return [p for p in data["placements"] if p["kind"] == "eager" and (p["op"] == op or (op == "MatMul" and is_matmul(p["op"])))]


def _check_requests(data: dict[str, Any], output: str) -> None:
    xla, missing = _program(output)
    index = int(missing.rsplit(":", 1)[1])
    full = f"/job:localhost/replica:0/task:0/device:GPU:{index}"
    [fill] = _eager(data, "Fill")
    assert (fill["requested"], fill["status"], fill["reason"]) == (None, "free", None)
    for op in ("Abs", "Sqrt"):  # the program's own callback and its own error changed nothing
        [moved] = _eager(data, op)
        assert (moved["requested"], moved["status"]) == (full, "soft fallback")
        assert moved["reason"].startswith(f"GPU:{index} does not exist (have: ")
    sines, cosines = _eager(data, "Sin"), _eager(data, "Cos")
    assert len(sines) == len(cosines) == 20
    assert {(p["requested"], p["status"]) for p in sines} == {(full, "soft fallback")}
    assert {(p["requested"], p["status"]) for p in cosines} == {(None, "logged")}  # another thread: unknown
    [call] = [p for p in data["placements"] if p["kind"] == "eager" and p["op"].startswith("__inference_negate")]
    assert (call["requested"], call["status"]) == ("/job:localhost/replica:0/task:0/device:CPU:0", "as requested")
    [negative] = [p for p in data["placements"] if p["kind"] == "placer" and p["op"] == "Neg"]
    assert (negative["requested"], negative["status"]) == (None, "free")  # the function body is a graph's
    assert all(p["requested"] is None for p in _eager(data, "_EagerConst"))  # made by C++: no record, unknown
    if not xla:
        pytest.skip("this TensorFlow has no XLA_CPU device (TF_XLA_FLAGS=--tf_xla_enable_xla_devices gave none)")
    xla_cpu = "/job:localhost/replica:0/task:0/device:XLA_CPU:0"
    [matmul] = _eager(data, "MatMul")
    assert (matmul["requested"], matmul["device"], matmul["status"]) == (xla_cpu, xla_cpu, "as requested")
    [as_string] = _eager(data, "AsString")
    assert (as_string["requested"], as_string["status"]) == (xla_cpu, "soft fallback")
    assert as_string["reason"] == "no XLA_CPU kernel registered for AsString"
    assert as_string["device_type"] != "XLA_CPU"


def test_trace_gives_eager_ops_their_requests(traced: tuple[dict[str, Any], str, Path]) -> None:
    data, program, _tmp = traced
    assert data["exit_code"] == 0 and "own saw" in program  # the script's own output (--json: on stderr)
    _check_requests(data, program)


def test_trace_leaves_the_program_its_environment_and_nothing_behind(traced: tuple[dict[str, Any], str, Path]) -> None:
    _data, program, tmp = traced
    assert "flags at start None" in program  # trace set no TF_XLA_FLAGS: the XLA devices are the script's doing
    assert "Executing op" not in program and "placer.cc" not in program  # its log level 3 held for it
    assert_clean(tmp)


def test_capture_gives_eager_ops_their_requests(captured: tuple[dict[str, Any], str]) -> None:
    data, output = captured
    assert data["capture"]["complete"], data["capture"]
    _check_requests(data, output)


def test_capture_without_the_callback_api_leaves_eager_requests_unknown(captured: tuple[dict[str, Any], str]) -> None:
    _, output = captured
    data = json.loads(output.split("DISABLED ", 1)[1].split("\n", 1)[0])
    [moved] = _eager(data, "Abs")
    assert (moved["requested"], moved["status"]) == (None, "logged")  # unknown, never taken for "no request"
    assert any("op_callbacks" in note and "switched off" in note for note in data["capture"]["notes"])
