"""Why an op sits where it does: the placer's reasons, worked out from facts recorded beside the log."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from placement_cli import messages
from placement_cli.blocks import CALL_OPS, callees, calls_in, graph_blocks, next_eager, wrapper_lines
from placement_cli.devices import DeviceSpec, device_name, try_parse
from placement_cli.eagerjoin import eager_records
from placement_cli.i18n import Message
from placement_cli.messages import UNKNOWN
from placement_cli.model import AS_REQUESTED, FREE, LOGGED, SOFT_FALLBACK, WITH_RESOURCE, Placement
from placement_cli.model.facts import Facts, NodeFacts, Span
from placement_cli.model.kinds import PlacementKind
from placement_cli.model.ops import PLUMBING_OPS
from placement_cli.tfrules import (
    EagerRecord,
    call_functions,
    compiled_bodies,
    compiled_reason,
    resource_reason,
    session_devices,
)

# Kernels registered for DEFAULT serve every device type but the CPU (TF's kernel lookup falls back to them).
_DEFAULT = "DEFAULT"

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


def explain(placements: Iterable[Placement], facts: Facts) -> tuple[Placement, ...]:
    """Each placement with what was requested, its status and, where one is due, the reason."""
    placements = tuple(placements)
    eager = eager_records(placements, facts.eager) if facts.eager is not None else {}
    where: dict[str, set[str]] = {}
    for p in placements:
        if p.node:
            where.setdefault(p.node, set()).add(p.canonical)
    specs = _specs(facts.available)
    gpu_exists = any(s.device_type == "GPU" for s in specs) or any(p.spec.device_type == "GPU" for p in placements)
    explained = _Explainer(facts, specs, where, gpu_exists, eager).all(placements)
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
    blocks, _runs = graph_blocks(placements, facts.graphs)
    for p in placements:
        if p.kind != PlacementKind.PLACER or p.node not in named or p.op not in CALL_OPS:
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
            blocks, runs = graph_blocks(placements, self.facts.graphs, self.facts.session_runs,
                                         self.facts.graph_names)
            self._callees = callees(placements, self.facts.graphs, blocks, runs)
        self._runs = runs
        ordered = sorted(placements, key=lambda p: p.twin or p.line)  # as their threads wrote them
        wrappers = wrapper_lines(ordered, self.facts, blocks) if self.facts.graphs_known else {}
        eager = self.eager
        following = next_eager(ordered)
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
        want = span.requested.request if span.requested else None
        node = NodeFacts(name=p.node or "", op=p.op, requested=span.requested, group=span.group,
                         unchecked=(want.device_type,) if want and want.device_type else ())  # attrs never checked
        return replace(self.one(p, node), wrapper=wrapper)

    def eager_op(self, p: Placement, record: EagerRecord) -> Placement:
        """An eager op whose request was recorded as it ran (its attrs' kernels never checked). One that
        took a resource and ran on that resource's device, not where it asked, was put there by
        TensorFlow's rule for eager ops (MaybePinToResourceDevice, eager/placement_utils.cc): an eager
        op with a resource input runs where the resource lives, whatever the scope, soft placement on
        or off. That is no fallback."""
        requested = device_name(record.requested or None)
        want = requested.request if requested else None
        there = try_parse(record.resource_device) if record.resource_device else None
        if want is not None and there is not None and not want.satisfied_by(p.spec) \
                and there.canonical == p.spec.canonical:
            return replace(p, requested=requested, status=WITH_RESOURCE, reason=resource_reason(record, p.short))
        node = NodeFacts(name=p.node or "", op=p.op, requested=requested,
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
            call = self._resolve(line, nodes, caller, CALL_OPS)
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
        want = node.requested.request
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
