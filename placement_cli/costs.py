"""A profile joined with the placements: what each device, op, copy and placement costs per step.

Steps: a lesson marks each measured step (a ``placement_step`` run); a traced script's steps are the calls
of its most called tf.function (or Session run) after ``warmup`` calls, each step lasting until the next
call starts (what a training loop's step takes), the last call only closing the one before it. An event
belongs to the step it started in. A device's busy time is the union of its kernels' times (kernels that
overlap count once); its share is that over the step's wall time.

Devices: where the event says (a GPU's plane, a copy's rendezvous key), else its node's placement in its
own graph (a tf.function's nodes by the function, its trace counter dropped; a Session's by name), else
unknown. A copy is charged to its reader, or to the end TensorFlow moved by a rule (``blame``).
"""

from __future__ import annotations

import bisect
import itertools
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import NamedTuple

from placement_cli.devices import DeviceName, crosses_memory
from placement_cli.logparse.functions import function_identity
from placement_cli.model import SOFT_FALLBACK, WITH_RESOURCE, Copy, Placement, PlacementKind
from placement_cli.model.cost import (
    COPY,
    EAGER,
    CopyCost,
    Cost,
    CostlyPlacement,
    DeviceCost,
    OpCost,
    Profile,
    ProfiledEvent,
    ProfiledRun,
    Spread,
    TimelineEvent,
)
from placement_cli.model.fields import known_total
from placement_cli.model.ops import PLUMBING_OPS, onednn_base

TOP_COSTLY = 10
DOMINATES = 0.5  # a placement whose kernels take this share of its device's busy time is listed as costly


_OpKey = tuple[str | None, str, DeviceName | None]  # graph, node, device
_CopyKey = tuple[str | None, str | None, str | None, DeviceName | None, DeviceName | None]  # graph, producer, consumer, from, to
_SizeKey = tuple[str | None, str | None, str | None, str | None]  # producer, consumer, from, to (canonical)
# an event of a step: its graph, its device, its placement (an op's, where known)
_Timed = tuple[ProfiledEvent, "str | None", "DeviceName | None", "Placement | None"]


@dataclass(frozen=True)
class _Window:
    start: float
    end: float


def build(profile: Profile, placements: Iterable[Placement], copies: Iterable[Copy] | None = None, *,
          virtual_gpus: bool = False) -> Cost:
    """The Cost of ``profile``: per step over its steps (its marked steps: a lesson's; else its most
    called function's calls after the warm-up)."""
    placed = _Placed(placements)
    plan = _steps(profile)
    windows, step = plan.windows, plan.step
    sized = _copy_sizes(copies or ())
    per_step_ops: list[dict[_OpKey, float]] = [defaultdict(float) for _ in windows]
    per_step_copies: list[dict[_CopyKey, float]] = [defaultdict(float) for _ in windows]
    calls: dict[object, int] = defaultdict(int)
    busy: list[dict[DeviceName | None, list[tuple[float, float]]]] = [defaultdict(list) for _ in windows]
    ops_of: dict[_OpKey, tuple[str, Placement | None]] = {}
    eager_targets = _eager_targets(profile)
    copy_facts: dict[_CopyKey, tuple[DeviceName | None, DeviceName | None, int | None]] = {}
    in_step: list[list[_Timed]] = [[] for _ in windows]
    starts = [w.start for w in windows]
    for event in _with_eager_kernels(profile):
        i = _window_of(windows, starts, event.start)
        if i is None:
            continue
        graph = _graph(profile.runs, event)
        if event.kind == COPY and _canon(event.device) is not None and _canon(event.device) == _canon(event.target):
            continue  # a fetch sent back on its own device (a Session on a server): no copy between devices
        if event.kind == COPY:
            ckey: _CopyKey = (graph, event.producer, event.consumer, event.device, event.target)
            per_step_copies[i][ckey] += event.duration
            calls[ckey] += 1
            size = event.bytes if event.bytes is not None else sized.get(
                (event.producer, event.consumer, _canon(event.device), _canon(event.target)))
            copy_facts[ckey] = (event.device, event.target, size)
            in_step[i].append((replace(event, bytes=size), graph, event.device, None))
            continue
        eager = _is_eager(profile.runs, event)
        placement = placed.find(graph, event.node, event.op, eager=eager)
        device = event.device or (DeviceName(placement.canonical) if placement is not None else None)
        if device is None and eager and event.run is not None:  # an eager op whose inputs were copied: to its device
            device = eager_targets.get(event.run)
        node_key = (graph, event.node, device)
        per_step_ops[i][node_key] += event.duration
        calls[node_key] += 1
        ops_of[node_key] = (placement.op if placement is not None and placement.op else event.op, placement)
        busy[i][device].append((event.start, event.start + event.duration))
        in_step[i].append((event, graph, device, placement))
    n = len(windows)
    walls = [w.end - w.start for w in windows]
    wall = Spread.of(walls)
    devices = _devices(busy, wall, ops_of)
    share_of = {d.device: d.busy.mean for d in devices}
    graphs_of: dict[str | None, set[str | None]] = defaultdict(set)
    for graph, _node, _device in ops_of:
        graphs_of[_identity(graph)].add(graph)

    def function(graph: str | None) -> str | None:  # as diff names it; its graph's own name where two share it
        name = _identity(graph)
        return name if len(graphs_of.get(name, ())) <= 1 else graph

    ops = []
    for key, (op, placement) in ops_of.items():
        ops.append(OpCost(node=key[1], op=op, graph=key[0], device=key[2],
                          time=Spread.of(step.get(key, 0.0) for step in per_step_ops), calls=calls[key] / n,
                          status=placement.status if placement is not None else None,
                          reason=placement.reason if placement is not None else None, function=function(key[0])))
    ops.sort(key=lambda o: (-o.time.mean, o.node))
    copy_costs = []
    for ckey, (source, target, size) in copy_facts.items():
        copy_costs.append(CopyCost(source, target, ckey[1], ckey[2], ckey[0], size,
                                   Spread.of(step.get(ckey, 0.0) for step in per_step_copies), calls[ckey] / n,
                                   _physical(source, target, virtual_gpus)))
    copy_costs.sort(key=lambda c: (-(c.step_bytes or 0), -c.time.mean, c.producer or ""))
    costly = _costly(ops, copy_costs, share_of, placed, function)
    timeline, timeline_wall = _timeline(in_step, windows, walls)
    plain = Spread.of(profile.plain_walls) if profile.plain_walls else None
    return Cost(source="profiler", steps=n, warmup=profile.warmup, step=step, wall=wall, plain=plain,
                collect=profile.collect, devices=devices, ops=tuple(ops), copies=tuple(copy_costs),
                costly=costly, timeline=timeline, timeline_wall=timeline_wall, calls=plan.calls,
                overlapped=plan.overlapped)


class _Placed:
    """The placements by (graph, node): a function's nodes by its graph as TensorFlow named it (two
    functions of one Python name, or a retrace, are two graphs), else by the function without its trace
    counter, else by name alone; where those name several placements on several devices, none (which
    one ran is not known: two Sessions' graphs are not told apart in a profile)."""

    def __init__(self, placements: Iterable[Placement]) -> None:
        self.by_graph: dict[tuple[str | None, str], list[Placement]] = defaultdict(list)
        self.by_function: dict[tuple[str | None, str], list[Placement]] = defaultdict(list)
        self.by_node: dict[str, list[Placement]] = defaultdict(list)
        self.eager: dict[str, list[Placement]] = defaultdict(list)
        for p in placements:
            if p.kind is PlacementKind.EAGER and p.op:
                self.eager[onednn_base(p.op) or p.op].append(p)
            if p.node is None:
                continue
            if p.kind is PlacementKind.EAGER:
                continue
            self.by_graph[(p.graph, p.node)].append(p)
            self.by_function[(_identity(p.graph), p.node)].append(p)
            self.by_node[p.node].append(p)

    def find(self, graph: str | None, node: str, op: str | None = None, *, eager: bool = False) -> Placement | None:
        if eager:  # an eager op is known by its type alone: its device, where all of that type ran on one
            return _one_device(self.eager.get(onednn_base(node) or node, ()))
        for found in (self.by_graph.get((graph, node)), self.by_function.get((_identity(graph), node))):
            if found:
                return _one_device(found)
        return _one_device(self.by_node.get(node, ()))  # a node no other graph names: its one placement


def _one_device(found: Iterable[Placement]) -> Placement | None:
    """The placement, where every one of them went to one device (else which one ran is not known)."""
    found = list(found)
    return found[0] if found and len({p.canonical for p in found}) == 1 else None


def _identity(graph: str | None) -> str | None:
    return None if graph is None else function_identity(graph)


def _is_eager(runs: tuple[ProfiledRun, ...], event: ProfiledEvent) -> bool:
    return event.run is not None and runs[event.run].kind == EAGER


def _graph(runs: tuple[ProfiledRun, ...], event: ProfiledEvent) -> str | None:
    """The graph an event's node belongs to: its function's (None: a Session's, an eager op's)."""
    if event.run is None:
        return None
    run = runs[event.run]
    return run.graph if run.kind == "function" else None


def _with_eager_kernels(profile: Profile) -> Iterable[ProfiledEvent]:
    """The profile's events, and one op event per eager op run (the profiler times an eager op as its run)."""
    events = list(profile.events)
    for i, run in enumerate(profile.runs):
        if run.kind == EAGER and run.graph:
            events.append(ProfiledEvent(i, run.graph, run.graph, run.start, run.duration))
    events.sort(key=lambda e: e.start)
    return events


def _eager_targets(profile: Profile) -> dict[int, DeviceName]:
    """Eager runs whose inputs TensorFlow copied: the device it copied them to (where the op ran)."""
    found: dict[int, set[DeviceName]] = defaultdict(set)
    for e in profile.events:
        if e.kind == COPY and e.run is not None and e.target is not None and profile.runs[e.run].kind == EAGER:
            found[e.run].add(e.target)
    return {run: next(iter(targets)) for run, targets in found.items() if len(targets) == 1}


class _Plan(NamedTuple):
    windows: list[_Window]
    step: str | None  # what a step is (None: a lesson's marked step)
    calls: int | None  # how often the step's function ran (None: marked steps)
    overlapped: bool = False  # calls of it ran at once (several threads): their times add up


def _steps(profile: Profile) -> _Plan:
    """The measured steps' windows, what a step is (None: a lesson's marked step) and how often the step's
    function ran (None: marked). A step lasts from one call to the next (the first ``profile.steps``
    after the warm-up); one call left after the warm-up is measured alone (its own duration); none: no step."""
    if profile.marked:
        return _Plan([_Window(start, start + duration) for start, duration in profile.marked], None, None)
    counted: dict[tuple[str, str | None], list[ProfiledRun]] = defaultdict(list)
    for run in profile.runs:
        if run.kind != EAGER:
            counted[(run.kind, run.graph)].append(run)  # a function's graph as named: two of one name are two
    if not counted:
        return _Plan([], None, 0)
    (kind, name), runs = max(counted.items(), key=lambda kv: (len(kv[1]), sum(r.duration for r in kv[1])))
    step = _identity(name) if kind == "function" else "Session.run"
    kept = runs[profile.warmup:profile.warmup + profile.steps + 1]
    windows = [_Window(a.start, b.start) for a, b in itertools.pairwise(kept)]
    if len(kept) == 1:
        windows = [_Window(kept[0].start, kept[0].start + kept[0].duration)]
    overlapped = any(b.start < a.start + a.duration for a, b in itertools.pairwise(kept))
    return _Plan(windows, step, len(runs), overlapped)


def _window_of(windows: list[_Window], starts: list[float], at: float) -> int | None:
    i = bisect.bisect_right(starts, at) - 1
    return i if i >= 0 and at < windows[i].end else None


def _canon(device: DeviceName | None) -> str | None:
    return None if device is None or device.spec is None else device.spec.canonical


def _copy_sizes(copies: Iterable[Copy]) -> dict[_SizeKey, int]:
    """A traced run's copies with their sizes, by (producer, consumer, from, to)."""
    return {(c.producer, c.consumer, _canon(c.source), _canon(c.target)): c.bytes
            for c in copies if c.bytes is not None and c.producer}


def _physical(source: DeviceName | None, target: DeviceName | None, virtual_gpus: bool) -> bool | None:
    return None if source is None or target is None else crosses_memory(source, target, virtual_gpus=virtual_gpus)


def _union(spans: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def _devices(busy: list[dict[DeviceName | None, list[tuple[float, float]]]], wall: Spread,
             ops_of: Mapping[_OpKey, tuple[str, Placement | None]]) -> tuple[DeviceCost, ...]:
    names = sorted({d for step in busy for d in step if d is not None}, key=lambda d: _canon(d) or str(d))
    found = []
    for device in names:
        times = Spread.of(_union(step.get(device, [])) for step in busy)
        ops = sum(1 for key in ops_of if key[2] == device)
        found.append(DeviceCost(device, times, ops, times.mean / wall.mean if wall.mean > 0 else 0.0))
    return tuple(found)


def blame(producer: Placement | None, consumer: Placement | None) -> Placement | None:
    """The end of a copy whose placement made it: the one TensorFlow moved by a rule (a soft fallback,
    a resource's device) where the other was not; else the reader, which runs away from its input (its
    pin, or TensorFlow's free choice that did not follow the input: tensorflow#2441's gradients)."""
    moved = [p is not None and p.status in (SOFT_FALLBACK, WITH_RESOURCE) for p in (producer, consumer)]
    if moved[0] and not moved[1]:
        return producer
    return consumer if consumer is not None else producer


def _costly(ops: list[OpCost], copies: list[CopyCost], busy: Mapping[DeviceName, float], placed: _Placed,
            function: Callable[[str | None], str | None]) -> tuple[CostlyPlacement, ...]:
    own = {(o.graph, o.node, o.device): o for o in ops}
    charged: dict[_OpKey, list[CopyCost]] = defaultdict(list)
    blamed: dict[_OpKey, Placement] = {}
    for c in copies:
        producer = placed.find(c.graph, c.producer) if c.producer else None
        consumer = placed.find(c.graph, c.consumer) if c.consumer else None
        chosen = blame(producer, consumer)
        if chosen is not None and chosen.node is not None:
            key: _OpKey = (c.graph, chosen.node, DeviceName(chosen.canonical))
            blamed[key] = chosen
        elif c.consumer:  # an eager op's input copy, or a node no placement names: charged to its reader
            key = (c.graph, c.consumer, c.target)
        else:
            continue
        charged[key].append(c)
    keys = set(charged)
    for key, op in own.items():
        total = busy.get(op.device, 0.0) if op.device is not None else 0.0
        if op.op not in PLUMBING_OPS and total > 0 and op.time.mean / total >= DOMINATES:
            keys.add(key)
    found = []
    for key in keys:
        graph, node, device = key
        o = own.get(key)
        p = blamed.get(key)
        group = charged.get(key, [])
        total = busy.get(device, 0.0) if device is not None else 0.0
        time = o.time.mean if o is not None else 0.0
        found.append(CostlyPlacement(
            node=node, op=o.op if o is not None else (p.op if p is not None else None), graph=graph, device=device,
            status=o.status if o is not None else (p.status if p is not None else None),
            reason=o.reason if o is not None else (p.reason if p is not None else None), time=time,
            share=min(1.0, time / total) if total > 0 else 0.0, copies=sum(c.calls for c in group),
            copy_bytes=known_total(c.step_bytes for c in group),
            copy_time=sum(c.time.mean * c.calls for c in group), function=function(graph)))
    found.sort(key=lambda c: (-c.total, -(c.copy_bytes or 0), c.node))
    return tuple(found[:TOP_COSTLY])


def _timeline(in_step: list[list[_Timed]], windows: list[_Window],
              walls: list[float]) -> tuple[tuple[TimelineEvent, ...], float]:
    """The events of the step whose wall time is the median's (the step a reader would call typical),
    and its wall time."""
    if not windows:
        return (), 0.0
    median = statistics.median_low(walls)
    i = walls.index(median)
    found = []
    for event, graph, device, p in in_step[i]:
        found.append(TimelineEvent(device=device, node=event.node, op=event.op, start=event.start - windows[i].start,
                                   duration=event.duration, kind=event.kind, target=event.target, graph=graph,
                                   status=p.status if p is not None else None,
                                   reason=p.reason if p is not None else None, bytes=event.bytes))
    return tuple(found), median
