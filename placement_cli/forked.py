"""Half of a big computation on a second core: a forked child runs it and sends back its result.

Only where forking is safe and worth it (a POSIX system, more than one core for this process, no
other thread running: a fork copies only the thread that calls it). The child leaves with
``os._exit``: none of the parent's exit handlers run twice and no output buffered before the fork is
written twice. A child that fails, or is gone, gives None, and the caller does the work itself."""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import pickle
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

PIPE = 1 << 20  # bytes a result's pipe holds (Linux: its most for any process, /proc/sys/fs/pipe-max-size)


def available() -> bool:
    """A child can run beside this process on a core of its own."""
    if not hasattr(os, "fork") or threading.active_count() > 1:
        return False
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return cores > 1


def die_with(parent: int) -> None:
    """(In a forked child.) Ended by the kernel should ``parent`` die, even by SIGKILL (Linux), rather
    than work on for no one; gone at once where it already has."""
    with contextlib.suppress(Exception):  # not Linux, no libc: the parent's own ending ends the child

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # it died before the request
        os._exit(1)


@contextlib.contextmanager
def started(work: Callable[[], Any]) -> Iterator[Callable[[], Any]]:
    """``work`` started in a forked child; the call given waits for its result (picklable), None where
    the child failed (without ``available``: None at once). The result travels as it is made, so a big
    one is never held whole in a buffer. However the block ends, no child is left: one whose result
    was not taken (the parent interrupted, or failed) is killed."""
    if not available():
        yield lambda: None
        return
    read_end, write_end = os.pipe()
    with contextlib.suppress(AttributeError, OSError):  # a wider pipe: a big result in fewer turns

        fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, PIPE)
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # the child
        status = 0
        try:
            os.close(read_end)
            die_with(parent)
            found = work()
            with os.fdopen(write_end, "wb") as out:
                pickle.dump(found, out, protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException:  # noqa: BLE001 - a Ctrl-C or any failure: the parent does the work
            status = 1
        finally:
            os._exit(status)
    os.close(write_end)
    ended: list[int] = []

    def result() -> Any:
        found = None
        with os.fdopen(os.dup(read_end), "rb") as channel, \
                contextlib.suppress(EOFError, pickle.UnpicklingError, ValueError):  # the child failed
            found = pickle.load(channel)  # noqa: S301 - our own child's data
        ended.append(os.waitpid(pid, 0)[1])
        return found if ended[-1] == 0 else None

    try:
        yield result
    finally:
        os.close(read_end)
        if not ended:
            with _signals_held():  # a second Ctrl-C or SIGTERM now would leave the child unreaped
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP held back for the block (their handlers run after it)."""
    ending = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    try:
        held = signal.pthread_sigmask(signal.SIG_BLOCK, ending)
    except (AttributeError, OSError, ValueError):  # no POSIX threads' masks: as it was
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
