"""`placement cluster`: a real ps/worker run, and its report (every task's log parsed; no TensorFlow here)."""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from placement_cli.devices import try_parse
from placement_cli.exceptions import UsageProblem
from placement_cli.logparse import parse_text
from placement_cli.model import ClusterEvent, ClusterReport, ClusterRun, Edge, Origin, Placement, Report, WorkerSteps
from placement_cli.model.kinds import PlacementKind
from placement_cli.runtime import gpu_policy
from placement_cli.runtime.cluster import launch as cluster_launch

if TYPE_CHECKING:
    from placement_cli.model.cost import Cost

# The supervisor's process: the entry module that hands it the work each task runs.
ENTRY = "placement_cli.lessons.cluster_tasks"
_STEP_FUNCTION = re.compile(r"__inference_train_step_\d+")  # the coordinator's tf.function, as TF names it
_SYNC_OPS = ("ConditionalAccumulator", "FIFOQueue", "FIFOQueueV2", "QueueEnqueueManyV2", "QueueDequeueV2",
             "AccumulatorTakeGradient", "ResourceConditionalAccumulator", "ResourceAccumulatorTakeGradient")


def run(request: dict[str, Any], progress: Callable[[ClusterEvent], None]) -> ClusterRun:
    """Start the cluster ``request`` describes, every task a process, and train (see cluster_tasks)."""
    return cluster_launch.run(request, progress, ENTRY)


def build(run: ClusterRun, *, sync: bool, steps: int, copies: bool, api: str = "tf1", timed: bool = False) -> ClusterReport:
    """Every task's log parsed (TF1: each worker logs its own graph's placement), tagged with the
    task that logged it; the copies each worker's first step made between tasks."""
    placements: list[Placement] = []
    by_task: dict[str, tuple[Placement, ...]] = {}  # each task's own placements (a worker's times join its own)
    drawn: list[Placement] = []
    edges: dict[Edge, None] = {}
    lines = 0
    scheduled: Counter[int] = Counter()
    everywhere: dict[str, dict[str, None]] = {}  # TF2: a node of the step -> its name on each task that placed it
    for name, log in sorted(run.logs, key=lambda item: (item[0].split("/")[0], int(item[0].split("/")[1]))):
        parsed = parse_text(log)
        lines += parsed.lines
        placements.extend(parsed.placements)
        by_task[name] = parsed.placements
        if name == "chief/0":
            scheduled = _scheduled(parsed)
        qualified = {p.node: _on_task(p.device, p.node) for p in parsed.placements if p.node}
        drawn.extend(replace(p, node=qualified[p.node]) for p in parsed.placements if p.node)
        for node, shown in qualified.items():
            everywhere.setdefault(node, {})[shown] = None
        training = run.result(name)
        for source, target, control in training.edges if training is not None and api != "tf2" else ():
            if source in qualified and target in qualified:
                edges.setdefault(Edge(qualified[source], qualified[target], bool(control)), None)
    coordinator = run.result("chief/0") if api == "tf2" else None
    for source, target, control in coordinator.edges if coordinator is not None else ():
        # TF2: the coordinator traced the step; each worker ran it and each ps task its part, each
        # logging its own nodes: an edge joins them on one task, or a ps task's node to every worker's
        for a in everywhere.get(source, ()):
            for b in everywhere.get(target, ()):
                if _task_of(a) == _task_of(b) or "ps" in (_task_of(a).split("/")[0], _task_of(b).split("/")[0]):
                    edges.setdefault(Edge(a, b, bool(control)), None)
    found_copies = None
    if copies:
        found_copies = tuple(c for _, training in sorted(run.results, key=lambda item: item[0])
                             for c in training.copies)
    result = None
    if run.error is None and run.workers and len(run.results) == (1 if api == "tf2" else len(run.workers)):
        result = {name: training.losses[-1] if training.losses else None
                  for name, training in sorted(run.results, key=lambda item: item[0])}
    report = Report(placements=tuple(placements), lines=lines, result=result, copies=found_copies,
                    run_error=run.error, title="placement cluster", origin=Origin.RUN)
    drawn_copies = None if found_copies is None else tuple(
        replace(c, producer=_on_task(c.source, c.producer_node)) for c in found_copies)
    graph = replace(report, placements=tuple(drawn), edges=tuple(edges) if edges else None, copies=drawn_copies)
    counts = dict.fromkeys((t.task for t in run.workers), 0)
    for task, n in scheduled.items():
        counts[task] = counts.get(task, 0) + n
    timed_costs: tuple[tuple[str, Cost], ...] | None = None
    timing_errors: list[tuple[str, str]] = []
    if timed:  # each worker's own steps, joined with its own placements
        from placement_cli import costs  # noqa: PLC0415 - start-up: only a timed run needs it

        found = []
        for name, training in sorted(run.results, key=lambda item: item[0]):
            if training.profile is not None:
                found.append((name, costs.build(training.profile, by_task.get(name, ()))))
            else:
                timing_errors.append((name, training.timing_error or "the worker sent no profile"))
        timed_costs = tuple(found)
    return ClusterReport(run=run, report=report, sync=sync, steps=steps, api=api, graph=graph,
                         scheduled=tuple(counts.items()), workers=_workers(run, api, counts),
                         sync_ops=_sync_ops(report), costs=timed_costs, timing_errors=tuple(timing_errors))


def _scheduled(chief: Report) -> Counter[int]:
    """TF2: worker task -> steps the coordinator ran there (its log's eager lines ``Executing op
    __inference_train_step_N on task /job:worker/.../task:I/device:CPU:0``)."""
    return Counter(p.spec.task for p in chief.placements if p.kind == PlacementKind.EAGER and p.op
                   and _STEP_FUNCTION.fullmatch(p.op) and p.spec.job == "worker" and p.spec.task is not None)


def _workers(run: ClusterRun, api: str, scheduled: dict[int, int]) -> tuple[WorkerSteps, ...]:
    if api == "tf2":
        # the coordinator's log counts what it sent where; without its result the count is a
        # lower bound at best (steps_reported), and what ran is not known (null)
        known = run.result("chief/0") is not None
        logged = run.log("chief/0") is not None
        return tuple(WorkerSteps(task, n if known else None, steps_reported=n if logged and not known else None,
                                 api=api, known=known) for task, n in sorted(scheduled.items()))
    out = []
    for task in run.workers:
        training = run.result(task.name)
        if training is None:  # it never reported: what it ran is not known (null), not nothing (0)
            out.append(WorkerSteps(task.task, None, steps_reported=task.steps_reported, known=False))
            continue
        out.append(WorkerSteps(task.task, len(training.losses), training.losses, training.global_steps))
    return tuple(out)


def _sync_ops(report: Report) -> tuple[tuple[str, int], ...]:
    """Op types of SyncReplicasOptimizer's machinery that the workers' graphs placed, with counts."""
    counts: dict[str, int] = {}
    for p in report.placements:
        if p.op and (p.op in _SYNC_OPS or "Accumulator" in p.op or "TokenQueue" in p.op):
            counts[p.op] = counts.get(p.op, 0) + 1
    return tuple(sorted(counts.items()))


def _on_task(device: str, node: str) -> str:
    """``worker/0: MatMul``: every worker builds the same graph, so a node is named by the task it
    ran on; the ps tasks' nodes, which all workers' graphs place there, are drawn once."""
    spec = try_parse(device)
    if spec is None or spec.job is None:
        return node
    return f"{spec.job}/{spec.task if spec.task is not None else 0}: {node}"


def _task_of(drawn: str) -> str:
    """``worker/0`` of ``worker/0: MatMul`` (what _on_task named); '' for a name without a task."""
    task, sep, _node = drawn.partition(": ")
    return task if sep else ""


DEFAULT_TASKS = 2  # ps and worker tasks when neither --ps/--workers nor a cluster spec says


def worker_threads(workers: int, environ: Any) -> int:
    """TF2: the inter-op threads each worker's server gets. A worker runs a step the coordinator
    sends it on a thread of that pool, which waits there until the step is done while the step's
    own ops need other threads of the same pool. TensorFlow sizes the pool by the CPUs this process
    may use (or ``TF_NUM_INTEROP_THREADS``): with one CPU a worker had one thread and every run
    hung at its first step until the training limit. TensorFlow's own ParameterServerStrategy
    tests give each worker at least workers + 1 (multi_worker_test_base: "the cluster may hang if
    workers don't have enough inter_op threads"); a larger pool, the CPUs' or yours, is kept."""

    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cpus = os.cpu_count() or 1
    try:
        asked = int(environ.get("TF_NUM_INTEROP_THREADS") or 0)
    except ValueError:
        asked = 0
    return max(asked if asked > 0 else cpus, workers + 1)


def plan(*, api: str, ps: int | None, workers: int | None, steps: int, sync: bool, copies: bool,
         addresses: dict[str, list[str]] | None, gpu_memory: str = gpu_policy.DEFAULT,
         ps_on_gpu: bool = False) -> dict[str, Any]:
    """The cluster lesson's run, as runtime.cluster.run takes it: the tasks (the spec's, else the
    counts, else DEFAULT_TASKS each), the learning rate, the sessions' hang guard, and how the tasks
    share a GPU (every task a process on this machine: growth by default, ps tasks off the GPU, as
    TensorFlow's distributed guides keep them). UsageProblem for what the tf2 API cannot do."""


    if addresses is not None:
        ps, workers = len(addresses["ps"]), len(addresses["worker"])
    if api == "tf2" and (sync or copies):
        raise UsageProblem("--api tf2 takes neither --sync nor --copies (ParameterServerStrategy trains async, "
                           "and its remote functions record no partition graphs)")
    if api == "tf2" and addresses is not None:
        raise UsageProblem("--api tf2 with --cluster-spec/TF_CONFIG is not supported: give --ps and --workers")
    ps = DEFAULT_TASKS if ps is None else ps
    workers = DEFAULT_TASKS if workers is None else workers
    on_gpu = workers + (1 if api == "tf2" else 0) + (ps if ps_on_gpu else 0)
    memory = gpu_policy.decide(gpu_memory, os.environ, gpu_tasks=on_gpu, ps_on_gpu=ps_on_gpu)
    return {"api": api, "ps": ps, "workers": workers, "steps": steps, "sync": sync, "copies": copies, "lr": 0.5,
            "gpu_memory": memory.to_dict(),
            "worker_inter_op_threads": worker_threads(workers, os.environ) if api == "tf2" else None,
            # a hang guard: --sync workers legitimately wait for each other's gradients, which on
            # a loaded 2-core machine took over 10 s
            "operation_timeout_ms": 30_000 if sync else 10_000, "cluster": addresses}
