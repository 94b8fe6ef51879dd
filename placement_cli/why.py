"""Why an op sits where it does: the placer's reasons, worked out from facts recorded beside the log."""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from placement_cli.devices import DeviceSpec, try_parse
from placement_cli.model.ops import PLUMBING_OPS, onednn_base
from placement_cli.model import AS_REQUESTED, FREE, LOGGED, SOFT_FALLBACK, WITH_RESOURCE, Placement
from placement_cli.eagerjoin import eager_records
from placement_cli.tfrules import (EagerRecord, arg_name, call_functions, compiled_bodies, compiled_reason,
                                   function_traces, resource_reason, session_devices)
from placement_cli import messages
from placement_cli.i18n import Message
from placement_cli.messages import UNKNOWN
from placement_cli.model.kinds import PlacementKind

# Nodes that call function graphs: a tf.function call, and tf.cond/tf.while_loop/tf.switch_case (their
# branches are traced function graphs). TensorFlow inlines the first as ``<call>/<name>`` and lowers the
# others' branches to ``<node>/then/_N/<name>`` (else, cond, body, branchK): lower_if_op.cc and co.
_CALL_OPS = ("StatefulPartitionedCall", "PartitionedCall", "If", "StatelessIf", "While", "StatelessWhile", "Case",
             "StatelessCase")
_CALL_NODE = re.compile(r"(?:Stateful)?PartitionedCall(?:_\d+)?")  # tf.function call nodes' default names
_BRANCH = re.compile(r"then|else|cond|body|branch\d+")
_LOWERED = re.compile(r"_\d+")


def calls_in(name: str) -> Iterator[tuple[str, str, str, bool]]:
    """Each (call prefix, call node, name inside the called graph, lowered) a placer node's name can be
    read as, outermost first: ``PartitionedCall/x`` -> (PartitionedCall, PartitionedCall, x, False); a
    lowered branch, ``cond/then/_0/cond/mm`` -> (cond/then/_0, cond, cond/mm, True): only a call node
    a recorded graph has makes it one."""
    parts = name.split("/")
    for i in range(len(parts) - 1):
        if _CALL_NODE.fullmatch(parts[i]):
            yield "/".join(parts[: i + 1]), "/".join(parts[: i + 1]), "/".join(parts[i + 1:]), False
        elif 0 < i < len(parts) - 2 and _BRANCH.fullmatch(parts[i]) and _LOWERED.fullmatch(parts[i + 1]):
            yield "/".join(parts[: i + 2]), "/".join(parts[:i]), "/".join(parts[i + 2:]), True
# Kernels registered for DEFAULT serve every device type but the CPU (TF's kernel lookup falls back to them).
_DEFAULT = "DEFAULT"

@dataclass(frozen=True)
class NodeFacts:
    """What the program's graph said about one node before the placer ran."""

    name: str
    op: str | None = None
    requested: str | None = None  # the node's device field; None when it asked for nothing
    partners: tuple[str, ...] = ()  # nodes it must share a device with: colocation attr, resource/ref inputs
    no_kernel: tuple[str, ...] = ()  # device types checked against this very node that have no kernel for it
    unchecked: tuple[str, ...] = ()  # device types whose kernels for this very node could not be checked
    group: str | None = None
    request_known: bool = True  # False: graphs that share this name asked for different devices

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
    requested: str | None  # the device scope the code ran in (None: none)
    group: str | None = None
    calls_function: bool = False  # a tf.function call: its placer lines are the function's body (graph facts)


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


def facts_from_dict(data: Any) -> Facts:
    """Facts as ``Recorder.facts()`` wrote them; no facts (every request unknown) if they are not there."""
    try:
        graphs = None
        if "graphs" in data:
            graphs = tuple(merge_nodes(NodeFacts.from_dict(node) for node in graph) for graph in data["graphs"])
            nodes = merge_nodes(node for graph in graphs for node in graph.values())
        else:
            nodes = merge_nodes(NodeFacts.from_dict(node) for node in data["nodes"])
        return Facts(
            nodes=nodes,
            available=tuple(data.get("available") or ()),
            kernels={op: frozenset(types) for op, types in (data.get("kernels") or {}).items()} or None,
            graphs_known=True,
            graphs=graphs,
            eager=data.get("eager") if isinstance(data.get("eager"), dict) else None,
            missing=tuple(map(str, data.get("unavailable") or ())),
            graph_devices=session_devices(data.get("graph_devices"), len(graphs or ())),
            compiled=compiled_bodies(data.get("xla_compiled")),
            graph_calls=call_functions(data.get("graph_calls")),
            session_runs=tuple(i for i in data.get("session_runs") or () if isinstance(i, int)),
            graph_names=tuple(n if isinstance(n, str) else None for n in data.get("graph_names") or ()),
            graph_captures=call_functions(data.get("graph_captures")),
        )
    except (KeyError, TypeError, AttributeError):  # the recorder failed (its "error" says why)
        return Facts()


def _specs(names: Iterable[str]) -> tuple[DeviceSpec, ...]:
    """One spec per device, however spelt, in name order."""
    unique = {s.canonical: s for s in map(try_parse, names) if s}
    return tuple(unique[name] for name in sorted(unique))


def explain(placements: Iterable[Placement], facts: Facts, log: str | None = None) -> tuple[Placement, ...]:
    """Each placement with what was requested, its status and, where one is due, the reason. ``log``:
    the text the placements' line numbers count in, where eager ops were recorded (``facts.eager``)."""
    placements = tuple(placements)
    eager, threads, twins = eager_records(placements, log, facts.eager) \
        if facts.eager is not None and log is not None else ({}, {}, {})
    where: dict[str, set[str]] = {}
    for p in placements:
        if p.node:
            where.setdefault(p.node, set()).add(p.canonical)
    specs = _specs(facts.available)
    gpu_exists = any(s.device_type == "GPU" for s in specs) or any(p.spec.device_type == "GPU" for p in placements)
    explained = _Explainer(facts, specs, where, gpu_exists, eager, threads, twins).all(placements)
    compiled, lines = facts.compiled or {}, xla_lines(placements, facts)
    return tuple(replace(p, reason=compiled_reason(p, compiled[lines[p.line]])) if p.line in lines and not p.reason
                 else p for p in explained)


def xla_lines(placements: tuple[Placement, ...], facts: Facts) -> dict[int, str]:
    """Line -> the XLA-compiled function it calls: an eager call's line (its op type is the function),
    and a placer line of a call node (PartitionedCall) that the graphs its block can come from all
    have calling that one function (a jit_compile function called inside another tf.function)."""
    compiled = facts.compiled
    if not compiled:
        return {}
    found = {p.line: p.op for p in placements if p.kind == PlacementKind.EAGER and p.op is not None and p.op in compiled}
    calls = facts.graph_calls
    named = {name for graph in calls for name, function in graph.items() if function in compiled}
    if not named or facts.graphs is None or len(calls) != len(facts.graphs):
        return found
    blocks, _runs = _graph_blocks(placements, facts.graphs)
    for p in placements:
        if p.kind != PlacementKind.PLACER or p.node not in named or p.op not in _CALL_OPS:
            continue
        graphs = blocks.get(p.line)
        functions = {f for i in (range(len(calls)) if graphs is None else graphs) if (f := calls[i].get(p.node)) is not None}
        if len(functions) == 1 and next(iter(functions)) in compiled:
            found[p.line] = next(iter(functions))
    return found


@dataclass
class _Explainer:
    facts: Facts
    specs: tuple[DeviceSpec, ...]
    where: dict[str, set[str]]
    gpu_exists: bool
    eager: Mapping[int, EagerRecord]  # line -> what was recorded as that eager op ran
    threads: Mapping[int, int | None]  # line -> the thread that wrote it (where eager ops were recorded)
    twins: Mapping[int, int] = field(default_factory=dict)  # a bare copy's line -> its glog twin's: where it came
    _nodes_of: dict[frozenset[int], Mapping[tuple[str, str | None], NodeFacts]] = field(default_factory=dict)
    _runs: dict[int, int] = field(default_factory=dict)  # line -> its run of placer lines
    _callees: dict[tuple[int, str], frozenset[int]] = field(default_factory=dict)  # (run, call node) -> graphs

    @cached_property
    def ops_by_name(self) -> dict[str, set[str | None]]:
        found: dict[str, set[str | None]] = {}
        for name, op in self.facts.nodes:
            found.setdefault(name, set()).add(op)
        return found

    @cached_property
    def span_starts(self) -> list[int]:
        return [span.first for span in self.facts.spans]

    def all(self, placements: tuple[Placement, ...]) -> Iterator[Placement]:
        blocks: dict[int, frozenset[int] | None] = {}
        runs: dict[int, int] = {}
        if self.facts.graphs is not None:
            blocks, runs = _graph_blocks(placements, self.facts.graphs, self.facts.session_runs,
                                         self.facts.graph_names)
            self._callees = _callees(placements, self.facts.graphs, blocks, runs)
        self._runs = runs
        ordered = sorted(placements, key=lambda p: self.twins.get(p.line, p.line))  # as their threads wrote them
        wrappers = _wrapper_lines(ordered, self.facts, blocks) if self.facts.graphs_known else {}
        eager = self.eager
        following = _next_eager(ordered, self.threads)
        for p in placements:
            span = self.span_of(p.line)
            if span is not None:
                yield self.in_span(p, span)
                continue
            if p.kind == PlacementKind.EAGER and p.line in eager:
                yield self.eager_op(p, eager[p.line])
                continue
            op_line = wrappers.get(p.line)
            if op_line is not None and op_line in eager and following.get(p.line) == op_line:  # its thread's very next op:
                yield replace(self.eager_op(p, eager[op_line]), wrapper=True)  # the wrapper asked what it asked
                continue
            own = p.kind != PlacementKind.EAGER and p.line not in wrappers  # a wrapper takes no graph's facts
            explained = self.one(p, self.lookup(p, blocks.get(p.line)) if own else None,
                                 self.specs_of(blocks.get(p.line)) if p.kind != PlacementKind.EAGER else None)
            explained = self.variable_named(explained, blocks.get(p.line))
            yield replace(explained, wrapper=True) if p.line in wrappers else explained

    def variable_named(self, p: Placement, graphs: frozenset[int] | None) -> Placement:
        """A node that follows its resource input, where that input is a captured variable's
        placeholder: its reason names the variable."""
        reason = p.reason
        if p.status != WITH_RESOURCE or not isinstance(reason, Message) \
                or reason.template != messages.WITH_REFERENCE_INPUT or not self.facts.graph_captures:
            return p
        captures = self.facts.graph_captures
        chosen = range(len(captures)) if graphs is None else sorted(i for i in graphs if i < len(captures))
        source = str(reason.fields["source"])
        names = {captures[i][source] for i in chosen if source in captures[i]}
        if len(names) != 1:
            return p
        return replace(p, reason=Message(messages.WITH_VARIABLE_INPUT, name=names.pop(), **reason.fields))

    def nodes_of(self, graphs: frozenset[int] | None) -> Mapping[tuple[str, str | None], NodeFacts]:
        """The nodes of these recorded graphs (None: of every graph)."""
        if graphs is None or self.facts.graphs is None:
            return self.facts.nodes
        found = self._nodes_of.get(graphs)
        if found is None:
            chosen = self.facts.graphs
            found = merge_nodes(n for i in sorted(graphs) for n in chosen[i].values())
            self._nodes_of[graphs] = found
        return found

    def specs_of(self, graphs: frozenset[int] | None) -> tuple[DeviceSpec, ...] | None:
        """The devices of the Sessions that ran these graphs, where every one of them is known (None:
        the process's devices)."""
        known = self.facts.graph_devices
        if not graphs or not known or any(i >= len(known) or known[i] is None for i in graphs):
            return None
        return _specs(name for i in graphs for name in known[i] or ())

    def span_of(self, line: int) -> Span | None:
        i = bisect_right(self.span_starts, line) - 1
        if i < 0 or line > self.facts.spans[i].last:
            return None
        return self.facts.spans[i]

    def in_span(self, p: Placement, span: Span) -> Placement:
        """A line written while a run command's eager code ran under a request it knows. Outside a
        tf.function call every line is an eager op or a line of the single-op function TF wraps it in:
        each carries the span's request. A function call's own lines are its body: graph facts."""
        if span.calls_function and p.kind != PlacementKind.EAGER:
            explained = self.one(p, self.lookup(p))
            return replace(explained, group=explained.group or span.group)
        wrapper = p.kind != PlacementKind.EAGER
        if wrapper and p.op in PLUMBING_OPS:
            return replace(p, requested=None, status=LOGGED, group=span.group, reason=self.on_cpu_reason(p, None),
                           wrapper=True)
        want = try_parse(span.requested)
        node = NodeFacts(name=p.node or "", op=p.op, requested=span.requested, group=span.group,
                         unchecked=(want.device_type,) if want and want.device_type else ())  # attrs never checked
        return replace(self.one(p, node), wrapper=wrapper)

    def eager_op(self, p: Placement, record: EagerRecord) -> Placement:
        """An eager op whose request was recorded as it ran (its attrs' kernels never checked). One that
        took a resource and ran on that resource's device, not where it asked, was put there by
        TensorFlow's rule for eager ops (MaybePinToResourceDevice, eager/placement_utils.cc): an eager
        op with a resource input runs where the resource lives, whatever the scope, soft placement on
        or off. That is no fallback."""
        requested = record.requested
        want = try_parse(requested) if requested else None
        there = try_parse(record.resource_device) if record.resource_device else None
        if want is not None and there is not None and not want.satisfied_by(p.spec) \
                and there.canonical == p.spec.canonical:
            return replace(p, requested=requested, status=WITH_RESOURCE, reason=resource_reason(record, p.short))
        node = NodeFacts(name=p.node or "", op=p.op, requested=requested or None,
                         unchecked=(want.device_type,) if want and want.device_type else ())
        return self.one(p, node)

    def lookup(self, p: Placement, graphs: frozenset[int] | None = None) -> NodeFacts | None:
        """The facts of a placer node in the recorded graphs its lines can come from (``graphs``; None:
        any), also when TF inlined its function into a caller: the node is then named
        ``<call node>/<name>`` and, having no device of its own, takes the call node's."""
        return self._resolve(p.line, self.nodes_of(graphs), p.node or "", (p.op,))

    def _resolve(self, line: int, nodes: Mapping[tuple[str, str | None], NodeFacts], name: str,
                 ops: tuple[str | None, ...]) -> NodeFacts | None:
        """The facts of the node ``name`` (of one of ``ops``) placed at ``line``. A call node may itself sit
        in a body TF inlined or lowered (a tf.cond in a tf.while_loop's body, ``while/body/_1/while/cond``;
        a tf.function called by another one): it is resolved the same way, so a body's node that asked
        for nothing takes the request its innermost call node had, however deep."""
        found = next((nodes[(name, op)] for op in ops if (name, op) in nodes), None)
        for prefix, caller, rest, _lowered in calls_in(name):
            if found is not None:
                break
            callee = self.nodes_of(self._callees.get((self._runs.get(line, -1), prefix)))
            inner = next((callee[(rest, op)] for op in ops if (rest, op) in callee), None)
            if inner is None or inner.requested:
                found = inner
                continue
            call = self._resolve(line, nodes, caller, _CALL_OPS)
            if call is not None:  # a call that asked for no device leaves the body free, as the graph has it
                found = replace(inner, requested=call.requested)
        return found

    def one(self, p: Placement, node: NodeFacts | None, specs: tuple[DeviceSpec, ...] | None = None) -> Placement:
        """``specs``: the devices of the Session that placed it, where known (else the process's)."""
        gpu = None if specs is None else any(s.device_type == "GPU" for s in specs)  # the Session's own GPUs
        if node is None and not self.facts.complete:
            return replace(p, requested=None, status=LOGGED, reason=self.on_cpu_reason(p, None, gpu))
        node = node or NodeFacts(name=p.node or "")
        if not node.request_known:
            return replace(p, requested=None, status=LOGGED, group=node.group, reason=self.on_cpu_reason(p, node, gpu))
        if not node.requested:
            return replace(p, requested=None, status=FREE, group=node.group, reason=self.on_cpu_reason(p, node, gpu))
        want = try_parse(node.requested)
        if want is None or want.satisfied_by(p.spec):
            return replace(p, requested=node.requested, status=AS_REQUESTED, group=node.group)
        if p.status == WITH_RESOURCE and p.kind != PlacementKind.EAGER:  # the log said so: it follows its reference input
            return replace(p, requested=node.requested, group=node.group)  # (logparse.ignored.settle): no fallback
        return replace(p, requested=node.requested, status=SOFT_FALLBACK, group=node.group,
                       reason=self.fallback_reason(want, p, node, self.specs if specs is None else specs))

    def fallback_reason(self, want: DeviceSpec, p: Placement, node: NodeFacts, specs: tuple[DeviceSpec, ...]) -> Message:
        """Why the placer did not honour a request, among the devices it had (``specs``)."""
        if not any(want.satisfied_by(s) for s in specs):
            names = ", ".join(s.short for s in specs) or messages.NONE_LISTED
            return Message(messages.MISSING, device=want.short, names=names)
        found = self.kernel_reason(p, node, want.device_type) or self.colocation_reason(p, node)
        if found:
            return found
        if not self.kernels_known(p, node, want.device_type):
            return Message(messages.UNCHECKED, device=want.short)
        return Message(messages.HAS_KERNEL, device=want.short)

    def on_cpu_reason(self, p: Placement, node: NodeFacts | None, gpu: bool | None = None) -> Message | None:
        """Why an op that asked for no device sits on a CPU while a GPU exists (``gpu``: whether its
        Session had one, where known; else whether the process has one)."""
        if not (self.gpu_exists if gpu is None else gpu) or p.spec.device_type != "CPU":
            return None
        return self.kernel_reason(p, node, "GPU") or self.colocation_reason(p, node) or UNKNOWN

    def kernel_reason(self, p: Placement, node: NodeFacts | None, device_type: str | None) -> Message | None:
        op = p.op or (node.op if node else None)
        if not device_type or not op:
            return None
        if not has_kernel(self.facts.kernels, op, device_type):
            return Message(messages.NO_KERNEL, device_type=device_type, op=op)
        if node is not None and device_type in node.no_kernel:
            return Message(messages.NO_TYPED_KERNEL, device_type=device_type, op=op)
        return None

    def kernels_known(self, p: Placement, node: NodeFacts | None, device_type: str | None) -> bool:
        """Whether the registry and this node's own kernel check could both be read."""
        op = p.op or (node.op if node else None)
        if self.facts.kernels is None and op:
            return False
        return node is None or device_type not in node.unchecked

    def colocation_reason(self, p: Placement, node: NodeFacts | None) -> Message | None:
        for partner in node.partners if node else ():
            if self.where.get(partner) == {p.canonical}:
                kinds = self.ops_by_name.get(partner, set())
                kind = next(iter(kinds)) if len(kinds) == 1 else None
                if kind:
                    return Message(messages.COLOCATED_KIND, partner=partner, kind=kind, device=p.short)
                return Message(messages.COLOCATED, partner=partner, device=p.short)
        return None


_ARGS = frozenset({"_Arg", "_DeviceArg"})
_UNIQUE = re.compile(r"(.+)_\d+")  # TensorFlow's suffix that keeps a function's argument names apart
_RETVALS = frozenset({"_Retval", "_DeviceRetval"})


def _graph_blocks(placements: tuple[Placement, ...], graphs: tuple[Mapping[tuple[str, str | None], NodeFacts], ...],
                  session_runs: tuple[int, ...] = (), graph_names: tuple[str | None, ...] = ()
                  ) -> tuple[dict[int, frozenset[int] | None], dict[int, int]]:
    """Which recorded graphs each placer line can come from, by line. The placer logs one graph's
    nodes together: a run of placer lines, ended by an eager line, by a name the run already had,
    by a node that none of the graphs the run could be so far has, or where a wrapper function's
    node (named after its op type, in no recorded graph) meets a recorded graph's node (where
    TensorFlow's INFO lines are hidden, the log's placer lines come without the eager lines between
    them). A run holds only the nodes
    of the graphs it is given (an argument, ``_Arg``, is one of the graph's placeholders; TF's own
    nodes no graph has, and return values, fit any); an empty set: a graph placement did not
    record (an eager op's wrapper function), whose nodes take no recorded graph's facts. A run that only
    Session graphs fit takes the graph of the next Session run among them (``session_runs``: TensorFlow
    places a Session's graph at its first run), so two Sessions' graphs with the same names keep apart;
    a run of a tf.function's lines (``Placement.graph``, ``__inference_NAME_N``) takes, among the graphs it
    fits, the recorded graphs named NAME: the k-th trace of NAME in the log, the k-th recorded, where
    both count the same."""
    names = [{name for name, _ in graph} for graph in graphs]
    args = [{arg_name(name) for name, op in graph if op == "Placeholder"} for graph in graphs]  # as TF names them
    sessions = set(session_runs)
    queue = list(session_runs)
    traced = function_traces(placements, graph_names)
    everywhere = set().union(*names) if names else set()
    calls = [{name for name, op in graph if op in _CALL_OPS} for graph in graphs]
    any_call = set().union(*calls) if calls else set()

    def fits(p: Placement) -> frozenset[int] | None:
        name = p.node or ""
        if p.op in _RETVALS:
            return None
        if p.op in _ARGS:  # a placeholder's name, or the argument TensorFlow made of it (AssignVariableOp/resource:
            unique = _UNIQUE.fullmatch(name)  # assignvariableop_resource; a second one: ..._resource_0)
            return frozenset(i for i, known in enumerate(names) if name in known or name in args[i]
                             or (unique is not None and unique.group(1) in args[i]))
        found = {i for i, graph in enumerate(graphs) if (name, p.op) in graph}
        callers = [caller for _prefix, caller, _rest, lowered in calls_in(name) if not lowered or caller in any_call]
        found.update(i for i, known in enumerate(calls) if any(c in known for c in callers))
        if not found and name not in everywhere and not callers:
            return None  # a node TensorFlow added (no graph has its name): any graph may hold it
        return frozenset(found)

    found: dict[int, frozenset[int] | None] = {}
    runs: dict[int, int] = {}
    function: list[str | None] = [None]  # the tf.function of the run's lines, where the log says
    block: list[int] = []
    seen: set[str] = set()
    fit: frozenset[int] | None = None
    count = [0]

    def close() -> None:
        mine = fit
        named = traced.get(function[0]) if block and mine and len(mine) > 1 else None
        if named and mine is not None and mine & named:
            mine = mine & named
        if block and mine and mine <= sessions:  # a Session's graph: the next Session run among them
            first = next((i for i, g in enumerate(queue) if g in mine), None)
            if first is not None:
                mine = frozenset((queue.pop(first),))
        for line in block:
            found[line] = mine
            runs[line] = count[0]
        count[0] += 1
        block.clear()
        seen.clear()

    for p in sorted(placements, key=lambda p: p.line):
        if p.kind != PlacementKind.PLACER:
            close()
            fit = None
            continue
        mine = fits(p)
        name = p.node or ""
        own = name == p.op and "/" not in name  # named after its op type: a wrapper function's node, maybe
        if name in seen or (fit and mine is not None and not fit & mine):
            close()
            fit = None
        elif fit and mine is None and own:  # no recorded graph has it: an eager op's wrapper begins
            close()
            fit = frozenset()
        elif fit is not None and not fit and mine and not own:  # a recorded graph's own node ends a wrapper
            close()
            fit = None
        fit = mine if fit is None else fit if mine is None else fit & mine
        function[0] = p.graph
        block.append(p.line)
        seen.add(p.node or "")
    close()
    return found, runs


def _callees(placements: tuple[Placement, ...], graphs: tuple[Mapping[tuple[str, str | None], NodeFacts], ...],
             blocks: Mapping[int, frozenset[int] | None], runs: Mapping[int, int]) -> dict[tuple[int, str], frozenset[int]]:
    """For each run of placer lines and each function call TF inlined in it (``<call node>/<name>``
    nodes), the recorded graphs other than the caller's that hold every such node of that call:
    the called function's body, found by all its nodes, not by one name."""
    found: dict[tuple[int, str], frozenset[int]] = {}
    for p in placements:
        if p.kind != PlacementKind.PLACER or not p.node or p.line not in runs:
            continue
        for prefix, _caller, rest, _lowered in calls_in(p.node):
            own = blocks.get(p.line) or frozenset()
            holders = frozenset(g for g, graph in enumerate(graphs) if (rest, p.op) in graph and g not in own)
            if not holders:  # a node TF made while inlining, or renamed: it says nothing of the callee
                continue
            key = (runs[p.line], prefix)
            found[key] = found[key] & holders if key in found else holders
    return {key: graphs_ for key, graphs_ in found.items() if graphs_}


def _wrapper_lines(ordered: list[Placement], facts: Facts,
                   blocks: Mapping[int, frozenset[int] | None]) -> dict[int, int]:
    """Placer lines of the single-op functions TF 2.x wraps eager ops in: a node named after its
    op type that no recorded graph placed there has, and that the log then shows executing eagerly
    (each with the line of that eager op). One that recorded tf.functions have too (a Cast, a NoOp) is
    one where the log ties it to no function (no ``graph``) and the very next eager line runs its op.
    ``ordered``: the placements in the order they were written (a bare copy where its glog twin came)."""
    wrappers: dict[int, int] = {}
    waiting: dict[str, list[int]] = {}
    shadowed: list[tuple[str, int]] = []  # such nodes since the last eager line
    names = facts.graph_names
    for p in ordered:
        fit = blocks.get(p.line)
        unrecorded = (p.node, p.op) not in facts.nodes if fit is None else not fit
        if p.kind == PlacementKind.PLACER and p.node and p.node == p.op and unrecorded:
            waiting.setdefault(p.node, []).append(p.line)
        elif p.kind == PlacementKind.PLACER and p.node and p.node == p.op and p.graph is None and fit \
                and all(i < len(names) and names[i] for i in fit):
            shadowed.append((p.node, p.line))
        elif p.kind == PlacementKind.EAGER and p.op:
            ops = (p.op, onednn_base(p.op) or p.op)  # (a oneDNN op's base, or the op again: popped once)
            for name in ops:
                wrappers.update(dict.fromkeys(waiting.pop(name, ()), p.line))
            wrappers.update((line, p.line) for name, line in shadowed if name in ops)
            shadowed.clear()
    return wrappers


def _next_eager(ordered: list[Placement], threads: Mapping[int, int | None]) -> dict[int, int]:
    """Placer line -> the first eager line after it written by its thread, where both name the thread:
    TensorFlow places an eager op's wrapper function just before it runs the op, in the same thread.
    ``ordered``: the placements in the order they were written (a bare copy where its glog twin came)."""
    found: dict[int, int] = {}
    waiting: dict[int, list[int]] = {}
    for p in ordered:
        thread = threads.get(p.line)
        if thread is not None and p.kind == PlacementKind.PLACER:
            waiting.setdefault(thread, []).append(p.line)
        elif thread is not None and p.kind == PlacementKind.EAGER:
            found.update(dict.fromkeys(waiting.pop(thread, ()), p.line))
    return found


def has_kernel(kernels: Mapping[str, frozenset[str]] | None, op: str, device_type: str) -> bool:
    """True unless the registry is known and lists no kernel of op for device_type."""
    if kernels is None or op not in kernels:
        return True  # unknown registry, or a function call: not ours to say
    types = kernels[op]
    return device_type in types or (device_type != "CPU" and _DEFAULT in types)


def merge_nodes(records: Iterable[NodeFacts]) -> dict[tuple[str, str | None], NodeFacts]:
    """Nodes of many graphs by (name, op type). Where graphs disagree, only what holds for all of them
    is kept: partners and missing kernels they share; a pair whose requests differ keeps neither (its
    request is unknown, never taken for "asked for nothing")."""
    merged: dict[tuple[str, str | None], NodeFacts] = {}
    for facts in records:
        key = facts.key
        seen = merged.get(key)
        if seen is None:
            merged[key] = facts
        elif not seen.request_known:
            continue
        elif (seen.requested, seen.group, seen.request_known) != (facts.requested, facts.group, facts.request_known):
            merged[key] = NodeFacts(name=seen.name, op=seen.op, request_known=False,
                                    group=seen.group if seen.group == facts.group else None)
        elif seen != facts:
            merged[key] = replace(seen, partners=tuple(p for p in seen.partners if p in facts.partners),
                                  no_kernel=tuple(t for t in seen.no_kernel if t in facts.no_kernel),
                                  unchecked=tuple(dict.fromkeys((*seen.unchecked, *facts.unchecked))))
    return merged
