"""Bytes between devices per step: a traced Session run's partition graphs joined with its step stats.

Step stats describe each executed node's outputs (dtype, shape, allocated bytes) but list no
``_Send``/``_Recv``; the partition graphs list every ``_Send`` (its input is ``producer:slot``,
its ``_src``/``_dst`` attrs name the original graph's producer and consumer). Joining the two gives
what each copy carries. A size that neither the step stats nor the graph's static shape give stays
``None`` (unknown), never a guess.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from placement_cli.devices import crosses_memory
from placement_cli.model import Copy
from placement_cli.runtime.partitions import between_devices

Output = tuple[int, tuple[int, ...] | None, int | None]  # (dtype enum, shape, allocated bytes)


@dataclass(frozen=True)
class Traced:
    """One traced Session run: its value, its copies with bytes, and the op types it executed."""

    value: Any
    copies: list[Copy]
    executed: tuple[tuple[str, int], ...]  # (op type, nodes) of the partition graphs, most first
    metadata: Any = None  # the run's RunMetadata (step stats, partition graphs)


def traced_run(tf: Any, sess: Any, fetches: Any, feed_dict: Any = None, *, virtual_gpus: bool = False) -> Traced:
    """``sess.run`` traced (FULL_TRACE, partition graphs): the value and every copy with its bytes."""
    value, metadata = metadata_run(tf, sess, fetches, feed_dict)
    copies = list(copies_with_bytes(tf, metadata.partition_graphs, metadata.step_stats, sess.graph,
                                    virtual_gpus=virtual_gpus))
    return Traced(value, copies, executed_ops(metadata.partition_graphs), metadata)


def metadata_run(tf: Any, sess: Any, fetches: Any, feed_dict: Any = None) -> tuple[Any, Any]:
    """``sess.run`` traced (FULL_TRACE, partition graphs): its value and its RunMetadata."""
    run_options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE,
                                          output_partition_graphs=True)
    metadata = tf.compat.v1.RunMetadata()
    value = sess.run(fetches, feed_dict=feed_dict, options=run_options, run_metadata=metadata)
    return value, metadata


def executed_ops(partition_graphs: Any) -> tuple[tuple[str, int], ...]:
    """How many nodes of each op type the executed graphs hold (a constant-folded MatMul is a Const)."""
    counts = Counter(node.op for graph in partition_graphs for node in graph.node)
    return tuple(sorted(counts.items(), key=lambda t: (-t[1], t[0])))


def step_outputs(step_stats: Any) -> dict[str, dict[int, Output]]:
    """Node name -> output slot -> (dtype enum, shape, allocated bytes), from one step's stats."""
    found: dict[str, dict[int, Output]] = {}
    for device in step_stats.dev_stats:
        for node in device.node_stats:
            for out in node.output:
                desc = out.tensor_description
                dims = desc.shape.dim
                shape = None if desc.shape.unknown_rank or any(d.size < 0 for d in dims) else tuple(d.size for d in dims)
                allocated = desc.allocation_description.requested_bytes or None
                found.setdefault(node.node_name, {})[out.slot] = (desc.dtype, shape, allocated)
    return found


def copies_with_bytes(tf: Any, partition_graphs: Any, step_stats: Any, graph: Any = None, *,
                      virtual_gpus: bool = False) -> Iterator[Copy]:
    """One Copy per ``_Send`` of the partition graphs, with dtype, shape and bytes where known."""
    outputs = step_outputs(step_stats) if step_stats is not None else {}
    partitioned = {node.name: node for partition in partition_graphs for node in partition.node}
    for partition in partition_graphs:
        for node in partition.node:
            if node.op != "_Send" or not between_devices(node):
                continue
            producer, slot = _input(node.input[0]) if node.input else ("", 0)
            attrs = node.attr
            if _control_only(partitioned.get(producer), attrs):
                continue  # a control edge between devices: no data crosses, so it is no copy
            source, target = attrs["send_device"].s.decode(), attrs["recv_device"].s.decode()
            dtype = _dtype(tf, attrs["T"].type) if "T" in attrs else None
            src = attrs["_src"].s.decode() if "_src" in attrs else None
            dst = attrs["_dst"].s.decode() if "_dst" in attrs else None
            shape, allocated = _described(outputs, producer, slot)
            if shape is None:
                shape = _shape_of(outputs, partitioned, graph, producer, slot)
            if shape is None:  # () is a scalar's shape: only None is unknown
                shape = static_shape(graph, src, slot)
            size = tensor_bytes(tf, dtype, shape) if dtype else None
            yield Copy(tensor=producer if slot == 0 else f"{producer}:{slot}", source=source, target=target,
                       dtype=dtype.name if dtype else None, shape=shape,
                       bytes=size if size is not None else allocated, producer=src, consumer=dst,
                       physical=crosses_memory(source, target, virtual_gpus=virtual_gpus))


# ops whose every output has the shape of their first input, by construction
_PASS_THROUGH = frozenset({"Identity", "RefIdentity", "Switch", "RefSwitch", "Enter", "RefEnter", "Exit", "RefExit",
                           "NextIteration", "RefNextIteration", "_SwitchN"})


def _shape_of(outputs: Mapping[str, Mapping[int, Output]], partitioned: Mapping[str, Any], graph: Any,
              name: str, slot: int, hops: int = 8) -> tuple[int, ...] | None:
    """An output's shape: measured in the step, given by its partition graph or the Python graph,
    else (for an op that passes its input through: a cond's Switch or Identity on a branch that did
    not run, so nothing measured it) the shape of that input, followed back a few hops."""
    shape = _described(outputs, name, slot)[0]
    if shape is None:
        shape = _partition_shape(partitioned.get(name), slot)
    if shape is None:
        shape = static_shape(graph, name, slot)
    node = partitioned.get(name)
    if shape is not None or hops == 0 or node is None or node.op not in _PASS_THROUGH or not node.input:
        return shape
    for other, described in sorted(outputs.get(name, {}).items()):  # a Switch's taken output: the same shape
        if other != slot and described[1] is not None and node.op in ("Switch", "RefSwitch", "_SwitchN"):
            return described[1]
    if node.input[0].startswith("^"):
        return None
    source, source_slot = _input(node.input[0])
    return _shape_of(outputs, partitioned, graph, source, source_slot, hops - 1)


def _control_only(node: Any, send_attrs: Any) -> bool:
    """A _Send that carries a control edge: TensorFlow's partitioner sends an empty float Const
    named ``<source>/ctrl`` (made unique), made only to order the other device's node."""
    if node is None or node.op != "Const" or "_src" not in send_attrs:
        return False
    if not node.name.startswith(send_attrs["_src"].s.decode() + "/ctrl"):
        return False
    return _partition_shape(node, 0) == (0,)


def _input(name: str) -> tuple[str, int]:
    name = name.lstrip("^")
    node, _, slot = name.rpartition(":")
    if node and slot.isdigit():
        return node, int(slot)
    return name, 0


def _dtype(tf: Any, enum: int) -> Any:
    try:
        return tf.dtypes.as_dtype(enum)
    except (TypeError, ValueError):
        return None


def _described(outputs: Mapping[str, Mapping[int, Output]], node: str, slot: int) -> tuple[tuple[int, ...] | None, int | None]:
    found = outputs.get(node, {}).get(slot)
    return (found[1], found[2]) if found else (None, None)


def _partition_shape(node: Any, slot: int) -> tuple[int, ...] | None:
    """The shape a partition graph itself gives: a Const's value or an ``_output_shapes`` attr."""
    if node is None:
        return None
    if node.op == "Const" and "value" in node.attr:
        proto = node.attr["value"].tensor.tensor_shape
        if not proto.unknown_rank and all(d.size >= 0 for d in proto.dim):
            return tuple(d.size for d in proto.dim)
    if "_output_shapes" in node.attr:
        shapes = node.attr["_output_shapes"].list.shape
        if slot < len(shapes) and not shapes[slot].unknown_rank and all(d.size >= 0 for d in shapes[slot].dim):
            return tuple(d.size for d in shapes[slot].dim)
    return None


def static_shape(graph: Any, node: str | None, slot: int) -> tuple[int, ...] | None:
    """The producer's static shape in the Python graph, when fully known."""
    if graph is None or not node:
        return None
    try:
        shape = graph.get_operation_by_name(node).outputs[slot].shape
    except (KeyError, ValueError, IndexError):
        return None
    if shape.rank is None or not shape.is_fully_defined():
        return None
    return tuple(int(d) for d in shape.as_list())


def tensor_bytes(tf: Any, dtype: Any, shape: tuple[int, ...] | None) -> int | None:
    """Bytes of a dense tensor: elements x element size; None for unknown shapes and for types whose
    size is not fixed (strings, resources, variants)."""
    if shape is None or dtype is None or dtype in (tf.string, tf.resource, tf.variant):
        return None
    size: int = dtype.size
    return math.prod(shape) * size
