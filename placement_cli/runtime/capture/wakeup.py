"""Signals a parent's poll loop must see at once: its handlers, and a pipe that wakes the poll."""

from __future__ import annotations

import os
import select
import signal
from collections.abc import Callable, Iterable
from typing import IO, Any


class Wakeup:
    """``install`` sets ``handler`` for each of ``signals`` that placement does not ignore (an ignored
    one stays ignored, so a child started after inherits placement's own disposition), and points
    Python's wakeup fd at a pipe whose read end, ``fd``, a poll waits on; ``drain`` empties it;
    ``restore`` puts every handler and the wakeup fd back (once); ``close`` restores and closes the pipe."""

    def __init__(self) -> None:
        self.fd = -1  # the read end, for the poll
        self._write = -1
        self._saved: dict[int, Any] = {}
        self._wakeup: int | None = -1

    def install(self, signals: Iterable[int] = (), handler: Callable[[int, Any], None] | None = None,
                also: dict[int, Callable[[int, Any], None]] | None = None) -> None:
        self.fd, self._write = os.pipe()
        os.set_blocking(self._write, False)
        os.set_blocking(self.fd, False)
        for sig in signals:
            if handler is not None and signal.getsignal(sig) != signal.SIG_IGN:
                self._saved[sig] = signal.signal(sig, handler)
        for sig, own in (also or {}).items():
            self._saved[sig] = signal.signal(sig, own)
        self._wakeup = signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)

    def drain(self) -> None:
        try:
            while os.read(self.fd, 512):
                pass
        except BlockingIOError:
            pass

    def restore(self) -> None:
        if self._write >= 0 and self._wakeup is not None:
            signal.set_wakeup_fd(self._wakeup)
            self._wakeup = None
        for sig, handler in self._saved.items():
            signal.signal(sig, handler)
        self._saved.clear()

    def close(self) -> None:
        self.restore()
        for fd in (self.fd, self._write):
            if fd >= 0:
                os.close(fd)
        self.fd = self._write = -1


def read_line(stream: IO[str] | None) -> bool:
    """Wait for one line of ``stream`` (a terminal's Enter, a pipe's or a file's next line): True when
    one came, False at the end of input (or a terminal gone). A signal interrupts the wait whenever it
    arrives (its handler runs: Ctrl-C raises KeyboardInterrupt), even in the instant before the wait
    begins, which a plain ``readline`` misses (Python runs handlers between its own steps, and a read
    the signal came just before waits on for Enter). The file is read directly, a byte at a time, so
    nothing past the line is taken from the next wait."""
    if stream is None:
        return False
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):  # no file behind it (a test's StringIO)
        return bool(stream.readline())
    wake = Wakeup()
    try:
        wake.install()
    except ValueError:  # not the main thread: no handler of ours runs here, nothing to miss
        wake.close()
        return bool(stream.readline())
    try:
        while True:
            ready, _, _ = select.select([fd, wake.fd], [], [])
            if wake.fd in ready:
                wake.drain()  # the handler runs as this returns to Python; a signal without one: wait on
            if fd in ready:
                try:
                    byte = os.read(fd, 1)
                except OSError:  # EIO: the terminal went away
                    return False
                if byte in (b"", b"\n"):
                    return byte == b"\n"
    finally:
        wake.close()
