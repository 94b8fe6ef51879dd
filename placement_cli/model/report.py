"""The run's placements and copies, and the report that holds them (show, tower, train, mirrored, trace,
parse)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from placement_cli.devices import DeviceName, DeviceSpec, device_name, try_parse
from placement_cli.i18n import N_, Message, Wording, english
from placement_cli.model.cause import Cause, first_line
from placement_cli.model.copies import Copy, Edge, link_totals
from placement_cli.model.fields import count, known_total, optional_int, optional_text, text
from placement_cli.model.kinds import FailureKind, PlacementKind
from placement_cli.model.ops import PLUMBING_OPS

if TYPE_CHECKING:
    from placement_cli.model.cost import Cost
    from placement_cli.model.training import Training

# A placement's status: JSON writes its English, tables show it in the chosen language.
AS_REQUESTED = Message(N_("as requested"))
FREE = Message(N_("free"))
SOFT_FALLBACK = Message(N_("soft fallback"))
LOGGED = Message(N_("logged"))  # parsed from a log: what was requested is unknown
# an eager op that takes a resource, run on the resource's device whatever it asked (TensorFlow's rule, no fallback)
WITH_RESOURCE = Message(N_("with its resource"))


@dataclass(frozen=True)
class Placement:
    """One op placed on one device, as the log reported it."""

    node: str | None
    op: str | None
    device: str
    spec: DeviceSpec
    kind: PlacementKind
    line: int
    requested: DeviceName | None = None  # read where the model is made: a plain string is read here once
    status: Wording = LOGGED  # one of the statuses above
    reason: Wording | None = None  # a Message (messages.py)
    group: Wording | None = None  # the tower a node belongs to, a lesson's role (a Message), a name scope
    wrapper: bool = False  # a node of the single-op function TF 2.x wraps an eager op in (tables hide it)
    # the tf.function whose graph holds the node, as TensorFlow named it (``__inference_step_17``); None: a
    # Session's graph, an eager op's wrapper, or a log that does not say
    graph: str | None = None
    # Where the log wrote it, as the parser read it (neither is saved nor compared): the thread that wrote
    # the line, as absl's prefix names it (None: a line that names none), and, for a placement at a placer
    # line's bare stdout copy printed before its glog twin, the twin's line (its place in its thread's order).
    thread: int | None = field(default=None, compare=False)
    twin: int | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.requested is not None and type(self.requested) is not DeviceName:
            object.__setattr__(self, "requested", DeviceName(self.requested))

    @property
    def canonical(self) -> str:
        return self.spec.canonical

    @property
    def short(self) -> str:
        return self.spec.short

    @property
    def plumbing(self) -> bool:
        """_Arg/_Retval nodes and the single-op functions TF 2.x wraps eager ops in."""
        return self.op in PLUMBING_OPS or self.wrapper

    def to_dict(self, run: bool = False) -> dict[str, Any]:
        data: dict[str, Any] = {
            "node": self.node,
            "op": self.op,
            "device": self.device,
            "canonical": self.canonical,
            "job": self.spec.job,
            "replica": self.spec.replica,
            "task": self.spec.task,
            "device_type": self.spec.device_type,
            "device_index": self.spec.device_index,
            "kind": self.kind,
            "line": self.line,
        }
        if self.graph is not None:  # only where the log says (a tf.function's placer lines)
            data["graph"] = self.graph
        if run:
            data.update(requested=self.requested, status=english(self.status), reason=english(self.reason),
                        group=english(self.group))
        elif self.requested is not None or self.status != LOGGED:  # a log that says it (an ignored request's line)
            data.update(requested=self.requested, status=english(self.status), reason=english(self.reason))
        if self.wrapper:  # only where a run told (a reader of the JSON counts what the tables show)
            data["wrapper"] = True
        return data

    @classmethod
    def from_dict(cls, p: Any) -> Placement:
        if not isinstance(p, dict):
            raise TypeError(f"a placement is an object, found {type(p).__name__}")
        kind = p.get("kind", "placer")
        if kind not in _KINDS:
            raise ValueError(f"unknown placement kind {kind!r}")
        status = p.get("status", LOGGED)
        spec = _spec(p)
        return cls(node=optional_text(p.get("node")), op=optional_text(p.get("op")),
                   device=text(p.get("device", spec.canonical)), spec=spec, kind=PlacementKind(kind),
                   line=count(p.get("line", 0)), requested=device_name(optional_text(p.get("requested"))),
                   status=STATUSES.get(status, status if isinstance(status, str) else LOGGED),
                   reason=optional_text(p.get("reason")), group=optional_text(p.get("group")),
                   graph=optional_text(p.get("graph")), wrapper=p.get("wrapper") is True)


def _spec(p: dict[str, Any]) -> DeviceSpec:
    """A saved placement's device from its fields; from its names where a field is missing."""
    if "device_type" in p:
        return DeviceSpec(job=optional_text(p.get("job")), replica=optional_int(p.get("replica")),
                          task=optional_int(p.get("task")), device_type=optional_text(p.get("device_type")),
                          device_index=optional_int(p.get("device_index")))
    spec = try_parse(p.get("canonical")) or try_parse(p.get("device"))
    if spec is None:
        raise ValueError(f"no device in placement {str(p)[:80]}")
    return spec


@dataclass(frozen=True)
class DeviceMapping:
    """One line of a ``Device mapping:`` block."""

    device: DeviceName
    description: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "device", DeviceName(self.device))

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device, "description": self.description}

    @classmethod
    def from_dict(cls, m: Any) -> DeviceMapping:
        return cls(DeviceName(text(m["device"])), text(m["description"]))


@dataclass(frozen=True)
class PlacementFailure:
    """A placement error TensorFlow reported."""

    kind: FailureKind
    node: str | None
    requested_device: DeviceName | None
    message: str
    available_devices: tuple[DeviceName, ...] = ()
    group_device: DeviceName | None = None  # colocation: the device the node's colocation group required
    cause: Cause | None = None  # a run that stopped: TensorFlow's line that says why, not its traceback header
    # the line of ``message`` that says what failed, as logparse reads it (not in the JSON: read again from it);
    # "": the message's first line
    headline: str = field(default="", compare=False)

    def __post_init__(self) -> None:  # the device names, read once (plain strings are read here)
        object.__setattr__(self, "requested_device", device_name(self.requested_device))
        object.__setattr__(self, "available_devices", tuple(map(DeviceName, self.available_devices)))
        object.__setattr__(self, "group_device", device_name(self.group_device))

    @property
    def says(self) -> str:
        """What TensorFlow said went wrong, in one line ("" for a failure without a message)."""
        return self.cause.said if self.cause else self.headline or first_line(self.message)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "kind": self.kind,
            "node": self.node,
            "requested_device": self.requested_device,
            "message": self.message,
            "available_devices": list(self.available_devices),
        }
        if self.group_device is not None:
            data["group_device"] = self.group_device
        if self.cause is not None:
            data["cause"] = self.cause.to_dict()
        return data

    @classmethod
    def from_dict(cls, e: Any) -> PlacementFailure:
        """Its headline is the parser's to read again (logparse.saved)."""
        kind = text(e["kind"])  # (first: an entry that is no object fails here)
        message = text(e.get("message", ""))
        if kind not in _FAILURE_KINDS:  # as a placement's kind: only those placement writes
            raise ValueError(f"unknown placement error kind {kind!r}")
        return cls(kind=FailureKind(kind), node=optional_text(e.get("node")),
                   requested_device=device_name(optional_text(e.get("requested_device"))), message=message,
                   available_devices=tuple(DeviceName(text(d)) for d in e.get("available_devices") or ()),
                   group_device=device_name(optional_text(e.get("group_device"))),
                   cause=None if e.get("cause") is None else Cause.from_dict(e["cause"]))


@dataclass(frozen=True)
class IgnoredRequest:
    """A device a node asked for that TensorFlow's placer logged it ignored, and why: not a placement
    (TF 0.x-2.x: "Ignoring device specification D for node 'N' because the input edge from 'M' is a
    reference connection and already has a device field set to E"; "Ignoring request to colocate node
    'N' with nodes in colocation group 'G' because soft placement is on ...")."""

    node: str
    requested: DeviceName | None  # the device it asked for (None: a colocation it asked for)
    cause: str  # reference_input: it follows its reference input ``source`` to ``device``; colocation: see message
    source: str | None  # the input (reference_input) or the colocation group (colocation)
    device: DeviceName | None  # reference_input: the device the input already had
    line: int
    message: str  # TensorFlow's line, from "Ignoring"

    def __post_init__(self) -> None:
        object.__setattr__(self, "requested", device_name(self.requested))
        object.__setattr__(self, "device", device_name(self.device))

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "requested": self.requested, "cause": self.cause, "source": self.source,
                "device": self.device, "line": self.line, "message": self.message}

    @classmethod
    def from_dict(cls, i: Any) -> IgnoredRequest:
        return cls(node=text(i["node"]), requested=device_name(optional_text(i.get("requested"))), cause=text(i["cause"]),
                   source=optional_text(i.get("source")), device=device_name(optional_text(i.get("device"))),
                   line=count(i.get("line", 0)), message=text(i.get("message", "")))


def reason_counts(placements: Iterable[Placement]) -> list[tuple[Wording, int, list[str]]]:
    """Each reason given, how many placements have it, and the first few distinct names among them."""
    found: dict[Wording, tuple[int, list[str]]] = {}
    for p in placements:
        if p.reason:
            n, names = found.get(p.reason, (0, []))
            name = p.node or p.op or "?"
            if len(names) < 3 and name not in names:
                names.append(name)
            found[p.reason] = (n + 1, names)
    return sorted(((r, n, names) for r, (n, names) in found.items()), key=lambda t: (-t[1], t[0]))



@dataclass(frozen=True)
class CompiledOp:
    """One node of an XLA-compiled function's body, as its graph asked."""

    node: str
    op: str | None
    requested: DeviceName | None  # its device field (None: it asked for nothing)
    moved: bool  # it asked for a device the cluster did not run on

    def __post_init__(self) -> None:
        if self.requested is not None and type(self.requested) is not DeviceName:  # read where the model is made
            object.__setattr__(self, "requested", DeviceName(self.requested))

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "op": self.op, "requested": self.requested, "moved": self.moved}

    @classmethod
    def from_dict(cls, o: Any) -> CompiledOp:
        return cls(node=text(o["node"]), op=optional_text(o.get("op")), requested=device_name(optional_text(o.get("requested"))),
                   moved=o.get("moved") is True)


@dataclass(frozen=True)
class Compiled:
    """A tf.function compiled by XLA (jit_compile=True) that ran: TensorFlow logs only its call (an eager
    line); its body ran inside one XLA cluster on the call's device, and no placement of it is logged."""

    function: str  # the function's name, as the call's line has it (__inference_f_10)
    device: DeviceName  # the canonical device its calls ran on
    line: int  # its first call's line
    calls: int  # the calls logged on that device
    ops: tuple[CompiledOp, ...]

    def __post_init__(self) -> None:
        if type(self.device) is not DeviceName:
            object.__setattr__(self, "device", DeviceName(self.device))

    @property
    def moved(self) -> tuple[CompiledOp, ...]:
        return tuple(op for op in self.ops if op.moved)

    def to_dict(self) -> dict[str, Any]:
        return {"function": self.function, "device": self.device, "line": self.line, "calls": self.calls,
                "ops": [op.to_dict() for op in self.ops]}

    @classmethod
    def from_dict(cls, c: Any) -> Compiled:
        return cls(function=text(c["function"]), device=DeviceName(text(c["device"])), line=count(c.get("line", 0)),
                   calls=count(c.get("calls", 1)), ops=tuple(map(CompiledOp.from_dict, c.get("ops") or ())))


class Origin(StrEnum):
    """Where a report comes from, which says what it can know: a log of a past run says where each op
    went; a run placement watched (show, tower, trace, capture(), cluster, the demo, or a report saved
    from one) also says what each op asked for, why it went there, and what the run gave."""

    LOG = "log"
    RUN = "run"


@dataclass(frozen=True)
class Report:
    """Everything known about one log or one run."""

    placements: tuple[Placement, ...] = ()
    device_mapping: tuple[DeviceMapping, ...] = ()
    errors: tuple[PlacementFailure, ...] = ()
    lines: int = 0
    mapping_seen: bool = False
    counted: tuple[tuple[str, int], ...] | None = None  # per-device counts when placements were not kept
    ignored: tuple[IgnoredRequest, ...] = ()  # device requests the placer logged it ignored (not placements)
    # Only for runs (show, tower, ...):
    title: Wording | None = None  # a Message
    result: Any = None
    log: str | None = None
    copies: tuple[Copy, ...] | None = None  # only when asked for (--copies)
    run_error: str | None = None  # the run raised this ("Class: TensorFlow's message") instead of a result
    # show, tower: the private TensorFlow APIs that were missing, and why (their reasons say unknown);
    # None where nobody kept count (then title, run_error and incomplete stay out of the JSON)
    incomplete: tuple[str, ...] | None = None
    training: Training | None = None  # train, mirrored: the setup, losses per step, the gradient check
    executed: tuple[tuple[str, int], ...] | None = None  # a traced step's executed op types and node counts
    # runs: the edges of the graphs that ran (Session graph, tf.function graphs), for the pictures; not in the JSON
    edges: tuple[Edge, ...] | None = None
    # runs that recorded it (trace, capture()): the tf.functions XLA compiled, whose bodies TensorFlow does not log
    compiled: tuple[Compiled, ...] | None = None
    # a saved report: the filters it was saved narrowed by (device, op, node, top: those given), and how many
    # placements it held before them
    saved_filters: tuple[tuple[str, Any], ...] = ()
    unfiltered: int | None = None
    # narrowed by filters from a run that executed no eager op: a Session's node placed again on its task
    # holds its order as its graph (``#2``), which the placements the filters left out no longer say
    sessions_numbered: bool = False
    origin: Origin = Origin.LOG
    cost: Cost | None = None  # a timed run's (--time): time per step per device, op, copy and placement
    timing_error: str | None = None  # --time: why no times came (another profiler was running)

    @property
    def ran(self) -> bool:
        """A run's report (see Origin): what each op asked for and why it went where it did are known."""
        return self.origin is Origin.RUN

    @property
    def by_device(self) -> dict[DeviceName, int]:
        if self.counted is not None:
            return {DeviceName(device): n for device, n in self.counted}
        return {DeviceName(device): n for device, n in Counter(p.canonical for p in self.placements).items()}

    @property
    def placement_count(self) -> int:
        return sum(self.by_device.values())

    @property
    def failed(self) -> bool:
        """No result, and an error says why (a run that did not produce its result always has one)."""
        return self.result is None and (bool(self.errors) or self.run_error is not None)

    def to_dict(self) -> dict[str, Any]:
        run = self.ran
        data: dict[str, Any] = {
            "placements": [p.to_dict(run) for p in self.placements],
            "device_mapping": [m.to_dict() for m in self.device_mapping],
            "errors": [e.to_dict() for e in self.errors],
            "summary": {
                "lines": self.lines,
                "placements": self.placement_count,
                "by_device": dict(sorted(self.by_device.items())),
            },
        }
        if self.ignored:
            data["ignored_requests"] = [i.to_dict() for i in self.ignored]
        if run:
            data["result"] = self.result
            data["log"] = self.log
            data["copies"] = None if self.copies is None else [c.to_dict() for c in self.copies]
            if self.copies is not None:
                totals = link_totals(self.copies)
                data["copy_totals"] = {"links": [t.to_dict() for t in totals],
                                       "per_step_bytes": known_total(t.bytes for t in totals)}
            if self.executed is not None:
                data["executed_ops"] = dict(self.executed)
            if self.compiled is not None:
                data["xla_compiled"] = [c.to_dict() for c in self.compiled]
            if self.training is not None:
                data["steps"] = len(self.training.losses)
                data["losses"] = list(self.training.losses)
                data["check"] = None if self.training.check is None else self.training.check.to_dict()
                data["training"] = self.training.to_dict()
        if run and (self.cost is not None or self.timing_error is not None):
            data["cost"] = None if self.cost is None else self.cost.to_dict()
            if self.timing_error is not None:
                data["timing_error"] = self.timing_error
        if run and self.incomplete is not None:  # show, tower: what ran, what stopped it, which facts were missing
            data.update(title=english(self.title), run_error=self.run_error, incomplete=list(self.incomplete))
        return data

    @property
    def knows_requests(self) -> bool:
        """Whether it says what each placement asked for (a run's, or a saved run report), which a bare
        log never does: the few requests a log's ignored-request lines give do not make it one."""
        told = {r.node for r in self.ignored if r.cause == "reference_input"}
        return any(p.status != LOGGED and p.node not in told for p in self.placements)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Report:
        """What ``to_dict`` (any command's --json) wrote, read again; KeyError, TypeError or ValueError
        where a field is not as placement writes it. A run's report says so (what it asked for)."""
        from placement_cli.model.cost import Cost  # noqa: PLC0415 - only a timed report needs it
        from placement_cli.model.training import Training  # noqa: PLC0415 - only a training's report needs it

        placements = tuple(map(Placement.from_dict, data["placements"]))
        summary = data["summary"]
        by_device, copies, filters = summary.get("by_device"), data.get("copies"), data.get("filters")
        report = cls(
            placements=placements,
            device_mapping=tuple(map(DeviceMapping.from_dict, data.get("device_mapping") or ())),
            errors=tuple(map(PlacementFailure.from_dict, data.get("errors") or ())),
            ignored=tuple(map(IgnoredRequest.from_dict, data.get("ignored_requests") or ())),
            lines=count(summary.get("lines", 0)),
            counted=tuple((str(k), count(v)) for k, v in by_device.items())  # parse --summary --json
            if not placements and isinstance(by_device, dict) and by_device else None,
            title=optional_text(data.get("title")),
            result=data.get("result"),
            log=optional_text(data.get("log")),
            copies=None if copies is None else tuple(map(Copy.from_dict, copies)),
            run_error=optional_text(data.get("run_error")) or _exited(data.get("exit_code")),
            incomplete=None if not isinstance(data.get("incomplete"), list) else tuple(map(text, data["incomplete"])),
            executed=None if not isinstance(data.get("executed_ops"), dict) else
            tuple((str(k), count(v)) for k, v in data["executed_ops"].items()),
            compiled=None if data.get("xla_compiled") is None else tuple(map(Compiled.from_dict, data["xla_compiled"])),
            saved_filters=_filters(filters) if isinstance(filters, dict) else (),
            unfiltered=optional_int(summary.get("unfiltered_placements")),
            sessions_numbered=summary.get("sessions_numbered") is True,
            training=None if not isinstance(data.get("training"), dict) else
            Training.from_dict(data["training"], data.get("losses"), data.get("check")),
            cost=None if data.get("cost") is None else Cost.from_dict(_object(data["cost"], "cost")),
            timing_error=optional_text(data.get("timing_error")),
        )
        return replace(report, origin=Origin.RUN) if report.knows_requests else report


def _object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError(f"{what}: expected an object, found {type(value).__name__}")
    return value


def _filters(value: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """The filters a report was saved narrowed by (``--json``'s ``filters``), those given."""
    found: list[tuple[str, Any]] = [(k, text(value[k])) for k in ("device", "op", "node") if value.get(k) is not None]
    if value.get("top") is not None:
        found.append(("top", count(value["top"])))
    return tuple(found)


def _exited(code: Any) -> str | None:
    """A saved trace report's exit code, as the run error of a program that did not end well."""
    return f"exit code {code}" if isinstance(code, int) and not isinstance(code, bool) and code != 0 else None


# each status by its English, as JSON and a diff's rows write it
STATUSES = {english(s): s for s in (AS_REQUESTED, FREE, SOFT_FALLBACK, LOGGED, WITH_RESOURCE)}
_KINDS = frozenset(PlacementKind)
_FAILURE_KINDS = frozenset(FailureKind)
