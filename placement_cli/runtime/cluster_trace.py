"""`placement trace --cluster`: the user's own distributed program, one process per task, as
TensorFlow's multi-worker and parameter-server tutorials run it, each task traced as `trace` traces
one script.

Each task is ``python SCRIPT ARGS`` with the ``TF_CONFIG`` of the whole cluster (loopback ports the
launcher chose) and its own task, started through runtime.child's bootstrap exactly as `trace` starts
its one child: placement logging on from the first op, C stdio's streams (TensorFlow's log) through two
pipes, facts and the uncaught error on a control pipe. Its Python stdout and stderr come through two
more pipes and are passed on live, each line prefixed with the task (``worker/1 | ...``).

The tasks are children of runtime.cluster_trace_launcher (its own session, a private network
namespace where the kernel allows one), which reaps them and ends them when told; when placement's
end of its stdin closes (placement done, failed, or killed even by SIGKILL) it kills every task's
process group. The logs to parse are unlinked temporary files: nothing is left behind.

Which tasks must finish: the chief when there is one, else every worker. The others serve (ps; workers
under a chief) and are ended once those finished, or as soon as any task failed.
"""

from __future__ import annotations

import collections
import json
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from typing import Any, BinaryIO

from placement_cli.exceptions import Terminated, UsageProblem
from placement_cli.i18n import N_, Message, _
from placement_cli.messages import TRACE, one_line
from placement_cli.model import ClusterTask, Report
from placement_cli.runtime.child import BOOT, ENV
from placement_cli.runtime.cluster_launch import how_it_ended, process_state
from placement_cli.runtime.splitter import Channel, Splitter
from placement_cli.runtime.tracer import GRACE_IDLE, GRACE_MAX, READ, _facts, _level, _pipe, _write_all

JOBS = ("chief", "worker", "ps")  # TF_CONFIG's order: the coordinator first
MAX_TASKS = {"chief": 1, "worker": 16, "ps": 8}
SERVING_GRACE = 0.5  # seconds a worker under a chief gets to end on its own once the chief has
INTERRUPT_GRACE = 2.0  # seconds the tasks get to end on a signal placement forwarded, before they are killed
HOLD = 0.2  # seconds an unfinished line waits for its end before it is shown as it is
_TAIL = 6  # lines of a failed task's own stderr quoted
_SPEC = re.compile(r"\s*([a-z]+)\s*=\s*([0-9]+)\s*")


_GLOG_ERROR = re.compile(r"\s*[EF]\d{4} ")


def _says_why(line: str, *, c_stdio: bool) -> bool:
    """A line of a task's stderr worth quoting when it failed: the script's own (Python's stderr:
    its traceback, its messages), and TensorFlow's errors, not the start-up chatter of every task."""
    if not line.strip():
        return False
    if not c_stdio:
        return True
    return bool(_GLOG_ERROR.match(line)) and "cuInit" not in line


def parse_cluster(text: str) -> list[tuple[str, int]]:
    """``worker=2,ps=1,chief=1`` as (job, count) in launch order; a usage problem says what is wrong."""
    counts: dict[str, int] = {}
    for part in text.split(","):
        m = _SPEC.fullmatch(part)
        if m is None or m.group(1) not in JOBS:
            raise UsageProblem(_("--cluster {value}: give JOB=COUNT pairs, jobs worker, ps and chief "
                                 "(e.g. worker=2 or chief=1,ps=1,worker=2)").format(value=one_line(text)))
        job, count = m.group(1), int(m.group(2))
        if job in counts:
            raise UsageProblem(_("--cluster {value}: {job} is given twice").format(value=one_line(text), job=job))
        if not 1 <= count <= MAX_TASKS[job]:
            raise UsageProblem(_("--cluster {value}: {job} takes 1 to {most} tasks").format(
                value=one_line(text), job=job, most=MAX_TASKS[job]))
        counts[job] = count
    if "worker" not in counts:
        raise UsageProblem(_("--cluster {value}: at least one worker is needed").format(value=one_line(text)))
    return [(job, counts[job]) for job in JOBS if job in counts]


def jobs_of_spec(spec: Any) -> tuple[list[tuple[str, int]], dict[str, list[str]]]:
    """A --cluster-spec file's cluster (clusterspec.Cluster): loopback addresses only, jobs of this command."""
    from placement_cli.runtime.cluster_launch import _loopback  # noqa: PLC0415

    for task in spec.tasks:
        if task.job not in JOBS:
            raise UsageProblem(_("{source}: job {job}: trace --cluster runs jobs worker, ps and chief").format(
                source=spec.source, job=task.job))
        if not _loopback(task.host):
            raise UsageProblem(_("{source}: {task} is at {address}: every task runs on this machine, so give "
                                 "localhost, 127.x.x.x or [::1] addresses").format(
                source=spec.source, task=task.name, address=task.address))
    jobs = parse_cluster(",".join(f"{job}={spec.count(job)}" for job in JOBS if spec.count(job)))
    for job, count in jobs:
        if [t.index for t in spec.jobs[job]] != list(range(count)):
            raise UsageProblem(_("{source}: job {job}'s tasks must be numbered 0 to {last}").format(
                source=spec.source, job=job, last=count - 1))
    return jobs, {job: [t.address for t in spec.jobs[job]] for job, _count in jobs}


@dataclass
class _Lines:
    """One source of a task's output (its Python stdout, or C stdio's rest) on its way to one sink,
    prefixed line by line."""

    sink: int
    pending: bytes = b""
    since: float = 0.0


@dataclass
class _Task:
    job: str
    index: int
    splitter: Splitter
    parsed: Any
    fds: dict[int, str] = field(default_factory=dict)  # our read end -> "control", "cout", "cerr", "out", "err"
    channels: dict[str, Channel] = field(default_factory=dict)
    lines: dict[str, _Lines] = field(default_factory=dict)
    control_buf: bytearray = field(default_factory=bytearray)
    facts_raw: bytes | None = None
    error_text: bytes | None = None
    pid: int | None = None
    address: str | None = None
    status: int | None = None
    exit_time: float = 0.0
    ended: bool = False  # placement ended it (a serving task, or after another failed)
    tail: collections.deque[str] = field(default_factory=lambda: collections.deque(maxlen=_TAIL))
    saved: dict[str, BinaryIO] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.job}/{self.index}"


@dataclass(frozen=True)
class ClusterTraceResult:
    report: Report
    graph: Report  # what --dot and --graph-svg draw: each task's nodes named by their task
    exit_code: int
    tasks: tuple[ClusterTask, ...]
    isolated: bool | None
    isolation_note: str
    problem: Message | None  # the task that failed or stopped, and how
    notes: tuple[str, ...] = ()
    output_closed: bool = False


class _Run:
    def __init__(self, script: str, args: list[str], jobs: list[tuple[str, int]], cluster: dict[str, list[str]] | None,
                 *, stdout_fd: int, echo_log: bool, save_dir: str | None, copies: bool) -> None:
        self.script, self.args, self.jobs, self.cluster = script, args, jobs, cluster
        self.stdout_fd, self.copies, self.save_dir = stdout_fd, copies, save_dir
        level = _level(os.environ.get("TF_CPP_MIN_LOG_LEVEL"))
        self.tasks = [_Task(job, i, Splitter(parsed := tempfile.TemporaryFile(), echo_placement=echo_log,  # noqa: SIM115
                                             min_level=level), parsed)
                      for job, count in jobs for i in range(count)]
        self.by_name = {t.name: t for t in self.tasks}
        self.by_fd: dict[int, _Task] = {}
        self.launcher: subprocess.Popen[bytes] | None = None
        self.events = bytearray()
        self.isolated: bool | None = None
        self.isolation_note = ""
        self.problem: Message | None = None
        self.first_failure: _Task | None = None
        self.notes: list[str] = []
        self.signalled: int | None = None
        self.signal_deadline = 0.0
        self.serving_due: float | None = None
        self.wake_r = self.wake_w = -1
        self.saved_handlers: dict[int, Any] = {}
        self.last_writer: tuple[int, str, str] | None = None  # (sink, task, source) that wrote last, mid-line
        self.dead_sinks: set[int] = set()
        self.width = max(len(t.name) for t in self.tasks)
        self.last_data = 0.0

    # -- start ---------------------------------------------------------------------------------

    def start(self) -> None:
        theirs: list[int] = []
        specs = []
        pythonpath = os.environ.get("PYTHONPATH")
        flags = ("c" if self.copies else "") + ("p" if pythonpath is not None else "")
        for task in self.tasks:
            pipes = {kind: _pipe() for kind in ("control", "cout", "cerr", "out", "err")}
            for kind, (read, write) in pipes.items():
                self.by_fd[read] = task
                task.fds[read] = kind
                theirs.append(write)
            task.channels = {"cout": task.splitter.channel("stdout", stdout=True),
                             "cerr": task.splitter.channel("stderr", stdout=False)}
            out_sink, err_sink = self.stdout_fd, 2
            task.lines = {"out": _Lines(out_sink), "cout": _Lines(out_sink), "err": _Lines(err_sink),
                          "cerr": _Lines(err_sink)}
            specs.append({"job": task.job, "index": task.index, "flags": flags,
                          "trace_fds": [pipes[k][1] for k in ("control", "cout", "cerr")],
                          "stdout": pipes["out"][1], "stderr": pipes["err"][1]})
            if self.save_dir is not None:
                stem = os.path.join(self.save_dir, task.name.replace("/", "-"))
                task.saved = {kind: open(f"{stem}.{kind}", "xb") for kind in ("log", "out", "err")}  # noqa: SIM115
        env = {**os.environ, "PYTHONPATH": BOOT + (os.pathsep + pythonpath if pythonpath else "")}
        request = {"jobs": self.jobs, "cluster": self.cluster, "tasks": specs, "env": env, "control_variable": ENV,
                   "argv": [sys.executable, *(["--"] if self.script.startswith("-") else []), self.script, *self.args]}
        self._install_signals()
        try:
            self.launcher = subprocess.Popen(  # noqa: S603 - placement's own module
                [sys.executable, "-P", "-m", "placement_cli.runtime.cluster_trace_launcher"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, pass_fds=theirs, start_new_session=True)
        finally:
            for fd in theirs:
                os.close(fd)
        assert self.launcher.stdin is not None
        self.launcher.stdin.write(json.dumps(request).encode() + b"\n")
        self.launcher.stdin.flush()

    def _install_signals(self) -> None:
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        os.set_blocking(self.wake_r, False)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) != signal.SIG_IGN:
                self.saved_handlers[sig] = signal.signal(sig, self._signalled)
        self.saved_wakeup = signal.set_wakeup_fd(self.wake_w, warn_on_full_buffer=False)

    def _signalled(self, signum: int, _frame: object) -> None:
        """Ctrl-C, SIGTERM, SIGHUP: each task gets it, as a terminal would give it to each; the tasks
        that do not end within INTERRUPT_GRACE are killed, then placement ends as that signal says."""
        if self.signalled is None:
            self.signalled = signum
            self.signal_deadline = time.monotonic() + INTERRUPT_GRACE
        for task in self.tasks:
            if task.pid is not None and task.status is None:
                try:
                    os.killpg(task.pid, signum)
                except OSError:
                    pass

    # -- run -----------------------------------------------------------------------------------

    def run(self) -> None:
        assert self.launcher is not None and self.launcher.stdout is not None
        events_fd = self.launcher.stdout.fileno()
        poller = select.poll()
        for fd in (self.wake_r, events_fd, *self.by_fd):
            poller.register(fd, select.POLLIN)
        while True:
            ready = {fd for fd, _ in poller.poll(self._timeout())}
            if self.wake_r in ready:
                try:
                    while os.read(self.wake_r, 512):
                        pass
                except BlockingIOError:
                    pass
            if events_fd in ready:
                data = os.read(events_fd, READ)
                if not data:
                    poller.unregister(events_fd)
                    self._launcher_gone()
                self.events += data
                self._events()
            for fd in ready:
                task = self.by_fd.get(fd)
                if task is not None:
                    self._read(task, fd, poller)
            now = time.monotonic()
            for task in self.tasks:
                task.splitter.tick()
                self._write_out(task, now)
            self._decide(now)
            if self._finished(now):
                return

    def _timeout(self) -> int:
        return 50  # the tasks' unfinished lines, the graces and a stopped task are looked at this often

    def _events(self) -> None:
        while b"\n" in self.events:
            line, _, rest = bytes(self.events).partition(b"\n")
            self.events = bytearray(rest)
            try:
                event = json.loads(line)
            except ValueError:
                continue
            kind = event.get("event")
            task = self.by_name.get(event.get("task"))
            if kind == "isolation":
                self.isolated, self.isolation_note = bool(event.get("isolated")), str(event.get("why") or "")
            elif kind == "started" and task is not None:
                task.pid, task.address = event.get("pid"), event.get("address")
                if self.signalled is not None:
                    os.killpg(task.pid, self.signalled)
            elif kind == "exit" and task is not None:
                task.status = int(event["status"])
                task.exit_time = time.monotonic()
                if task.status != 0 and not task.ended:
                    self._failed(task, how_it_ended(task.status), quote=task.status > 0)
            elif kind == "error":
                self.problem = self.problem or Message(N_("placement could not start the tasks: {error}"),
                                                       error=str(event.get("error")))
                self._end_all()

    def _launcher_gone(self) -> None:
        for task in self.tasks:
            if task.status is None:
                task.status = -signal.SIGKILL
                task.ended = True
        if self.problem is None:
            self.problem = Message(N_("placement's launcher of the tasks ended before them"))

    def _failed(self, task: _Task, how: Message, *, quote: bool) -> None:
        """The first task that failed is named, with the end of its own stderr; every other task is ended."""
        if self.first_failure is None:
            self.first_failure = task
            said = Message(N_("{task} (pid {pid}) {how}"), task=task.name, pid=task.pid, how=how)
            tail = " | ".join(task.tail) if quote else ""
            self.problem = Message(N_("{problem}: {tail}"), problem=said, tail=tail) if tail else said
        self._end_all()

    def _end_all(self) -> None:
        for other in self.tasks:
            self._end(other)

    def _end(self, task: _Task) -> None:
        if task.status is None and not task.ended and self.launcher is not None and self.launcher.stdin is not None:
            task.ended = True
            try:
                self.launcher.stdin.write(f"end {task.name}\n".encode())
                self.launcher.stdin.flush()
            except OSError:
                pass

    def _must_finish(self) -> list[_Task]:
        chief = [t for t in self.tasks if t.job == "chief"]
        return chief or [t for t in self.tasks if t.job == "worker"]

    def _decide(self, now: float) -> None:
        if self.signalled is not None and now >= self.signal_deadline:
            self._end_all()
        for task in self.tasks:  # a task stopped (SIGSTOP, a debugger) would hold the others forever
            if task.status is None and task.pid is not None and not task.ended \
                    and process_state(task.pid) in ("T", "t"):
                self._failed(task, Message(N_("was found stopped (process state {state}: SIGSTOP or a debugger)"),
                                           state=process_state(task.pid)), quote=False)
        must = self._must_finish()
        if all(t.status == 0 for t in must) and self.serving_due is None:
            self.serving_due = now + (SERVING_GRACE if any(t.job == "chief" for t in must) else 0.0)
            for task in self.tasks:
                if task.job == "ps":
                    self._end(task)
        if self.serving_due is not None and now >= self.serving_due:
            self._end_all()

    def _finished(self, now: float) -> bool:
        if any(t.status is None for t in self.tasks):
            return False
        last_exit = max(t.exit_time for t in self.tasks)
        open_fds = any(True for _ in self.by_fd)
        return not open_fds or now - last_exit >= GRACE_MAX or \
            (now - last_exit >= GRACE_IDLE and now - self.last_data >= GRACE_IDLE)

    # -- output --------------------------------------------------------------------------------

    def _read(self, task: _Task, fd: int, poller: select.poll) -> None:
        kind = task.fds[fd]
        data = os.read(fd, READ)
        if not data:
            poller.unregister(fd)
            os.close(fd)
            del self.by_fd[fd]
            if kind in task.channels:
                task.splitter.close(task.channels[kind])
            elif kind in task.lines:
                self._flush_lines(task, kind, final=True)
            return
        self.last_data = time.monotonic()
        if kind == "control":
            self._control(task, data)
            return
        if kind in task.channels:
            self._save(task, "log", data)
            task.splitter.feed(task.channels[kind], data)
        else:
            self._save(task, kind, data)
            self._lines_in(task, kind, data)

    def _control(self, task: _Task, data: bytes) -> None:
        buf = task.control_buf
        buf += data
        while buf:
            newline = buf.find(b"\n")
            if newline < 0:
                return
            kind = buf[:1]
            if kind == b"L":
                task.splitter.min_level = _level(bytes(buf[1:newline]).decode("utf-8", "replace"))
                del buf[: newline + 1]
            elif kind in (b"F", b"E"):
                size = int(buf[1:newline])
                if len(buf) < newline + 1 + size:
                    return
                payload = bytes(buf[newline + 1: newline + 1 + size])
                del buf[: newline + 1 + size]
                if kind == b"F":
                    task.facts_raw = payload
                else:
                    self._save(task, "log", payload)
                    task.splitter.errors(payload)
            else:
                del buf[: newline + 1]

    def _save(self, task: _Task, kind: str, data: bytes) -> None:
        saved = task.saved.get(kind)
        if saved is not None:
            try:
                saved.write(data)
            except OSError as exc:
                self.notes.append(f"--save-log: stopped writing {saved.name} ({exc.strerror})")
                task.saved.pop(kind)

    def _write_out(self, task: _Task, now: float) -> None:
        for kind, channel in task.channels.items():
            data = channel.take()
            if data:
                self._lines_in(task, kind, data)
        for kind in task.lines:
            self._flush_lines(task, kind, final=False, now=now)

    def _lines_in(self, task: _Task, kind: str, data: bytes) -> None:
        lines = task.lines[kind]
        if kind in ("err", "cerr"):
            for line in data.decode("utf-8", "replace").splitlines():
                if _says_why(line, c_stdio=kind == "cerr"):
                    task.tail.append(line.strip())
        if not lines.pending:
            lines.since = time.monotonic()
        lines.pending += data
        whole, newline, rest = lines.pending.rpartition(b"\n")
        if newline:
            lines.pending = rest
            lines.since = time.monotonic()
            self._emit(task, kind, lines.sink, whole + b"\n")

    def _flush_lines(self, task: _Task, kind: str, *, final: bool, now: float = 0.0) -> None:
        lines = task.lines[kind]
        if lines.pending and (final or now - lines.since >= HOLD or len(lines.pending) > READ):
            data, lines.pending = lines.pending, b""
            self._emit(task, kind, lines.sink, data, whole=False)

    def _emit(self, task: _Task, kind: str, sink: int, data: bytes, *, whole: bool = True) -> None:
        """``data``'s lines, each after its task's prefix, on ``sink``; a line another task interrupted
        ends first, and one this task left unfinished goes on where it was."""
        if sink in self.dead_sinks:
            return
        prefix = f"{task.name:<{self.width}} | ".encode()
        out = bytearray()
        me = (sink, task.name, kind)
        if self.last_writer is not None and self.last_writer[0] == sink and self.last_writer != me:
            out += b"\n"
        continuing = self.last_writer == me
        lines = data.split(b"\n")
        if whole:
            lines.pop()  # what follows the last newline: nothing
        for i, line in enumerate(lines):
            out += (b"" if i == 0 and continuing else prefix) + line
            if whole or i < len(lines) - 1:
                out += b"\n"
        self.last_writer = None if whole else me
        try:
            _write_all(sink, bytes(out))
        except OSError:
            self.dead_sinks.add(sink)

    # -- end -----------------------------------------------------------------------------------

    def cleanup(self) -> None:
        if self.wake_w >= 0:
            signal.set_wakeup_fd(self.saved_wakeup)
        for sig, handler in self.saved_handlers.items():
            signal.signal(sig, handler)
        self.saved_handlers.clear()
        if self.launcher is not None:
            try:
                if self.launcher.stdin is not None:
                    self.launcher.stdin.close()  # the launcher kills what is left of every task's group
            except OSError:
                pass
            try:
                self.launcher.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.launcher.pid, signal.SIGKILL)
                self.launcher.wait()
            if self.launcher.stdout is not None:
                self.launcher.stdout.close()
        for fd in list(self.by_fd):
            os.close(fd)
        self.by_fd.clear()
        for fd in (self.wake_r, self.wake_w):
            if fd >= 0:
                os.close(fd)
        self.wake_r = self.wake_w = -1
        for task in self.tasks:
            for saved in task.saved.values():
                try:
                    saved.close()
                except OSError as exc:
                    self.notes.append(f"--save-log: {saved.name} may be incomplete ({exc.strerror})")

    def result(self) -> ClusterTraceResult:
        from placement_cli.runtime.cluster_trace_report import merge  # noqa: PLC0415

        code = self._exit_code()
        parts = []
        for task in self.tasks:
            parts.append((task.job, task.index, task.parsed, (*_facts(task.facts_raw), _copy_sizes(task.facts_raw))))
        report, graph = merge(parts)
        title = Message(TRACE, script=one_line(self.script), code=code)
        report, graph = replace(report, title=title), replace(graph, title=title)
        tasks = tuple(ClusterTask(job=t.job, task=t.index, target=None if t.address is None else f"grpc://{t.address}",
                                  pid=t.pid, exit_code=t.status, ended_by_placement=t.ended) for t in self.tasks)
        return ClusterTraceResult(report=report, graph=graph, exit_code=code, tasks=tasks, isolated=self.isolated,
                                  isolation_note=self.isolation_note, problem=self.problem, notes=tuple(self.notes),
                                  output_closed=self.stdout_fd in self.dead_sinks)

    def _exit_code(self) -> int:
        """The chief's, else the first failing task's, else 0; a signal as the shell gives it (128 + N)."""
        chief = self.by_name.get("chief/0")
        if chief is not None and chief.status is not None and not chief.ended:
            code = chief.status
        elif self.first_failure is not None and self.first_failure.status is not None:
            # a task found stopped was killed by placement: that signal is not its own code
            code = 1 if self.first_failure.ended else self.first_failure.status or 1
        elif self.problem is not None:
            code = 1
        else:
            code = 0
        return 128 - code if code < 0 else code


def _copy_sizes(raw: bytes | None) -> dict[str, Any] | None:
    """The sizes of the task's Session copies, as its recorder found them in the graph."""
    try:
        data = json.loads(raw) if raw else None
    except ValueError:
        return None
    sizes = data.get("copy_sizes") if isinstance(data, dict) else None
    return sizes if isinstance(sizes, dict) else None


def run_cluster_traced(script: str, args: list[str], jobs: list[tuple[str, int]],
                       cluster: dict[str, list[str]] | None = None, *, stdout_fd: int = 1, echo_log: bool = False,
                       save_dir: str | None = None, copies: bool = False) -> ClusterTraceResult:
    """Run every task of the cluster to its end (or placement's), then parse and explain what each placed.
    A signal placement received ends the run after the tasks had it: KeyboardInterrupt or Terminated."""
    run = _Run(script, args, jobs, cluster, stdout_fd=stdout_fd, echo_log=echo_log, save_dir=save_dir, copies=copies)
    try:
        run.start()
        run.run()
    finally:
        run.cleanup()
    if run.signalled == signal.SIGINT:
        raise KeyboardInterrupt
    if run.signalled is not None:
        raise Terminated(run.signalled)
    return run.result()
