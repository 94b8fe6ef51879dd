"""The notebook API captures in-process, at fd level, without deadlocking on big logs."""

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.tf

SCRIPT = """
import json, os
import placement_cli
import tensorflow as tf
with placement_cli.capture() as report:
    x = tf.matmul(tf.ones([2, 3]), tf.ones([3, 2]))

    @tf.function
    def f(a):
        with tf.device("/gpu:3"):
            return tf.matmul(a, a, name="pinned")

    f(tf.ones([2, 2]))
    g = tf.Graph()
    with g.as_default():
        c = tf.constant(1.0, name="in_session")
    with tf.compat.v1.Session(graph=g) as sess:  # its config does not ask for logging
        sess.run(c)
    for _ in range(11 * 1024):          # more than 10 MB through the captured fds
        os.write(2, b"y" * 1023 + b"\\n")
print("REPR", repr(report))
print("OPS", json.dumps(sorted({p.op for p in report.placements if p.kind == "eager"})))
print("LOG", len(report.log) > 10 * 2**20)
print("JSON", sorted(json.loads(report.to_json())))
print("HTML", "<" in report._repr_html_())
print("WHY", json.dumps({p.node: [p.status, p.reason] for p in report.placements if p.node in ("pinned", "in_session")}))
try:
    with placement_cli.capture() as failed:
        tf.matmul(tf.ones([2, 2]), tf.ones([2, 2]))
        raise RuntimeError("midway")
except RuntimeError:
    print("AFTER_ERROR", len(failed.placements) > 0)
"""


def test_capture_context_manager() -> None:
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = dict(line.split(" ", 1) for line in proc.stdout.splitlines() if " " in line)
    assert "placements" in out["REPR"]
    assert "_MklMatMul" in out["OPS"] or "MatMul" in out["OPS"]
    assert out["LOG"] == "True"
    assert out["JSON"] == "['copies', 'device_mapping', 'errors', 'log', 'placements', 'result', 'summary']"
    assert json.loads(out["WHY"]) == {"pinned": ["soft fallback", "GPU:3 does not exist (have: CPU:0)"],
                                      "in_session": ["free", None]}
    assert out["HTML"] == "True"
    assert out["AFTER_ERROR"] == "True"
    assert "y" * 100 not in proc.stderr  # the captured output did not leak to the terminal
