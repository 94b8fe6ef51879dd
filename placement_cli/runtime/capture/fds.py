"""What every part of runtime/ does to a file descriptor and to C's stdio, done one way."""

from __future__ import annotations

import ctypes
import fcntl
import os
import select
import stat
import sys

_PIPE_SIZE = 1 << 20
_F_SETPIPE_SZ = 1031  # fcntl's F_SETPIPE_SZ (Linux)


def write_all(fd: int, data: bytes) -> None:
    """All of ``data`` to ``fd``, however many writes it takes (a pipe takes a part at a time); a sink
    someone left non-blocking is waited for until it takes more."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:
            select.select([], [fd], [])


def flush_c_stdio() -> None:
    """What C code printed and libc still holds (TensorFlow's printf copy of each placement sits in
    libc's stdout buffer): written now, before anything that must come after it."""
    try:
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):
        pass


def new_pipe() -> tuple[int, int]:
    read, write = os.pipe()
    try:
        fcntl.fcntl(write, _F_SETPIPE_SZ, _PIPE_SIZE)  # fewer wake-ups for a chatty log
    except OSError:
        pass
    return read, write


def reopen_closed_stdio() -> frozenset[int]:
    """The stdio fds that were closed when placement started (python then leaves sys.stdin,
    sys.stdout or sys.stderr None). /dev/null takes their place here, so nothing placement opens
    lands on fd 0-2 and its own messages go nowhere; the child is told to close them again."""
    closed = set()
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        if getattr(sys, name) is not None:
            continue
        closed.add(fd)
        try:
            os.fstat(fd)
            null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)  # something else holds that fd now
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd, inheritable=False)
                os.close(null)
                null = fd
        setattr(sys, name, open(null, "r" if fd == 0 else "w", closefd=False, encoding="utf-8"))  # noqa: SIM115
    return frozenset(closed)


def fresh_line(fd: int) -> None:
    """Where the script left its last line on ``fd`` unfinished, start a new one, so that placement's
    report and messages begin on a line of their own. A terminal cannot be asked cheaply where its
    cursor is: as a shell does before its prompt, a line of spaces, then a carriage return, leaves
    the cursor at the start of the line it was on if that was empty, else of the next one (the
    spaces wrap). A file's last byte is read. A pipe's cannot be known: left as it is."""
    try:
        mode = os.fstat(fd).st_mode
        if os.isatty(fd):
            columns = os.get_terminal_size(fd).columns
            if columns > 0:
                write_all(fd, b" " * columns + b"\r")
            return
        if not stat.S_ISREG(mode):
            return
        end = os.lseek(fd, 0, os.SEEK_CUR)
        if end <= 0:
            return
        with open(f"/proc/self/fd/{fd}", "rb") as written:
            written.seek(end - 1)
            last = written.read(1)
        if last not in (b"", b"\n"):
            write_all(fd, b"\n")
    except OSError:  # no such fd, no /proc, a file that cannot be read back: nothing known
        return
