"""`placement trace --cluster`: each task's log parsed and explained as `trace` does it, then one report.

An op a task placed on ``/job:localhost/...`` (TensorFlow's name for the process's own devices before
the cluster's is in place: ops run before the strategy was made) ran in that task: its device's job
and task are that task's, so the report's job/task column (and JSON's ``job``/``task``) groups it
there. The device as TensorFlow printed it stays in ``device``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from placement_cli.i18n import Message, english
from placement_cli.logparse.engine import parse_streams
from placement_cli.model import Cause, ClusterTask, Copy, Edge, Origin, Placement, Report
from placement_cli.why import explain


def _in_task(placement: Placement, job: str, index: int) -> Placement:
    spec = placement.spec
    if spec.job not in (None, "localhost"):
        return placement
    return replace(placement, spec=replace(spec, job=job, replica=0, task=index))


def _sized(copy: Copy, sizes: dict[str, Any]) -> Copy:
    """A copy with the dtype, shape and bytes the task's graph gave it, where it gave them."""
    found = sizes.get(f"{english(copy.tensor).rsplit(':', 1)[0]}|{copy.source}|{copy.target}")
    if not isinstance(found, list) or len(found) != 4:
        return copy
    dtype, shape, size, physical = found
    return replace(copy, dtype=dtype, shape=None if shape is None else tuple(shape), bytes=size, physical=physical)


def _task_report(job: str, index: int, parsed: Any, facts: tuple[Any, Any, Any, Any, Any]) -> Report:
    size = parsed.seek(0, 2)
    parsed.seek(0)
    report = parse_streams([(f"<{job}/{index}>", parsed)], known_text=True) if size else Report()
    parsed.seek(0)
    text = parsed.read().decode("utf-8", "replace")
    parsed.close()
    known, copies, edges, _switched, sizes = facts
    if copies is not None and sizes:
        copies = tuple(_sized(c, sizes) for c in copies)
    placements = tuple(_in_task(p, job, index) for p in explain(report.placements, known))
    return replace(report, placements=placements, log=text, copies=copies, edges=edges, origin=Origin.RUN)


def merge(parts: list[tuple[str, int, Any, tuple[Any, Any, Any, Any, Any]]]) -> tuple[Report, Report]:
    """One report of every task's: placements, errors and device mappings in task order; the
    Session copies (--copies) of every task that recorded them. Then what --dot and --graph-svg
    draw: each task's graph apart, its nodes named ``TASK: node`` (every worker of a
    MultiWorkerMirroredStrategy places the same function's nodes)."""
    reports = [(f"{job}/{index}", _task_report(job, index, parsed, facts)) for job, index, parsed, facts in parts]
    drawn = [replace(p, node=f"{name}: {p.node}") for name, r in reports for p in r.placements if p.node]
    drawn_edges = {Edge(f"{name}: {e.source}", f"{name}: {e.target}", e.control): None
                   for name, r in reports for e in r.edges or ()}
    copies: list[Copy] | None = None
    edges: list[Edge] | None = None
    for _name, report in reports:
        if report.copies is not None:
            copies = (copies or []) + list(report.copies)
        if report.edges is not None:
            edges = (edges or []) + list(report.edges)
    log = "".join(f"==> {name} <==\n{report.log or ''}" for name, report in reports)
    report = Report(placements=tuple(p for _, r in reports for p in r.placements),
                    device_mapping=tuple(m for _, r in reports for m in r.device_mapping),
                    errors=tuple(e for _, r in reports for e in r.errors),
                    lines=sum(r.lines for _, r in reports), mapping_seen=any(r.mapping_seen for _, r in reports),
                    log=log, copies=None if copies is None else tuple(copies),
                    edges=None if edges is None else tuple(edges), origin=Origin.RUN)
    return report, replace(report, placements=tuple(drawn), edges=tuple(drawn_edges) if drawn_edges else None)


@dataclass(frozen=True)
class ClusterTraceResult:
    report: Report
    graph: Report  # what --dot and --graph-svg draw: each task's nodes named by their task
    exit_code: int
    tasks: tuple[ClusterTask, ...]
    isolated: bool | None
    isolation_note: str
    problem: Message | None  # the task that failed or stopped, and how
    notes: tuple[str, ...] = ()
    output_closed: bool = False
    cause: Cause | None = None  # the failed task's cause in TensorFlow's words
    signalled: int | None = None  # the signal placement received (Ctrl-C...) and passed to every task


def copy_sizes(data: dict[str, Any] | None) -> dict[str, Any] | None:
    """The sizes of the task's Session copies, as its recorder found them in the graph."""
    sizes = data.get("copy_sizes") if data is not None else None
    return sizes if isinstance(sizes, dict) else None
