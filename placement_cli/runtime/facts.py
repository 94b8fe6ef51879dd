"""Facts read from TensorFlow beside the log: each node's request and partners, and the kernel registry."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from contextlib import nullcontext
from typing import Any

from placement_cli.devices import try_parse
from placement_cli.i18n import Wording
from placement_cli.model import Edge
from placement_cli.model.facts import NodeFacts
from placement_cli.runtime import private
from placement_cli.runtime.capture.fdcapture import silenced
from placement_cli.why import merge_nodes


def kernel_map() -> dict[str, frozenset[str]] | None:
    """Op type -> the device types with a registered kernel; None where the registry cannot be read."""
    return private.registered_kernels()


def kernel_checks(devices: Iterable[str]) -> tuple[str, ...]:
    """The device types every node's kernels are checked against: the GPU, where one exists."""
    return ("GPU",) if any(s and s.device_type == "GPU" for s in map(try_parse, devices)) else ()


def graph_nodes(ops: Iterable[Any], kernels: Mapping[str, frozenset[str]] | None, check: Iterable[str] = (),
                groups: Mapping[str, Wording] | None = None) -> list[NodeFacts]:
    """Facts of each graph op: its device field, the nodes it must share a device with, and
    which device types (its requested one, plus ``check``) have no kernel for its very attrs.
    Every op gives a node: its request comes from the public ``op.device`` alone; a kernel check
    that cannot be made leaves that device type in the node's ``unchecked`` (its reasons say unknown)."""
    check = tuple(check)
    lookup = private.kernel_lookup()
    with silenced():  # every failed kernel lookup prints a warning
        return [_node(op, kernels, lookup, check, groups or {}) for op in ops]


def _partners(op: Any) -> list[str]:
    partners = [g.decode()[len("loc:@"):] for g in op.colocation_groups() if g.startswith(b"loc:@")]
    partners = [n for n in partners if n != op.name]
    return partners + [t.op.name for t in op.inputs if t.dtype.name == "resource" or t.dtype.base_dtype != t.dtype]


def _node(op: Any, kernels: Mapping[str, frozenset[str]] | None, lookup: Callable[[bytes], bool] | None,
          check: tuple[str, ...], groups: Mapping[str, Wording]) -> NodeFacts:
    requested = op.device or None  # public APIs only: no private API can lose a request
    partners = _partners(op)
    wanted = try_parse(requested)
    types = sorted({*check, *([wanted.device_type] if wanted and wanted.device_type else [])})
    no_kernel: list[str] = []
    unchecked: list[str] = []
    if types and (kernels is None or op.type in kernels):  # a function call is not in the registry
        node_def = _node_def(op) if lookup is not None else None
        for device_type in types:
            if lookup is None or node_def is None:
                unchecked.append(device_type)
                continue
            node_def.device = f"/device:{device_type}:0"
            try:
                if not lookup(node_def.SerializeToString()):
                    no_kernel.append(device_type)
            except Exception:  # noqa: BLE001 - this node's kernels stay unknown (the lookup noted why)
                unchecked.append(device_type)
    return NodeFacts(name=op.name, op=op.type, requested=requested, partners=tuple(dict.fromkeys(partners)),
                     no_kernel=tuple(no_kernel), unchecked=tuple(unchecked), group=groups.get(op.name))


def _node_def(op: Any) -> Any:
    try:
        return op.node_def
    except Exception as exc:  # noqa: BLE001 - no NodeDef: no kernel check, and the run says so
        private.note("kernel_lookup", f"cannot read {op.name}'s NodeDef: {type(exc).__name__}: {exc}")
        return None


class GraphRecorder:
    """Keeps every graph the placer will see: tf.function graphs as they are traced, Session graphs as added."""

    def __init__(self) -> None:
        self.graphs: dict[int, Any] = {}  # id -> graph, kept alive until read
        self.devices: dict[int, list[str]] = {}  # id -> the devices of the Session that runs it
        self.functions_recorded = True

    def add(self, graph: Any) -> None:
        self.graphs[id(graph)] = graph

    def devices_of(self, graph: Any, devices: list[str]) -> None:
        """The devices a Session that runs ``graph`` has (two Sessions of one graph: the devices of both)."""
        self.devices[id(graph)] = sorted({*self.devices.get(id(graph), ()), *devices})

    def device_lists(self) -> list[list[str] | None]:
        """Each recorded graph's Session devices, in per_graph's order (None: no Session ran it)."""
        return [self.devices.get(key) for key in list(self.graphs)]

    def install(self) -> Callable[[], None]:
        """Record each tf.function graph as it is traced; returns the undo."""
        func_graph = private.func_graph_module()
        if func_graph is None:  # tf.function graphs go unrecorded: their nodes' requests stay unknown
            self.functions_recorded = False
            return lambda: None
        original = func_graph.func_graph_from_py_func
        own_frames = private.frame_filter() or nullcontext  # made here: this module's frames left out

        def recording(*args: Any, **kwargs: Any) -> Any:
            # the program's ops are created under this frame: TensorFlow keeps their stacks for its errors
            # ("Detected at node X defined at"), which show the program's frames, never placement's
            with own_frames():
                graph = original(*args, **kwargs)
            self.add(graph)
            return graph

        func_graph.func_graph_from_py_func = recording

        def undo() -> None:
            func_graph.func_graph_from_py_func = original

        return undo

    def nodes(self, kernels: Mapping[str, frozenset[str]] | None, check: Iterable[str] = (),
              groups: Mapping[str, Wording] | None = None) -> dict[tuple[str, str | None], NodeFacts]:
        return merge_nodes(record for graph in self.per_graph(kernels, check, groups) for record in graph)

    def per_graph(self, kernels: Mapping[str, frozenset[str]] | None, check: Iterable[str] = (),
                  groups: Mapping[str, Wording] | None = None) -> list[list[NodeFacts]]:
        """Each recorded graph's nodes, graph by graph (a node's request belongs to its own graph)."""
        return [graph_nodes(graph.get_operations(), kernels, check, groups) for graph in list(self.graphs.values())]

    def calls(self) -> list[dict[str, str]]:
        """Each recorded graph's function call nodes -> the function each calls, in per_graph's order."""
        found: list[dict[str, str]] = []
        for graph in list(self.graphs.values()):
            calls = {}
            for op in graph.get_operations():
                if op.type in ("PartitionedCall", "StatefulPartitionedCall"):
                    try:
                        calls[op.name] = op.get_attr("f").name
                    except Exception:  # noqa: BLE001 - its function stays unknown: not known to be compiled
                        continue
            found.append(calls)
        return found

    def captured(self) -> list[dict[str, str]]:
        """Each recorded graph's placeholders of captured variables -> the variable's name, in
        per_graph's order (a tf.function's _Arg ``read_readvariableop_resource`` is variable ``v``)."""
        found: list[dict[str, str]] = []
        for graph in list(self.graphs.values()):
            names: dict[str, str] = {}
            try:
                handles = {id(v.handle): v.name.split(":")[0] for v in getattr(graph, "variables", None) or ()}
                for external, internal in getattr(graph, "captures", None) or ():
                    if id(external) in handles:  # the _Arg is the placeholder's name as a function's
                        names[internal.op.name] = handles[id(external)]  # argument: lower case, [a-z0-9_]
                        names[re.sub(r"[^a-z0-9_]", "_", internal.op.name.lower())] = handles[id(external)]
            except Exception:  # noqa: BLE001 - its variables stay unnamed: reasons name the placeholder
                names = {}
            found.append(names)
        return found

    def edges(self) -> tuple[Edge, ...]:
        """Every recorded graph's edges, producer -> consumer (control edges marked), each once."""
        found: dict[Edge, None] = {}
        for graph in list(self.graphs.values()):
            for op in graph.get_operations():
                for tensor in op.inputs:
                    found[Edge(tensor.op.name, op.name)] = None
                for control in op.control_inputs:
                    found.setdefault(Edge(control.name, op.name, control=True), None)
        return tuple(found)


_MUST_COMPILE = "_XlaMustCompile"  # the attr tf.function(jit_compile=True) sets on its function
_CALL_ATTRS = ("f",)  # a function call node's function (PartitionedCall, StatefulPartitionedCall)


def xla_compiled(functions: Iterable[str]) -> dict[str, list[list[str]]] | None:
    """Of the functions that ran (their eager op types), those compiled by XLA, each with its body's
    nodes ``[name, op type, device field]``, the bodies of the functions it calls inside it as
    ``<call node>/<name>`` (they run in the same cluster). None: the function library could not be read."""
    get = private.function_def()
    if get is None:
        return None
    found: dict[str, list[list[str]]] = {}
    for name in sorted(set(functions)):
        if not name.startswith(("__inference_", "__forward_")):  # a gradient-recording call runs __forward_f_N
            continue
        try:
            fdef = get(name)
        except Exception:  # noqa: BLE001 - not a function, or one TensorFlow forgot: not compiled as far as known
            continue
        if _MUST_COMPILE in fdef.attr and fdef.attr[_MUST_COMPILE].b:
            found[name] = _body(get, fdef, "", set())
    return found


def _body(get: Callable[[str], Any], fdef: Any, prefix: str, seen: set[str]) -> list[list[str]]:
    nodes: list[list[str]] = []
    for node in fdef.node_def:
        nodes.append([prefix + node.name, node.op, node.device])
        for key in _CALL_ATTRS:
            callee = node.attr[key].func.name if key in node.attr else ""
            if callee and callee not in seen:
                try:
                    inner = get(callee)
                except Exception:  # noqa: BLE001 - its body stays out: the call node itself is listed
                    continue
                nodes.extend(_body(get, inner, f"{prefix}{node.name}/", seen | {callee}))
    return nodes


def placed_before(calls: Iterable[str], logged: Iterable[tuple[str, str]]) -> list[str] | None:
    """Of the functions a capture()'s block called (its eager ops' types), those whose body TensorFlow
    had placed before the block: TensorFlow logs a function's placements once, when it first places
    it, not at each call, so a function that ran before the block shows only its call line in it.
    A function counts as placed in the block when any node of its body (name, op type) has a placer
    line there; one XLA compiles is never logged (its body is read from the library instead), and one
    with no node of its own (an identity) tells nothing. None: the function library could not be read."""
    get = private.function_def()
    if get is None:
        return None
    seen = set(logged)
    found = []
    for name in sorted(set(calls)):
        if not name.startswith(("__inference_", "__forward_")):
            continue
        try:
            fdef = get(name)
        except Exception:  # noqa: BLE001 - no function TensorFlow knows by that name: nothing to say of it
            continue
        if _MUST_COMPILE in fdef.attr and fdef.attr[_MUST_COMPILE].b:
            continue
        body = {(node.name, node.op) for node in fdef.node_def}
        if body and not body & seen:
            found.append(name)
    return found
