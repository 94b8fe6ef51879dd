"""Rich rendering of `placement demo`: each step's explanation, code, live result and what to notice."""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.rule import Rule
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from placement_cli.i18n import Message, _, translated
from placement_cli.render.table import Hints, View, clean, literal, report_group
from placement_cli.render.wrap import wrapped


def steps_table(steps: list[Any]) -> Table:
    table = Table(title=_("The demo's steps"), title_justify="left")
    table.add_column("#", justify="right")
    table.add_column(_("step"), no_wrap=True)
    table.add_column(_("what it shows"))
    for k, step in enumerate(steps, 1):
        table.add_row(str(k), step.key, translated(step.title))
    return table


def arguments_line(args: dict[str, Any], takes: set[str] | None = None) -> str:
    """The values the shown code ran with, as Python (comments above the code): only the arguments
    the shown functions take (``takes``; None: all); the session's config on a line of its own."""
    config = args.get("config")
    shown = [f"{k}={v!r}" for k, v in args.items() if k != "config" and (takes is None or k in takes)]
    lines = ["# " + _("run with") + ": " + ", ".join(shown)] if shown else []
    if config is not None:
        lines.append("# " + _("the session's config") + f": {config}")
    return "\n".join(lines)


def parameters(functions: list[Any]) -> set[str]:
    """The names of the arguments the shown functions take."""
    import inspect  # noqa: PLC0415

    return {name for f in functions for name in inspect.signature(inspect.unwrap(f)).parameters}


def notice_text(outcome: Any, translate: bool = True) -> str:
    """The fact to notice, its fields read from the result (statuses and reasons in the chosen language)."""
    if not outcome.notice:
        return ""
    notice = Message(outcome.notice, **outcome.fields)
    return notice.shown() if translate else str(notice)


def _result(outcome: Any, view: View) -> RenderableType:
    if outcome.kind == "inventory":
        from placement_cli.render.inventory import render_inventory  # noqa: PLC0415

        return render_inventory(outcome.result, hints=False)  # the demo's own note says what stands in
    if outcome.kind == "training":
        from placement_cli.render.training import training_group  # noqa: PLC0415

        return training_group(outcome.result, view)
    if outcome.kind == "report":
        return report_group(outcome.result, run=True, view=view)
    if outcome.kind == "cluster":
        from placement_cli.render.cluster import cluster_group  # noqa: PLC0415

        return cluster_group(outcome.result, view)
    return Text("")


def step_group(number: int, total: int, step: Any, outcome: Any, args: dict[str, Any], view: View) -> Group:
    """One step: heading, explanation, the code that ran, its live result, what to notice."""
    heading = _("Step {number} of {total}: {title}").format(number=number, total=total, title=translated(step.title))
    code = "\n".join(part for part in (arguments_line(args, parameters(step.functions())), step.source()) if part)
    parts: list[RenderableType] = [
        Rule(literal(heading), align="left", style="bold"),
        wrapped(Text(translated(step.explain))),
        Panel(Syntax(code, "python", theme="ansi_dark", background_color="default", word_wrap=True),
              title=_("The code that runs"), title_align="left", border_style="blue"),
        _result(outcome, View(all_rows=view.all_rows, screen_rows=view.screen_rows, fit=view.fit,
                              hints=Hints(source="program"))),
    ]
    if outcome.ok:
        parts.append(Panel(wrapped(Text(clean(notice_text(outcome)))), title=_("What to notice"), title_align="left",
                           border_style="green"))
    else:
        parts.append(Panel(wrapped(Text(_("This step failed: {problem}").format(problem=clean(outcome.problem)))),
                           title=_("Step failed"), title_align="left", border_style="red"))
    return Group(*parts)


def machine_note(note: str | None) -> RenderableType | None:
    return wrapped(Text(translated(note), style="bold yellow")) if note else None


def pause_prompt(number: int, title: str) -> str:
    return _("Press Enter for step {number}: {title} (Ctrl-C stops) ").format(number=number, title=translated(title))


def steps_dict(steps: list[Any]) -> dict[str, Any]:
    """`demo --list --json`: every step's number, key and title."""
    return {"steps": [{"number": k, "key": s.key, "title": s.title} for k, s in enumerate(steps, 1)]}


def step_dict(number: int, step: Any, outcome: Any, args: dict[str, Any]) -> dict[str, Any]:
    """One step of `demo --json`: what it explains, the code shown, and what it produced (English)."""
    from placement_cli.render.json import report_dict  # noqa: PLC0415

    result = outcome.result
    if outcome.kind in ("report", "training"):
        result = report_dict(result, run=True)
    elif outcome.kind in ("cluster", "inventory"):
        result = result.to_dict()
    return {"number": number, "key": step.key, "title": step.title, "explanation": step.explain,
            "code": step.source(), "args": args, "code_ran": outcome.ran, "ok": outcome.ok, "problem": outcome.problem,
            "notice": notice_text(outcome, translate=False) if outcome.ok else None, "result": result}
