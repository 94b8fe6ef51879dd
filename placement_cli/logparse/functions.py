"""Which tf.function a placer line belongs to.

TensorFlow places a function's graph when the function is first called: the placer lines of its body
come just before the ``Executing op __inference_NAME_N`` line of that call, written by the same thread
(absl's prefix names the thread; TF 1.x glog's names none, and such a log is read as one thread). Placer
lines whose thread next executes a plain op belong to the single-op function an eager op is wrapped in;
lines whose thread executes nothing after them belong to a Session's graph: neither is a tf.function.

``N`` is TensorFlow's global trace counter, not the function's identity: ``function_identity`` drops it,
and ``function_key`` tells the traces of one function (a retrace for a new input signature) apart by their
order. TensorFlow names a function graph ``PREFIX + NAME + "_" + counter`` (python/eager/
polymorphic_function/concrete_function.py): ``__inference_`` for a call without gradient, ``__forward_`` and
``__backward_`` for the pair it builds to record a gradient; each graph it runs is wrapped again as
``__inference_`` + its name + a counter, so a backward function runs as ``__inference___backward_f_18_31``
(``f``'s gradient, whatever the counters) and names nest.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterable

from placement_cli.logparse import glog

PREFIXES = (b"__inference_", b"__forward_", b"__backward_")  # how TensorFlow names a tf.function's graphs
SEPARATOR = b"\x00"  # between a function's name and a placer record in a comparison's tally
_THREAD = re.compile(glog.THREAD)
# one layer of TensorFlow's naming: a prefix, the name it wraps, the trace counter
_COUNTER = re.compile(r"^__(inference|forward|backward)_(.+)_(\d+)$", re.DOTALL)


def thread_of(text: bytes, pos: int) -> bytes | None:
    """The id of the thread that wrote the line holding ``pos`` (None where its prefix names none)."""
    m = _THREAD.match(text, text.rfind(b"\n", 0, pos) + 1)
    return m.group(1) if m else None


def function_of(op: bytes) -> bytes | None:
    """The function an executed op runs, where it is a tf.function."""
    return op if op.startswith(PREFIXES) and _COUNTER.match(op.decode("utf-8", "replace")) else None


def _identity(name: str) -> tuple[str, int] | None:
    m = _COUNTER.match(name)
    if m is None:
        return None
    kind, inner, counter = m.groups()
    inner = function_identity(inner)
    return (inner if kind == "inference" else f"__{kind}_{inner}"), int(counter)


def function_identity(name: str) -> str:
    """A function's identity across runs: its name as TensorFlow gave it, every trace counter dropped
    (``__inference_step_17`` is ``step``; ``__forward_f_30`` is ``__forward_f``; ``__inference___backward_f_18_31``
    is ``__backward_f``); a name TensorFlow did not make is itself."""
    found = _identity(name)
    return name if found is None else found[0]


class Functions:
    """Placer lines waiting for their thread's next executed op, which says whose they are."""

    def __init__(self, mid_file: bool = False) -> None:
        self.pending: dict[bytes | None, list[object]] = {}
        # A parser that starts mid-file: each thread's lines before its first executed op, and that op's
        # function (they continue a block the range before began: ``merge`` settles them together).
        self.leading: dict[bytes | None, tuple[list[object], bytes | None]] | None = {} if mid_file else None

    def placed(self, thread: bytes | None, item: object) -> None:
        found = self.pending.get(thread)
        if found is None:
            self.pending[thread] = [item]
        else:
            found.append(item)

    def executed(self, thread: bytes | None, op: bytes) -> tuple[list[object], bytes | None] | None:
        """A thread executed ``op``: the lines waiting in that thread and their function, where settled."""
        items = self.pending.pop(thread, [])
        function = function_of(op)
        if self.leading is not None and thread not in self.leading:
            self.leading[thread] = (items, function)
            return None
        return (items, function) if items else None

    def close(self) -> Iterable[tuple[list[object], bytes | None]]:
        """The end of the text: lines still waiting belong to no function."""
        pending, self.pending = self.pending, {}
        return ((items, None) for items in pending.values())

    def merge(self, tail: Functions) -> Iterable[tuple[list[object], bytes | None]]:
        """This range's waiting lines settled by the next range's first executed op of their thread
        (``tail`` was read to the end of the text, so what waits in it belongs to no function)."""
        leading = tail.leading or {}
        for thread, items in self.pending.items():
            more, function = leading.get(thread, ([], None))
            yield items + more, function
        for thread, (items, function) in leading.items():
            if thread not in self.pending and items:
                yield items, function
        self.pending = {}


def function_key(function: str | None, traces: dict[str, list[int]] | None = None) -> str | None:
    """A function's identity across runs: its name without TensorFlow's trace counter, and, where the
    log holds several traces of it (``traces``: each name's counters), ``#2``, ``#3`` ... in trace order."""
    if function is None:
        return None
    found = _identity(function)
    if found is None:
        return function
    name, number = found
    if traces:
        counters = traces.get(name) or []  # sorted: found by bisection (a retraced function has thousands)
        index = bisect_left(counters, number)
        if index and index < len(counters) and counters[index] == number:
            return f"{name}#{index + 1}"
    return name


def trace_counters(functions: Iterable[str | None]) -> dict[str, list[int]]:
    """Each function name's trace counters, in order (what ``function_key`` numbers its traces by)."""
    found: dict[str, set[int]] = {}
    for function in functions:
        identity = _identity(function or "")
        if identity is not None:
            found.setdefault(identity[0], set()).add(identity[1])
    return {name: sorted(numbers) for name, numbers in found.items()}
