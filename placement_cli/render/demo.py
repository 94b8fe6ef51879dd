"""Rich rendering of `placement demo`: each step's explanation, code, live result and what to notice."""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.rule import Rule
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from placement_cli.i18n import _, shown, translated
from placement_cli.model import ClusterReport, DemoOutcome, DemoStep, DemoSteps, Inventory, Report
from placement_cli.render import cluster as cluster_view
from placement_cli.render import inventory as inventory_view
from placement_cli.render import training as training_view
from placement_cli.render.parts import gpu_remedy, result_cause
from placement_cli.render.table import View, clean, literal, report_group
from placement_cli.render.wrap import wrapped


def steps_table(contents: DemoSteps) -> Table:
    table = Table(title=_("The demo's steps"), title_justify="left")
    table.add_column("#", justify="right")
    table.add_column(_("step"), no_wrap=True)
    table.add_column(_("what it shows"))
    for step in contents.steps:
        table.add_row(str(step.number), step.key, translated(step.title))
    return table


def arguments_line(args: dict[str, Any], takes: frozenset[str] | None = None) -> str:
    """The values the shown code ran with, as Python (comments above the code): only the arguments
    the shown functions take (``takes``; None: all); the session's config on a line of its own."""
    config = args.get("config")
    shown = [f"{k}={v!r}" for k, v in args.items() if k != "config" and (takes is None or k in takes)]
    lines = ["# " + _("run with") + ": " + ", ".join(shown)] if shown else []
    if config is not None:
        lines.append("# " + _("the session's config") + f": {config}")
    return "\n".join(lines)


def notice_text(outcome: DemoOutcome) -> str:
    """The fact to notice, its fields read from the result (statuses and reasons in the chosen language)."""
    return shown(outcome.notice) if outcome.notice else ""


def step_result(result: Report | Inventory | ClusterReport | None, view: View) -> RenderableType:
    """What a step produced, by its type: a training run's report as `train` shows it, any other
    report as `show` does, the devices as `devices` does, a cluster as `cluster` does."""
    if isinstance(result, Report):
        if result.training is not None:
            return training_view.training_group(result, view)
        return report_group(result, view=view)
    if isinstance(result, Inventory):
        return inventory_view.render_inventory(result, hints=False)  # the demo's own note says what stands in
    if isinstance(result, ClusterReport):
        return cluster_view.cluster_group(result, view)
    return Text("")


def step_group(step: DemoStep, total: int, view: View) -> Group:
    """One step: heading, explanation, the code that ran, its live result (its failures' hints are for
    a program: the demo has no options to suggest), what to notice."""
    outcome = step.outcome
    heading = _("Step {number} of {total}: {title}").format(number=step.number, total=total,
                                                            title=translated(step.title))
    code = "\n".join(part for part in (arguments_line(step.args, step.takes), step.code) if part)
    parts: list[RenderableType] = [
        Rule(literal(heading), align="left", style="bold"),
        wrapped(Text(translated(step.explanation))),
        Panel(Syntax(code, "python", theme="ansi_dark", background_color="default", word_wrap=True),
              title=_("The code that runs"), title_align="left", border_style="blue"),
        step_result(outcome.result, view),
    ]
    if outcome.ok:
        parts.append(Panel(wrapped(Text(clean(notice_text(outcome)))), title=_("What to notice"), title_align="left",
                           border_style="green"))
    else:
        failed = _("This step failed: {problem}").format(problem=clean(outcome.problem))
        remedy = gpu_remedy(result_cause(outcome.result))
        parts.append(Panel(wrapped(Text(f"{failed}\n{remedy}" if remedy else failed)),
                           title=_("Step failed"), title_align="left", border_style="red"))
    return Group(*parts)


def machine_note(note: str | None) -> RenderableType | None:
    return wrapped(Text(translated(note), style="bold yellow")) if note else None


def pause_prompt(number: int, title: str) -> str:
    return _("Press Enter for step {number}: {title} (Ctrl-C stops) ").format(number=number, title=translated(title))
