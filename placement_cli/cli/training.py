"""The training lessons: train (the cifar10 tower pattern) and mirrored (MirroredStrategy)."""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any

import typer

from placement_cli.cli import shown
from placement_cli.cli.commands import command
from placement_cli.cli.options import (
    AllOpt,
    ChromeTraceOpt,
    CpusOpt,
    DeviceFilterOpt,
    DotOpt,
    ForceOpt,
    GraphSvgOpt,
    JsonOpt,
    LogOpt,
    Mode,
    NodeFilterOpt,
    OpFilterOpt,
    SoftOpt,
    SvgOpt,
    TensorBoardOpt,
    TimelineOpt,
    TimeOpt,
    TimeStepsOpt,
    TopOpt,
    VGpusOpt,
    WarmupOpt,
    capped,
    devices_parser,
    gpus_parser,
    lr_option,
    pictures,
    run_options,
)
from placement_cli.cli.outcome import ExitCode, Json, Outcome, Pictures
from placement_cli.devices import ChosenDevices
from placement_cli.filters import apply
from placement_cli.i18n import _
from placement_cli.lessons import mirrored as mirrored_lesson
from placement_cli.lessons import train as train_lesson
from placement_cli.lessons.caps import LESSON_DEVICES
from placement_cli.lessons.mirrored import MirroredSpec
from placement_cli.lessons.split import training_devices
from placement_cli.lessons.train import TrainSpec
from placement_cli.model.filtered import Filters
from placement_cli.render.json import report_dict
from placement_cli.render.table import Hints
from placement_cli.render.training import diverged_message, training_group


class DType(str, Enum):
    float32 = "float32"
    float64 = "float64"


class Reduce(str, Enum):
    collective = "collective"
    one_device = "one-device"
    hierarchical = "hierarchical"
    nccl = "nccl"


def _code(report: Any) -> ExitCode:
    """1 when the placement failed, the steps did not all run, a loss is not finite (the training
    diverged), or the gradient check failed."""
    succeeded = not report.failed and report.training is not None and report.training.succeeded
    return ExitCode.OK if succeeded else ExitCode.PLACEMENT_FAILED


def _why_failed(report: Any) -> tuple[str, ...]:
    """The lines that say why: the training diverged, the gradient check failed."""

    training = report.training
    if training is None:
        return ()
    lines = []
    diverged = diverged_message(training)
    if diverged is not None:
        lines.append(diverged)
    if training.check is not None and not training.check.passed:
        lines.append(_("gradient check failed: max relative difference {difference:.3g} > tolerance {tolerance:g}").format(
            difference=training.check.max_rel, tolerance=training.check.tolerance))
    return tuple(lines)


def _trained(report: Any, narrowed: Any, drawn: Pictures, *, as_json: bool, log: bool, all_rows: bool,
             soft: bool | None, notices: tuple[str, ...] = ()) -> Outcome:
    """A training lesson's outcome: JSON, or its tables (roles, placements or digest, losses, check, copies)."""
    shown_report = narrowed.report
    if as_json:
        output: list[Any] = [*shown.no_match(narrowed), Json(report_dict(shown_report, filtered=narrowed))]
    else:

        view = shown.view(all_rows=all_rows, hints=Hints.run_command(soft), filtered=narrowed)
        output = [*shown.no_match(narrowed), *(shown.log(shown_report) if log else ()),
                  training_group(shown_report, view)]
    return Outcome(code=_code(report), output=output, pictures=drawn, graph=shown_report,
                   notices=(*notices, *_why_failed(report)))


@command(one_machine=True)
def train(
    towers: Annotated[int | None, typer.Option("--towers", metavar="N", callback=capped("--towers", 1, LESSON_DEVICES["train"][0], LESSON_DEVICES["train"][2]), help="How many towers (default 2; with --devices or --gpus, one per device).")] = None,
    devices: Annotated[ChosenDevices | None, typer.Option("--devices", metavar="DEV,DEV", parser=devices_parser, help="The towers' devices, e.g. /gpu:0,/gpu:1 (default: logical CPUs /cpu:1../cpu:N).")] = None,
    gpus: Annotated[ChosenDevices | None, typer.Option("--gpus", metavar="N,N|N-N", parser=gpus_parser, help="Towers on these GPUs: 0,1 or 0-3.")] = None,
    steps: Annotated[int, typer.Option("--steps", metavar="N", callback=capped("--steps", 1, 10_000, "a lesson, not a training job"), help="Training steps to run.")] = 5,
    batch: Annotated[int, typer.Option("--batch", metavar="N", callback=capped("--batch", 1, 65_536, "synthetic examples made per step"), help="Examples per step, split evenly over the towers.")] = 64,
    lr: Annotated[float, typer.Option("--lr", metavar="RATE", callback=lr_option, help="Learning rate of the one GradientDescentOptimizer.")] = 0.5,
    dtype: Annotated[DType, typer.Option("--dtype", help="Type of the model and its data.")] = DType.float32,
    check: Annotated[bool, typer.Option("--check", help="Compare the averaged tower gradient with the full-batch gradient on one device (exit 1 beyond the tolerance).")] = False,
    soft: SoftOpt = False,
    cpus: CpusOpt = None,
    virtual_gpus: VGpusOpt = None,
    copies: Annotated[bool, typer.Option("--copies", help="Trace the first step: every _Send/_Recv with its tensor, dtype, shape and bytes, totals per link and per step (both constant folders off).")] = False,
    device: DeviceFilterOpt = None,
    op: OpFilterOpt = None,
    node: NodeFilterOpt = None,
    top: TopOpt = None,
    log: LogOpt = False,
    all_rows: AllOpt = False,
    as_json: JsonOpt = False,
    svg: SvgOpt = None,
    dot: DotOpt = None,
    graph_svg: GraphSvgOpt = None,
    tensorboard: TensorBoardOpt = None,
    time: TimeOpt = False,
    time_steps: TimeStepsOpt = 10,
    warmup: WarmupOpt = 2,
    timeline: TimelineOpt = None,
    chrome_trace: ChromeTraceOpt = None,
    force: ForceOpt = False,
) -> Outcome:
    """Train the cifar10 multi-GPU tower pattern for real: variables on the CPU, a loss and gradients
    per tower, average_gradients and one apply_gradients on the CPU.

    Towers run on logical CPUs by default (--cpus N+1, towers on /cpu:1../cpu:N), on GPUs with
    --gpus or --devices. The placements are grouped by role; the why column says where the towers'
    variable reads went.
    Example: placement train --towers 2 --check --copies
    """

    chosen, cpus = training_devices("train", towers, devices, gpus, cpus, default=2, first_cpu=1)
    train_lesson.check_split(batch, len(chosen))
    drawn = pictures("placement train", as_json=as_json, force=force, svg=svg, dot=dot, graph_svg=graph_svg,
                     timeline=timeline, chrome_trace=chrome_trace)
    options = run_options(soft, Mode.graph, cpus, virtual_gpus, copies, tensorboard, drawn, devices=tuple(chosen),
                          time=time, time_steps=time_steps, warmup=warmup)
    board = options.tensorboard

    spec = TrainSpec(devices=tuple(chosen), batch=batch, steps=steps, lr=lr, dtype=dtype.value, check=check)
    report = train_lesson.train(spec, options)
    narrowed = apply(report, Filters(device, op, node, top))
    return _trained(report, narrowed, drawn, as_json=as_json, log=log, all_rows=all_rows, soft=soft,
                    notices=(*shown.xla_notice(options), *shown.tensorboard_notice(board, written=report.result is not None)))


@command(one_machine=True)
def mirrored(
    replicas: Annotated[int | None, typer.Option("--replicas", metavar="N", callback=capped("--replicas", 1, LESSON_DEVICES["mirrored"][0], LESSON_DEVICES["mirrored"][2]), help="How many replicas (default 2; with --devices or --gpus, one per device).")] = None,
    devices: Annotated[ChosenDevices | None, typer.Option("--devices", metavar="DEV,DEV", parser=devices_parser, help="The replicas' devices, e.g. /gpu:0,/gpu:1 (default: logical CPUs /cpu:0../cpu:N-1).")] = None,
    gpus: Annotated[ChosenDevices | None, typer.Option("--gpus", metavar="N,N|N-N", parser=gpus_parser, help="Replicas on these GPUs: 0,1 or 0-3.")] = None,
    reduce: Annotated[Reduce, typer.Option("--reduce", help="The cross-device all-reduce: collective (MirroredStrategy's default), one-device (ReductionToOneDevice), hierarchical (HierarchicalCopyAllReduce), nccl (NcclAllReduce, GPUs only).")] = Reduce.collective,
    fit: Annotated[bool, typer.Option("--fit", help="Train with Keras fit instead of the custom loop (strategy.run, all_reduce, strategy.reduce).")] = False,
    steps: Annotated[int, typer.Option("--steps", metavar="N", callback=capped("--steps", 1, 1_000, "a lesson, not a training job"), help="Training steps to run.")] = 3,
    batch: Annotated[int, typer.Option("--batch", metavar="N", callback=capped("--batch", 1, 8_192, "synthetic 784-feature examples made per step"), help="Global batch per step, split evenly over the replicas.")] = 64,
    lr: Annotated[float, typer.Option("--lr", metavar="RATE", callback=lr_option, help="Learning rate of plain gradient descent.")] = 0.1,
    cpus: CpusOpt = None,
    virtual_gpus: VGpusOpt = None,
    copies: Annotated[bool, typer.Option("--copies", help="The first step's _Send/_Recv with their bytes (eager run metadata); bytes a collective moves out of sight are computed, and marked so.")] = False,
    device: DeviceFilterOpt = None,
    op: OpFilterOpt = None,
    node: NodeFilterOpt = None,
    top: TopOpt = None,
    log: LogOpt = False,
    all_rows: AllOpt = False,
    as_json: JsonOpt = False,
    svg: SvgOpt = None,
    dot: DotOpt = None,
    graph_svg: GraphSvgOpt = None,
    time: TimeOpt = False,
    time_steps: TimeStepsOpt = 10,
    warmup: WarmupOpt = 2,
    timeline: TimelineOpt = None,
    chrome_trace: ChromeTraceOpt = None,
    force: ForceOpt = False,
) -> Outcome:
    """Train the seed's 784-128-10 Keras model under tf.distribute.MirroredStrategy, for real.

    Replicas run on logical CPUs by default (--cpus N, replicas on /cpu:0../cpu:N-1), on GPUs with
    --gpus or --devices. Shows the replicas, where each variable's copies live, which all-reduce
    was used, the placements grouped per replica, and the loss per step.
    Example: placement mirrored --reduce one-device --copies
    """

    chosen, cpus = training_devices("mirrored", replicas, devices, gpus, cpus, default=2, first_cpu=0)
    mirrored_lesson.check_split(batch, len(chosen))
    drawn = pictures("placement mirrored", as_json=as_json, force=force, svg=svg, dot=dot, graph_svg=graph_svg,
                     timeline=timeline, chrome_trace=chrome_trace)

    spec = MirroredSpec(devices=tuple(chosen), batch=batch, steps=steps, lr=lr, reduce=reduce.value, fit=fit)
    options = run_options(False, Mode.eager, cpus, virtual_gpus, copies, drawn=drawn, devices=tuple(chosen),
                          step_function=True, time=time, time_steps=time_steps, warmup=warmup)
    report = mirrored_lesson.mirrored(spec, options)
    narrowed = apply(report, Filters(device, op, node, top))
    return _trained(report, narrowed, drawn, as_json=as_json, log=log, all_rows=all_rows, soft=None,
                    notices=shown.xla_notice(options))
