"""`placement inspect` against a real cluster started by hand with tf.distribute.Server in a subprocess."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from conftest import run_cli
from placement_cli.cli import app
from processes import patience

SERVER = """
import json, sys, time
import tensorflow as tf
spec = tf.train.ClusterSpec(json.loads(sys.argv[1]))
servers = [tf.distribute.Server(spec, job_name=j, task_index=i, start=True) for j, i in (("ps", 0), ("worker", 0))]
print("ready", flush=True)
while True:
    time.sleep(60)
"""


def free_port() -> int:
    """A port nothing listens on, probed on the dual-stack wildcard as TensorFlow binds it."""
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
        s.bind(("::", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cluster() -> Iterator[dict[str, list[str]]]:
    spec = {"ps": [f"localhost:{free_port()}"], "worker": [f"localhost:{free_port()}"]}
    proc = subprocess.Popen([sys.executable, "-c", SERVER, json.dumps(spec)], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        yield spec
    finally:
        proc.kill()
        proc.wait(timeout=patience(30))
        assert proc.poll() is not None
        with pytest.raises(ProcessLookupError):  # no pid of the cluster is left
            os.kill(proc.pid, 0)


@pytest.fixture
def silent_port(silent_server: SimpleNamespace) -> int:
    return silent_server.port


@pytest.fixture
def silent_server() -> Iterator[SimpleNamespace]:
    """A TCP server that accepts connections and never says a word (not gRPC): its port, and the
    connections it holds (one is there once inspect's TensorFlow child is asking it)."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except (TimeoutError, OSError):
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield SimpleNamespace(port=server.getsockname()[1], held=held)
    stop.set()
    thread.join(5)
    for conn in held:
        conn.close()
    server.close()


def inspect_json(*args: str, expect: int, env: dict[str, str] | None = None) -> dict:
    proc = run_cli("inspect", *args, "--json", env=env, timeout=90)
    assert proc.returncode == expect, proc.stderr[-2000:]
    return {"json": json.loads(proc.stdout), "stderr": proc.stderr}


def check_task(task: dict, job: str, index: int, address: str | None) -> None:
    assert (task["job"], task["task"], task["answered"], task["error"]) == (job, index, True, None)
    assert task["target"] == (f"grpc://{address}" if address else None)
    cpu = [d for d in task["devices"] if d["device_type"] == "CPU"]
    assert cpu and cpu[0]["canonical"] == f"/job:{job}/replica:0/task:{index}/device:CPU:0"
    assert cpu[0]["name"] == cpu[0]["canonical"] and cpu[0]["device_index"] == 0
    assert set(cpu[0]) >= {"name", "canonical", "short", "device_type", "device_index", "memory_limit"}


def test_by_target_lists_every_task_of_the_masters_cluster(cluster) -> None:
    worker = cluster["worker"][0]
    found = inspect_json(f"grpc://{worker}", expect=0)["json"]
    assert found["complete"] is True and found["source"] == f"grpc://{worker}"
    ps, wk = found["tasks"]
    check_task(ps, "ps", 0, None)  # only the master's own address is known from a target
    check_task(wk, "worker", 0, worker)
    assert found["summary"]["tasks"] == found["summary"]["answered"] == 2


def test_by_cluster_spec_and_by_tf_config(cluster, tmp_path) -> None:
    spec = tmp_path / "cluster.json"
    spec.write_text(json.dumps(cluster))
    found = inspect_json("--cluster-spec", str(spec), expect=0)["json"]
    check_task(found["tasks"][0], "ps", 0, cluster["ps"][0])
    check_task(found["tasks"][1], "worker", 0, cluster["worker"][0])
    tf_config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 0}})
    table = run_cli("inspect", "--timeout", "3", env={"TF_CONFIG": tf_config}, timeout=90)
    assert table.returncode == 0, table.stderr[-2000:]
    assert "Tasks of the cluster (TF_CONFIG)" in table.stdout
    assert "Devices of ps/0" in table.stdout and "/job:worker/replica:0/task:0/device:CPU:0" in table.stdout


def test_tasks_that_do_not_answer_are_named(cluster, tmp_path, silent_port) -> None:
    dead = free_port()
    spec = {**cluster, "worker": [*cluster["worker"], f"localhost:{dead}"], "chief": [f"127.0.0.1:{silent_port}"]}
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(spec))
    result = inspect_json("--cluster-spec", str(path), "--timeout", "1", expect=1)
    tasks = {(t["job"], t["task"]): t for t in result["json"]["tasks"]}
    assert tasks["ps", 0]["answered"] and tasks["worker", 0]["answered"]
    assert not tasks["worker", 1]["answered"] and "nothing listens" in tasks["worker", 1]["error"]
    assert not tasks["chief", 0]["answered"] and "no gRPC answer within 1 s" in tasks["chief", 0]["error"]
    assert result["json"]["complete"] is False
    message = result["stderr"].strip().splitlines()[-1]
    assert "/job:worker/task:1" in message and "/job:chief/task:0" in message and "/job:ps/task:0" not in message


def test_a_silent_port_or_a_closed_one_ends_within_the_timeout(silent_port) -> None:
    silent = inspect_json(f"127.0.0.1:{silent_port}", "--timeout", "1", expect=1)
    assert "no gRPC answer within 1 s" in silent["json"]["tasks"][0]["error"]
    closed = inspect_json(f"grpc://localhost:{free_port()}", "--timeout", "1", expect=1)
    assert closed["json"]["tasks"][0]["answered"] is False and "nothing listens" in closed["stderr"]


@pytest.mark.parametrize("args", [["localhost"], ["grpc://host:99999"], ["a b:1"], ["x:1", "--cluster-spec", "y"],
                                  ["--cluster-spec", "/nonexistent.json"], [], ["x:1", "--timeout", "nan"],
                                  ["x:1", "--timeout", "inf"], ["x:1", "--timeout", "0.1"], ["--cluster-spec", ""]])
def test_bad_targets_and_files_are_usage_errors(args, tmp_path) -> None:
    result = CliRunner().invoke(app, ["inspect", *args], env={"TF_CONFIG": ""})
    assert result.exit_code == 2, result.output


@pytest.mark.parametrize("spec, says", [
    ('{"ps": ["nohostport"]}', "HOST:PORT"),
    # a task index TensorFlow cannot hold is refused before any server is asked (it crashed one)
    ('{"ps": {"18446744073709551616": "localhost:2222"}}', "2147483647"),
])
def test_bad_cluster_spec_file(tmp_path, spec, says) -> None:
    path = tmp_path / "c.json"
    path.write_text(spec)
    result = CliRunner().invoke(app, ["inspect", "--cluster-spec", str(path)])
    assert result.exit_code == 2
    assert says in result.stderr


@pytest.mark.parametrize("signum, code, said", [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")])
def test_ctrl_c_or_kill_ends_inspect_and_its_tensorflow_child(silent_port, signum, code, said) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "placement_cli", "inspect", f"127.0.0.1:{silent_port}",
                             "--timeout", "60"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + patience(60)  # until inspect has started the child that asks TensorFlow
    while not (children := subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()):
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    proc.send_signal(signum)
    assert proc.wait(timeout=patience(30)) == code
    assert said in proc.stderr.read()
    for pid in children:  # the child asking TensorFlow was killed with it
        with pytest.raises(ProcessLookupError):
            os.kill(int(pid), 0)


def test_reasons_are_kept_whole_english_in_json_and_translated_in_tables() -> None:
    import io
    import pickle

    from rich.console import Console

    from placement_cli import i18n
    from placement_cli.model import Inspection, TaskAnswer
    from placement_cli.render.inspect import render_inspection, silent_summary
    from placement_cli.runtime.cluster.inspect import _at, tcp_probe

    why = _at("localhost:1", tcp_probe("127.0.0.1", free_port(), 1.0))
    assert pickle.loads(pickle.dumps(why)) == why  # it crosses from the child process whole
    found = Inspection("spec.json", 1.0, (TaskAnswer("ps", 0, "grpc://localhost:1", answered=False, error=why),),
                       complete=False)
    assert found.to_dict()["tasks"][0]["error"] == "localhost:1: nothing listens there (connection refused)"
    with i18n.speaking("zh"):
        out = io.StringIO()
        Console(file=out, width=200).print(render_inspection(found))
        assert "连接被拒绝" in out.getvalue() and "connection refused" not in out.getvalue()
        assert "连接被拒绝" in silent_summary(found)
        assert found.to_dict()["tasks"][0]["error"].endswith("(connection refused)")  # JSON stays English


def _until(condition: Callable[[], object], limit: float = 120.0) -> None:
    """Wait (bounded) for a state to be reached: a readiness signal, not a sleep that hopes."""
    end = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < end, "not reached within the limit"
        time.sleep(0.05)


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _asking(silent_server: SimpleNamespace) -> tuple[subprocess.Popen[str], int]:
    """placement inspect asking the silent server, once its TensorFlow child holds a connection there."""
    proc = subprocess.Popen([sys.executable, "-m", "placement_cli", "inspect", f"127.0.0.1:{silent_server.port}",
                             "--timeout", "60"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _until(lambda: silent_server.held and _children(proc.pid))
    (child,) = _children(proc.pid)
    return proc, child


def test_inspect_killed_leaves_no_tensorflow_child(silent_server) -> None:
    """SIGKILL gives placement no cleanup: its TensorFlow child once lived on for a minute, asking."""
    proc, child = _asking(silent_server)
    proc.kill()
    proc.wait(timeout=patience(30))
    _until(lambda: not _alive(child), limit=10)


def test_its_own_tensorflow_child_killed_is_placements_failure(silent_server) -> None:
    """The tasks did not fail to answer: placement's own process did. Exit 3, said as such."""
    proc, child = _asking(silent_server)
    os.kill(child, signal.SIGKILL)
    assert proc.wait(timeout=patience(60)) == 3
    err = proc.stderr.read()
    assert f"the process asking TensorFlow (pid {child}) was killed by SIGKILL" in err
    assert "did not answer" not in err


def test_its_own_tensorflow_child_stopped_is_named_at_once(silent_server) -> None:
    """A stopped child would never answer: placement says so at once (exit 3) instead of waiting
    out its limits, and ends it."""
    proc, child = _asking(silent_server)
    os.kill(child, signal.SIGSTOP)
    assert proc.wait(timeout=patience(60)) == 3  # the --timeout is 60 s: well before it would pass
    assert f"the process asking TensorFlow (pid {child}) was found stopped" in proc.stderr.read()
    _until(lambda: not _alive(child), limit=10)


def test_a_task_whose_address_is_another_tasks_has_no_devices(cluster, tmp_path) -> None:
    """The two addresses swapped: each server relays the other task's devices; neither answered as itself."""
    path = tmp_path / "swapped.json"
    path.write_text(json.dumps({"ps": cluster["worker"], "worker": cluster["ps"]}))
    result = inspect_json("--cluster-spec", str(path), expect=1)["json"]
    assert [(t["job"], t["answered"], t["devices"]) for t in result["tasks"]] == [("ps", False, []),
                                                                                  ("worker", False, [])]
    assert "the server there is /job:worker/task:0, not /job:ps/task:0" in result["tasks"][0]["error"]
    assert result["summary"]["devices"] == 0
    table = run_cli("inspect", "--cluster-spec", str(path), timeout=90)
    assert table.returncode == 1 and "Devices of" not in table.stdout


def test_many_silent_tasks_are_summarised_on_one_short_line() -> None:
    from placement_cli.model import Inspection, TaskAnswer
    from placement_cli.render.inspect import silent_summary

    tasks = tuple(TaskAnswer("worker", i, f"grpc://localhost:{i + 1}", answered=False,
                             error=f"localhost:{i + 1}: nothing listens there (connection refused)") for i in range(1024))
    line = silent_summary(Inspection("spec.json", 1.0, tasks, complete=False))
    assert line.startswith("1024 tasks did not answer: /job:worker/task:0 (") and line.endswith("and 1021 more")
    assert len(line) < 400
    few = silent_summary(Inspection("spec.json", 1.0, tasks[:3], complete=False))
    assert few.startswith("did not answer: ") and few.count("/job:worker/task:") == 3
