"""The guide's runs on this machine: show, tower, errors, devices."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from placement_cli.cli import shown
from placement_cli.cli.commands import command
from placement_cli.cli.options import (
    AllOpt,
    ChromeTraceOpt,
    CopiesOpt,
    CpusOpt,
    DotOpt,
    ForceOpt,
    GraphSvgOpt,
    JsonOpt,
    LogOpt,
    Mode,
    ModeOpt,
    SoftOpt,
    SvgOpt,
    TensorBoardOpt,
    TimelineOpt,
    TimeOpt,
    TimeStepsOpt,
    VGpusOpt,
    WarmupOpt,
    device_parser,
    devices_parser,
    gpus_parser,
    pictures,
    run_options,
)
from placement_cli.cli.outcome import ExitCode, Json, Outcome, Pictures
from placement_cli.devices import ChosenDevices, DeviceName, option_gpus
from placement_cli.i18n import _
from placement_cli.lessons import failure_cases, guide
from placement_cli.lessons.caps import MAX_TOWERS
from placement_cli.lessons.split import lesson_devices
from placement_cli.render.failure_cases import render_catalogue
from placement_cli.render.inventory import render_inventory
from placement_cli.render.table import Hints
from placement_cli.runtime import inventory


def _ran(report: Any, options: Any, drawn: Pictures, *, as_json: bool, log: bool, all_rows: bool,
         soft: bool) -> Outcome:
    """A run's outcome: its report, the pictures of its graph; exit 1 when it produced no result."""

    produced = report.result is not None
    return Outcome(
        code=ExitCode.OK if produced else ExitCode.PLACEMENT_FAILED,  # a run without its result never exits 0
        output=shown.report_output(report, as_json=as_json, show_log=log, all_rows=all_rows,
                                   hints=Hints.run_command(soft)),
        pictures=drawn, graph=report,
        notices=(*shown.xla_notice(options), *shown.tensorboard_notice(options.tensorboard, written=produced),
                 *shown.incomplete(report.incomplete)))


@command(one_machine=True)
def show(
    device: Annotated[DeviceName | None, typer.Option("--device", metavar="DEV", parser=device_parser, help="Pin a, b and MatMul to DEV (the guide's /gpu:2 case).")] = None,
    inputs_on: Annotated[DeviceName | None, typer.Option("--inputs-on", metavar="DEV", parser=device_parser, help="Pin only a and b to DEV (the guide's /cpu:0 case).")] = None,
    soft: SoftOpt = False,
    mode: ModeOpt = Mode.graph,
    cpus: CpusOpt = None,
    virtual_gpus: VGpusOpt = None,
    copies: CopiesOpt = False,
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
    """Run the guide's matmul (a 2x3 times b 3x2) with placement logging and show where each op went.

    Example: placement show --device /gpu:2 --soft
    """

    drawn = pictures("placement show", as_json=as_json, force=force, svg=svg, dot=dot, graph_svg=graph_svg,
                     timeline=timeline, chrome_trace=chrome_trace)
    options = run_options(soft, mode, cpus, virtual_gpus, copies, tensorboard, drawn, devices=(device, inputs_on),
                          time=time, time_steps=time_steps, warmup=warmup)
    report = guide.matmul(device, inputs_on, options)
    return _ran(report, options, drawn, as_json=as_json, log=log, all_rows=all_rows, soft=soft)


TOWER_GPUS = option_gpus("2,3", MAX_TOWERS)  # the guide's towers, on /gpu:2 and /gpu:3
REDUCE_ON = DeviceName("/cpu:0")  # where the guide sums them


@command(one_machine=True)
def tower(
    ctx: typer.Context,
    gpus: Annotated[ChosenDevices, typer.Option("--gpus", metavar="N,N|N-N", parser=gpus_parser, help="GPU indices for the towers: 2,3 or 0-3.")] = TOWER_GPUS,
    devices: Annotated[ChosenDevices | None, typer.Option("--devices", metavar="DEV,DEV", parser=devices_parser, help="Tower devices instead of --gpus, e.g. /cpu:1,/cpu:2.")] = None,
    reduce_on: Annotated[DeviceName, typer.Option("--reduce-on", metavar="DEV", parser=device_parser, help="Where tf.add_n sums the towers.")] = REDUCE_ON,
    soft: SoftOpt = False,
    mode: ModeOpt = Mode.graph,
    cpus: CpusOpt = None,
    virtual_gpus: VGpusOpt = None,
    copies: CopiesOpt = False,
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
    """Run the guide's multi-tower graph: one matmul per device, summed with tf.add_n.

    Without GPUs, use --soft to see the fallbacks, or run the towers on logical CPUs.
    Example: placement tower --devices /cpu:1,/cpu:2 --cpus 3
    """

    source = ctx.get_parameter_source("gpus")
    if devices is not None and source is not None and source.name != "DEFAULT":
        raise typer.BadParameter("give the towers with --gpus or with --devices, not both", param_hint="--gpus")
    chosen = devices or gpus
    lesson_devices("tower", chosen, cpus, derive_cpus=False)
    towers: list[str] = list(chosen.names)
    drawn = pictures("placement tower", as_json=as_json, force=force, svg=svg, dot=dot, graph_svg=graph_svg,
                     timeline=timeline, chrome_trace=chrome_trace)
    options = run_options(soft, mode, cpus, virtual_gpus, copies, tensorboard, drawn, devices=(*towers, reduce_on),
                          time=time, time_steps=time_steps, warmup=warmup)
    report = guide.tower(towers, reduce_on, options)
    return _ran(report, options, drawn, as_json=as_json, log=log, all_rows=all_rows, soft=soft)


@command(one_machine=True)
def errors(as_json: JsonOpt = False, svg: SvgOpt = None, force: ForceOpt = False) -> Outcome:
    """Run a catalogue of placement failures for real and show each error, and what --soft does instead.

    All cases share one TensorFlow start-up; GPU-only cases are reported as not run on machines without one.
    Example: placement errors --json
    """

    drawn = pictures("placement errors", as_json=as_json, force=force, svg=svg)
    found = failure_cases.catalogue()
    if as_json:
        output: list[Any] = [Json(found.to_dict())]
    else:

        output = [render_catalogue(found)]
    return Outcome(output=output, pictures=drawn, notices=shown.incomplete(
        found.incomplete, _("the catalogue is incomplete (what needs it says unknown or is not run)")))


@command(one_machine=True)
def devices(
    cpus: CpusOpt = None,
    virtual_gpus: VGpusOpt = None,
    as_json: JsonOpt = False,
    svg: SvgOpt = None,
    force: ForceOpt = False,
) -> Outcome:
    """List the physical and logical devices TensorFlow sees, and the Device mapping a Session logs.

    Example: placement devices --cpus 4
    """

    drawn = pictures("placement devices", as_json=as_json, force=force, svg=svg)
    found = inventory.inventory(run_options(False, Mode.graph, cpus, virtual_gpus))
    if as_json:
        return Outcome(output=[Json(found.to_dict())], pictures=drawn)

    return Outcome(output=[render_inventory(found)], pictures=drawn)
