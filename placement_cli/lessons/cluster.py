"""`placement cluster`: what a ps/worker run did, as a report and as data (no TensorFlow here)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from placement_cli.devices import try_parse
from placement_cli.logparse import parse_text
from placement_cli.model import Copy, Edge, Placement, Report
from placement_cli.runtime.cluster import ClusterRun

_SCHEDULED = re.compile(r"Executing op __inference_train_step_\d+ on task /job:worker/replica:\d+/task:(\d+)")
_SYNC_OPS = ("ConditionalAccumulator", "FIFOQueue", "FIFOQueueV2", "QueueEnqueueManyV2", "QueueDequeueV2",
             "AccumulatorTakeGradient", "ResourceConditionalAccumulator", "ResourceAccumulatorTakeGradient")


@dataclass(frozen=True)
class ClusterReport:
    run: ClusterRun
    report: Report
    sync: bool
    steps: int
    api: str = "tf1"
    graph: Report | None = None  # for --dot and --graph-svg: node names qualified by the task they ran on

    @property
    def complete(self) -> bool:
        workers = [t for t in self.run.tasks if t["job"] == "worker"]
        expected = 1 if self.api == "tf2" else len(workers)
        return self.run.error is None and bool(workers) and len(self.run.results) == expected

    @property
    def scheduled(self) -> dict[int, int]:
        """TF2: worker task -> steps the coordinator ran there (its log's ``Executing op
        __inference_train_step_N on task /job:worker/.../task:I`` lines)."""
        counts = dict.fromkeys((t["task"] for t in self.run.tasks if t["job"] == "worker"), 0)
        for match in _SCHEDULED.finditer(self.run.logs.get("chief/0", "")):
            task = int(match[1])
            counts[task] = counts.get(task, 0) + 1
        return counts

    @property
    def variables(self) -> dict[str, str]:
        found: dict[str, str] = {}
        for result in self.run.results.values():
            found.update(result.get("variables") or {})
        return dict(sorted(found.items()))

    @property
    def sync_ops(self) -> dict[str, int]:
        """Op types of SyncReplicasOptimizer's machinery that the workers' graphs placed, with counts."""
        counts: dict[str, int] = {}
        for p in self.report.placements:
            if p.op and (p.op in _SYNC_OPS or "Accumulator" in p.op or "TokenQueue" in p.op):
                counts[p.op] = counts.get(p.op, 0) + 1
        return dict(sorted(counts.items()))

    def workers(self) -> list[dict[str, Any]]:
        if self.api == "tf2":
            # the coordinator's log counts what it sent where; without its result the count is a
            # lower bound at best (steps_reported), and what ran is not known (null)
            known = "chief/0" in self.run.results
            return [{"task": task, "steps": n} if known else
                    {"task": task, "steps": None, "steps_reported": n if "chief/0" in self.run.logs else None}
                    for task, n in sorted(self.scheduled.items())]
        out = []
        for task in self.run.tasks:
            if task["job"] != "worker":
                continue
            result = self.run.results.get(f"worker/{task['task']}")
            if result is None:  # it never reported: what it ran is not known (null), not nothing (0)
                out.append({"task": task["task"], "steps": None, "losses": None, "global_steps": None,
                            "steps_reported": task.get("steps_reported")})
                continue
            out.append({"task": task["task"], "steps": len(result.get("losses") or []),
                        "losses": result.get("losses") or [], "global_steps": result.get("global_steps") or []})
        return out

    def to_dict(self) -> dict[str, Any]:
        data = self.report.to_dict(run=True)
        data.update(
            mode="sync" if self.sync else "async",
            api=self.api,
            steps_asked=self.steps,
            tasks=[{k: t.get(k) for k in ("job", "task", "target", "pid", "exit_code", "ended_by_placement", "private_kib",
                                          "steps_reported")}
                   for t in self.run.tasks],
            isolated=self.run.isolated,
            variables=self.variables,
            workers=self.workers(),
            sync_ops=self.sync_ops,
            complete=self.complete,
            error=self.run.error,
            seconds=self.run.seconds,
        )
        if self.api == "tf2":
            chief = self.run.results.get("chief/0")
            data.update(losses=None if chief is None else chief.get("losses") or [],
                        global_steps=None if chief is None else chief.get("global_steps") or [])
        return data


def build(run: ClusterRun, *, sync: bool, steps: int, copies: bool, api: str = "tf1") -> ClusterReport:
    """Every task's log parsed (TF1: each worker logs its own graph's placement), tagged with the
    task that logged it; the copies each worker's first step made between tasks."""
    placements = []
    drawn: list[Placement] = []
    edges: dict[Edge, None] = {}
    lines = 0
    for name in sorted(run.logs, key=lambda n: (n.split("/")[0], int(n.split("/")[1]))):
        parsed = parse_text(run.logs[name])
        lines += parsed.lines
        placements.extend(parsed.placements)
        qualified = {p.node: _on_task(p.device, p.node) for p in parsed.placements if p.node}
        drawn.extend(replace(p, node=qualified[p.node]) for p in parsed.placements if p.node)
        for source, target, control in (run.results.get(name) or {}).get("edges") or ():
            if source in qualified and target in qualified:
                edges.setdefault(Edge(qualified[source], qualified[target], bool(control)), None)
    found_copies = None
    if copies:
        found_copies = tuple(Copy(**{**c, "shape": None if c.get("shape") is None else tuple(c["shape"])})
                             for _, result in sorted(run.results.items()) for c in result.get("copies") or ())
    result = None
    workers = [t for t in run.tasks if t["job"] == "worker"]
    if run.error is None and workers and len(run.results) == (1 if api == "tf2" else len(workers)):
        result = {name: r["losses"][-1] if r.get("losses") else None for name, r in sorted(run.results.items())}
    report = Report(placements=tuple(placements), lines=lines, result=result, copies=found_copies,
                    run_error=run.error, title="placement cluster")
    drawn_copies = None if found_copies is None else tuple(
        replace(c, producer=_on_task(c.source, c.producer_node)) for c in found_copies)
    graph = replace(report, placements=tuple(drawn), edges=tuple(edges) if edges else None, copies=drawn_copies)
    return ClusterReport(run=run, report=report, sync=sync, steps=steps, api=api, graph=graph)


def _on_task(device: str, node: str) -> str:
    """``worker/0: MatMul``: every worker builds the same graph, so a node is named by the task it
    ran on; the ps tasks' nodes, which all workers' graphs place there, are drawn once."""
    spec = try_parse(device)
    if spec is None or spec.job is None:
        return node
    return f"{spec.job}/{spec.task if spec.task is not None else 0}: {node}"


DEFAULT_TASKS = 2  # ps and worker tasks when neither --ps/--workers nor a cluster spec says


def plan(*, api: str, ps: int | None, workers: int | None, steps: int, sync: bool, copies: bool,
         addresses: dict[str, list[str]] | None) -> dict[str, Any]:
    """The cluster lesson's run, as runtime.cluster.run takes it: the tasks (the spec's, else the
    counts, else DEFAULT_TASKS each), the learning rate, and the sessions' hang guard. UsageProblem
    for what the tf2 API cannot do."""
    from placement_cli.errors import UsageProblem  # noqa: PLC0415

    if addresses is not None:
        ps, workers = len(addresses["ps"]), len(addresses["worker"])
    if api == "tf2" and (sync or copies):
        raise UsageProblem("--api tf2 takes neither --sync nor --copies (ParameterServerStrategy trains async, "
                           "and its remote functions record no partition graphs)")
    if api == "tf2" and addresses is not None:
        raise UsageProblem("--api tf2 with --cluster-spec/TF_CONFIG is not supported: give --ps and --workers")
    return {"api": api, "ps": DEFAULT_TASKS if ps is None else ps,
            "workers": DEFAULT_TASKS if workers is None else workers, "steps": steps, "sync": sync, "copies": copies, "lr": 0.5,
            # a hang guard: --sync workers legitimately wait for each other's gradients, which on
            # a loaded 2-core machine took over 10 s
            "operation_timeout_ms": 30_000 if sync else 10_000, "cluster": addresses}
