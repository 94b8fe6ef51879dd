"""What the commands print of a report: the view for this stdout, the filters' notice, the log."""

from __future__ import annotations

import sys
from typing import Any

from placement_cli.cli.outcome import Json, Said, Verbatim
from placement_cli.i18n import _


def view(*, all_rows: bool, hints: Any = None, filtered: Any = None) -> Any:
    """How much of a report stdout shows: every row when they fit a screen or with --all, else a
    digest; whole node names when stdout is not a terminal (files, pipes)."""
    from placement_cli.render.console import is_terminal, screen_rows  # noqa: PLC0415 - start-up
    from placement_cli.render.table import View  # noqa: PLC0415 - start-up

    return View(all_rows=all_rows, screen_rows=screen_rows(sys.stdout), fit=is_terminal(sys.stdout), hints=hints,
                filtered=filtered)


def no_match(filtered: Any) -> list[Said]:
    """The line that says the filters left nothing (none when something matched)."""
    if filtered is None or not filtered.nothing_matched:
        return []
    return [Said(_("no placements match {filters} (of {total})").format(filters=filtered.filters.describe(),
                                                                       total=filtered.total))]


def log(report: Any) -> list[Any]:
    """--log: TensorFlow's log as it wrote it, each line kept whole (also in files and pipes)."""
    from rich.rule import Rule  # noqa: PLC0415 - start-up

    from placement_cli.render.table import literal  # noqa: PLC0415 - start-up

    if not report.log:
        return []
    return [Verbatim(Rule(_("TensorFlow's log"))), Verbatim(literal(report.log.rstrip()), soft_wrap=True),
            Verbatim(Rule())]


def report_output(report: Any, *, as_json: bool, show_log: bool = False, summary: bool = False,
                  all_rows: bool = False, hints: Any = None, filtered: Any = None) -> list[Any]:
    """A report as JSON, or as its tables (after TensorFlow's log with --log)."""
    if as_json:
        from placement_cli.render.json import report_dict  # noqa: PLC0415 - start-up

        return [*no_match(filtered), Json(report_dict(report, filtered=filtered))]
    from placement_cli.render.table import report_group  # noqa: PLC0415 - start-up

    return [*no_match(filtered), *(log(report) if show_log else ()),
            report_group(report, summary=summary, view=view(all_rows=all_rows, hints=hints, filtered=filtered))]


def incomplete(found: Any, what: str | None = None) -> tuple[str, ...]:
    """One line, whatever the number of private TensorFlow APIs missing, naming them and why."""
    if not found:
        return ()
    what = what or _("reasons are incomplete (those that need it say unknown)")
    return (_("{what}: TensorFlow's {apis}").format(what=what, apis="; ".join(found)),)


def xla_notice(options: Any) -> tuple[str, ...]:
    """The line that says why an XLA device asked for does not exist here (none when it does)."""
    from placement_cli.runtime.startup import XLA_SWITCH, xla_missing  # noqa: PLC0415 - start-up

    why = xla_missing(options)
    if why == "dropped":
        return (_("no XLA device here: this TensorFlow makes none, even with TF_XLA_FLAGS={flag} set before it "
                  "started (a deprecated switch that it no longer honours)").format(flag=XLA_SWITCH),)
    if why == "started":
        return (_("no XLA device here: TensorFlow was already running in this process without TF_XLA_FLAGS={flag}, "
                  "which it reads only when it starts").format(flag=XLA_SWITCH),)
    return ()


def tensorboard_notice(path: str | None, written: bool = True) -> tuple[str, ...]:
    if path is None:
        return ()
    if written:
        return (_("TensorBoard event file written in {path}: see it with  tensorboard --logdir {path}").format(
            path=path),)
    # the devices the graph asked for are no placement: nothing is drawn as if it were one
    return (_("no TensorBoard event file written in {path}: the run failed before TensorFlow placed its graph").format(
        path=path),)


def found_nothing(report: Any, name: str, copies: bool) -> list[str]:
    """What a trace's report lacks, said: no placements at all; --copies with no Session run."""
    notices = []
    if not report.placement_count:
        notices.append(_("no placements found in the output of {script}").format(script=name))
    if copies and report.copies is None:
        notices.append(_("no tf.compat.v1.Session ran in {script}: --copies lists the copies of Session runs "
                         "only").format(script=name))
    return notices
