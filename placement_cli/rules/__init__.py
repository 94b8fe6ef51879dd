"""The rules of `placement check` and the pytest plugin, judged against a report: pure, no TensorFlow."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from placement_cli import messages
from placement_cli.devices import DeviceSpec, short_task, try_parse
from placement_cli.exceptions import FilterError, RuleError
from placement_cli.filters import check_device, check_op, compile_node, device_matcher, op_matcher
from placement_cli.i18n import Message, _, english
from placement_cli.logparse.functions import function_key, trace_counters
from placement_cli.messages import quoted
from placement_cli.model import LOGGED, SOFT_FALLBACK, CheckResult, Placement, Report, RuleFailure
from placement_cli.model.kinds import PlacementKind
from placement_cli.model.ops import PLUMBING_OPS
from placement_cli.rules import timed

# TensorFlow's plumbing, left out of every rule unless include_plumbing: function arguments and
# results, control-only NoOps, and the copies between devices (their traffic is --max-copy-bytes's).
JUDGED_PLUMBING = PLUMBING_OPS | frozenset({"NoOp", "_Send", "_Recv", "_HostSend", "_HostRecv"})
EXAMPLES = 5  # example nodes named per failed rule
# The rule every check holds unless --allow-placement-errors: the input shows no placement error.
PLACEMENT_ERRORS_RULE = "--fail-placement-errors"
_OPTION_LIKE = re.compile(r"--?[A-Za-z]")


@dataclass(frozen=True)
class Rules:
    """What must hold, and what is left out of it; every value checked when made (``RuleError``)."""

    max_on: tuple[tuple[str, int], ...] = ()  # (device type, device or task; at most this many placements)
    expect: tuple[tuple[str, str], ...] = ()  # (regex searched in node names; the device they must be on)
    no_fallback: bool = False
    max_copy_bytes: int | None = None
    ignore: tuple[str, ...] = ()  # regexes: nodes whose name matches are left out
    ignore_op: tuple[str, ...] = ()  # op types left out
    include_plumbing: bool = False
    source: str | None = field(default=None, compare=False)  # the file some rules came from
    allow_placement_errors: bool = False  # a log whose graph could not be placed passes the other rules
    max_copy_time: float | None = None  # microseconds the copies between devices take per step (a timed report)
    max_busy: tuple[tuple[str, float], ...] = ()  # (device type, device or task; at most this percent of a step)

    def __post_init__(self) -> None:
        for device, limit in self.max_on:
            _check_device("--max-on", device)
            _check_limit("--max-on", f"{device}={limit}", limit)
        for regex, device in self.expect:
            regex_of("--expect", regex)
            _check_device("--expect", device)
        _check_once("--max-on", [(_device_key(d), f"{d}={n}") for d, n in self.max_on])
        _check_once("--expect", [(r, f"{r}={d}") for r, d in self.expect])
        if self.max_copy_bytes is not None:
            _check_limit("--max-copy-bytes", str(self.max_copy_bytes), self.max_copy_bytes)
        if self.max_copy_time is not None and (not isinstance(self.max_copy_time, float) or self.max_copy_time < 0):
            raise RuleError(_("--max-copy-time: give a time with its unit: 500us, 2ms or 0.5s"))
        for device, percent in self.max_busy:
            _check_device("--max-busy", device)
            timed.share_rule(device, percent)
        _check_once("--max-busy", [(_device_key(d), f"{d}={n:g}") for d, n in self.max_busy])
        for regex in self.ignore:
            regex_of("--ignore", regex)
        for op in self.ignore_op:
            try:
                check_op(op)
            except FilterError as exc:
                raise RuleError(str(exc).replace("--op", "--ignore-op", 1)) from None

    @property
    def count(self) -> int:
        return (len(self.max_on) + len(self.expect) + self.no_fallback + (self.max_copy_bytes is not None)
                + (self.max_copy_time is not None) + len(self.max_busy))

    def described(self) -> tuple[str, ...]:
        """Each rule as the command line writes it."""
        return (*(f"--max-on {device}={limit}" for device, limit in self.max_on),
                *(f"--expect {regex}={device}" for regex, device in self.expect),
                *(("--no-fallback",) if self.no_fallback else ()),
                *(() if self.max_copy_bytes is None else (f"--max-copy-bytes {self.max_copy_bytes}",)),
                *timed.described(self.max_copy_time, self.max_busy))

    def over(self, given: Rules, *, no_fallback: bool | None = None, include_plumbing: bool | None = None,
             allow_placement_errors: bool | None = None) -> Rules:
        """These rules (a config file's) with the command line's on top: a device's --max-on and a
        regex's --expect in ``given`` replace the file's for the same device or regex, the others
        add to them; --ignore and --ignore-op add; --max-copy-bytes, and the flags when given (not
        None), replace the file's."""
        max_on = {_device_key(d): (d, n) for d, n in self.max_on}
        max_on.update((_device_key(d), (d, n)) for d, n in given.max_on)
        expect = dict(self.expect)
        expect.update(given.expect)
        busy = {_device_key(d): (d, n) for d, n in self.max_busy}
        busy.update((_device_key(d), (d, n)) for d, n in given.max_busy)
        return Rules(
            max_on=tuple(max_on.values()), expect=tuple(expect.items()),
            no_fallback=self.no_fallback if no_fallback is None else no_fallback,
            max_copy_bytes=self.max_copy_bytes if given.max_copy_bytes is None else given.max_copy_bytes,
            ignore=tuple(dict.fromkeys((*self.ignore, *given.ignore))),
            ignore_op=tuple(dict.fromkeys((*self.ignore_op, *given.ignore_op))),
            include_plumbing=self.include_plumbing if include_plumbing is None else include_plumbing,
            source=self.source, allow_placement_errors=self.allow_placement_errors if allow_placement_errors is None
            else allow_placement_errors,
            max_copy_time=self.max_copy_time if given.max_copy_time is None else given.max_copy_time,
            max_busy=tuple(busy.values()))


def _device_key(device: str) -> str:
    """One key for one device however spelled (CPU:1, cpu:1, /cpu:1, /device:CPU:1, and its full name
    /job:localhost/replica:0/task:0/device:CPU:1: the local task's job, replica and task are the
    defaults every shorter spelling means; a task as tables name it, ps/0)."""
    spec = try_parse(device) or short_task(device)
    if spec is None:
        return " ".join(device.split()).upper()
    local = (spec.job or "").lower() in ("", "localhost")
    spec = replace(spec, job=None if local else (spec.job or "").lower(),
                   replica=None if spec.replica in (None, 0) else spec.replica,
                   task=None if local and spec.task in (None, 0) else spec.task)
    return spec.spec.upper()


def _check_device(option: str, device: object) -> None:
    if not isinstance(device, str):
        raise RuleError(_("{option}: give a device as text, not {value}").format(option=option, value=repr(device)))
    try:
        check_device(device)
    except FilterError as exc:
        raise RuleError(str(exc).replace("--device", option, 1)) from None


def _check_once(option: str, rules: list[tuple[str, str]]) -> None:
    """One rule per device (--max-on) or regex (--expect) from one source: of two, one would be
    dropped unseen (the command line replaces a config file's, never its own)."""
    seen: dict[str, str] = {}
    for key, shown in rules:
        if key in seen:
            raise RuleError(_("{option} {first} and {option} {second} judge the same thing: give one of them").format(
                option=option, first=quoted(seen[key]), second=quoted(shown)))
        seen[key] = shown


def _check_limit(option: str, shown: str, limit: object) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise RuleError(_("{option} {value}: the limit must be a whole number, 0 or more").format(
            option=option, value=quoted(shown)))


def regex_of(option: str, regex: str) -> Any:
    """The compiled regex (RE2: linear time, as --node); RuleError for one that is empty, malformed,
    or looks like an option (``--ignore --json``: the regex was forgotten)."""
    if not isinstance(regex, str):
        raise RuleError(_("{option}: give a regex as text, not {value}").format(option=option, value=repr(regex)))
    if _OPTION_LIKE.match(regex):
        raise RuleError(_("{option} {value}: looks like an option, not a regex (was the regex left out? "
                          "write a regex that starts with - as [-]...)").format(option=option, value=quoted(regex)))
    try:
        return compile_node(regex, option)
    except FilterError as exc:
        raise RuleError(str(exc)) from None


def split_rule(option: str, value: str) -> tuple[str, str]:
    """``LEFT=RIGHT`` split at the last ``=`` (a device never holds one; a regex may)."""
    if _OPTION_LIKE.match(value):
        raise RuleError(_("{option} {value}: looks like an option, not a rule (was the rule left out?)").format(
            option=option, value=quoted(value)))
    left, sep, right = value.rpartition("=")
    if not sep or not left.strip() or not right.strip():
        form, example = {"--max-on": ("DEV=N", "CPU=0, GPU:1=100 or ps/0=20"),
                         "--max-busy": ("DEV=PCT", "CPU=10 or GPU:0=95")}.get(option, ("REGEX=DEV", "^tower_0/=GPU:0"))
        raise RuleError(_("{option} {value}: give {form}, e.g. {example}").format(
            option=option, value=quoted(value), form=form, example=example))
    return left, right.strip()


def max_busy_rule(value: str) -> tuple[str, float]:
    """``DEV=PCT`` of --max-busy."""
    device, percent = split_rule("--max-busy", value)
    return timed.share_rule(" ".join(device.split()), percent)


def max_on_rule(value: str) -> tuple[str, int]:
    """``DEV=N`` of --max-on."""
    device, limit = split_rule("--max-on", value)
    if not limit.isascii() or not limit.isdigit():
        raise RuleError(_("{option} {value}: the limit must be a whole number, 0 or more").format(
            option="--max-on", value=quoted(value)))
    return " ".join(device.split()), int(limit)


def expect_rule(value: str) -> tuple[str, str]:
    """``REGEX=DEV`` of --expect (the regex is kept as typed, spaces included)."""
    return split_rule("--expect", value)


def rules_from(*, max_on: Mapping[str, int] | Iterable[str] | str | None = None,
               expect: Mapping[str, str] | Iterable[str] | str | None = None, no_fallback: bool = False,
               max_copy_bytes: int | None = None, ignore: Iterable[str] | str | None = None,
               ignore_op: Iterable[str] | str | None = None, include_plumbing: bool = False,
               allow_placement_errors: bool = False, max_copy_time: str | None = None,
               max_busy: Mapping[str, float] | Iterable[str] | str | None = None) -> Rules:
    """Rules from Python values (the pytest plugin, a config file's table): ``max_on`` as
    ``{"CPU": 0}`` or ``"CPU=0"`` strings, ``expect`` as ``{"^tower_0/": "GPU:0"}`` or
    ``"REGEX=DEV"`` strings, ``ignore`` and ``ignore_op`` as one string or several."""
    return Rules(max_on=_pairs(max_on, max_on_rule), expect=_pairs(expect, expect_rule),
                 no_fallback=_flag("no_fallback", no_fallback), max_copy_bytes=max_copy_bytes,
                 ignore=_strings("ignore", ignore), ignore_op=_strings("ignore_op", ignore_op),
                 include_plumbing=_flag("include_plumbing", include_plumbing),
                 allow_placement_errors=_flag("allow_placement_errors", allow_placement_errors),
                 max_copy_time=None if max_copy_time is None else timed.duration_rule("--max-copy-time", max_copy_time),
                 max_busy=tuple(timed.share_rule(d, n) for d, n in _pairs(max_busy, max_busy_rule)))


def _pairs(value: Any, parse: Callable[[str], tuple[Any, Any]]) -> tuple[tuple[Any, Any], ...]:
    if value is None:
        return ()
    if isinstance(value, Mapping):
        return tuple((str(k), v) for k, v in value.items())
    return tuple(parse(item) for item in _strings("rule", value))


def _strings(name: str, value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    items = (value,) if isinstance(value, str) else tuple(value)
    for item in items:
        if not isinstance(item, str):
            raise RuleError(_("{name}: give text, not {value}").format(name=name, value=repr(item)))
    return items


def _flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise RuleError(_("{name}: give true or false, not {value}").format(name=name, value=repr(value)))
    return value


# --- judging --------------------------------------------------------------------------------------

def leaves_out(rules: Rules) -> tuple[Callable[[Placement], bool], Callable[[Placement], bool]]:
    """Tests for the placements no rule judges: TensorFlow's plumbing (unless included), and what
    --ignore and --ignore-op name."""
    ignores = [regex_of("--ignore", regex) for regex in rules.ignore]
    ops = [op_matcher(op) for op in rules.ignore_op]

    def plumbing(p: Placement) -> bool:
        return not rules.include_plumbing and (p.op in JUDGED_PLUMBING or p.plumbing)

    def ignored(p: Placement) -> bool:
        return bool(p.node and any(regex.search(p.node) for regex in ignores)) or any(match(p.op) for match in ops)

    return plumbing, ignored


def judge(report: Report, rules: Rules, *, name: str = "the input") -> CheckResult:
    """Every rule against the report. RuleError (exit 2) when there are no rules, nothing to judge,
    or a rule this input cannot judge: --no-fallback on a log, --max-copy-bytes without copies."""
    if not rules.count:
        raise RuleError(_("no rules to check: give --max-on, --expect, --no-fallback, --max-copy-bytes, "
                          "--max-copy-time or --max-busy, or put them under [tool.placement.check] in pyproject.toml"))
    if not report.placements and report.counted:
        raise RuleError(_("{name} holds only counts per device (a `parse --summary` report): the rules judge each "
                          "placement, so save the report without --summary").format(name=name))
    if not report.placements and report.errors and not rules.allow_placement_errors:  # nothing could be placed:
        return CheckResult(rules=(*rules.described(), PLACEMENT_ERRORS_RULE),  # that fails the gate (exit 1)
                           failures=(_placement_errors(report),), placements=0, by_device=(), soft_fallbacks=None,
                           plumbing=0, ignored=0, errors=len(report.errors), config=rules.source, distinct=0)
    if not report.placements:
        raise RuleError(_("no placements found in {name}: nothing to check").format(name=name)
                        + (_(" (placement errors it reports: {count})").format(count=len(report.errors))
                           if report.errors else ""))
    if report.saved_filters:  # what the filters left out is still where the run put it
        said = " ".join(f"--{kind} {value}" for kind, value in report.saved_filters)
        raise RuleError(_("{name} was saved narrowed by {filters} ({count} of {total} placements): the rules judge a "
                          "whole run, so save the report without filters").format(
            name=name, filters=said, count=len(report.placements),
            total=report.unfiltered if report.unfiltered is not None else "?"))
    if report.run_error is not None:
        raise RuleError(_("{name} records a run that did not finish ({why}): its placements may be partial, so the "
                          "rules cannot be judged").format(name=name, why=report.run_error))
    requests = report.knows_requests
    if rules.no_fallback and not requests and report.log is not None:  # a run's report: its ops are all eager
        raise RuleError(_("--no-fallback cannot judge {name}: none of its placements says what it asked for "
                          "(no report knows the request of an eager op, nor of the single-op functions TensorFlow "
                          "wraps them in; a tf.function's or a Session's nodes have theirs)").format(name=name))
    if rules.no_fallback and not requests:
        raise RuleError(_("--no-fallback needs a report that knows what each op asked for (one saved by "
                          "`placement trace --json`, or by a run command's --json); {name} records only "
                          "where ops went").format(name=name))
    copied = None if rules.max_copy_bytes is None else copy_bytes(report, name)
    slow = timed.judge_times(report, rules.max_copy_time, rules.max_busy, _on, name)  # RuleError before judging
    plumbing, ignored = leaves_out(rules)
    kept = [p for p in report.placements if not plumbing(p)]
    judged = [p for p in kept if not ignored(p)]
    failures: list[RuleFailure] = []
    for device, limit in rules.max_on:  # distinct placements: the verdict holds at any step count
        on = _on(device)
        there = [p for p in judged if on(p.spec)]
        count = len(distinct(there))
        if count > limit:
            message = Message(messages.CHECK_MAX_ON, count=count, device=device, limit=limit) if count == len(there) \
                else Message(messages.CHECK_MAX_ON_DISTINCT, count=count, logged=len(there), device=device, limit=limit)
            failures.append(RuleFailure(f"--max-on {device}={limit}", message, _examples(there)))
    for regex, device in rules.expect:
        pattern, on = regex_of("--expect", regex), _on(device)
        named = [p for p in judged if p.node and pattern.search(p.node)]
        elsewhere = [p for p in named if not on(p.spec)]
        rule = f"--expect {regex}={device}"
        if not named:
            failures.append(RuleFailure(rule, Message(messages.CHECK_EXPECT_NONE, regex=regex)))
        elif elsewhere:
            failures.append(RuleFailure(rule, Message(messages.CHECK_EXPECT, count=len(elsewhere), total=len(named),
                                                      regex=regex, device=device), _examples(elsewhere)))
    fallbacks = [p for p in judged if p.status == SOFT_FALLBACK]
    moved = _xla_moved(report, rules)
    if rules.no_fallback and moved:  # XLA ran them in its cluster, away from their requests: never passed unseen
        failures.append(RuleFailure("--no-fallback", Message(
            messages.CHECK_FALLBACK_XLA, count=len(fallbacks), xla=len(moved)),
            (*_examples(fallbacks), *dict.fromkeys(moved))[:EXAMPLES]))
    elif rules.no_fallback and fallbacks:
        failures.append(RuleFailure("--no-fallback", Message(messages.CHECK_FALLBACK, count=len(fallbacks)),
                                    _examples(fallbacks)))
    if copied is not None and rules.max_copy_bytes is not None and copied > rules.max_copy_bytes:
        biggest = sorted(report.copies or (), key=lambda c: -(c.bytes or 0))
        failures.append(RuleFailure(f"--max-copy-bytes {rules.max_copy_bytes}", Message(
            messages.CHECK_COPY_BYTES, bytes=copied, limit=rules.max_copy_bytes),
            tuple(dict.fromkeys(english(c.tensor) for c in biggest))[:EXAMPLES]))
    failures.extend(slow)
    described = rules.described()
    if report.errors and not rules.allow_placement_errors:  # the graph could not be placed: no gate passes that
        described = (*described, PLACEMENT_ERRORS_RULE)
        failures.append(_placement_errors(report))
    by_device = Counter(p.canonical for p in judged)
    unique = distinct(judged)
    unknown = Counter(_unknown_kind(p) for p in judged if p.status == LOGGED) if requests else Counter()
    return CheckResult(rules=described, failures=tuple(failures), placements=len(judged),
                       by_device=_most_first(by_device),
                       soft_fallbacks=len(fallbacks) if requests else None,
                       plumbing_fallbacks=sum(p.status == SOFT_FALLBACK for p in report.placements if plumbing(p)),
                       plumbing=len(report.placements) - len(kept), ignored=len(kept) - len(judged),
                       errors=len(report.errors), config=rules.source,
                       unknown_requests=sum(unknown.values()), unknown_kinds=tuple(unknown.most_common()),
                       distinct=len(unique), distinct_by_device=_most_first(Counter(k[-1] for k in unique)),
                       repeats=repeats(judged, unique), xla_moved=len(moved))


def _placement_errors(report: Report) -> RuleFailure:
    return RuleFailure(PLACEMENT_ERRORS_RULE, Message(messages.CHECK_PLACEMENT_ERRORS, count=len(report.errors)),
                       tuple(dict.fromkeys(e.node or e.kind for e in report.errors))[:EXAMPLES])


Identity = tuple[bool, str | None, str | None, str | None, str]


def distinct(placements: Iterable[Placement]) -> set[Identity]:
    """Each placement once: (eager, graph, node, op type, device), the graph and an eager call op's
    function named as `diff` names them (``__inference_f_10`` is ``f``: compare.py's identity). An
    eager op has no name and is logged each time it runs; a function's or a Session's node is logged
    each time its graph is placed (the same MatMul of three tf.functions is three placements; a
    Session's graph has no name in the log, so two Sessions' same-named nodes are one): a step count
    changes how many lines there are, never how many of these."""
    placements = list(placements)
    traces = trace_counters([p.graph for p in placements] + [p.op for p in placements if p.kind == PlacementKind.EAGER])
    return {(p.kind == PlacementKind.EAGER, function_key(p.graph, traces), p.node,
             function_key(p.op, traces) if p.kind == PlacementKind.EAGER else p.op, p.canonical) for p in placements}


def repeats(placements: Iterable[Placement], unique: set[Identity]) -> tuple[tuple[str, int], ...]:
    """The logged placements beyond the distinct ones, by kind: "eager" (an eager op each time it
    runs), "graph" (a node each time its graph is placed)."""
    placements = list(placements)
    eager = sum(p.kind == PlacementKind.EAGER for p in placements) - sum(k[0] for k in unique)
    graph = len(placements) - len(unique) - eager
    return tuple((kind, n) for kind, n in (("eager", eager), ("graph", graph)) if n)


def _unknown_kind(p: Placement) -> str:
    """What a placement whose request no record says is (check's summary says it in words)."""
    if p.op == "_EagerConst":
        return "eager_const"  # made by TensorFlow's C++ from a Python value: no op callback sees it
    if p.kind == PlacementKind.EAGER:
        return "eager"  # an eager op no record was joined to (one that failed after it was logged, say)
    if p.node and p.node == p.op and "/" not in p.node:
        return "wrapper"  # a node of the single-op function TF wraps an eager op in
    return "graph"  # a node no recorded graph has: TensorFlow's own (lowered control flow, inlining)


def _xla_moved(report: Report, rules: Rules) -> list[str]:
    """The nodes of XLA-compiled functions that asked for a device their cluster did not run on, less
    what --ignore and --ignore-op leave out."""
    ignores = [regex_of("--ignore", regex) for regex in rules.ignore]
    ops = [op_matcher(op) for op in rules.ignore_op]
    return [op.node for c in report.compiled or () for op in c.moved
            if not any(regex.search(op.node) for regex in ignores) and not any(match(op.op) for match in ops)]


def devices_on_nothing(report: Report, rules: Rules) -> tuple[str, ...]:
    """The devices rules name that no placement of the report is on: a misspelt one (``GUP``) would
    let its rule hold whatever the run did, so the command says which they are."""
    named = dict.fromkeys([device for device, _limit in rules.max_on] + [device for _regex, device in rules.expect])
    specs = {p.spec for p in report.placements}
    timed = {d.device.spec for d in report.cost.devices if d.device.spec is not None} if report.cost else set()
    return (*(d for d in named if not any(map(_on(d), specs))),
            *(d for d, _limit in rules.max_busy if d not in named and not any(map(_on(d), timed))))


def copy_bytes(report: Report, name: str) -> int:
    """Bytes copied between devices per step; RuleError when the report has no copies or not their sizes."""
    if report.copies is None:
        raise RuleError(_("--max-copy-bytes needs a report with the copies between devices (one saved by "
                          "`placement train --copies --json` or `placement mirrored --copies --json`); "
                          "{name} has none").format(name=name))
    unknown = sum(c.bytes is None for c in report.copies)
    if unknown:
        raise RuleError(_("--max-copy-bytes: {name} does not say how big {count} of its {total} copies are "
                          "(`trace --copies` lists copies without their sizes; `train` and `mirrored` "
                          "--copies record them)").format(name=name, count=unknown, total=len(report.copies)))
    return sum(c.bytes or 0 for c in report.copies)


def _on(device: str) -> Callable[[DeviceSpec], bool]:
    """A test for devices, asked once per device, not once per placement."""
    matches = device_matcher(device)
    seen: dict[DeviceSpec, bool] = {}

    def on(spec: DeviceSpec) -> bool:
        if spec not in seen:
            seen[spec] = matches(spec)
        return seen[spec]

    return on


def _examples(placements: Iterable[Placement]) -> tuple[str, ...]:
    """The first few distinct nodes (an eager op, which has none: its op type); a tf.function's node
    behind its function, named as `diff` names it (two functions' MatMuls are two nodes)."""
    placements = list(placements)
    traces = trace_counters([p.graph for p in placements])
    found: dict[str, None] = {}
    for p in placements:
        graph = function_key(p.graph, traces) if p.node and p.graph else None
        found.setdefault(f"{graph}: {p.node}" if graph else p.node or p.op or "?")
        if len(found) == EXAMPLES:
            break
    return tuple(found)


def failure_text(result: CheckResult) -> str:
    """The failed rules as an AssertionError says them: one line each, with its example nodes."""
    lines = [f"placement check failed: {len(result.failures)} of {len(result.rules)} rules"]
    for f in result.failures:
        examples = f" (e.g. {', '.join(f.examples)})" if f.examples else ""
        lines.append(f"  {f.rule}: {f.message}{examples}")
    return "\n".join(lines)


def assert_holds(report: Report, *, name: str = "the report", **rules: Any) -> CheckResult:
    """The Python API's check: the rules (``rules_from``'s arguments) against ``report``;
    AssertionError naming each failed rule and its nodes, RuleError (a ValueError) for a rule that
    is malformed or that this report cannot judge."""
    __tracebackhide__ = True  # pytest shows the user's line that called check(), not this one
    result = judge(report, rules_from(**rules), name=name)
    if not result.passed:
        raise AssertionError(failure_text(result))
    return result


def _most_first(counts: Counter[str]) -> tuple[tuple[str, int], ...]:
    """Devices by count, most first, ties by task and device (worker/2 before worker/10): the same input says
    the same line whatever order the placements came in (a log and its saved report; a set's order, which
    changes from run to run)."""
    def order(item: tuple[str, int]) -> tuple[Any, ...]:
        return (-item[1], *(try_parse(item[0]) or DeviceSpec()).order, item[0])

    return tuple(sorted(counts.items(), key=order))
