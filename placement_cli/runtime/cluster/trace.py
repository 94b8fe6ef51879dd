"""`placement trace --cluster`: the user's own distributed program, one process per task, as
TensorFlow's multi-worker and parameter-server tutorials run it, each task traced as `trace` traces
one script.

Each task is ``python SCRIPT ARGS`` with the ``TF_CONFIG`` of the whole cluster (loopback ports the
launcher chose) and its own task, started through runtime.trace.child's bootstrap exactly as `trace` starts
its one child: placement logging on from the first op, C stdio's streams (TensorFlow's log) through two
pipes, facts and the uncaught error on a control pipe. Its Python stdout and stderr come through two
more pipes and are passed on live, each line prefixed with the task (``worker/1 | ...``).

The tasks are children of runtime.cluster.trace_launcher (its own session, a private network
namespace where the kernel allows one), which reaps them and ends them when told; when placement's
end of its stdin closes (placement done, failed, or killed even by SIGKILL) it kills every task's
process group. The logs to parse are unlinked temporary files: nothing is left behind.

Which tasks must finish: the chief when there is one, else every worker. Once those finished, placement
ends the tasks that serve: a ps, and a task that called ``Server.join`` (the child bootstrap says so on
its control pipe). Any other task (a worker still training under MultiWorkerMirroredStrategy) runs on
to its own end; one still running ``grace`` seconds after the chief finished is ended then: named, and
the run fails (its work was cut off), unless its script had ended (its facts came: it hangs at exit,
its work done). Every task is ended as soon as any task failed.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from typing import BinaryIO

from placement_cli.exceptions import UsageProblem
from placement_cli.i18n import N_, Message, _
from placement_cli.logparse.causes import cause as cause_of
from placement_cli.messages import TRACE, one_line
from placement_cli.model import Cause, ClusterTask
from placement_cli.runtime.capture.fds import new_pipe
from placement_cli.runtime.capture.splitter import Splitter
from placement_cli.runtime.capture.wakeup import Wakeup
from placement_cli.runtime.cluster.launch import how_it_ended, process_state
from placement_cli.runtime.cluster.trace_output import Screens, TaskLines, TracedTask, quote_lines
from placement_cli.runtime.cluster.trace_report import ClusterTraceResult, copy_sizes, merge
from placement_cli.runtime.trace.child import BOOT, ENV, NO_CAPTURE, frames
from placement_cli.runtime.trace.tracer import GRACE_IDLE, GRACE_MAX, READ, child_data, facts_of_child, min_log_level

CHIEF_GRACE = 60.0  # seconds a task neither serving nor done may run on after the chief finished (--chief-grace)
INTERRUPT_GRACE = 2.0  # seconds the tasks get to end on a signal placement forwarded, before they are killed
HOLD = 0.2  # seconds an unfinished line waits for its end before it is shown as it is


class _Run:
    def __init__(self, script: str, args: list[str], jobs: list[tuple[str, int]], cluster: dict[str, list[str]] | None,
                 *, stdout_fd: int, echo_log: bool, saved: dict[str, dict[str, BinaryIO]], copies: bool,
                 visible: dict[str, str] | None = None, grace: float = CHIEF_GRACE) -> None:
        self.script, self.args, self.jobs, self.cluster = script, args, jobs, cluster
        self.grace = grace
        self.visible = visible or {}  # --split-gpus: task -> its CUDA_VISIBLE_DEVICES
        self.stdout_fd, self.copies = stdout_fd, copies
        level = min_log_level(os.environ.get("TF_CPP_MIN_LOG_LEVEL"))
        self.tasks = [TracedTask(job, i, Splitter(parsed := tempfile.TemporaryFile(), echo_placement=echo_log,  # noqa: SIM115
                                             min_level=level), parsed)
                      for job, count in jobs for i in range(count)]
        self.by_name = {t.name: t for t in self.tasks}
        for task in self.tasks:
            task.saved = dict(saved.get(task.name, {}))
        self.by_fd: dict[int, TracedTask] = {}
        self.launcher: subprocess.Popen[bytes] | None = None
        self.events = bytearray()
        self.isolated: bool | None = None
        self.isolation_note = ""
        self.problem: Message | None = None  # placement's own trouble with the tasks
        self.first_failure: TracedTask | None = None
        self.failure: tuple[Message, bool] | None = None  # how the first failure ended, and whether to quote it
        self.busy: tuple[str, int] | None = None  # a --cluster-spec port something else listens on
        self.notes: list[str] = []
        self.signalled: int | None = None
        self.signal_deadline = 0.0
        self.finished_at: float | None = None  # when the tasks that must finish had
        self.wake = Wakeup()
        self.poller = select.poll()
        self.out = Screens(max(len(t.name) for t in self.tasks), self._sink_gone)
        self.last_data = 0.0

    # -- start ---------------------------------------------------------------------------------

    def start(self) -> None:
        theirs: list[int] = []
        specs = []
        pythonpath = os.environ.get("PYTHONPATH")
        flags = ("c" if self.copies else "") + ("p" if pythonpath is not None else "")
        for task in self.tasks:
            pipes = {kind: new_pipe() for kind in ("control", "cout", "cerr", "out", "err")}
            for kind, (read, write) in pipes.items():
                self.by_fd[read] = task
                task.fds[read] = kind
                theirs.append(write)
            task.channels = {"cout": task.splitter.channel("stdout", stdout=True),
                             "cerr": task.splitter.channel("stderr", stdout=False)}
            out_sink, err_sink = self.stdout_fd, 2
            task.lines = {"out": TaskLines(out_sink), "cout": TaskLines(out_sink), "err": TaskLines(err_sink),
                          "cerr": TaskLines(err_sink)}
            self.out.watch(out_sink)
            self.out.watch(err_sink)
            specs.append({"job": task.job, "index": task.index, "flags": flags,
                          "trace_fds": [pipes[k][1] for k in ("control", "cout", "cerr")],
                          "stdout": pipes["out"][1], "stderr": pipes["err"][1],
                          "env": {"CUDA_VISIBLE_DEVICES": self.visible[task.name]} if task.name in self.visible else {}})
        env = {**os.environ, "PYTHONPATH": BOOT + (os.pathsep + pythonpath if pythonpath else "")}
        request = {"jobs": self.jobs, "cluster": self.cluster, "tasks": specs, "env": env, "control_variable": ENV,
                   "argv": [sys.executable, *(["--"] if self.script.startswith("-") else []), self.script, *self.args]}
        self._install_signals()
        try:
            self.launcher = subprocess.Popen(
                [sys.executable, "-P", "-m", "placement_cli.runtime.cluster.trace_launcher"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, pass_fds=theirs, start_new_session=True)
        finally:
            for fd in theirs:
                os.close(fd)
        assert self.launcher.stdin is not None
        self.launcher.stdin.write(json.dumps(request).encode() + b"\n")
        self.launcher.stdin.flush()

    def _install_signals(self) -> None:
        self.wake.install((signal.SIGINT, signal.SIGTERM, signal.SIGHUP), self._signalled)

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
        poller = self.poller
        for fd in (self.wake.fd, events_fd, *self.by_fd):
            poller.register(fd, select.POLLIN)
        while True:
            ready = {fd for fd, _ in poller.poll(self._timeout())}
            if self.wake.fd in ready:
                self.wake.drain()
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
                for task in self.tasks:  # a line still unfinished ends: placement's words come next
                    for kind in task.lines:
                        self._last_line(task, kind)
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
            elif kind == "busy":
                self.busy = (str(event.get("task")), int(event.get("port", 0)))

    def _launcher_gone(self) -> None:
        for task in self.tasks:
            if task.status is None:
                task.status = -signal.SIGKILL
                task.ended = True
        if self.problem is None and self.busy is None:
            self.problem = Message(N_("placement's launcher of the tasks ended before them"))

    def _failed(self, task: TracedTask, how: Message, *, quote: bool) -> None:
        """The first task that failed is named, with the end of its own stderr; every other task is ended."""
        if self.first_failure is None:
            self.first_failure = task
            self.failure = (how, quote)  # said at the end, when the last lines of its stderr are in
        self._end_all()

    def _failure_said(self) -> Message | None:
        task = self.first_failure
        if task is None or self.failure is None:
            return self.problem
        how, quote = self.failure
        said = Message(N_("{task} (pid {pid}) {how}"), task=task.name, pid=task.pid, how=how)
        tail = " | ".join(task.tail) if quote else ""
        found = self._cause()
        # TensorFlow's cause first (where the quoted lines lack it), then the lines around it
        if found is not None and (found.line not in tail or (found.log_line or "") not in tail):
            tail = f"{found.said} | {tail}" if tail else found.said
        return Message(N_("{problem}: {tail}"), problem=said, tail=tail) if tail else said

    def _cause(self) -> Cause | None:
        """Why the first failed task stopped, in TensorFlow's words: the cause line of what its stderr
        said last (a traceback's error), and the GPU line it said before, if any."""
        task = self.first_failure
        if task is None or self.failure is None:
            return None
        found = cause_of("\n".join(task.tail) if self.failure[1] else "", "\n".join(task.gpu))
        return found if found is not None and (found.kind != "other" or self.failure[1]) else None

    def _end_all(self) -> None:
        for other in self.tasks:
            self._end(other)

    def _end(self, task: TracedTask) -> None:
        if task.status is None and not task.ended and self.launcher is not None and self.launcher.stdin is not None:
            task.ended = True
            try:
                self.launcher.stdin.write(f"end {task.name}\n".encode())
                self.launcher.stdin.flush()
            except OSError:
                pass

    def _must_finish(self) -> list[TracedTask]:
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
        if self.finished_at is None and all(t.status == 0 for t in must):
            self.finished_at = now
        if self.finished_at is None or self.first_failure is not None:
            return
        for task in self.tasks:  # only a task that serves is ended: never one at work
            if task.job == "ps" or task.serving:
                self._end(task)
        if now - self.finished_at >= self.grace:
            for task in self.tasks:
                if task.status is None and not task.ended and task.facts_raw is not None:
                    self._end(task)  # its script has ended (its facts came): stuck at exit, its work done
                elif task.status is None and not task.ended:
                    self._failed(task, Message(
                        N_("was still running {seconds:g} s after {tasks} finished, neither serving (Server.join) "
                           "nor done: placement ended it, its work cut off"),
                        seconds=self.grace, tasks=" and ".join(t.name for t in must)), quote=False)

    def _finished(self, now: float) -> bool:
        if any(t.status is None for t in self.tasks):
            return False
        last_exit = max(t.exit_time for t in self.tasks)
        open_fds = any(True for _ in self.by_fd)
        return not open_fds or now - last_exit >= GRACE_MAX or \
            (now - last_exit >= GRACE_IDLE and now - self.last_data >= GRACE_IDLE)

    # -- output --------------------------------------------------------------------------------

    def _read(self, task: TracedTask, fd: int, poller: select.poll) -> None:
        kind = task.fds[fd]
        data = os.read(fd, READ)
        if not data:
            self._close(task, fd)
            if kind in task.channels:
                task.splitter.close(task.channels[kind])  # its rest comes out in _write_out, then the line ends
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

    def _control(self, task: TracedTask, data: bytes) -> None:
        task.control_buf += data
        for kind, payload in frames(task.control_buf):
            if kind == b"L":
                task.splitter.min_level = min_log_level(payload.decode("utf-8", "replace"))
            elif kind == b"F":
                task.facts_raw = payload
            elif kind == b"E":
                self._save(task, "log", payload)
                task.splitter.errors(payload)
            elif kind == b"J":
                task.serving = True
            else:
                self.notes.append(f"{task.name}: {NO_CAPTURE}")

    def _save(self, task: TracedTask, kind: str, data: bytes) -> None:
        saved = task.saved.get(kind)
        if saved is not None:
            try:
                saved.write(data)
            except OSError as exc:
                self.notes.append(f"--save-log: stopped writing {saved.name} ({exc.strerror})")
                task.saved.pop(kind)

    def _close(self, task: TracedTask, fd: int) -> None:
        """Our end of one of the task's pipes closes: at its end, or (its stdout or stderr) when what
        placement passes it on to is gone."""
        self.poller.unregister(fd)
        os.close(fd)
        del self.by_fd[fd]
        lines = task.lines.get(task.fds[fd])
        if lines is not None:
            lines.eof = True

    def _write_out(self, task: TracedTask, now: float) -> None:
        for kind, channel in task.channels.items():
            data = channel.take()
            if data:
                self._lines_in(task, kind, data)
        for kind, lines in task.lines.items():
            if lines.eof:
                self._last_line(task, kind)
            else:
                self._flush_lines(task, kind, final=False, now=now)

    def _last_line(self, task: TracedTask, kind: str) -> None:
        """The stream ended (or the run did): what is left of it goes out, and a line it left
        unfinished is ended, so that what comes next (another task's, placement's) starts its own line.
        What it left of a line on stderr is quoted as a line of its own."""
        lines = task.lines[kind]
        if lines.done:
            return
        lines.done = True
        self._flush_lines(task, kind, final=True)
        if lines.quoted:
            quote_lines(task.tail, lines.quoted, c_stdio=kind == "cerr", gpu=task.gpu)
            lines.quoted = b""
        self.out.end_line(task.name, kind, lines.sink)

    def _lines_in(self, task: TracedTask, kind: str, data: bytes) -> None:
        lines = task.lines[kind]
        if kind in ("err", "cerr"):  # quoted by whole lines: a traceback's last line comes in several writes
            whole, newline, rest = (lines.quoted + data).rpartition(b"\n")
            if newline:
                quote_lines(task.tail, whole, c_stdio=kind == "cerr", gpu=task.gpu)
            lines.quoted = rest if len(rest) <= READ else b""
        if not lines.pending:
            lines.since = time.monotonic()
        lines.pending += data
        whole, newline, rest = lines.pending.rpartition(b"\n")
        if newline:
            lines.pending = rest
            lines.since = time.monotonic()
            self.out.emit(task.name, kind, lines.sink, whole + b"\n")

    def _flush_lines(self, task: TracedTask, kind: str, *, final: bool, now: float = 0.0) -> None:
        lines = task.lines[kind]
        if lines.pending and (final or now - lines.since >= HOLD or len(lines.pending) > READ):
            data, lines.pending = lines.pending, b""
            self.out.emit(task.name, kind, lines.sink, data, whole=False)

    def _sink_gone(self, sink: int) -> None:
        """Where the tasks' output went is gone: their own stdout (or stderr) is closed as that pipe
        would be without placement, so a task that writes there again meets EPIPE itself (as under
        `trace`, where the script writes to placement's stdout); TensorFlow's log is still read."""
        for task in self.tasks:
            for fd, kind in list(task.fds.items()):
                if kind in ("out", "err") and task.lines[kind].sink == sink and fd in self.by_fd:
                    self._close(task, fd)

    # -- end -----------------------------------------------------------------------------------

    def cleanup(self) -> None:
        self.wake.restore()
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
        self.wake.close()
        for task in self.tasks:
            for saved in task.saved.values():
                try:
                    saved.close()
                except OSError as exc:
                    self.notes.append(f"--save-log: {saved.name} may be incomplete ({exc.strerror})")

    def result(self) -> ClusterTraceResult:
        code = self._exit_code()
        parts = []
        for task in self.tasks:
            data = child_data(task.facts_raw)  # read once: its facts and its copies' sizes
            parts.append((task.job, task.index, task.parsed, (*facts_of_child(data), copy_sizes(data))))
        report, graph = merge(parts)
        title = Message(TRACE, script=one_line(self.script), code=code)
        report, graph = replace(report, title=title), replace(graph, title=title)
        tasks = tuple(ClusterTask(job=t.job, task=t.index, target=None if t.address is None else f"grpc://{t.address}",
                                  pid=t.pid, exit_code=t.status, ended_by_placement=t.ended,
                                  cuda_visible_devices=self.visible.get(t.name, os.environ.get("CUDA_VISIBLE_DEVICES")))
                      for t in self.tasks)
        signalled = self.signalled  # the tasks ended because placement passed them the signal: no task's failure
        return ClusterTraceResult(report=report, graph=graph, exit_code=code, tasks=tasks, isolated=self.isolated,
                                  isolation_note=self.isolation_note,
                                  problem=self._failure_said() if signalled is None else None,
                                  cause=self._cause() if signalled is None else None,
                                  notes=tuple(self.notes),
                                  output_closed=self.stdout_fd in self.out.dead, signalled=signalled)

    def _exit_code(self) -> int:
        """The chief's when it failed, else the first failing task's (1 for one placement ended: a task
        found stopped, or cut off at work), else 0; a signal as the shell gives it (128 + N). A signal
        placement received and passed to the tasks ends the run as that signal (Ctrl-C: 130)."""
        if self.signalled is not None:
            return 128 + self.signalled
        chief = self.by_name.get("chief/0")
        if chief is not None and chief.status is not None and not chief.ended and chief.status != 0:
            code = chief.status
        elif self.first_failure is not None and self.first_failure.status is not None:
            # a task found stopped was killed by placement: that signal is not its own code
            code = 1 if self.first_failure.ended else self.first_failure.status or 1
        elif self.problem is not None or self.first_failure is not None:
            code = 1
        else:
            code = 0
        return 128 - code if code < 0 else code


def run_cluster_traced(script: str, args: list[str], jobs: list[tuple[str, int]],
                       cluster: dict[str, list[str]] | None = None, *, stdout_fd: int = 1, echo_log: bool = False,
                       saved: dict[str, dict[str, BinaryIO]] | None = None, copies: bool = False,
                       visible: dict[str, str] | None = None, grace: float = CHIEF_GRACE) -> ClusterTraceResult:
    """Run every task of the cluster to its end (or placement's), then parse and explain what each placed.
    A signal placement received ends the run after the tasks had it; the report of what they placed until
    then still comes (``signalled``), as `trace` reports a script that was interrupted."""
    run = _Run(script, args, jobs, cluster, stdout_fd=stdout_fd, echo_log=echo_log, saved=saved or {}, copies=copies,
               visible=visible, grace=grace)
    try:
        run.start()
        run.run()
    finally:
        run.cleanup()
    if run.busy is not None:
        task, port = run.busy
        raise UsageProblem(_("port {port} is in use: another program listens on it ({task} of the cluster spec; "
                             "give a free port)").format(port=port, task=task))
    return run.result()
