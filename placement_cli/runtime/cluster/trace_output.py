"""The tasks' output of `placement trace --cluster` on placement's stdout and stderr: each line after
its task's prefix (``worker/1 | ...``), a line never glued to another source's or to placement's own
words; and the lines of a task's stderr that say why it failed."""

from __future__ import annotations

import collections
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from placement_cli.logparse import glog
from placement_cli.logparse.causes import gpu_kind, start_up_noise
from placement_cli.runtime.capture.fds import write_all
from placement_cli.runtime.capture.splitter import Channel, Splitter

_GLOG_ERROR = re.compile(glog.ERROR_START.decode())
TAIL = 6  # lines of a failed task's own stderr quoted


def says_why(line: str, *, c_stdio: bool) -> bool:
    """A line of a task's stderr worth quoting when it failed: the script's own (Python's stderr:
    its traceback, its messages), and TensorFlow's errors, not the start-up chatter of every task."""
    if not line.strip():
        return False
    if not c_stdio:
        return True
    return bool(_GLOG_ERROR.match(line)) and not start_up_noise(line)


def quote_lines(tail: collections.deque[str], data: bytes, *, c_stdio: bool, gpu: list[str] | None = None) -> None:
    """Whole lines of a task's stderr: those that say why it failed are kept in ``tail``; the first
    that names GPU trouble (memory, a library handle) in ``gpu``, however long ago it was said."""
    for raw in data.split(b"\n"):
        line = raw.decode("utf-8", "replace")
        if says_why(line, c_stdio=c_stdio):
            tail.append(line.strip())
            if gpu is not None and not gpu and gpu_kind(line):
                gpu.append(line.strip())


def _screen(fd: int) -> Any:
    """What ``fd`` writes to, so that two fds on one terminal, pipe or file are known as one."""

    try:
        st = os.fstat(fd)
    except OSError:
        return fd
    return st.st_dev, st.st_ino


class Screens:
    """placement's stdout and stderr as the tasks' lines reach them. A source (a task's stream) that
    left its line unfinished on a screen owns it: another source's line, or placement's words, first
    end it; the owner's next piece goes on where it was. ``gone(sink)`` is called once when writing
    there fails (EPIPE: `| head -1` is done; EIO: the terminal is gone); nothing is written there again."""

    def __init__(self, width: int, gone: Callable[[int], None]) -> None:
        self.width = width
        self.gone = gone
        self.screens: dict[int, Any] = {}  # sink -> what it writes to (stdout and stderr on one terminal: one)
        self.midline: dict[Any, tuple[str, str]] = {}  # screen -> (task, source) whose line is unfinished there
        self.dead: set[int] = set()

    def watch(self, sink: int) -> None:
        self.screens.setdefault(sink, _screen(sink))

    def emit(self, task: str, source: str, sink: int, data: bytes, *, whole: bool = True) -> None:
        """``data``'s lines, each after its task's prefix, on ``sink`` (``whole``: ``data`` ends with
        its last line's newline)."""
        if sink in self.dead:
            return
        prefix = f"{task:<{self.width}} | ".encode()
        out = bytearray()
        me = (task, source)
        screen = self.screens.get(sink, sink)
        owner = self.midline.get(screen)
        if owner is not None and owner != me:
            out += b"\n"
        continuing = owner == me
        lines = data.split(b"\n")
        if whole:
            lines.pop()  # what follows the last newline: nothing
        for i, line in enumerate(lines):
            out += (b"" if i == 0 and continuing else prefix) + line
            if whole or i < len(lines) - 1:
                out += b"\n"
        if whole:
            self.midline.pop(screen, None)
        else:
            self.midline[screen] = me
        self._write(sink, bytes(out))

    def end_line(self, task: str, source: str, sink: int) -> None:
        """The source ended: a line it left unfinished ends here."""
        screen = self.screens.get(sink, sink)
        if self.midline.get(screen) == (task, source):
            del self.midline[screen]
            self._write(sink, b"\n")

    def _write(self, sink: int, data: bytes) -> None:
        if sink in self.dead:
            return
        try:
            write_all(sink, data)
        except OSError:
            self.dead.add(sink)
            self.gone(sink)


@dataclass
class TaskLines:
    """One source of a task's output (its Python stdout, or C stdio's rest) on its way to one sink,
    prefixed line by line."""

    sink: int
    pending: bytes = b""
    since: float = 0.0
    quoted: bytes = b""  # stderr: what follows the last whole line, kept for the failure's quote
    eof: bool = False  # the task's end of the pipe closed (or placement closed ours)
    done: bool = False  # and its last line went out, ended


@dataclass
class TracedTask:
    job: str
    index: int
    splitter: Splitter
    parsed: Any
    fds: dict[int, str] = field(default_factory=dict)  # our read end -> "control", "cout", "cerr", "out", "err"
    channels: dict[str, Channel] = field(default_factory=dict)
    lines: dict[str, TaskLines] = field(default_factory=dict)
    control_buf: bytearray = field(default_factory=bytearray)
    facts_raw: bytes | None = None
    error_text: bytes | None = None
    pid: int | None = None
    address: str | None = None
    status: int | None = None
    exit_time: float = 0.0
    ended: bool = False  # placement ended it (a serving task, or after another failed)
    serving: bool = False  # it called Server.join: it serves until it is ended
    tail: collections.deque[str] = field(default_factory=lambda: collections.deque(maxlen=TAIL))
    gpu: list[str] = field(default_factory=list)  # the first line of its stderr that named GPU trouble
    saved: dict[str, BinaryIO] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.job}/{self.index}"
