"""Facts read from TensorFlow beside the log: each node's request and partners, and the kernel registry."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from placement_cli.devices import try_parse
from placement_cli.fdcapture import silenced
from placement_cli.why import NodeFacts, merge_nodes


def kernel_map() -> dict[str, frozenset[str]]:
    """Op type -> the device types with a registered kernel (one call: the whole registry)."""
    from tensorflow.python.framework import kernels  # noqa: PLC0415

    found: dict[str, set[str]] = {}
    for kernel in kernels.get_all_registered_kernels().kernel:
        found.setdefault(kernel.op, set()).add(kernel.device_type)
    return {op: frozenset(types) for op, types in found.items()}


def kernel_checks(devices: Iterable[str]) -> tuple[str, ...]:
    """The device types every node's kernels are checked against: the GPU, where one exists."""
    return ("GPU",) if any(s and s.device_type == "GPU" for s in map(try_parse, devices)) else ()


def graph_nodes(ops: Iterable[Any], kernels: Mapping[str, frozenset[str]], check: Iterable[str] = (),
                groups: Mapping[str, str] | None = None) -> list[NodeFacts]:
    """Facts of each graph op: its device field, the nodes it must share a device with, and
    which device types (its requested one, plus ``check``) have no kernel for its very attrs."""
    check = tuple(check)
    found = []
    with silenced():  # every failed kernel lookup prints a warning
        for op in ops:
            try:
                found.append(_node(op, kernels, check, groups or {}))
            except Exception:  # noqa: BLE001 - an op we cannot read stays unknown; the others still count
                continue
    return found


def _node(op: Any, kernels: Mapping[str, frozenset[str]], check: tuple[str, ...], groups: Mapping[str, str]) -> NodeFacts:
    from tensorflow.python.util import _pywrap_kernel_registry as registry  # noqa: PLC0415

    partners = [g.decode()[len("loc:@"):] for g in op.colocation_groups() if g.startswith(b"loc:@")]
    partners = [n for n in partners if n != op.name]
    partners += [t.op.name for t in op.inputs if t.dtype.name == "resource" or t.dtype.base_dtype != t.dtype]
    wanted = try_parse(op.device)
    types = {*check, *([wanted.device_type] if wanted and wanted.device_type else [])}
    no_kernel: list[str] = []
    if types and op.type in kernels:  # a function call is not in the registry: nothing to check
        node_def = op.node_def
        for device_type in sorted(types):
            node_def.device = f"/device:{device_type}:0"
            if not registry.TryFindKernelClass(node_def.SerializeToString()):
                no_kernel.append(device_type)
    return NodeFacts(name=op.name, op=op.type, requested=op.device or None, partners=tuple(dict.fromkeys(partners)),
                     no_kernel=tuple(no_kernel), group=groups.get(op.name))


class GraphRecorder:
    """Keeps every graph the placer will see: tf.function graphs as they are traced, Session graphs as added."""

    def __init__(self) -> None:
        self.graphs: dict[int, Any] = {}  # id -> graph, kept alive until read

    def add(self, graph: Any) -> None:
        self.graphs[id(graph)] = graph

    def install(self) -> Callable[[], None]:
        """Record each tf.function graph as it is traced; returns the undo."""
        from tensorflow.python.framework import func_graph  # noqa: PLC0415

        original = func_graph.func_graph_from_py_func

        def recording(*args: Any, **kwargs: Any) -> Any:
            graph = original(*args, **kwargs)
            self.add(graph)
            return graph

        func_graph.func_graph_from_py_func = recording

        def undo() -> None:
            func_graph.func_graph_from_py_func = original

        return undo

    def nodes(self, kernels: Mapping[str, frozenset[str]], check: Iterable[str] = (),
              groups: Mapping[str, str] | None = None) -> dict[tuple[str, str | None], NodeFacts]:
        return merge_nodes(record for graph in list(self.graphs.values())
                           for record in graph_nodes(graph.get_operations(), kernels, check, groups))
