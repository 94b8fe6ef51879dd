"""The launcher of `placement trace --cluster`: one process that starts every task of the user's
cluster, reaps them, and ends them when told, or when placement goes away.

Started by runtime.cluster.trace as ``python -P -m placement_cli.runtime.cluster.trace_launcher`` in a
session of its own. It first moves into a fresh user + network namespace with only ``lo`` up
(``cluster_supervisor.isolate``, where the kernel allows it), so the tasks' unauthenticated gRPC
servers cannot be reached from outside this machine; then it chooses the ports (held with
SO_REUSEPORT until the servers have them when no namespace shields them), and starts each task as
``python SCRIPT ARGS`` with the fds, environment and ``TF_CONFIG`` placement gave it.

Its request (JSON) comes on stdin, whose end (placement finished, or was killed even by SIGKILL)
kills every task's process group; commands come as lines on stdin: ``end TASK`` (SIGTERM to the
task's group, SIGKILL a second later). Events go out as JSON lines on fd 1:
``{"event": "isolation"...}``, ``{"event": "started", "task", "pid", "address"}``,
``{"event": "exit", "task", "status"}`` (os.waitstatus_to_exitcode), ``{"event": "error", "error"}``,
``{"event": "busy", "task", "port"}`` (a --cluster-spec port something else listens on: nothing started).

The launcher is a child subreaper (Linux): a process a task started and left (a daemon: fork,
setsid, fork) becomes the launcher's child, not init's, and at the end every process below the
launcher is killed and reaped, whatever session or group it moved to.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import selectors
import signal
import subprocess
import time
from typing import Any

from placement_cli.runtime.cluster.supervisor import free_ports, isolate
from placement_cli.runtime.cluster.trace_spec import port_in_use

KILL_AFTER = 1.0  # seconds between the SIGTERM that ends a serving task and the SIGKILL


def _emit(data: dict[str, Any]) -> None:
    line = (json.dumps(data) + "\n").encode()
    with contextlib.suppress(OSError):
        os.write(1, line)


def _kill(pid: int, sig: int) -> None:
    with contextlib.suppress(OSError):
        os.killpg(pid, sig)


def _subreaper() -> None:
    """Orphans of the tasks re-parent to this process (PR_SET_CHILD_SUBREAPER), so none escapes the end."""

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def _children() -> list[int]:
    """This process's children (the tasks, and the orphans of their processes), zombies included."""
    me, found = os.getpid(), []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    if int(f.read().rsplit(b")", 1)[1].split()[1]) == me:
                        found.append(int(entry))
            except (OSError, ValueError, IndexError):
                continue
    return found


def kill_descendants() -> None:
    """Kill and reap every process below this one, until none is left: a child killed leaves its own
    children to this subreaper, which kills them in the next round."""
    if not os.path.isdir("/proc"):
        return
    while True:
        children = _children()
        if not children:
            return
        for pid in children:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        for pid in children:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, 0)


def main() -> None:
    _subreaper()
    first = b""
    while b"\n" not in first:
        data = os.read(0, 65536)
        if not data:
            return
        first += data
    line, rest = first.split(b"\n", 1)
    request = json.loads(line)
    isolated, why = isolate()
    _emit({"event": "isolation", "isolated": isolated, "why": why})
    jobs: list[list[Any]] = request["jobs"]  # [[job, count], ...] in launch order
    given = request.get("cluster")  # the user's --cluster-spec, loopback addresses only
    if given and not isolated:  # a port another program has: no task could start its server there
        for job, addresses in given.items():
            for index, address in enumerate(addresses):
                port = int(address.rsplit(":", 1)[1])
                if port_in_use(port):
                    _emit({"event": "busy", "task": f"{job}/{index}", "port": port})
                    return
    held = [] if isolated or given else free_ports(sum(count for _, count in jobs))
    ports = [s.getsockname()[1] for s in held]
    if isolated and not given:  # nothing else lives in this namespace: ports chosen here stay free
        probes = free_ports(sum(count for _, count in jobs))
        ports = [s.getsockname()[1] for s in probes]
        for s in probes:
            s.close()
    cluster: dict[str, list[str]] = given or {}
    if not given:
        at = 0
        for job, count in jobs:
            cluster[job] = [f"localhost:{p}" for p in ports[at: at + count]]
            at += count
    wake_r, wake_w = os.pipe()  # SIGCHLD wakes the loop: set before any task can exit
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    procs: dict[str, subprocess.Popen[bytes]] = {}
    names: dict[int, str] = {}
    ending: dict[str, float] = {}  # task -> when its SIGKILL is due
    try:
        for spec in request["tasks"]:
            job, index = spec["job"], spec["index"]
            name = f"{job}/{index}"
            env = {**request["env"], **spec.get("env", {}), **({"TF_GRPC_REUSE_PORT": "1"} if held else {}),
                   "TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": job, "index": index}}),
                   request["control_variable"]: f"{','.join(map(str, spec['trace_fds']))}:{os.getpid()}:{spec['flags']}"}
            p = subprocess.Popen(request["argv"], env=env, stdin=subprocess.DEVNULL, stdout=spec["stdout"],  # noqa: S603
                                 stderr=spec["stderr"], pass_fds=spec["trace_fds"], process_group=0)
            procs[name] = p
            names[p.pid] = name
            _emit({"event": "started", "task": name, "pid": p.pid, "address": cluster[job][index]})
        for fd in {fd for spec in request["tasks"] for fd in (spec["stdout"], spec["stderr"], *spec["trace_fds"])}:
            with contextlib.suppress(OSError):
                os.close(fd)
        for s in held:  # every task has bound its port by now, or will with SO_REUSEPORT beside ours
            s.close()
        held = []
        _serve(rest, wake_r, procs, names, ending)
    except Exception as exc:  # noqa: BLE001 - said to placement, which names it
        _emit({"event": "error", "error": f"{type(exc).__name__}: {exc}"})
    finally:
        for s in held:
            s.close()
        for p in procs.values():
            if p.returncode is None:
                _kill(p.pid, signal.SIGKILL)
        for p in procs.values():
            with contextlib.suppress(ChildProcessError, subprocess.TimeoutExpired):
                p.wait(5)
        for p in procs.values():  # what the script's own processes left in each group
            _kill(p.pid, signal.SIGKILL)
        kill_descendants()  # and whatever left the groups (setsid), orphaned to this subreaper or not


def _serve(buffer: bytes, wake_r: int, procs: dict[str, subprocess.Popen[bytes]], names: dict[int, str],
           ending: dict[str, float]) -> None:
    """Reap the tasks and follow placement's commands until placement closes stdin (placement is
    done, or gone: even a SIGKILL closes it)."""
    _reap(procs, names, ending)
    selector = selectors.DefaultSelector()
    selector.register(0, selectors.EVENT_READ)
    selector.register(wake_r, selectors.EVENT_READ)
    while True:
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            command, _, name = line.decode().partition(" ")
            p = procs.get(name)
            if command == "end" and p is not None and p.returncode is None and name not in ending:
                _kill(p.pid, signal.SIGTERM)
                ending[name] = time.monotonic() + KILL_AFTER
        due = min(ending.values(), default=None)
        timeout = None if due is None else max(0.0, due - time.monotonic())
        for key, _ in selector.select(timeout):
            if key.fd == wake_r:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_r, 512)  # blocking: one read, then the reaping below
                continue
            data = os.read(key.fd, 4096)
            if not data:
                return
            buffer += data
        _reap(procs, names, ending)
        now = time.monotonic()
        for name, when in list(ending.items()):
            if when <= now:
                _kill(procs[name].pid, signal.SIGKILL)
                del ending[name]


def _reap(procs: dict[str, subprocess.Popen[bytes]], names: dict[int, str], ending: dict[str, float]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        name = names.get(pid)
        if name is None:
            continue
        code = os.waitstatus_to_exitcode(status)
        procs[name].returncode = code
        ending.pop(name, None)
        _kill(pid, signal.SIGKILL)  # the group: a process the task started goes with it
        _emit({"event": "exit", "task": name, "status": code})


if __name__ == "__main__":
    main()
