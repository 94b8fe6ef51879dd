"""`placement demo`: the guide's lessons in order, for a class."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import replace
from typing import Annotated, Any

import typer

from placement_cli.cli import shown
from placement_cli.cli.cluster import progress
from placement_cli.cli.commands import command, option_callback
from placement_cli.cli.funnel import fail
from placement_cli.cli.options import AllOpt, ForceOpt, JsonOpt, SvgOpt, pictures
from placement_cli.cli.outcome import Ending, ExitCode, Json, Outcome, Pause
from placement_cli.i18n import _
from placement_cli.lessons import demo as lesson
from placement_cli.lessons.demo import STEPS, contents, gpu_note, run_steps, select
from placement_cli.model import DemoRun
from placement_cli.render.console import is_terminal
from placement_cli.render.demo import machine_note, pause_prompt, step_group, steps_table
from placement_cli.render.table import Hints


@option_callback
def _step_option(value: str | None) -> str | None:
    if value is not None:
        try:
            select(value)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None
    return value


def _ending(failed: list[str]) -> Ending:
    if not failed:
        return Ending()
    return Ending(ExitCode.PLACEMENT_FAILED,
                  (_("{count} step(s) failed: {steps}").format(count=len(failed), steps="; ".join(failed)),))


def _starts_tensorflow(args: dict[str, Any]) -> bool:
    return not args.get("list_steps")  # --list starts nothing: a TF_CONFIG is no concern of it


@command(one_machine=_starts_tensorflow)
def demo(
    list_steps: Annotated[bool, typer.Option("--list", help="List the steps and exit.")] = False,
    step: Annotated[str | None, typer.Option("--step", metavar="K|K-M|K,M", callback=_step_option, help="Run only these steps: 3, 3-5 or 2,4.")] = None,
    pause: Annotated[bool | None, typer.Option("--pause/--no-pause", show_default=False, help="Wait for Enter between steps (default: when stdin and stdout are terminals). With stdout redirected the prompt goes to stderr.")] = None,
    all_rows: AllOpt = False,
    as_json: JsonOpt = False,
    svg: SvgOpt = None,
    force: ForceOpt = False,
) -> Outcome:
    """Walk through the guide's lessons in order, for a class: each step explains, shows the code
    that runs, runs it live and says what to notice in the result.

    Devices, logging placement, manual placement, a device that does not exist, soft placement,
    an op without a kernel for its device (on a GPU, else XLA_CPU), towers, copies between devices,
    then the training lessons (train, mirrored) in one TensorFlow start-up, and a real ps/worker
    cluster (cluster) in processes of its own. Without GPUs the GPU steps run on logical CPUs, and
    say so; with one GPU, on two logical GPUs carved from it.
    Example: placement demo --lang zh --step 4-5
    """

    chosen = select(step)
    if list_steps and step is not None:
        raise fail(ExitCode.USAGE, _("--list lists every step and runs none: use --list or --step, not both"))
    drawn = pictures("placement demo", as_json=as_json, force=force, svg=svg)
    if list_steps:
        if as_json:
            return Outcome(output=[Json(contents().to_dict())], pictures=drawn)

        return Outcome(output=[steps_table(contents())], pictures=drawn)


    machine = replace(lesson.start(chosen), progress=progress)  # the cluster step's tasks, a line each as they start
    failed: list[str] = []  # filled as the steps run; the ending reads it once they all did
    if as_json:
        return _json(chosen, machine)
    return Outcome(output=_tables(chosen, machine, failed, _pausing(pause), all_rows), pictures=drawn,
                   finish=lambda: _ending(failed))  # the slides hold the steps that failed too


def _pausing(pause: bool | None) -> bool:
    return pause if pause is not None else is_terminal(sys.stdin) and is_terminal(sys.stdout)


def _tables(chosen: list[int], machine: Any, failed: list[str], pause: bool, all_rows: bool) -> Iterator[Any]:
    """The chosen steps, each run and shown in turn (after Enter, when pausing); the failed ones named in ``failed``."""

    note = machine_note(gpu_note(machine))
    if note is not None:
        yield note
    view = shown.view(all_rows=all_rows, hints=Hints(source="program"))  # the lessons' code, not another command's options
    steps = run_steps(chosen, machine)
    for i, k in enumerate(chosen):
        if pause and i:
            yield Pause(pause_prompt(k, STEPS[k - 1].title))
        ran = next(steps)
        yield step_group(ran, len(STEPS), view)
        if ran.failure is not None:
            failed.append(ran.failure)


def _json(chosen: list[int], machine: Any) -> Outcome:
    found = DemoRun(machine.gpus, gpu_note(machine), tuple(run_steps(chosen, machine)))
    ending = _ending([s.failure for s in found.steps if s.failure is not None])
    return Outcome(code=ending.code, output=[Json(found.to_dict())], notices=ending.notices)
