"""`placement trace`: run a user's TensorFlow program with placement logging on from its first op."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import IO, Any

from placement_cli.errors import UsageProblem
from placement_cli.logparse import parse_text
from placement_cli.model import Copy, Report
from placement_cli.runtime.child import COPIES_ENV, FACTS_ENV
from placement_cli.why import Facts, explain, facts_from_dict

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


# TensorFlow's own log lines (absl and the older glog prefix), with their severity letter.
_TF_LOG_LINE = re.compile(r"^(?:([IWE])\d{4} \d\d:\d\d:\d+\.\d+ +\d+ \S+:\d+\] "
                          r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: ([IWE]) \S+:\d+\] "
                          r"|WARNING: All log messages before absl::InitializeLog)")
_SEVERITY = {"I": 0, "W": 1, "E": 2, None: 0}
# The second line of TF's two-line start-up notice (cpu_feature_guard.cc).
_CONTINUATION = "To enable the following instructions:"


@dataclass(frozen=True)
class Echo:
    """Which of the child's lines reach the terminal."""

    placement: bool = False  # --log: TensorFlow's placement lines too
    min_log_level: int = 0  # the user's TF_CPP_MIN_LOG_LEVEL: TF's lines below it stay hidden, as TF would

    def shows(self, line: str, after_hidden: bool = False) -> bool:
        if _PLACEMENT_LINE.search(line):
            return self.placement
        if self.min_log_level:
            tf_line = _TF_LOG_LINE.match(line)
            if tf_line and _SEVERITY[tf_line.group(1) or tf_line.group(2)] < self.min_log_level:
                return False
            if after_hidden and line.startswith(_CONTINUATION):
                return False
        return True


def _pump(source: IO[bytes], sink: IO[bytes] | None, log: IO[bytes], lock: threading.Lock, echo: Echo) -> None:
    """Copy the child's output line by line: everything into the log, the program's own
    lines (and placement lines too with --log) on to ``sink`` as they come."""
    hidden = False
    for raw in iter(source.readline, b""):
        with lock:
            log.write(raw)
        if sink is None:
            continue
        hidden = not echo.shows(raw.decode("utf-8", "replace"), hidden)
        if not hidden:
            sink.write(raw)
            sink.flush()


def _min_log_level(value: str | None) -> int:
    return int(value) if value and value.strip().isdigit() else 0


def run_traced(script: str, args: list[str], *, program_stdout: IO[bytes], echo_log: bool,
               save_log: str | None = None, copies: bool = False,
               meanwhile: Callable[[], None] | None = None) -> TraceResult:
    """Run ``script`` in a child Python, tee its output live, then parse and explain what it placed.
    ``meanwhile`` runs while the child does (the CLI loads its renderers then, on the other core)."""
    if not os.path.isfile(script):
        raise UsageProblem(f"{script}: no such script")
    lock = threading.Lock()
    interrupted = False
    with tempfile.TemporaryFile() as log, tempfile.TemporaryDirectory(prefix="placement-") as scratch:
        facts_path = os.path.join(scratch, "facts.json")
        # TF_CPP_MIN_LOG_LEVEL >= 1 would drop the eager placement lines: TF logs everything in the
        # child, and the user's level only decides what reaches the terminal.
        echo = Echo(placement=echo_log, min_log_level=_min_log_level(os.environ.get("TF_CPP_MIN_LOG_LEVEL")))
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "TF_CPP_MIN_LOG_LEVEL": "0", FACTS_ENV: facts_path,
               COPIES_ENV: "1" if copies else ""}
        child = subprocess.Popen([sys.executable, "-m", "placement_cli.runtime.child", script, *args], stdin=None,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        pumps = [
            threading.Thread(target=_pump, args=(child.stdout, program_stdout, log, lock, echo), daemon=True),
            threading.Thread(target=_pump, args=(child.stderr, sys.stderr.buffer, log, lock, echo), daemon=True),
        ]
        for pump in pumps:
            pump.start()
        try:
            if meanwhile is not None:
                meanwhile()
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
        facts, copied = read_facts(facts_path)
    if save_log:
        with open(save_log, "w", encoding="utf-8") as out:
            out.write(text)
    if code < 0:
        code = 128 - code  # killed by a signal: the shell's convention
    parsed = parse_text(text)
    report = replace(parsed, placements=explain(parsed.placements, facts), log=text,
                     title=f"trace of {script} (exit code {code})", copies=copied)
    return TraceResult(report=report, exit_code=code, interrupted=interrupted)


def read_facts(path: str) -> tuple[Facts, tuple[Copy, ...] | None]:
    """What the child recorded beside the log (copies: None when no Session ran); nothing if it
    could not write it."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return Facts(), None
    facts = facts_from_dict(data)
    copies = data.get("copies") if facts.graphs_known else None
    return facts, None if copies is None else tuple(Copy(*c) for c in copies)


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
