"""`placement trace` of a program that builds one model in several Sessions' graphs (a sweep over
devices): every placer block belongs to one Session's graph, and each node takes its own graph's
request, never an unknown one because another graph has its name. One TensorFlow run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from trace_helpers import TRACE, assert_clean, run, write

# Lessons of logical CPUs: on a GPU machine their TensorFlow processes see no GPU (conftest: cpu_devices).
pytestmark = [pytest.mark.tf, pytest.mark.cpu_devices("logical CPUs stand for the devices")]
CPU = "/job:localhost/replica:0/task:0/device:CPU:0"

SWEEP = '''
import tensorflow as tf

def model(dev, name):
    graph = tf.Graph()
    with graph.as_default():
        a = tf.constant([[1.0, 2.0]], name="a")
        with tf.device(dev):
            out = tf.matmul(a, a, transpose_b=True, name=name)
    return graph, out

soft = tf.compat.v1.ConfigProto(allow_soft_placement=True)
for dev in ("/cpu:0", "/cpu:5"):  # a sweep: the same model, x pinned to each device in turn
    graph, x = model(dev, "x")
    with tf.compat.v1.Session(graph=graph, config=soft) as sess:
        print(dev, sess.run(x), flush=True)
# two Sessions made first, run in the other order: their graphs are placed as they run
(g1, y1), (g2, y2) = model("/cpu:0", "y"), model("/cpu:7", "y")
s1, s2 = tf.compat.v1.Session(graph=g1, config=soft), tf.compat.v1.Session(graph=g2, config=soft)
print("second", s2.run(y2), flush=True)
print("first", s1.run(y1), flush=True)

def make(dev):  # one tf.function per device: each graph is named "step", its MatMul "mm"
    @tf.function
    def step(v):
        with tf.device(dev):
            return tf.matmul(v, v, name="mm")
    return step

for dev in ("/cpu:0", "/cpu:6"):
    print(dev, make(dev)(tf.ones([2, 2])).numpy().sum(), flush=True)
'''


def test_two_graphs_with_the_same_names_keep_their_own_requests(tmp_path: Path) -> None:
    """Issue 27.6: both ``x`` were ``logged`` with request ``?``, and ``check --no-fallback`` passed over
    two real fallbacks."""
    write(tmp_path, SWEEP)
    proc = run([*TRACE, "--json", "prog.py"], tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(proc.stdout)
    rows = [(p["node"], p["requested"], p["status"]) for p in data["placements"] if p["node"] in ("x", "y")]
    assert rows == [("x", "/device:CPU:0", "as requested"), ("x", "/device:CPU:5", "soft fallback"),
                    ("y", "/device:CPU:7", "soft fallback"), ("y", "/device:CPU:0", "as requested")], rows
    assert all(p["canonical"] == CPU for p in data["placements"] if p["node"] in ("x", "y"))
    # two tf.functions' graphs with the same names: each placer line names its function (its trace)
    steps = [(p["requested"], p["status"]) for p in data["placements"] if p["node"] == "mm"]
    assert steps == [("/device:CPU:0", "as requested"), ("/device:CPU:6", "soft fallback")], steps
    graphs = [p["graph"] for p in data["placements"] if p["node"] == "mm"]
    assert all(g.startswith("__inference_step_") for g in graphs) and len(set(graphs)) == 2
    saved = tmp_path / "sweep.json"
    saved.write_bytes(proc.stdout)
    gate = run([sys.executable, "-m", "placement_cli", "check", "--no-fallback", str(saved)], tmp_path, timeout=120)
    assert gate.returncode == 1 and b"soft fallbacks" in gate.stdout + gate.stderr, gate.stdout + gate.stderr
    assert_clean(tmp_path)
