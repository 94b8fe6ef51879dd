"""`trace --time` in the script's process: TensorFlow's profiler on from the moment TensorFlow is imported
to the script's end, then read. A script that starts the profiler itself (``tf.profiler.experimental.start``,
Keras's TensorBoard callback with ``profile_batch``) gets it: placement's session is stopped and read
first, so the times cover what ran before, and the report says so."""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import Any

from placement_cli import costs
from placement_cli.model import Report
from placement_cli.model.cost import Profile
from placement_cli.runtime import profiler
from placement_cli.runtime.timing import graph_sizes


class Timing:
    """One profiler session over the script, read once (at exit, or when the script wants the profiler)."""

    def __init__(self, tf: Any, warmup: int, graphs: Any) -> None:
        self.tf = tf
        self.warmup = warmup
        self.graphs = graphs  # () -> the graphs recorded so far (a copy's size is read from them)
        self.session: profiler.Profiling | None = None
        self.session_cm: Any = None
        self.found: Profile | None = None
        self.error: str | None = None
        self.own_profiler = False  # the script started the profiler itself: the times stop there
        self.undo: Any = None

    def start(self) -> None:
        self.session_cm = profiler.profiling(self.tf)
        self.session = self.session_cm.__enter__()
        if self.session.error is not None:
            self.error = self.session.error
            self._close()
            return
        module = sys.modules.get("tensorflow.python.profiler.profiler_v2")
        original = getattr(module, "start", None)
        if module is None or original is None:
            return

        def start(*args: Any, **kwargs: Any) -> Any:  # the script's own profiler: ours makes way
            self.own_profiler = True
            self.finish()
            return original(*args, **kwargs)

        module.start = start  # type: ignore[attr-defined]

        def undo() -> None:
            if getattr(module, "start", None) is start:
                module.start = original  # type: ignore[attr-defined]

        self.undo = undo

    def _close(self) -> None:
        if self.session_cm is not None:
            cm, self.session_cm = self.session_cm, None
            cm.__exit__(None, None, None)

    def finish(self) -> None:
        """Stop and read the profiler (once): the profile, or why there is none."""
        if self.undo is not None:
            self.undo()
            self.undo = None
        if self.session_cm is None or self.session is None:
            return
        self._close()
        if self.session.error is not None:
            self.error = self.session.error
            return
        try:
            found = profiler.read(self.session, warmup=self.warmup, sizes=graph_sizes(self.tf, self.graphs))
        except Exception as exc:  # noqa: BLE001 - the script's outcome matters more than its times
            self.error = f"{type(exc).__name__}: {exc}"
            return
        if found is None:
            self.error = "TensorFlow's profiler wrote no profile"
            return
        self.found = found

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
