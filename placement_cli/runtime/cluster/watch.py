"""The cluster supervisor's view of its tasks: their messages and heartbeats, the end of a failed task's
log, and which task died, stopped or fell silent, said as messages for the CLI to show (i18n.Message as
JSON)."""

from __future__ import annotations

import os
import queue as queue_module
import time
from typing import Any

from placement_cli.i18n import N_, Message
from placement_cli.logparse import written
from placement_cli.logparse.causes import cause as cause_of
from placement_cli.logparse.causes import gpu_kind, gpu_log_line, port_taken, start_up_noise
from placement_cli.model import Cause
from placement_cli.runtime.cluster.launch import how_it_ended, process_state

SILENCE_LIMIT = 45.0  # seconds without a heartbeat before a running task is named as not answering
TAIL = 6  # lines of a failed task's log quoted in its error


def log_tail(path: str, lines: int = TAIL) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            start = max(0, f.tell() - 16384)
            f.seek(start)
            data = f.read()
    except OSError:
        return ""
    if start:  # the first line read is a fragment of one: it would quote half a placement
        data = data.partition(b"\n")[2]
    text = data.decode("utf-8", "replace")
    # what says why: warnings, errors, Python's traceback; not TensorFlow's INFO chatter (placements)
    kept = [line.strip() for line in text.splitlines()
            if line.strip() and not written.INFO_LINE.match(line) and not start_up_noise(line)]
    return " | ".join(kept[-lines:])


def read_text(path: str, limit: int = 8 << 20) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(limit).decode("utf-8", "replace")
    except OSError:
        return ""


BEFORE = N_("before it was ready")
AFTER = N_("after it was ready")
TRAINING = N_("while the workers trained")


class Watch:
    """The supervisor's view of its tasks: their messages, heartbeats and steps so far; names the
    first task that died, is stopped (SIGSTOP, a debugger: /proc state T) or fell silent."""

    def __init__(self, processes: dict[str, Any], messages: Any, logdir: str) -> None:
        self.processes = processes
        self.messages = messages
        self.logdir = logdir
        self.beats: dict[str, float] = {}  # task -> when it last said it is alive
        self.steps: dict[str, int] = {}  # task -> the steps it last said it had run
        self.cause: dict[str, Any] | None = None  # the first failed task's cause (model.Cause as JSON)
        self.port_taken = False  # an error or log quoted said a task's port was taken

    def caused(self, name: str, error: str) -> str:
        """A task's error in one line with its cause: TensorFlow's cause line, and the GPU line of the
        task's log where the error names no GPU memory trouble (kept as the run's cause)."""
        found = cause_of(error, read_text(os.path.join(self.logdir, name.replace("/", "-") + ".err")))
        self.port_taken = self.port_taken or port_taken(error)
        if found is None:
            return error
        self.cause = self.cause or found.to_dict()
        return found.said

    def next(self) -> dict[str, Any] | None:
        """The tasks' next message other than a heartbeat, or None after about 0.2 s."""
        end = time.monotonic() + 0.2
        while True:
            message = poll(self.messages, max(0.0, end - time.monotonic()))
            if message is None or message["kind"] != "alive":
                return message
            self.beats[message["task"]] = time.monotonic()
            self.steps[message["task"]] = int(message.get("steps") or 0)

    def lost(self, names: set[str], stage: str, *, failed_only: bool = False) -> Message | None:
        """Why the first of ``names`` can no longer take part, or None while every one can
        (``failed_only``: a task that exited 0, having said its own error, is not named)."""
        for name, p in self.processes.items():
            if name in names and p.exitcode is not None and not (failed_only and p.exitcode == 0):
                return self._named(name, how_it_ended(p.exitcode), stage, quote=p.exitcode > 0)
        for name, p in self.processes.items():
            state = process_state(p.pid) if name in names else None
            if state in ("T", "t"):
                return self._named(name, Message(N_("was found stopped (process state {state}: SIGSTOP or a "
                                               "debugger)"), state=state), stage)
        now = time.monotonic()
        for name in self.processes:
            if name in names and name in self.beats and now - self.beats[name] > SILENCE_LIMIT:
                return self._named(name, Message(N_("has not answered placement for {seconds:g} s (process state {state})"),
                                            seconds=round(now - self.beats[name]),
                                            state=process_state(self.processes[name].pid) or "?"), stage)
        return None

    def _named(self, name: str, how: Message, stage: str, *, quote: bool = False) -> Message:
        """The task and what happened to it; ``quote``: with the end of its log, where the task ended
        itself with an error (a task killed or stopped says nothing of why: its last lines are
        TensorFlow's chatter, such as rendezvous aborts, not a reason)."""
        said = Message(N_("{task} (pid {pid}) {how} {stage}"), task=name, pid=self.processes[name].pid, how=how,
                       stage=Message(stage))
        log = os.path.join(self.logdir, name.replace("/", "-") + ".err")
        tail = log_tail(log) if quote else ""
        gpu = gpu_log_line(read_text(log))  # a task TensorFlow aborted (no tail) may have said why on its log
        if gpu is not None:
            self.cause = self.cause or Cause(line=gpu, kind=gpu_kind(gpu) or "gpu").to_dict()
            tail = gpu if not tail else tail if gpu in tail else f"{gpu} | {tail}"
        self.port_taken = self.port_taken or port_taken(tail)
        return Message(N_("{problem}: {tail}"), problem=said, tail=tail) if tail else said


def poll(messages: Any, timeout: float = 0.2) -> dict[str, Any] | None:
    """The tasks' next message, or None after ``timeout`` seconds (the caller's loop checks its deadline)."""
    try:
        got: dict[str, Any] | None = messages.get(timeout=timeout)
        return got
    except queue_module.Empty:
        return None
