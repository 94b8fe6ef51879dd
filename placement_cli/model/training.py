"""What `placement train` and `placement mirrored` add to a report: the setup, the losses per step, the
variables' copies, the expected bytes and the gradient check."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from placement_cli.devices import DeviceName, device_name
from placement_cli.i18n import Wording, english
from placement_cli.model.cause import Cause, first_line
from placement_cli.model.fields import count, dimension, number, optional_text, text


@dataclass(frozen=True)
class GradientCheck:
    """The averaged tower gradient against the full-batch gradient on one device (``train --check``)."""

    dtype: str
    reference: str  # the device the full-batch gradient was computed on
    tolerance: float  # the largest relative difference allowed (of the gradient's largest magnitude)
    variables: tuple[tuple[str, float, float, float], ...]  # (variable, max abs diff, max rel diff, max |grad|)
    note: str | None = None

    @property
    def max_abs(self) -> float:
        diffs = [v[1] for v in self.variables]
        return math.nan if any(math.isnan(d) for d in diffs) else max(diffs, default=0.0)

    @property
    def max_rel(self) -> float:
        """The largest relative difference; NaN if any is NaN (max() would skip it by order)."""
        rels = [v[2] for v in self.variables]
        return math.nan if any(math.isnan(r) for r in rels) else max(rels, default=0.0)

    @property
    def passed(self) -> bool:
        return all(rel <= self.tolerance for _, _, rel, _ in self.variables)

    def to_dict(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "reference_device": self.reference, "max_abs_diff": self.max_abs,
                "max_rel_diff": self.max_rel, "tolerance": {"rel": self.tolerance}, "passed": self.passed,
                "note": self.note,
                "variables": [{"name": n, "max_abs_diff": a, "max_rel_diff": r, "max_abs_gradient": g}
                              for n, a, r, g in self.variables]}

    @classmethod
    def from_dict(cls, c: Any) -> GradientCheck:
        return cls(dtype=text(c["dtype"]), reference=text(c["reference_device"]), tolerance=number(c["tolerance"]["rel"]),
                   variables=tuple((text(v["name"]), number(v["max_abs_diff"]), number(v["max_rel_diff"]),
                                    number(v["max_abs_gradient"])) for v in c["variables"]),
                   note=optional_text(c.get("note")))


@dataclass(frozen=True)
class VariableCopies:
    """One model variable and the devices its copies (or its single self) live on."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    devices: tuple[DeviceName, ...]
    kind: str  # the variable's class: ResourceVariable, MirroredVariable, ...

    def __post_init__(self) -> None:
        object.__setattr__(self, "devices", tuple(map(DeviceName, self.devices)))  # read once, where it is made

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype, "devices": list(self.devices),
                "kind": self.kind}

    @classmethod
    def from_dict(cls, v: Any) -> VariableCopies:
        return cls(name=text(v["name"]), shape=tuple(map(dimension, v["shape"])), dtype=text(v["dtype"]),
                   devices=tuple(DeviceName(text(d)) for d in v["devices"]), kind=text(v["kind"]))


@dataclass(frozen=True)
class ExpectedBytes:
    """What one step should copy between devices, from the model's sizes: the sanity line."""

    total: int
    terms: tuple[tuple[Wording, int], ...]  # (what, bytes) summing to total; what: messages.term
    formula: Wording  # a Message

    def to_dict(self) -> dict[str, Any]:
        return {"bytes": self.total, "formula": english(self.formula),
                "terms": [{"what": english(w), "bytes": b} for w, b in self.terms]}

    @classmethod
    def from_dict(cls, e: Any) -> ExpectedBytes:
        return cls(total=count(e["bytes"]), formula=text(e["formula"]),
                   terms=tuple((text(t["what"]), count(t["bytes"])) for t in e["terms"]))


@dataclass(frozen=True)
class Training:
    """What a training lesson (train, mirrored) set up and what its steps gave."""

    lesson: str  # "towers" | "mirrored"
    devices: tuple[DeviceName, ...]  # the towers' or replicas' devices, as asked
    batch: int  # global batch per step
    steps: int  # steps asked for
    lr: float
    dtype: str
    losses: tuple[float, ...] = ()  # one per step that ran
    parameters: int = 0
    parameter_bytes: int = 0
    input_bytes: int = 0  # one step's batch (features and labels)
    variables_on: DeviceName | None = None  # towers: where the variables live
    variables: tuple[VariableCopies, ...] = ()
    reduction: str | None = None  # mirrored: the cross-device ops' class; None: unknown
    reduction_source: Wording | None = None  # how it was chosen / read (a Message)
    mode: Wording | None = None  # mirrored: custom loop or Keras fit (a Message)
    check: GradientCheck | None = None
    expected: ExpectedBytes | None = None
    notes: tuple[Wording, ...] = ()  # Messages
    error: str | None = None  # what stopped the steps, when they did not all run
    roles: tuple[Wording, ...] = ()  # the groups of its placements, in the order tables show them
    replicas: tuple[DeviceName, ...] = ()  # mirrored: the replicas' devices as the strategy resolved them
    cause: Cause | None = None  # what stopped the steps: TensorFlow's cause line (not its traceback header)
    # the line of ``error`` that says what failed, as logparse reads it (not in the JSON); "": its first line
    error_headline: str = field(default="", compare=False)

    def __post_init__(self) -> None:  # the devices read once, where the model is made
        object.__setattr__(self, "devices", tuple(map(DeviceName, self.devices)))
        object.__setattr__(self, "replicas", tuple(map(DeviceName, self.replicas)))
        object.__setattr__(self, "variables_on", device_name(self.variables_on))

    @property
    def says(self) -> str:
        """What TensorFlow said stopped the steps, in one line ("" when nothing did)."""
        return self.cause.said if self.cause else self.error_headline or first_line(self.error or "")

    @property
    def complete(self) -> bool:
        return len(self.losses) == self.steps

    @property
    def succeeded(self) -> bool:
        """Every step ran, every loss is a finite number, and the gradient check (where one ran) passed."""
        return self.complete and self.diverged_at is None and (self.check is None or self.check.passed)

    @property
    def diverged_at(self) -> int | None:
        """The first step (from 1) whose loss is not a finite number: the training diverged there."""
        return next((step for step, loss in enumerate(self.losses, 1) if not math.isfinite(loss)), None)

    def to_dict(self) -> dict[str, Any]:
        return {"lesson": self.lesson, "devices": list(self.devices), "batch": self.batch,
                "steps_requested": self.steps, "lr": self.lr,
                "dtype": self.dtype, "parameters": self.parameters, "parameter_bytes": self.parameter_bytes,
                "input_bytes": self.input_bytes, "variables_on": self.variables_on,
                "variables": [v.to_dict() for v in self.variables], "reduction": self.reduction,
                "reduction_source": english(self.reduction_source), "mode": english(self.mode),
                "expected_copy_bytes": None if self.expected is None else self.expected.to_dict(),
                "notes": [english(n) for n in self.notes], "error": self.error, "roles": [english(r) for r in self.roles],
                "replicas": list(self.replicas), "diverged_at_step": self.diverged_at,
                **({"cause": self.cause.to_dict()} if self.cause is not None else {})}

    @classmethod
    def from_dict(cls, t: Any, losses: Any = (), check: Any = None) -> Training:
        """A training as a report's JSON holds it: ``training``, with the report's ``losses`` and ``check``."""
        expected = t.get("expected_copy_bytes")
        return cls(lesson=text(t["lesson"]), devices=tuple(DeviceName(text(d)) for d in t["devices"]), batch=count(t["batch"]),
                   steps=count(t["steps_requested"]), lr=number(t["lr"]), dtype=text(t["dtype"]),
                   losses=tuple(map(number, losses or ())), parameters=count(t.get("parameters", 0)),
                   parameter_bytes=count(t.get("parameter_bytes", 0)), input_bytes=count(t.get("input_bytes", 0)),
                   variables_on=device_name(optional_text(t.get("variables_on"))),
                   variables=tuple(map(VariableCopies.from_dict, t.get("variables") or ())),
                   reduction=optional_text(t.get("reduction")), reduction_source=optional_text(t.get("reduction_source")),
                   mode=optional_text(t.get("mode")), check=None if check is None else GradientCheck.from_dict(check),
                   expected=None if expected is None else ExpectedBytes.from_dict(expected),
                   notes=tuple(map(text, t.get("notes") or ())), error=optional_text(t.get("error")),
                   roles=tuple(map(text, t.get("roles") or ())), replicas=tuple(DeviceName(text(d)) for d in t.get("replicas") or ()),
                   cause=None if t.get("cause") is None else Cause.from_dict(t["cause"]))
