"""`placement trace`: run a user's program as `python SCRIPT` would, placement logging on, then report.

This is the parent. The child (runtime.trace.child) inherits placement's stdin, stdout and stderr: the
program's own output goes where it would without placement, untouched and at full speed. Only C
stdio's ``stdout`` and ``stderr``, where TensorFlow's C++ writes its log, come back through two
pipes; runtime.capture.splitter keeps TensorFlow's placement lines from them and passes the rest on. The
child runs in its own process group; when placement is in its terminal's foreground, that group
gets the foreground (as a shell would give it), so Ctrl-C and Ctrl-Z reach the script exactly as
without placement; every signal placement itself receives is forwarded to the group once. No file
is left behind in any exit path: the log to parse is an unlinked temporary file, and the child
dies with placement (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import importlib.machinery
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, BinaryIO

from placement_cli.exceptions import UsageProblem
from placement_cli.i18n import Message, _
from placement_cli.logparse import glog
from placement_cli.logparse.engine import parse_streams
from placement_cli.messages import TRACE, one_line
from placement_cli.model import Copy, Edge, Origin, Report
from placement_cli.model.facts import Facts
from placement_cli.runtime.capture.fds import new_pipe, write_all
from placement_cli.runtime.capture.splitter import Channel, Splitter
from placement_cli.runtime.capture.wakeup import Wakeup
from placement_cli.runtime.trace.child import BOOT, ENV, NO_CAPTURE, PROFILE_ENV, frames
from placement_cli.tfrules import compiled_calls
from placement_cli.why import explain, facts_from_dict, xla_lines

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2,
             signal.SIGTSTP)
GRACE_IDLE = 0.1  # after the script exits, its log still in the pipes is read until idle this long
GRACE_MAX = 1.0  # ... or this long at most (a process it forked may hold the pipes open)
LINGER = 1.0  # ... and a process it started that is ending too, this long at most
READ = 1 << 20


@dataclass(frozen=True)
class TraceResult:
    report: Report
    exit_code: int
    output_closed: bool = False  # our stdout went away during the run (| head): nowhere to print the report
    notes: tuple[str, ...] = ()  # what the user should hear on stderr


def check_script(script: str) -> None:
    """What ``python SCRIPT`` runs: a file (source, or a zip archive holding __main__.py), or a
    folder with a __main__ module, found as python finds it (python sets sys.argv[0] and sys.path[0])."""
    if os.path.isfile(script):
        return
    if os.path.isdir(script):
        if importlib.machinery.PathFinder.find_spec("__main__", [script]) is None:
            raise UsageProblem(_("{script}: a folder with no __main__.py (python runs a folder by its __main__.py)").format(
                script=one_line(script)))
        return
    raise UsageProblem(_("{script}: no such script").format(script=one_line(script)))


@dataclass
class _Stream:
    """Our end of one of the child's C stdio streams."""

    fd: int
    sink: int | None  # where what is not kept goes; None: the user closed it
    channel: Channel
    eof: bool = False
    dead: bool = False  # writing to the sink failed (a closed pipe, a gone terminal)


def _foreground_terminal() -> int | None:
    """An fd on our controlling terminal when our process group is its foreground, else None."""
    try:
        tty = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if os.tcgetpgrp(tty) == os.getpgrp():
            return tty
    except OSError:
        pass
    os.close(tty)
    return None


def _set_foreground(tty: int, group: int) -> None:
    """tcsetpgrp from the background raises SIGTTOU: ignored for the switch, as shells do."""
    old = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    try:
        os.tcsetpgrp(tty, group)
    except OSError:
        pass
    finally:
        signal.signal(signal.SIGTTOU, old)


def _still_running(group: int) -> bool:
    """Does a live (not zombie) process remain in the child's process group?"""
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[2] == str(group).encode() and fields[0] != b"Z":
            return True
    return False


def _lingers(group: int) -> bool:
    """Whether a process of the child's group still runs once the ones that were only exiting are gone:
    helpers that end when the script does (multiprocessing's resource tracker of a spawn pool sees its
    pipe close) take a few milliseconds more; one that runs on past LINGER is the script's to know of."""
    end = time.monotonic() + LINGER
    while _still_running(group):
        if time.monotonic() >= end:
            return True
        time.sleep(0.02)
    return False


class _Supervisor:
    """Runs one traced child to its end: signals, terminal, TensorFlow's log, facts."""

    def __init__(self, script: str, args: list[str], *, stdout_fd: int, echo_log: bool,
                 save_log: BinaryIO | None, copies: bool, closed: frozenset[int],
                 timed: tuple[int, int] | None = None) -> None:
        self.script, self.args, self.copies, self.closed = script, args, copies, closed
        self.timed = timed  # --time: the step's calls the times leave out, and the most steps they measure
        self.profile_dir: str | None = None
        self.stdout_fd = stdout_fd
        self.save_log = save_log
        self.parsed = tempfile.TemporaryFile()  # unlinked: gone with us whatever happens  # noqa: SIM115
        self.splitter = Splitter(self.parsed, echo_placement=echo_log,
                                 min_level=min_log_level(os.environ.get("TF_CPP_MIN_LOG_LEVEL")),
                                 hidden_files=glog.PROFILER_SOURCES if timed is not None else frozenset())
        self.streams: list[_Stream] = []
        self.child: subprocess.Popen[bytes] | None = None
        self.tty: int | None = None
        self.status: int | None = None  # as os.waitstatus_to_exitcode gives it
        self.exit_time = 0.0
        self.last_data = 0.0
        self.control: int | None = None
        self.control_buf = bytearray()
        self.facts_raw: bytes | None = None
        self.wake = Wakeup()
        self.pending_signals: list[int] = []
        self.output_closed = False
        self.notes: list[str] = []

    # -- start -----------------------------------------------------------------------------

    def start(self) -> None:
        out_sink = None if self.stdout_fd in self.closed else self.stdout_fd
        err_sink = None if 2 in self.closed else 2
        pipes = [new_pipe(), new_pipe(), new_pipe()]  # control, C stdout, C stderr
        self.control = pipes[0][0]
        self.streams = [_Stream(pipes[1][0], out_sink, self.splitter.channel("stdout", stdout=True)),
                        _Stream(pipes[2][0], err_sink, self.splitter.channel("stderr", stdout=False))]
        theirs = [write for _, write in pipes]
        for fd in theirs:
            os.set_inheritable(fd, True)
        pythonpath = os.environ.get("PYTHONPATH")
        flags = ("c" if self.copies else "") + ("p" if pythonpath is not None else "") \
            + ("1" if out_sink is None and self.stdout_fd != 1 else "") \
            + (f"t{self.timed[0]}.{self.timed[1]}" if self.timed is not None else "")
        env = {**os.environ, ENV: f"{','.join(map(str, theirs))}:{os.getpid()}:{flags}",
               "PYTHONPATH": BOOT + (os.pathsep + pythonpath if pythonpath else "")}
        if self.timed is not None:  # the profiler's files: a folder of placement's, gone however the script ends
            from placement_cli.runtime.profiler import new_folder  # noqa: PLC0415 - start-up: a timed run's

            self.profile_dir = new_folder()
            env[PROFILE_ENV] = self.profile_dir
        self.tty = _foreground_terminal()
        self._install_signals()  # before the child exists: a Ctrl-C while it starts is the script's too
        try:
            self.child = subprocess.Popen(  # noqa: S603 - the user's own script, by design
                [sys.executable, *(["--"] if self.script.startswith("-") else []), self.script, *self.args], env=env,
                stdout=None if self.stdout_fd == 1 else self.stdout_fd,
                close_fds=False, process_group=0)  # every fd placement inherited is the script's too
        finally:
            for fd in theirs:
                os.close(fd)
        if self.tty is not None:
            _set_foreground(self.tty, self.child.pid)
        for signum in self.pending_signals:  # arrived while the child was being started
            self._forward(signum, None)
        self.pending_signals.clear()
        self.last_data = time.monotonic()

    def _install_signals(self) -> None:
        """Installed before the child starts, so no signal falls between its start and ours: exec
        resets a handled signal to its default in the child, and a signal placement ignores is left
        ignored (no handler is installed for it), so the script inherits placement's own
        dispositions, as under plain python."""
        self.wake.install(FORWARDED, self._forward, also={signal.SIGCHLD: lambda *_: None})

    def _forward(self, signum: int, _frame: object) -> None:
        """Each signal placement receives goes to the child's group once. SIGTSTP stops the
        script (placement follows it when it sees it stopped). One that comes before the child
        exists is kept, and sent once it does."""
        if self.child is None:
            self.pending_signals.append(signum)
            return
        try:
            os.killpg(self.child.pid, signum)
        except OSError:
            pass

    # -- run -------------------------------------------------------------------------------

    def run(self) -> None:
        poller = select.poll()
        assert self.control is not None
        for fd in (self.wake.fd, self.control, *(s.fd for s in self.streams)):
            poller.register(fd, select.POLLIN)
        while True:
            events = poller.poll(self._timeout(time.monotonic()))
            ready = {fd for fd, _ in events}
            if self.wake.fd in ready or not events:
                self.wake.drain()
                self._reap()
            if self.control in ready:  # first: the script's log level comes before TF's lines
                self._read_control(poller)
            for stream in self.streams:
                if stream.fd in ready and not stream.eof:
                    self._read(stream, poller)
            self.splitter.tick()
            self._write_out()
            if self._finished():
                return

    def _timeout(self, now: float) -> int | None:
        times = [self.splitter.deadline()]
        if self.status is not None:
            times += [max(self.last_data, self.exit_time) + GRACE_IDLE, self.exit_time + GRACE_MAX]
        when = min((t for t in times if t is not None), default=None)
        return None if when is None else max(0, int((when - now) * 1000) + 1)

    def _reap(self) -> None:
        if self.status is not None or self.child is None:
            return
        try:
            pid, status = os.waitpid(self.child.pid, os.WNOHANG | os.WUNTRACED)
        except ChildProcessError:
            pid, status = self.child.pid, 0
        if pid == 0:
            return
        if os.WIFSTOPPED(status):
            self._child_stopped(os.WSTOPSIG(status))
            return
        self.status = os.waitstatus_to_exitcode(status)
        self.child.returncode = self.status
        self.exit_time = time.monotonic()

    def _child_stopped(self, sig: int) -> None:
        """Ctrl-Z (or SIGSTOP, or reading the terminal from the background) stopped the script:
        the job stops, as it would without placement; when it is continued, so is the script."""
        assert self.child is not None
        if self.tty is not None and sig in (signal.SIGTTIN, signal.SIGTTOU):
            try:
                if os.tcgetpgrp(self.tty) == self.child.pid:  # stopped just before it got the terminal
                    os.killpg(self.child.pid, signal.SIGCONT)
                    return
            except OSError:
                pass
        if self.tty is not None:
            _set_foreground(self.tty, os.getpgrp())
            os.killpg(os.getpgrp(), signal.SIGSTOP)
        else:
            os.kill(os.getpid(), signal.SIGSTOP)
        # continued (fg or bg): the script goes on too, with the terminal if we have it again
        if self.tty is not None:
            try:
                if os.tcgetpgrp(self.tty) == os.getpgrp():
                    _set_foreground(self.tty, self.child.pid)
            except OSError:
                pass
        try:
            os.killpg(self.child.pid, signal.SIGCONT)
        except OSError:
            pass

    def _read_control(self, poller: select.poll) -> None:
        assert self.control is not None
        data = os.read(self.control, READ)
        if not data:
            poller.unregister(self.control)
            os.close(self.control)
            self.control = None
            return
        self.last_data = time.monotonic()
        self.control_buf += data
        for kind, payload in frames(self.control_buf):
            if kind == b"L":  # the script imports TensorFlow, with this TF_CPP_MIN_LOG_LEVEL
                self.splitter.min_level = min_log_level(payload.decode("utf-8", "replace"))
            elif kind == b"F":
                self.facts_raw = payload
            elif kind == b"E":
                self._save(payload)
                self.splitter.errors(payload)
            elif kind == b"X":  # (J, a Server.join, matters to trace --cluster alone)
                self.notes.append(NO_CAPTURE)

    def _read(self, stream: _Stream, poller: select.poll) -> None:
        data = os.read(stream.fd, READ)
        if not data:
            stream.eof = True
            poller.unregister(stream.fd)
            os.close(stream.fd)
            self.splitter.close(stream.channel)
            return
        self.last_data = time.monotonic()
        self._save(data)
        self.splitter.feed(stream.channel, data)

    def _save(self, data: bytes) -> None:
        if self.save_log is not None:
            try:
                self.save_log.write(data)
            except OSError as exc:
                self.notes.append(f"--save-log: stopped writing the log ({exc.strerror})")
                self.save_log = None

    def _write_out(self) -> None:
        for stream in self.streams:
            data = stream.channel.take()
            if not data or stream.sink is None or stream.dead:
                continue
            try:
                write_all(stream.sink, data)
            except OSError:  # EPIPE (| head -1 is done), EIO (the terminal is gone): those lines go nowhere
                stream.dead = True
                self.output_closed = self.output_closed or stream.sink == 1

    def _finished(self) -> bool:
        if self.status is None:
            return False
        if any(not s.eof for s in self.streams) or (self.control is not None and self.facts_raw is None):
            now = time.monotonic()
            if now - max(self.last_data, self.exit_time) < GRACE_IDLE and now - self.exit_time < GRACE_MAX:
                return False
        assert self.child is not None
        if _lingers(self.child.pid):
            self.notes.append(_("{script} exited; a process it started is still running (placement does not wait "
                                "for it)").format(script=one_line(self.script)))
        return True

    # -- end -------------------------------------------------------------------------------

    def cleanup(self) -> None:
        """Every exit path: signals back as they were, the terminal back, no child left, no fd open."""
        self.wake.restore()
        if self.child is not None and self.status is None:  # placement failed while the script ran
            try:
                os.killpg(self.child.pid, signal.SIGKILL)
            except OSError:
                pass
            self.child.wait()
        if self.tty is not None:
            _set_foreground(self.tty, os.getpgrp())
            os.close(self.tty)
            self.tty = None
        for stream in self.streams:
            if not stream.eof:
                stream.eof = True
                os.close(stream.fd)
        if self.control is not None:
            os.close(self.control)
        self.control = None
        self.wake.close()
        if self.profile_dir is not None:  # the script read its profile, or never will
            shutil.rmtree(self.profile_dir, ignore_errors=True)
            self.profile_dir = None

    def result(self) -> TraceResult:
        size = self.parsed.seek(0, 2)
        self.parsed.seek(0)
        parsed = parse_streams([("<trace>", self.parsed)]) if size else Report()
        self.parsed.seek(0)
        text = self.parsed.read().decode("utf-8", "replace")
        self.parsed.close()
        code = self.status if self.status is not None else 1
        if code < 0:
            code = 128 - code  # killed by a signal: the shell's convention
        data = child_data(self.facts_raw)
        facts, copied, edges, switched = facts_of_child(data)
        self.notes.extend(_("requests and reasons that need it are unknown: {missing}").format(missing=missing)
                          for missing in facts.missing)
        if switched == "kept":
            self.notes.append(_("{script} switched placement logging off (tf.debugging.set_log_device_placement(False)); "
                                "placement kept it on, so its placements are all here (the script read back its own "
                                "setting)").format(script=one_line(self.script)))
        elif switched:
            self.notes.append(_("{script} switched placement logging off (tf.debugging.set_log_device_placement(False)): "
                                "what it placed after that may be missing from the report").format(script=one_line(self.script)))
        placements = explain(parsed.placements, facts)
        compiled = compiled_calls(placements, facts.compiled, xla_lines(parsed.placements, facts))
        cost, timing_error = None, None
        if self.timed is not None:
            from placement_cli.runtime.trace.timed import timed_cost  # noqa: PLC0415 - start-up: a timed run's

            cost, timing_error = timed_cost(data, placements)
        report = replace(parsed, placements=placements, log=text, compiled=compiled,
                         title=Message(TRACE, script=one_line(self.script), code=code), copies=copied, edges=edges,
                         origin=Origin.RUN, cost=cost, timing_error=timing_error)
        return TraceResult(report=report, exit_code=code, output_closed=self.output_closed, notes=tuple(self.notes))


def min_log_level(value: str | None) -> int:
    return int(value) if value and value.strip().isdigit() else 0


def run_traced(script: str, args: list[str], *, stdout_fd: int = 1, echo_log: bool = False,
               save_log: BinaryIO | None = None, copies: bool = False, closed: frozenset[int] = frozenset(),
               meanwhile: Callable[[], None] | None = None, timed: tuple[int, int] | None = None) -> TraceResult:
    """Run ``script`` in a child Python as `python SCRIPT ARGS` would (its stdout on ``stdout_fd``),
    then parse and explain what it placed. ``meanwhile`` runs in a thread while the child does
    (the CLI loads its renderers then, on the other core)."""
    check_script(script)
    supervisor = _Supervisor(script, args, stdout_fd=stdout_fd, echo_log=echo_log, save_log=save_log,
                             copies=copies, closed=closed, timed=timed)
    helper = threading.Thread(target=meanwhile, daemon=True) if meanwhile is not None else None
    try:
        supervisor.start()
        if helper is not None:
            helper.start()
        supervisor.run()
    finally:
        supervisor.cleanup()
        if save_log is not None:
            try:
                save_log.close()
            except OSError as exc:
                supervisor.notes.append(f"--save-log: the log may be incomplete ({exc.strerror})")
    if helper is not None:
        helper.join()
    return supervisor.result()


def child_data(raw: bytes | None) -> dict[str, Any] | None:
    """The child's facts document, read once (None: it sent none, or not whole: killed, or it never
    imported TensorFlow)."""
    try:
        data = json.loads(raw) if raw else None
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def facts_of_child(data: dict[str, Any] | None) -> tuple[Any, tuple[Copy, ...] | None, tuple[Edge, ...] | None, str | None]:
    """What the child recorded beside the log (copies: None when no Session ran; edges: None when
    none were sent; whether the program switched placement logging off, "kept" when TensorFlow
    logged on); no facts if it could not send them (killed, or it never imported TensorFlow)."""
    if data is None:
        return Facts(), None, None, None
    facts = facts_from_dict(data)
    copies = data.get("copies") if facts.graphs_known else None
    edges = data.get("edges")
    if isinstance(edges, list):
        edges = tuple(Edge(str(e[0]), str(e[1]), bool(e[2])) for e in edges if isinstance(e, list) and len(e) == 3)
    else:
        edges = None
    switched = data.get("logging_switched_off")
    return (facts, None if copies is None else tuple(Copy(*c) for c in copies), edges,
            switched if switched in ("kept", "off") else None)
