"""The device requests TensorFlow's placer logged it ignored, and why: a table beside the placements,
never counted among them."""

from __future__ import annotations

from rich.table import Table

from placement_cli.devices import short_name
from placement_cli.i18n import _
from placement_cli.model import IgnoredRequest, Report
from placement_cli.render.text import literal


def why_ignored(request: IgnoredRequest) -> str:
    """What TensorFlow did instead, in one line."""
    if request.cause == "reference_input":
        return _("follows its reference input {source} to {device}").format(
            source=request.source or "?", device=request.device.short if request.device else "?")
    if request.cause == "resource_device":
        return _("a warning, no failure: soft placement put the resource's colocation group on {devices}, not on "
                 "the resource's device (TensorFlow's warning says why)").format(
            devices=", ".join(short_name(d) for d in (request.device or "?").split(", ")))
    return _("its colocation with group {group} was dropped (soft placement is on; TensorFlow's line says "
             "why)").format(group=request.source or "?")


def ignored_table(report: Report) -> Table | None:
    """One row per request the placer ignored (the lines say where the node ran only through its cause)."""
    if not report.ignored:
        return None
    table = Table(title=_("Requests TensorFlow ignored ({n}, not placements)").format(n=len(report.ignored)),
                  title_justify="left")
    table.add_column(_("line"), justify="right", no_wrap=True)
    table.add_column(_("node"), overflow="fold")
    table.add_column(_("asked for"), no_wrap=True)
    table.add_column(_("why it was ignored"), overflow="fold")
    for r in report.ignored:
        table.add_row(str(r.line), literal(r.node), literal(r.requested.short if r.requested else "-"),
                      literal(why_ignored(r)))
    return table
