"""The notebook API captures in-process, at fd level, without deadlocking on big logs."""

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
    for _ in range(11 * 1024):          # more than 10 MB through the captured fds
        os.write(2, b"y" * 1023 + b"\\n")
print("REPR", repr(report))
print("OPS", json.dumps(sorted({p.op for p in report.placements if p.kind == "eager"})))
print("LOG", len(report.log) > 10 * 2**20)
print("JSON", sorted(json.loads(report.to_json())))
print("HTML", "<" in report._repr_html_())
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
    assert out["JSON"] == "['device_mapping', 'errors', 'placements', 'summary']"
    assert out["HTML"] == "True"
    assert out["AFTER_ERROR"] == "True"
    assert "y" * 100 not in proc.stderr  # the captured output did not leak to the terminal
