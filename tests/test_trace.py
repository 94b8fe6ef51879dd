"""`placement trace` on programs the tool did not build: output intact, exit codes passed on."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import is_matmul, run_cli
from processes import patience

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
    assert any(p["kind"] == "eager" and is_matmul(p["op"]) for p in data["placements"])


def test_min_log_level_3_still_traced_from_stdout_copies(tmp_path: Path) -> None:
    script = write(tmp_path, (
        "import os\nos.environ['TF_CPP_MIN_LOG_LEVEL'] = '3'\nimport tensorflow as tf\n"
        "@tf.function\ndef f(x):\n    return tf.matmul(x, x)\n"
        "print(f(tf.ones([2, 2])).numpy().tolist())\n"))
    data = json.loads(run_cli("trace", "--json", script).stdout)
    assert any(is_matmul(p["op"]) for p in data["placements"])


def test_filters_and_saved_log(tmp_path: Path) -> None:
    saved = tmp_path / "raw.log"
    proc = run_cli("trace", "--json", "--op", "MatMul", "--copies", "--save-log", str(saved),
                   str(SAMPLES / "tf_function.py"))
    data = json.loads(proc.stdout)
    assert data["copies"] is None and "no tf.compat.v1.Session ran" in proc.stderr  # tf.functions only
    assert data["placements"] and all(is_matmul(p["op"]) for p in data["placements"])
    assert data["summary"]["placements"] == len(data["placements"])  # the summary describes what matched
    assert data["summary"]["unfiltered_placements"] > len(data["placements"]) and data["filters"]["op"] == "MatMul"
    assert "placer.cc" in saved.read_text()


def test_missing_script_is_usage_error() -> None:
    proc = run_cli("trace", "no_such_script.py")
    assert proc.returncode == 2 and "no such script" in proc.stderr


def test_interrupt_reports_and_leaves_no_child(tmp_path: Path) -> None:
    script = write(tmp_path, (
        "import time\nimport tensorflow as tf\nprint(tf.ones([2]).numpy(), flush=True)\n"
        "print('READY', flush=True)\ntime.sleep(600)\n"))
    env = {**os.environ, "NO_COLOR": "1"}
    parent = subprocess.Popen([sys.executable, "-m", "placement_cli", "trace", script],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    assert parent.stdout is not None
    for line in parent.stdout:
        if "READY" in line:
            break
    parent.send_signal(signal.SIGINT)
    out, _ = parent.communicate(timeout=patience(60))
    assert parent.returncode == 128 + signal.SIGINT  # the script's KeyboardInterrupt ends it by SIGINT: 130
    assert "Placements" in out or "Per device" in out
    deadline = time.monotonic() + patience(10)  # a bounded wait for the script's process to be gone
    while (leftover := subprocess.run(["pgrep", "-f", script], capture_output=True, text=True)).stdout.strip():
        assert time.monotonic() < deadline, leftover.stdout
        time.sleep(0.05)


CPU = "/job:localhost/replica:0/task:0/device:CPU:{}"


def test_trace_says_why_ops_moved_and_lists_session_copies() -> None:
    proc = run_cli("trace", "--json", "--copies", str(SAMPLES / "moved_ops.py"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "upd: [[3.0, 3.0], [3.0, 3.0]]" in proc.stderr and "upd: [[7.0, 7.0], [7.0, 7.0]]" in proc.stderr
    data = json.loads(proc.stdout)
    by_node = {p["node"]: p for p in data["placements"] if p["kind"] == "placer"}
    pinned = by_node["pinned"]
    assert (pinned["requested"], pinned["status"]) == ("/device:GPU:99", "soft fallback")
    # a GPU machine lists its GPUs after the three CPUs the sample makes
    assert re.fullmatch(r"GPU:99 does not exist \(have: CPU:0, CPU:1, CPU:2(, GPU:\d+)*\)", pinned["reason"])
    assert by_node["x"]["status"] == "as requested" and by_node["x"]["canonical"] == CPU.format(1)
    moved = [p for p in data["placements"] if p["op"] == "AssignAddVariableOp"]
    # pinned away from its variable: TensorFlow's placer ignores the request (and logs so), no fallback
    assert moved and all(p["status"] == "with its resource" and p["canonical"] == CPU.format(0) for p in moved)
    assert {p["reason"].split(":")[0] for p in moved} == {"with its reference input v on CPU"}
    assert {r["node"] for r in data["ignored_requests"]} == {"AssignAddVariableOp", "ReadVariableOp"}
    assert by_node["v"]["status"] == "as requested"
    # the eager ops ran under no device scope: no request (the constants TF's C++ made: unknown)
    eager = {(p["op"], p["requested"], p["status"]) for p in data["placements"] if p["kind"] == "eager"}
    assert ("Fill", None, "free") in eager and ("_EagerConst", None, "logged") in eager
    assert {status for op, _, status in eager if op.startswith("__inference_f_")} == {"free"}
    # the session's executed graph: x is made on CPU:1 and added to v on CPU:0
    assert {"tensor": "x", "from": CPU.format(1), "to": CPU.format(0)} in data["copies"]
    assert len(data["copies"]) == len({json.dumps(c, sort_keys=True) for c in data["copies"]})  # once each


def test_trace_table_has_a_why_column_and_no_copies_unless_asked() -> None:
    script = str(SAMPLES / "moved_ops.py")
    proc = run_cli("trace", script)
    assert proc.returncode == 0
    assert "why" in proc.stdout and "Why here?" in proc.stdout
    assert "with its reference input v on CPU:0" in " ".join(proc.stdout.replace("│", " ").split())
    assert "Copies between devices" not in proc.stdout
    assert json.loads(run_cli("trace", "--json", script).stdout)["copies"] is None


def test_min_log_level_3_in_the_environment_keeps_every_placement_and_the_terminal_quiet(tmp_path: Path) -> None:
    script = write(tmp_path, (
        "import sys\nimport tensorflow as tf\nx = tf.matmul(tf.ones([2, 2]), tf.ones([2, 2]))\n"
        "print('to stderr', file=sys.stderr)\nprint(x.numpy().sum())\n"))
    quiet = run_cli("trace", "--json", script, env={"TF_CPP_MIN_LOG_LEVEL": "3"})
    loud = run_cli("trace", "--json", script)
    assert quiet.returncode == loud.returncode == 0
    def placed(proc: subprocess.CompletedProcess[str]) -> list[tuple[str, str, str]]:
        # the same placements; their order depends on how the child's stdout and stderr interleave
        return sorted((p["kind"], p["op"], p["canonical"]) for p in json.loads(proc.stdout)["placements"])

    assert placed(quiet) == placed(loud) and any(kind == "eager" for kind, _, _ in placed(quiet))
    assert quiet.stderr.splitlines() == ["to stderr", "8.0"]  # the program's lines, TF's hidden as TF would
