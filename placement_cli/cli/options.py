"""The options several commands share, defined once, and the checks made before anything runs."""

from __future__ import annotations

import inspect
import math
import sys
from collections.abc import Callable
from enum import Enum
from typing import Annotated, Any, TypeVar

import typer
from typer.main import get_current_context  # type: ignore[attr-defined]  # typer's (click's)

from placement_cli import devices, filters
from placement_cli.cli.commands import option_callback
from placement_cli.cli.funnel import say
from placement_cli.cli.outcome import Pictures
from placement_cli.devices import names_xla
from placement_cli.exceptions import UsageProblem
from placement_cli.i18n import _, characters, from_locale, use
from placement_cli.lessons.caps import MAX_CPUS, MAX_TOWERS, MAX_VIRTUAL_GPUS
from placement_cli.model.caps import MAX_STEPS, MAX_WARMUP
from placement_cli.outputs import check_distinct, check_file, check_folder, same_as_stdout


class Mode(str, Enum):
    graph = "graph"
    eager = "eager"


class Lang(str, Enum):
    en = "en"
    zh = "zh"


def capped(option: str, low: int, high: int, why: str) -> Callable[[int | None], int | None]:
    """A bounded count whose refusal says why the bound is there."""

    @option_callback
    def check(value: int | None) -> int | None:
        if value is not None and not low <= value <= high:
            raise typer.BadParameter(f"{value} is out of range: {option} takes {low} to {high} ({why})")
        return value

    return check


def checked(check: Callable[[str], object], tidy: Callable[[str], str] = str.strip) -> Callable[[Any], Any]:
    """An option's callback: ``check(value)`` raises a ValueError (DeviceSpecError, FilterError) for
    a value that TensorFlow or placement would refuse, and its words become the usage error (exit 2)."""

    @option_callback
    def callback(value: str | None) -> str | None:
        if value is None:
            return None
        try:
            check(value)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None
        return tidy(value)

    return callback


def _a_name(value: str) -> None:
    if not value:
        raise ValueError(_("an empty file name ('') names no file"))


def _names(value: str | list[str]) -> None:
    for v in [value] if isinstance(value, str) else value:
        _a_name(v)


named = checked(_names, tidy=lambda v: v)
"""A file-name argument or option: '' is refused with its reason (it would name no file, or the
current folder), not passed on to fail as "': no such file'"."""


T = TypeVar("T")


def parsed(read: Callable[[str], T]) -> Callable[[Any], T]:
    """An option's parser (typer's ``parser=``): the value read once, into what the command takes
    (a DeviceName, ChosenDevices); ``read``'s ValueError (DeviceSpecError) becomes the usage error
    (exit 2). A value already read (click converts a default as well) is read again to the same."""

    @option_callback
    def parser(value: Any) -> T:
        if isinstance(value, devices.ChosenDevices):
            return value  # type: ignore[return-value]
        try:
            return read(str(value))
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None

    return parser


# read as TensorFlow reads them: stripped, and /xla_cpu:0 as /device:XLA_CPU:0
device_parser = parsed(devices.option_device)
gpus_parser = parsed(lambda value: devices.option_gpus(value, MAX_TOWERS))
devices_parser = parsed(lambda value: devices.option_devices(value, MAX_TOWERS))


@option_callback
def lr_option(value: float) -> float:
    if not math.isfinite(value) or not 0 < value <= 100:
        raise typer.BadParameter(f"{value} is not a learning rate: give a number above 0 and at most 100")
    return value


@option_callback
def _lang_option(value: Lang | None) -> Lang | None:
    """Choose the language before anything is rendered; no --lang: the locale's."""
    from placement_cli.render.console import shows  # noqa: PLC0415 - start-up

    language = value.value if value else from_locale()
    if not shows(sys.stdout, characters(language)):  # ascii, Big5: Chinese would print as "??"
        if value:
            say(f"--lang {language}: standard output cannot encode it ({sys.stdout.encoding}); English is used")
        language = "en"
    use(language)
    return value


JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout instead of tables.")]
SoftOpt = Annotated[bool, typer.Option("--soft/--no-soft", help="allow_soft_placement: fall back to an existing device.")]
ModeOpt = Annotated[Mode, typer.Option("--mode", help="graph: tf.compat.v1.Session as in the guide; eager: TF2 APIs.")]
LogOpt = Annotated[bool, typer.Option("--log", help="Also print the raw log TensorFlow wrote.")]
CpusOpt = Annotated[int | None, typer.Option("--cpus", metavar="N", callback=capped("--cpus", 1, MAX_CPUS, f"logical CPUs /cpu:0../cpu:{MAX_CPUS - 1}"), help="Split the CPU into N logical devices (/cpu:0../cpu:N-1).")]
AllOpt = Annotated[bool, typer.Option("--all", help="Print every row, however many; without it, a report longer than a screen (40 rows when not a terminal) is shown as a digest.")]
CopiesOpt = Annotated[bool, typer.Option("--copies", help="Show the executed graph's _Send/_Recv copies between devices (graph mode; turns off constant folding, grappler's and the older graph optimizer's, so the guide's matmuls really run).")]
VGpusOpt = Annotated[int | None, typer.Option("--virtual-gpus", metavar="N", callback=capped("--virtual-gpus", 1, MAX_VIRTUAL_GPUS, "logical GPUs carved out of one physical GPU"), help="Split one physical GPU into N logical GPUs.")]
LangOpt = Annotated[Lang | None, typer.Option("--lang", callback=_lang_option, show_default=False, help="Language of tables, statuses, reasons and hints: en or zh (default: the locale's: LANGUAGE, LC_ALL, LC_MESSAGES or LANG, the first set). --json stays English.")]

# Filters of the commands that read a program's placements (parse, trace); every one ignores case.
DeviceFilterOpt = Annotated[str | None, typer.Option("--device", metavar="DEV", callback=checked(filters.check_device), help="Only placements on DEV: a device type, a device or a task (GPU, CPU:0, /job:ps, ps/0).")]
OpFilterOpt = Annotated[str | None, typer.Option("--op", metavar="OP", callback=checked(filters.check_op), help="Only placements of op type OP (MatMul also matches oneDNN's _MklMatMul).")]
NodeFilterOpt = Annotated[str | None, typer.Option("--node", metavar="REGEX", callback=checked(filters.compile_node, tidy=str), help="Only nodes whose name matches REGEX (Python's syntax, matched in linear time: no backreferences or lookaround).")]
TopOpt = Annotated[int | None, typer.Option("--top", min=1, metavar="N", help="Only the first N placements a table shows (TensorFlow's plumbing not counted).")]

# Pictures: the same options on every command that has what they draw (add them to a new command with
# its parameters and one pictures(...) call before it runs; its outcome carries them and the graph).
SvgOpt = Annotated[str | None, typer.Option("--svg", metavar="FILE", help="Also write the tables, as printed, to FILE as an SVG (for slides; fonts found offline). Not with --json.")]
DotOpt = Annotated[str | None, typer.Option("--dot", metavar="FILE", help="Write the graph that ran to FILE as Graphviz DOT: nodes coloured and grouped by assigned device, edges between devices red and labelled copy (with bytes under --copies).")]
GraphSvgOpt = Annotated[str | None, typer.Option("--graph-svg", metavar="FILE", help="Write the graph that ran to FILE as an SVG that needs no Graphviz: one lane per device, nodes by depth, copies between devices in red.")]
ForceOpt = Annotated[bool, typer.Option("--force", help="Let the pictures' options overwrite an existing FILE (a link's file; special files such as /dev/null are written into, never replaced).")]
TimelineOpt = Annotated[str | None, typer.Option("--timeline", metavar="FILE", help="Write one measured step to FILE as an SVG timeline (one lane per device, copies as arrows); implies --time.")]
ChromeTraceOpt = Annotated[str | None, typer.Option("--chrome-trace", metavar="FILE", help="Write one measured step to FILE as Chrome trace-event JSON (Perfetto, chrome://tracing), each op with its placement's status and reason; implies --time.")]
TensorBoardOpt = Annotated[str | None, typer.Option("--tensorboard", metavar="DIR", help="Write a TensorBoard event file in DIR (made if missing): the graph with each node's assigned device, and the run's step stats. Graph mode only.")]


def pictures(command: str, *, as_json: bool, force: bool, svg: str | None = None, dot: str | None = None,
             graph_svg: str | None = None, protect: tuple[str, ...] = (), timeline: str | None = None,
             chrome_trace: str | None = None) -> Pictures:
    """Check the pictures' files before anything runs (exit 2 for one that cannot be written)."""

    if svg is not None and as_json:
        raise UsageProblem(_("--svg draws the tables, and --json prints none: give one of them"))
    named = (("--svg", svg), ("--dot", dot), ("--graph-svg", graph_svg), ("--timeline", timeline),
             ("--chrome-trace", chrome_trace))
    if any(path is not None for _option, path in named):
        check_distinct(named)
        for option, path in named:
            if path is not None:
                check_file(option, path, force, protect)
                if as_json and same_as_stdout(path):  # the picture would land inside the JSON document
                    raise UsageProblem(_("{option} {path}: --json prints its document on standard output: give "
                                         "the picture a file of its own").format(option=option, path=path))
    return Pictures(svg, dot, graph_svg, force, command, timeline, chrome_trace)


# --time and its settings, on every command that runs steps it can measure
def implies_time(ctx: typer.Context, param: Any, value: Any) -> Any:
    """--time-steps and --warmup given: the run is timed (a setting of --time asks for it)."""
    source = ctx.get_parameter_source(param.name)
    if source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP"):
        ctx.meta["placement.time"] = True
    return value


TimeOpt = Annotated[bool, typer.Option("--time", help="Run the step again and time it with TensorFlow's profiler: busy time per device, the ops that take most, each copy's bytes and time, and the placements that cost most, per step (mean and range).")]
TimeStepsOpt = Annotated[int, typer.Option("--time-steps", min=1, max=MAX_STEPS, metavar="N", callback=implies_time, help=f"Steps --time measures (at most {MAX_STEPS}: TensorFlow stops tracing kernels it measured as cheap after about a hundred runs); implies --time.")]
WarmupOpt = Annotated[int, typer.Option("--warmup", min=1, max=MAX_WARMUP, metavar="N", callback=implies_time, help=f"Steps run before --time measures, the first (which places the graph) among them (at most {MAX_WARMUP}); implies --time.")]




def timed(time: bool, drawn: Pictures) -> bool:
    """--time, asked for or implied by a picture of the times or by one of its settings."""
    ctx = get_current_context(silent=True)
    asked = ctx is not None and bool(ctx.meta.get("placement.time"))
    return time or asked or drawn.timeline is not None or drawn.chrome_trace is not None


def tensorboard(path: str | None, mode: Mode = Mode.graph, drawn: Pictures = Pictures()) -> str | None:
    """--tensorboard's folder, made and checked before TensorFlow runs; refused in eager mode and
    when a picture's file has the same name (the picture could not be written after the run)."""
    if path is None:
        return None

    if mode is Mode.eager:
        raise typer.BadParameter(_("--tensorboard needs --mode graph (eager ops run without a Session graph to store)"))
    check_distinct((("--svg", drawn.svg), ("--dot", drawn.dot), ("--graph-svg", drawn.graph_svg),
                    ("--tensorboard", path)))
    return check_folder("--tensorboard", path)


def run_options(soft: bool, mode: Mode, cpus: int | None, virtual_gpus: int | None, copies: bool = False,
                board: str | None = None, drawn: Pictures = Pictures(), devices: tuple[str | None, ...] = (),
                step_function: bool = False, time: bool = False, time_steps: int = 10, warmup: int = 2) -> Any:
    """The options of a run on this machine, checked against each other; ``devices``: the devices its
    options name (an XLA device among them turns TensorFlow's XLA devices on); ``step_function``: the
    lesson runs its step as a tf.function, whose partition graphs hold its copies in eager mode too."""
    from placement_cli.runtime.startup import RunOptions  # noqa: PLC0415 - start-up

    if copies and mode is Mode.eager and not step_function:
        raise typer.BadParameter("--copies needs --mode graph (eager ops run one by one: no partition graphs)")
    return RunOptions(soft=soft, mode=mode.value, cpus=cpus, virtual_gpus=virtual_gpus, copies=copies,
                      tensorboard=tensorboard(board, mode, drawn), xla=names_xla(devices),
                      time=timed(time, drawn), time_steps=time_steps, warmup=warmup)


def speaks(command: Callable[..., None]) -> Callable[..., None]:
    """``command`` (a guarded one) takes the --lang every command takes: the option's callback chooses
    the language before anything is rendered, and the guard drops the value (app.guarded), so the
    command itself never sees it. The same function: no frame more under the command; one that takes
    --lang already is left as it is (the commands are loaded again when the whole app is asked for)."""
    if "lang" in command.__annotations__:
        return command
    signature = inspect.signature(command, eval_str=True)
    lang = inspect.Parameter("lang", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=LangOpt)
    command.__signature__ = signature.replace(parameters=[*signature.parameters.values(), lang])  # type: ignore[attr-defined]
    command.__annotations__ = {**command.__annotations__, "lang": LangOpt}
    return command
