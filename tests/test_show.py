"""`placement show` runs the guide's matmul in real TensorFlow (CPU only here)."""

import pytest

from conftest import needs_gpu, run_cli, run_json

pytestmark = pytest.mark.tf

RESULT = [[22.0, 28.0], [49.0, 64.0]]


def by_node(data: dict) -> dict:
    return {p["node"]: p for p in data["placements"]}


def test_default_placement_and_result() -> None:
    data = run_json("show")
    assert data["result"] == RESULT
    nodes = by_node(data)
    assert set(nodes) == {"a", "b", "MatMul"}
    assert nodes["MatMul"]["op"] == "MatMul" and nodes["a"]["op"] == "Const"
    assert all(p["status"] == "free" and p["requested"] is None for p in nodes.values())
    assert data["summary"]["placements"] == 3  # stdout and glog copies paired
    assert "placer.cc" in data["log"]
    assert data["errors"] == []


def test_inputs_on_cpu_is_the_guides_second_example() -> None:
    nodes = by_node(run_json("show", "--inputs-on", "/cpu:0"))
    assert nodes["a"]["requested"] == "/device:CPU:0" and nodes["a"]["status"] == "as requested"
    assert nodes["MatMul"]["requested"] is None and nodes["MatMul"]["status"] == "free"


def test_missing_gpu_fails_clearly_with_exit_1() -> None:
    proc = run_cli("show", "--device", "/gpu:2")
    assert proc.returncode == 1
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "Placement failed" in proc.stdout
    assert "GPU:2" in proc.stdout and "CPU:0" in proc.stdout
    assert "--soft" in proc.stdout
    data = run_json("show", "--device", "/gpu:2", expect=1)
    assert data["result"] is None
    error = data["errors"][0]
    assert error["kind"] == "device_not_found"
    assert error["requested_device"] == "/device:GPU:2"
    assert error["available_devices"] == ["/job:localhost/replica:0/task:0/device:CPU:0"]


def test_soft_placement_marks_each_fallback_and_says_why() -> None:
    data = run_json("show", "--device", "/gpu:2", "--soft")
    assert data["result"] == RESULT
    for p in data["placements"]:
        assert p["status"] == "soft fallback"
        assert p["canonical"].endswith("device:CPU:0")
        assert "GPU:2 does not exist" in p["reason"]


def test_log_flag_prints_raw_log_and_table() -> None:
    proc = run_cli("show", "--device", "/cpu:0", "--log")
    assert proc.returncode == 0
    assert "placer.cc" in proc.stdout and "as requested" in proc.stdout
    assert "result: [[22, 28], [49, 64]]" in proc.stdout


def test_malformed_device_is_usage_error() -> None:
    proc = run_cli("show", "--device", "/gpu:x")
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr


@needs_gpu
def test_gpu_default_placement_prefers_gpu() -> None:
    nodes = by_node(run_json("show"))
    assert nodes["MatMul"]["device_type"] == "GPU"
