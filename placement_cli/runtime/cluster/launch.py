"""`placement cluster`, the CLI's side: start the supervisor, show its progress, make its answer a ClusterRun.

No TensorFlow here. The supervisor (``cluster_supervisor``, started through the module a lesson names:
runtime runs no lesson of its own) runs in a new session, so that killing its
process group ends it, its forkserver and every task at once; that happens on every exit path
(the answer read, an error, Ctrl-C, SIGTERM, SIGHUP).
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

from placement_cli.clusterspec import Cluster
from placement_cli.exceptions import Terminated, UsageProblem
from placement_cli.i18n import N_, Message
from placement_cli.model import Cause, ClusterEvent, ClusterRun, ClusterTask, Copy, GpuMemory, TaskTraining

OVERALL_LIMIT = 600.0  # seconds the supervisor may take in all before it is killed


def message(data: Any) -> Message | str:
    """A message the supervisor sent (``Message.to_dict``) as an i18n.Message; its own crash's text as it is."""
    return Message.from_dict(data) if isinstance(data, dict) else data if isinstance(data, Message) else str(data)


def task_of(data: dict[str, Any]) -> ClusterTask:
    """A task as the supervisor described it."""
    fields: dict[str, Any] = {name: data.get(name) for name in ClusterTask.__dataclass_fields__ if name in data}
    return ClusterTask(**fields)


def training_of(data: dict[str, Any]) -> TaskTraining:
    """A training task's result as the supervisor passed it on."""
    copies = tuple(Copy(**{**c, "shape": None if c.get("shape") is None else tuple(c["shape"])})
                   for c in data.get("copies") or ())
    profile = None
    if isinstance(data.get("profile"), dict):  # --time: the worker's measured steps
        from placement_cli.model.cost import Profile  # noqa: PLC0415 - start-up: only a timed run needs it

        profile = Profile.from_dict(data["profile"])
    return TaskTraining(losses=tuple(data.get("losses") or ()), global_steps=tuple(data.get("global_steps") or ()),
                        variables=tuple((data.get("variables") or {}).items()), copies=copies,
                        edges=tuple((source, target, bool(control)) for source, target, control in data.get("edges") or ()),
                        profile=profile,
                        timing_error=data.get("timing_error"))


def check_cluster(cluster: Cluster) -> dict[str, list[str]]:
    """A described cluster that this command can run: jobs ps and worker only, every address local."""
    jobs = set(cluster.jobs)
    if jobs != {"ps", "worker"}:
        raise UsageProblem(f"{cluster.source}: placement cluster runs jobs ps and worker only "
                           f"(given: {', '.join(sorted(jobs))})")
    for task in cluster.tasks:
        if not loopback(task.host):
            raise UsageProblem(f"{cluster.source}: {task.name} is at {task.address}: every task runs on this "
                               "machine, so give localhost, 127.x.x.x or [::1] addresses")
    for job, low, high in (("ps", 1, 4), ("worker", 1, 8)):
        n = cluster.count(job)
        if not low <= n <= high:
            raise UsageProblem(f"{cluster.source}: {n} {job} tasks: placement cluster runs {low} to {high}")
        if [t.index for t in cluster.jobs[job]] != list(range(n)):
            raise UsageProblem(f"{cluster.source}: job {job}'s tasks must be numbered 0 to {n - 1}")
    return {job: [t.address for t in cluster.jobs[job]] for job in ("ps", "worker")}


def loopback(host: str) -> bool:
    """A host every task reaches inside the cluster's private namespace, where only ``lo`` is up and
    no name server answers: ``localhost`` or a loopback address (127.999.0.1 or another name would
    leave a worker waiting for a ps it can never reach)."""

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _private_folder() -> str:
    """A new folder for the cluster's temporary files. The forkserver's Unix socket lives in it and a
    socket's path has at most 107 bytes: under a long $TMPDIR it is made in /tmp instead."""
    private = tempfile.mkdtemp(prefix="placement-cluster-")
    if len(os.fsencode(private)) <= 48 or not os.access("/tmp", os.W_OK | os.X_OK):  # noqa: S108 - see above
        return private
    os.rmdir(private)
    return tempfile.mkdtemp(prefix="placement-cluster-", dir="/tmp")


def run(request: dict[str, Any], progress: Callable[[ClusterEvent], None], entry: str) -> ClusterRun:
    """Start the supervisor (``python -m entry``: the module that hands it the tasks' work) with
    ``request``, hand each progress event to ``progress``, return its answer.
    The supervisor's process group is killed whatever happens; SIGTERM and SIGHUP become
    KeyboardInterrupt-like exits through ``Terminated``."""
    # every temporary file of the cluster (its tasks' logs, TensorFlow's autograph files) goes in one
    # folder, removed here whatever happened: killed tasks run no cleanup of their own
    private = _private_folder()
    try:
        child = subprocess.Popen([sys.executable, "-P", "-m", entry],  # noqa: S603 - our interpreter, our module
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                 start_new_session=True,
                                 env={**os.environ, "TMPDIR": private, "PLACEMENT_CLUSTER_PARENT": str(os.getpid())})
    except BaseException:
        shutil.rmtree(private, ignore_errors=True)
        raise
    previous = {}

    def terminate(signum: int, _frame: Any) -> None:
        raise Terminated(signum)

    for signum in (signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(ValueError, OSError):  # not the main thread: leave them be
            previous[signum] = signal.signal(signum, terminate)
    lines: list[str] = []
    done = threading.Event()

    def read() -> None:
        assert child.stdout is not None
        for raw in child.stdout:
            lines.append(raw.decode("utf-8", "replace"))
        done.set()

    reader = threading.Thread(target=read, daemon=True)
    isolation: dict[str, Any] = {}  # what the progress events said of the isolation
    known: dict[str, dict[str, Any]] = {}  # the tasks the progress events named: kept if no answer comes

    def heard(event: dict[str, Any]) -> None:
        kind, name = event.get("event"), event.get("task")
        if kind == "isolation":
            isolation.update(isolated=bool(event.get("isolated")), isolation_note=str(event.get("why") or ""))
        elif kind == "retry":
            known.clear()
        elif kind in ("started", "ready") and isinstance(name, str) and "/" in name:
            job, _, index = name.partition("/")
            task = known.setdefault(name, {"job": job, "task": int(index), "target": None, "pid": None,
                                           "exit_code": None, "ended_by_placement": None, "private_kib": None})
            task["pid"] = event.get("pid") or task["pid"]
            if event.get("address"):
                task["target"] = f"grpc://{event['address']}"
        progress(ClusterEvent.from_dict(event))
    try:
        assert child.stdin is not None
        child.stdin.write(json.dumps(request).encode())
        child.stdin.close()
        reader.start()
        seen = 0
        deadline = time.monotonic() + OVERALL_LIMIT
        final: dict[str, Any] | None = None
        while final is None:
            finished = done.wait(0.1)
            while seen < len(lines):
                try:
                    event = json.loads(lines[seen])
                except json.JSONDecodeError:
                    event = {}
                seen += 1
                if event.get("event") in ("result", "crash"):
                    final = event
                elif event:
                    heard(event)
            if final is None and finished and seen >= len(lines):
                with contextlib.suppress(subprocess.TimeoutExpired):
                    child.wait(timeout=10)
                final = {"event": "crash", "error": Message(
                    N_("the cluster's supervisor (pid {pid}) {how} before it answered"), pid=child.pid,
                    how=how_it_ended(child.returncode))}
            if final is None and process_state(child.pid) in ("T", "t"):  # it cannot answer: say so now
                final = {"event": "crash", "error": Message(
                    N_("the cluster's supervisor (pid {pid}) was found stopped (process state {state}: SIGSTOP or a "
                       "debugger)"), pid=child.pid, state=process_state(child.pid))}
            if final is None and time.monotonic() > deadline:
                final = {"event": "crash", "error": Message(N_("the cluster did not finish within {limit:g} s"),
                                                            limit=OVERALL_LIMIT)}
        if final["event"] == "crash":
            problem = final["error"] if isinstance(final["error"], Message) else str(final.get("error"))
            tasks = _ended_with_group(child, list(known.values()))
            return ClusterRun(**isolation, tasks=tuple(map(task_of, tasks)), problem=problem, own_failure=True,
                              gpu_memory=GpuMemory.from_dict(request.get("gpu_memory")))
        return ClusterRun(isolated=bool(final["isolated"]), isolation_note=final.get("isolation_note") or "",
                          tasks=tuple(map(task_of, final["tasks"])),
                          results=tuple((name, training_of(data)) for name, data in final["results"].items()),
                          logs=tuple(final["logs"].items()),
                          problem=None if final["error"] is None else message(final["error"]),
                          seconds=final.get("seconds"), start_method=final.get("start_method"),
                          cause=Cause(**final["cause"]) if final.get("cause") else None,
                          cluster=tuple((job, tuple(addresses)) for job, addresses in final["cluster"].items()),
                          gpu_memory=GpuMemory.from_dict(request.get("gpu_memory")))
    finally:
        kill_group(child)
        shutil.rmtree(private, ignore_errors=True)
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def how_it_ended(code: int | None) -> Message:
    """A process's end from its exit status (Popen's returncode: negative for a signal)."""
    if code is None:
        return Message(N_("closed its channel without an answer"))
    if code < 0:
        try:
            return Message(N_("was killed by {signal}"), signal=signal.Signals(-code).name)
        except ValueError:
            return Message(N_("was killed by signal {number}"), number=-code)
    return Message(N_("exited with code {code}"), code=code)


def process_state(pid: int) -> str | None:
    """The process's state letter in /proc (R, S, D, T, t, Z...), None where it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def _ended_with_group(child: subprocess.Popen[bytes], tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tasks the supervisor named before it failed, ended now with its process group: those
    still running are killed here (ended by placement); the exit code of any is not known."""
    for task in tasks:
        task["ended_by_placement"] = bool(task["pid"]) and process_state(task["pid"]) not in (None, "Z")
    kill_group(child)
    return tasks


def kill_group(child: subprocess.Popen[bytes]) -> None:
    """SIGKILL the supervisor's whole process group (its forkserver and tasks with it) and reap it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        child.wait(timeout=10)
