"""`placement diff`: what moved between two runs, logs or saved reports, read without TensorFlow."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Annotated, Any

import typer

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
    named,
    pictures,
)
from placement_cli.cli.outcome import ExitCode, Json, Outcome
from placement_cli.cli.shown import view
from placement_cli.compare import compare, prepared
from placement_cli.exceptions import FilterError, InputError, UsageProblem
from placement_cli.filters import check_device, check_op, compile_node, widened
from placement_cli.i18n import _
from placement_cli.logparse.saved import read_pair
from placement_cli.model.filtered import Filters
from placement_cli.render.diff import diff_group

DIFFERENT = ExitCode.PLACEMENT_FAILED  # as diff(1) says it: 1 when the two differ


@command()
def diff(
    old: Annotated[str, typer.Argument(metavar="OLD", callback=named, help="A placement log (any TensorFlow version), a report saved with --json by any command, or - for standard input.", show_default=False)],
    new: Annotated[str, typer.Argument(metavar="NEW", callback=named, help="The same kinds of input as OLD (- for standard input on one side only).", show_default=False)],
    device: DeviceFilterOpt = None,
    op: OpFilterOpt = None,
    node: NodeFilterOpt = None,
    all_rows: AllOpt = False,
    as_json: JsonOpt = False,
    svg: SvgOpt = None,
    force: ForceOpt = False,
) -> Outcome:
    """Show what moved between two runs: placements that changed device, and those only one side has.

    Device names are normalised and TensorFlow's duplicate copies paired, so a TF 1.x and a TF 2.x log
    of the same placements show no difference. Exit 0: the same placements; 1: they differ; 2: bad input.
    Example: placement diff before.log after.json
    """

    if old == "-" and new == "-":
        raise UsageProblem(_("standard input can be one side only: give a file for OLD or NEW"))
    drawn = pictures("placement diff", as_json=as_json, force=force, svg=svg, protect=(old, new))
    filters = Filters(device, op, node)
    sides = read_pair(old, new, note=say, prepare=prepared)
    filters, narrowed = _narrowed(sides, filters)
    if not any(side.report.placement_count for side in sides):  # nothing compared is no "same placements"
        raise InputError(_("no placements found in {old} or in {new}: nothing to compare").format(
            old=sides[0].name, new=sides[1].name))
    result = compare(*sides, filters)
    if filters.active and not result.old.placements and not result.new.placements:  # a typo must not pass a gate
        raise InputError(_("no placements match {filters} in {old} (of {old_total}) or in {new} (of {new_total}): "
                           "nothing to compare").format(filters=filters.describe(), old=sides[0].name,
                                                        old_total=sides[0].report.placement_count,
                                                        new=sides[1].name, new_total=sides[1].report.placement_count))
    code = ExitCode.OK if result.same else DIFFERENT
    notices = tuple(_("no placements found in {names}").format(names=side.name) if not read.report.placement_count
                    else _("{name}: no placements match {filters} (of {total})").format(
                        name=side.name, filters=filters.describe(), total=read.report.placement_count)
                    for side, read in zip((result.old, result.new), sides) if not side.placements)
    notices += narrowed
    if result.unnamed is not None:
        notices += (_("{name} names no node's graph (a report saved before placement recorded graphs): nodes were "
                      "matched by name alone, so same-named nodes of different tf.functions count as one").format(
                          name=result.unnamed),)
    notices += tuple(_("{name} records a run that did not finish ({why}): its placements may be partial").format(
        name=read.name, why=read.report.run_error) for read in sides if read.report.run_error is not None)
    if as_json:
        return Outcome(code=code, output=[Json(result.to_dict(lazy=True))], pictures=drawn, notices=notices)

    return Outcome(code=code, output=[diff_group(result, view(all_rows=all_rows))], pictures=drawn, notices=notices)


def _narrowed(sides: Any, filters: Any) -> tuple[Any, tuple[str, ...]]:
    """The filters the two sides are compared with: the command line's, and, for the kinds it left out,
    those a saved report was narrowed by (it holds nothing else: the other side is narrowed alike), with a
    line for each such report; UsageProblem where the two were saved narrowed differently."""


    saved = [dict(side.report.saved_filters) for side in sides]
    for side, said in zip(sides, saved):  # the other side narrowed by the command line's value alone
        found = widened(said, filters)
        if found is not None:
            kind, given, was = found
            raise UsageProblem(_("{name} was saved narrowed by --{kind} {saved}: --{kind} {given} would compare "
                                 "what it left out (give --{kind} {saved}, a narrower one, or a report saved "
                                 "without --{kind})").format(name=side.name, kind=kind, saved=was, given=given))
    adopted: dict[str, str] = {}
    for kind in ("device", "op", "node"):
        values = {d[kind] for d in saved if kind in d}
        given = getattr(filters, kind)
        if given is not None or not values:
            continue
        if len(values) > 1:
            raise UsageProblem(_("{old} and {new} were saved narrowed by different filters ({a}; {b}): they hold "
                                 "nothing alike to compare").format(
                old=sides[0].name, new=sides[1].name, a=_described(saved[0]), b=_described(saved[1])))
        adopted[kind] = value = values.pop()
        _check_saved(kind, value, next(side.name for side, said in zip(sides, saved) if kind in said))
    lines = []
    for side, other, said in ((sides[0], sides[1], saved[0]), (sides[1], sides[0], saved[1])):
        total = side.report.unfiltered if side.report.unfiltered is not None else side.report.placement_count
        if any(kind in said for kind in adopted):
            lines.append(_("{name} was saved narrowed by {filters} ({count} of {total} placements): {other} is "
                           "compared narrowed alike").format(name=side.name, filters=_described(said),
                                                             count=side.report.placement_count, total=total,
                                                             other=other.name))
        if "top" in said:
            lines.append(_("{name} was saved with --top {n}: it holds only its first {n} placements (of {total}), so "
                           "rows only in {other} may be in its run too").format(name=side.name, n=said["top"],
                                                                                total=total, other=other.name))
    return (replace(filters, **adopted) if adopted else filters), tuple(lines)


def _described(saved: dict[str, Any]) -> str:
    return Filters(saved.get("device"), saved.get("op"), saved.get("node")).describe() or "-"


def _check_saved(kind: str, value: str, name: str) -> None:
    """InputError where the filter a report says it was saved narrowed by is none the command line takes (a
    hand-edited report's ``"node": "(a"``): the other side cannot be narrowed alike."""

    checks: dict[str, Callable[[str], object]] = {"device": check_device, "op": check_op, "node": compile_node}
    try:
        checks[kind](value)
    except FilterError as exc:
        raise InputError(_("{name}: saved narrowed by a filter that is none ({why}): the other side cannot be "
                           "narrowed alike").format(name=name, why=exc)) from None
