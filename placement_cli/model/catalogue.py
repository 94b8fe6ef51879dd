"""The results of `placement errors` (the catalogue of failures, run for real) and `placement devices`
(what TensorFlow sees)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from placement_cli.i18n import Message, english
from placement_cli.model.fields import optional_text, text
from placement_cli.model.report import DeviceMapping, Placement, PlacementFailure


@dataclass(frozen=True)
class SoftRun:
    """What one failure case did with soft placement on: where its ops went and its result, or the
    error it raised all the same."""

    placements: tuple[Placement, ...] = ()  # as explained for a run (requested, status, reason)
    result: Any = None
    error_class: str | None = None  # set: it failed with soft placement too
    message: str | None = None  # the first line of TensorFlow's message, when it failed

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"placements": [p.to_dict(run=True) for p in self.placements], "result": self.result}
        if self.error_class is not None:
            data.update(error_class=self.error_class, message=self.message)
        return data

    @classmethod
    def from_dict(cls, s: Any) -> SoftRun:
        return cls(placements=tuple(Placement.from_dict(p) for p in s["placements"]), result=s.get("result"),
                   error_class=optional_text(s.get("error_class")), message=optional_text(s.get("message")))


@dataclass(frozen=True)
class FailureCase:
    """One case of ``placement errors``: what it pins where, and what TensorFlow did without and with
    soft placement (or why it was not run here)."""

    name: str
    description: Message | str  # English in JSON, the chosen language in tables
    requested: str  # the device it pins its op to
    ran: bool = False
    skip_reason: Message | str | None = None  # why it was not run (a str: a missing private API, untranslated)
    error_class: str | None = None  # the exception TensorFlow raised without soft placement
    error: PlacementFailure | None = None
    soft: SoftRun | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": english(self.description), "requested": self.requested,
                "ran": self.ran, "skip_reason": english(self.skip_reason),
                "error_class": self.error_class, "error": None if self.error is None else self.error.to_dict(),
                "soft": None if self.soft is None else self.soft.to_dict()}

    @classmethod
    def from_dict(cls, c: Any) -> FailureCase:
        """A case as JSON has it: its description and skip reason as their English."""
        return cls(name=text(c["name"]), description=text(c["description"]), requested=text(c["requested"]),
                   ran=bool(c.get("ran")), skip_reason=optional_text(c.get("skip_reason")),
                   error_class=optional_text(c.get("error_class")),
                   error=None if c.get("error") is None else PlacementFailure.from_dict(c["error"]),
                   soft=None if c.get("soft") is None else SoftRun.from_dict(c["soft"]))


@dataclass(frozen=True)
class FailureCatalogue:
    """What ``placement errors`` found: every case, and the private TensorFlow APIs that were missing."""

    cases: tuple[FailureCase, ...]
    incomplete: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"cases": [c.to_dict() for c in self.cases], "incomplete": list(self.incomplete)}

    @classmethod
    def from_dict(cls, data: Any) -> FailureCatalogue:
        return cls(cases=tuple(map(FailureCase.from_dict, data["cases"])),
                   incomplete=tuple(map(text, data.get("incomplete") or ())))


@dataclass(frozen=True)
class PhysicalDevice:
    """A device TensorFlow found on the machine (``tf.config.list_physical_devices``)."""

    name: str
    device_type: str
    gpu_name: str | None = None  # GPUs only, as the driver names them
    compute_capability: str | None = None  # GPUs only: "8.0"

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "device_type": self.device_type}
        if self.device_type == "GPU":
            data.update(gpu_name=self.gpu_name, compute_capability=self.compute_capability)
        return data

    @classmethod
    def from_dict(cls, d: Any) -> PhysicalDevice:
        return cls(text(d["name"]), text(d["device_type"]), optional_text(d.get("gpu_name")),
                   optional_text(d.get("compute_capability")))


@dataclass(frozen=True)
class LogicalDevice:
    """A device ``tf.device()`` can name (``tf.config.list_logical_devices``)."""

    name: str
    device_type: str
    canonical: str  # the full name; the name itself where it does not parse

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "device_type": self.device_type, "canonical": self.canonical}

    @classmethod
    def from_dict(cls, d: Any) -> LogicalDevice:
        return cls(text(d["name"]), text(d["device_type"]), text(d["canonical"]))


@dataclass(frozen=True)
class Inventory:
    """What ``placement devices`` found: physical and logical devices, and the Device mapping a v1
    Session logged when it was created."""

    physical: tuple[PhysicalDevice, ...]
    logical: tuple[LogicalDevice, ...]
    device_mapping: tuple[DeviceMapping, ...] = ()
    mapping_logged: bool = False  # a Device mapping block was logged (a CPU-only one lists no device)

    @property
    def gpus(self) -> tuple[PhysicalDevice, ...]:
        return tuple(d for d in self.physical if d.device_type == "GPU")

    def to_dict(self) -> dict[str, Any]:
        return {"physical": [d.to_dict() for d in self.physical], "logical": [d.to_dict() for d in self.logical],
                "device_mapping": [m.to_dict() for m in self.device_mapping],
                "device_mapping_logged": self.mapping_logged}

    @classmethod
    def from_dict(cls, data: Any) -> Inventory:
        return cls(physical=tuple(map(PhysicalDevice.from_dict, data["physical"])),
                   logical=tuple(map(LogicalDevice.from_dict, data["logical"])),
                   device_mapping=tuple(map(DeviceMapping.from_dict, data.get("device_mapping") or ())),
                   mapping_logged=bool(data.get("device_mapping_logged")))
