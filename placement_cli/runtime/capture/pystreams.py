"""Python's sys.stdout and sys.stderr, and TensorFlow's Python loggers, while capture() runs: TensorFlow's
placement messages written through Python go into the capture's log, everything else to the user.

Under IPython TensorFlow logs eager placements and the Device mapping through a Python-level listener
to sys.stdout instead of its C++ log; in a notebook kernel, fds 1 and 2 reach the cells through
sys.stdout and sys.stderr too. fdcapture holds the fds; this module the Python streams around them.
"""

from __future__ import annotations

import io
import logging
import os
import sys
import threading
from types import FrameType
from typing import Any

from placement_cli.logparse import eager, mapping
from placement_cli.runtime.capture import fdcapture
from placement_cli.runtime.capture.splitter import may_become_tensorflow_line

# Loggers TensorFlow's Python side (and Keras, through absl) writes to.
_TF_LOGGERS = ("tensorflow", "absl")
_PLACEMENT_BYTES = (eager.START, mapping.HEADER)  # what TensorFlow's Python-level placement messages start with
_PLACEMENT_STARTS = tuple(start.decode() for start in _PLACEMENT_BYTES)

# Captures now running, innermost last: TensorFlow's Python-level placement lines go to the innermost,
# which hands everything on to the one around it when it ends.
ACTIVE: list[Streams] = []


# TF_CPP_MIN_LOG_LEVEL as TensorFlow read it: once, as it was imported (a program that changes it
# later changes nothing in TensorFlow, so nothing here either). Read when capture() first starts.
_LOG_LEVEL: list[str] = []


def tf_log_level() -> str:
    if not _LOG_LEVEL:
        _LOG_LEVEL.append(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "").strip())
    return _LOG_LEVEL[0]


def info_hidden() -> bool:
    """Whether TensorFlow's C++ INFO lines (glog copies, eager placements) are hidden."""
    return tf_log_level() not in ("", "0")


# The notebook streams whose write drops TensorFlow's placement lines outside capture() blocks.
QUIETED: list[Quiet] = []


def quiet_notebook_streams() -> None:
    """TensorFlow logs placements for good once its context started with logging on. In a notebook
    kernel whatever it writes reaches the cells through sys.stdout and sys.stderr (its Python-level
    listener, and the kernel's thread that forwards fds 1 and 2): there, outside capture() blocks,
    its placement lines are dropped and everything else passes, so later cells look as they would
    without capture(). Streams on fds 1/2 themselves (a script's, a terminal's) are left alone.
    IPython sets a write of its own on each stream for every cell and puts back the one it found
    when the cell ends: the filter goes around the stream's write now and again as each cell starts."""
    shell = _ipython()
    if shell is None:  # a script: TensorFlow writes to the fds, which are the user's to see
        return
    for name, fd in (("stdout", 1), ("stderr", 2)):
        stream = getattr(sys, name)
        while isinstance(stream, Tee):
            stream = stream.original
        if stream is None or _fileno(stream) in (1, 2) or any(q.stream is stream for q in QUIETED):
            continue
        QUIETED.append(Quiet(stream, fd))
    _wrap_writes()
    if QUIETED and _wrap_writes_for_cell not in shell.events.callbacks.get("pre_run_cell", ()):
        try:
            shell.events.register("pre_run_cell", _wrap_writes_for_cell)
        except (AttributeError, ValueError, KeyError):  # an IPython without events: the filter holds this cell
            pass


def _ipython() -> Any:
    if "IPython" not in sys.modules:
        return None
    try:
        from IPython import get_ipython  # noqa: PLC0415 - IPython is no dependency: only where it already runs

        return get_ipython()
    except Exception:  # noqa: BLE001 - no shell to ask
        return None


def _wrap_writes_for_cell(info: Any = None) -> None:
    _wrap_writes()


def _wrap_writes() -> None:
    for quiet in QUIETED:
        try:
            current = quiet.stream.write
            if not getattr(current, "_placement_quiet", False):
                quiet.stream.write = quiet.around(current)
        except (AttributeError, TypeError):  # a stream whose write cannot be replaced: the lines show
            continue


class Quiet:
    """What one notebook stream holds back: an unfinished last line that may still become one of
    TensorFlow's placement lines."""

    def __init__(self, stream: Any, fd: int) -> None:
        self.stream = stream
        self.fd = fd
        self.pending = b""
        self.lock = threading.Lock()

    def around(self, inner: Any) -> Any:
        def write(text: Any, *args: Any, **kwargs: Any) -> Any:
            if args or kwargs:
                return inner(text, *args, **kwargs)
            return self.write(inner, text)

        write._placement_quiet = True  # type: ignore[attr-defined]  # noqa: SLF001 - our own mark on a function
        return write

    def write(self, inner: Any, text: Any) -> Any:
        if not isinstance(text, str):
            return inner(text)
        with self.lock:
            data = self.pending + text.encode("utf-8", "surrogateescape")
            self.pending = b""
            if not ACTIVE:  # inside a block its capture decides
                data = self._without_placements(data)
        if data:
            inner(data.decode("utf-8", "surrogateescape"))
        return len(text)

    def _without_placements(self, data: bytes) -> bytes:
        end = data.rfind(b"\n") + 1
        whole, tail = data[:end], data[end:]
        if whole and fdcapture.is_placement_text(whole):
            whole = b""
        elif whole:
            whole = fdcapture.separate({self.fd: whole}, info_hidden=True).shown.get(self.fd, whole)
        if tail and (may_become_tensorflow_line(tail, stdout=self.fd == 1) or tail.startswith(_PLACEMENT_BYTES)
                     or any(start.startswith(tail) for start in _PLACEMENT_BYTES)):
            self.pending, tail = tail, b""
        return whole + tail



class Streams:
    """Everything TensorFlow can write through, for the block: fds 1 and 2 (C++), Python's
    sys.stdout/sys.stderr (TF's interactive logging listener, used under IPython) and TF's loggers.
    TensorFlow's placement lines are kept; everything else reaches the user: Python-level output at
    once, fd-level output when the block ends. Captures nest; they may even end out of order (a
    generator suspended inside one): whichever ends last puts back the fds and streams of before."""

    def __init__(self, keep: bool = True) -> None:
        self.keep = keep  # False: drop the placement lines (a probe's), even inside another capture
        self.fds = fdcapture.SplitCapture()
        self.tees: dict[str, Tee] = {}  # by the name of the sys attribute it stands in for
        # lines TensorFlow sent through Python, each with how many bytes fd 2 had received by then
        self.diverted: list[tuple[int, bytes]] = []
        self.received: dict[int, bytes] | None = None  # once restored, until handed on
        self.outer: Streams | None = None  # the capture around this one when it was restored

    def start(self) -> None:
        with fdcapture.interrupts_deferred():
            try:
                self.fds.start()
                ACTIVE.append(self)
                for name, fd in (("stdout", 1), ("stderr", 2)):
                    stream = getattr(sys, name)
                    if stream is not None:  # None (pythonw): TensorFlow's listener falls back to the fd
                        self.tees[name] = Tee(stream, fd, fdcapture.original(fd))
                        setattr(sys, name, self.tees[name])
                for name in _TF_LOGGERS:
                    logging.getLogger(name).addFilter(self._placement_records)
            except BaseException:
                self.restore()
                raise

    def divert(self, data: bytes) -> None:
        """Placement lines TensorFlow sent through Python: into the log, in order with its C++ lines,
        never among the program's bytes."""
        self.diverted.append((self.fds.position(2), data))

    def _placement_records(self, record: logging.LogRecord) -> bool:
        try:
            data = f"{record.getMessage()}\n".encode("utf-8", "replace")
        except Exception:  # noqa: BLE001 - a record that cannot format is the logger's business
            return True
        if ACTIVE and fdcapture.is_placement_text(data):
            ACTIVE[-1].divert(data)
            return False
        return True

    def restore(self) -> None:
        """Put back the loggers, sys.stdout/sys.stderr and fds 1/2 as they belong without this
        capture, and keep what the fds received. Each step runs whatever the others did."""
        with fdcapture.interrupts_deferred():
            try:
                for name in _TF_LOGGERS:
                    logging.getLogger(name).removeFilter(self._placement_records)
            finally:
                try:
                    for tee in self.tees.values():
                        tee.close_capture()
                finally:
                    for name in self.tees:
                        current = getattr(sys, name)
                        if isinstance(current, Tee):
                            setattr(sys, name, current.unwrapped())
                    if self in ACTIVE:
                        at = ACTIVE.index(self)
                        self.outer = ACTIVE[at - 1] if at > 0 else None
                        ACTIVE.remove(self)
                    received = self.fds.stop()
                    if self.received is None:
                        self.received = received

    def hand_on(self, known: frozenset[tuple[str, str]] = frozenset()) -> fdcapture.Separated:
        """Tell TensorFlow's lines from the program's bytes in what the fds received, and hand it on:
        all of it to the capture around this one (the program's part only, for a probe's), the
        program's part to the user where none is around. ``known``: the nodes of the program's
        graphs (where INFO lines are hidden, their copies are split off the program's unfinished line)."""
        received, self.received = self.received or {}, {}
        taken = fdcapture.separate(received, self.diverted, info_hidden=info_hidden(), known=known)
        outer = self.outer if self.outer in ACTIVE else None
        if outer is not None:
            if self.keep:  # what the fds received is the outer capture's too
                base = outer.fds.position(2)
                outer.diverted.extend((base + pos, data) for pos, data in self.diverted)
            for fd, data in (received if self.keep else taken.shown).items():
                outer.fds.write(fd, data)
            return taken
        forwarded = {tee.fd for tee in self.tees.values() if tee.forwarded_elsewhere()}
        for fd, data in taken.shown.items():
            fdcapture.write_out(fd, data)
            if data and fd in forwarded and not ACTIVE:
                fdcapture.drain(fd)  # into this cell, not the next
        return taken

    def stop(self) -> fdcapture.Separated:
        try:
            self.restore()
        finally:
            taken = self.hand_on()
        return taken


class Tee:
    """Stands in for sys.stdout/sys.stderr during a capture: TensorFlow's placement lines go into the
    log, everything else on to the stream it replaced, at once. Stays usable (passing everything
    through) after the block, for whatever kept a reference to it."""

    def __init__(self, original: Any, fd: int, saved: int | None) -> None:
        self.original = original
        self.fd = fd
        self._active = True
        self._pending = ""  # the start of what may be a placement message TensorFlow writes in pieces
        self._direct: io.TextIOWrapper | None = None
        if saved is not None and not isinstance(original, Tee) and _fileno(original) == fd:
            # A stream on the captured fd itself (a script's): write to where that fd went before.
            self._direct = io.TextIOWrapper(io.BufferedWriter(io.FileIO(saved, "w", closefd=False)),
                                            encoding=getattr(original, "encoding", None) or "utf-8",
                                            errors=getattr(original, "errors", None) or "strict", write_through=True)

    def write(self, text: str) -> int:
        if not (self._active and isinstance(text, str) and ACTIVE):
            return self._target_write(text)
        try:
            caller: FrameType | None = sys._getframe(1)  # noqa: SLF001
        except ValueError:  # written from a thread of TensorFlow's with no Python caller
            caller = None
        if not _from_tensorflow(caller):
            self._release()
            return self._target_write(text)
        # TensorFlow's listener writes a message in pieces of at most 900 bytes: a mapping of many
        # devices arrives in several writes, all before the next line of anyone else's.
        whole = self._pending + text
        if not whole.endswith("\n") and whole.startswith(_PLACEMENT_STARTS):
            self._pending = whole
            return len(text)
        self._pending = ""
        data = whole.encode("utf-8", "replace")
        if fdcapture.is_placement_text(data):
            ACTIVE[-1].divert(data)
            return len(text)
        self._target_write(whole)
        return len(text)

    def _release(self) -> None:
        """What looked like the start of a placement message and was not one: the user's after all."""
        pending, self._pending = self._pending, ""
        if pending:
            self._target_write(pending)

    def _target_write(self, text: str) -> int:
        direct = self._direct if self._active else None
        if direct is None:
            count: int = self.original.write(text)
            return count
        written = direct.write(text)
        direct.flush()
        return written

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self._target_write(line)

    def flush(self) -> None:
        if self._active and self._direct is not None:
            self._direct.flush()
        self.original.flush()

    def isatty(self) -> bool:
        if self._active and self._direct is not None:
            return self._direct.isatty()
        return bool(self.original.isatty())

    @property
    def buffer(self) -> Any:
        if self._active and self._direct is not None:
            return self._direct.buffer
        return self.original.buffer

    def forwarded_elsewhere(self) -> bool:
        """Whether the stream it replaced writes somewhere other than its fd (a notebook's, which may
        forward the fd into a cell from a thread of its own)."""
        return not isinstance(self.original, Tee) and _fileno(self.original) not in (1, 2)

    def unwrapped(self) -> Any:
        """This stream, or the first stream under it still capturing or not one of ours."""
        stream: Any = self
        while isinstance(stream, Tee) and not stream._active:  # noqa: SLF001
            stream = stream.original
        return stream

    def close_capture(self) -> None:
        self._release()
        self._active = False
        if self._direct is not None:
            try:
                self._direct.close()  # closefd=False: the saved fd is the capture's to close
            except (OSError, ValueError):
                pass
            self._direct = None

    def __getattr__(self, name: str) -> Any:
        if name == "original":  # not set yet (a copy being made): no stream to ask
            raise AttributeError(name)
        return getattr(self.original, name)


def _fileno(stream: Any) -> int | None:
    try:
        return int(stream.fileno())
    except Exception:  # noqa: BLE001 - no fd (StringIO, a notebook's stream): not on a captured fd
        return None


def _from_tensorflow(frame: FrameType | None) -> bool:
    if frame is None:
        return True
    name = frame.f_globals.get("__name__") or ""
    return name == "tensorflow" or name.startswith("tensorflow.")
