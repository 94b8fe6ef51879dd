"""``--summary`` of a big file on two cores: the file's second half is counted in a forked child."""

from __future__ import annotations

import os
import pickle
from typing import Any

from placement_cli.logparse.engine import count_range, merge_ranges
from placement_cli.model import Report

SPLIT_MIN = 32 << 20  # smaller files are done before a second process would pay off


def can_split(path: str) -> bool:
    return hasattr(os, "fork") and (os.cpu_count() or 1) > 1 and os.path.isfile(path) \
        and os.path.getsize(path) >= SPLIT_MIN


def _boundary(path: str, size: int) -> int:
    """The start of the first line at or after the middle of the file."""
    with open(path, "rb") as f:
        f.seek(size // 2)
        f.readline()
        return f.tell()


def _read_all(fd: int) -> bytes:
    parts = []
    while chunk := os.read(fd, 1 << 20):
        parts.append(chunk)
    return b"".join(parts)


def count_split(path: str) -> Report:
    """Count the two halves at once and merge them as if read in one pass."""
    size = os.path.getsize(path)
    middle = _boundary(path, size)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: count the tail, send its state, leave without cleanup handlers
        status = 0
        try:
            os.close(read_end)
            tail: Any = count_range(path, middle, size, last=True)
            tail.window.clear()
            tail.last = tail.last[-1:]
            with os.fdopen(write_end, "wb") as out:
                pickle.dump(tail, out, protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException:  # noqa: BLE001 - the parent falls back to one pass
            status = 1
        finally:
            os._exit(status)
    os.close(write_end)
    try:
        head = count_range(path, 0, middle, last=False)
        payload = _read_all(read_end)
    finally:
        os.close(read_end)
        _, status = os.waitpid(pid, 0)
    if status != 0 or not payload:
        raise RuntimeError("the counting child process failed")
    return merge_ranges(head, pickle.loads(payload))  # noqa: S301 - our own child's data
