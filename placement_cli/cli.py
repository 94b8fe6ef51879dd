"""Thin typer commands, and the one place errors become exit codes."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from enum import Enum, IntEnum
from typing import Annotated, Any, TypeVar

import typer

from placement_cli import __version__

app = typer.Typer(
    name="placement",
    help="See where TensorFlow places every op, and why.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: rich help costs 2x the start-up time
    context_settings={"help_option_names": ["-h", "--help"]},
)


class ExitCode(IntEnum):
    OK = 0
    PLACEMENT_FAILED = 1  # TensorFlow could not place the graph (InvalidArgumentError)
    USAGE = 2  # bad usage or unreadable input
    INTERNAL = 3  # a bug in placement itself; --traceback shows it
    INTERRUPTED = 130  # Ctrl-C (SIGINT), as shells count it


class Mode(str, Enum):
    graph = "graph"
    eager = "eager"


_state = {"traceback": False}

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout instead of tables.")]
SoftOpt = Annotated[bool, typer.Option("--soft/--no-soft", help="allow_soft_placement: fall back to an existing device.")]
ModeOpt = Annotated[Mode, typer.Option("--mode", help="graph: tf.compat.v1.Session as in the guide; eager: TF2 APIs.")]
LogOpt = Annotated[bool, typer.Option("--log", help="Also print the raw log TensorFlow wrote.")]
CpusOpt = Annotated[int | None, typer.Option("--cpus", min=1, max=64, help="Split the CPU into N logical devices (/cpu:0../cpu:N-1).")]
CopiesOpt = Annotated[bool, typer.Option("--copies", help="Show the executed graph's _Send/_Recv copies between devices (graph mode; turns grappler's constant folding off so the guide's matmuls are not folded away).")]
VGpusOpt = Annotated[int | None, typer.Option("--virtual-gpus", min=1, max=16, help="Split one physical GPU into N logical GPUs.")]

F = TypeVar("F", bound=Callable[..., Any])


def _console() -> Any:
    from rich.console import Console  # noqa: PLC0415 - keeps --help fast

    return Console(highlight=False)


def _say(message: str) -> None:
    """One diagnostic line on stderr, never wrapped, control characters removed."""
    from placement_cli.render.table import clean  # noqa: PLC0415

    sys.stderr.write(f"placement: {clean(message)}\n")
    sys.stderr.flush()


def _fail(code: ExitCode, message: str) -> typer.Exit:
    _say(message)
    return typer.Exit(int(code))


def guarded(fn: F) -> F:
    """Translate domain errors into exit codes; tracebacks only with --traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from placement_cli.devices import DeviceSpecError  # noqa: PLC0415
        from placement_cli.errors import InputError, UsageProblem  # noqa: PLC0415

        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, typer.BadParameter):
            raise
        except (InputError, UsageProblem, DeviceSpecError) as exc:
            raise _fail(ExitCode.USAGE, str(exc)) from None
        except KeyboardInterrupt:
            raise _fail(ExitCode.INTERRUPTED, "interrupted") from None
        except Exception as exc:
            if _state["traceback"]:
                raise
            raise _fail(ExitCode.INTERNAL, f"internal error: {type(exc).__name__}: {exc} (rerun with --traceback)") from None

    return wrapper  # type: ignore[return-value]


def _device_option(value: str | None) -> str | None:
    if value is None:
        return None
    from placement_cli.devices import DeviceSpecError, parse_device  # noqa: PLC0415

    try:
        parse_device(value)
    except DeviceSpecError as exc:
        raise typer.BadParameter(str(exc)) from None
    return value


def _print_report(report: Any, *, as_json: bool, run: bool, show_log: bool = False, summary: bool = False) -> None:
    if as_json:
        from placement_cli.render.json import render_json  # noqa: PLC0415

        sys.stdout.write(render_json(report, run=run) + "\n")
        return
    from placement_cli.render.table import literal, report_group  # noqa: PLC0415

    console = _console()
    if show_log and report.log:
        console.rule("TensorFlow's log")
        console.print(literal(report.log.rstrip()))
        console.rule()
    console.print(report_group(report, run=run, summary=summary))


def _print_json(data: Any) -> None:
    from placement_cli.render.json import dumps  # noqa: PLC0415

    sys.stdout.write(dumps(data) + "\n")


def _load_renderers() -> None:
    import placement_cli.render.json  # noqa: F401, PLC0415
    import placement_cli.render.table  # noqa: F401, PLC0415
    import placement_cli.why  # noqa: F401, PLC0415


def _finish_run(report: Any, as_json: bool, show_log: bool) -> None:
    _print_report(report, as_json=as_json, run=True, show_log=show_log)
    if report.failed:
        raise typer.Exit(int(ExitCode.PLACEMENT_FAILED))


def _options(soft: bool, mode: Mode, cpus: int | None, virtual_gpus: int | None, copies: bool = False) -> Any:
    from placement_cli.runtime.startup import RunOptions  # noqa: PLC0415

    if copies and mode is Mode.eager:
        raise typer.BadParameter("--copies needs --mode graph (eager ops run one by one: no partition graphs)")
    return RunOptions(soft=soft, mode=mode.value, cpus=cpus, virtual_gpus=virtual_gpus, copies=copies)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"placement {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    traceback: Annotated[bool, typer.Option("--traceback", help="Show Python tracebacks of unexpected errors.")] = False,
    version: Annotated[bool, typer.Option("--version", is_eager=True, callback=_version, help="Print the version and exit.")] = False,
) -> None:
    """See where TensorFlow places every op, and why.

    Examples: placement show, placement tower --gpus 2,3 --soft, placement parse run.log
    """
    _state["traceback"] = traceback


@app.command()
@guarded
def show(
    device: Annotated[str | None, typer.Option("--device", callback=_device_option, help="Pin a, b and MatMul to DEV (the guide's /gpu:2 case).")] = None,
    inputs_on: Annotated[str | None, typer.Option("--inputs-on", callback=_device_option, help="Pin only a and b to DEV (the guide's /cpu:0 case).")] = None,
    soft: SoftOpt = False,
    mode: ModeOpt = Mode.graph,
    cpus: CpusOpt = None,
    virtual_gpus: VGpusOpt = None,
    copies: CopiesOpt = False,
    log: LogOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Run the guide's matmul (a 2x3 times b 3x2) with placement logging and show where each op went.

    Example: placement show --device /gpu:2 --soft
    """
    from placement_cli.lessons.guide import matmul  # noqa: PLC0415

    report = matmul(device, inputs_on, _options(soft, mode, cpus, virtual_gpus, copies))
    _finish_run(report, as_json, log)


def _gpus_option(value: str) -> str:
    from placement_cli.devices import DeviceSpecError, parse_indices  # noqa: PLC0415

    try:
        parse_indices(value)
    except DeviceSpecError as exc:
        raise typer.BadParameter(str(exc)) from None
    return value


def _devices_option(value: str | None) -> str | None:
    if value is None:
        return None
    devices = [d.strip() for d in value.split(",")]
    for device in devices:
        _device_option(device)
    if len(set(devices)) != len(devices):
        raise typer.BadParameter(f"duplicate device in {value!r}")
    return ",".join(devices)


@app.command()
@guarded
def tower(
    gpus: Annotated[str, typer.Option("--gpus", callback=_gpus_option, help="GPU indices for the towers: 2,3 or 0-3.")] = "2,3",
    devices: Annotated[str | None, typer.Option("--devices", callback=_devices_option, help="Tower devices instead of --gpus, e.g. /cpu:1,/cpu:2.")] = None,
    reduce_on: Annotated[str, typer.Option("--reduce-on", callback=_device_option, help="Where tf.add_n sums the towers.")] = "/cpu:0",
    soft: SoftOpt = False,
    mode: ModeOpt = Mode.graph,
    cpus: CpusOpt = None,
    virtual_gpus: VGpusOpt = None,
    copies: CopiesOpt = False,
    log: LogOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Run the guide's multi-tower graph: one matmul per device, summed with tf.add_n.

    Without GPUs, use --soft to see the fallbacks, or run the towers on logical CPUs.
    Example: placement tower --devices /cpu:1,/cpu:2 --cpus 3
    """
    from placement_cli.lessons.guide import tower as run_tower  # noqa: PLC0415

    from placement_cli.devices import parse_indices  # noqa: PLC0415

    towers = devices.split(",") if devices else [f"/gpu:{i}" for i in parse_indices(gpus)]
    report = run_tower(towers, reduce_on, _options(soft, mode, cpus, virtual_gpus, copies))
    _finish_run(report, as_json, log)


@app.command()
@guarded
def errors(as_json: JsonOpt = False) -> None:
    """Run a catalogue of placement failures for real and show each error, and what --soft does instead.

    All cases share one TensorFlow start-up; GPU-only cases are reported as not run on machines without one.
    Example: placement errors --json
    """
    from placement_cli.lessons.failures import catalogue  # noqa: PLC0415

    found = catalogue()
    if as_json:
        _print_json(found)
        return
    from placement_cli.render.errors import render_catalogue  # noqa: PLC0415

    _console().print(render_catalogue(found))


@app.command()
@guarded
def devices(
    cpus: CpusOpt = None,
    virtual_gpus: VGpusOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List the physical and logical devices TensorFlow sees, and the Device mapping a Session logs.

    Example: placement devices --cpus 4
    """
    from placement_cli.runtime.inventory import inventory  # noqa: PLC0415
    from placement_cli.render.inventory import render_inventory  # noqa: PLC0415

    found = inventory(_options(False, Mode.graph, cpus, virtual_gpus))
    if as_json:
        _print_json(found)
    else:
        _console().print(render_inventory(found))


@app.command()
@guarded
def parse(
    files: Annotated[list[str], typer.Argument(help="Log files; - reads standard input.", show_default=False)],
    summary: Annotated[bool, typer.Option("--summary", help="Only the counts per device.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Parse placement logs of any TensorFlow version (0.x to 2.x), mixed with any other output.

    Several files are read as one stream, so a program's stdout and stderr logs pair up.
    Example: placement parse train.log --summary
    """
    from placement_cli.logparse import parse_paths  # noqa: PLC0415

    report = parse_paths(files, keep=not summary)
    _print_report(report, as_json=as_json, run=False, summary=summary)
    if not report.placement_count:
        names = ", ".join("standard input" if f == "-" else f for f in files)
        _say(f"no placements found in {names}")


@app.command(context_settings={"allow_interspersed_args": False})
@guarded
def trace(
    script: Annotated[str, typer.Argument(help="The Python script to run.", show_default=False)],
    args: Annotated[list[str] | None, typer.Argument(help="Arguments for the script.", show_default=False)] = None,
    device: Annotated[str | None, typer.Option("--device", help="Only placements on this device type or name (GPU, CPU:0).")] = None,
    op: Annotated[str | None, typer.Option("--op", help="Only placements of this op type (MatMul).")] = None,
    node: Annotated[str | None, typer.Option("--node", help="Only nodes whose name matches this regex.")] = None,
    top: Annotated[int | None, typer.Option("--top", min=1, help="Show at most N placements.")] = None,
    save_log: Annotated[str | None, typer.Option("--save-log", help="Keep the raw log in FILE.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Let --save-log overwrite an existing FILE.")] = False,
    log: Annotated[bool, typer.Option("--log", help="Echo TensorFlow's placement lines too, as they come.")] = False,
    copies: Annotated[bool, typer.Option("--copies", help="List the _Send/_Recv copies between devices of the script's tf.compat.v1.Session runs (their executed graphs, as grappler left them; asked for once per session and fetch).")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Run your TensorFlow script with placement logging on from its first op, then show its placements.

    placement's options go before SCRIPT; everything after SCRIPT is the script's, untouched.
    The script's own output reaches the terminal live (placement lines are consumed); with
    --json its stdout goes to stderr so the JSON on stdout stays clean. The exit code is the script's.
    The why column explains each op not where its graph asked, or on a CPU while a GPU exists.
    Example: placement trace train.py --epochs 1
    """
    from placement_cli.runtime.tracer import (  # noqa: PLC0415
        check_script, filtered, open_save_log, reopen_closed_stdio, run_traced)

    closed = reopen_closed_stdio()
    if node:
        import re  # noqa: PLC0415

        try:
            re.compile(node)
        except re.error as exc:
            raise typer.BadParameter(f"bad regex {node!r}: {exc}", param_hint="--node") from None
    check_script(script)
    saved = open_save_log(save_log, script, force) if save_log else None
    traced = run_traced(script, args or [], stdout_fd=2 if as_json else 1, echo_log=log, save_log=saved,
                        copies=copies, closed=closed, meanwhile=_load_renderers)
    for note in traced.notes:
        _say(note)
    report = filtered(traced.report, device, op, node, top)
    output_closed = traced.output_closed
    if not output_closed:
        try:
            if as_json:
                _print_json({**report.to_dict(run=True), "exit_code": traced.exit_code})
            else:
                _console().rule(f"placement: {script} exited with code {traced.exit_code}")
                _print_report(report, as_json=False, run=True)
            sys.stdout.flush()
        except BrokenPipeError:
            output_closed = True
    if output_closed:  # | head -1: the report has nowhere to go, which is no error
        _silence_stdout()
        raise typer.Exit(traced.exit_code)
    if not traced.report.placement_count:
        _say(f"no placements found in the output of {script}")
    if copies and traced.report.copies is None:
        _say(f"no tf.compat.v1.Session ran in {script}: --copies lists the copies of Session runs only")
    raise typer.Exit(traced.exit_code)


def _silence_stdout() -> None:
    """stdout is a closed pipe: point fd 1 at /dev/null so python's flush at exit stays quiet."""
    import os  # noqa: PLC0415

    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)


def main() -> None:
    app(prog_name="placement")
