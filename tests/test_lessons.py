"""The guide's multi-device lessons run in real TensorFlow through the real entry point: towers,
devices, eager mode, and the user's TF_CPP_MIN_LOG_LEVEL (errors: tests/test_xla.py).

More of the lessons' answers, from many commands sharing one TensorFlow start-up: tests/test_run_commands.py."""

import json
import subprocess
import sys
from typing import Any

import pytest

from conftest import gpu_count, has_gpu, is_matmul, matmul_count, needs_gpu, run_batch, run_cli, run_json
from processes import patience

pytestmark = pytest.mark.tf

TOWER_RESULT = [[44.0, 56.0], [98.0, 128.0]]
CPU = "/job:localhost/replica:0/task:0/device:CPU:"
EAGER_CPU1 = ("show", "--mode", "eager", "--device", "/cpu:1", "--cpus", "2")


@pytest.mark.skipif(gpu_count() > 2, reason="asserts what happens when /gpu:2 (the first default tower) does not exist")
def test_default_gpu_towers_fail_clearly_without_gpus() -> None:
    proc = run_cli("tower")
    assert proc.returncode == 1
    assert "GPU:2" in proc.stdout and "--soft" in proc.stdout and "--cpus" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr


@pytest.mark.skipif(has_gpu(), reason="asserts what happens on a machine without a GPU")
def test_virtual_gpus_without_a_gpu_is_exit_2() -> None:
    proc = run_cli("tower", "--virtual-gpus", "2")
    assert proc.returncode == 2
    assert "needs one physical GPU" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.fixture(scope="module")
def on_two_cpus() -> list[Any]:
    """The eager run on two logical CPUs, as in a process of its own (it is compared with one). The
    errors catalogue turns TensorFlow's XLA devices on: its start-up is tests/test_xla.py's."""
    return run_batch([*EAGER_CPU1, "--json"])


def _json(proc: Any) -> dict[str, Any]:
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_devices_lists_logical_cpus_whatever_the_users_log_level() -> None:
    proc = run_cli("devices", "--cpus", "3", "--json", env={"TF_CPP_MIN_LOG_LEVEL": "3"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(proc.stdout)
    assert [d["name"] for d in data["logical"] if d["device_type"] == "CPU"] == [
        "/device:CPU:0", "/device:CPU:1", "/device:CPU:2"]
    assert data["device_mapping_logged"] is True


@pytest.fixture(scope="module")
def eager_cpu1(on_two_cpus: list[Any]) -> dict[str, Any]:
    return _json(on_two_cpus[0])


def test_eager_mode_logs_placements_with_tf2_apis(eager_cpu1: dict[str, Any]) -> None:
    assert eager_cpu1["result"] == [[22.0, 28.0], [49.0, 64.0]]
    eager = [p for p in eager_cpu1["placements"] if p["kind"] == "eager"]
    assert any(is_matmul(p["op"]) and p["status"] == "as requested" for p in eager)
    function_body = [p for p in eager_cpu1["placements"] if p["kind"] == "placer" and p["node"] == "MatMul"]
    assert function_body and all(p["canonical"].endswith("CPU:1") for p in function_body)
    pinned = [p for p in eager_cpu1["placements"] if p["op"] in ("_EagerConst", "Reshape")]
    assert pinned and all((p["requested"], p["status"]) == ("/cpu:1", "as requested") for p in pinned)


def test_the_users_log_level_hides_no_placement(eager_cpu1: dict[str, Any]) -> None:
    """TF_CPP_MIN_LOG_LEVEL=1 once removed every eager row (27 placements became 19)."""
    proc = run_cli(*EAGER_CPU1, "--json", env={"TF_CPP_MIN_LOG_LEVEL": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    quiet = json.loads(proc.stdout)

    def seen(data: dict[str, Any]) -> list[tuple[Any, ...]]:
        return sorted((p["kind"], p["node"] or "", p["op"], p["canonical"], p["status"]) for p in data["placements"])

    assert seen(quiet) == seen(eager_cpu1)
    assert quiet["summary"]["placements"] == eager_cpu1["summary"]["placements"] >= 27


GOTCHA = """
import tensorflow as tf
tf.config.list_logical_devices()          # initialises the context first
tf.debugging.set_log_device_placement(True)
print(tf.matmul(tf.ones([2, 3]), tf.ones([3, 2])).shape)
"""


def test_tf_gotcha_logging_enabled_after_init_logs_nothing() -> None:
    """Why placement enables logging before anything else: this is what happens otherwise."""
    proc = subprocess.run([sys.executable, "-c", GOTCHA], capture_output=True, text=True, timeout=patience(120))
    assert proc.returncode == 0
    assert "Executing op" not in proc.stderr and "placer.cc" not in proc.stderr


@needs_gpu
def test_virtual_gpus_split_one_gpu() -> None:
    data = run_json("tower", "--virtual-gpus", "4", "--gpus", "2,3")
    assert data["result"] == TOWER_RESULT


def test_copies_show_tower_results_travelling_to_the_reduce_device() -> None:
    data = run_json("tower", "--devices", "/cpu:1,/cpu:2", "--cpus", "3", "--copies")
    copies = {(c["tensor"], c["from"].rsplit("/", 1)[1], c["to"].rsplit("/", 1)[1]) for c in data["copies"]}
    assert copies == {("MatMul", "device:CPU:1", "device:CPU:0"), ("MatMul_1", "device:CPU:2", "device:CPU:0")}
    assert data["result"] == TOWER_RESULT
    # both constant folders are off: the guide's MatMuls ran (folded, one would be a Const sending MatMul/_0__cf__0)
    assert matmul_count(data["executed_ops"]) == 2  # MatMul, or oneDNN's _MklMatMul
    assert all(c["dtype"] == "float32" and c["shape"] == [2, 2] and c["bytes"] == 16 and c["physical"] is False
               and c["consumer"] == "AddN" for c in data["copies"])
    assert data["copy_totals"]["per_step_bytes"] == 32


def test_copies_need_graph_mode() -> None:
    proc = run_cli("show", "--mode", "eager", "--copies")
    assert proc.returncode == 2 and "--copies needs --mode graph" in proc.stderr
