"""`placement show` runs the guide's matmul in real TensorFlow, through the real entry point.

More of show's answers, from many commands sharing one TensorFlow start-up: tests/test_run_commands.py.
This file's runs share one start-up too (run_batch), all without --cpus."""

import json
import subprocess
from pathlib import Path

import pytest

from conftest import gpu_count, needs_gpu, run_batch, run_cli

pytestmark = pytest.mark.tf

RESULT = [[22.0, 28.0], [49.0, 64.0]]


DEFAULT = ["show", "--json"]
MISSING_GPU = ["show", "--device", "/gpu:2", "--tensorboard"]
UNKNOWN_TASK = ["show", "--mode", "eager", "--device", "/job:ps/task:3/cpu:0"]
LOG = (["show", "--device", "/cpu:0", "--log"], {"COLUMNS": "60"})


@pytest.fixture(scope="module")
def shown(tmp_path_factory: pytest.TempPathFactory) -> dict[str, subprocess.CompletedProcess[str]]:
    board = tmp_path_factory.mktemp("show") / "tb"
    runs = run_batch(DEFAULT, [*MISSING_GPU, str(board)], UNKNOWN_TASK, LOG)
    return {"board": board, **dict(zip(("default", "missing_gpu", "unknown_task", "log"), runs))}


def default_json(shown: dict) -> dict:
    proc = shown["default"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def by_node(data: dict) -> dict:
    return {p["node"]: p for p in data["placements"]}


def test_default_placement_and_result(shown: dict) -> None:
    data = default_json(shown)
    assert data["result"] == RESULT
    nodes = by_node(data)
    assert set(nodes) == {"a", "b", "MatMul"}
    assert nodes["MatMul"]["op"] == "MatMul" and nodes["a"]["op"] == "Const"
    assert all(p["status"] == "free" and p["requested"] is None for p in nodes.values())
    assert data["summary"]["placements"] == 3  # stdout and glog copies paired
    assert "placer.cc" in data["log"]
    assert data["errors"] == [] and data["run_error"] is None and data["incomplete"] == []


@pytest.mark.skipif(gpu_count() > 2, reason="asserts what happens when /gpu:2 does not exist")
def test_missing_gpu_fails_clearly_with_exit_1(shown: dict) -> None:
    board: Path = shown["board"]
    proc = shown["missing_gpu"]
    assert proc.returncode == 1
    # the graph never ran: no event file draws the devices it asked for as if it had been placed there
    assert not board.exists() and "no TensorBoard event file" in proc.stderr  # the folder it made, removed
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "Placement failed" in proc.stdout
    assert "GPU:2" in proc.stdout and "CPU:0" in proc.stdout
    assert "--soft" in proc.stdout


def test_a_run_that_gives_no_result_exits_1_with_tensorflows_own_message(shown: dict) -> None:
    """Whether or not the parser knows the wording: once exit 0 with only a title."""
    proc = shown["unknown_task"]
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "Placement failed" in proc.stdout
    assert "/job:ps/replica:0/task:3/device:CPU:0 unknown device" in proc.stdout
    assert "result:" not in proc.stdout


def test_log_flag_prints_raw_log_and_table(shown: dict) -> None:
    proc = shown["log"]
    assert proc.returncode == 0
    assert "placer.cc" in proc.stdout and "as requested" in proc.stdout
    assert "result: [[22, 28], [49, 64]]" in proc.stdout
    # piped: TensorFlow's lines stay whole, however narrow the terminal says it is
    line = "placer.cc:162] MatMul: (MatMul): /job:localhost/replica:0/task:0/device:CPU:0"
    assert any(line in raw and len(raw) > 60 for raw in proc.stdout.splitlines())


@pytest.mark.parametrize("device", ["/gpu:x", "/cpu:0/gpu:0", "/gpu:99999999999999999999"])
def test_malformed_device_is_usage_error(device: str) -> None:
    proc = run_cli("show", "--device", device)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr


@needs_gpu
def test_gpu_default_placement_prefers_gpu(shown: dict) -> None:
    nodes = by_node(default_json(shown))
    assert nodes["MatMul"]["device_type"] == "GPU"
