"""Timed steps (--time): warm-up, the same steps without and with TensorFlow's profiler, and the sizes
of the tensors a profile's copies carry, read from the graphs that ran."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from placement_cli.logparse.functions import function_identity
from placement_cli.model.cost import Profile
from placement_cli.runtime import profiler
from placement_cli.runtime.stepstats import tensor_bytes

Sizes = Callable[[str | None, str, str], int | None]


def timed_steps(tf: Any, step: Callable[[], Any], *, steps: int, warmup: int,
                sizes: Sizes | None = None) -> tuple[Profile | None, str | None]:
    """``step`` run ``warmup`` more times (the run that logged the placements was the first), then
    ``steps`` times under the profiler, each marked as a step, then ``steps`` times plain (their wall
    times: what the profiler's own cost is measured against; after the profiled ones, which come before
    TensorFlow stops tracing the kernels it measured as cheap). The profile, or why none came."""
    for _ in range(max(0, warmup - 1)):
        step()
    with profiler.profiling(tf) as found:
        if found.error is None:
            for i in range(steps):
                with tf.profiler.experimental.Trace(profiler.STEP_MARK, step_num=i, _r=1):
                    step()
    profile, error = profiler.collect(found, warmup=warmup, sizes=sizes)  # at once: its files gone before more runs
    if profile is None:
        return None, error
    plain = []
    for _ in range(steps):
        began = time.perf_counter()
        step()
        plain.append((time.perf_counter() - began) * 1e6)
    return replace(profile, plain_walls=tuple(plain)), None


def graph_sizes(tf: Any, graphs: Callable[[], Iterable[Any]]) -> Sizes:
    """A copy's bytes from the graphs that ran: the consumer's inputs that the producer made, where they
    have one static shape and a fixed-size type (a function's graph where its name says which: a
    tf.function's graph is named as the Python function; else any graph holding both nodes)."""
    def sizes(graph: str | None, producer: str, consumer: str) -> int | None:
        wanted = None if graph is None else function_identity(graph)
        read: set[int | None] = set()  # what the consumer reads of the producer
        made: set[int | None] = set()  # what the producer makes (a grappler-fused consumer reads other inputs)
        for g in graphs():
            name = getattr(g, "name", None)
            if wanted is not None and isinstance(name, str) and name not in (wanted, graph):
                continue
            try:
                op = g.get_operation_by_name(consumer)
                read.update(_bytes(tf, t) for t in op.inputs if t.op.name == producer)
            except (KeyError, ValueError):
                pass
            try:
                made.update(_bytes(tf, t) for t in g.get_operation_by_name(producer).outputs)
            except (KeyError, ValueError):
                pass
        found = read or made  # every output alike (a split's): that size
        return found.pop() if len(found) == 1 else None

    return sizes


def _bytes(tf: Any, tensor: Any) -> int | None:
    shape = tensor.shape
    dims = tuple(int(d) for d in shape.as_list()) if shape.rank is not None and shape.is_fully_defined() else None
    return tensor_bytes(tf, tensor.dtype, dims)


class StepTimer:
    """A loop's own steps timed (a cluster worker's): the profiler on from step ``warmup`` for ``steps``
    steps, each marked; the loop's other steps run as they would."""

    def __init__(self, tf: Any, warmup: int, steps: int, sizes: Sizes | None = None) -> None:
        self.tf, self.warmup, self.steps, self.sizes = tf, warmup, steps, sizes
        self.session: Any = None  # the profiling context while it runs
        self.found: Any = None
        self.profile: Profile | None = None
        self.error: str | None = None

    @contextmanager
    def step(self, index: int) -> Iterator[None]:
        """Step ``index`` (from 0) of the loop: measured when it falls in the window."""
        if index == self.warmup and self.session is None and self.profile is None and self.error is None:
            self.session = profiler.profiling(self.tf)
            self.found = self.session.__enter__()
            if self.found.error is not None:
                self.error = self.found.error
                self._stop()
        if self.session is None or not self.warmup <= index < self.warmup + self.steps:
            yield
            return
        with self.tf.profiler.experimental.Trace(profiler.STEP_MARK, step_num=index, _r=1):
            yield
        if index == self.warmup + self.steps - 1:
            self.finish()

    def _stop(self) -> None:
        session, self.session = self.session, None
        if session is not None:
            session.__exit__(None, None, None)

    def finish(self) -> None:
        """The profile of the steps measured so far (also when the loop ended early)."""
        if self.session is None:
            return
        self._stop()
        self.profile, self.error = profiler.collect(self.found, warmup=self.warmup, steps=self.steps, sizes=self.sizes)
