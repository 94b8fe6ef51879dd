"""TensorFlow's last words when it ends the process inside a capture.

TensorFlow ends a process from C++ with no Python code run after: LOG(FATAL) and a failed CHECK
abort, LOG(QFATAL) exits with 1 (an unknown flag in TF_XLA_FLAGS does). Inside a capture fds 1 and
2 go to a temporary file, so its last words would be lost with the process, and the user would see
nothing but an exit code. A watcher (a small Python, started before the capture) holds the
capture's files and the stderr from before it; told "done" when the capture ends, it exits in
silence; if placement ends first (its end of the pipe closes unsaid), it copies TensorFlow's FATAL
lines to that stderr. It ignores the terminal's signals (they are placement's to handle) and never
outlives placement by more than that copy.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from placement_cli.i18n import _
from placement_cli.logparse import glog

DONE = b"done"
MAX_LINES = 8  # FATAL lines copied (the first ones: what ended the process comes first)
MAX_CHARS = 2000  # of each

WATCH = r"""
import os, re, signal, sys
for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGTSTP", "SIGPIPE"):
    signal.signal(getattr(signal, name), signal.SIG_IGN)
sinks, err, pattern, prefix, lines, chars, encoding = sys.argv[1:8]
control = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]")
said = b""
while len(said) < 4:  # "done", or the end of placement's pipe (a process placement forked may hold it open too)
    more = os.read(0, 4 - len(said))
    if not more:
        break
    said += more
if said != b"done":
    found, pattern = [], re.compile(pattern.encode("latin-1"))
    for fd in map(int, sinks.split(",")):
        tail, at = b"", 0
        while len(found) < int(lines):
            block = os.pread(fd, 1 << 20, at)
            if not block:
                break
            at += len(block)
            data = tail + block
            cut = data.rfind(b"\n") + 1
            found += [m.group()[:int(chars)] for m in pattern.finditer(data, 0, cut)]
            tail = data[cut:][-1 << 20:]
        found += [m.group()[:int(chars)] for m in pattern.finditer(tail)]
    text = "".join(prefix + control.sub(b"?", line).decode("utf-8", "replace") + "\n" for line in found[:int(lines)])
    if text:
        try:
            os.write(int(err), text.encode(encoding, "replace"))
        except OSError:
            pass
"""


def _encoding() -> str:
    try:
        return sys.stderr.encoding or "utf-8"
    except (AttributeError, ValueError):
        return "utf-8"


@contextmanager
def watched(sinks: Sequence[int], err: int) -> Iterator[None]:
    """While the block runs, a FATAL end of the process is told on ``err`` (a copy of the stderr the
    user sees) from the capture files ``sinks``. No watcher (it could not start): the block runs as
    before, its last words unkept."""
    prefix = "placement: " + _("TensorFlow ended the process: ")
    try:
        watcher = subprocess.Popen(  # noqa: S603 - our own interpreter and code
            [sys.executable, "-I", "-S", "-c", WATCH, ",".join(map(str, sinks)), str(err),
             glog.FATAL_LINE.decode("latin-1"), prefix, str(MAX_LINES), str(MAX_CHARS),
             _encoding()],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            pass_fds=(*sinks, err), start_new_session=True)
    except (OSError, ValueError):  # no interpreter to start (an embedded Python), no such fd
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            watcher.stdin.write(DONE)  # type: ignore[union-attr]
        with contextlib.suppress(OSError):
            watcher.stdin.close()  # type: ignore[union-attr]
        try:
            watcher.wait(timeout=10)  # it exits on reading "done"; a watcher that does not is not waited for
        except subprocess.TimeoutExpired:
            watcher.kill()
            watcher.wait()
