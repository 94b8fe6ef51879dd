"""File-descriptor-level capture of TensorFlow's C++ output (printf and glog), and which of its lines are placements."""

from __future__ import annotations

import array
import fcntl
import os
import re
import signal
import stat
import sys
import tempfile
import termios
import threading
import time
from collections import Counter
from collections.abc import Collection, Iterator, Sequence
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field
from types import FrameType
from typing import IO, Any

from placement_cli.exceptions import ARRIVED, swallowed
from placement_cli.logparse import placer, written
from placement_cli.runtime.capture import lastwords
from placement_cli.runtime.capture.fds import flush_c_stdio, write_all


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
    flush_c_stdio()


@contextmanager
def capture_fds(fds: tuple[int, ...] = (1, 2)) -> Iterator[Captured]:
    """Send ``fds`` into one temporary file (never a pipe: no buffer can fill), restore them
    afterwards, and leave the text in the yielded Captured."""

    captured = Captured()
    arrived = len(ARRIVED)
    _flush_all()
    with tempfile.TemporaryFile(mode="w+b") as sink:
        saved = {fd: os.dup(fd) for fd in fds}
        try:
            with lastwords.watched([sink.fileno()], saved[2]) if 2 in saved else nullcontext():
                for fd in fds:
                    os.dup2(sink.fileno(), fd)
                yield captured
        finally:
            with interrupts_deferred():  # a Ctrl-C here left fds 1 and 2 in the file: its line went there
                _flush_all()
                for fd, copy in saved.items():
                    os.dup2(copy, fd)
                    os.close(copy)
            sink.seek(0)
            captured.text = sink.read().decode("utf-8", "replace")
    swallowed(arrived)  # a signal the captured code caught and went on from (TensorFlow's imports do)


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
        with interrupts_deferred():  # a Ctrl-C here left stderr on /dev/null: its line went there
            _flush_all()
            os.dup2(saved, fd)
            os.close(saved)
            os.close(devnull)


# SplitCaptures now holding fds, innermost last, and a copy of what each fd was before the first of
# them: whatever order they stop in, every fd goes back to the innermost holder left, or to its original.
_STACK: list[SplitCapture] = []
_ORIGINALS: dict[int, int] = {}


class SplitCapture:
    """Each of ``fds`` into its own temporary file (never a pipe: a writer holding the GIL can
    never block on a reader), so what is not TensorFlow's goes back to the fd it was written to.
    Captures nest, and may even stop out of order: the last one to stop puts the original fds back."""

    def __init__(self, fds: tuple[int, ...] = (1, 2)) -> None:
        self.fds = fds
        self._sinks: dict[int, IO[bytes]] = {}
        self._watch = ExitStack()  # the watcher of TensorFlow's last words, while the capture holds fd 2

    def start(self) -> None:
        with interrupts_deferred():
            _flush_all()  # what was written before the block is not ours
            try:
                for fd in self.fds:
                    self._sinks[fd] = tempfile.TemporaryFile(mode="w+b")  # noqa: SIM115 - closed in stop()
                for fd in self.fds:
                    if fd not in _ORIGINALS:
                        _ORIGINALS[fd] = os.dup(fd)
                _STACK.append(self)
                if 2 in self._sinks:
                    self._watch.enter_context(lastwords.watched([self._sinks[2].fileno()], _ORIGINALS[2]))
                for fd in self.fds:
                    os.dup2(self._sinks[fd].fileno(), fd)
            except BaseException:
                self.stop()
                raise

    def write(self, fd: int, data: bytes) -> None:
        """Add ``data`` to what ``fd`` received, in order with what TensorFlow writes there."""
        sink = self._sinks.get(fd)
        if sink is not None:
            write_all(sink.fileno(), data)

    def position(self, fd: int) -> int:
        """How many bytes ``fd`` has received so far."""
        sink = self._sinks.get(fd)
        return os.lseek(sink.fileno(), 0, os.SEEK_CUR) if sink is not None else 0

    def stop(self) -> dict[int, bytes]:
        """Point every fd back where it belongs now and return what each received (once; {} after)."""
        with interrupts_deferred():
            _flush_all()
            if self in _STACK:
                _STACK.remove(self)
            failed: OSError | None = None
            for fd in self._sinks:
                try:
                    _point(fd)
                except OSError as error:  # the other fds still go back
                    failed = failed or error
            self._watch.close()
            received: dict[int, bytes] = {}
            for fd, sink in self._sinks.items():
                try:
                    sink.seek(0)
                    received[fd] = sink.read()
                finally:
                    sink.close()
            self._sinks.clear()
            if failed is not None:
                raise failed
            return received


def _point(fd: int) -> None:
    """Send ``fd`` to the innermost capture still holding it, or back to where it was before any."""
    holder = next((cap._sinks[fd] for cap in reversed(_STACK) if fd in cap._sinks), None)  # noqa: SLF001
    if holder is not None:
        os.dup2(holder.fileno(), fd)
        return
    copy = _ORIGINALS.pop(fd, None)
    if copy is not None:
        try:
            os.dup2(copy, fd)
        finally:
            os.close(copy)


def original(fd: int) -> int | None:
    """A copy of what ``fd`` was before the captures now running began (None when none runs)."""
    return _ORIGINALS.get(fd)


def write_out(fd: int, data: bytes) -> None:
    """Write ``data`` where ``fd`` went before any capture (the user's terminal, a cell's pipe)."""
    write_to(_ORIGINALS.get(fd, fd), data)


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold Ctrl-C (SIGINT) back until the block is done, then deliver it: pointing fds back must
    not stop halfway. Only in the main thread, where Python runs signal handlers."""
    held: list[tuple[int, FrameType | None]] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        held.append((signum, frame))

    previous: Any = None
    try:
        if threading.current_thread() is threading.main_thread():
            handler = signal.getsignal(signal.SIGINT)
            if callable(handler):
                previous = handler
                signal.signal(signal.SIGINT, hold)
    except (ValueError, OSError):  # not the main interpreter: nothing to hold
        previous = None
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
            for signum, frame in held[:1]:
                previous(signum, frame)


def drain(fd: int, timeout: float = 1.0) -> None:
    """Wait, a little, until whoever reads the pipe on ``fd`` has taken what is in it: a Jupyter kernel
    forwards fd 1/2 into the running cell from a thread, and what it reads after the cell ended lands
    in another cell or nowhere."""
    try:
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
        write_all(fd, data)
    except OSError:
        pass


# TensorFlow's placement lines as it writes them: the placer's printf copy on stdout; on stderr its
# glog copy, the eager runtime's lines and `Device mapping:` blocks. Under IPython the eager lines and
# the mapping go through a logging listener to Python's sys.stdout instead, unprefixed.
# TensorFlow writes each of its lines whole, with one write; the program may have left a line
# unfinished on the same fd just before, so TensorFlow's line can start in the middle of a line.
# Each pattern is logparse's, compiled there (logparse.written: a line the parser would not read is never taken).
_BLANK = re.compile(rb"\r?\n")


def _body(line: bytes) -> bytes:
    return line.rstrip(b"\r\n").replace(*placer.NORMALISE)


def is_placement_text(text: bytes) -> bool:
    """Whether ``text`` is nothing but whole, unprefixed placement lines, or one `Device mapping:` block
    (what TensorFlow's Python-level logging listener writes)."""
    lines = text.splitlines(keepends=True)
    if not lines or not all(line.endswith(b"\n") for line in lines):
        return False
    bodies = [_body(line) for line in lines]
    if written.MAPPING_HEADER_LINE.fullmatch(bodies[0]):
        entries = bodies[1:-1] if len(bodies) > 2 and not bodies[-1] else bodies[1:]  # a list of devices: a
        return all(written.MAPPING_ENTRY_LINE.fullmatch(b) for b in entries)  # blank line ends the message
    return all(written.BARE_RECORD.fullmatch(b) for b in bodies)


@dataclass
class Separated:
    """What fds 1 and 2 received in a capture, told apart: the program's bytes and TensorFlow's lines."""

    shown: dict[int, bytes] = field(default_factory=dict)
    """What each fd received less TensorFlow's placement lines: the program's bytes, byte for byte."""
    log: dict[int, bytes] = field(default_factory=dict)
    """What each fd received, with the lines TensorFlow sent through Python in order on fd 2."""
    tensorflow: dict[int, bytes] = field(default_factory=dict)
    """``log`` with every line that is not one of TensorFlow's to parse left empty (same line numbers),
    and the program's bytes before a TensorFlow line on the same line taken off it."""
    unsure: int = 0
    """Lines on fd 1 that end like the placer's copy written after the program's unfinished line, with
    no twin on fd 2 to say where it starts: left to the program, not counted."""


def separate(received: dict[int, bytes], diverted: Sequence[tuple[int, bytes]] = (),
             info_hidden: bool = False, known: Collection[tuple[str, str]] = ()) -> Separated:
    """Tell TensorFlow's placement lines in ``received`` (by fd) from the program's bytes.

    On fd 2: glog lines of the placer (placer.cc), of the eager runtime and `Device mapping:` blocks,
    also where the program's unfinished line precedes one. On fd 1: the placer's copies, each
    confirmed by its glog twin on fd 2 (which also says where one starts after the program's
    unfinished line); only where TensorFlow's INFO lines are hidden (``info_hidden``, so no copy has
    a twin) are whole lines of the copy's exact shape taken without one. ``diverted``: lines
    TensorFlow sent through Python while fd 2 had received so many bytes: they join the log, never
    the program's bytes. ``known``: (node, op type) of the graphs the program built; where no copy
    has a twin, a copy of one of them after the program's unfinished line is split off it there."""
    result = Separated()
    err = received.get(2, b"")
    cuts, twins = _glog_cuts(err)
    inserts = [(err.rfind(b"\n", 0, pos) + 1, data) for pos, data in sorted(diverted, key=lambda d: d[0])]
    for fd, data in received.items():
        if fd == 2:
            fd_cuts, fd_inserts = cuts, inserts
        elif fd == 1:
            fd_cuts, result.unsure = _bare_cuts(data, Counter(twins), shape_only=info_hidden and not twins,
                                                known=known)
            fd_inserts = []
        else:
            fd_cuts, fd_inserts = [], []
        result.shown[fd], result.log[fd], result.tensorflow[fd] = _assemble(data, fd_cuts, fd_inserts)
    if 2 not in received and inserts:
        result.shown[2], result.log[2], result.tensorflow[2] = _assemble(b"", [], inserts)
    return result


def _lines_with(data: bytes, pattern: re.Pattern[bytes]) -> Iterator[tuple[int, int]]:
    """(start, end) of each whole line (newline included) of ``data`` that holds ``pattern``, in order."""
    end = 0
    for match in pattern.finditer(data):
        if match.start() < end:
            continue
        start = data.rfind(b"\n", 0, match.start()) + 1
        newline = data.find(b"\n", match.end())
        if newline < 0:
            return  # an unfinished last line: TensorFlow ends every line it writes
        end = newline + 1
        yield start, end


def _glog_start(body: bytes) -> tuple[int, re.Match[bytes] | None] | None:
    """Where a glog placement line of TensorFlow's starts in ``body`` (a line, or the end of one),
    with the placer's match if it is one."""
    for candidate in written.GLOG_START.finditer(body):
        at = candidate.start()
        placed = written.GLOG_PLACER.fullmatch(body, at)
        if placed is not None:
            if placer.placer_file(placed.group("file")):
                return at, placed
            continue
        if written.GLOG_EAGER.fullmatch(body, at) or written.GLOG_MAPPING.fullmatch(body, at):
            return at, None
    return None


def _glog_cuts(data: bytes) -> tuple[list[tuple[int, int, bool]], Counter[bytes]]:
    """TensorFlow's placement lines on fd 2 as (start, end, parse it), and the placer lines' bodies."""
    cuts: list[tuple[int, int, bool]] = []
    twins: Counter[bytes] = Counter()
    mapping_end = -1
    for start, end in _lines_with(data, written.KEYWORDS):
        body = data[start:end - 1]
        if start == mapping_end and written.MAPPING_ENTRY_LINE.fullmatch(body.rstrip(b"\r")):
            cuts.append((start, end, True))
            mapping_end = end
            blank = _BLANK.match(data, end)  # TensorFlow's list of devices ends with a blank line
            if blank:
                cuts.append((end, blank.end(), True))
            continue
        found = _glog_start(body)
        if found is None:
            continue
        at, placed = found
        cuts.append((start + at, end, True))
        if placed is not None:
            twins[placed.group("placed")] += 1
        elif written.GLOG_MAPPING.fullmatch(body, at):
            mapping_end = end
    return cuts, twins


def _bare_cuts(data: bytes, twins: Counter[bytes], shape_only: bool,
               known: Collection[tuple[str, str]] = ()) -> tuple[list[tuple[int, int, bool]], int]:
    """The placer's copies on fd 1 as (start, end, parse it): those with a glog twin (already counted
    there, so not parsed again), or where no copy can have one, whole lines of the copy's shape, and
    a known node's copy at the end of the program's unfinished line (the longest such name)."""
    names: dict[bytes, list[bytes]] = {}
    for known_node, known_op in known:
        names.setdefault(f": ({known_op})".encode(), []).append(known_node.encode())
    for found_names in names.values():
        found_names.sort(key=len, reverse=True)
    cuts: list[tuple[int, int, bool]] = []
    unsure = 0
    # the twins' lengths by what follows the node's name (`: (OP): DEVICE`; names hold no ": ("):
    # where a line ends in it, those are the only places TensorFlow's line can start
    found: dict[bytes, set[int]] = {}
    for key in twins:
        found.setdefault(key[key.rfind(b": ("):], set()).add(len(key))
    # the longest first: the program's part as short as can be
    lengths = {tail: sorted(sizes, reverse=True) for tail, sizes in found.items()}
    for start, end in _lines_with(data, written.JOB):
        body = data[start:end - 1]
        if twins[body] > 0:
            twins[body] -= 1
            cuts.append((start, end, False))
            continue
        at = body.rfind(b": (")
        sizes = lengths.get(body[at:], []) if at > 0 else []
        tail = next((size for size in sizes if size < len(body) and twins[body[-size:]] > 0), None)
        if tail is not None:  # after the program's unfinished line: only TensorFlow's part is cut
            twins[body[-tail:]] -= 1
            cuts.append((end - 1 - tail, end, False))
            continue
        if not shape_only:
            continue
        if written.COPY.fullmatch(body):
            cuts.append((start, end, True))
        elif at > 0 and written.COPY_TAIL.fullmatch(body, at) and written.NODE_CHAR.fullmatch(body, at - 1, at):
            op = body[at:body.index(b")", at) + 1]
            node = next((n for n in names.get(op, ()) if len(n) < at and body.endswith(n, 0, at)), None)
            if node is None:
                unsure += 1
            else:
                cuts.append((start + at - len(node), end, True))
    return cuts, unsure


def _assemble(data: bytes, cuts: list[tuple[int, int, bool]],
              inserts: list[tuple[int, bytes]]) -> tuple[bytes, bytes, bytes]:
    """``data`` less the cuts (shown); with the inserts (log); and only the parsed cuts and the
    inserts, every other line left empty (tensorflow: line for line as the log)."""
    shown: list[bytes] = []
    log: list[bytes] = []
    tensorflow: list[bytes] = []
    pos = 0

    def program(upto: int) -> None:
        region = data[pos:upto]
        shown.append(region)
        log.append(region)
        tensorflow.append(b"\n" * region.count(b"\n"))

    pending = iter(inserts)
    insert = next(pending, None)
    for start, end, parsed in (*cuts, (len(data), len(data), False)):
        while insert is not None and insert[0] <= start:  # at a line's start: never inside a cut
            program(insert[0])
            pos = insert[0]
            log.append(insert[1])
            tensorflow.append(insert[1])
            insert = next(pending, None)
        program(start)
        log.append(data[start:end])
        tensorflow.append(data[start:end] if parsed else b"\n" * data.count(b"\n", start, end))
        pos = end
    return b"".join(shown), b"".join(log), b"".join(tensorflow)


def has_eager_line(data: bytes) -> bool:
    """Whether ``data`` holds a line of the eager runtime's placement log."""
    return written.EAGER_ANYWHERE.search(data) is not None
