"""The results of `placement demo`: the list of its steps, what each step ran and produced, and the whole run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from placement_cli.i18n import Wording, english
from placement_cli.model.catalogue import Inventory
from placement_cli.model.cluster import ClusterReport
from placement_cli.model.fields import count, optional_text, text
from placement_cli.model.report import Report

StepResult = Report | Inventory | ClusterReport


@dataclass(frozen=True)
class StepTitle:
    """One step as `demo --list` names it."""

    number: int
    key: str
    title: str  # marked for translation: English in JSON, the chosen language in tables

    def to_dict(self) -> dict[str, Any]:
        return {"number": self.number, "key": self.key, "title": self.title}

    @classmethod
    def from_dict(cls, s: Any) -> StepTitle:
        return cls(count(s["number"]), text(s["key"]), text(s["title"]))


@dataclass(frozen=True)
class DemoSteps:
    """`demo --list`: every step, in order."""

    steps: tuple[StepTitle, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"steps": [s.to_dict() for s in self.steps]}

    @classmethod
    def from_dict(cls, data: Any) -> DemoSteps:
        return cls(tuple(map(StepTitle.from_dict, data["steps"])))


@dataclass(frozen=True)
class DemoOutcome:
    """What a step produced: its result (a report, a training run's report, the devices, a cluster's
    report; None when the step broke before it had one), the fact to notice (read from the result),
    whether it went as the lesson expects, and the names of the shown functions that ran."""

    result: StepResult | None = None
    notice: Wording | None = None  # a Message; read back from JSON, its English
    ok: bool = True
    problem: str | None = None
    ran: tuple[str, ...] = ()
    skipped: bool = False  # not runnable here (its notice says why): its code did not run, and nothing failed

    def result_dict(self) -> Any:
        if self.result is None:
            return None
        if isinstance(self.result, Report):
            return self.result.to_dict()
        return self.result.to_dict()


@dataclass(frozen=True)
class DemoStep:
    """One step as it ran: what it explains, the code it shows and the values it ran with, and its outcome."""

    number: int
    key: str
    title: str
    explanation: str
    code: str  # the source of the functions it shows
    args: dict[str, Any]  # the values the shown code ran with
    outcome: DemoOutcome
    takes: frozenset[str] | None = None  # the arguments the shown functions take (None: all); the text shows only those

    def to_dict(self) -> dict[str, Any]:
        o = self.outcome
        return {"number": self.number, "key": self.key, "title": self.title, "explanation": self.explanation,
                "code": self.code, "args": self.args, "code_ran": list(o.ran), "ok": o.ok, "problem": o.problem,
                "notice": (english(o.notice) if o.notice else "") if o.ok else None,
                "result": o.result_dict()}

    @classmethod
    def from_dict(cls, s: Any) -> DemoStep:
        """A step as `demo --json` writes it: its notice as its English, its result by its shape (the
        devices, a cluster's report, or a report)."""
        notice = optional_text(s.get("notice"))
        outcome = DemoOutcome(result=_step_result(s.get("result")), notice=notice or None, ok=bool(s.get("ok")),
                              problem=optional_text(s.get("problem")), ran=tuple(map(text, s.get("code_ran") or ())))
        return cls(count(s["number"]), text(s["key"]), text(s["title"]), text(s["explanation"]), text(s["code"]),
                   dict(s.get("args") or {}), outcome)

    @property
    def failure(self) -> str | None:
        """How the step is named at the end when it failed (None: it went as the lesson expects)."""
        return None if self.outcome.ok else f"step {self.number} ({self.key}): {self.outcome.problem}"


@dataclass(frozen=True)
class DemoRun:
    """`demo --json`: how many GPUs were found, what stands in for the missing ones, and every step that ran."""

    gpus: int
    note: str | None
    steps: tuple[DemoStep, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"gpus": self.gpus, "note": self.note, "steps": [s.to_dict() for s in self.steps]}

    @classmethod
    def from_dict(cls, data: Any) -> DemoRun:
        return cls(count(data["gpus"]), optional_text(data.get("note")), tuple(map(DemoStep.from_dict, data["steps"])))


def _step_result(data: Any) -> StepResult | None:
    if data is None:
        return None
    if "physical" in data:
        return Inventory.from_dict(data)
    if "steps_asked" in data:
        return ClusterReport.from_dict(data)
    return Report.from_dict(data)

