"""Rendering of `placement check`: a line per rule that failed, then the one-line summary."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text

from placement_cli.devices import short_name
from placement_cli.i18n import N_, _, shown, translated
from placement_cli.messages import one_line
from placement_cli.model import CheckResult, RuleFailure
from placement_cli.render.text import clean

DEVICES_SHOWN = 6  # devices the summary names; the rest are counted together

# What the placements whose request is unknown are (rules._unknown_kind), in words.
_UNKNOWN_KINDS = {
    "eager_const": N_("_EagerConst: {count} (constants TensorFlow makes from Python values, which no op callback sees)"),
    "wrapper": N_("in the single-op functions TensorFlow wraps eager ops in: {count}"),
    "eager": N_("eager ops without a record: {count} (an op that ended with an error after TensorFlow logged it, such "
               "as the IteratorGetNext that ends a dataset loop; another thread's op; or one whose record fits more "
               "than one line)"),
    "graph": N_("nodes of no recorded graph: {count} (TensorFlow's own, such as lowered control flow)"),
}

# What the logged placements beyond the distinct ones are (CheckResult.repeats), in words.
_REPEATS = {
    "eager": N_("an eager op each time it runs"),
    "graph": N_("a graph node each time its graph is placed"),
}


def render_check(result: CheckResult) -> Group:
    """The rules' file, when there was one; each failed rule with its example nodes; the summary."""
    lines = [] if result.config is None else [Text(_("rules from {path}").format(path=clean(result.config)),
                                                   style="dim")]
    lines.extend(failure_line(f) for f in result.failures)
    lines.append(Text(summary_line(result), style="bold green" if result.passed else "bold red"))
    for line in lines:  # one line each, however narrow the screen: CI logs and grep read them whole
        line.no_wrap = True
        line.overflow = "ignore"
    return Group(*lines)


def failure_line(failure: RuleFailure) -> Text:
    """``--max-on CPU=0 failed: 3 placements on CPU:0, at most 0 allowed (a, b, c)``: names shown
    literally (Text, never markup), control characters, line breaks and tabs replaced: one line (a saved
    report's names, a regex from the command line, may hold any)."""
    line = Text()
    line.append(one_line(failure.rule), style="bold")
    line.append(_(" failed: "), style="red")
    line.append(one_line(shown(failure.message)))
    if failure.examples:
        line.append(" (" + _("for example") + " " + ", ".join(one_line(name) for name in failure.examples) + ")",
                    style="dim")
    return line


def summary_line(result: CheckResult) -> str:
    """``412 placements: 409 on GPU:0, 3 on CPU:0; 2 soft fallbacks; 3 rules, 1 failed``."""
    count = result.placements
    per_device = result.by_device
    if result.distinct is not None and result.distinct != count:  # the rules count these: they lead
        kinds = dict(result.repeats)
        why = [translated(_REPEATS[kind]) for kind in ("eager", "graph") if kinds.get(kind)] or [translated(_REPEATS["eager"])]
        text = (_("{count} distinct placement") if result.distinct == 1 else _("{count} distinct placements")).format(
            count=result.distinct) + " (" + _("{count} logged: {why}").format(count=count, why=", ".join(why)) + ")"
        per_device = result.distinct_by_device
    else:
        text = (_("{count} placement") if count == 1 else _("{count} placements")).format(count=count)
    devices = [_("{count} on {device}").format(count=n, device=short_name(d))
               for d, n in per_device[:DEVICES_SHOWN]]
    rest = per_device[DEVICES_SHOWN:]
    if rest:
        devices.append(_("{count} on {devices} more devices").format(count=sum(n for _d, n in rest),
                                                                     devices=len(rest)))
    if devices:
        text += ": " + ", ".join(devices)
    left_out = [_("{count} of TensorFlow's plumbing").format(count=result.plumbing)] if result.plumbing else []
    if result.ignored:
        left_out.append(_("{count} ignored").format(count=result.ignored))
    if left_out:
        text += " (" + _("not judged: {what}").format(what=", ".join(left_out)) + ")"
    parts = [clean(text)]
    if result.soft_fallbacks is not None:
        parts.append((_("{count} soft fallback") if result.soft_fallbacks == 1
                      else _("{count} soft fallbacks")).format(count=result.soft_fallbacks))
        if result.plumbing_fallbacks:  # trace counts them; check leaves plumbing out: said, so the counts agree
            parts[-1] += " " + _("(and {count} in TensorFlow's plumbing, such as NoOps, not judged: "
                                 "--include-plumbing judges them)").format(count=result.plumbing_fallbacks)
        if result.unknown_requests and "--no-fallback" in result.rules:  # it cannot see these: said, and what they are
            unknown = ", ".join(translated(_UNKNOWN_KINDS.get(kind, kind + ": {count}")).format(count=n)
                                for kind, n in result.unknown_kinds)
            parts[-1] += " " + _("({count} whose request is unknown: {kinds})").format(
                count=result.unknown_requests, kinds=unknown or result.unknown_requests)
    if result.errors:
        parts.append((_("{count} placement error") if result.errors == 1
                      else _("{count} placement errors")).format(count=result.errors))
    rules = len(result.rules)
    parts.append((_("{count} rule") if rules == 1 else _("{count} rules")).format(count=rules) + ", "
                 + _("{count} failed").format(count=len(result.failures)))
    return "; ".join(parts)
