"""Rich rendering of `placement errors`: one panel per case of the failure catalogue."""

from __future__ import annotations

from rich.console import Group
from rich.panel import Panel
from rich.text import Text

from placement_cli.i18n import Wording, _, shown
from placement_cli.model import FailureCase, FailureCatalogue, SoftRun
from placement_cli.model.ops import PLUMBING_OPS
from placement_cli.render.table import clean, format_result, literal, pad_left


def _soft_summary(soft: SoftRun | None) -> str:
    if soft is None:
        return "-"
    if soft.error_class:
        return _("still fails: {error}").format(error=f"{soft.error_class}: {soft.message or ''}")
    placed = [p for p in soft.placements if p.op not in PLUMBING_OPS]
    devices = sorted({p.short for p in placed})
    nodes_by_reason: dict[Wording, list[str]] = {}
    for p in placed:
        if p.reason:
            nodes_by_reason.setdefault(p.reason, []).append(p.node or p.op or "?")
    why = [f"{', '.join(sorted(nodes))}: {shown(reason)}" for reason, nodes in nodes_by_reason.items()]
    because = f" ({'; '.join(why)})" if why else ""
    return _("runs on {devices}{because}, result {result}").format(
        devices=", ".join(devices) or "?", because=because, result=format_result(soft.result))


def _case_panel(case: FailureCase) -> Panel:
    rows: list[tuple[str, str]] = [(_("what"), shown(case.description)), (_("requested"), case.requested)]
    error = case.error
    if not case.ran:
        rows.append((_("not run"), shown(case.skip_reason or "")))
        style, status = "yellow", _("not runnable here")
    elif error is None:
        rows.append((_("error"), _("none")))
        style, status = "green", _("no error")
    else:
        rows += [
            (_("error"), f"{case.error_class} ({error.kind})"),
            (_("node"), error.node or "-"),
            (_("TensorFlow says"), error.says),
            (_("available"), ", ".join(d.short for d in error.available_devices) or "-"),
            (_("with --soft"), _soft_summary(case.soft)),
        ]
        style, status = "red", case.error_class or "?"
    body = Text()
    for label, value in rows:
        body.append(f"{pad_left(label, 15)}: ", style="bold")
        body.append(clean(value) + "\n")
    body.rstrip()
    return Panel(body, title=literal(f"{case.name}: {status}"), title_align="left", border_style=style)


def render_catalogue(found: FailureCatalogue) -> Group:
    return Group(Text(_("Placement failures, each run for real"), style="bold underline"),
                 *(_case_panel(c) for c in found.cases))
