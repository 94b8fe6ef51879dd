"""`placement trace` on programs the tool did not build: output intact, exit codes passed on."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import run_cli

pytestmark = pytest.mark.tf
SAMPLES = Path(__file__).parent.parent / "samples"


def write(tmp_path: Path, body: str) -> str:
    script = tmp_path / "prog.py"
    script.write_text(body)
    return str(script)


def test_tf1_session_without_logging_in_its_config_is_traced() -> None:
    proc = run_cli("trace", "--json", str(SAMPLES / "tf1_session.py"))
    assert proc.returncode == 0
    data = json.loads(proc.stdout)
    assert {p["node"] for p in data["placements"]} == {"a", "b", "MatMul"}
    assert data["exit_code"] == 0
    assert "result: [[22.0, 28.0], [49.0, 64.0]]" in proc.stderr  # the program's stdout, moved to stderr


def test_program_output_is_intact_in_order_and_exit_code_passes_through(tmp_path: Path) -> None:
    script = write(tmp_path, (
        "import sys\nimport tensorflow as tf\n"
        "print(tf.matmul(tf.ones([2, 2]), tf.ones([2, 2])).numpy().sum())\n"
        "for i in range(50000):\n    print('line', i)\n"
        "sys.exit(7)\n"))
    proc = run_cli("trace", script)
    assert proc.returncode == 7
    lines = [line for line in proc.stdout.splitlines() if line.startswith("line ")]
    assert lines == [f"line {i}" for i in range(50000)]
    assert "Executing op" not in proc.stdout and "placer.cc" not in proc.stderr
    assert "exited with code 7" in proc.stdout


def test_crash_midway_still_reports_what_was_placed(tmp_path: Path) -> None:
    script = write(tmp_path, (
        "import tensorflow as tf\nx = tf.matmul(tf.ones([2, 2]), tf.ones([2, 2]))\n"
        "raise RuntimeError('boom')\n"))
    proc = run_cli("trace", "--json", script)
    assert proc.returncode == 1
    assert "RuntimeError: boom" in proc.stderr
    data = json.loads(proc.stdout)
    assert any(p["kind"] == "eager" and "MatMul" in p["op"] for p in data["placements"])


def test_min_log_level_3_still_traced_from_stdout_copies(tmp_path: Path) -> None:
    script = write(tmp_path, (
        "import os\nos.environ['TF_CPP_MIN_LOG_LEVEL'] = '3'\nimport tensorflow as tf\n"
        "@tf.function\ndef f(x):\n    return tf.matmul(x, x)\n"
        "print(f(tf.ones([2, 2])).numpy().tolist())\n"))
    data = json.loads(run_cli("trace", "--json", script).stdout)
    assert any(p["op"] == "MatMul" for p in data["placements"])


def test_filters_and_saved_log(tmp_path: Path) -> None:
    saved = tmp_path / "raw.log"
    proc = run_cli("trace", "--json", "--op", "MatMul", "--save-log", str(saved), str(SAMPLES / "tf_function.py"))
    data = json.loads(proc.stdout)
    assert data["placements"] and all(p["op"] == "MatMul" for p in data["placements"])
    assert data["summary"]["placements"] > len(data["placements"])  # counts stay those of the whole program
    assert "placer.cc" in saved.read_text()


def test_missing_script_is_usage_error() -> None:
    proc = run_cli("trace", "no_such_script.py")
    assert proc.returncode == 2 and "no such script" in proc.stderr


def test_interrupt_reports_and_leaves_no_child(tmp_path: Path) -> None:
    script = write(tmp_path, (
        "import time\nimport tensorflow as tf\nprint(tf.ones([2]).numpy(), flush=True)\n"
        "print('READY', flush=True)\ntime.sleep(120)\n"))
    env = {**os.environ, "NO_COLOR": "1"}
    parent = subprocess.Popen([sys.executable, "-m", "placement_cli", "trace", script],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    assert parent.stdout is not None
    for line in parent.stdout:
        if "READY" in line:
            break
    parent.send_signal(signal.SIGINT)
    out, _ = parent.communicate(timeout=60)
    assert parent.returncode == 128 + signal.SIGINT or parent.returncode == 1
    assert "Placements" in out or "Per device" in out
    time.sleep(0.5)
    leftover = subprocess.run(["pgrep", "-f", script], capture_output=True, text=True)
    assert leftover.stdout.strip() == ""
