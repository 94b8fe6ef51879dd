"""The guide's multi-device lessons run in real TensorFlow: towers, errors, devices, eager mode."""

import subprocess
import sys

import pytest

from conftest import needs_gpu, run_cli, run_json

pytestmark = pytest.mark.tf

TOWER_RESULT = [[44.0, 56.0], [98.0, 128.0]]


def test_towers_on_logical_cpus_each_on_its_own_device() -> None:
    data = run_json("tower", "--devices", "/cpu:1,/cpu:2", "--cpus", "3")
    assert data["result"] == TOWER_RESULT
    where = {p["node"]: (p["group"], p["canonical"].rsplit("/", 1)[1], p["status"]) for p in data["placements"]}
    assert where["MatMul"] == ("tower 0 (/cpu:1)", "device:CPU:1", "as requested")
    assert where["MatMul_1"] == ("tower 1 (/cpu:2)", "device:CPU:2", "as requested")
    assert where["AddN"] == ("reduce", "device:CPU:0", "as requested")
    assert "device:CPU:2" in data["log"]  # the log itself proves it


def test_default_gpu_towers_fail_clearly_without_gpus() -> None:
    proc = run_cli("tower")
    assert proc.returncode == 1
    assert "GPU:2" in proc.stdout and "--soft" in proc.stdout and "--cpus" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr


def test_soft_towers_fall_back_and_say_why() -> None:
    data = run_json("tower", "--gpus", "0-3", "--soft")
    assert data["result"] == [[88.0, 112.0], [196.0, 256.0]]
    fallbacks = [p for p in data["placements"] if p["status"] == "soft fallback"]
    assert len(fallbacks) == 12
    assert all("does not exist" in p["reason"] for p in fallbacks)


@pytest.mark.parametrize("bad", ["x", "-1", "", "2,2", "3-1"])
def test_bad_gpu_lists_are_usage_errors(bad: str) -> None:
    proc = run_cli("tower", "--gpus", bad)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr


def test_virtual_gpus_without_a_gpu_is_exit_2() -> None:
    proc = run_cli("tower", "--virtual-gpus", "2")
    assert proc.returncode == 2
    assert "needs one physical GPU" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_errors_catalogue_runs_every_case_for_real() -> None:
    data = run_json("errors")
    cases = {c["name"]: c for c in data["cases"]}
    assert {"missing-gpu", "cpu-out-of-range", "no-gpu-kernel", "colocation-conflict",
            "malformed-gpu-index", "malformed-device-type"} <= set(cases)
    missing = cases["missing-gpu"]
    assert missing["ran"] and missing["error_class"] == "InvalidArgumentError"
    assert missing["error"]["kind"] == "device_not_found" and missing["error"]["node"] == "MatMul"
    assert missing["soft"]["result"] == [[22.0, 28.0], [49.0, 64.0]]
    assert cases["colocation-conflict"]["error"]["kind"] == "colocation"
    assert cases["malformed-gpu-index"]["error_class"] == "ValueError"
    assert cases["cpu-out-of-range"]["error"]["available_devices"] == [
        "/job:localhost/replica:0/task:0/device:CPU:0", "/job:localhost/replica:0/task:0/device:CPU:1"]


def test_errors_gpu_case_is_reported_not_faked_without_gpu() -> None:
    case = next(c for c in run_json("errors")["cases"] if c["name"] == "no-gpu-kernel")
    if case["ran"]:
        assert case["error"]["kind"] == "no_kernel"
    else:
        assert case["error"] is None and "GPU" in case["skip_reason"]


def test_devices_lists_logical_cpus() -> None:
    data = run_json("devices", "--cpus", "3")
    assert [d["name"] for d in data["logical"] if d["device_type"] == "CPU"] == [
        "/device:CPU:0", "/device:CPU:1", "/device:CPU:2"]
    assert data["device_mapping_logged"] is True


def test_eager_mode_logs_placements_with_tf2_apis() -> None:
    data = run_json("show", "--mode", "eager", "--device", "/cpu:1", "--cpus", "2")
    assert data["result"] == [[22.0, 28.0], [49.0, 64.0]]
    eager = [p for p in data["placements"] if p["kind"] == "eager"]
    assert any(p["op"] in ("MatMul", "_MklMatMul") and p["status"] == "as requested" for p in eager)
    function_body = [p for p in data["placements"] if p["kind"] == "placer" and p["node"] == "MatMul"]
    assert function_body and all(p["canonical"].endswith("CPU:1") for p in function_body)


def test_eager_missing_gpu_reports_the_eager_wording() -> None:
    data = run_json("show", "--mode", "eager", "--device", "/gpu:2", expect=1)
    assert data["errors"][0]["message"].startswith("Could not satisfy device specification")
    assert data["errors"][0]["kind"] == "device_not_found"


GOTCHA = """
import tensorflow as tf
tf.config.list_logical_devices()          # initialises the context first
tf.debugging.set_log_device_placement(True)
print(tf.matmul(tf.ones([2, 3]), tf.ones([3, 2])).shape)
"""


def test_tf_gotcha_logging_enabled_after_init_logs_nothing() -> None:
    """Why placement enables logging before anything else: this is what happens otherwise."""
    proc = subprocess.run([sys.executable, "-c", GOTCHA], capture_output=True, text=True, timeout=120)
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
    assert data["executed_ops"]["MatMul"] == 2
    assert all(c["dtype"] == "float32" and c["shape"] == [2, 2] and c["bytes"] == 16 and c["physical"] is False
               and c["consumer"] == "AddN" for c in data["copies"])
    assert data["copy_totals"]["per_step_bytes"] == 32


def test_copies_need_graph_mode() -> None:
    proc = run_cli("show", "--mode", "eager", "--copies")
    assert proc.returncode == 2 and "--copies needs --mode graph" in proc.stderr
