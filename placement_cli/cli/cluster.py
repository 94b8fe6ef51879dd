"""Clusters of TensorFlow servers: cluster (a real ps/worker run on this machine) and inspect (a running one)."""

from __future__ import annotations

import math
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from placement_cli import clusterspec, messages
from placement_cli.cli import shown
from placement_cli.cli.commands import command, option_callback
from placement_cli.cli.funnel import say
from placement_cli.cli.options import (
    AllOpt,
    DotOpt,
    ForceOpt,
    GraphSvgOpt,
    JsonOpt,
    SvgOpt,
    TimeStepsOpt,
    capped,
    implies_time,
    pictures,
    timed,
)
from placement_cli.cli.outcome import ExitCode, Json, Outcome, Pictures, signalled
from placement_cli.exceptions import Terminated, UsageProblem
from placement_cli.i18n import _
from placement_cli.i18n import shown as shown_message
from placement_cli.lessons import cluster as lesson
from placement_cli.lessons.cluster import build
from placement_cli.model.caps import MAX_WARMUP
from placement_cli.render.cluster import cluster_group, progress_line
from placement_cli.render.inspect import render_inspection, silent_summary
from placement_cli.runtime.cluster import inspect as inspection
from placement_cli.runtime.cluster.launch import check_cluster

if TYPE_CHECKING:
    from placement_cli.model import ClusterEvent


class Api(str, Enum):
    tf1 = "tf1"
    tf2 = "tf2"


class GpuMemoryPolicy(str, Enum):  # runtime.gpu_policy.POLICIES
    growth = "growth"
    share = "share"
    whole = "whole"


@option_callback
def _timeout_option(value: float) -> float:
    if not math.isfinite(value) or not 0.5 <= value <= 60:  # nan passes a range check: it compares false
        raise typer.BadParameter(f"{value} is not a timeout: give seconds from 0.5 to 60")
    return value


def progress(event: ClusterEvent) -> None:
    """A cluster's start-up, a line per task on stderr, as it happens (cluster, and the demo's cluster step)."""

    line = progress_line(event)
    if line is not None:
        say(line)


@command()
def inspect(
    target: Annotated[str | None, typer.Argument(metavar="[TARGET]", help="A task of the cluster: grpc://HOST:PORT or HOST:PORT.", show_default=False)] = None,
    cluster_spec: Annotated[str | None, typer.Option("--cluster-spec", metavar="FILE", help="The cluster as TensorFlow's ClusterSpec JSON ({\"ps\": [\"host:2222\"], \"worker\": [...]}) or a TF_CONFIG object.")] = None,
    timeout: Annotated[float, typer.Option("--timeout", metavar="SECONDS", callback=_timeout_option, help="How long each task may take to answer (0.5 to 60).")] = 5.0,
    as_json: JsonOpt = False,
    svg: SvgOpt = None,
    force: ForceOpt = False,
) -> Outcome:
    """Ask a running TensorFlow cluster for its tasks and devices, without disturbing it.

    Give one task's target, --cluster-spec FILE, or nothing with TF_CONFIG set. Only devices are
    listed: no op runs and no variable is made. With the tasks known, each is asked about itself
    and a task that does not answer is named (exit 1); with only a target, the master lists every
    task, but cannot say which one is missing when one is.

    Example: placement inspect grpc://localhost:2222 --timeout 3
    """

    if target is not None and cluster_spec is not None:
        raise UsageProblem("give a TARGET or --cluster-spec FILE, not both")
    cluster = address = None
    if target is not None:
        address = clusterspec.from_target(target)
    elif cluster_spec is not None:
        cluster = clusterspec.from_file(cluster_spec)
    else:
        cluster = clusterspec.from_environment()
        if cluster is None:
            raise UsageProblem("nothing to inspect: give grpc://HOST:PORT, --cluster-spec FILE, or set TF_CONFIG")
    drawn = pictures("placement inspect", as_json=as_json, force=force, svg=svg,
                     protect=(cluster_spec,) if cluster_spec else ())

    found = inspection.run(cluster, address, timeout)  # TensorFlow works in a child process, bounded and killable

    missing = silent_summary(found)
    return Outcome(code=ExitCode.OK if found.complete else ExitCode.PLACEMENT_FAILED,
                   output=[Json(found.to_dict()) if as_json else render_inspection(found)], pictures=drawn,
                   notices=(missing,) if missing else ())


@command()
def cluster(
    ps: Annotated[int | None, typer.Option("--ps", metavar="N", callback=capped("--ps", 1, 4, "one process per task on this machine"), help="Parameter-server tasks (default 2).")] = None,
    workers: Annotated[int | None, typer.Option("--workers", metavar="N", callback=capped("--workers", 1, 8, "one process per task on this machine"), help="Worker tasks (default 2).")] = None,
    steps: Annotated[int, typer.Option("--steps", metavar="N", callback=capped("--steps", 1, 1000, "a lesson, not a training job"), help="Training steps: each worker's own (async), or global steps (--sync).")] = 5,
    sync: Annotated[bool, typer.Option("--sync", help="SyncReplicasOptimizer: one averaged update per global step, from every worker's gradient.")] = False,
    cluster_spec: Annotated[str | None, typer.Option("--cluster-spec", metavar="FILE", help="The cluster as ClusterSpec JSON or a TF_CONFIG object: jobs ps and worker, local addresses, ports as given (TF_CONFIG is read when set and neither this nor --ps/--workers is given).")] = None,
    copies: Annotated[bool, typer.Option("--copies", help="Trace each worker's first step: the _Send/_Recv copies between tasks.")] = False,
    api: Annotated[Api, typer.Option("--api", help="tf1: between-graph training, each worker its own session (replica_device_setter); tf2: ParameterServerStrategy with a ClusterCoordinator joining as /job:chief.")] = Api.tf1,
    gpu_memory: Annotated[GpuMemoryPolicy, typer.Option("--gpu-memory", help="How the tasks share a GPU: growth (each takes GPU memory as it needs it: allow_growth, TF_FORCE_GPU_ALLOW_GROWTH=true), share (each a fixed share: per_process_gpu_memory_fraction 0.9/N), whole (TensorFlow's default: the first task takes nearly all). A TF_FORCE_GPU_ALLOW_GROWTH you set is kept and wins.")] = GpuMemoryPolicy.growth,
    ps_on_cpu: Annotated[bool, typer.Option("--ps-on-cpu/--ps-on-gpu", help="Keep the ps tasks off the GPU (CUDA_VISIBLE_DEVICES=\"\"), as TensorFlow's distributed guides do: the variables live on ps CPU:0.")] = True,
    all_rows: AllOpt = False,
    as_json: JsonOpt = False,
    svg: SvgOpt = None,
    dot: DotOpt = None,
    graph_svg: GraphSvgOpt = None,
    time: Annotated[bool, typer.Option("--time", help="Time each worker's own steps with TensorFlow's profiler (tf1): per worker, busy time per device, the ops that take most, the copies it sends to the ps tasks, the placements that cost most.")] = False,
    time_steps: TimeStepsOpt = 10,
    warmup: Annotated[int, typer.Option("--warmup", min=0, max=MAX_WARMUP, metavar="N", callback=implies_time, help=f"Each worker's first N steps are left out of the times (at most {MAX_WARMUP}); implies --time.")] = 1,
    force: ForceOpt = False,
) -> Outcome:
    """Start a real ps/worker cluster on this machine (one process per task, TensorFlow's gRPC
    servers) and train a softmax regression between-graph: variables round-robin over the ps tasks
    (replica_device_setter), compute on the workers, async by default.

    Shows the tasks (address, pid, exit code), every worker's placements by job/task, where each
    variable lives, the loss and global step per worker, and how async and sync differ in what ran.
    On Linux the cluster runs in a private network namespace; elsewhere its ports listen on every
    interface, unauthenticated, while it runs. Every task is ended before the command returns;
    a task that dies or never starts is named (exit 1); Ctrl-C exits 130, SIGTERM 143.
    Example: placement cluster --ps 2 --workers 2 --steps 10 --sync
    """

    timing = timed(time, Pictures())
    if timing and api is Api.tf2:
        raise UsageProblem(_("--time times each worker's own session (--api tf1): the coordinator of --api tf2 "
                             "schedules steps the workers run as they come"))
    if timing and warmup >= steps:
        raise UsageProblem(_("--time with --warmup {warmup} and --steps {steps}: no step is left to measure").format(
            warmup=warmup, steps=steps))
    flags = ps is not None or workers is not None
    if cluster_spec is not None and flags:
        raise UsageProblem("give --cluster-spec FILE or --ps/--workers, not both")
    described, ignored = clusterspec.described(cluster_spec, flags)
    if ignored:
        say(_("TF_CONFIG is set and ignored: --ps and --workers describe the cluster"))
    addresses = check_cluster(described) if described is not None else None
    request = lesson.plan(api=api.value, ps=ps, workers=workers, steps=steps, sync=sync, copies=copies, addresses=addresses,
                   gpu_memory=gpu_memory.value, ps_on_gpu=not ps_on_cpu)
    request["time"] = [warmup, time_steps] if timing else None
    drawn = pictures("placement cluster", as_json=as_json, force=force, svg=svg, dot=dot, graph_svg=graph_svg,
                     protect=(cluster_spec,) if cluster_spec else ())
    try:
        found_run = lesson.run(request, progress)
    except Terminated as exc:
        say(_("{signal}: every task of the cluster was ended").format(signal=exc))
        raise typer.Exit(int(signalled(exc.signum))) from None  # 143 for SIGTERM, 129 for SIGHUP

    found = build(found_run, sync=sync, steps=steps, copies=copies, api=api.value, timed=timing)
    code = ExitCode.OK if found.complete else ExitCode.PLACEMENT_FAILED
    if found_run.own_failure:  # placement's supervisor failed, not the cluster: as inspect's own child
        code = ExitCode.INTERNAL
    if as_json:
        output: list[Any] = [Json(found.to_dict())]
    else:

        output = [cluster_group(found, shown.view(all_rows=all_rows))]
    notices: tuple[str, ...] = ()
    if found_run.problem is not None:
        notices = (shown_message(found_run.problem),
                   *((shown_message(messages.GPU_TAKEN_CLUSTER),) if found_run.cause and found_run.cause.gpu_taken else ()))
    # the graph: each worker's nodes on its task, the ps nodes drawn once
    return Outcome(code=code, output=output, pictures=drawn, graph=found.graph, notices=notices)
