"""The rules on time, judged against a timed report (--time): the copies' time per step, a device's share
of the step. Pure, no TensorFlow."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from placement_cli import messages
from placement_cli.devices import DeviceSpec
from placement_cli.exceptions import RuleError
from placement_cli.i18n import Message, _
from placement_cli.messages import quoted
from placement_cli.model import Report, RuleFailure

if TYPE_CHECKING:
    from placement_cli.model.cost import Cost

_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(us|\u00b5s|\u03bcs|ms|s)\s*$", re.IGNORECASE | re.ASCII)
_UNITS = {"us": 1.0, "\u00b5s": 1.0, "\u03bcs": 1.0, "ms": 1000.0, "s": 1_000_000.0}  # micro sign, Greek mu
EXAMPLES = 5


def duration_rule(option: str, value: object) -> float:
    """``2ms``, ``500us``, ``0.5s``: microseconds. A unit is required (a bare number could mean either)."""
    if isinstance(value, str) and value.strip() in ("0", "0.0"):  # nothing at all needs no unit
        return 0.0
    m = _DURATION.match(value) if isinstance(value, str) else None
    if m is None:
        raise RuleError(_("{option} {value}: give a time with its unit: 500us, 2ms or 0.5s").format(
            option=option, value=quoted(str(value))))
    found = float(m.group(1)) * _UNITS[m.group(2).lower()]
    if not math.isfinite(found):
        raise RuleError(_("{option} {value}: give a time with its unit: 500us, 2ms or 0.5s").format(
            option=option, value=quoted(str(value))))
    return found


def share_rule(device: str, percent: object) -> tuple[str, float]:
    """``DEV=PCT`` of --max-busy, the percent a number from 0 to 100."""
    text = str(percent).strip().rstrip("%")
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or not 0 <= value <= 100 or isinstance(percent, bool):
        raise RuleError(_("{option} {value}: the share must be a percent from 0 to 100").format(
            option="--max-busy", value=quoted(f"{device}={percent}")))
    return device, value + 0.0  # -0 is 0


def _cost(report: Report, option: str, name: str) -> Cost:
    if report.cost is None:
        raise RuleError(_("{option} needs a timed report (one saved by a run command's or trace's --time --json); "
                          "{name} has no times").format(option=option, name=name))
    if report.cost.steps == 0:
        raise RuleError(_("{option}: {name} measured no step").format(option=option, name=name))
    return report.cost


def judge_times(report: Report, max_copy_time: float | None, max_busy: tuple[tuple[str, float], ...],
                on: Callable[[str], Callable[[DeviceSpec], bool]], name: str) -> list[RuleFailure]:
    """The failures of the rules on time (none asked: none)."""
    failures: list[RuleFailure] = []
    if max_copy_time is not None:
        cost = _cost(report, "--max-copy-time", name)
        spent = sum(t.time for t in cost.links)
        if spent > max_copy_time:
            slowest = sorted(cost.copies, key=lambda c: -c.time.mean * c.calls)
            failures.append(RuleFailure(f"--max-copy-time {_shown(max_copy_time)}", Message(
                messages.CHECK_COPY_TIME, time=_shown(spent), limit=_shown(max_copy_time)),
                tuple(dict.fromkeys(f"{c.producer} -> {c.consumer}" for c in slowest))[:EXAMPLES]))
    for device, percent in max_busy:
        cost = _cost(report, "--max-busy", name)
        matches = on(device)
        for d in cost.devices:
            if d.device.spec is None or not matches(d.device.spec) or d.share * 100 <= percent:
                continue
            busiest = [o.node for o in cost.ops if o.device == d.device]
            failures.append(RuleFailure(f"--max-busy {device}={percent:g}", Message(
                messages.CHECK_BUSY, device=d.device.short, share=f"{d.share:.0%}", limit=f"{percent:g}%"),
                tuple(busiest[:EXAMPLES])))
    return failures


def _shown(us: float) -> str:
    if us >= 1_000_000:
        return f"{us / 1e6:g}s"
    if us >= 1000:
        return f"{us / 1000:g}ms"
    return f"{us:g}us"


def described(max_copy_time: float | None, max_busy: tuple[tuple[str, float], ...]) -> tuple[str, ...]:
    return (*(() if max_copy_time is None else (f"--max-copy-time {_shown(max_copy_time)}",)),
            *(f"--max-busy {device}={percent:g}" for device, percent in max_busy))
