"""`placement trace`: a user's script run with placement logging on from its first op."""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator
from typing import Annotated, Any

import typer
from rich.rule import Rule

from placement_cli.cli import shown
from placement_cli.cli.commands import command, option_callback
from placement_cli.cli.funnel import say
from placement_cli.cli.options import (
    AllOpt,
    ChromeTraceOpt,
    DeviceFilterOpt,
    DotOpt,
    GraphSvgOpt,
    JsonOpt,
    NodeFilterOpt,
    OpFilterOpt,
    SvgOpt,
    TimelineOpt,
    TimeStepsOpt,
    TopOpt,
    implies_time,
    named,
    pictures,
    timed,
)
from placement_cli.cli.outcome import Json, Outcome, Verbatim
from placement_cli.cli.trace_cluster import trace_cluster
from placement_cli.exceptions import UsageProblem
from placement_cli.filters import apply
from placement_cli.i18n import _
from placement_cli.messages import one_line
from placement_cli.model.caps import MAX_WARMUP
from placement_cli.model.filtered import Filters
from placement_cli.outputs import check_distinct, open_save_log
from placement_cli.render.json import traced_dict
from placement_cli.render.table import Hints, literal
from placement_cli.runtime.capture.fds import fresh_line, reopen_closed_stdio
from placement_cli.runtime.trace.tracer import check_script, run_traced


def _load_renderers() -> None:
    """Imported while the script runs: the report is printed the moment it ends."""
    import placement_cli.why  # noqa: F401, PLC0415


@option_callback
def _grace_option(value: float | None) -> float | None:
    if value is None:
        return None
    if not math.isfinite(value) or not 0 <= value <= 86400:  # nan passes a range check: it compares false
        raise typer.BadParameter(f"{value} is not a grace: give seconds from 0 to 86400")
    return value


@option_callback
def _gpu_list_option(value: str | None) -> str | None:
    """--gpu-list: each GPU once, no empty item (CUDA stops at one, dropping the GPUs after it unseen);
    an empty list as a whole gives no task a GPU."""
    if value is None or not value.strip():
        return value
    items = [item.strip() for item in value.split(",")]
    if not all(items):
        raise typer.BadParameter(_("{value}: an empty item in the list (CUDA_VISIBLE_DEVICES stops at it, so the GPUs "
                                   "after it would be dropped): give the GPUs as 0,1,2").format(value=repr(value)))
    twice = sorted({item for item in items if items.count(item) > 1})
    if twice:
        raise typer.BadParameter(_("{value}: GPU {gpus} given twice: give each GPU once (tasks that share a GPU: "
                                   "list fewer GPUs than tasks)").format(value=repr(value), gpus=", ".join(twice)))
    return value


@command(own_signals=True, context_settings={"allow_interspersed_args": False})
def trace(
    script: Annotated[str, typer.Argument(metavar="SCRIPT", callback=named, help="The Python script to run.", show_default=False)],
    args: Annotated[list[str] | None, typer.Argument(metavar="[ARGS]...", help="Arguments for the script.", show_default=False)] = None,
    device: DeviceFilterOpt = None,
    op: OpFilterOpt = None,
    node: NodeFilterOpt = None,
    top: TopOpt = None,
    save_log: Annotated[str | None, typer.Option("--save-log", metavar="FILE", help="Keep TensorFlow's log (and the script's uncaught error) in FILE. With --cluster, FILE is a folder: per task, TensorFlow's log (worker-0.log) and its own stdout and stderr (worker-0.out, worker-0.err), byte for byte.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Let --save-log, --svg, --dot and --graph-svg overwrite an existing FILE.")] = False,
    log: Annotated[bool, typer.Option("--log", help="Echo TensorFlow's placement lines too, as they come.")] = False,
    copies: Annotated[bool, typer.Option("--copies", help="List the _Send/_Recv copies between devices of the script's tf.compat.v1.Session runs (their executed graphs, as grappler left them; asked for once per session and fetch).")] = False,
    all_rows: AllOpt = False,
    as_json: JsonOpt = False,
    svg: SvgOpt = None,
    dot: DotOpt = None,
    graph_svg: GraphSvgOpt = None,
    time: Annotated[bool, typer.Option("--time", help="Time the script with TensorFlow's profiler, on from its import: per call of its most called tf.function (its step), busy time per device, the ops that take most, each copy's bytes and time, and the placements that cost most.")] = False,
    warmup: Annotated[int, typer.Option("--warmup", min=0, max=MAX_WARMUP, metavar="N", callback=implies_time, help=f"The step's first N calls are left out of the times (the first traces and places the function; at most {MAX_WARMUP}); implies --time.")] = 2,
    time_steps: TimeStepsOpt = 10,
    timeline: TimelineOpt = None,
    chrome_trace: ChromeTraceOpt = None,
    cluster: Annotated[str | None, typer.Option("--cluster", metavar="JOB=N,...", help="Run SCRIPT once per task of a cluster on this machine (worker=N[,ps=M][,chief=1]), each with its TF_CONFIG, and report the placements per task.")] = None,
    cluster_spec: Annotated[str | None, typer.Option("--cluster-spec", metavar="FILE", help="As --cluster, with the tasks and loopback ports of a ClusterSpec JSON or TF_CONFIG file.")] = None,
    chief_grace: Annotated[float | None, typer.Option("--chief-grace", metavar="SECONDS", callback=_grace_option, show_default=False, help="With --cluster: how long a task that neither serves (Server.join) nor has ended may run on after the chief finished; then placement ends it and the run fails (exit 1). Default: 60.")] = None,
    split_gpus: Annotated[bool, typer.Option("--split-gpus", help="With --cluster: give each task its own GPU(s) through CUDA_VISIBLE_DEVICES, as multi-worker launchers do: ps tasks none, the others equal blocks of the GPUs (round-robin when there are fewer GPUs than tasks). The GPUs: your CUDA_VISIBLE_DEVICES, else those the NVIDIA driver lists.")] = False,
    gpu_list: Annotated[str | None, typer.Option("--gpu-list", metavar="IDS", callback=_gpu_list_option, help="With --cluster: the GPUs --split-gpus shares out, as CUDA_VISIBLE_DEVICES lists them (0,1,2 or GPU-UUIDs); implies --split-gpus.")] = None,
) -> Outcome:
    """Run your TensorFlow script with placement logging on from its first op, then show its placements.

    placement's options go before SCRIPT; everything after SCRIPT is the script's, untouched.
    The script's own output reaches the terminal live (placement lines are consumed); with
    --json its stdout goes to stderr so the JSON on stdout stays clean. The exit code is the script's.
    The why column explains each op not where its graph asked, or on a CPU while a GPU exists.
    Example: placement trace train.py --epochs 1
    """

    closed = reopen_closed_stdio()
    check_script(script)
    check_distinct((("--save-log", save_log), ("--svg", svg), ("--dot", dot), ("--graph-svg", graph_svg),
                    ("--timeline", timeline), ("--chrome-trace", chrome_trace)))
    drawn = pictures("placement trace", as_json=as_json, force=force, svg=svg, dot=dot, graph_svg=graph_svg,
                     protect=(script,), timeline=timeline, chrome_trace=chrome_trace)
    timing = timed(time, drawn)
    if cluster is not None or cluster_spec is not None:  # one process per task: cli.trace_cluster
        if timing:
            raise UsageProblem(_("--time, --timeline and --chrome-trace time one process: not with --cluster or "
                                 "--cluster-spec"))

        return trace_cluster(script, args or [], cluster=cluster, cluster_spec=cluster_spec,
                             filters=Filters(device, op, node, top), save_log=save_log, force=force, log=log,
                             copies=copies, all_rows=all_rows, as_json=as_json, drawn=drawn,
                             split_gpus=split_gpus or gpu_list is not None, gpu_list=gpu_list,
                             chief_grace=60.0 if chief_grace is None else chief_grace)
    if split_gpus or gpu_list is not None:
        raise UsageProblem(_("{option} gives each task of a cluster its GPUs: use it with --cluster or "
                             "--cluster-spec").format(option="--gpu-list" if gpu_list is not None else "--split-gpus"))
    if chief_grace is not None:
        raise UsageProblem(_("--chief-grace is how long the tasks of a cluster may run on after the chief: use it "
                             "with --cluster or --cluster-spec"))
    saved = open_save_log(save_log, script, force) if save_log else None
    traced = run_traced(script, args or [], stdout_fd=2 if as_json else 1, echo_log=log, save_log=saved,
                        copies=copies, closed=closed, meanwhile=_load_renderers, timed=(warmup, time_steps) if timing else None)
    if 2 not in closed:
        fresh_line(2)  # after the script's own unfinished line, placement's messages start a line of their own
    for note in traced.notes:
        say(note)
    if traced.output_closed:  # | head -1: the report has nowhere to go, which is no error
        return Outcome(code=traced.exit_code, output_closed=True)
    name = one_line(script)  # the script's name, one way everywhere
    narrowed = apply(traced.report, Filters(device, op, node, top))
    output = _json(traced, narrowed) if as_json else _tables(traced, narrowed, name, all_rows)
    notices = shown.found_nothing(traced.report, name, copies)
    return Outcome(code=traced.exit_code, output=output, pictures=drawn, graph=narrowed.report,
                   notices=tuple(notices), keep_code=True,  # the script ran: its exit code is the user's
                   program_output=True)


def _json(traced: Any, narrowed: Any) -> list[Any]:
    return [Json(traced_dict(narrowed.report, traced.exit_code, narrowed)), *shown.no_match(narrowed)]


def _tables(traced: Any, narrowed: Any, name: str, all_rows: bool) -> Iterator[Any]:
    """The report under a rule naming the script and its exit code; made as it is printed, as the
    script's output may have left stdout closed or its last line unfinished."""


    sys.stdout.flush()
    fresh_line(1)
    title = literal(_("placement: {script} exited with code {code}").format(script=name, code=traced.exit_code))
    yield Verbatim(Rule(title))
    yield from shown.report_output(narrowed.report, as_json=False, all_rows=all_rows,
                                   hints=Hints(source="program"), filtered=narrowed)

