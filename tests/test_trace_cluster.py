"""`placement trace --cluster`: the user's own multi-worker / parameter-server script, one real process
per task on real TensorFlow servers, as TensorFlow's tutorials run it. One run per shape, shared by
the tests of this module (each TensorFlow start-up costs seconds)."""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import pytest

from trace_helpers import TRACE, environment, gone
from processes import patience

# The lessons of trace --cluster on a machine without a GPU: MultiWorkerMirroredStrategy's collectives
# on each worker's CPU, ParameterServerStrategy's variables on ps/0 CPU:0 (tasks on a GPU machine would
# all share its GPU:0, and reduce there). On a GPU machine the tasks see no GPU (conftest: cpu_devices).
pytestmark = pytest.mark.cpu_devices("CPU lessons of trace --cluster")

SCRIPTS = Path(__file__).parent / "fixtures" / "distributed"
MWMS = str(SCRIPTS / "mwms.py")
PSS = str(SCRIPTS / "pss.py")


def _read_until(stream: IO[bytes], done: Callable[[bytes], bool]) -> bytes:
    """What ``stream`` gave until ``done`` holds of all of it, it ended, or the test's patience ran out."""
    seen = b""
    deadline = time.monotonic() + patience(180)
    while not done(seen) and time.monotonic() < deadline:
        ready, _, _ = select.select([stream], [], [], 1.0)
        if ready:
            chunk = os.read(stream.fileno(), 65536)
            if not chunk:
                break
            seen += chunk
    return seen


def _leftovers(marker: str) -> list[str]:
    """Processes still running whose command line names ``marker`` (zombies are gone)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if marker in cmdline and not gone(int(entry)):
            found.append(f"{entry}: {cmdline}")
    return found


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return int(next(line for line in f if line.startswith("PPid:")).split()[1])


def _listening(ports: set[int]) -> set[int]:
    """Which of ``ports`` something listens on, in this network namespace."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) in ports:  # 0A: LISTEN
                found.add(int(fields[1].rsplit(":", 1)[1], 16))
    return found


def _run(tmp: Path, *args: str) -> tuple[subprocess.CompletedProcess[bytes], Path]:
    work = tmp / "work"
    work.mkdir()
    env = environment(tmp)
    done = subprocess.run([*TRACE, *args], cwd=work, env=env, capture_output=True, timeout=patience(240), check=False)
    return done, Path(env["TMPDIR"])


@pytest.fixture(scope="module")
def mwms(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("mwms")
    done, tmpdir = _run(tmp, "--cluster", "worker=2", "--json", "--save-log", str(tmp / "logs"), MWMS)
    return {"done": done, "tmp": tmp, "tmpdir": tmpdir, "doc": json.loads(done.stdout) if done.stdout else None}


@pytest.fixture(scope="module")
def pss(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("pss")
    done, tmpdir = _run(tmp, "--cluster", "chief=1,ps=1,worker=2", "--all", "--dot", str(tmp / "graph.dot"), PSS)
    return {"done": done, "tmp": tmp, "tmpdir": tmpdir}


def test_mwms_runs_every_worker_with_its_output_prefixed_and_its_tf_config(mwms: dict[str, Any]) -> None:
    done = mwms["done"]
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    err = done.stderr.decode()
    for i in (0, 1):  # --json: the tasks' stdout goes to stderr, each line after its task
        assert f"worker/{i} | hello from worker {i}\n" in err
        assert re.search(rf"^worker/{i} \| worker {i} loss \d", err, re.MULTILINE)
    doc = mwms["doc"]
    assert doc["exit_code"] == 0
    tasks = doc["tasks"]
    assert [(t["job"], t["task"], t["exit_code"]) for t in tasks] == [("worker", 0, 0), ("worker", 1, 0)]
    assert all(re.fullmatch(r"localhost:\d+", t["address"]) and t["pid"] for t in tasks)
    assert len({t["address"] for t in tasks}) == 2
    assert all(gone(t["pid"]) for t in tasks)


def test_mwms_placements_are_grouped_by_the_task_that_placed_them(mwms: dict[str, Any]) -> None:
    placements = mwms["doc"]["placements"]
    assert {(p["job"], p["task"]) for p in placements} == {("worker", 0), ("worker", 1)}
    for i in (0, 1):  # each worker ran the step function's collective all-reduce on its own CPU
        mine = [p for p in placements if p["task"] == i]
        assert any(p["op"] == "CollectiveReduceV2" for p in mine)
        assert all(p["canonical"].startswith(f"/job:worker/replica:0/task:{i}/") for p in mine)
        # the script's eager matmul pinned to a GPU no machine has: the request is the task's full device name
        pinned = [p for p in mine if p["kind"] == "eager" and p["op"] in ("MatMul", "_MklMatMul")
                  and "/device:GPU:" in (p["requested"] or "")]
        assert [(p["requested"].split("/device:")[0], p["status"]) for p in pinned] == [
            (f"/job:worker/replica:0/task:{i}", "soft fallback")], pinned
        assert "does not exist" in pinned[0]["reason"]


def test_mwms_save_log_keeps_each_task_byte_exact_and_parse_reads_the_logs(mwms: dict[str, Any]) -> None:
    logs = mwms["tmp"] / "logs"
    for i in (0, 1):
        out = (logs / f"worker-{i}.out").read_bytes()
        assert re.fullmatch(rb"hello from worker %d\nworker %d loss \d+\.\d{3}\n" % (i, i), out), out
        assert (logs / f"worker-{i}.err").exists()
    parsed = subprocess.run([sys.executable, "-m", "placement_cli", "parse", "--json", str(logs / "worker-0.log"),
                             str(logs / "worker-1.log")], capture_output=True, check=False, env=environment(mwms["tmp"]))
    assert parsed.returncode == 0, parsed.stderr.decode()
    by_device = json.loads(parsed.stdout)["summary"]["by_device"]
    assert "/job:worker/replica:0/task:0/device:CPU:0" in by_device
    assert "/job:worker/replica:0/task:1/device:CPU:0" in by_device


def test_mwms_leaves_no_temporary_file(mwms: dict[str, Any]) -> None:
    assert list(mwms["tmpdir"].iterdir()) == []


def test_pss_chief_finishes_servers_are_ended_and_variables_live_on_ps(pss: dict[str, Any]) -> None:
    done = pss["done"]
    out, err = done.stdout.decode(), done.stderr.decode()
    assert done.returncode == 0, err[-3000:]
    assert re.search(r"^chief/0  \| chief done, loss \d", out, re.MULTILINE)
    for name in ("ps/0     | ps 0 serving", "worker/0 | worker 0 serving", "worker/1 | worker 1 serving"):
        assert name + "\n" in out
    tasks = out[out.index("Tasks ("):]
    assert re.search(r"│ chief/0\s+│ localhost:\d+\s+│ \d+\s+│ 0 ", tasks)
    for name in ("ps/0", "worker/0", "worker/1"):
        assert re.search(rf"│ {name}\s+│ localhost:\d+\s+│ \d+\s+│ ended by placement \(SIG(TERM|KILL)\)", tasks)
    variables = out[out.index("Where the variables live"):]
    assert "ps/0 CPU:0" in variables
    assert re.search(r"ps/0 CPU:0\s+│\s+\S*\s*AssignSubVariableOp|AssignSubVariableOp.*ps/0 CPU:0", out)
    assert list(pss["tmpdir"].iterdir()) == []
    assert _leftovers(PSS) == []


def test_pss_pictures_draw_each_tasks_graph_apart(pss: dict[str, Any]) -> None:
    dot = (pss["tmp"] / "graph.dot").read_text()
    for task in ("ps/0", "worker/0", "worker/1"):  # each task's function partitions, their nodes named by task
        assert re.search(rf'"{task}: [^"]+"', dot), task


def test_a_failing_worker_is_named_with_its_error_and_the_run_fails(tmp_path: Path) -> None:
    done, tmpdir = _run(tmp_path, "--cluster", "worker=2", MWMS, "--fail")
    err = done.stderr.decode()
    assert done.returncode == 1, err[-3000:]
    assert "worker/1 | worker 1 gives up\n" in err
    named = [line for line in err.splitlines() if line.startswith("placement: worker/1 (pid ")]
    assert named and "exited with code 1" in named[0] and "worker 1: failing on purpose" in named[0], err[-2000:]
    assert "worker/0" in done.stdout.decode()  # the report names the worker placement ended
    assert _leftovers(MWMS) == []
    assert list(tmpdir.iterdir()) == []


# A task that serves on its TF_CONFIG port until it is ended (a plain socket: the TensorFlow servers
# are the fixtures' above; here what matters is what placement leaves behind).
SLEEPER = """
import json, os, socket, time
config = json.loads(os.environ["TF_CONFIG"])
port = int(config["cluster"][config["task"]["type"]][config["task"]["index"]].rsplit(":", 1)[1])
server = socket.create_server(("", port), family=socket.AF_INET6, dualstack_ipv6=True, reuse_port=True)
print("serving", port, flush=True)
time.sleep(600)
"""


# SIGINT and SIGKILL without the private network namespace: the tasks' ports are then seen listening
# here while they run, and seen closed afterwards
@pytest.mark.parametrize("sig, shared_network", [(signal.SIGINT, True), (signal.SIGTERM, False), (signal.SIGHUP, False),
                                                 (signal.SIGKILL, True)])
def test_a_signal_to_placement_ends_every_task_and_leaves_nothing(tmp_path: Path, sig: signal.Signals,
                                                                  shared_network: bool) -> None:
    script = tmp_path / f"sleeper_{sig.name}.py"
    script.write_text(SLEEPER)
    env = environment(tmp_path, **({"PLACEMENT_CLUSTER_NO_NAMESPACE": "1"} if shared_network else {}))
    proc = subprocess.Popen([*TRACE, "--cluster", "worker=1,ps=1", str(script)], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    def ports_of(seen: bytes) -> set[int]:
        return {int(p) for p in re.findall(rb"\| serving (\d+)\n", seen)}

    try:
        seen = _read_until(proc.stdout, lambda seen: len(ports_of(seen)) >= 2)
        ports = ports_of(seen)
        assert len(ports) == 2, seen.decode()[-2000:]
        tasks = [pid for pid in (int(line.split(":")[0]) for line in _leftovers(str(script))) if pid != proc.pid]
        launchers = {_parent(pid) for pid in tasks} - {proc.pid}
        assert len(tasks) == 2 and len(launchers) == 1
        if shared_network:
            assert _listening(ports) == ports
        proc.send_signal(sig)
        proc.communicate(timeout=patience(60))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == (-sig if sig == signal.SIGKILL else 128 + sig)
    end = time.monotonic() + patience(20)  # SIGKILL: the launcher sees placement's pipe close, then ends every task
    while _leftovers(str(script)) and time.monotonic() < end:
        time.sleep(0.05)
    assert _leftovers(str(script)) == []
    while not all(map(gone, launchers)) and time.monotonic() < end:
        time.sleep(0.05)
    assert all(map(gone, launchers))
    assert _listening(ports) == set()
    assert list(Path(env["TMPDIR"]).iterdir()) == []


# Cheap runs without TensorFlow: what placement itself does with the tasks' output, codes and ends.

CHATTY = r"""
import json, os, sys, time
task = json.loads(os.environ["TF_CONFIG"])["task"]
name = f"{task['type']}{task['index']}"
if task["type"] == "ps":
    print("ps serving", flush=True)
    time.sleep(600)
sys.stdout.buffer.write(b"partial " + name.encode())
sys.stdout.flush()  # the rest of the line comes in another write
sys.stdout.buffer.write(b" done\n\xff\xfe raw\n")
sys.stdout.flush()
sys.stderr.write(f"{name} to stderr\nno newline at the end")
sys.exit(int(os.environ.get("CHIEF_CODE", "0")) if task["type"] == "chief" else 0)
"""


def test_lines_are_prefixed_whole_and_saved_byte_exact(tmp_path: Path) -> None:
    script = tmp_path / "chatty.py"
    script.write_text(CHATTY)
    done = subprocess.run([*TRACE, "--cluster", "worker=2", "--save-log", str(tmp_path / "logs"), str(script)],
                          cwd=tmp_path, env=environment(tmp_path), capture_output=True, timeout=patience(120), check=False)
    assert done.returncode == 0, done.stderr.decode()
    for i in (0, 1):
        assert f"worker/{i} | partial worker{i} done\n".encode() in done.stdout  # a line waits for its end
        assert f"worker/{i} | \xff\xfe raw\n".encode("latin-1") in done.stdout
        assert f"worker/{i} | worker{i} to stderr\n".encode() in done.stderr
        assert re.search(rb"^worker/%d \| no newline at the end" % i, done.stderr, re.MULTILINE)
        assert (tmp_path / "logs" / f"worker-{i}.out").read_bytes() == b"partial worker%d done\n\xff\xfe raw\n" % i
        assert (tmp_path / "logs" / f"worker-{i}.err").read_bytes() == b"worker%d to stderr\nno newline at the end" % i
    again = subprocess.run([*TRACE, "--cluster", "worker=2", "--save-log", str(tmp_path / "logs"), str(script)],
                           cwd=tmp_path, env=environment(tmp_path), capture_output=True, timeout=patience(60), check=False)
    assert again.returncode == 2 and b"the file exists" in again.stderr and b"partial" not in again.stdout


def test_the_chiefs_exit_code_is_placements_and_serving_tasks_are_ended(tmp_path: Path) -> None:
    script = tmp_path / "chatty.py"
    script.write_text(CHATTY)
    done = subprocess.run([*TRACE, "--json", "--cluster", "chief=1,worker=1,ps=1", str(script)], cwd=tmp_path,
                          env=environment(tmp_path, CHIEF_CODE="3"), capture_output=True, timeout=patience(120), check=False)
    assert done.returncode == 3, done.stderr.decode()
    doc = json.loads(done.stdout)
    tasks = {f"{t['job']}/{t['task']}": t for t in doc["tasks"]}
    assert list(tasks) == ["chief/0", "worker/0", "ps/0"]
    assert tasks["chief/0"]["exit_code"] == 3 and not tasks["chief/0"]["ended_by_placement"]
    assert tasks["ps/0"]["ended_by_placement"] and tasks["ps/0"]["exit_code"] < 0
    assert doc["exit_code"] == 3
    assert "chief/0 (pid" in doc["error"] and "exited with code 3" in doc["error"]
    assert _leftovers(str(script)) == []


@pytest.mark.parametrize("args, says", [
    (["--cluster", "worker=0"], "worker takes 1 to 16 tasks"),
    (["--cluster", "evaluator=1"], "give JOB=COUNT pairs"),
    (["--cluster", "ps=1"], "at least one worker"),
    (["--cluster", "worker=1,worker=2"], "worker is given twice"),
    (["--cluster", "worker=1", "--cluster-spec", "spec.json"], "not both"),
    (["--cluster-spec", "remote.json"], "every task runs on this machine"),
    (["--cluster", "worker=1", "--save-log", "afile"], "give a folder"),
    (["--cluster", "chief=2,worker=1"], "--cluster chief=2,worker=1: there is at most one chief"),
    # a file's cluster: the file is named, not a --cluster the user never typed
    (["--cluster-spec", "many.json"], "many.json: worker takes 1 to 16 tasks (20 given)"),
    (["--cluster-spec", "chiefs.json"], "chiefs.json: there is at most one chief"),
    (["--cluster-spec", "nowork.json"], "nowork.json: at least one worker is needed"),
])
def test_bad_cluster_options_are_usage_errors_and_run_nothing(tmp_path: Path, args: list[str], says: str) -> None:
    script = tmp_path / "never.py"
    script.write_text("open('ran', 'w').close()\n")
    (tmp_path / "spec.json").write_text('{"worker": ["localhost:2222"]}')
    (tmp_path / "remote.json").write_text('{"worker": ["10.1.2.3:2222"]}')
    (tmp_path / "many.json").write_text(json.dumps({"worker": [f"localhost:{30000 + i}" for i in range(20)]}))
    (tmp_path / "chiefs.json").write_text('{"worker": ["localhost:2222"], "chief": ["localhost:2223", "localhost:2224"]}')
    (tmp_path / "nowork.json").write_text('{"ps": ["localhost:2222"]}')
    (tmp_path / "afile").write_text("")
    done = subprocess.run([*TRACE, *args, str(script)], cwd=tmp_path, env=environment(tmp_path),
                          capture_output=True, timeout=patience(60), check=False)
    assert done.returncode == 2, done.stderr.decode()
    assert says in done.stderr.decode()
    if args[0] == "--cluster-spec":
        assert "--cluster " not in done.stderr.decode()
    assert not (tmp_path / "ran").exists()


STOPS = """
import json, os, signal, time
task = json.loads(os.environ["TF_CONFIG"])["task"]
print("started", flush=True)
if task["index"] == 1:
    os.kill(os.getpid(), signal.SIGSTOP)
time.sleep(600)
"""


def _cheap(tmp: Path, name: str, body: str, *args: str) -> tuple[subprocess.CompletedProcess[bytes], Path]:
    """``trace ARGS SCRIPT`` of a script without TensorFlow, written from ``body``."""
    script = tmp / name
    script.write_text(body)
    done = subprocess.run([*TRACE, *args, str(script)], cwd=tmp, env=environment(tmp), capture_output=True,
                          timeout=patience(120), check=False)
    return done, script


def test_a_stopped_task_is_named_and_every_task_is_ended(tmp_path: Path) -> None:
    done, script = _cheap(tmp_path, "stops.py", STOPS, "--cluster", "worker=2")
    err = done.stderr.decode()
    assert done.returncode == 1
    assert re.search(r"^placement: worker/1 \(pid \d+\) was found stopped \(process state [Tt]", err, re.MULTILINE), err
    assert _leftovers(str(script)) == []


def test_tasks_on_gpus_are_said_to_share_them_and_the_users_cuda_visible_devices_is_named(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    from types import SimpleNamespace

    from placement_cli.runtime.gpu_policy import shared_note

    def _gpu_note(traced: object) -> list[str]:
        return shared_note(traced.report, len(traced.tasks))  # type: ignore[attr-defined]
    from placement_cli.logparse.engine import parse_streams

    log = (b"Executing op MatMul in device /job:worker/replica:0/task:0/device:GPU:0\n"
           b"Executing op MatMul in device /job:worker/replica:0/task:1/device:GPU:0\n")
    traced = SimpleNamespace(report=parse_streams([("<log>", io.BytesIO(log))]), tasks=(1, 2))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    [note] = _gpu_note(traced)
    assert "2 tasks" in note and "CUDA_VISIBLE_DEVICES=1" in note and "GPU:0" in note
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert "CUDA_VISIBLE_DEVICES" not in _gpu_note(traced)[0]
    cpu_only = SimpleNamespace(report=parse_streams([("<log>", io.BytesIO(log.replace(b"GPU", b"CPU")))]), tasks=(1, 2))
    assert _gpu_note(cpu_only) == []


def test_between_graph_copies_between_tasks_are_listed_with_their_bytes(tmp_path: Path) -> None:
    done, _ = _run(tmp_path, "--cluster", "worker=1,ps=1", "--copies", "--json", str(SCRIPTS / "between_graph.py"))
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    assert "worker/0 | worker 0 32768.0\n" in done.stderr.decode()
    doc = json.loads(done.stdout)
    ps, worker = "/job:ps/replica:0/task:0/device:CPU:0", "/job:worker/replica:0/task:0/device:CPU:0"
    read = [c for c in doc["copies"] if c["from"] == ps and c["to"] == worker]
    assert read and read[0]["bytes"] == 64 * 64 * 4 and read[0]["dtype"] == "float32"  # w, read by the worker's MatMul
    assert any(c["from"] == worker and c["to"] == ps for c in doc["copies"])  # w's initial value, made on the worker
    # y's fetch back to the client is a _Send from the worker's CPU to itself: no copy between devices
    assert all(c["from"] != c["to"] for c in doc["copies"]), doc["copies"]
    variables = [p for p in doc["placements"] if p["op"] == "VarHandleOp" and p["node"] == "w"]
    assert variables and {(p["job"], p["task"]) for p in variables} == {("ps", 0)}


# What placement does with the tasks' output, their leftovers and the cluster it is given: cheap
# scripts, no TensorFlow.

FOREVER = """
import time
n = 0
while True:
    print("tick", n, flush=True)
    n += 1
    time.sleep(0.01)
"""


def test_a_reader_that_stops_early_ends_the_tasks_as_their_own_closed_stdout_would(tmp_path: Path) -> None:
    """`trace --cluster ... | head -1`: each task's stdout is closed as the pipe would be without placement
    (as `trace`'s script meets EPIPE itself): the tasks end with their own error, and so does placement."""
    script = tmp_path / "forever.py"
    script.write_text(FOREVER)
    with open(tmp_path / "err", "wb") as err:
        proc = subprocess.Popen([*TRACE, "--cluster", "worker=2", str(script)], cwd=tmp_path, env=environment(tmp_path),
                                stdout=subprocess.PIPE, stderr=err)
        assert proc.stdout is not None
        try:
            first = proc.stdout.readline()
            proc.stdout.close()  # | head -1
            code = proc.wait(timeout=patience(60))
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert re.fullmatch(rb"worker/[01] \| tick 0\n", first), first
    said = (tmp_path / "err").read_text()
    # python's BrokenPipeError in the task, as under `trace`: 1, or 120 when its flush at exit failed too
    assert code in (1, 120), said[-2000:]
    assert re.search(rf"^placement: worker/[01] \(pid \d+\) exited with code {code}: .*BrokenPipeError", said, re.MULTILINE), said
    assert _leftovers(str(script)) == []


UNFINISHED = """
import os, sys
sys.stdout.write("epoch 3/10 ... loss=0.5")
sys.stdout.flush()
sys.stderr.write("half a line on stderr")
sys.stderr.flush()
os._exit(1)
"""


def test_an_unfinished_last_line_is_ended_before_anything_else_is_written(tmp_path: Path) -> None:
    done, _ = _cheap(tmp_path, "unfinished.py", UNFINISHED, "--cluster", "worker=1", "--save-log", str(tmp_path / "logs"))
    assert done.returncode == 1, done.stderr.decode()
    out, err = done.stdout.decode(), done.stderr.decode()
    assert "worker/0 | epoch 3/10 ... loss=0.5\n" in out, out
    assert re.search(r"^─+ placement: \S+ exited with code 1", out, re.MULTILINE), out  # the report's rule: a line of its own
    assert "worker/0 | half a line on stderr\nplacement: worker/0 (pid " in err, err
    assert (tmp_path / "logs" / "worker-0.out").read_bytes() == b"epoch 3/10 ... loss=0.5"  # the file: as written


def test_stdout_and_stderr_on_one_screen_never_glue_two_sources_lines(tmp_path: Path) -> None:
    from placement_cli.runtime.cluster.trace_output import Screens

    read, write = os.pipe()
    second = os.dup(write)  # stdout and stderr on one pipe, as `2>&1` makes them
    gone: list[int] = []
    screens = Screens(8, gone.append)
    try:
        screens.watch(write)
        screens.watch(second)
        screens.emit("worker/0", "out", write, b"partial", whole=False)
        screens.emit("worker/1", "err", second, b"a whole line\n")
        screens.emit("worker/0", "out", write, b" rest\n")
        screens.emit("worker/0", "err", second, b"no newline", whole=False)
        screens.end_line("worker/0", "err", second)
        os.close(write)
        os.close(second)
        assert os.read(read, 65536) == (b"worker/0 | partial\nworker/1 | a whole line\nworker/0 |  rest\n"
                                        b"worker/0 | no newline\n")
    finally:
        os.close(read)
    assert gone == []


PIECES = """
import sys, time
for piece in ("UnicodeEncodeError", ": ", "'ascii' codec can't encode character", "\\n", "last words"):
    sys.stderr.write(piece)
    sys.stderr.flush()
    time.sleep(0.05)  # each piece in a read of its own, most likely
sys.exit(3)
"""


def test_the_failure_quotes_whole_lines_of_the_tasks_stderr(tmp_path: Path) -> None:
    done, _ = _cheap(tmp_path, "pieces.py", PIECES, "--cluster", "worker=1")
    err = done.stderr.decode()
    assert done.returncode == 3, err
    named = [line for line in err.splitlines() if line.startswith("placement: worker/0 (pid ")]
    assert named and named[0].endswith(
        "exited with code 3: UnicodeEncodeError: 'ascii' codec can't encode character | last words"), err


DAEMON = """
import json, os, socket, sys, time
me = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:  # a daemon: in a session of its own, its parent gone
        server = socket.create_server(("", 0), family=socket.AF_INET6, dualstack_ipv6=True)
        print("daemon", os.getpid(), server.getsockname()[1], flush=True)
        time.sleep(600)
    os._exit(0)
os.wait()
if sys.argv[1] == "wait":
    time.sleep(600)
"""


@pytest.mark.parametrize("end, shared_network", [("done", False), ("SIGINT", True)])
def test_a_daemon_a_task_started_is_killed_at_the_end(tmp_path: Path, end: str, shared_network: bool) -> None:
    script = tmp_path / f"daemon_{end}.py"
    script.write_text(DAEMON)
    env = environment(tmp_path, **({"PLACEMENT_CLUSTER_NO_NAMESPACE": "1"} if shared_network else {}))
    proc = subprocess.Popen([*TRACE, "--cluster", "worker=1", str(script), "wait" if end == "SIGINT" else "go"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    daemon = port = 0
    try:
        line = proc.stdout.readline()
        found = re.fullmatch(rb"worker/0 \| daemon (\d+) (\d+)\n", line)
        assert found, line
        daemon, port = int(found.group(1)), int(found.group(2))
        if shared_network:
            assert _listening({port}) == {port}
        if end == "SIGINT":
            proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=patience(60))
        assert proc.returncode == (130 if end == "SIGINT" else 0)
        assert gone(daemon)
        if shared_network:
            assert _listening({port}) == set()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if daemon and not gone(daemon):
            os.kill(daemon, signal.SIGKILL)


def test_save_log_files_that_cannot_be_written_are_usage_errors_and_nothing_runs(tmp_path: Path) -> None:
    script = tmp_path / "never.py"
    script.write_text("open('ran', 'w').close()\n")
    (tmp_path / "logs" / "worker-0.out").mkdir(parents=True)
    (tmp_path / "logs" / "worker-0.log").write_text("kept")
    done = subprocess.run([*TRACE, "--cluster", "worker=1", "--force", "--save-log", str(tmp_path / "logs"),
                           str(script)], cwd=tmp_path, env=environment(tmp_path), capture_output=True, timeout=patience(60),
                          check=False)
    assert done.returncode == 2, done.stderr.decode()
    assert f"--save-log {tmp_path / 'logs' / 'worker-0.out'}: is a directory" in done.stderr.decode()
    assert not (tmp_path / "ran").exists()
    assert (tmp_path / "logs" / "worker-0.log").read_text() == "kept"  # refused before anything was replaced


def test_a_cluster_spec_port_another_program_listens_on_is_refused(tmp_path: Path) -> None:
    import socket

    script = tmp_path / "never.py"
    script.write_text("open('ran', 'w').close()\n")
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        (tmp_path / "spec.json").write_text(json.dumps({"worker": [f"localhost:{port}"]}))
        done = subprocess.run([*TRACE, "--cluster-spec", "spec.json", "--save-log", "logs", str(script)], cwd=tmp_path,
                              env=environment(tmp_path, PLACEMENT_CLUSTER_NO_NAMESPACE="1"), capture_output=True,
                              timeout=patience(60), check=False)
    assert done.returncode == 2, done.stderr.decode()
    assert f"spec.json: port {port} is in use" in done.stderr.decode()
    assert not (tmp_path / "ran").exists()
    assert not (tmp_path / "logs").exists()  # the folder made for the logs goes again, empty


def test_only_devices_of_one_task_are_said_to_share_one_memory() -> None:
    from rich.console import Console

    from placement_cli.model import Copy, Report
    from placement_cli.render.training import copies_renderables
    from placement_cli.render.view import View

    def cpu(task: int, index: int) -> str:
        return f"/job:worker/replica:0/task:{task}/device:CPU:{index}"

    copies = (Copy("a", cpu(0, 0), cpu(0, 1), "float32", (1,), 4, physical=False),
              Copy("b", cpu(1, 0), cpu(1, 1), "float32", (1,), 4, physical=False),
              Copy("c", cpu(0, 0), cpu(1, 0), "float32", (1,), 4, physical=True))
    console = Console(width=400, record=True, color_system=None)
    for part in copies_renderables(Report(copies=copies), View()):
        console.print(part)
    notes = [line for line in console.export_text().splitlines() if "sharing one memory" in line]
    assert [note.split(" are ")[0] for note in notes] == ["worker/0 CPU:0, worker/0 CPU:1",
                                                          "worker/1 CPU:0, worker/1 CPU:1"], notes


# MultiWorkerMirroredStrategy with a chief: every task trains to the end. The worker then works on
# after the chief has exited (it waits until the chief's process is gone, whatever the machine's
# speed) and writes its result; with --stuck it never ends instead.
CHIEF_AND_WORKER = """
import json, os, sys, threading, time
task = json.loads(os.environ["TF_CONFIG"])["task"]
out = sys.argv[1]
import tensorflow as tf
strategy = tf.distribute.MultiWorkerMirroredStrategy()
with strategy.scope():
    w = tf.Variable(tf.ones([4, 2]), name="w")

@tf.function
def train_step():
    def step():
        loss = tf.reduce_sum(tf.matmul(tf.ones([2, 4]), w))
        w.assign_sub(0.01 * tf.ones([4, 2]))
        return loss
    return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(step), axis=None)

for _ in range(3):
    loss = float(train_step())
print(task["type"], "trained", loss, flush=True)
if task["type"] == "chief":
    with open(os.path.join(out, "chief.tmp"), "w") as f:
        f.write(str(os.getpid()))
    os.rename(os.path.join(out, "chief.tmp"), os.path.join(out, "chief.pid"))
    sys.exit(0)
while not os.path.exists(os.path.join(out, "chief.pid")):
    time.sleep(0.05)
chief = int(open(os.path.join(out, "chief.pid")).read())
def alive(pid):
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
while alive(chief):
    time.sleep(0.05)
if "--stuck" in sys.argv:
    print("worker stuck", flush=True)
    threading.Event().wait()
with open(os.path.join(out, "worker.result"), "w") as f:
    f.write(f"{loss}\\n")
print("worker wrote its result", flush=True)
"""


@pytest.mark.parametrize("stuck", [False, True])
def test_a_worker_still_at_work_when_the_chief_exits_is_never_cut_off(tmp_path: Path, stuck: bool) -> None:
    """Under MultiWorkerMirroredStrategy a worker is no server blocked in join: placement lets it finish
    (its result file is written, exit 0); one that never ends is ended after --chief-grace, named, and
    the run fails (exit 1), never 0."""
    script = tmp_path / "chief_and_worker.py"
    script.write_text(CHIEF_AND_WORKER)
    results = tmp_path / "results"
    results.mkdir()
    done, _ = _run(tmp_path, "--json", "--cluster", "chief=1,worker=1", "--chief-grace", "3" if stuck else "60",
                   str(script), str(results), *(["--stuck"] if stuck else []))
    err = done.stderr.decode()
    doc = json.loads(done.stdout)
    tasks = {f"{t['job']}/{t['task']}": t for t in doc["tasks"]}
    assert tasks["chief/0"]["exit_code"] == 0 and not tasks["chief/0"]["ended_by_placement"]
    if not stuck:
        assert done.returncode == 0, err[-3000:]
        assert (results / "worker.result").exists(), err[-3000:]
        assert "worker/0 | worker wrote its result" in err
        assert tasks["worker/0"]["exit_code"] == 0 and not tasks["worker/0"]["ended_by_placement"]
        assert doc["exit_code"] == 0 and doc["error"] is None
    else:
        assert "worker/0 | worker stuck" in err, err[-3000:]
        assert done.returncode == 1 and doc["exit_code"] == 1
        assert tasks["worker/0"]["ended_by_placement"] and not (results / "worker.result").exists()
        assert re.search(r"worker/0 \(pid \d+\) was still running 3 s after chief/0 finished, neither serving "
                         r"\(Server.join\) nor done", doc["error"]), doc["error"]
    assert _leftovers(str(script)) == []


SEES = """
import json, os, pathlib, time
config = json.loads(os.environ["TF_CONFIG"])
task = config["task"]
print("sees", repr(os.environ.get("CUDA_VISIBLE_DEVICES")), flush=True)
said = pathlib.Path("said")
said.mkdir(exist_ok=True)
(said / f"{task['type']}-{task['index']}").touch()
if task["type"] == "ps":
    time.sleep(600)
elif task["type"] == "chief":  # the chief ends last of those that print: placement then ends the ps
    everyone = sum(len(addresses) for addresses in config["cluster"].values())
    while len(list(said.iterdir())) < everyone:
        time.sleep(0.05)
"""


@pytest.mark.parametrize("split", [False, True])
def test_split_gpus_gives_each_task_its_own_and_otherwise_tasks_see_yours(tmp_path: Path, split: bool) -> None:
    script = tmp_path / "sees.py"
    script.write_text(SEES)
    args = ["--split-gpus"] if split else []
    done = subprocess.run([*TRACE, "--json", "--cluster", "chief=1,worker=2,ps=1", *args, str(script)], cwd=tmp_path,
                          env=environment(tmp_path, CUDA_VISIBLE_DEVICES="2,3"), capture_output=True, timeout=patience(120),
                          check=False)
    err = done.stderr.decode()
    assert done.returncode == 0, err
    tasks = {f"{t['job']}/{t['task']}": t["cuda_visible_devices"] for t in json.loads(done.stdout)["tasks"]}
    # your CUDA_VISIBLE_DEVICES is the list shared out: chief 2, workers 3 and 2 (round-robin), ps none
    expected = {"chief/0": "2", "worker/0": "3", "worker/1": "2", "ps/0": ""} if split else dict.fromkeys(tasks, "2,3")
    assert tasks == expected
    for name, value in expected.items():  # what each task's own process saw
        assert re.search(rf"^{re.escape(name)}\s*\| sees {re.escape(repr(value))}$", err, re.MULTILINE), err
    if split:
        assert "--split-gpus: 3 tasks and 2 GPUs: one GPU each, round-robin" in err


def test_gpu_list_is_the_list_given_and_split_gpus_needs_a_cluster(tmp_path: Path) -> None:
    script = tmp_path / "sees.py"
    script.write_text(SEES)
    done = subprocess.run([*TRACE, "--cluster", "worker=2", "--gpu-list", "5,6", str(script)], cwd=tmp_path,
                          env=environment(tmp_path), capture_output=True, timeout=patience(120), check=False)
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode()
    assert "worker/0 | sees '5'" in out and "worker/1 | sees '6'" in out
    assert "CUDA_VISIBLE_DEVICES" in out[out.index("Tasks ("):]  # the tasks table's column
    alone = subprocess.run([*TRACE, "--split-gpus", str(script)], cwd=tmp_path, env=environment(tmp_path),
                           capture_output=True, timeout=60, check=False)
    assert alone.returncode == 2 and "--split-gpus gives each task of a cluster its GPUs" in alone.stderr.decode()


@pytest.mark.parametrize(("args", "said"), [
    (["--chief-grace", "5"], "--chief-grace is how long the tasks of a cluster may run on after the chief"),
    (["--cluster", "worker=2", "--gpu-list", "0,0"], "GPU 0 given twice"),
    (["--cluster", "worker=2", "--gpu-list", "0,,1"], "an empty item in the list"),
    (["--cluster", "worker=2", "--gpu-list", "0,1,"], "an empty item in the list"),
])
def test_cluster_options_are_refused_where_they_would_do_nothing_or_wrong(tmp_path: Path, args: list[str],
                                                                          said: str) -> None:
    """--chief-grace without --cluster was ignored unseen (as --split-gpus is refused); a --gpu-list with a GPU
    twice gave two tasks one GPU unsaid, one with an empty item dropped the GPUs after it: exit 2, before any run."""
    from typer.testing import CliRunner

    from placement_cli.cli import app

    script = tmp_path / "never.py"
    script.write_text("raise SystemExit('ran')\n")
    result = CliRunner().invoke(app, ["trace", *args, str(script)])
    assert result.exit_code == 2 and said in " ".join(result.stderr.split()), result.stderr


def test_split_gpus_says_one_gpu_in_the_singular() -> None:
    from placement_cli.runtime.gpu_policy import split_for_tasks as _split

    visible, notes = _split([("worker", 2)], "0")
    assert visible == {"worker/0": "0", "worker/1": "0"}
    assert notes == ["--split-gpus: 2 tasks and 1 GPU: they all share it (worker/0=0, worker/1=0)"]


def test_the_control_pipe_says_when_a_task_serves() -> None:
    """``J`` (the script called Server.join) is a frame of its own: the frames after it are read too."""
    from placement_cli.runtime.trace.child import frames

    buf = bytearray(b"J\nL2\nE3\nabcJ\n")
    assert list(frames(buf)) == [(b"J", b""), (b"L", b"2"), (b"E", b"abc"), (b"J", b"")] and not buf


AFTER_THE_CHIEF = """
import json, os, sys, time
task = json.loads(os.environ["TF_CONFIG"])["task"]
if task["type"] == "chief":
    open("chief.pid.tmp", "w").write(str(os.getpid()))
    os.rename("chief.pid.tmp", "chief.pid")
    sys.exit(0)
while not os.path.exists("chief.pid"):
    time.sleep(0.05)
pid = int(open("chief.pid").read())
def alive():
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
while alive():
    time.sleep(0.05)
print("the chief is gone; failing", flush=True)
sys.exit(5)
"""


def test_a_worker_that_fails_after_the_chief_exited_0_fails_the_run(tmp_path: Path) -> None:
    """The chief's 0 is not the run's when a worker failed after it: its own code is."""
    done, script = _cheap(tmp_path, "after.py", AFTER_THE_CHIEF, "--cluster", "chief=1,worker=1")
    err = done.stderr.decode()
    assert "worker/0 | the chief is gone; failing" in done.stdout.decode(), err
    assert done.returncode == 5, err
    assert re.search(r"^placement: worker/0 \(pid \d+\) exited with code 5", err, re.MULTILINE), err
    assert _leftovers(str(script)) == []


EAGER_SLEEPER = """
import time
import tensorflow as tf
with tf.device("/CPU:0"):
    x = tf.abs(tf.constant([-1.0, 2.0]))
    y = tf.reduce_sum(x * x)
print("ready", float(y), flush=True)
time.sleep(600)
"""


def test_ctrl_c_still_reports_what_every_task_placed_until_then(tmp_path: Path) -> None:
    """Ctrl-C on a cluster that hangs (a worker that left before the others connected, a task stuck in
    a collective) is how a user ends it: the placements of each task until then are reported, as
    `trace` reports a script that was interrupted, and the run exits 130."""
    script = tmp_path / "eager_sleeper.py"
    script.write_text(EAGER_SLEEPER)
    env = environment(tmp_path)
    proc = subprocess.Popen([*TRACE, "--cluster", "worker=1", "--json", "--save-log", str(tmp_path / "logs"),
                             str(script)], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    try:  # --json: the task's stdout on stderr
        seen = _read_until(proc.stderr, lambda seen: b"| ready 5.0\n" in seen)
        assert b"worker/0 | ready 5.0\n" in seen, seen.decode()[-2000:]
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=patience(60))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = (seen + err).decode()
    assert proc.returncode == 130, err
    assert "placement: interrupted" in err
    document = json.loads(out)
    assert document["exit_code"] == 130 and document["error"] is None
    log = (tmp_path / "logs" / "worker-0.log").read_text()
    executed = re.findall(r"Executing op (\w+) in device (\S+)", log)
    assert executed and len(document["placements"]) == len(executed) + len(
        re.findall(r"^\S+: \(\w+\): /job:\S+$", log, re.MULTILINE))
    assert {(p["op"], p["job"], p["task"]) for p in document["placements"] if p["op"] == "Abs"} == {("Abs", "worker", 0)}
    assert _leftovers(str(script)) == []
    assert list(Path(env["TMPDIR"]).iterdir()) == []
