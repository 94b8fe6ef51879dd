"""Frozen result model shared by capture, parse and render."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from placement_cli.devices import DeviceSpec

AS_REQUESTED = "as requested"
FREE = "free"
SOFT_FALLBACK = "soft fallback"
LOGGED = "logged"  # parsed from a log: what was requested is unknown


@dataclass(frozen=True)
class Placement:
    """One op placed on one device, as the log reported it."""

    node: str | None
    op: str | None
    device: str
    spec: DeviceSpec
    kind: str  # "placer" | "eager" | "legacy"
    line: int
    requested: str | None = None
    status: str = LOGGED
    reason: str | None = None
    group: str | None = None  # e.g. the tower a node belongs to
    wrapper: bool = False  # a node of the single-op function TF 2.x wraps an eager op in (tables hide it)

    @property
    def canonical(self) -> str:
        return self.spec.canonical

    @property
    def short(self) -> str:
        return self.spec.short

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
        if run:
            data.update(requested=self.requested, status=self.status, reason=self.reason, group=self.group)
        return data


@dataclass(frozen=True)
class DeviceMapping:
    """One line of a ``Device mapping:`` block."""

    device: str
    description: str

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device, "description": self.description}


@dataclass(frozen=True)
class PlacementFailure:
    """A placement error TensorFlow reported."""

    # device_not_found | no_kernel | colocation | invalid_device_spec | unsatisfiable | run_failed (a run
    # stopped with an error whose wording the parser does not know: the message is TensorFlow's own)
    kind: str
    node: str | None
    requested_device: str | None
    message: str
    available_devices: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "node": self.node,
            "requested_device": self.requested_device,
            "message": self.message,
            "available_devices": list(self.available_devices),
        }


@dataclass(frozen=True)
class Copy:
    """One cross-device transfer in the executed graph: a _Send/_Recv pair."""

    tensor: str
    source: str
    target: str

    def to_dict(self) -> dict[str, Any]:
        return {"tensor": self.tensor, "from": self.source, "to": self.target}


@dataclass(frozen=True)
class Report:
    """Everything known about one log or one run."""

    placements: tuple[Placement, ...] = ()
    device_mapping: tuple[DeviceMapping, ...] = ()
    errors: tuple[PlacementFailure, ...] = ()
    lines: int = 0
    mapping_seen: bool = False
    counted: tuple[tuple[str, int], ...] | None = None  # per-device counts when placements were not kept
    # Only for runs (show, tower, ...):
    title: str | None = None
    result: Any = None
    log: str | None = None
    copies: tuple[Copy, ...] | None = None  # only when asked for (--copies)
    run_error: str | None = None  # the run raised this ("Class: TensorFlow's message") instead of a result
    # show, tower: the private TensorFlow APIs that were missing, and why (their reasons say unknown);
    # None where nobody kept count (then title, run_error and incomplete stay out of the JSON)
    incomplete: tuple[str, ...] | None = None

    @property
    def by_device(self) -> dict[str, int]:
        if self.counted is not None:
            return dict(self.counted)
        return dict(Counter(p.canonical for p in self.placements))

    @property
    def placement_count(self) -> int:
        return sum(self.by_device.values())

    @property
    def failed(self) -> bool:
        """No result, and an error says why (a run that did not produce its result always has one)."""
        return self.result is None and (bool(self.errors) or self.run_error is not None)

    def to_dict(self, run: bool = False) -> dict[str, Any]:
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
        if run:
            data["result"] = self.result
            data["log"] = self.log
            data["copies"] = None if self.copies is None else [c.to_dict() for c in self.copies]
        if run and self.incomplete is not None:  # show, tower: what ran, what stopped it, which facts were missing
            data.update(title=self.title, run_error=self.run_error, incomplete=list(self.incomplete))
        return data
