"""What every part of runtime/ does to a file descriptor and to C's stdio, done one way."""

from __future__ import annotations

import ctypes
import os
import select


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
