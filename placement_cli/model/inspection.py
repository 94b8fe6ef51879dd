"""What `placement inspect` learned of a running cluster."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from placement_cli.devices import DeviceSpec, parse_device
from placement_cli.i18n import english
from placement_cli.model.fields import count, number, optional_int, optional_text, text


@dataclass(frozen=True)
class TaskDevice:
    """One device a task of a running cluster reported (``placement inspect``)."""

    name: str  # as TensorFlow named it
    spec: DeviceSpec
    memory_limit: int | None  # bytes, where TensorFlow says

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "canonical": self.spec.canonical, "short": self.spec.short,
                "device_type": self.spec.device_type, "device_index": self.spec.device_index,
                "memory_limit": self.memory_limit}

    @classmethod
    def from_dict(cls, d: Any) -> TaskDevice:
        return cls(text(d["name"]), parse_device(text(d["canonical"]), logged=True), optional_int(d.get("memory_limit")))


@dataclass(frozen=True)
class TaskAnswer:
    """One task of a running cluster: whether it answered, and its devices."""

    job: str | None  # None: not known (nothing answered at a bare target)
    task: int | None
    target: str | None  # grpc://HOST:PORT where known
    answered: bool
    devices: tuple[TaskDevice, ...] = ()
    error: Any = None  # why it did not answer: a str, or an i18n.Message (English in JSON, translated in tables)

    @property
    def name(self) -> str:
        return "?" if self.job is None else f"/job:{self.job}/task:{self.task}"

    def to_dict(self) -> dict[str, Any]:
        return {"job": self.job, "task": self.task, "target": self.target, "answered": self.answered,
                "devices": [d.to_dict() for d in self.devices], "error": english(self.error)}

    @classmethod
    def from_dict(cls, t: Any) -> TaskAnswer:
        """A task's answer as JSON has it: its error as its English."""
        task = t.get("task")
        return cls(job=optional_text(t.get("job")), task=None if task is None else count(task),
                   target=optional_text(t.get("target")), answered=bool(t.get("answered")),
                   devices=tuple(map(TaskDevice.from_dict, t.get("devices") or ())),
                   error=optional_text(t.get("error")))


@dataclass(frozen=True)
class Inspection:
    """What ``placement inspect`` learned of a running cluster."""

    source: str  # the target, the cluster-spec file, or TF_CONFIG
    timeout: float
    tasks: tuple[TaskAnswer, ...]
    complete: bool  # every task answered and no task is known to be missing
    error: Any = None  # a str or an i18n.Message: what kept the answer incomplete, beyond the tasks' own errors
    lingering: bool = False  # a TensorFlow call outlived the timeout (its thread is left behind)

    @property
    def silent(self) -> tuple[TaskAnswer, ...]:
        return tuple(t for t in self.tasks if not t.answered)

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "timeout_s": self.timeout, "tasks": [t.to_dict() for t in self.tasks],
                "complete": self.complete, "error": english(self.error),
                "summary": {"tasks": len(self.tasks), "answered": sum(t.answered for t in self.tasks),
                            "devices": sum(len(t.devices) for t in self.tasks)}}

    @classmethod
    def from_dict(cls, data: Any) -> Inspection:
        return cls(source=text(data["source"]), timeout=number(data["timeout_s"]),
                   tasks=tuple(map(TaskAnswer.from_dict, data["tasks"])), complete=bool(data.get("complete")),
                   error=optional_text(data.get("error")))
