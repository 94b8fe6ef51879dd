"""Timed runs of TensorFlow 2 programs, checked against TensorFlow's own profile: `trace --time` on a
tf.function whose 1024x1024 matmul runs on /cpu:1, a 64x64 one on /cpu:2, and whose 4 MiB product crosses
to /cpu:2 every step; capture(time=True) on the same step, its per-op times against the .xplane.pb
read independently. Two TensorFlow start-ups."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from trace_helpers import TRACE, assert_clean, environment, run, write

# Logical CPUs: on a GPU machine the GPUs are hidden (conftest), where the unpinned inputs would start on GPU:0.
pytestmark = [pytest.mark.tf, pytest.mark.cpu_devices("times between logical CPUs")]

CALLS, WARMUP = 7, 1  # a warm-up of 1: the count is no flag of the traced script (it once closed its stdout)
STEP = '''
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 3)

@tf.function
def step(x, y):
    with tf.device("/cpu:1"):
        big = tf.matmul(x, x)
    with tf.device("/cpu:2"):
        small = tf.matmul(y, y)
        return tf.reduce_sum(big) + tf.reduce_sum(small)

'''
DATA = """
x = tf.random.normal([1024, 1024])
y = tf.random.normal([64, 64])
"""
TRACED = STEP + DATA + f'''
for _ in range({CALLS}):
    step(x, y)
print("done")
'''
CAPTURED = '''
import json, shutil, sys
import placement_cli
from placement_cli.runtime import profiler
from tensorflow.tsl.profiler.protobuf import xplane_pb2

KEPT = sys.argv[1]
read = profiler.read
def keep(found, **kwargs):  # the profile as TensorFlow wrote it, kept for the independent reading below
    shutil.copytree(found.logdir, KEPT)
    return read(found, **kwargs)
profiler.read = keep
''' + STEP + f'''
with placement_cli.capture(time=True, warmup={WARMUP}) as report:  # before TensorFlow's first op
    x = tf.random.normal([1024, 1024])
    y = tf.random.normal([64, 64])
    for _ in range({CALLS}):
        step(x, y)
cost = report.report.cost

# TensorFlow's own profile, read here without placement: the step's calls on the Python thread, each
# MatMul kernel on any thread; the measured steps run from the first call after the warm-up to the last.
import glob
space = xplane_pb2.XSpace()
space.ParseFromString(open(glob.glob(KEPT + "/**/*.xplane.pb", recursive=True)[0], "rb").read())
host = next(p for p in space.planes if p.name == "/host:CPU")
calls, kernels = [], {{}}
for line in host.lines:
    for e in line.events:
        name = host.event_metadata[e.metadata_id].name
        at = line.timestamp_ns * 1000 + e.offset_ps
        if name.startswith("EagerLocalExecute: __inference_step_"):
            calls.append(at)
        elif name.partition(":")[0] in ("MatMul", "MatMul_1"):
            kernels.setdefault(name.partition(":")[0], []).append((at, e.duration_ps))
calls.sort()
first, last = calls[{WARMUP}], calls[-1]
own = {{node: sum(d for at, d in found if first <= at < last) / 1e6 for node, found in kernels.items()}}
print(json.dumps({{"cost": cost.to_dict(), "own": own, "calls": len(calls), "problems": report.problems}}))
'''


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("timed")
    script = write(tmp, TRACED)
    timeline, chrome = tmp / "step.svg", tmp / "step.json"
    done = run([*TRACE, "--time", "--warmup", str(WARMUP), "--json", "--timeline", str(timeline), "--chrome-trace",
                str(chrome), str(script)], tmp, timeout=240)
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")[-3000:]
    assert_clean(tmp)
    return {"report": json.loads(done.stdout), "timeline": timeline.read_text(), "chrome": json.loads(chrome.read_text()),
            "stderr": done.stderr.decode("utf-8", "replace")}


def _device(cost: dict[str, Any], short: str) -> dict[str, Any]:
    return next(d for d in cost["devices"] if d["device"].endswith(f"device:{short}"))


def test_a_traced_step_is_the_functions_call_after_the_warmup(traced: dict[str, Any]) -> None:
    cost = traced["report"]["cost"]
    assert cost["step"] == "step" and cost["warmup"] == WARMUP and cost["calls"] == CALLS
    assert cost["steps"] == CALLS - WARMUP - 1  # the last call closes the step before it
    assert "done" in traced["stderr"]  # the script's own output (on stderr under --json), whole
    # the profiler placement ran is its own doing: none of its lines reach the script's stderr
    assert "profiler_session.cc" not in traced["stderr"] and "save_profile.cc" not in traced["stderr"]


def test_the_big_matmuls_device_is_busy_many_times_longer(traced: dict[str, Any]) -> None:
    cost = traced["report"]["cost"]
    big, small = _device(cost, "CPU:1"), _device(cost, "CPU:2")
    assert big["busy_us"]["mean"] > 5 * small["busy_us"]["mean"]  # 1024^3 against 64^3 multiply-adds, and a sum
    matmul = next(o for o in cost["ops"] if o["node"] == "MatMul")
    assert matmul["device"].endswith("CPU:1") and matmul["status"] == "as requested" and matmul["calls_per_step"] == 1


def test_the_4_mib_copy_is_seen_every_step_and_charged_to_a_placement(traced: dict[str, Any]) -> None:
    cost = traced["report"]["cost"]
    [copy] = [c for c in cost["copies"] if c["producer"] == "MatMul" and c["consumer"] == "Sum"]
    assert copy["from"].endswith("CPU:1") and copy["to"].endswith("CPU:2")
    assert copy["bytes_per_step"] == 4_194_304 and copy["physical"] is False and copy["time_us"]["mean"] > 0
    charged = [c for c in cost["costly"] if c["copy_bytes_per_step"] and c["copy_bytes_per_step"] >= 4_194_304
               and c["device"].endswith("CPU:2")]
    assert charged and charged[0]["node"] == "Sum" and charged[0]["status"] == "as requested"


def test_the_pictures_draw_the_step(traced: dict[str, Any]) -> None:
    root = ET.fromstring(traced["timeline"])
    ns = {"s": "http://www.w3.org/2000/svg"}
    ops = {g.get("data-node"): g.get("data-device") for g in root.iterfind(".//s:g[@class='op']", ns)}
    assert ops["MatMul"].endswith("CPU:1") and ops["MatMul_1"].endswith("CPU:2")
    copies = {(g.get("data-from")[-5:], g.get("data-to")[-5:]) for g in root.iterfind(".//s:g[@class='copy']", ns)}
    assert ("CPU:1", "CPU:2") in copies
    events = traced["chrome"]["traceEvents"]
    lanes = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    matmul = next(e for e in events if e["ph"] == "X" and e["name"] == "MatMul")
    assert lanes[matmul["tid"]] == "CPU:1" and matmul["args"]["status"] == "as requested"


def test_capture_times_equal_tensorflows_own_profile(tmp_path: Path) -> None:
    script = write(tmp_path, CAPTURED, "captured.py")
    done = run([sys.executable, str(script), str(tmp_path / "kept")], tmp_path, timeout=240,
               env=environment(tmp_path, TF_CPP_MIN_LOG_LEVEL="0"))
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")[-3000:]
    found = json.loads(done.stdout.decode().strip().splitlines()[-1])
    cost, own = found["cost"], found["own"]
    assert found["problems"] == [] and found["calls"] == CALLS and cost["steps"] == CALLS - WARMUP - 1
    for node in ("MatMul", "MatMul_1"):
        timed = next(o for o in cost["ops"] if o["node"] == node)
        assert timed["time_us"]["mean"] * cost["steps"] == pytest.approx(own[node], rel=1e-6, abs=0.01)
    assert next(o for o in cost["ops"] if o["node"] == "MatMul_1")["device"].endswith("CPU:2")


OWN_PROFILER = '''
import glob, sys
import tensorflow as tf
import placement_cli

@tf.function
def f(x):
    return tf.matmul(x, x)

x = tf.ones([64, 64])
for _ in range(4):
    f(x)
with placement_cli.capture(time=True) as inner:  # a timed block inside a timed trace: refused, said
    f(x)
print("inner:", inner.report.timing_error)
tf.profiler.experimental.start(sys.argv[1])  # the script's own profiler: placement's makes way
f(x)
tf.profiler.experimental.stop()
print("own profile:", len(glob.glob(sys.argv[1] + "/**/*.xplane.pb", recursive=True)))
try:
    tf.profiler.experimental.stop()  # none running: TensorFlow's own refusal, as without placement
except tf.errors.UnavailableError:
    print("stop refused")
'''


def test_a_script_that_runs_the_profiler_itself_gets_it(tmp_path: Path) -> None:
    script = write(tmp_path, OWN_PROFILER, "own.py")
    done = run([*TRACE, "--time", "--json", str(script), str(tmp_path / "own")], tmp_path, timeout=240)
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")[-3000:]
    said = done.stderr.decode()  # --json: the script's stdout goes to stderr
    assert "inner: TensorFlow's profiler was already running" in said
    assert "own profile: 1" in said and "stop refused" in said
    report = json.loads(done.stdout)
    assert report["cost"]["steps"] >= 1 and "started TensorFlow's profiler itself" in report["timing_error"]
    assert_clean(tmp_path)


LONG = '''
import tensorflow as tf

@tf.function
def f(x):
    return tf.reduce_sum(tf.matmul(x, x))

x = tf.ones([16, 16])
for _ in range(60):
    f(x)
print("calls done")
'''


def test_the_profiler_stops_once_the_steps_are_measured(tmp_path: Path) -> None:
    """A long program's profile never grows past what is measured: 1 warm-up call, 3 steps, the call that
    closes the last: the profiler stopped after 5 of the 60 calls (it had seen no more)."""
    script = write(tmp_path, LONG, "long.py")
    done = run([*TRACE, "--warmup", "1", "--time-steps", "3", "--json", str(script)], tmp_path, timeout=240)
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")[-3000:]
    assert "calls done" in done.stderr.decode()
    cost = json.loads(done.stdout)["cost"]
    assert (cost["calls"], cost["steps"], cost["warmup"]) == (5, 3, 1)
    assert_clean(tmp_path)
