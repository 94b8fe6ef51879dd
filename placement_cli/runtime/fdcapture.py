"""File-descriptor-level capture of TensorFlow's C++ output (printf and glog)."""

from __future__ import annotations

import ctypes
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass
class Captured:
    """What fds 1 and 2 received inside a ``capture_fds`` block, in write order."""

    text: str = ""


def _flush_all() -> None:
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except (ValueError, OSError):
            pass
    try:  # TensorFlow's printf copy sits in libc's stdout buffer until flushed.
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):
        pass


@contextmanager
def capture_fds(fds: tuple[int, ...] = (1, 2)) -> Iterator[Captured]:
    """Send ``fds`` into one temporary file (never a pipe: no buffer can fill), restore them
    afterwards, and leave the text in the yielded Captured."""
    captured = Captured()
    _flush_all()
    with tempfile.TemporaryFile(mode="w+b") as sink:
        saved = {fd: os.dup(fd) for fd in fds}
        try:
            for fd in fds:
                os.dup2(sink.fileno(), fd)
            yield captured
        finally:
            _flush_all()
            for fd, copy in saved.items():
                os.dup2(copy, fd)
                os.close(copy)
            sink.seek(0)
            captured.text = sink.read().decode("utf-8", "replace")


@contextmanager
def silenced(fd: int = 2) -> Iterator[None]:
    """Send ``fd`` to /dev/null for the block (TensorFlow warns on stderr for each failed kernel lookup)."""
    _flush_all()
    saved = os.dup(fd)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
        yield
    finally:
        _flush_all()
        os.dup2(saved, fd)
        os.close(saved)
        os.close(devnull)
