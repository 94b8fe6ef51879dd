"""`placement parse`: placement logs of any TensorFlow version, read without TensorFlow."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated

import typer

from placement_cli import logparse
from placement_cli.cli import shown
from placement_cli.cli.commands import command
from placement_cli.cli.funnel import say
from placement_cli.cli.options import (
    AllOpt,
    DeviceFilterOpt,
    ForceOpt,
    JsonOpt,
    NodeFilterOpt,
    OpFilterOpt,
    SvgOpt,
    TopOpt,
    named,
    pictures,
)
from placement_cli.cli.outcome import Outcome
from placement_cli.exceptions import UsageProblem
from placement_cli.filters import apply, widened
from placement_cli.i18n import _
from placement_cli.logparse.saved import saved_among
from placement_cli.model.filtered import Filters


@command()
def parse(
    files: Annotated[list[str], typer.Argument(metavar="FILE...", callback=named, help="Log files, or one report saved with --json; - reads standard input.", show_default=False)],
    summary: Annotated[bool, typer.Option("--summary", help="Only the counts per device.")] = False,
    device: DeviceFilterOpt = None,
    op: OpFilterOpt = None,
    node: NodeFilterOpt = None,
    top: TopOpt = None,
    all_rows: AllOpt = False,
    as_json: JsonOpt = False,
    svg: SvgOpt = None,
    force: ForceOpt = False,
) -> Outcome:
    """Parse placement logs of any TensorFlow version (0.x to 2.x), mixed with any other output.

    Several files are read as one stream, so a program's stdout and stderr logs pair up.
    Example: placement parse train.log --summary
    """

    drawn = pictures("placement parse", as_json=as_json, force=force, svg=svg, protect=tuple(files))
    filters = Filters(device, op, node, top)
    saved, stdin, refused = saved_among(files)  # a report saved with --json is shown as it was saved, statuses too
    if saved is None:
        report = logparse.parse_paths(files, keep=not summary or filters.active, note=say, stdin=stdin)
        if refused is not None and not (report.placement_count or report.errors or report.ignored):
            raise refused  # text that starts like JSON, is none (a truncated report, JSON lines) and holds no log
    elif saved.counted is not None and filters.active:
        name = "standard input" if files[0] == "-" else files[0]
        raise UsageProblem(_("{name} holds only counts per device (saved with --summary): {filters} cannot narrow "
                             "it").format(name=name, filters=filters.describe()))
    elif summary and not filters.active:  # counts only, as a log's --summary
        report = replace(saved, placements=(), counted=tuple(saved.by_device.items()))
    else:
        report = saved
    if saved is not None and saved.saved_filters:
        _check_renarrowed(files[0], dict(saved.saved_filters), filters)
    narrowed = apply(report, filters, hide_plumbing=False)
    if saved is not None and saved.saved_filters:  # what it was saved narrowed by stays said in what it shows
        said = dict(saved.saved_filters)
        given = {kind: value for kind, value in filters.to_dict().items() if value is not None}
        if "top" in given and "top" in said:  # the first N of its first M placements: the first min(N, M)
            given["top"] = min(given["top"], said["top"])
        narrowed = replace(narrowed, filters=Filters(**{**said, **given}),
                           total=saved.unfiltered if saved.unfiltered is not None else narrowed.total)
    notices: tuple[str, ...] = ()
    if not narrowed.total:
        names = ", ".join("standard input" if f == "-" else f for f in files)
        notices = (_("no placements found in {names}").format(names=names) if not narrowed.report.ignored else
                   _("no placements found in {names}, only {n} device requests TensorFlow ignored (listed)").format(
                       names=names, n=len(narrowed.report.ignored)),)
    return Outcome(output=shown.report_output(narrowed.report, as_json=as_json, summary=summary,
                                              all_rows=all_rows, filtered=narrowed),
                   pictures=drawn, notices=notices)


def _check_renarrowed(path: str, said: dict[str, object], filters: object) -> None:
    """UsageProblem where a filter given again would make the report name one value and hold another: a
    report saved narrowed by ``--device CPU:1`` narrowed by ``--device CPU`` holds CPU:1's placements only."""

    found = widened(said, filters)  # type: ignore[arg-type]
    if found is not None:
        kind, given, saved = found
        name = "standard input" if path == "-" else path
        raise UsageProblem(_("{name} was saved narrowed by --{kind} {saved}: --{kind} {given} cannot narrow it "
                             "again (the report would name one and hold the other); narrow a report saved "
                             "without --{kind}").format(name=name, kind=kind, saved=saved, given=given))
