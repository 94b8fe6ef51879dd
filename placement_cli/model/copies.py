"""The copies between devices a run made (or worked out), the edges of the graph that ran, and the
copies per link."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from placement_cli.devices import DeviceName
from placement_cli.i18n import Wording, english
from placement_cli.model.fields import count, dimension, known_total, optional_int, optional_text, text


@dataclass(frozen=True)
class Copy:
    """One cross-device transfer in the executed graph: a _Send/_Recv pair (or, ``computed``, the
    traffic a collective op moves out of sight, worked out rather than seen)."""

    tensor: Wording  # a computed copy's: a Message
    source: DeviceName
    target: DeviceName
    dtype: str | None = None  # what is known only where the run was traced (train, mirrored --copies)
    shape: tuple[int, ...] | None = None
    bytes: int | None = None  # per step
    producer: str | None = None  # the original graph's producer and consumer (_Send's _src/_dst attrs)
    consumer: str | None = None
    physical: bool | None = None  # False: between logical devices sharing one memory; None: unknown
    computed: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "source", DeviceName(self.source))
        object.__setattr__(self, "target", DeviceName(self.target))

    @property
    def detailed(self) -> bool:
        return self.dtype is not None or self.bytes is not None or self.computed

    @property
    def producer_node(self) -> str:
        """The node whose output was copied: the _Send's own record of it, else the tensor's op."""
        return self.producer or english(self.tensor).rsplit(":", 1)[0]

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"tensor": english(self.tensor), "from": self.source, "to": self.target}
        if self.detailed:
            data.update(dtype=self.dtype, shape=None if self.shape is None else list(self.shape), bytes=self.bytes,
                        producer=self.producer, consumer=self.consumer, physical=self.physical,
                        computed=self.computed)
        return data

    @classmethod
    def from_dict(cls, c: Any) -> Copy:
        shape = c.get("shape")
        return cls(tensor=text(c["tensor"]), source=DeviceName(text(c["from"])), target=DeviceName(text(c["to"])),
                   dtype=optional_text(c.get("dtype")), shape=None if shape is None else tuple(map(dimension, shape)),
                   bytes=optional_int(c.get("bytes")), producer=optional_text(c.get("producer")),
                   consumer=optional_text(c.get("consumer")), physical=c.get("physical"),
                   computed=bool(c.get("computed", False)))


@dataclass(frozen=True)
class Edge:
    """One edge of a graph that ran: ``target`` reads an output of ``source`` (or, ``control``, only
    waits for it). Node names as the placer log names them."""

    source: str
    target: str
    control: bool = False


@dataclass(frozen=True)
class LinkTotal:
    """The copies of one step from one device to another."""

    source: DeviceName
    target: DeviceName
    copies: int
    bytes: int | None  # None: some copy's size is unknown
    computed: bool = False  # some of these bytes were worked out, not seen as _Send nodes

    def to_dict(self) -> dict[str, Any]:
        return {"from": self.source, "to": self.target, "copies": self.copies, "bytes": self.bytes,
                "computed": self.computed}

    @classmethod
    def from_dict(cls, t: Any) -> LinkTotal:
        return cls(DeviceName(text(t["from"])), DeviceName(text(t["to"])), count(t["copies"]),
                   optional_int(t.get("bytes")), bool(t.get("computed")))


def link_totals(copies: tuple[Copy, ...]) -> tuple[LinkTotal, ...]:
    """Copies and bytes per (from, to) link, in the order links first appear."""
    found: dict[tuple[DeviceName, DeviceName], list[Copy]] = {}
    for c in copies:
        found.setdefault((c.source, c.target), []).append(c)
    totals = []
    for (source, target), group in found.items():
        totals.append(LinkTotal(source, target, len(group), known_total(c.bytes for c in group),
                                any(c.computed for c in group)))
    return tuple(totals)
