"""`placement cluster`: real TensorFlow servers, one process per task; nothing left behind (by pid and port)."""

from __future__ import annotations

import json
import re
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from conftest import is_matmul, read_dot
from placement_cli.devices import short_name
from processes import checkout_first, patience

ROOT = Path(__file__).resolve().parents[1]


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=checkout_first(), LANG="C.UTF-8", LC_ALL="C.UTF-8", COLUMNS="200")
    env.pop("TF_CONFIG", None)
    env.update(extra)
    return env


def _cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "placement_cli", "cluster", *args]


def _placement(*args: str, timeout: float = 240, one_cpu: bool = False, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_cmd(*args), capture_output=True, text=True, timeout=patience(timeout), env=_env(**env),
                          preexec_fn=_on_one_cpu if one_cpu else None)


def _on_one_cpu() -> None:
    """The command, and every process it starts, may run on one CPU only: a one-CPU machine or
    container, whatever this machine has (TensorFlow sizes its thread pools by these CPUs)."""
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


def _gone(pids: list[int], wait: float = 10.0) -> list[int]:
    """The pids still alive (not zombies) after waiting up to ``wait`` seconds (scaled: patience)."""
    end = time.monotonic() + patience(wait)
    while True:
        alive = []
        for pid in pids:
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if state != "Z":
                alive.append(pid)
        if not alive or time.monotonic() > end:
            return alive
        time.sleep(0.2)


def _listening() -> set[int]:
    """Every TCP port in LISTEN in this network namespace (IPv4 and IPv6)."""
    ports = set()
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A":
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def _processes() -> Iterator[tuple[int, list[str]]]:
    """Every process: its pid and the fields of /proc/PID/stat after the command name (state, ppid, pgrp, sid...)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                yield int(entry.name), (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue


def _session_members(sid: int) -> list[int]:
    found = []
    for pid, fields in _processes():
        if int(fields[3]) == sid and fields[0] != "Z":
            found.append(pid)
    return found


@pytest.fixture(scope="module")
def async_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], dict]:
    pictures = tmp_path_factory.mktemp("pictures")
    done = _placement("--ps", "2", "--workers", "2", "--steps", "4", "--copies", "--time", "--time-steps", "2", "--json",
                      "--dot", str(pictures / "cluster.dot"), "--graph-svg", str(pictures / "cluster.svg"),
                      TF_CONFIG="garbage{")  # --ps/--workers describe the cluster: a stale TF_CONFIG is not read
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    data["pictures"] = pictures
    return done, data


def test_async_cluster_shows_every_task(async_run) -> None:
    done, data = async_run
    assert done.stderr.count("TF_CONFIG is set and ignored: --ps and --workers describe the cluster") == 1
    tasks = {(t["job"], t["task"]): t for t in data["tasks"]}
    assert set(tasks) == {("ps", 0), ("ps", 1), ("worker", 0), ("worker", 1)}
    assert all(t["target"].startswith("grpc://localhost:") and t["pid"] > 0 for t in tasks.values())
    assert isinstance(data["isolated"], bool)
    for t in tasks.values():  # a progress line per task, on stderr
        assert f"{t['job']}/{t['task']} ready on {t['target'][len('grpc://'):]} (pid {t['pid']}" in done.stderr
    assert data["complete"] is True and data["error"] is None and data["mode"] == "async"


def test_each_worker_times_its_own_steps(async_run) -> None:
    """--time: steps 1 and 2 of each worker's 4 (the first is the warm-up), its kernels on its own CPU, its
    gradients sent to the ps tasks that hold the variables, with their bytes (float32 10x3 and 3)."""
    _, data = async_run
    assert set(data["costs"]) == {"worker/0", "worker/1"} and data["timing_errors"] == {}
    for task, cost in data["costs"].items():
        assert cost["steps"] == 2 and cost["warmup"] == 1
        own = f"/job:worker/replica:0/task:{task[-1]}/device:CPU:0"
        assert {d["device"] for d in cost["devices"]} == {own}
        assert any(o["node"] == "softmax_cross_entropy_with_logits" and o["device"] == own for o in cost["ops"])
        sent = {(c["producer"], c["to"]): c["bytes"] for c in cost["copies"]}
        assert sent[("gradients/MatMul_grad/MatMul_1", "/job:ps/replica:0/task:1/device:CPU:0")] == 120
        assert all(c["from"] != c["to"] for c in cost["copies"])  # a fetch back to its own device is no copy


def test_variables_round_robin_over_the_ps_tasks(async_run) -> None:
    _, data = async_run
    # on the ps tasks' CPU (--ps-on-cpu, the default), as TensorFlow's distributed guides keep them
    assert data["variables"] == {"global_step": "/job:ps/task:0/device:CPU:0", "weights": "/job:ps/task:1/device:CPU:0",
                                 "bias": "/job:ps/task:0/device:CPU:0"}
    where = {(p["node"], p["job"], p["task"]) for p in data["placements"]}
    assert ("weights", "ps", 1) in where and ("bias", "ps", 0) in where
    matmuls = {(p["job"], p["task"]) for p in data["placements"] if is_matmul(p["op"])}
    assert matmuls == {("worker", 0), ("worker", 1)}  # compute on each worker, from each worker's own log


def test_every_task_got_the_gpu_memory_policy_and_the_report_names_it(async_run) -> None:
    """Several TensorFlow processes on one GPU: each grows its memory (the default) and the ps tasks
    see no GPU; each task says what its environment and its server's ConfigProto had."""
    _, data = async_run
    yours = os.environ.get("TF_FORCE_GPU_ALLOW_GROWTH")  # the user's (a GPU machine's suite may set it): kept
    assert data["gpu_memory"] == {"policy": "growth", "allow_growth": yours != "false", "memory_fraction": None,
                                  "your_allow_growth": yours, "ps_on_gpu": False}
    for t in data["tasks"]:
        assert t["tf_force_gpu_allow_growth"] == (yours or "true")
        assert t["gpu_options"].get("allow_growth") is True
        if t["job"] == "ps":
            assert t["cuda_visible_devices"] == "" and t["gpu_options"]["device_count"] == {"GPU": 0}
        else:
            assert t["cuda_visible_devices"] == os.environ.get("CUDA_VISIBLE_DEVICES")
            assert "device_count" not in t["gpu_options"]


def test_each_worker_trained_async(async_run) -> None:
    _, data = async_run
    assert [w["task"] for w in data["workers"]] == [0, 1]
    for w in data["workers"]:
        assert len(w["losses"]) == 4 and len(w["global_steps"]) == 4
        assert w["losses"][-1] < w["losses"][0]
    steps = sorted(s for w in data["workers"] for s in w["global_steps"])
    assert len(set(steps)) > 4 or max(steps) >= 4  # the global step counts both workers' steps
    assert data["sync_ops"] == {}
    assert set(data) >= {"placements", "summary", "result", "copies", "errors"}


def test_nothing_left_after_the_run(async_run) -> None:
    _, data = async_run
    pids = [t["pid"] for t in data["tasks"]]
    assert _gone(pids) == []
    if not data["isolated"]:
        ports = {int(t["target"].rsplit(":", 1)[1]) for t in data["tasks"]}
        assert not ports & _listening()


def _devices(data: dict) -> dict[tuple[str, str, int], str]:
    """(node, job, task) -> the device it ran on: a task's CPU:0 here, its GPU:0 on a machine with one."""
    return {(p["node"], p["job"], p["task"]): p["canonical"] for p in data["placements"] if p["kind"] == "placer"}


def test_copies_between_tasks_with_bytes(async_run) -> None:
    _, data = async_run
    links = {(link["from"], link["to"]): link for link in data["copy_totals"]["links"]}
    weights = 10 * 3 * 4  # float32 [10, 3] on ps/1: read by each worker, its gradient sent back
    devices = _devices(data)
    ps1 = devices[("weights", "ps", 1)]
    assert ps1.startswith("/job:ps/replica:0/task:1/device:")
    for w in (0, 1):
        worker = next(d for (node, job, task), d in devices.items()
                      if (job, task) == ("worker", w) and node.endswith("MatMul"))
        assert links[(ps1, worker)]["bytes"] >= weights
        # the weights' gradient goes back, and a link's bytes are its copies' (TensorFlow may send a scalar
        # beside it: on a GPU machine the learning rate, 4 bytes, is a constant on the worker's GPU)
        back = [c for c in data["copies"] if (c["from"], c["to"]) == (worker, ps1)]
        assert [c["bytes"] for c in back if c["dtype"] == "float32" and c["shape"] == [10, 3]] == [weights]
        assert links[(worker, ps1)]["bytes"] == sum(c["bytes"] for c in back)
        assert links[(worker, ps1)]["copies"] == len(back)
    assert data["copy_totals"]["per_step_bytes"] > 0


def test_the_graph_draws_each_workers_nodes_on_its_task_and_the_ps_nodes_once(async_run) -> None:
    import xml.etree.ElementTree as ET

    _, data = async_run
    dot = read_dot((data["pictures"] / "cluster.dot").read_text())
    # a lane per device that ran something: each task's CPU:0 here (a GPU machine adds its GPU:0 lanes)
    assert set(dot["clusters"]) <= {short_name(d) for d in _devices(data).values()}
    assert {c.split()[0] for c in dot["clusters"]} == {"ps/0", "ps/1", "worker/0", "worker/1"}
    names = [n["name"] for n in dot["nodes"].values()]
    for node in dot["nodes"].values():  # each node in the lane of the task its name says it ran on
        assert node["cluster"].split()[0] == node["name"].split(":")[0], node
    assert {"worker/0: MatMul", "worker/1: MatMul"} <= set(names)
    assert names.count("ps/1: weights") == 1  # both workers' graphs place it there: drawn once
    crossing = "\n".join(attrs for a, b, attrs in dot["edges"]
                         if dot["nodes"][a]["cluster"] != dot["nodes"][b]["cluster"])
    assert re.search(r'label="copy [\d,]+ B"', crossing)  # the copies between tasks, with their bytes
    svg = ET.tostring(ET.parse(data["pictures"] / "cluster.svg").getroot(), encoding="unicode")
    assert "worker/1: MatMul" in svg and short_name(_devices(data)[("weights", "ps", 1)]) in svg


def _free_port() -> int:
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
        s.bind(("::", 0))
        return s.getsockname()[1]


def test_sync_cluster_from_a_cluster_spec(tmp_path: Path) -> None:
    ports = [_free_port() for _ in range(3)]
    spec = tmp_path / "cluster.json"
    spec.write_text(json.dumps({"ps": [f"localhost:{ports[0]}"],
                                "worker": [f"localhost:{ports[1]}", f"127.0.0.1:{ports[2]}"]}))
    # a share each, the ps on the GPU too, and the user's TF_FORCE_GPU_ALLOW_GROWTH kept as it is
    done = _placement("--cluster-spec", str(spec), "--steps", "3", "--sync", "--json", "--gpu-memory", "share",
                      "--ps-on-gpu", TF_FORCE_GPU_ALLOW_GROWTH="false")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["gpu_memory"] == {"policy": "share", "allow_growth": False, "memory_fraction": 0.3,
                                  "your_allow_growth": "false", "ps_on_gpu": True}
    for t in data["tasks"]:
        assert t["gpu_options"] == {"per_process_gpu_memory_fraction": 0.3}
        assert t["tf_force_gpu_allow_growth"] == "false"
        assert t["cuda_visible_devices"] == os.environ.get("CUDA_VISIBLE_DEVICES")
    assert data["variables"]["global_step"] == "/job:ps/task:0"  # no CPU asked for: the ps's devices decide
    assert [t["target"] for t in data["tasks"]] == [f"grpc://localhost:{ports[0]}", f"grpc://localhost:{ports[1]}",
                                                    f"grpc://127.0.0.1:{ports[2]}"]
    assert data["mode"] == "sync"
    assert any("Accumulator" in op for op in data["sync_ops"])
    assert max(s for w in data["workers"] for s in w["global_steps"]) <= 3
    assert _gone([t["pid"] for t in data["tasks"]]) == []


def test_sync_ends_without_a_worker_left_waiting_when_the_chief_is_starved() -> None:
    """The main thread of worker/0 (the chief) gets the least CPU (nice 19) once its session is up:
    the other workers may make every step without it, while its own run, its step fetched before,
    still waits for a token. Each worker that reaches the last step releases the runs still
    waiting, so the run ends complete instead of the chief waiting out the operation timeout
    (DeadlineExceeded)."""
    child = subprocess.Popen(_cmd("--ps", "1", "--workers", "4", "--steps", "3", "--sync", "--json"),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    assert child.stderr is not None
    lines, chief = [], 0
    for line in child.stderr:
        lines.append(line)
        if "worker/0 ready on " in line:
            chief = int(line.split("(pid ", 1)[1].split(",", 1)[0])
        if "worker/0: session up" in line:
            assert chief, lines
            os.setpriority(os.PRIO_PROCESS, chief, 19)  # on Linux: that thread (tid = pid) only
            break
    out, err = child.communicate(timeout=patience(240))
    err = "".join(lines) + err
    assert child.returncode == 0, err
    data = json.loads(out)
    assert data["complete"] is True and data["error"] is None
    assert [w["task"] for w in data["workers"]] == [0, 1, 2, 3] and all(w["losses"] for w in data["workers"])
    assert max(s for w in data["workers"] for s in w["global_steps"]) <= 3
    assert _gone([t["pid"] for t in data["tasks"]]) == []


@pytest.mark.parametrize(("args", "words"), [
    (["--ps", "5"], "--ps takes 1 to 4"),
    (["--workers", "0"], "--workers takes 1 to 8"),
    (["--steps", "1001"], "--steps takes 1 to 1000"),
])
def test_bounds_refused(args: list[str], words: str) -> None:
    done = _placement(*args, timeout=60)
    assert done.returncode == 2
    assert words in done.stderr


@pytest.mark.parametrize("host", ["example.com", "127.999.0.1", "127.0.0.1.example.com", "ip6-localhost", "0.0.0.0"])
def test_a_host_the_private_namespace_cannot_reach_is_refused_at_once(host: str) -> None:
    """Each of these once passed the check and left the workers waiting 300 s for their ps."""
    from placement_cli.clusterspec import from_text
    from placement_cli.exceptions import UsageProblem
    from placement_cli.runtime.cluster.launch import check_cluster

    spec = from_text(json.dumps({"ps": [f"{host}:2222"], "worker": ["localhost:2223"]}), "spec.json")
    with pytest.raises(UsageProblem, match="give localhost, 127.x.x.x or"):
        check_cluster(spec)
    assert check_cluster(from_text('{"ps": ["127.1.2.3:2"], "worker": ["[::1]:3"]}', "s")) == {
        "ps": ["127.1.2.3:2"], "worker": ["[::1]:3"]}


def test_cluster_spec_must_be_local(tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"ps": ["example.com:2222"], "worker": ["localhost:2223"]}))
    done = _placement("--cluster-spec", str(spec), timeout=60)
    assert done.returncode == 2 and "localhost" in done.stderr
    spec.write_text(json.dumps({"chief": ["localhost:2222"], "worker": ["localhost:2223"]}))
    done = _placement("--cluster-spec", str(spec), timeout=60)
    assert done.returncode == 2 and "ps and worker only" in done.stderr


def test_a_ps_killed_while_training_is_named() -> None:
    """ps/1 is killed by pid once every task is ready: the error names it, and nothing is left."""
    child = subprocess.Popen(_cmd("--ps", "2", "--workers", "2", "--steps", "1000", "--json"),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=_env(PLACEMENT_CLUSTER_NO_NAMESPACE="1"))
    assert child.stderr is not None
    lines, pids, ports = [], {}, set()
    for line in child.stderr:
        lines.append(line)
        if " ready on " in line:
            task = line.split("placement: ", 1)[1].split(" ", 1)[0]
            pids[task] = int(line.split("(pid ", 1)[1].split(",", 1)[0])
            ports.add(int(line.split(" ready on ", 1)[1].split(" ", 1)[0].rsplit(":", 1)[1]))
            if len(pids) == 4:
                os.kill(pids["ps/1"], signal.SIGKILL)
                break
    out, err = child.communicate(timeout=patience(120))
    err = "".join(lines) + err
    assert child.returncode == 1, err
    assert f"ps/1 (pid {pids['ps/1']}) was killed by SIGKILL" in err
    assert json.loads(out)["complete"] is False
    assert _gone(list(pids.values())) == []
    assert not ports & _listening()


def test_a_worker_killed_while_training_is_named() -> None:
    """worker/1 is killed by pid once its session is up (it trains 1000 steps): named, nothing left."""
    child = subprocess.Popen(_cmd("--ps", "1", "--workers", "2", "--steps", "1000", "--json"),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=_env(PLACEMENT_CLUSTER_NO_NAMESPACE="1"))
    assert child.stderr is not None
    lines, pids = [], {}
    for line in child.stderr:
        lines.append(line)
        if " ready on " in line:
            pids[line.split("placement: ", 1)[1].split(" ", 1)[0]] = int(line.split("(pid ", 1)[1].split(",", 1)[0])
        if "worker/1: session up" in line:
            os.kill(pids["worker/1"], signal.SIGKILL)
            break
    out, err = child.communicate(timeout=patience(120))
    err = "".join(lines) + err
    assert child.returncode == 1, err
    assert f"worker/1 (pid {pids['worker/1']}) was killed by SIGKILL while the workers trained" in err
    data = json.loads(out)
    assert data["complete"] is False and "worker/1" in data["error"]
    killed = next(w for w in data["workers"] if w["task"] == 1)
    assert killed["steps"] is None and killed["losses"] is None  # not known: null, never 0 and []
    assert _gone(list(pids.values())) == []
    assert not {int(t["target"].rsplit(":", 1)[1]) for t in data["tasks"]} & _listening()


def _pids_by_task(line: str, pids: dict[str, int]) -> None:
    if " ready on " in line:
        pids[line.split("placement: ", 1)[1].split(" ", 1)[0]] = int(line.split("(pid ", 1)[1].split(",", 1)[0])


def _read_until(child: subprocess.Popen[str], done: Callable[[str, dict[str, int]], bool]) -> tuple[list[str], dict[str, int]]:
    """placement's stderr lines, and the pids its tasks said they run as, up to the line ``done`` accepts."""
    assert child.stderr is not None
    lines: list[str] = []
    pids: dict[str, int] = {}
    for line in child.stderr:
        lines.append(line)
        _pids_by_task(line, pids)
        if done(line, pids):
            break
    return lines, pids


@pytest.mark.parametrize(("api", "released"), [("tf2", " ready on "), ("tf1", "worker/1: session up")])
def test_a_stopped_task_is_named_at_once(api: str, released: str) -> None:
    """worker/0 stopped (SIGSTOP) while the cluster trains 1000 steps: once hung for the whole
    training limit (tf2) or ended with TensorFlow's empty DeadlineExceeded (tf1), naming nobody."""
    child = subprocess.Popen(_cmd("--api", api, "--ps", "1", "--workers", "2", "--steps", "1000", "--json"),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    every = 4 if api == "tf2" else 3  # every task ready (tf2: the chief too)
    lines, pids = _read_until(child, lambda line, pids: released in line and len(pids) == every)
    os.kill(pids["worker/0"], signal.SIGSTOP)
    stopped = time.monotonic()
    out, err = child.communicate(timeout=patience(240))
    took = time.monotonic() - stopped
    err = "".join(lines) + err
    assert child.returncode == 1, err
    assert f"worker/0 (pid {pids['worker/0']}) was found stopped (process state T" in err
    assert took < 60, err  # named within a few polls, not after a timeout of TensorFlow's or placement's
    data = json.loads(out)
    assert data["complete"] is False and data["error"].startswith("worker/0 (pid")
    # the run did not finish: what the stopped worker ran is not known; an async worker beside it may have
    # run all its 1000 steps before the stop was seen (a fast machine), and then says so
    by_task = {w["task"]: w for w in data["workers"]}
    assert by_task[0]["steps"] is None
    assert all(w["steps"] in (None, 1000) for w in data["workers"]), data["workers"]
    assert _gone(list(pids.values())) == []  # SIGKILL ends a stopped process too


@pytest.mark.parametrize(("signum", "said"), [(signal.SIGKILL, "was killed by SIGKILL before it answered"),
                                             (signal.SIGSTOP, "was found stopped (process state T")])
def test_the_report_keeps_the_tasks_when_the_supervisor_is_killed(signum: int, said: str) -> None:
    """The supervisor killed (or stopped) mid-run: the tasks it said were ready stay in the report,
    with their pids, ended with its process group; the isolation it reported stays true in the title."""
    child = subprocess.Popen(_cmd("--ps", "1", "--workers", "1", "--steps", "1000", "--json"),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    lines, pids = _read_until(child, lambda line, _: "worker/0: session up" in line)
    supervisor = [pid for pid, fields in _processes() if int(fields[1]) == child.pid]
    assert len(supervisor) == 1
    os.kill(supervisor[0], signum)
    out, err = child.communicate(timeout=patience(60))
    err = "".join(lines) + err
    assert child.returncode == 3, err  # placement's own process failed, not the cluster
    assert f"the cluster's supervisor (pid {supervisor[0]}) {said}" in err
    data = json.loads(out)
    assert {f"{t['job']}/{t['task']}": t["pid"] for t in data["tasks"]} == pids
    assert isinstance(data["isolated"], bool)  # what the supervisor said at the start
    namespace = "no private network namespace" not in err
    assert data["isolated"] is namespace
    assert _gone(list(pids.values()) + supervisor) == []


def test_the_cluster_ends_when_placement_itself_is_killed() -> None:
    """SIGKILL (or SIGQUIT) leaves placement no cleanup of its own: the supervisor sees its parent
    gone and ends every task, and the cluster's temporary folder goes with them."""
    import tempfile

    tmp_path = Path(tempfile.mkdtemp(prefix="pc", dir="/tmp"))  # short: the folder is made right here
    child = subprocess.Popen(_cmd("--ps", "1", "--workers", "1", "--steps", "1000"), stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True, env=_env(TMPDIR=str(tmp_path)))
    assert child.stderr is not None
    pids = []
    for line in child.stderr:
        if " ready on " in line:
            pids.append(int(line.split("(pid ", 1)[1].split(",", 1)[0]))
        if "worker/0: session up" in line:
            break
    supervisor = [pid for pid, fields in _processes() if int(fields[1]) == child.pid]
    assert len(pids) == 2 and supervisor
    child.kill()
    child.wait(timeout=patience(30))
    assert _gone(pids + supervisor) == []
    end = time.monotonic() + patience(10)
    while list(tmp_path.glob("placement-cluster-*")) and time.monotonic() < end:
        time.sleep(0.2)
    assert list(tmp_path.glob("placement-cluster-*")) == []
    tmp_path.rmdir()


def test_a_taken_port_is_named(tmp_path: Path) -> None:
    taken = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    taken.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    taken.bind(("::", 0))
    taken.listen()
    port = taken.getsockname()[1]
    free = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    free.bind(("::", 0))
    other = free.getsockname()[1]
    free.close()
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"ps": [f"localhost:{port}"], "worker": [f"localhost:{other}"]}))
    try:
        done = _placement("--cluster-spec", str(spec), "--json", PLACEMENT_CLUSTER_NO_NAMESPACE="1")
    finally:
        taken.close()
    assert done.returncode == 1, done.stderr
    assert "ps/0 (pid " in done.stderr and "before it was ready" in done.stderr
    data = json.loads(done.stdout)
    assert _gone([t["pid"] for t in data["tasks"]]) == []
    assert other not in _listening()


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_during_start_up_ends_everything(signum: int, code: int) -> None:
    child = subprocess.Popen(_cmd("--ps", "1", "--workers", "1"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=_env())
    supervisor = None
    end = time.monotonic() + patience(30)
    while supervisor is None and time.monotonic() < end:  # the supervisor: the child's child, in its own session
        for pid, fields in _processes():
            if int(fields[1]) == child.pid:
                supervisor = pid
        time.sleep(0.1)
    assert supervisor is not None
    while len(_session_members(supervisor)) < 2 and time.monotonic() < end:  # its forkserver or a task started
        time.sleep(0.05)
    assert len(_session_members(supervisor)) >= 2
    child.send_signal(signum)
    _, err = child.communicate(timeout=patience(30))
    assert child.returncode == code, err
    assert "Traceback" not in err
    end = time.monotonic() + patience(10)
    while _session_members(supervisor) and time.monotonic() < end:
        time.sleep(0.2)
    assert _session_members(supervisor) == []


def test_tf2_parameter_server_strategy(tmp_path: Path) -> None:
    # on one CPU: TensorFlow gave each worker an inter-op pool of one thread, and the worker's
    # first step, which waits on one thread of that pool for ops that need another, never ended
    done = _placement("--api", "tf2", "--ps", "2", "--workers", "2", "--steps", "6", "--json",
                      "--dot", str(tmp_path / "ps.dot"), one_cpu=True)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["api"] == "tf2" and data["complete"] is True
    assert {t["job"] for t in data["tasks"]} == {"ps", "worker", "chief"}
    assert sum(w["steps"] for w in data["workers"]) == 6  # every scheduled step ran on some worker
    assert data["variables"] and all(device.startswith("/job:ps/") for device in data["variables"].values())
    logged_by = {(p["job"], p["task"]) for p in data["placements"]}
    assert ("worker", 0) in logged_by or ("worker", 1) in logged_by  # the workers' own function partitions
    assert len(data["losses"]) == 6
    assert _gone([t["pid"] for t in data["tasks"]]) == []
    # the picture joins the step's nodes: the coordinator traced the step, each task logged its part
    # (it drew every node alone: "edges unknown: this report kept no graph")
    text = (tmp_path / "ps.dot").read_text()
    dot = read_dot(text)
    names = {nid: n["name"] for nid, n in dot["nodes"].items()}
    assert "edges unknown" not in text
    into = {(names[a].split(": ")[0], names[b]) for a, b, _ in dot["edges"]}
    for worker in {t for t in logged_by if t[0] == "worker"}:
        matmul = f"worker/{worker[1]}: MatMul"
        assert matmul in names.values()
        sources = {a for a, b in into if b == matmul}  # the features on the worker, the weights on a ps task
        assert f"worker/{worker[1]}" in sources and any(a.startswith("ps/") for a in sources), sources


def test_tf2_refuses_sync() -> None:
    done = _placement("--api", "tf2", "--sync", timeout=60)
    assert done.returncode == 2 and "--api tf2" in done.stderr


def _english(message: dict) -> str:
    from placement_cli.runtime.cluster.launch import message as as_message

    return str(as_message(message))


def test_the_watch_names_a_stopped_task_and_a_silent_one(tmp_path: Path) -> None:
    """What the supervisor's watch says, without a cluster: a process stopped by SIGSTOP (state T),
    and one whose heartbeats stopped although it runs."""
    from types import SimpleNamespace

    from placement_cli.runtime.cluster import watch as cluster_watch

    sleeper = subprocess.Popen(["sleep", "120"])
    try:
        processes = {"ps/0": SimpleNamespace(pid=os.getpid(), exitcode=None),
                     "worker/0": SimpleNamespace(pid=sleeper.pid, exitcode=None)}
        watch = cluster_watch.Watch(processes, None, str(tmp_path))
        assert watch.lost(set(processes), cluster_watch.TRAINING) is None
        watch.beats["ps/0"] = time.monotonic() - cluster_watch.SILENCE_LIMIT - 5
        said = _english(watch.lost(set(processes), cluster_watch.TRAINING))
        assert said.startswith(f"ps/0 (pid {os.getpid()}) has not answered placement for ")
        assert said.endswith("while the workers trained")
        os.kill(sleeper.pid, signal.SIGSTOP)
        end = time.monotonic() + patience(30)
        while cluster_watch.process_state(sleeper.pid) != "T":  # the kernel stops it: wait for that state, bounded
            assert time.monotonic() < end
            time.sleep(0.05)
        said = _english(watch.lost({"worker/0"}, cluster_watch.TRAINING))
        assert said == (f"worker/0 (pid {sleeper.pid}) was found stopped (process state T: SIGSTOP or a debugger) "
                        "while the workers trained")
        # a worker that said its own error exits 0: it is not the peer to blame for another's error
        processes["ps/0"] = SimpleNamespace(pid=os.getpid(), exitcode=0)
        watch.beats.clear()
        assert watch.lost({"ps/0"}, cluster_watch.TRAINING, failed_only=True) is None
        assert "exited with code 0" in _english(watch.lost({"ps/0"}, cluster_watch.TRAINING))
    finally:
        sleeper.kill()
        sleeper.wait()


def _report(*, sync: bool, workers: int, results: dict, api: str = "tf1", tasks: list | None = None):
    from placement_cli.lessons.cluster import build
    from placement_cli.model import ClusterRun
    from placement_cli.runtime.cluster.launch import task_of, training_of

    tasks = tasks or [{"job": "ps", "task": 0, "target": "grpc://localhost:1", "pid": 10, "exit_code": -9,
                       "ended_by_placement": True}] + [
        {"job": "worker", "task": i, "target": f"grpc://localhost:{i + 2}", "pid": 11 + i, "exit_code": 0,
         "ended_by_placement": False, "steps_reported": 7} for i in range(workers)]
    run = ClusterRun(isolated=True, tasks=tuple(map(task_of, tasks)),
                     results=tuple((name, training_of(r)) for name, r in results.items()))
    return build(run, sync=sync, steps=3, copies=False, api=api)


def _printed(found, language: str = "en") -> str:
    import io

    from rich.console import Console

    from placement_cli import i18n
    from placement_cli.render.cluster import cluster_group
    from placement_cli.render.table import View

    out = io.StringIO()
    with i18n.speaking(language):
        Console(file=out, width=300).print(cluster_group(found, View(all_rows=True)))
    return out.getvalue()


def test_one_sync_worker_is_said_in_the_singular_in_both_languages() -> None:
    result = {"losses": [1.0, 0.5], "global_steps": [1, 2], "variables": {}}
    one = _report(sync=True, workers=1, results={"worker/0": result})
    assert "once the one worker's gradient is in" in _printed(one) and "once 1 gradients" not in _printed(one)
    assert "一个 worker" in _printed(one, "zh")
    two = _report(sync=True, workers=2, results={"worker/0": result, "worker/1": result})
    assert "once 2 gradients are in" in _printed(two)


def test_a_worker_that_never_reported_is_unknown_not_zero() -> None:
    """A worker that died mid-run once showed steps 0 and losses [] after running hundreds of steps."""
    result = {"losses": [1.0, 0.5, 0.4], "global_steps": [1, 2, 3], "variables": {}}
    found = _report(sync=False, workers=2, results={"worker/0": result})
    workers = found.to_dict()["workers"]
    assert workers[0]["steps"] == 3
    assert workers[1] == {"task": 1, "steps": None, "losses": None, "global_steps": None, "steps_reported": 7}
    shown = _printed(found)
    assert "unknown (it said 7 before it ended)" in shown and "worker/1: unknown" in shown
    tf2 = _report(sync=False, workers=2, results={}, api="tf2")
    assert all(w["steps"] is None for w in tf2.to_dict()["workers"]) and tf2.to_dict()["losses"] is None


def test_a_report_of_unknown_isolation_says_so() -> None:
    from placement_cli.lessons.cluster import build
    from placement_cli.model import ClusterRun
    from placement_cli.runtime.cluster.launch import task_of

    tasks = [{"job": "ps", "task": 0, "target": "grpc://localhost:1", "pid": 10, "exit_code": None,
              "ended_by_placement": None}]
    found = build(ClusterRun(tasks=tuple(map(task_of, tasks)), problem="gone"), sync=False, steps=3, copies=False)
    shown = " ".join(_printed(found).split())  # the title wraps to the table's width
    assert "listening on every interface" not in shown and "private network namespace is not known" in shown
    assert "not known" in shown.split("localhost:1", 1)[1]  # its exit code


def test_a_graph_execution_error_is_said_by_its_cause() -> None:
    """TensorFlow's graph errors begin with an empty 'Graph execution error:' (once all a worker's
    error said); the cause follows the node's traceback."""
    from placement_cli.runtime.cluster.supervisor import said

    text = ("Graph execution error:\n\nDetected at node 'GradientDescent/update' defined at (most recent call last):\n"
            "  File \"x.py\", line 1, in <module>\nNode: 'GradientDescent/update'\n"
            "Timed out waiting for notification\n\t [[{{node GradientDescent/update}}]]")
    assert said(RuntimeError(text)) == "Timed out waiting for notification ('GradientDescent/update')"
    assert said(RuntimeError("Operation timed out.")) == "Operation timed out."
    assert said(RuntimeError("")) == ""


def test_the_tasks_table_says_the_gpu_memory_policy_and_each_tasks_gpus() -> None:
    from dataclasses import replace

    from placement_cli.lessons.cluster import build
    from placement_cli.runtime import gpu_policy

    found = _report(sync=False, workers=1, results={})
    tasks = tuple(replace(t, cuda_visible_devices="" if t.job == "ps" else None) for t in found.run.tasks)
    memory = gpu_policy.decide("growth", {}, gpu_tasks=1, ps_on_gpu=False)
    shown = _printed(build(replace(found.run, tasks=tasks, gpu_memory=memory), sync=False, steps=3, copies=False))
    assert "GPU memory: growth: each task takes GPU memory as it needs it" in shown
    assert '"" (no GPU)' in shown and "not set (every GPU)" in shown
    assert json.loads(json.dumps(build(replace(found.run, gpu_memory=memory), sync=False, steps=3,
                                       copies=False).to_dict()))["gpu_memory"]["policy"] == "growth"
