"""The supervisor of a ``placement cluster`` run: one process per task, watched until the end.

The lesson's entry module (``python -m placement_cli.lessons.cluster_tasks``) calls ``main`` with the
work each training task runs: the supervisor builds no graph. It reads its request (JSON) on stdin and
writes JSON lines on stdout: progress events (``{"event": "ready", ...}``) while the tasks start, then one
``{"event": "result", ...}``. The CLI (no TensorFlow) starts it in a new session and kills its group at the end.

Measured on TF 2.21 (``notes/distributed.md``), and what this module does about it:

- Servers cannot be stopped and listen on every interface, unauthenticated. The supervisor first
  moves into a fresh user + network namespace (where the kernel allows it) with only ``lo`` up, so
  nothing outside this machine can reach them; tasks are killed at the end (a port is freed only
  when its process exits).
- TensorFlow's import dominates start-up: tasks fork from a forkserver with ``tensorflow``
  preloaded (spawn as a fallback).
- Every session has an operation timeout, workers filter devices to the ps and themselves, and
  ``GRPC_FAIL_FAST=true`` turns a dead peer into an error within a second instead of ~30 s.
- Workers start training only when every task said it is ready; the chief first (it initialises
  the variables; a non-chief that waits for them would sleep 30 s).
- Each task logs to its own files (stderr: glog, unbuffered, where the placements are read from).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import multiprocessing
import os
import shutil
import signal
import socket
import struct
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from placement_cli.i18n import N_, Message, wire
from placement_cli.logparse.causes import cause_line, node_named, port_taken
from placement_cli.model import GpuMemory
from placement_cli.runtime import gpu_policy
from placement_cli.runtime.cluster.watch import AFTER, BEFORE, TRAINING, Watch, read_text

READY_LIMIT = 150.0  # seconds for every task to import TensorFlow and start its server (loaded 2-core machine)
TRAIN_LIMIT = 300.0  # seconds for the training itself
BEAT = 1.0  # seconds between a task's heartbeats (each carries its steps so far)


# ---------------------------------------------------------------- isolation


def isolate() -> tuple[bool, str]:
    """Move into a fresh user + network namespace with ``lo`` up. (True, "") or (False, why not).
    Must run while the process is single-threaded."""
    if os.environ.get("PLACEMENT_CLUSTER_NO_NAMESPACE") == "1":
        return False, "PLACEMENT_CLUSTER_NO_NAMESPACE=1"
    if not sys.platform.startswith("linux"):
        return False, "network namespaces are Linux-only"

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        uid, gid = os.getuid(), os.getgid()
        if libc.unshare(0x10000000 | 0x40000000) != 0:  # CLONE_NEWUSER | CLONE_NEWNET
            return False, f"unshare: {os.strerror(ctypes.get_errno())}"
        with open("/proc/self/setgroups", "w") as f:
            f.write("deny")
        with open("/proc/self/uid_map", "w") as f:
            f.write(f"{uid} {uid} 1")
        with open("/proc/self/gid_map", "w") as f:
            f.write(f"{gid} {gid} 1")
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            request = struct.pack("16sh", b"lo", 0)
            flags = struct.unpack("16sh", fcntl.ioctl(s, 0x8913, request))[1]  # SIOCGIFFLAGS
            fcntl.ioctl(s, 0x8914, struct.pack("16sh", b"lo", flags | 1))  # SIOCSIFFLAGS: IFF_UP
    except OSError as exc:
        return False, f"network namespace: {exc.strerror or exc}"
    return True, ""


def free_ports(count: int) -> list[socket.socket]:
    """``count`` ports free on the dual-stack wildcard, held (SO_REUSEPORT) until the servers have them."""
    held = []
    for _ in range(count):
        s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        s.bind(("::", 0))
        held.append(s)
    return held


# ---------------------------------------------------------------- a task (runs in its own process)


class Trainer:
    """What a training task's work (a lesson's) gets from the supervisor: its place in the cluster, its
    server, and the two things it says back."""

    def __init__(self, job: str, index: int, spec: Any, server: Any, request: dict[str, Any], messages: Any,
                 go: list[Any]) -> None:
        self.job, self.index, self.spec, self.server, self.request = job, index, spec, server, request
        self.messages, self.go = messages, go

    def session_ready(self) -> None:
        """This worker's session is up: say so, and wait until every worker's is (all start together)."""
        self.messages.put({"kind": "session", "task": f"{self.job}/{self.index}"})
        self.go[-1].wait()

    @staticmethod
    def stepped(steps: int) -> None:
        """How many steps it has run so far (said with every heartbeat)."""
        _progress["steps"] = steps


Work = Callable[[Any, Trainer], dict[str, Any]]  # (tensorflow, the task) -> its result, as JSON data


def _task_main(job: str, index: int, cluster: dict[str, list[str]], request: dict[str, Any], logdir: str,
               messages: Any, go: Any, work: Work) -> None:
    """One task: its server, then (workers, TF2's chief) the lesson's ``work``. Everything it says goes
    on ``messages``."""
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: die with the process that forked it
    name = f"{job}/{index}"
    for fd, stream in ((1, "out"), (2, "err")):
        target = os.open(os.path.join(logdir, f"{job}-{index}.{stream}"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(target, fd)
        os.close(target)
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
    try:
        import tensorflow as tf  # noqa: PLC0415 - preloaded by the forkserver

        tf2 = request.get("api") == "tf2"
        if not tf2:
            tf.compat.v1.disable_eager_execution()
        spec = tf.train.ClusterSpec(cluster)
        filters = ["/job:ps", f"/job:worker/task:{index}"] if job == "worker" and not tf2 else []
        config = tf.compat.v1.ConfigProto(operation_timeout_in_ms=request["operation_timeout_ms"],
                                          device_filters=filters)
        if job == "worker" and request.get("worker_inter_op_threads"):  # TF2: see lessons.cluster.worker_threads
            config.inter_op_parallelism_threads = request["worker_inter_op_threads"]
        gpu = _gpu_policy(job, request, config)  # before any device is made: the server makes its own
        started = time.monotonic()
        server = None
        if job != "chief":  # the coordinator's server is started by ParameterServerStrategy itself
            server = tf.distribute.Server(spec, job_name=job, task_index=index, config=config, start=True)
        messages.put({"kind": "ready", "task": name, "pid": os.getpid(),
                      "seconds": round(time.monotonic() - started, 3), **gpu})
        _heartbeat(name, messages)
        if job == "ps" or (tf2 and job == "worker"):
            assert server is not None
            while True:  # the server serves from its own threads; this one sleeps (GIL free) until killed
                time.sleep(3600)
        go[0 if job == "chief" else index].wait()
        result = work(tf, Trainer(job, index, spec, server, request, messages, go))
        result["private_kib"] = _private_kib(os.getpid())  # it exits next: measured here, at its largest
        messages.put({"kind": "result", "task": name, **result})
    except BaseException as exc:  # noqa: BLE001 - said to the supervisor, which names the task

        traceback.print_exc()
        messages.put({"kind": "error", "task": name, "error": f"{type(exc).__name__}: {said(exc)}"})
    sys.stdout.flush()
    sys.stderr.flush()
    # hand every message over before exiting: the heartbeats stop, then the queue's feeder thread
    # writes what is left (an exit in the middle of its write would leave the queue's lock held)
    _progress["stopped"] = 1
    with _beating:
        messages.close()
    messages.join_thread()
    os._exit(0)  # TensorFlow's threads may be blocked in C++: do not wait for them


def _gpu_policy(job: str, request: dict[str, Any], config: Any) -> dict[str, Any]:
    """The request's GPU memory policy, applied to this task: its environment (read by TensorFlow when
    it makes the GPU device, after this) and its server's ConfigProto. What the task then has is
    said back, read from the ConfigProto itself."""
    from google.protobuf.json_format import MessageToDict  # noqa: PLC0415 - TensorFlow's own dependency

    memory = GpuMemory.from_dict(request.get("gpu_memory"))
    if memory is not None:
        os.environ.update(gpu_policy.task_environment(memory, job))
        gpu_policy.apply(config, gpu_policy.gpu_options(memory, job))
    options = MessageToDict(config.gpu_options, preserving_proto_field_name=True)
    if "GPU" in config.device_count:
        options["device_count"] = {"GPU": config.device_count["GPU"]}
    return {"cuda_visible_devices": os.environ.get(gpu_policy.VISIBLE), "gpu_options": options,
            "tf_force_gpu_allow_growth": os.environ.get(gpu_policy.ALLOW_GROWTH)}


_progress = {"steps": 0, "stopped": 0}  # this task's steps so far, said with every heartbeat
_beating = threading.Lock()  # held while a heartbeat is put: the queue is closed only between two


def _heartbeat(name: str, messages: Any) -> None:
    """A thread saying every BEAT seconds that this task is alive, with its steps so far: the
    supervisor names a task that stops saying it (stopped, frozen, stuck with the GIL held)."""

    def beat() -> None:
        while True:
            with _beating:
                if _progress["stopped"]:
                    return
                messages.put({"kind": "alive", "task": name, "steps": _progress["steps"]})
            time.sleep(BEAT)

    threading.Thread(target=beat, name="placement-heartbeat", daemon=True).start()


def said(exc: BaseException) -> str:
    """What an error says, in one line: TensorFlow's cause line (logparse.causes.cause_line), not the
    ``Graph execution error:`` / ``Detected at node ...`` header and traceback graph errors begin with,
    and the node it names (``Node: '...'``)."""
    text = (getattr(exc, "message", None) or str(exc)).strip()
    line = cause_line(text)
    node = node_named(text)
    return f"{line} ({node})" if node and node.strip("'") not in line else line


# ---------------------------------------------------------------- the supervisor


def _private_kib(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            total = 0
            for line in f:
                if line.startswith(("Private_Clean:", "Private_Dirty:")):
                    total += int(line.split()[1])
            return total
    except (OSError, ValueError):
        return None


_GPU_SAID = ("cuda_visible_devices", "gpu_options", "tf_force_gpu_allow_growth")  # what a ready task said of its GPU
def supervise(request: dict[str, Any], emit: Any, work: Work) -> dict[str, Any]:
    """Start the cluster, train, collect; always kills every task it started before returning. A port
    placement chose that another process took in between (logparse.causes.port_taken) is retried once."""

    parent = int(os.environ.get("PLACEMENT_CLUSTER_PARENT", "0")) or os.getppid()
    isolated, why = isolate()
    _end_with_parent(parent)  # a thread: only now, as unshare() needs a process of one thread
    emit({"event": "isolation", "isolated": isolated, "why": why})
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0"
    os.environ["GRPC_FAIL_FAST"] = "true"
    ctx: multiprocessing.context.BaseContext
    try:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["tensorflow", __name__, *_module_of(work)])
        start_method = "forkserver"
    except ValueError:
        ctx = multiprocessing.get_context("spawn")
        start_method = "spawn"
    for attempt in range(2):
        answer = _attempt(dict(request), emit, ctx, work)
        ours = not request.get("cluster")
        if not (ours and attempt == 0 and answer["error"] and answer.get("port_taken")):
            break
        emit({"event": "retry", "why": str(answer["error"])})  # English: the CLI's line says it as is
    answer.update(isolated=isolated, isolation_note=why, start_method=start_method)
    return answer


def _module_of(work: Work) -> list[str]:
    """The module that defines ``work`` by its importable name (the entry module runs as __main__)."""
    spec = getattr(sys.modules.get(work.__module__), "__spec__", None)
    return [spec.name] if spec is not None and spec.name != "__main__" else []


def _attempt(request: dict[str, Any], emit: Any, ctx: Any, work: Work) -> dict[str, Any]:
    """One launch of the cluster, from choosing its ports to killing its last task."""
    logdir = tempfile.mkdtemp(prefix="placement-cluster-")
    held: list[socket.socket] = []
    if request.get("cluster"):
        cluster = dict(request["cluster"])
    else:
        held = free_ports(request["ps"] + request["workers"])
        os.environ["TF_GRPC_REUSE_PORT"] = "1"
        ports = [s.getsockname()[1] for s in held]
        cluster = {"ps": [f"localhost:{p}" for p in ports[: request["ps"]]],
                   "worker": [f"localhost:{p}" for p in ports[request["ps"]:]]}
    request["ps"], request["workers"] = len(cluster["ps"]), len(cluster["worker"])
    messages = ctx.Queue()
    go = [ctx.Event() for _ in cluster["worker"]] + [ctx.Event()]  # one per worker, then: all sessions up
    if request.get("api") == "tf2":  # the coordinator joins as /job:chief (its own port)
        if held:
            chief = free_ports(1)
            held += chief
            cluster["chief"] = [f"localhost:{chief[0].getsockname()[1]}"]
        elif "chief" not in cluster:
            raise SystemExit("a tf2 cluster needs a chief address")
    tasks = [(job, i) for job in ("ps", "worker", "chief") for i in range(len(cluster.get(job, ())))]
    processes: dict[str, Any] = {}
    info: dict[str, dict[str, Any]] = {}
    results: dict[str, dict[str, Any]] = {}
    memory: dict[str, int | None] = {}
    error: Message | None = None
    ended: set[str] = set()  # tasks placement killed at the end (a server never stops on its own)
    watch = Watch(processes, messages, logdir)
    launched = time.monotonic()
    try:
        for job, i in tasks:
            name = f"{job}/{i}"
            p = ctx.Process(target=_task_main, args=(job, i, cluster, request, logdir, messages, go, work),
                            name=f"placement-{name}", daemon=True)
            p.start()
            processes[name] = p
            info[name] = {"job": job, "task": i, "target": f"grpc://{cluster[job][i]}", "pid": p.pid,
                          "exit_code": None}
            emit({"event": "started", "task": name, "pid": p.pid, "address": cluster[job][i]})

        ready: set[str] = set()
        deadline = time.monotonic() + READY_LIMIT
        while len(ready) < len(tasks) and error is None:
            message = watch.next()
            if message is not None:
                if message["kind"] == "ready":
                    ready.add(message["task"])
                    info[message["task"]].update({key: message.get(key) for key in _GPU_SAID})
                    job, _, i = message["task"].partition("/")
                    emit({"event": "ready", "task": message["task"], "address": cluster[job][int(i)],
                          "pid": message["pid"], "seconds": round(time.monotonic() - launched, 2)})
                elif message["kind"] == "error":
                    job, _, i = message["task"].partition("/")
                    hint = Message(N_(" (is the port taken?)")) if port_taken(message["error"]) else ""
                    error = Message(N_("{task} (pid {pid}) failed before it was ready, at {address}: {error}{hint}"),
                               task=message["task"], pid=processes[message["task"]].pid,
                               address=cluster[job][int(i)], error=watch.caused(message["task"], message["error"]),
                               hint=hint)
            error = error or watch.lost(set(processes) - ready, BEFORE) or watch.lost(ready, AFTER)
            if error is None and time.monotonic() > deadline:
                error = Message(N_("{tasks} did not start within {limit:g} s"),
                           tasks=", ".join(sorted(set(processes) - ready)), limit=READY_LIMIT)
        for s in held:
            s.close()
        if error is None:
            trainers = ["chief/0"] if request.get("api") == "tf2" else [n for n in processes if n.startswith("worker/")]
            error = _train_all(watch, trainers, go, results, emit)
        for name, p in processes.items():
            memory[name] = _private_kib(p.pid) if p.exitcode is None else None
        if error is None:  # finished workers end on their own: give them a moment to say their exit code
            end = time.monotonic() + 2.0
            for name, p in processes.items():
                if name.startswith(("worker/", "chief/")) and (name in results or request.get("api") != "tf2"):
                    p.join(max(0.0, end - time.monotonic()))
    finally:
        for s in held:
            s.close()
        for name, p in processes.items():
            if p.exitcode is None:
                ended.add(name)
                with contextlib.suppress(OSError):
                    os.kill(p.pid, signal.SIGKILL)
        for p in processes.values():
            p.join(5)
        logs = {name: read_text(os.path.join(logdir, name.replace("/", "-") + ".err")) for name in processes}
        outs = {name: read_text(os.path.join(logdir, name.replace("/", "-") + ".out")) for name in processes}
        shutil.rmtree(logdir, ignore_errors=True)
    for name, p in processes.items():
        info[name]["exit_code"] = p.exitcode
        info[name]["private_kib"] = memory.get(name) or (results.get(name) or {}).get("private_kib")
        info[name]["ended_by_placement"] = name in ended
        trains = name.startswith("worker/") and request.get("api") != "tf2"  # TF2's workers run what the chief sends
        info[name]["steps_reported"] = watch.steps.get(name) if trains else None
    return {"event": "result", "cluster": cluster, "tasks": list(info.values()), "results": results, "logs": logs,
            "outs": outs, "error": error, "cause": watch.cause, "port_taken": watch.port_taken,
            "seconds": round(time.monotonic() - launched, 2)}


def _train_all(watch: Watch, workers: list[str], go: list[Any], results: dict[str, dict[str, Any]],
               emit: Any) -> Message | None:
    """Release the chief, then (once its session is up) the other workers; wait for every result
    (``workers``: the tasks that train and report: TF1's workers, TF2's coordinator). A task that
    dies, is stopped or falls silent ends the run at once, named."""
    processes = watch.processes
    go[0].set()
    released = False
    sessions: set[str] = set()
    deadline = time.monotonic() + TRAIN_LIMIT

    def blamed(message: dict[str, Any]) -> Message:
        """A worker's error: a peer that died or stopped is the cause, so it is named rather than the worker."""
        end = time.monotonic() + 0.5
        while time.monotonic() < end:
            cause = watch.lost(set(processes) - set(results) - {message["task"]}, TRAINING, failed_only=True)
            if cause:
                return cause
            time.sleep(0.1)
        return Message(N_("{task} stopped training: {error}"), task=message["task"],
                  error=watch.caused(message["task"], message["error"]))

    while len(results) < len(workers):
        message = watch.next()
        if message is not None:
            if message["kind"] == "session":
                sessions.add(message["task"])
                emit({"event": "session", "task": message["task"]})
                if message["task"] == "worker/0" and not released:  # the chief initialised the variables
                    for event in go[1:-1]:
                        event.set()
                    released = True
                if len(sessions) == len(workers):
                    go[-1].set()
            elif message["kind"] == "result":
                results[message["task"]] = message
            elif message["kind"] == "error":
                return blamed(message)
        failure = watch.lost(set(processes) - set(results), TRAINING)
        if failure:  # a result may still be on its way: drain the queue first
            end = time.monotonic() + 1.0
            while time.monotonic() < end:
                message = watch.next()
                if message is None:
                    continue
                if message["kind"] == "result":
                    results[message["task"]] = message
                elif message["kind"] == "error":
                    return blamed(message)
            failure = watch.lost(set(processes) - set(results), TRAINING)
            if failure:
                return failure
        if time.monotonic() > deadline:
            return Message(N_("training did not finish within {limit:g} s"), limit=TRAIN_LIMIT)
    return None


def _end_with_parent(parent: int) -> None:
    """The CLI may die without ending the cluster (SIGKILL, SIGQUIT, a crash): then this supervisor
    removes the cluster's private temporary folder and kills its whole process group (forkserver and
    tasks with it), within half a second."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.3)
        private = os.environ.get("TMPDIR", "")
        if os.path.basename(private).startswith("placement-cluster-"):  # the CLI's folder for this cluster
            shutil.rmtree(private, ignore_errors=True)
        os.killpg(os.getpgid(0), signal.SIGKILL)

    threading.Thread(target=watch, name="placement-parent-watch", daemon=True).start()


def main(work: Work) -> None:
    """The supervisor's process: the request on stdin, JSON lines on stdout; ``work`` is what each
    training task runs (the lesson's graphs)."""
    request = json.loads(sys.stdin.read())
    out = os.fdopen(os.dup(1), "w")  # the CLI's channel; fd 1 and 2 go to a file TensorFlow's chatter may fill
    log = os.open(os.devnull, os.O_WRONLY)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)

    def emit(data: dict[str, Any]) -> None:
        out.write(json.dumps(wire(data)) + "\n")
        out.flush()

    try:
        emit(supervise(request, emit, work))
    except BaseException as exc:  # noqa: BLE001 - the CLI shows it as an internal error
        emit({"event": "crash", "error": f"{type(exc).__name__}: {exc}"})
    out.flush()
    os._exit(0)
