"""Asking a running cluster for its tasks and devices: a TCP connect per task, then list_devices with a timeout.

Nothing here runs an op or makes a variable on the cluster: a ``tf.compat.v1.Session`` on a task's
target with an empty graph, ``list_devices()``, ``close()``. TensorFlow works in a child process of
its own (``run``): its calls hold the GIL while they wait (measured: three silent tasks took three
timeouts, and Ctrl-C was not seen until they returned), so the CLI, which never imports TensorFlow
here, waits on the child with a deadline and kills it on Ctrl-C or when the deadline passes.

Measured on TF 2.21 (``notes/distributed.md``): a master asked for every device of its cluster
while one task is down answers DeadlineExceeded without naming the task, and keeps waiting for
that task itself (logging ``CreateSession still waiting for response from worker`` every 10 s in
its own log) until it comes up. So, knowing the tasks (--cluster-spec, TF_CONFIG), each task is
asked only about itself (``device_filters=[its own name]``), after a TCP connect showed it listens:
no master is ever left waiting. With only a target, the master is asked about itself first (a
filter naming no task answers at once with the master's own devices, hence its name), then about
the whole cluster; if that times out, which task is missing is unknown to TensorFlow's answer.
"""

from __future__ import annotations

import ctypes
import functools
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from placement_cli.clusterspec import Cluster, Task
from placement_cli.devices import DeviceSpec, try_parse
from placement_cli.exceptions import InspectorFailed
from placement_cli.i18n import N_, Message
from placement_cli.model import Inspection, TaskAnswer, TaskDevice
from placement_cli.runtime.capture.fdcapture import silenced
from placement_cli.runtime.cluster.launch import how_it_ended, process_state
from placement_cli.runtime.gpu_policy import no_gpu

DEFAULT_TIMEOUT = 5.0
MIN_TIMEOUT = 0.5
MAX_TIMEOUT = 60.0
_GRACE = 2.0  # beyond the timeout, before a TensorFlow call is given up (its thread left behind)
_NO_TASK = "/job:placement_inspect_none"  # a valid filter naming no task: the master answers alone, at once
_tf: Any = None

T = TypeVar("T")


class _Lingering(Exception):
    """A call outlived the timeout and its grace."""


def _tensorflow() -> Any:
    """TensorFlow, imported once with its C++ chatter (cuda stubs, the empty-graph warning) off stderr."""
    global _tf  # noqa: PLW0603 - one import per process
    if _tf is None:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        with silenced(2):
            import tensorflow as tf  # noqa: PLC0415 - only inspect's own process state

            tf.constant(0)  # the context and its log set-up, still silenced
        _tf = tf
    return _tf


def _in_threads(calls: list[Callable[[], T]], limit: float) -> list[T | BaseException]:
    """Run every call in its own daemon thread; wait at most ``limit`` seconds in all, in short
    slices so that Ctrl-C is raised here at once. A call still running is a _Lingering."""
    results: list[T | BaseException] = [_Lingering() for _ in calls]

    def runner(i: int, call: Callable[[], T]) -> None:
        try:
            results[i] = call()
        except BaseException as exc:  # noqa: BLE001 - handed back to the caller as a value
            results[i] = exc

    threads = [threading.Thread(target=runner, args=(i, c), daemon=True, name=f"placement-inspect-{i}")
               for i, c in enumerate(calls)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + limit
    for t in threads:
        while t.is_alive() and time.monotonic() < deadline:
            t.join(min(0.1, max(0.0, deadline - time.monotonic())))
    return results


def tcp_probe(host: str, port: int, timeout: float) -> Message | None:
    """None when something accepts a TCP connection at host:port, else why not (one line)."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except TimeoutError:
        return Message(N_("no answer to a TCP connect within {timeout:g} s"), timeout=timeout)
    except ConnectionRefusedError:
        return Message(N_("nothing listens there (connection refused)"))
    except socket.gaierror as exc:
        return Message(N_("cannot resolve {host} ({why})"), host=repr(host), why=exc.strerror or exc)
    except OSError as exc:
        return Message(N_("cannot connect ({why})"), why=exc.strerror or exc)


def _list_devices(target: str, filters: list[str], timeout: float) -> list[Any]:
    tf = _tensorflow()
    config = tf.compat.v1.ConfigProto(operation_timeout_in_ms=int(timeout * 1000), device_filters=filters)
    session = tf.compat.v1.Session(target, graph=tf.Graph(), config=config)
    try:
        return list(session.list_devices())
    finally:
        session.close()


def _device(d: Any) -> TaskDevice:
    spec = try_parse(d.name)
    if spec is None:  # TensorFlow names its own devices fully; keep what it said all the same

        spec = DeviceSpec(device_type=d.device_type)
    memory = int(d.memory_limit_bytes) if getattr(d, "memory_limit_bytes", 0) else None
    return TaskDevice(d.name, spec, memory)


def _key(device: TaskDevice) -> tuple[str, int]:
    return device.spec.job or "localhost", device.spec.task or 0


def _why(exc: BaseException, timeout: float) -> Message | str:
    if isinstance(exc, _Lingering):
        return Message(N_("no answer within {timeout:g} s (TensorFlow's call did not return)"), timeout=timeout)
    name = type(exc).__name__
    if name == "DeadlineExceededError":
        return Message(N_("accepts connections but gave no gRPC answer within {timeout:g} s"), timeout=timeout)
    first = (getattr(exc, "message", None) or str(exc)).strip().splitlines()
    return f"{name}: {first[0] if first else ''}".rstrip(": ")  # TensorFlow's own words, as it said them


def inspect_cluster(cluster: Cluster, timeout: float = DEFAULT_TIMEOUT) -> Inspection:
    """Every task of a known cluster: a TCP connect, then the task asked about its own devices."""
    tasks = cluster.tasks
    reached = _in_threads([functools.partial(tcp_probe, t.host, t.port, timeout) for t in tasks], timeout + _GRACE)
    listening = [t for t, r in zip(tasks, reached) if r is None]
    if listening:
        _tensorflow()  # imported once here, not in every thread at once
    asked = _in_threads([functools.partial(_list_devices, t.target, [t.name], timeout) for t in listening],
                        timeout + _GRACE)
    answers_of = dict(zip(listening, asked))
    answers: list[TaskAnswer] = []
    lingering = False
    for task, probe in zip(tasks, reached):
        if isinstance(probe, BaseException):
            lingering = lingering or isinstance(probe, _Lingering)
            answers.append(_silent(task, _why(probe, timeout)))
        elif probe is not None:
            answers.append(_silent(task, _at(task.address, probe)))
        else:
            got = answers_of[task]
            if isinstance(got, BaseException):
                lingering = lingering or isinstance(got, _Lingering)
                if isinstance(got, KeyboardInterrupt):
                    raise got
                answers.append(_silent(task, _at(task.address, _why(got, timeout))))
            else:
                answers.append(_own(task, [_device(d) for d in got]))
    complete = all(a.answered for a in answers)
    return Inspection(source=cluster.source, timeout=timeout, tasks=tuple(answers), complete=complete,
                      lingering=lingering)


def _at(address: str, why: Message | str) -> Message:
    return Message(N_("{address}: {why}"), address=address, why=why)


def _silent(task: Task, error: Message | str) -> TaskAnswer:
    return TaskAnswer(task.job, task.index, task.target, answered=False, error=error)


def _own(task: Task, devices: list[TaskDevice]) -> TaskAnswer:
    """A task's answer, checked: the server at its address must be that task."""
    mine = tuple(d for d in devices if _key(d) == (task.job, task.index))
    others = sorted({f"/job:{j}/task:{i}" for j, i in map(_key, devices)} - {task.name})
    if not mine:
        who = ", ".join(others) or Message(N_("no device"))
        return TaskAnswer(task.job, task.index, task.target, answered=False,
                          error=Message(N_("{address}: a TensorFlow server answers there, but as {who}, not {task}"),
                                        address=task.address, who=who, task=task.name))
    if others:  # its devices came with another task's: the server there is that other task, which
        # relayed this one's devices from wherever this task really is: they are not this address's answer
        return TaskAnswer(task.job, task.index, task.target, answered=False,
                          error=Message(N_("{address}: the server there is {others}, not {task}"),
                                        address=task.address, others=", ".join(others), task=task.name))
    return TaskAnswer(task.job, task.index, task.target, answered=True, devices=mine)


def inspect_target(address: str, timeout: float = DEFAULT_TIMEOUT) -> Inspection:
    """A cluster known only by one task's target: its master's own name, then the whole cluster."""
    host, port = address.rsplit(":", 1)
    target = f"grpc://{address}"
    source = target
    probe = _in_threads([lambda: tcp_probe(host.strip("[]"), int(port), timeout)], timeout + _GRACE)[0]
    if probe is not None:
        why = _why(probe, timeout) if isinstance(probe, BaseException) else _at(address, probe)
        return Inspection(source, timeout, (TaskAnswer(None, None, target, answered=False, error=why),),
                          complete=False, lingering=isinstance(probe, _Lingering))
    _tensorflow()
    own = _in_threads([lambda: _list_devices(target, [_NO_TASK], timeout)], timeout + _GRACE)[0]
    if isinstance(own, KeyboardInterrupt):
        raise own
    if isinstance(own, BaseException):
        return Inspection(source, timeout, (TaskAnswer(None, None, target, answered=False,
                                                       error=_at(address, _why(own, timeout))),),
                          complete=False, lingering=isinstance(own, _Lingering))
    master_devices = [_device(d) for d in own]
    master = _key(master_devices[0]) if master_devices else None
    everything = _in_threads([lambda: _list_devices(target, [], timeout)], timeout + _GRACE)[0]
    if isinstance(everything, KeyboardInterrupt):
        raise everything
    if isinstance(everything, BaseException):
        job_task: tuple[str | None, int | None] = master or (None, None)
        tasks: tuple[TaskAnswer, ...] = (TaskAnswer(*job_task, target, answered=True, devices=tuple(master_devices)),)
        error = Message(N_("the master at {address} answered, but some task of its cluster did not within "
                           "{timeout:g} s; TensorFlow's answer does not say which (give --cluster-spec FILE to name it)"),
                        address=address, timeout=timeout)
        return Inspection(source, timeout, tasks, complete=False, error=error,
                          lingering=isinstance(everything, _Lingering))
    by_task: dict[tuple[str, int], list[TaskDevice]] = {}
    for d in map(_device, everything):
        by_task.setdefault(_key(d), []).append(d)
    tasks = tuple(TaskAnswer(job, index, target if (job, index) == master else None, answered=True,
                             devices=tuple(devices))
                  for (job, index), devices in sorted(by_task.items()))
    return Inspection(source, timeout, tasks, complete=True)


IMPORT_LIMIT = 120.0  # seconds TensorFlow may take to import in the child on a loaded machine


def run(cluster: Cluster | None, address: str | None, timeout: float) -> Inspection:
    """inspect_cluster or inspect_target in a child process, bounded: the import by IMPORT_LIMIT, then
    every query by the timeout (asked one after another in the worst case). Ctrl-C kills the child."""
    request = pickle.dumps((cluster, address, timeout, os.getpid()))
    child = subprocess.Popen([sys.executable, "-P", "-c", "from placement_cli.runtime.cluster.inspect import _child; _child()"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             start_new_session=True,  # a terminal's Ctrl-C reaches placement, which ends the child
                             env=no_gpu(os.environ))  # it lists the cluster's devices: none of its own on a GPU
    chunks: list[bytes] = []
    imported = threading.Event()

    def read() -> None:
        assert child.stdout is not None
        if child.stdout.readline() == b"imported\n":
            imported.set()
        chunks.append(child.stdout.read())

    reader = threading.Thread(target=read, daemon=True)
    try:
        assert child.stdin is not None
        child.stdin.write(request)
        child.stdin.close()
        reader.start()
        queries = (len(cluster.tasks) if cluster is not None else 2) + 1  # + the TCP connects
        limit = IMPORT_LIMIT
        start = time.monotonic()
        while reader.is_alive():
            if imported.is_set() and limit == IMPORT_LIMIT:
                limit, start = queries * (timeout + _GRACE), time.monotonic()
            if process_state(child.pid) in ("T", "t"):  # stopped: it would never answer
                raise InspectorFailed(f"the process asking TensorFlow (pid {child.pid}) was found stopped (process "
                                      "state T: SIGSTOP or a debugger); nothing is known of the cluster's tasks")
            if time.monotonic() - start > limit:
                return _gave_up(cluster, address, timeout, Message(
                    N_("gave up waiting for the answers after {limit:g} s") if imported.is_set() else
                    N_("gave up waiting for TensorFlow to start after {limit:g} s"), limit=limit))
            reader.join(0.1)
        child.wait(timeout=_GRACE)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    data = b"".join(chunks)
    if not data:  # placement's own process failed, not the cluster: an internal error (exit 3), said so
        raise InspectorFailed(f"the process asking TensorFlow (pid {child.pid}) {how_it_ended(child.returncode)} before it "
                              "answered; nothing is known of the cluster's tasks")
    try:
        found = pickle.loads(data)  # noqa: S301 - our own child's answer
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError):
        found = None
    if not isinstance(found, Inspection):
        raise InspectorFailed(f"the process asking TensorFlow (pid {child.pid}) gave an unreadable answer")
    return found


def _gave_up(cluster: Cluster | None, address: str | None, timeout: float, why: Message) -> Inspection:
    """No answer came back from the child: every task is named as not known to have answered."""
    if cluster is not None:
        tasks = tuple(_silent(t, why) for t in cluster.tasks)
        return Inspection(cluster.source, timeout, tasks, complete=False)
    target = f"grpc://{address}"
    return Inspection(target, timeout, (TaskAnswer(None, None, target, answered=False, error=why),), complete=False)


def _end_with_parent() -> None:
    """Die with placement (SIGKILL included, which leaves it no cleanup): PR_SET_PDEATHSIG, the
    kernel's own watch, as TensorFlow's calls hold the GIL and would starve a watching thread. It
    fires when the parent's thread that started this process ends: ``run`` waits in that thread.
    A parent that died before the watch was set is seen by the caller (its pid is not the parent's)."""

    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _child() -> None:
    """The child's side of ``run``: import TensorFlow, say so, inspect, hand the answer back."""
    _end_with_parent()
    cluster, address, timeout, parent = pickle.loads(sys.stdin.buffer.read())  # noqa: S301 - our own parent's request
    if os.getppid() != parent:  # placement ended before the watch was set: nobody is left to answer
        os._exit(1)
    out = os.fdopen(os.dup(1), "wb")  # the answer's own channel: whatever TensorFlow prints on fd 1 goes nowhere
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)
    try:
        _tensorflow()
    finally:
        out.write(b"imported\n")
        out.flush()
    found = inspect_target(address, timeout) if address is not None else inspect_cluster(cluster, timeout)
    out.write(pickle.dumps(found))
    out.flush()
    os._exit(0)  # a TensorFlow call may still be blocked in C++: do not wait for it
