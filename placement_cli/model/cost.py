"""What a placement costs: time per step per device, per op and per copy, from TensorFlow's profiler.

Two halves. ``Profile`` is what the profiler recorded (its runs and timed events, devices only where an
event itself says), read from TensorFlow's ``.xplane.pb`` where TensorFlow runs and sent as it is from a
traced script. ``Cost`` is that profile joined with the placements: each event's device, each op's status
and reason, per step means with their spread over the measured steps, and the placements that cost most.
Times are microseconds."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from placement_cli.devices import DeviceName
from placement_cli.i18n import Wording, english
from placement_cli.model.caps import MAX_STEPS
from placement_cli.model.fields import count, known_total, number, optional_int, optional_text, text

# what a ProfiledRun is: one Session.run, one call of a tf.function, one eager op
SESSION, FUNCTION, EAGER = "session", "function", "eager"
RUN_KINDS = (SESSION, FUNCTION, EAGER)
# what a ProfiledEvent is: an op's kernel, or a copy between devices (a _Send, an eager input copy, a memcpy)
OP, COPY = "op", "copy"


@dataclass(frozen=True)
class ProfiledRun:
    """One root execution the profiler saw, in the order it started."""

    kind: str  # SESSION, FUNCTION or EAGER
    graph: str | None  # a function's name as TensorFlow gave it (``__inference_step_13``), an eager op's type
    start: float  # microseconds from the profile's first event
    duration: float

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "graph": self.graph, "start": self.start, "duration": self.duration}

    @classmethod
    def from_dict(cls, r: Any) -> ProfiledRun:
        kind = text(r["kind"])
        if kind not in RUN_KINDS:
            raise ValueError(f"unknown run kind {kind!r}")
        return cls(kind, optional_text(r.get("graph")), number(r["start"]), number(r["duration"]))


@dataclass(frozen=True)
class ProfiledEvent:
    """One timed event: an op's kernel or a copy, under the run ``run`` (an index into Profile.runs)."""

    run: int | None  # None: under no run the profiler saw
    node: str  # the node as its graph names it (a copy: its _Send, or the eager op it feeds)
    op: str  # the kernel's op type (``_MklMatMul``, ``_Send``, ``MemcpyH2D``)
    start: float
    duration: float
    kind: str = OP
    device: DeviceName | None = None  # where the event itself says: a GPU's plane, a copy's source
    target: DeviceName | None = None  # a copy's destination
    producer: str | None = None  # a copy's: the node whose output it carries, and the node that reads it
    consumer: str | None = None
    bytes: int | None = None  # a copy's size, where known (the tensor's static shape)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"run": self.run, "node": self.node, "op": self.op, "start": self.start,
                                "duration": self.duration, "kind": self.kind, "device": self.device}
        if self.kind == COPY:
            data.update(target=self.target, producer=self.producer, consumer=self.consumer, bytes=self.bytes)
        return data

    @classmethod
    def from_dict(cls, e: Any) -> ProfiledEvent:
        kind = text(e.get("kind", OP))
        if kind not in (OP, COPY):
            raise ValueError(f"unknown event kind {kind!r}")
        return cls(run=optional_int(e.get("run")), node=text(e["node"]), op=text(e["op"]), start=number(e["start"]),
                   duration=number(e["duration"]), kind=kind, device=_device(e.get("device")),
                   target=_device(e.get("target")), producer=optional_text(e.get("producer")),
                   consumer=optional_text(e.get("consumer")), bytes=optional_int(e.get("bytes")))


@dataclass(frozen=True)
class Profile:
    """What TensorFlow's profiler recorded over the measured steps, before any join with placements."""

    runs: tuple[ProfiledRun, ...]
    events: tuple[ProfiledEvent, ...]
    plain_walls: tuple[float, ...] = ()  # the same steps run without the profiler (a lesson's), microseconds
    collect: float = 0.0  # seconds the profiler took to start, stop and be read: the measurement's overhead
    warmup: int = 0  # steps run before the profile (a lesson's), or calls it leaves out (a traced script's)
    marked: tuple[tuple[float, float], ...] = ()  # a lesson's measured steps (start, duration)
    steps: int = MAX_STEPS  # a traced script's: at most this many steps measured, after the warm-up

    def to_dict(self) -> dict[str, Any]:
        return {"runs": [r.to_dict() for r in self.runs], "events": [e.to_dict() for e in self.events],
                "plain_walls": list(self.plain_walls), "collect": self.collect, "warmup": self.warmup,
                "marked": [list(m) for m in self.marked], "steps": self.steps}

    @classmethod
    def from_dict(cls, p: Any) -> Profile:
        return cls(tuple(map(ProfiledRun.from_dict, p["runs"])), tuple(map(ProfiledEvent.from_dict, p["events"])),
                   tuple(map(number, p.get("plain_walls") or ())), number(p.get("collect", 0.0)),
                   count(p.get("warmup", 0)), tuple((number(a), number(b)) for a, b in p.get("marked") or ()),
                   count(p.get("steps", MAX_STEPS)))


@dataclass(frozen=True)
class Spread:
    """A time per step over the measured steps: mean, lowest, highest, standard deviation (microseconds)."""

    mean: float
    low: float
    high: float
    stdev: float = 0.0

    @classmethod
    def of(cls, values: Iterable[float]) -> Spread:
        found = list(values)
        if not found:
            return cls(0.0, 0.0, 0.0, 0.0)
        return cls(statistics.fmean(found), min(found), max(found), statistics.pstdev(found) if len(found) > 1 else 0.0)

    def to_dict(self) -> dict[str, Any]:
        return {"mean": _us(self.mean), "min": _us(self.low), "max": _us(self.high), "stdev": _us(self.stdev)}

    @classmethod
    def from_dict(cls, s: Any) -> Spread:
        found = cls(_time(s["mean"]), _time(s["min"]), _time(s["max"]), _time(s.get("stdev", 0.0)))
        if not found.low <= found.high:
            raise ValueError(f"a spread whose min is above its max: {s!r}")
        return found


@dataclass(frozen=True)
class DeviceCost:
    """One device's time per step: busy (its kernels' time, overlaps counted once), its ops, its share of the step."""

    device: DeviceName
    busy: Spread
    ops: int  # distinct nodes timed there
    share: float  # busy mean / step wall mean (0..1; more where kernels overlap the step's end)

    @property
    def idle(self) -> float:
        return max(0.0, self.busy.mean / self.share - self.busy.mean) if self.share > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device, "busy_us": self.busy.to_dict(), "ops": self.ops, "share": round(self.share, 4)}

    @classmethod
    def from_dict(cls, d: Any) -> DeviceCost:
        device = DeviceName(text(d["device"]))
        if device.spec is None:  # the rules on time match devices by their names
            raise ValueError(f"not a device: {str(device)[:60]!r}")
        return cls(device, Spread.from_dict(d["busy_us"]), count(d["ops"]), _share(d["share"]))


@dataclass(frozen=True)
class OpCost:
    """One node's time per step, with where it ran and why (its placement's status and reason)."""

    node: str
    op: str
    graph: str | None
    device: DeviceName | None  # None: no placement and no event says
    time: Spread
    calls: float  # executions per step
    status: Wording | None = None
    reason: Wording | None = None
    function: str | None = None  # the graph's tf.function as `diff` names it (``step``; None: no function's)

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "op": self.op, "graph": self.graph, "function": self.function,
                "device": self.device, "time_us": self.time.to_dict(), "calls_per_step": round(self.calls, 4),
                "status": english(self.status), "reason": english(self.reason)}

    @classmethod
    def from_dict(cls, o: Any) -> OpCost:
        return cls(text(o["node"]), text(o["op"]), optional_text(o.get("graph")), _device(o.get("device")),
                   Spread.from_dict(o["time_us"]), _time(o.get("calls_per_step", 1.0)),
                   optional_text(o.get("status")), optional_text(o.get("reason")), optional_text(o.get("function")))


@dataclass(frozen=True)
class CopyCost:
    """One copy between devices, per step: what it carries, its bytes and the time its sends took."""

    source: DeviceName | None
    target: DeviceName | None
    producer: str | None
    consumer: str | None
    graph: str | None
    bytes: int | None  # per copy; None: its size is unknown
    time: Spread
    calls: float  # copies per step
    physical: bool | None = None  # False: logical devices sharing one memory (its time is a hand-over)

    @property
    def step_bytes(self) -> int | None:
        return None if self.bytes is None else round(self.bytes * self.calls)

    def to_dict(self) -> dict[str, Any]:
        return {"from": self.source, "to": self.target, "producer": self.producer, "consumer": self.consumer,
                "graph": self.graph, "bytes": self.bytes, "bytes_per_step": self.step_bytes,
                "time_us": self.time.to_dict(), "calls_per_step": round(self.calls, 4), "physical": self.physical}

    @classmethod
    def from_dict(cls, c: Any) -> CopyCost:
        return cls(_device(c.get("from")), _device(c.get("to")), optional_text(c.get("producer")),
                   optional_text(c.get("consumer")), optional_text(c.get("graph")), optional_int(c.get("bytes")),
                   Spread.from_dict(c["time_us"]), _time(c.get("calls_per_step", 1.0)), c.get("physical"))


@dataclass(frozen=True)
class LinkCost:
    """The copies of one step from one device to another: how many, their bytes and time."""

    source: DeviceName | None
    target: DeviceName | None
    copies: float
    bytes: int | None  # None: some copy's size is unknown
    time: float  # microseconds per step (the means' sum)
    physical: bool | None

    def to_dict(self) -> dict[str, Any]:
        return {"from": self.source, "to": self.target, "copies_per_step": round(self.copies, 4),
                "bytes_per_step": self.bytes, "time_us": _us(self.time), "physical": self.physical}

    @classmethod
    def from_dict(cls, t: Any) -> LinkCost:
        return cls(_device(t.get("from")), _device(t.get("to")), _time(t["copies_per_step"]),
                   optional_int(t.get("bytes_per_step")), _time(t["time_us"]), t.get("physical"))


@dataclass(frozen=True)
class CostlyPlacement:
    """A placement and what it costs per step: its own time, and the copies it made TensorFlow add
    (a copy is charged to its reader, or to the end TensorFlow moved by a rule: see costs.blame)."""

    node: str
    op: str | None
    graph: str | None
    device: DeviceName | None
    status: Wording | None
    reason: Wording | None
    time: float  # its own kernels, microseconds per step
    share: float  # of its device's busy time
    copies: float  # per step
    copy_bytes: int | None  # per step; None: some copy's size is unknown
    copy_time: float  # microseconds per step
    function: str | None = None  # as OpCost's

    @property
    def total(self) -> float:
        return self.time + self.copy_time

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "op": self.op, "graph": self.graph, "function": self.function, "device": self.device,
                "status": english(self.status), "reason": english(self.reason), "time_us": _us(self.time),
                "device_share": round(self.share, 4), "copies_per_step": round(self.copies, 4),
                "copy_bytes_per_step": self.copy_bytes, "copy_time_us": _us(self.copy_time)}

    @classmethod
    def from_dict(cls, c: Any) -> CostlyPlacement:
        return cls(text(c["node"]), optional_text(c.get("op")), optional_text(c.get("graph")), _device(c.get("device")),
                   optional_text(c.get("status")), optional_text(c.get("reason")), _time(c["time_us"]),
                   _share(c.get("device_share", 0.0)), _time(c.get("copies_per_step", 0.0)),
                   optional_int(c.get("copy_bytes_per_step")), _time(c.get("copy_time_us", 0.0)),
                   optional_text(c.get("function")))


@dataclass(frozen=True)
class TimelineEvent:
    """One event of the step the pictures draw, its start from that step's start (microseconds)."""

    device: DeviceName | None
    node: str
    op: str
    start: float
    duration: float
    kind: str = OP
    target: DeviceName | None = None  # a copy's destination lane
    graph: str | None = None
    status: Wording | None = None
    reason: Wording | None = None
    bytes: int | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"device": self.device, "node": self.node, "op": self.op, "start_us": _us(self.start),
                                "duration_us": _us(self.duration), "kind": self.kind, "graph": self.graph,
                                "status": english(self.status), "reason": english(self.reason)}
        if self.kind == COPY:
            data.update(to=self.target, bytes=self.bytes)
        return data

    @classmethod
    def from_dict(cls, e: Any) -> TimelineEvent:
        return cls(_device(e.get("device")), text(e["node"]), text(e["op"]), number(e["start_us"]),
                   _time(e["duration_us"]), text(e.get("kind", OP)), _device(e.get("to")),
                   optional_text(e.get("graph")), optional_text(e.get("status")), optional_text(e.get("reason")),
                   optional_int(e.get("bytes")))


@dataclass(frozen=True)
class Cost:
    """A timed run: per step means over ``steps`` measured steps after ``warmup``, from ``source``."""

    source: str  # "profiler": TensorFlow's profiler (tf.profiler.experimental), read from its .xplane.pb
    steps: int
    warmup: int
    step: str | None  # a traced script's step: its most called tf.function (or "Session.run"); None: a lesson's step
    wall: Spread  # one step's wall time under the profiler
    plain: Spread | None  # the same steps without it (a lesson's); None: not measured
    collect: float  # seconds to start, stop and read the profiler
    devices: tuple[DeviceCost, ...]
    ops: tuple[OpCost, ...]  # most time first
    copies: tuple[CopyCost, ...]
    costly: tuple[CostlyPlacement, ...]
    timeline: tuple[TimelineEvent, ...] = ()  # the median step's events, for the pictures
    timeline_wall: float = 0.0  # that step's wall time
    calls: int | None = None  # a traced script's: how often its step's function ran (warm-up included)
    overlapped: bool = False  # calls of the step's function ran at once (several threads): their times add up

    def times(self) -> StepTimes:
        """In brief, as `diff` compares two timed reports."""
        return StepTimes(self.wall.mean, tuple((d.device, d.busy.mean) for d in self.devices), self.links)

    @property
    def overhead(self) -> float | None:
        """Microseconds the profiler added to a step (profiled wall - plain wall); None: not measured."""
        return None if self.plain is None else self.wall.mean - self.plain.mean

    @property
    def links(self) -> tuple[LinkCost, ...]:
        found: dict[tuple[DeviceName | None, DeviceName | None], list[CopyCost]] = {}
        for c in self.copies:
            found.setdefault((c.source, c.target), []).append(c)
        links = []
        for (source, target), group in found.items():
            total = known_total(c.step_bytes for c in group)
            physical = {c.physical for c in group}
            links.append(LinkCost(source, target, sum(c.calls for c in group), total,
                                  sum(c.time.mean * c.calls for c in group),
                                  physical.pop() if len(physical) == 1 else None))
        return tuple(links)

    def to_dict(self) -> dict[str, Any]:
        overhead = self.overhead
        return {"source": self.source, "steps": self.steps, "warmup": self.warmup, "step": self.step,
                "wall_us": self.wall.to_dict(), "plain_wall_us": None if self.plain is None else self.plain.to_dict(),
                "overhead_us": None if overhead is None else _us(overhead), "collect_s": round(self.collect, 3),
                "devices": [d.to_dict() for d in self.devices], "ops": [o.to_dict() for o in self.ops],
                "copies": [c.to_dict() for c in self.copies], "links": [t.to_dict() for t in self.links],
                "costly": [c.to_dict() for c in self.costly], "timeline": [e.to_dict() for e in self.timeline],
                "timeline_wall_us": _us(self.timeline_wall), "calls": self.calls,
                "overlapped": self.overlapped}

    @classmethod
    def from_dict(cls, c: Any) -> Cost:
        plain = c.get("plain_wall_us")
        return cls(text(c["source"]), count(c["steps"]), count(c.get("warmup", 0)), optional_text(c.get("step")),
                   Spread.from_dict(c["wall_us"]), None if plain is None else Spread.from_dict(plain),
                   number(c.get("collect_s", 0.0)), tuple(map(DeviceCost.from_dict, c["devices"])),
                   tuple(map(OpCost.from_dict, c["ops"])), tuple(map(CopyCost.from_dict, c["copies"])),
                   tuple(map(CostlyPlacement.from_dict, c["costly"])),
                   tuple(map(TimelineEvent.from_dict, c.get("timeline") or ())), number(c.get("timeline_wall_us", 0.0)),
                   optional_int(c.get("calls")), c.get("overlapped") is True)


@dataclass(frozen=True)
class StepTimes:
    """A timed report in brief, as `diff` compares two: one step's wall time, each device's busy time,
    each link's copies (microseconds per step)."""

    wall: float
    devices: tuple[tuple[DeviceName, float], ...]
    links: tuple[LinkCost, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"wall_us": _us(self.wall), "busy_us": {str(d): _us(busy) for d, busy in self.devices},
                "links": [t.to_dict() for t in self.links]}

    @classmethod
    def from_dict(cls, t: Any) -> StepTimes:
        return cls(_time(t["wall_us"]), tuple((DeviceName(text(d)), _time(b)) for d, b in t["busy_us"].items()),
                   tuple(map(LinkCost.from_dict, t["links"])))


def _us(value: float) -> float | None:
    """Microseconds as the JSON holds them: three decimals (nanoseconds); null where not finite."""
    return round(value, 3) if math.isfinite(value) else None


def _time(value: Any) -> float:
    """A time (or a count per step) as placement writes it: a finite number, 0 or more."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**15:
        raise ValueError(f"expected a time, found {str(value)[:20]}...")
    found = number(value)
    if not math.isfinite(found) or found < 0:
        raise ValueError(f"expected a time, 0 or more, found {value!r}")
    return found


def _share(value: Any) -> float:
    found = _time(value)
    if found > 1e6:  # a device busy beyond its step (kernels that overlap its end) stays a few times 1
        raise ValueError(f"expected a share, found {value!r}")
    return found


def _device(value: Any) -> DeviceName | None:
    return None if value is None else DeviceName(text(value))
