"""`trace --time` and `capture(time=True)` in the program's process: TensorFlow's profiler on from the
moment TensorFlow is imported (or the block starts) to the program's end (or the block's), then read.

TensorFlow runs one profiler session at a time. A program that starts its own (``tf.profiler.experimental
.start``, the ``Profile`` context, Keras's TensorBoard callback with ``profile_batch``) gets it: while
placement's session runs, ``start`` is placement's wrapper wherever TensorFlow's modules hold it, which
stops and reads placement's session first (the times then cover what ran before, and the report says
so), then starts the program's; ``stop`` without a program's session raises what TensorFlow raises."""

from __future__ import annotations

import numbers
import sys
from dataclasses import replace
from typing import Any

from placement_cli import costs
from placement_cli.i18n import _
from placement_cli.model import Placement, Report
from placement_cli.model.caps import MAX_STEPS, MAX_WARMUP
from placement_cli.model.cost import Cost, Profile
from placement_cli.runtime import profiler
from placement_cli.runtime.timing import graph_sizes


def timing_settings(warmup: object, steps: object) -> tuple[int, int]:
    """capture()'s warmup= and steps=, checked as the command line's --warmup and --time-steps are."""
    found = []
    for name, value, low, high in (("warmup", warmup, 0, MAX_WARMUP), ("steps", steps, 1, MAX_STEPS)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not low <= int(value) <= high:
            raise ValueError(f"capture({name}=...): a whole number from {low} to {high}, not {value!r}")
        found.append(int(value))
    return found[0], found[1]


PLACEMENTS = "_placement_timing"  # marks the wrappers a running Timing put in TensorFlow's place


class Timing:
    """One profiler session over the program, read once (at its end, or when it wants the profiler)."""

    def __init__(self, tf: Any, warmup: int, steps: int, graphs: Any, logdir: str | None = None) -> None:
        self.tf = tf
        self.warmup, self.steps = warmup, steps
        self.graphs = graphs  # () -> the graphs recorded so far (a copy's size is read from them)
        self.logdir = logdir
        self.session: profiler.Profiling | None = None
        self.session_cm: Any = None
        self.found: Profile | None = None
        self.error: str | None = None
        self.own_profiler = False  # the program started the profiler itself: the times stop there
        self.patched: list[tuple[Any, str, Any]] = []  # (module, name, TensorFlow's function)
        self.calls: dict[str, int] = {}  # each tf.function's calls so far (watch)
        self.finishing = False

    def start(self, recorder: Any = None) -> None:
        """The profiler on; ``recorder``'s op callback tells it each call, so it stops once the steps are done."""
        if recorder is not None:
            recorder.eager.watch = self.watch
        original_start = self.tf.profiler.experimental.start
        original_stop = self.tf.profiler.experimental.stop
        if getattr(original_start, PLACEMENTS, False):  # a timed run around this one (trace --time, capture)
            self.error = "TensorFlow's profiler was already running (another timed run in this process)"
            return
        self.session_cm = profiler.profiling(self.tf, original_start, original_stop, self.logdir)
        self.session = self.session_cm.__enter__()
        if self.session.error is not None:
            self.error = self.session.error
            self._close()
            return

        def start(*args: Any, **kwargs: Any) -> Any:  # the program's own profiler: placement's makes way
            self.own_profiler = True
            self.finish()
            return original_start(*args, **kwargs)

        def stop(*args: Any, **kwargs: Any) -> Any:  # none of the program's runs: TensorFlow's own refusal
            raise self.tf.errors.UnavailableError(None, None, "Cannot export profiling results. No profiler is running.")

        start.__dict__[PLACEMENTS] = stop.__dict__[PLACEMENTS] = True
        for module in list(sys.modules.values()):  # wherever TensorFlow's API holds them (tf.profiler.experimental, ...)
            for name, original, wrapper in (("start", original_start, start), ("stop", original_stop, stop)):
                if getattr(module, name, None) is original and getattr(module, "__name__", "").startswith("tensorflow"):
                    setattr(module, name, wrapper)
                    self.patched.append((module, name, original))

    def watch(self, op_type: Any) -> None:
        """An eager op ran (the recorder's op callback): a tf.function's call counts; once a function ran
        as often as the times need (the warm-up, the steps, and the call that closes the last), the
        profiler stops and is read, so a long program's profile never grows past what is measured."""
        if self.session_cm is None:  # read already (or never started): every later op passes at once
            return
        name = op_type.decode("utf-8", "replace") if isinstance(op_type, bytes) else str(op_type)
        if not name.startswith(("__inference_", "__forward_", "__backward_")):
            return
        self.calls[name] = calls = self.calls.get(name, 0) + 1
        if calls > self.warmup + self.steps and not self.finishing:  # after the call that closes the last step
            self.finishing = True
            self.finish()

    def _close(self) -> None:
        if self.session_cm is not None:
            cm, self.session_cm = self.session_cm, None
            cm.__exit__(None, None, None)

    def finish(self) -> None:
        """Stop and read the profiler (once): the profile, or why there is none."""
        for module, name, original in self.patched:
            setattr(module, name, original)
        self.patched.clear()
        if self.session_cm is None or self.session is None:
            return
        self._close()
        try:
            self.found, self.error = profiler.collect(self.session, warmup=self.warmup, steps=self.steps,
                                                      sizes=graph_sizes(self.tf, self.graphs))
        except KeyboardInterrupt:  # Ctrl-C after the program ended: no times, and no traceback of placement's
            self.error = "interrupted while the profile was read"
        except Exception as exc:  # noqa: BLE001 - the program's outcome matters more than its times
            self.error = f"{type(exc).__name__}: {exc}"

    def report(self, report: Report, notes: list[str]) -> Report:
        """capture(time=True): the block's profile joined with its placements, or why there are no times."""
        if self.own_profiler:
            notes.append("The block started TensorFlow's profiler itself: the times cover what ran before it did.")
        if self.found is None:
            return replace(report, timing_error=self.error or "TensorFlow's profiler wrote no profile")
        return replace(report, cost=costs.build(self.found, report.placements))

    def to_dict(self) -> dict[str, Any]:
        return {"profile": None if self.found is None else self.found.to_dict(), "timing_error": self.error,
                "own_profiler": self.own_profiler}


def timed_cost(data: dict[str, Any] | None, placements: tuple[Placement, ...]) -> tuple[Cost | None, str | None]:
    """--time: the child's profile (its facts document) joined with the placements, or why there are no times."""
    if data is None:
        return None, _("the script sent no profile (it never imported TensorFlow, or it was killed)")
    error = data.get("timing_error")
    found = data.get("profile")
    if not isinstance(found, dict):
        return None, str(error) if error else _("the script sent no profile")
    try:
        cost = costs.build(Profile.from_dict(found), placements)
    except (KeyError, TypeError, ValueError) as exc:
        return None, f"{type(exc).__name__}: {exc}"
    if data.get("own_profiler") is True:
        return cost, _("the script started TensorFlow's profiler itself: the times cover what ran before it did")
    return cost, None
