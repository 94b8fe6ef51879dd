"""What the user asked to see (--device, --op, --node, --top), and a report narrowed by it; the
matching itself is filters.py's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from placement_cli.model.fields import optional_int, optional_text
from placement_cli.model.report import Report


@dataclass(frozen=True)
class Filters:
    """What the user asked to see; every filter ignores case."""

    device: str | None = None  # a device type (GPU), a device (GPU:1, /job:ps/task:0/cpu:0) or a short name
    op: str | None = None  # an op type; MatMul also matches oneDNN's _MklMatMul
    node: str | None = None  # a regex searched in the node name
    top: int | None = None  # the first N placements a table shows, in log order

    @property
    def active(self) -> bool:
        return any(v is not None and v != "" for v in (self.device, self.op, self.node, self.top))

    def describe(self) -> str:
        """The filters as they were typed: ``--device GPU --op MatMul``."""
        return " ".join(f"--{name} {value}" for name, value in self.to_dict().items() if value is not None)

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device or None, "op": self.op or None, "node": self.node or None, "top": self.top}

    @classmethod
    def from_dict(cls, f: Any) -> Filters:
        return cls(optional_text(f.get("device")), optional_text(f.get("op")), optional_text(f.get("node")),
                   optional_int(f.get("top")))


@dataclass(frozen=True)
class Filtered:
    """A report narrowed by filters, and what it was narrowed from."""

    report: Report
    filters: Filters
    total: int  # placements before filtering

    @property
    def matched(self) -> int:
        return len(self.report.placements)

    @property
    def nothing_matched(self) -> bool:
        # a report of counts only (a saved narrowed report shown with --summary) matched what it counts
        return self.filters.active and self.total > 0 and not self.report.placements and not self.report.placement_count
