"""Copies read from a traced step: control edges are no copies; a cond's untaken branch has its shape."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from processes import checkout_first, patience


# data on /cpu:0, a tf.cond and a control dependency on /cpu:1: TensorFlow's partitioner sends an
# empty float for the control edge, and both outputs of the cond's Switch (one dead every step)
SCRIPT = """
import json
import tensorflow as tf
from placement_cli.runtime.stepstats import traced_run

tf.compat.v1.disable_eager_execution()
graph = tf.Graph()
with graph.as_default():
    with tf.device("/cpu:0"):
        pred = tf.compat.v1.placeholder_with_default(True, [], name="pred")
        data = tf.compat.v1.placeholder_with_default([1.0, 2.0], [2], name="data")
        first = tf.identity(data, name="first")
    with tf.device("/cpu:1"):
        branched = tf.cond(pred, lambda: data * 2.0, lambda: data * 3.0, name="branch")
        with tf.control_dependencies([first.op]):
            ordered = tf.identity(branched, name="ordered")
config = tf.compat.v1.ConfigProto(device_count={"CPU": 2})
config.graph_options.rewrite_options.disable_meta_optimizer = True  # keep the graph as written
with tf.compat.v1.Session(graph=graph, config=config) as sess:
    traced = traced_run(tf, sess, ordered)
print(json.dumps([c.to_dict() for c in traced.copies]))
"""

# Copies between logical CPUs: on a GPU machine the TensorFlow process sees no GPU (conftest: cpu_devices),
# where unpinned nodes would run on GPU:0 and add copies of their own.
pytestmark = pytest.mark.cpu_devices("copies between logical CPUs")


@pytest.mark.tf
def test_control_edges_are_no_copies_and_an_untaken_branch_has_its_shape() -> None:
    env = dict(os.environ, PYTHONPATH=checkout_first(), TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=patience(240), env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    copies = {c["tensor"]: c for c in json.loads(done.stdout.strip().splitlines()[-1])}
    assert not [t for t in copies if "/ctrl" in t]  # once listed as copies of "0 B"
    assert copies["ordered"]["bytes"] == 8  # the data edge back to /cpu:0 is still a copy
    predicates = [c for t, c in copies.items() if "switch_pred" in t]
    assert len(predicates) == 2 and all(c["shape"] == [] and c["bytes"] == 1 for c in predicates)
    inputs = [c for t, c in copies.items() if t.startswith("Func/branch/")]
    assert len(inputs) == 2 and all(c["shape"] == [2] and c["bytes"] == 8 for c in inputs)  # taken or not
    assert all(c["bytes"] is not None for c in copies.values())
