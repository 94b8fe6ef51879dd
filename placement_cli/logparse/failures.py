"""Placement errors, in every wording TensorFlow has used since 0.x."""

from __future__ import annotations

import re

from placement_cli.devices import try_parse
from placement_cli.model import PlacementFailure

# Cheap literal search that finds candidate lines inside a chunk of bytes.
TRIGGER = re.compile(rb"Cannot assign a device|Could not satisfy (?:explicit )?device specification|Cannot colocate")

_START = re.compile(r"Cannot assign a device|Could not satisfy (?:explicit )?device specification|Cannot colocate")
_NODE = re.compile(
    r"Cannot assign a device (?:for operation|to node) '?(?P<node>[^'\s:]+(?::[^'\s:]+)*)'?:"
)
_NODE_COLOCATE = re.compile(r"Cannot colocate nodes \{\{colocation_node (?P<a>\S+?)\}\} and \{\{colocation_node (?P<b>\S+?)\}\}|Cannot colocate nodes '?(?P<c>[^'\s]+?)'? and")
_EXPLICIT = re.compile(r"(?:explicitly )?assigned to (?P<req>\S+) but available devices are \[ ?(?P<avail>[^\]]*?) ?\]")
_SATISFY = re.compile(r"Could not satisfy (?P<explicit>explicit )?device specification '(?P<req>[^']*)'(?P<rest>.*)")
_AVAILABLE = re.compile(r"(?:[Aa]ll available devices|available devices(?: are)?:?) ?\[ ?(?P<avail>[^\]]*?) ?\]")
_SUPPORTED = re.compile(r"Supported device types \[(?P<types>[^\]]*)\]")
_NO_KERNEL = re.compile(r"no supported kernel for (?P<type>\w+) devices", re.IGNORECASE)
_NOT_REGISTERED = re.compile(r"no devices matching that specification are registered")


def _split_devices(text: str) -> tuple[str, ...]:
    return tuple(d.strip() for d in text.split(",") if d.strip())


def failure_from_text(text: str) -> PlacementFailure | None:
    """Build a PlacementFailure from an error message (one line, or a wrapped pair)."""
    start = _START.search(text)
    if start is None:
        return None
    message = text[start.start():].strip()
    node = None
    if m := _NODE.search(message):
        node = m.group("node")
    requested = None
    available: tuple[str, ...] = ()
    kind = "unsatisfiable"
    if m := _EXPLICIT.search(message):
        requested, available = m.group("req"), _split_devices(m.group("avail"))
        kind = "device_not_found"
    if m := _SATISFY.search(message):
        requested = requested or m.group("req")
        rest = m.group("rest")
        if _NO_KERNEL.search(rest):
            kind = "no_kernel"
        elif _NOT_REGISTERED.search(rest) or m.group("explicit"):
            kind = "device_not_found"
        else:  # eager wording: decide from the supported types
            kind = _eager_kind(requested, message)
    if m := _AVAILABLE.search(message):
        available = available or _split_devices(m.group("avail"))
    if message.startswith("Cannot colocate"):
        kind = "colocation"
        if m := _NODE_COLOCATE.search(message):
            node = m.group("a") or m.group("c")
    return PlacementFailure(
        kind=kind, node=node, requested_device=requested, message=message, available_devices=available
    )


def _eager_kind(requested: str | None, message: str) -> str:
    spec = try_parse(requested)
    types = _SUPPORTED.search(message)
    if spec is None or spec.device_type is None or types is None:
        return "unsatisfiable"
    supported = {t.strip().upper() for t in types.group("types").split(",") if t.strip()}
    available = _AVAILABLE.search(message)
    names = _split_devices(available.group("avail")) if available else ()
    existing = {d.device_type for d in map(try_parse, names) if d}
    if spec.device_type in existing and spec.device_type not in supported:
        return "no_kernel"
    return "device_not_found"


def needs_continuation(line: str) -> bool:
    """The guide's wording wraps after ``Cannot assign a device to node 'b':``."""
    return line.rstrip().endswith(":") and "Could not satisfy" not in line
