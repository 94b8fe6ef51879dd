"""`placement trace` on a hostile TensorFlow script: its own log level, output that looks like
TensorFlow's, and a placement error it does not catch; and one with an eager op named like a node of a
tf.function and an error TensorFlow traces to the lines that defined the op. Two TensorFlow start-ups."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import is_matmul
from trace_helpers import TRACE, assert_clean, environment, run, write

pytestmark = pytest.mark.tf
CPU = "/job:localhost/replica:0/task:0/device:CPU:0"

HOSTILE = f'''
import os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"  # before TF is imported: TF would print none of its INFO..ERROR lines
import tensorflow as tf
tf.debugging.set_log_device_placement(False)  # before its first op: TensorFlow would log nothing
print("flag", tf.debugging.get_log_device_placement())
print("level", os.environ["TF_CPP_MIN_LOG_LEVEL"])
print("a.device: {CPU}")
print("x: (MatMul): {CPU}")
print("Device mapping: this is my text")
print("/job:localhost/replica:0/task:0/device:GPU:0 -> device: 0, name: fake")
print("I0000 00:00:1795270798.642321    6213 placer.cc:162] y: (Add): {CPU}", file=sys.stderr)
print("sum", tf.matmul(tf.ones([2, 2]), tf.ones([2, 2])).numpy().sum(), flush=True)
@tf.function
def pinned(x):  # its MatMul has the eager matmul's name, and a request of its own
    with tf.device("/device:GPU:99"):
        return tf.matmul(x, x)
print("pinned", pinned(tf.ones([2, 2])).numpy().sum(), flush=True)
tf.config.set_soft_device_placement(False)
try:
    with tf.device("/device:GPU:99"):
        tf.matmul(tf.ones([2, 2]), tf.ones([2, 2]))
    print("strict pin ran", flush=True)
except tf.errors.InvalidArgumentError:
    print("strict pin raised", flush=True)
graph = tf.Graph()
with graph.as_default():
    with tf.device("/device:CPU:7"):
        far = tf.constant(1.0, name="far")
    with tf.compat.v1.Session(graph=graph, config=tf.compat.v1.ConfigProto(allow_soft_placement=False)) as sess:
        sess.run(far)
'''


def test_a_hostile_tensorflow_script(tmp_path: Path) -> None:
    write(tmp_path, HOSTILE)
    proc = run([*TRACE, "--json", "--copies", "prog.py"], tmp_path, timeout=300)
    assert proc.returncode == 1, proc.stderr[-3000:]  # the uncaught placement error: python's exit status
    data = json.loads(proc.stdout)
    program = proc.stderr.decode()  # --json: the program's stdout and stderr, both here
    # the script's own lines, untouched, and TensorFlow's (INFO to ERROR) none: level 3 is the script's
    for line in ("level 3", f"a.device: {CPU}", f"x: (MatMul): {CPU}", "Device mapping: this is my text",
                 "-> device: 0, name: fake", f"placer.cc:162] y: (Add): {CPU}", "sum 8.0"):
        assert line in program, line
    assert "cpu_feature_guard" not in program and "Executing op" not in program
    assert "placer.cc:162] far" not in program and "WARNING: All log messages" not in program
    assert "Traceback (most recent call last):" in program and "Cannot assign a device for operation far" in program
    # as plain python shows it: no frame of placement's patched Session.run (--copies) in it
    assert "placement_cli" not in program[program.index("Traceback (most recent call last):"):]
    # ... and none of them counted as placements
    placed = {(p["node"], p["op"]) for p in data["placements"]}
    assert ("a.device", None) not in placed and ("x", "MatMul") not in placed and ("y", "Add") not in placed
    assert any(p["kind"] == "eager" and is_matmul(p["op"]) for p in data["placements"])
    assert not any("fake" in m["description"] or "my text" in m["description"] for m in data["device_mapping"])
    assert [e["node"] for e in data["errors"]] == ["far"]
    assert data["exit_code"] == 1
    # the script switched placement logging off before its first op: trace kept it on, and says so
    assert "flag False" in program and "strict pin raised" in program  # its own settings hold for it
    assert "switched placement logging off" in program
    # one MatMul asked for GPU:99 (the function's); the eager matmul's wrapper took no other graph's request
    asked = [p for p in data["placements"] if p["requested"] == "/device:GPU:99"]
    assert [(p["node"], p["status"]) for p in asked] == [("MatMul", "soft fallback")]
    assert_clean(tmp_path)


SHADOWED = '''
import tensorflow as tf
@tf.function
def step(x):  # its graph has a node named Cast, of op type Cast: as an eager tf.cast's wrapper has
    return tf.cast(x, tf.float32) * 2.0
print("step", step(tf.constant([1, 2])).numpy().sum())
print("eager", tf.cast(tf.constant([3]), tf.float32).numpy().sum())
v = tf.Variable(1.0)
@tf.function
def reset():  # its _Arg is assignvariableop_resource: TensorFlow's name for placeholder AssignVariableOp/resource
    v.assign(0.0)
reset()
v.assign(2.0)  # an eager AssignVariableOp after the function's lines
@tf.function
def out_of_range(x):
    return tf.gather(x, [5], name="far_gather")
out_of_range(tf.ones([2]))  # TensorFlow's error names the lines that defined the failing op
'''


@pytest.fixture(scope="module")
def shadowed(tmp_path_factory: pytest.TempPathFactory) -> subprocess.CompletedProcess[bytes]:
    tmp = tmp_path_factory.mktemp("shadowed")
    write(tmp, SHADOWED)
    proc = run([*TRACE, "--all", "prog.py"], tmp, timeout=300, env={**environment(tmp), "COLUMNS": "200"})
    assert proc.returncode == 1, proc.stderr[-3000:]  # the program's uncaught InvalidArgumentError
    return proc


def test_an_eager_op_s_wrapper_named_like_a_tf_function_s_node_stays_plumbing(shadowed: Any) -> None:
    """The keras-io training loop (found by tutorial runs): an eager Cast's wrapper function was taken for
    the tf.function's node Cast, shown as its row (times 2) and counted twice with the eager op."""
    rows = _rows(shadowed, "Cast")
    assert [row["node"] for row in rows] == ["Cast", "-"], rows  # the function's node; the eager op
    assert all(row.get("times", "1") in ("", "1") for row in rows), rows  # each once (before: Cast's row, times 2)


def test_a_function_s_arguments_named_as_tensorflow_names_them_find_its_graph(shadowed: Any) -> None:
    """keras fit's initialize_variables: the _Arg assignvariableop_resource was found in no recorded graph,
    so the function's AssignVariableOp was taken for the wrapper of the eager AssignVariableOp after it:
    hidden, its request unknown. Now the function's row, free as its graph has it."""
    rows = [row for row in _rows(shadowed, "AssignVariableOp") if row["node"] == "AssignVariableOp"]
    assert [row["status"] for row in rows] == ["free"], rows


def test_tensorflow_s_defined_at_stacks_show_the_program_s_frames_only(shadowed: Any) -> None:
    """TensorFlow keeps each op's stack for its errors ("Detected at node X defined at"): trace's hook on
    tf.function tracing showed in it (placement_cli/runtime/facts.py, in recording), found on the
    tf.distribute tutorial's error. As plain python: the program's lines only."""
    program = shadowed.stderr.decode()
    detected = program[program.index("Detected at node far_gather defined at (most recent call last):"):]
    stack = detected[: detected.index("indices[0] = 5 is not in [0, 2)")]
    frames = [line.strip() for line in stack.splitlines() if line.strip().startswith("File ")]
    assert [frame.split(", in ")[-1] for frame in frames] == ["<module>", "out_of_range"], stack
    assert "placement_cli" not in stack and all("prog.py" in frame for frame in frames)


def _rows(proc: subprocess.CompletedProcess[bytes], op: str) -> list[dict[str, str]]:
    """The placement table's rows of op type ``op``, by column (node, op, requested, assigned, status, ...)."""
    table = proc.stdout.decode().split("Placements")[1].split("Per device")[0]
    header = next([cell.strip() for cell in line.strip().strip("┃").split("┃")] for line in table.splitlines()
                  if line.startswith("┃"))
    rows = [dict(zip(header, (cell.strip() for cell in line.strip().strip("│").split("│")), strict=True))
            for line in table.splitlines() if line.startswith("│")]
    return [row for row in rows if row["op"] == op]
