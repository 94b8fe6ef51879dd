"""`placement trace`: run a user's TensorFlow program with placement logging on from its first op."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, replace
from typing import IO, Any

from placement_cli.errors import UsageProblem
from placement_cli.logparse import parse_text
from placement_cli.model import Report

# Runs in the child before the user's script: logging must be on before TensorFlow's
# context initialises, and v1 Sessions log whatever their own ConfigProto says.
BOOTSTRAP = r"""
import runpy, sys
script = sys.argv[1]
sys.argv = sys.argv[1:]
try:
    import tensorflow as tf
except ImportError:
    tf = None
if tf is not None:
    tf.debugging.set_log_device_placement(True)
    _Session = tf.compat.v1.Session
    _init = _Session.__init__
    def _logged_init(self, target="", graph=None, config=None):
        config = config if config is not None else tf.compat.v1.ConfigProto()
        config.log_device_placement = True
        _init(self, target, graph, config)
    _Session.__init__ = _logged_init
sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(script)))
runpy.run_path(script, run_name="__main__")
"""

# Lines TensorFlow writes about placement: consumed, not echoed (unless --log).
_PLACEMENT_LINE = re.compile(
    r"placer\.cc:\d+\] |Executing op \S+ (?:in device|on task) |^\S+: (?:\(\S*\): ?)?/job:\S+\s*$"
    r"|direct_session\.cc:\d+\] Device mapping|^Device mapping:|^/job:\S+ -> "
)


@dataclass(frozen=True)
class TraceResult:
    report: Report
    exit_code: int
    interrupted: bool = False


def _pump(source: IO[bytes], sink: IO[bytes] | None, log: IO[bytes], lock: threading.Lock, echo_all: bool) -> None:
    """Copy the child's output line by line: everything into the log, the program's own
    lines (and placement lines too with --log) on to ``sink`` as they come."""
    for raw in iter(source.readline, b""):
        with lock:
            log.write(raw)
        if sink is None:
            continue
        if echo_all or not _PLACEMENT_LINE.search(raw.decode("utf-8", "replace")):
            sink.write(raw)
            sink.flush()


def run_traced(script: str, args: list[str], *, program_stdout: IO[bytes], echo_log: bool,
               save_log: str | None = None) -> TraceResult:
    """Run ``script`` in a child Python, tee its output live, then parse what it placed."""
    if not os.path.isfile(script):
        raise UsageProblem(f"{script}: no such script")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    lock = threading.Lock()
    interrupted = False
    with tempfile.TemporaryFile() as log:
        child = subprocess.Popen([sys.executable, "-c", BOOTSTRAP, script, *args], stdin=None,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        pumps = [
            threading.Thread(target=_pump, args=(child.stdout, program_stdout, log, lock, echo_log), daemon=True),
            threading.Thread(target=_pump, args=(child.stderr, sys.stderr.buffer, log, lock, echo_log), daemon=True),
        ]
        for pump in pumps:
            pump.start()
        try:
            code = child.wait()
        except KeyboardInterrupt:
            interrupted = True
            child.send_signal(signal.SIGINT)
            try:
                code = child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()
                code = child.wait()
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        for pump in pumps:
            pump.join(timeout=10)
        log.seek(0)
        text = log.read().decode("utf-8", "replace")
    if save_log:
        with open(save_log, "w", encoding="utf-8") as out:
            out.write(text)
    if code < 0:
        code = 128 - code  # killed by a signal: the shell's convention
    report = replace(parse_text(text), title=f"trace of {script} (exit code {code})", log=text)
    return TraceResult(report=report, exit_code=code, interrupted=interrupted)


def filtered(report: Report, device: str | None, op: str | None, node: str | None, top: int | None) -> Report:
    """The placements matching every filter given (device type or name, op type, node regex)."""
    placements: list[Any] = list(report.placements)
    if device:
        want = device.upper().lstrip("/")
        placements = [p for p in placements
                      if want in (p.spec.device_type, p.short.upper()) or want == p.canonical.upper().lstrip("/")]
    if op:
        placements = [p for p in placements if p.op == op or p.op == f"_Mkl{op}"]
    if node:
        pattern = re.compile(node)
        placements = [p for p in placements if p.node and pattern.search(p.node)]
    if top:
        placements = placements[:top]
    return replace(report, placements=tuple(placements), counted=tuple(report.by_device.items()))
