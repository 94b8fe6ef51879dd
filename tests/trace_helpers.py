"""Running `placement trace` and plain python side by side, on a terminal or not, and checking
that nothing is left behind (processes, temporary files)."""

from __future__ import annotations

import os
import pty
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from processes import patience

ROOT = Path(__file__).parent.parent
TRACE = [sys.executable, "-m", "placement_cli", "trace"]


def environment(tmp: Path, **extra: str) -> dict[str, str]:
    """The test's environment, with a fresh TMPDIR (checked empty afterwards) and placement importable."""
    tmpdir = tmp / "tmpdir"
    tmpdir.mkdir(exist_ok=True)
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "120", "TMPDIR": str(tmpdir), **extra}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env.pop("PYTHONUNBUFFERED", None)  # as a user's shell has it: plain python doesn't set it either
    return env


def write(tmp: Path, body: str, name: str = "prog.py") -> Path:
    script = tmp / name
    script.write_text(body)
    return script


def run(args: list[str], tmp: Path, *, timeout: float = 60, **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
    kwargs.setdefault("env", environment(tmp))
    if "stdout" not in kwargs and "stderr" not in kwargs:
        kwargs["capture_output"] = True
    return subprocess.run(args, cwd=tmp, timeout=patience(timeout), check=False, **kwargs)


def plain_and_traced(tmp: Path, script: str, *args: str, **kwargs: Any) -> tuple[subprocess.CompletedProcess[bytes], subprocess.CompletedProcess[bytes]]:
    return run([sys.executable, script, *args], tmp, **kwargs), run([*TRACE, script, *args], tmp, **kwargs)


def program_stdout(traced: bytes) -> bytes:
    """What the program printed, before placement's report (its rule line)."""
    cut = traced.find(b"\xe2\x94\x80\xe2\x94\x80 placement: ")
    cut = traced.rfind(b"\n", 0, cut) + 1 if cut >= 0 else len(traced)
    return traced[:cut]


def gone(pid: int) -> bool:
    """The process no longer runs (a zombie waiting for init to reap it counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except FileNotFoundError:
        return True


def wait_gone(pid: int, timeout: float = 10) -> bool:
    end = time.monotonic() + patience(timeout)
    while time.monotonic() < end:
        if gone(pid):
            return True
        time.sleep(0.05)
    return gone(pid)


def assert_clean(tmp: Path) -> None:
    """placement left no temporary file or directory behind."""
    assert list((tmp / "tmpdir").iterdir()) == []


class Terminal:
    """placement run on a pseudo-terminal of its own, as from an interactive shell: it is the
    session leader and its process group is the terminal's foreground. A thread reads the terminal
    from the start until every process on it is gone, so a writer never blocks on a full terminal
    whatever the test is doing; ``read_until`` waits for what it has read."""

    def __init__(self, args: list[str], tmp: Path, env: dict[str, str] | None = None) -> None:
        env = env or environment(tmp)
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # pragma: no cover - the child execs at once
            os.chdir(tmp)
            os.execve(args[0], args, env)
        self.output = b""
        self._changed = threading.Condition()
        self._closed = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.fd, 65536)
            except OSError:  # EIO: every process on the terminal is gone
                data = b""
            with self._changed:
                if data:
                    self.output += data
                else:
                    self._closed = True
                self._changed.notify_all()
            if not data:
                return

    def read_until(self, needle: bytes, timeout: float = 60) -> bool:
        end = time.monotonic() + patience(timeout)
        with self._changed:
            while needle not in self.output and not self._closed and time.monotonic() < end:
                self._changed.wait(end - time.monotonic())
            return needle in self.output

    def type(self, data: bytes) -> None:
        os.write(self.fd, data)

    def wait(self, timeout: float = 60) -> int:
        """placement's exit status, once it and everything on its terminal is done (its output read)."""
        end = time.monotonic() + patience(timeout)
        while time.monotonic() < end:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self._reader.join(max(0.0, end - time.monotonic()))
                if not self._reader.is_alive():
                    os.close(self.fd)
                    return os.waitstatus_to_exitcode(status)
                raise TimeoutError("placement exited but a process still holds its terminal: "
                                   + self.output.decode(errors="replace")[-2000:])
            with self._changed:  # woken by output, or looks again at the exit every 50 ms
                self._changed.wait(0.05)
        stuck = _where(self.pid)  # before the kill: what placement and the processes under it were doing
        os.kill(self.pid, signal.SIGKILL)
        raise TimeoutError(self.output.decode(errors="replace")[-2000:] + "\n" + stuck)


def _where(pid: int) -> str:
    """For a test that timed out: each process of ``pid``'s session, its state, what it waits in
    (wchan), its pending/blocked/caught signals and its syscall, from /proc."""
    lines = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = open(f"/proc/{entry}/stat").read()
            fields = stat[stat.rindex(")") + 2:].split()
            if int(fields[3]) != pid and int(entry) != pid:  # fields[3]: the session
                continue
            status = dict(line.split(":\t", 1) for line in open(f"/proc/{entry}/status").read().splitlines()
                          if ":\t" in line)
            wchan = open(f"/proc/{entry}/wchan").read()
            try:
                syscall = open(f"/proc/{entry}/syscall").read().split()[:1]
            except OSError:
                syscall = ["?"]
            cmd = open(f"/proc/{entry}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")[:120]
        except (OSError, ValueError):
            continue
        lines.append(f"pid {entry} ppid {fields[1]} pgrp {fields[2]} state {fields[0]} wchan {wchan} "
                     f"syscall {syscall} SigPnd {status.get('SigPnd', '?').strip()} "
                     f"ShdPnd {status.get('ShdPnd', '?').strip()} SigBlk {status.get('SigBlk', '?').strip()} "
                     f"SigCgt {status.get('SigCgt', '?').strip()}: {cmd}")
    return "processes of the terminal's session:\n" + "\n".join(lines)
