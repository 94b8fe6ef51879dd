"""A TensorBoard event file of a Session run: its graph with the devices the placer assigned, and its step stats.

The step stats are those of the run that executed the lesson's own graph: a run traced for them
turns constant folding off (``session_config``), as ``--copies`` does, so the guide's MatMuls and AddN
run and are profiled instead of the constant they would be folded into.

The GraphDef alone holds only what each node asked for (often nothing); the partition graphs hold only
the nodes that ran. The placer log names every node's device, so those devices are written into the
GraphDef's ``node.device`` before it is stored. Writing needs TensorFlow only, not TensorBoard.
"""

from __future__ import annotations

import errno
from collections.abc import Iterable
from typing import Any

from placement_cli.model import Placement
from placement_cli.model.kinds import PlacementKind

RUN_TAG = "step1"  # the traced run's name in TensorBoard's "Session runs" menu


def assigned_graph_def(graph: Any, placements: Iterable[Placement]) -> tuple[Any, int]:
    """The graph's GraphDef with each logged node's assigned device, and how many nodes got one. Each
    node carries its ``_output_shapes``, as TensorFlow's own FileWriter writes them (``add_shapes``):
    TensorBoard labels edges with them and, without them, draws every edge as a wide grey wedge."""
    assigned: dict[str, str] = {}
    for p in placements:
        if p.kind == PlacementKind.PLACER and p.node and p.node not in assigned:
            assigned[p.node] = p.device
    graph_def = graph.as_graph_def(add_shapes=True)
    count = 0
    for node in graph_def.node:
        device = assigned.get(node.name)
        if device is not None:
            node.device = device
            count += 1
    return graph_def, count


def write_events(tf: Any, graph: Any, placements: Iterable[Placement], metadata: Any, logdir: str) -> None:
    """One event file under ``logdir``: the graph with assigned devices and, when the run was traced,
    its RunMetadata (TensorBoard colours nodes by device from both)."""
    graph_def, _count = assigned_graph_def(graph, placements)
    try:
        with graph.as_default():  # FileWriter refuses eager mode: it must be made inside a graph
            writer = tf.compat.v1.summary.FileWriter(logdir)
            try:
                # the Event add_graph(graph_def=...) would make, without its deprecation warning on stderr
                writer.add_event(tf.compat.v1.Event(graph_def=graph_def.SerializeToString()))
                if metadata is not None:
                    writer.add_run_metadata(metadata, RUN_TAG)
            finally:
                writer.close()
    except (OSError, tf.errors.OpError) as exc:  # the folder went away or filled up: an output error (exit 2)
        raise OSError(errno.EIO, getattr(exc, "message", None) or str(exc), logdir) from None
