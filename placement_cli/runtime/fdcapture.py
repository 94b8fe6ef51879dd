"""File-descriptor-level capture of TensorFlow's C++ output (printf and glog), and which of its lines are placements."""

from __future__ import annotations

import array
import ctypes
import os
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO

from placement_cli.logparse.placer import DEVICE


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


class SplitCapture:
    """Each of ``fds`` into its own temporary file (never a pipe: a writer holding the GIL can
    never block on a reader), so what is not TensorFlow's goes back to the fd it was written to.
    The originals stay open, as ``saved[fd]``, until ``stop()``."""

    def __init__(self, fds: tuple[int, ...] = (1, 2)) -> None:
        self.fds = fds
        self.saved: dict[int, int] = {}
        self._sinks: dict[int, IO[bytes]] = {}

    def start(self) -> None:
        _flush_all()  # what was written before the block is not ours
        try:
            for fd in self.fds:
                self._sinks[fd] = tempfile.TemporaryFile(mode="w+b")
                self.saved[fd] = os.dup(fd)
                os.dup2(self._sinks[fd].fileno(), fd)
        except BaseException:
            self.stop()
            raise

    def write(self, fd: int, data: bytes) -> None:
        """Add ``data`` to what ``fd`` received, in order with what TensorFlow writes there."""
        sink = self._sinks.get(fd)
        if sink is not None:
            _write_all(sink.fileno(), data)

    def stop(self) -> dict[int, bytes]:
        """Restore every fd and return what each received."""
        _flush_all()
        received: dict[int, bytes] = {}
        for fd, copy in self.saved.items():
            os.dup2(copy, fd)
            os.close(copy)
        self.saved.clear()
        for fd, sink in self._sinks.items():
            sink.seek(0)
            received[fd] = sink.read()
            sink.close()
        self._sinks.clear()
        return received


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def drain(fd: int, timeout: float = 1.0) -> None:
    """Wait, a little, until whoever reads the pipe on ``fd`` has taken what is in it: a Jupyter kernel
    forwards fd 1/2 into the running cell from a thread, and what it reads after the cell ended lands
    in another cell or nowhere."""
    try:
        import fcntl  # noqa: PLC0415 - POSIX only
        import stat  # noqa: PLC0415
        import termios  # noqa: PLC0415

        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return
        deadline = time.monotonic() + timeout
        waiting = array.array("i", [0])
        while time.monotonic() < deadline:
            fcntl.ioctl(fd, termios.FIONREAD, waiting, True)
            if waiting[0] <= 0:
                return
            time.sleep(0.005)
    except (ImportError, OSError):
        return


def write_to(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd``; a closed or broken one drops it (its reader has gone)."""
    try:
        _write_all(fd, data)
    except OSError:
        pass


# TensorFlow's placement lines as it writes them: the placer's printf copy on stdout; on stderr its
# glog copy, the eager runtime's lines and `Device mapping:` blocks. Under IPython the eager lines and
# the mapping go through a logging listener to Python's sys.stdout instead, unprefixed.
_PLACER = rb"[^\s:]++(?::[^\s:]++)*+: (?:\([^\s()]*+\): ?)?" + DEVICE
_EAGER = rb"Executing op \S++ (?:in device|on task) " + DEVICE
_END = rb"[ \t\r]*+"
# absl (TF >= 2.16: "I0000 00:00:1795232759.847888    3899 placer.cc:162] ") and older glog prefixes
_GLOG = (rb"(?:[IWEF]\d{4} \d\d:\d\d:\d++\.\d++ ++\d++ (?P<file>[^\]\s:]++):\d++\] "
         rb"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d++: [IWEF] (?P<file2>[^\]\s:]++):\d++\] )")
_BARE = re.compile(rb"(?:" + _PLACER + rb"|" + _EAGER + rb")" + _END)
_GLOG_PLACER = re.compile(_GLOG + _PLACER + _END)
_GLOG_EAGER = re.compile(_GLOG + _EAGER + _END)
_GLOG_MAPPING = re.compile(_GLOG + rb"Device mapping:.*+")
_MAPPING_HEAD = re.compile(rb"Device mapping:.*+")
_MAPPING_ENTRY = re.compile(rb"/(?:job|device):\S++ -> .*+")
_ANY_EAGER = re.compile(rb"Executing op \S++ (?:in device|on task) " + DEVICE + _END + rb"$", re.M)


def _body(line: bytes) -> bytes:
    return line.rstrip(b"\r\n").replace(b")/job:", b"): /job:")


def _placer_file(match: re.Match[bytes]) -> bool:
    name = match.group("file") or match.group("file2") or b""
    return name.rsplit(b"/", 1)[-1] in (b"placer.cc", b"simple_placer.cc")


def is_placement_text(text: bytes) -> bool:
    """Whether ``text`` is nothing but whole, unprefixed placement lines, or one `Device mapping:` block
    (what TensorFlow's Python-level logging listener writes)."""
    lines = text.splitlines(keepends=True)
    if not lines or not all(line.endswith(b"\n") for line in lines):
        return False
    bodies = [_body(line) for line in lines]
    if _MAPPING_HEAD.fullmatch(bodies[0]):
        return all(_MAPPING_ENTRY.fullmatch(b) for b in bodies[1:])
    return all(_BARE.fullmatch(b) for b in bodies)


def placement_lines(data: bytes, fd: int, diverted: Counter[bytes] | None = None) -> tuple[bytes, int]:
    """``data`` without TensorFlow's placement lines (byte for byte otherwise), and how many there were.
    ``diverted``: the lines TensorFlow sent through Python and a capture added to ``fd`` (each counts once)."""
    diverted = Counter(diverted or ())
    kept: list[bytes] = []
    found = 0
    in_mapping = False
    for line in data.splitlines(keepends=True):
        if diverted[line] > 0:
            diverted[line] -= 1
            found += 1
            continue
        body = _body(line)
        if in_mapping and _MAPPING_ENTRY.fullmatch(body):
            found += 1
            continue
        in_mapping = False
        if fd == 2:
            placed = _GLOG_PLACER.fullmatch(body)
            if (placed is not None and _placer_file(placed)) or _GLOG_EAGER.fullmatch(body):
                found += 1
                continue
            if _GLOG_MAPPING.fullmatch(body):
                in_mapping = True
                found += 1
                continue
        elif _BARE.fullmatch(body):
            found += 1
            continue
        kept.append(line)
    return b"".join(kept), found


def has_eager_line(data: bytes) -> bool:
    """Whether ``data`` holds a line of the eager runtime's placement log."""
    return _ANY_EAGER.search(data) is not None
