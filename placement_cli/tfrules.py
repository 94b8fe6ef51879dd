"""TensorFlow's own rules that put an op where it did not ask, whatever soft placement says: an eager op
that takes a resource runs where the resource lives (MaybePinToResourceDevice, eager/placement_utils.cc);
a tf.function compiled by XLA (jit_compile=True) runs its whole body in one XLA cluster on the call's
device, and TensorFlow logs only the call. And how TensorFlow names what its placer logs of a tf.function:
its traces (``__inference_NAME_N``), its arguments. No TensorFlow here: reasons from what was recorded."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from placement_cli import messages
from placement_cli.devices import DeviceName, device_name, try_parse
from placement_cli.i18n import Message
from placement_cli.model import Compiled, CompiledOp, Placement
from placement_cli.model.ops import PLUMBING_OPS  # a function's arguments and results: no ops of the program's


@dataclass(frozen=True)
class EagerRecord:
    """What the op callback recorded as one eager op ran."""

    op: str
    requested: str  # the device scope it ran in ('' for none)
    resource_device: str = ""  # the device of its first resource input ('' for none)
    made_by: str = ""  # the op type that made that resource (VarHandleOp, AnonymousIteratorV3; '' unknown)
    resource: str = ""  # that resource's name (a variable's; '' unknown)


def resource_reason(record: EagerRecord, device: str) -> Message:
    """Why an eager op sits with its resource: the variable named where it is known."""
    if record.made_by == "VarHandleOp" and record.resource:
        return Message(messages.WITH_VARIABLE, name=record.resource, device=device)
    if record.made_by:
        return Message(messages.WITH_RESOURCE_KIND, kind=record.made_by, device=device)
    return Message(messages.WITH_RESOURCE, device=device)


def session_devices(data: Any, count: int) -> tuple[tuple[str, ...] | None, ...]:
    """``graph_devices`` as written, one per graph; () where it is not there or does not fit the graphs."""
    if not isinstance(data, list) or len(data) != count:
        return ()
    return tuple(tuple(map(str, devices)) if isinstance(devices, list) else None for devices in data)


def call_functions(data: Any) -> tuple[dict[str, str], ...]:
    """``graph_calls`` as written: each recorded graph's call nodes -> the function each calls."""
    if not isinstance(data, list):
        return ()
    return tuple({str(k): str(v) for k, v in calls.items()} if isinstance(calls, dict) else {} for calls in data)


def compiled_bodies(data: Any) -> dict[str, tuple[tuple[str, str, str], ...]] | None:
    """``xla_compiled`` as written: function -> its body's [node, op type, device field]s."""
    if not isinstance(data, dict):
        return None
    return {str(name): tuple((str(n[0]), str(n[1]), str(n[2])) for n in body if isinstance(n, list) and len(n) == 3)
            for name, body in data.items() if isinstance(body, list)}


Bodies = Mapping[str, tuple[tuple[str, str, str], ...]]  # function -> its body's (node, op type, device field)


def compiled_calls(placements: Iterable[Placement], compiled: Bodies | None,
                   lines: Mapping[int, str]) -> tuple[Compiled, ...] | None:
    """The calls of XLA-compiled functions (``lines``: line -> the function it calls, why.xla_lines),
    one entry per function and device, with the body's nodes and which of them asked for a device the
    cluster did not run on (None: the run did not record which functions XLA compiled)."""
    if compiled is None:
        return None
    found: dict[tuple[str, str], list[Placement]] = {}
    for p in placements:
        if p.line in lines and lines[p.line] in compiled:
            found.setdefault((lines[p.line], p.canonical), []).append(p)
    result = []
    for (function, device), calls in found.items():
        spec = calls[0].spec
        ops = []
        for node, op, requested in compiled[function]:
            asked = device_name(requested or None)
            want = asked.request if asked else None
            ops.append(CompiledOp(node=node, op=op or None, requested=asked,
                                  moved=want is not None and not want.satisfied_by(spec)))
        result.append(Compiled(function=function, device=DeviceName(device), line=calls[0].line, calls=len(calls),
                               ops=tuple(ops)))
    return tuple(result)


def compiled_reason(p: Placement, body: tuple[tuple[str, str, str], ...]) -> Message:
    """What an XLA-compiled function's call line hides: its body, and the requests XLA did not keep."""
    moved = []
    for node, op, requested in body:
        want = try_parse(requested) if requested else None
        if want is not None and not want.satisfied_by(p.spec) and op not in PLUMBING_OPS:
            moved.append(f"{node} ({op}) {want.short}")
    count = sum(op not in PLUMBING_OPS for _node, op, _requested in body)
    if not moved:
        return Message(messages.XLA_CLUSTER, count=count, device=p.short)
    shown = ", ".join(moved[:3]) + (", ..." if len(moved) > 3 else "")
    return Message(messages.XLA_MOVED, count=count, device=p.short, moved=shown)


_TRACE = re.compile(r"__inference_(.+)_(\d+)")


def function_traces(placements: tuple[Placement, ...], graph_names: tuple[str | None, ...]) -> dict[str | None, frozenset[int]]:
    """For each tf.function the placer lines name (``__inference_NAME_N``), the recorded graphs it can be:
    those named NAME; the one of its trace where the log's traces of NAME and the recorded graphs named
    NAME are as many (both in trace order: N is TensorFlow's trace counter)."""
    counters: dict[str, set[int]] = {}
    for function in {p.graph for p in placements if p.graph}:
        m = _TRACE.fullmatch(function or "")
        if m:
            counters.setdefault(m.group(1), set()).add(int(m.group(2)))
    found: dict[str | None, frozenset[int]] = {}
    for name, numbers in counters.items():
        candidates = [i for i, n in enumerate(graph_names) if n == name]
        ordered = sorted(numbers)
        for number in ordered:
            one = len(candidates) == len(ordered)
            found[f"__inference_{name}_{number}"] = frozenset(
                (candidates[ordered.index(number)],) if one else candidates)
    return found


_NOT_ALNUM = re.compile(r"[^a-z0-9]")
_LETTER = re.compile(r"[a-z]")


def arg_name(node: str) -> str:
    """The name TensorFlow gives a function's argument made of placeholder ``node``, as its placer lines
    show it (graph_to_functiondef.cc, NodeNameMapping::Normalize): lower case, each other character but
    a letter or digit ``_``, from its first letter on; ``unknown`` without one. One that would repeat an
    earlier argument's name gets ``_0``, ``_1`` ... after it."""
    name = _NOT_ALNUM.sub("_", node.lower())
    letter = _LETTER.search(name)
    return name[letter.start():] if letter else "unknown"
