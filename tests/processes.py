"""What the suite does for every process its tests start, whatever happens to the test: the
processes start as a terminal's foreground job would start them, the deadlines that bound a wait
scale with how busy the machine is, and whatever a test leaves running is ended with its process
group once the test is over (``ends_its_processes``, an autouse fixture of conftest)."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator

import pytest

PATIENCE_ENV = "PLACEMENT_TEST_PATIENCE"  # a factor for every deadline of the suite (e.g. 4 on a loaded machine)


def sigint_as_a_terminal_gives_it() -> None:
    """SIGINT and SIGHUP for the suite's processes as a terminal's foreground job has them. A shell
    without job control starts a background job (``pytest ... &`` in a script) with SIGINT and SIGQUIT
    ignored, and an ignored signal stays ignored in every process it starts: a test that
    sends SIGINT (Ctrl-C) would find it lost. The suite's processes get SIGINT as a terminal's
    foreground job has it (Python's KeyboardInterrupt here, the default in every process started)."""
    with contextlib.suppress(ValueError, OSError):  # not the main thread: nothing to do
        if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        # `nohup pytest`: SIGHUP ignored, and so in every process started, which then leaves it ignored
        # (as placement trace rightly does). A handler that does nothing keeps pytest alive through a
        # hang-up, as nohup asked, while each process started gets SIGHUP's default, as without nohup.
        if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN:
            signal.signal(signal.SIGHUP, _outlive_hangup)


def _outlive_hangup(_signum: int, _frame: object) -> None:
    """pytest under nohup: a hang-up ends nothing."""


def patience(seconds: float) -> float:
    """A deadline for a wait that must have one (it follows readiness; the deadline only ends a
    hang): ``seconds`` as measured on a quiet machine, scaled by how busy the CPUs are now (the
    one-minute load per CPU) or by $PLACEMENT_TEST_PATIENCE, whichever is larger."""
    try:
        asked = float(os.environ.get(PATIENCE_ENV) or 1)
    except ValueError:
        asked = 1.0
    try:
        busy = 1 + os.getloadavg()[0] / (os.cpu_count() or 1)
    except OSError:
        busy = 1.0
    return seconds * max(1.0, asked, busy)


def _parents() -> dict[int, int]:
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    found[int(entry)] = int(f.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    return found


def descendants(root: int) -> set[int]:
    """Every process under ``root`` (children, theirs, ...), as /proc shows them now."""
    children: dict[int, list[int]] = {}
    for pid, ppid in _parents().items():
        children.setdefault(ppid, []).append(pid)
    found: set[int] = set()
    todo = list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, ()))
    return found


def end(pids: set[int]) -> None:
    """SIGKILL each process and its process group (a group the test process is not in), then reap
    those that were this process's children and are not waited for by anyone else."""
    own = os.getpgrp()
    for pid in pids:
        with contextlib.suppress(OSError):
            group = os.getpgid(pid)
            if group != own:
                os.killpg(group, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    for pid in pids:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)


@pytest.fixture(autouse=True)
def ends_its_processes() -> Iterator[None]:
    """Whatever a test started and left running (a failed assertion, a timeout, a forgotten Popen)
    is ended with its process group once the test and its own fixtures are done; processes of
    module fixtures (started before) are theirs to end."""
    before = descendants(os.getpid())
    yield
    left = descendants(os.getpid()) - before
    if left:
        end(left)


def checkout_first(*first: str) -> str:
    """PYTHONPATH for a process a test starts: this checkout (and ``first``) ahead of the PYTHONPATH the
    suite runs with, which is kept: where TensorFlow or placement's dependencies are found through it
    (a machine set up with PYTHONPATH, as tools/gpu_check.sh's GPU machines are), a test that replaced it
    started processes that could not import them."""
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[1])
    return os.pathsep.join(p for p in (root, *first, os.environ.get("PYTHONPATH", "")) if p)
