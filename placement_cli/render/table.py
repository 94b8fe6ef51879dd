"""Rich renderables for a Report; they return, the commands print."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from placement_cli.i18n import _, shown
from placement_cli.model import Report
from placement_cli.render.digest import digest_renderables
from placement_cli.render.hints import hint
from placement_cli.render.ignored import ignored_table
from placement_cli.render.parts import (
    counts_table,
    failure_panel,
    mapping_renderable,
    onednn_note,
    placement_table,
    plumbing_caption,
    reasons_table,
    result_renderable,
    rows_table,
    shown_placements,
    table_rows,
)
from placement_cli.render.text import clean, format_result, literal, pad_left
from placement_cli.render.view import Hints, View

# What the commands, the notebook API and the other renderers take from here.
__all__ = ["Hints", "View", "clean", "copies_table", "failure_panel", "format_result", "hint", "literal",
           "onednn_note", "pad_left", "placement_table", "report_group", "report_renderables"]


def copies_table(report: Report, view: View | None = None) -> RenderableType:
    """The executed graph's copies between devices (with their bytes when the run was traced)."""
    if report.copies and any(c.detailed for c in report.copies):
        from placement_cli.render.training import copies_renderables  # noqa: PLC0415 - parse never needs it

        return Group(*copies_renderables(report, view or View()))
    if not report.copies:
        return Text(_("No copies between devices: every op that exchanges tensors shares a device."))
    table = Table(title=_("Copies between devices (_Send/_Recv)"), title_justify="left")
    table.add_column(_("tensor"), overflow="fold")
    table.add_column(_("from"), no_wrap=True)
    table.add_column(_("to"), no_wrap=True)
    for c in report.copies:
        table.add_row(literal(shown(c.tensor)), literal(c.source.short), literal(c.target.short))
    return table


def report_renderables(report: Report, *, summary: bool = False, view: View | None = None) -> list[RenderableType]:
    """Everything a command shows for a report, in reading order: every row when it fits a screen
    (or with --all), else a digest."""
    view = view or View()
    run = report.ran
    parts: list[RenderableType] = []
    if report.title:
        parts.append(literal(shown(report.title), "bold underline"))
    counted = False
    if not summary:
        mapping = mapping_renderable(report)
        if mapping is not None:
            parts.append(mapping)
        if report.placements:
            visible = shown_placements(report)
            rows = table_rows(visible, run)
            if view.fits(len(rows)):
                parts.append(rows_table(rows, caption=plumbing_caption(report, visible, view), fit=view.fit))
            else:
                parts.extend(digest_renderables(report, visible, len(rows), view=view))
                counted = True
    if report.placement_count and not counted:
        parts.append(counts_table(report, view.filtered))
    ignored = None if summary else ignored_table(report)
    if ignored is not None:
        parts.append(ignored)
    reasons = reasons_table(report, view.fit) if run else None
    if reasons is not None:
        parts.append(reasons)
    if report.copies is not None:
        parts.append(copies_table(report, view))
    if report.cost is not None or report.timing_error is not None:
        from placement_cli.render.cost import timed_renderables  # noqa: PLC0415 - only a timed run needs it

        parts.extend(timed_renderables(report, view))
    onednn = onednn_note(report, placements=not summary)
    if onednn is not None:
        parts.append(onednn)
    parts.extend(failure_panel(f, report.origin, view.hints) for f in report.errors)
    if run and report.result is not None:
        parts.append(result_renderable(report.result))
    return parts


def report_group(report: Report, *, summary: bool = False, view: View | None = None) -> Group:
    return Group(*report_renderables(report, summary=summary, view=view))
