"""Running a lesson's graph with fds captured, then parsing and explaining what it placed."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from placement_cli.logparse import parse_text
from placement_cli.model import Copy, Report
from placement_cli.runtime.facts import GraphRecorder, kernel_checks, kernel_map
from placement_cli.runtime.fdcapture import capture_fds
from placement_cli.runtime.stepstats import traced_run
from placement_cli.runtime.startup import RunOptions, available_devices, tensorflow
from placement_cli.why import Facts, explain


@dataclass
class Trial:
    """What one run produced before parsing: requests, result, error text."""

    graph: Any = None  # graph mode: the graph that ran (requests are read from it)
    groups: dict[str, str] = field(default_factory=dict)  # node -> group label (tower)
    eager: list[tuple[str, str | None, str | None]] = field(default_factory=list)  # (op, device, group) in run order
    copies: list[Copy] | None = None
    executed: tuple[tuple[str, int], ...] | None = None  # --copies: op types the traced run executed
    result: Any = None
    error: str | None = None
    available: tuple[str, ...] = ()


def run_session(tf: Any, sess: Any, fetch: Any, options: RunOptions, trial: Trial) -> Any:
    """sess.run, asking for the partition graphs when the copies between devices are wanted."""
    if not options.copies:
        return sess.run(fetch)
    traced = traced_run(tf, sess, fetch, virtual_gpus=bool(options.virtual_gpus))
    trial.copies, trial.executed = traced.copies, traced.executed
    return traced.value


def run_captured(build: Any, options: RunOptions, title: str) -> Report:
    """Run ``build(tf, options) -> Trial`` with fds 1/2 captured, then parse and explain."""
    recorder = GraphRecorder()
    with capture_fds() as cap:
        tf = tensorflow(options)
        undo = recorder.install()
        try:
            trial = build(tf, options)
        finally:
            undo()
        trial.available = available_devices(tf)
    if trial.graph is not None:
        recorder.add(trial.graph)
    log = cap.text
    report = parse_text(log + ("\n" + trial.error if trial.error else ""))
    placements = explain(report.placements, facts_of(recorder, trial))
    copies = None if trial.copies is None else tuple(trial.copies)
    return replace(report, placements=placements, title=title, result=trial.result, log=log, copies=copies,
                   executed=trial.executed)


def facts_of(recorder: GraphRecorder, trial: Trial) -> Facts:
    """What the run's graphs asked for, with the devices and kernels there were."""
    kernels = kernel_map()
    return Facts(nodes=recorder.nodes(kernels, kernel_checks(trial.available), trial.groups), available=trial.available,
                 kernels=kernels, eager=tuple(trial.eager), complete=True, graphs_known=True)
