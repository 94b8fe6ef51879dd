"""The executed graph: partition graphs of a Session run, and the _Send/_Recv copies in them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from placement_cli.model import Copy

_EDGE = re.compile(r"^edge_\d+_")  # TF names a sent tensor edge_<id>_<producer>


def between_devices(node: Any) -> bool:
    """A _Send that moves a tensor from one device to another. In a session on a server (grpc://),
    a fetch goes back to the client by a _Send from the device that made it to the client's device:
    made on that very device, it is no copy between devices."""
    sender: bytes = node.attr["send_device"].s
    receiver: bytes = node.attr["recv_device"].s
    return sender != receiver


def sends(partition_graphs: Any) -> Iterator[Copy]:
    """The copies between devices of an executed graph: one per _Send node (none to its own device)."""
    for graph in partition_graphs:
        for node in graph.node:
            if node.op == "_Send" and between_devices(node):
                yield Copy(_EDGE.sub("", node.attr["tensor_name"].s.decode()), node.attr["send_device"].s.decode(),
                           node.attr["recv_device"].s.decode())
