"""Frozen result model shared by capture, parse and render: one type per result, JSON from each
type's ``to_dict``. Renderers accept only these. Each type is imported from here; a module is loaded
when one of its types is first asked for (`parse` needs only the report's)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from placement_cli.model.cause import Cause
from placement_cli.model.copies import Copy, Edge, LinkTotal, link_totals
from placement_cli.model.kinds import FailureKind, PlacementKind
from placement_cli.model.report import (
    AS_REQUESTED,
    FREE,
    LOGGED,
    SOFT_FALLBACK,
    WITH_RESOURCE,
    Compiled,
    CompiledOp,
    DeviceMapping,
    IgnoredRequest,
    Origin,
    Placement,
    PlacementFailure,
    Report,
    reason_counts,
)

if TYPE_CHECKING:
    from placement_cli.model.catalogue import (
        FailureCase,
        FailureCatalogue,
        Inventory,
        LogicalDevice,
        PhysicalDevice,
        SoftRun,
    )
    from placement_cli.model.check import CheckResult, RuleFailure
    from placement_cli.model.cluster import (
        ClusterEvent,
        ClusterReport,
        ClusterRun,
        ClusterTask,
        GpuMemory,
        TaskTraining,
        WorkerSteps,
    )
    from placement_cli.model.demo import DemoOutcome, DemoRun, DemoStep, DemoSteps, StepTitle
    from placement_cli.model.diff import Change, DiffSide, PlacementDiff
    from placement_cli.model.inspection import Inspection, TaskAnswer, TaskDevice
    from placement_cli.model.training import ExpectedBytes, GradientCheck, Training, VariableCopies

_LAZY = {
    **dict.fromkeys(("CheckResult", "RuleFailure"), "check"),
    **dict.fromkeys(("FailureCase", "FailureCatalogue", "Inventory", "LogicalDevice", "PhysicalDevice", "SoftRun"),
                    "catalogue"),
    **dict.fromkeys(("ClusterEvent", "ClusterReport", "ClusterRun", "ClusterTask", "GpuMemory", "TaskTraining",
                      "WorkerSteps"), "cluster"),
    **dict.fromkeys(("DemoOutcome", "DemoRun", "DemoStep", "DemoSteps", "StepTitle"), "demo"),
    **dict.fromkeys(("Inspection", "TaskAnswer", "TaskDevice"), "inspection"),
    **dict.fromkeys(("Change", "DiffSide", "PlacementDiff"), "diff"),
    **dict.fromkeys(("ExpectedBytes", "GradientCheck", "Training", "VariableCopies"), "training"),
}

__all__ = [
    "AS_REQUESTED",
    "FREE",
    "LOGGED",
    "SOFT_FALLBACK",
    "WITH_RESOURCE",
    "Cause",
    "Change",
    "CheckResult",
    "ClusterEvent",
    "ClusterReport",
    "ClusterRun",
    "ClusterTask",
    "Compiled",
    "CompiledOp",
    "Copy",
    "DemoOutcome",
    "DemoRun",
    "DemoStep",
    "DemoSteps",
    "DeviceMapping",
    "DiffSide",
    "Edge",
    "ExpectedBytes",
    "FailureCase",
    "FailureCatalogue",
    "FailureKind",
    "GpuMemory",
    "GradientCheck",
    "IgnoredRequest",
    "Inspection",
    "Inventory",
    "LinkTotal",
    "LogicalDevice",
    "Origin",
    "PhysicalDevice",
    "Placement",
    "PlacementDiff",
    "PlacementFailure",
    "PlacementKind",
    "Report",
    "RuleFailure",
    "SoftRun",
    "StepTitle",
    "TaskAnswer",
    "TaskDevice",
    "TaskTraining",
    "Training",
    "VariableCopies",
    "WorkerSteps",
    "link_totals",
    "reason_counts",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
