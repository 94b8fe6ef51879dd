"""Frozen result model shared by capture, parse and render: one type per result, JSON from each
type's ``to_dict``. Renderers accept only these."""

from placement_cli.model.catalogue import (FailureCase, FailureCatalogue, Inventory, LogicalDevice, PhysicalDevice,
                                           SoftRun)
from placement_cli.model.cluster import ClusterReport, ClusterRun, ClusterTask, TaskTraining, WorkerSteps
from placement_cli.model.inspection import Inspection, TaskAnswer, TaskDevice
from placement_cli.model.report import (AS_REQUESTED, FREE, LOGGED, SOFT_FALLBACK, Copy, DeviceMapping, Edge,
                                        ExpectedBytes, GradientCheck, LinkTotal, Placement, PlacementFailure, Report,
                                        Training, VariableCopies, link_totals, reason_counts)

__all__ = ["AS_REQUESTED", "FREE", "LOGGED", "SOFT_FALLBACK", "ClusterReport", "ClusterRun", "ClusterTask", "Copy",
           "DeviceMapping", "Edge", "ExpectedBytes", "FailureCase", "FailureCatalogue", "GradientCheck", "Inspection",
           "Inventory", "LinkTotal", "LogicalDevice", "PhysicalDevice", "Placement", "PlacementFailure", "Report",
           "SoftRun", "TaskAnswer", "TaskDevice", "TaskTraining", "Training", "VariableCopies", "WorkerSteps",
           "link_totals", "reason_counts"]
