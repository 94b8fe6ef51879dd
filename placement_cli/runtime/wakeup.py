"""Signals a parent's poll loop must see at once: its handlers, and a pipe that wakes the poll."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterable
from typing import Any


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

    def install(self, signals: Iterable[int], handler: Callable[[int, Any], None],
                also: dict[int, Callable[[int, Any], None]] | None = None) -> None:
        self.fd, self._write = os.pipe()
        os.set_blocking(self._write, False)
        os.set_blocking(self.fd, False)
        for sig in signals:
            if signal.getsignal(sig) != signal.SIG_IGN:
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
