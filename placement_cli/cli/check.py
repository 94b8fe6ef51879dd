"""`placement check`: a placement gate for CI: rules judged against a log or a saved report, without TensorFlow."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from placement_cli.cli.commands import command
from placement_cli.cli.funnel import say
from placement_cli.cli.options import JsonOpt, named
from placement_cli.cli.outcome import ExitCode, Json, Outcome
from placement_cli.exceptions import RuleError
from placement_cli.i18n import _
from placement_cli.logparse.saved import read_input
from placement_cli.render.check import render_check
from placement_cli.rules import Rules, devices_on_nothing, expect_rule, judge, max_busy_rule, max_on_rule
from placement_cli.rules import config as rules_file
from placement_cli.rules.timed import duration_rule


@command()
def check(
    source: Annotated[str, typer.Argument(metavar="INPUT", callback=named, help="A placement log (any TensorFlow version), a report saved with --json (placement trace --json), or - for standard input.", show_default=False)],
    max_on: Annotated[list[str] | None, typer.Option("--max-on", metavar="DEV=N", help="At most N distinct placements on DEV: a device type, a device or a task (CPU=0, GPU:1=100, ps/0=20); each node, or eager op type, once per device, so the same at any step count. Repeatable.", show_default=False)] = None,
    expect: Annotated[list[str] | None, typer.Option("--expect", metavar="REGEX=DEV", help="Every node whose name matches REGEX is on DEV (^tower_0/=GPU:0; matched in linear time, ignoring case; split at the last =). Repeatable.", show_default=False)] = None,
    no_fallback: Annotated[bool | None, typer.Option("--no-fallback/--allow-fallback", help="No soft fallback: every op where it asked to be (needs a report that knows requests, such as trace --json). --allow-fallback turns off the config file's.", show_default=False)] = None,
    max_copy_bytes: Annotated[int | None, typer.Option("--max-copy-bytes", min=0, metavar="N", help="At most N bytes copied between devices per step (needs a report with copies and their sizes, such as train --copies --json).", show_default=False)] = None,
    max_copy_time: Annotated[str | None, typer.Option("--max-copy-time", metavar="TIME", help="The copies between devices take at most TIME per step, e.g. 2ms, 500us (needs a timed report: --time --json).", show_default=False)] = None,
    max_busy: Annotated[list[str] | None, typer.Option("--max-busy", metavar="DEV=PCT", help="DEV (a device type, a device or a task) is busy at most PCT percent of a step, each device it names (CPU=10; needs a timed report). Repeatable.", show_default=False)] = None,
    ignore: Annotated[list[str] | None, typer.Option("--ignore", metavar="REGEX", help="Leave nodes whose name matches REGEX out of every rule. Repeatable.", show_default=False)] = None,
    ignore_op: Annotated[list[str] | None, typer.Option("--ignore-op", metavar="OP", help="Leave ops of type OP out of every rule (MatMul also names oneDNN's _MklMatMul). Repeatable.", show_default=False)] = None,
    include_plumbing: Annotated[bool | None, typer.Option("--include-plumbing/--exclude-plumbing", help="Judge TensorFlow's plumbing too (_Arg, _Retval, _DeviceArg, NoOp, _Send, _Recv, eager ops' wrapper functions); left out by default.", show_default=False)] = None,
    allow_placement_errors: Annotated[bool | None, typer.Option("--allow-placement-errors/--fail-placement-errors", help="Let an input that reports placement errors (a graph TensorFlow could not place) pass when the rules hold; by default such an input fails. --fail-placement-errors turns off the config file's.", show_default=False)] = None,
    config: Annotated[str | None, typer.Option("--config", metavar="FILE", callback=named, help="Read the rules from FILE (its [tool.placement.check] table, else its top level) instead of the pyproject.toml found from the current folder upward.", show_default=False)] = None,
    no_config: Annotated[bool, typer.Option("--no-config", help="Read no rules from a file: only the command line's.")] = False,
    as_json: JsonOpt = False,
) -> Outcome:
    """Check placements against rules: exit 0 when every rule holds, 1 when one fails, 2 when the
    input cannot be read or cannot judge a rule.

    The same rules can live in pyproject.toml under [tool.placement.check]; the command line's add to
    them (a device's --max-on or a regex's --expect replaces the file's for the same device or regex).
    Example: placement check report.json --max-on CPU=0 --no-fallback
    """

    if config is not None and no_config:
        raise RuleError(_("--config and --no-config: give one of them"))
    given = Rules(max_on=tuple(max_on_rule(v) for v in max_on or ()), expect=tuple(expect_rule(v) for v in expect or ()),
                  max_copy_bytes=max_copy_bytes, ignore=tuple(ignore or ()), ignore_op=tuple(ignore_op or ()),
                  max_copy_time=None if max_copy_time is None else duration_rule("--max-copy-time", max_copy_time),
                  max_busy=tuple(max_busy_rule(v) for v in max_busy or ()))
    found = None if no_config else Path(config) if config is not None else rules_file.find()
    if source == "-" and found is not None and rules_file.is_stdin(found):
        raise RuleError(_("INPUT - and --config {path} both read standard input: give one of them as a file").format(
            path=found))
    base = Rules() if found is None else rules_file.load(found, given=config is not None)
    rules = base.over(given, no_fallback=no_fallback, include_plumbing=include_plumbing,
                      allow_placement_errors=allow_placement_errors)
    name = "standard input" if source == "-" else source
    report = read_input(source, note=say)
    result = judge(report, rules, name=name)
    for device in devices_on_nothing(report, rules) if report.placements else ():  # (none at all: the errors say why)
        say(_("no placement in {name} is on {device}: is the name right?").format(
            name=name, device=device))
    code = ExitCode.OK if result.passed else ExitCode.PLACEMENT_FAILED
    if as_json:
        return Outcome(code=code, output=(Json(result.to_dict()),))

    return Outcome(code=code, output=(render_check(result),))
