"""What was recorded beside a log (the program's graphs, its devices, the kernel registry, the eager
ops as they ran): the facts why.py works out reasons from; runtime records them, notebooks and
traces carry them as JSON."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from placement_cli.devices import DeviceName
from placement_cli.i18n import Wording


@dataclass(frozen=True)
class NodeFacts:
    """What the program's graph said about one node before the placer ran."""

    name: str
    op: str | None = None
    requested: DeviceName | None = None  # the node's device field; None when it asked for nothing
    partners: tuple[str, ...] = ()  # nodes it must share a device with: colocation attr, resource/ref inputs
    no_kernel: tuple[str, ...] = ()  # device types checked against this very node that have no kernel for it
    unchecked: tuple[str, ...] = ()  # device types whose kernels for this very node could not be checked
    group: Wording | None = None
    request_known: bool = True  # False: graphs that share this name asked for different devices

    def __post_init__(self) -> None:
        if self.requested is not None and type(self.requested) is not DeviceName:  # read where the model is made
            object.__setattr__(self, "requested", DeviceName(self.requested))

    @property
    def key(self) -> tuple[str, str | None]:
        return self.name, self.op

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "op": self.op, "requested": self.requested or None,
                "partners": list(self.partners), "no_kernel": list(self.no_kernel), "unchecked": list(self.unchecked),
                "request_known": self.request_known}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> NodeFacts:
        return cls(name=data["name"], op=data.get("op"), requested=data.get("requested") or None,
                   partners=tuple(data.get("partners") or ()), no_kernel=tuple(data.get("no_kernel") or ()),
                   unchecked=tuple(data.get("unchecked") or ()),
                   request_known=data.get("request_known", True) is not False)


@dataclass(frozen=True)
class Span:
    """Lines of a run command's log written while it ran eager code under one request of its own."""

    first: int  # 1-based line numbers of the run's log, both inclusive
    last: int
    requested: DeviceName | None  # the device scope the code ran in (None: none)
    group: Wording | None = None
    calls_function: bool = False  # a tf.function call: its placer lines are the function's body (graph facts)

    def __post_init__(self) -> None:
        if self.requested is not None and type(self.requested) is not DeviceName:
            object.__setattr__(self, "requested", DeviceName(self.requested))


@dataclass(frozen=True)
class Facts:
    """Everything known beside the log: requests per node, the devices, the kernel registry."""

    nodes: Mapping[tuple[str, str | None], NodeFacts] = field(default_factory=dict)  # by (name, op type)
    available: tuple[str, ...] = ()  # every device that existed (full names)
    kernels: Mapping[str, frozenset[str]] | None = None  # op type -> device types with a kernel (attrs ignored)
    spans: tuple[Span, ...] = ()  # run commands: what the code running at each line of the log asked for
    complete: bool = False  # True: a node with no facts asked for nothing; False: what it asked is unknown
    graphs_known: bool = False  # every graph built in Python was recorded: other placer nodes are TF's own
    # each recorded graph's own nodes (None: not kept): a placer line takes the facts of the graph it was placed
    # in, never those of another graph's node that has its name
    graphs: tuple[Mapping[tuple[str, str | None], NodeFacts], ...] | None = None
    # the eager ops recorded as they ran ({"pairs": [[op type, request, resource device, made by, name]],
    # "threads": {tid: [pair index]}}):
    # what each eager line of the log asked for (None: not recorded, every eager request unknown)
    eager: Mapping[str, Any] | None = None
    missing: tuple[str, ...] = ()  # the private APIs that could not be read, and why (runtime.private)
    # each recorded graph's own devices, where a Session ran it (its device_count: fewer than the process
    # has), else None: a reason for one of its nodes names the devices its Session had
    graph_devices: tuple[tuple[str, ...] | None, ...] = ()
    # the tf.functions XLA compiled (jit_compile), each with its body's (node, op type, device field):
    # TensorFlow logs only their calls (None: not known whether any was)
    compiled: Mapping[str, tuple[tuple[str, str, str], ...]] | None = None
    graph_calls: tuple[Mapping[str, str], ...] = ()  # each recorded graph's call nodes -> the function they call
    # the graph (index in ``graphs``) of each Session at its first run, in order: TensorFlow places a Session's
    # graph then, so Session graphs with the same node names take their placer blocks in this order
    session_runs: tuple[int, ...] = ()
    # each recorded graph's name, where it has one (a tf.function's: its placer lines name it __inference_NAME_N)
    graph_names: tuple[str | None, ...] = ()
    # each recorded graph's placeholders of captured variables -> the variable's name (a tf.function's)
    graph_captures: tuple[Mapping[str, str], ...] = ()
