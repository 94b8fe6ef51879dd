"""Every model type that writes JSON reads it back (``from_dict`` beside ``to_dict``): what it wrote,
through JSON, gives the same JSON again; the cluster's tasks and workers as a real run on a GPU
machine wrote them (tests/fixtures/recorded)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from reports import tower_report
from test_results import _catalogue

from placement_cli.devices import DeviceName, parse_device
from placement_cli.i18n import N_, Message, speaking
from placement_cli.lessons.demo import contents
from placement_cli.compare import compare
from placement_cli.logparse import parse_paths
from placement_cli.logparse.saved import read_pair
from placement_cli.model import DeviceMapping, FailureCatalogue, Inventory, LinkTotal, PlacementDiff
from placement_cli.model.check import CheckResult
from placement_cli.rules import judge, rules_from
from placement_cli.model.catalogue import LogicalDevice, PhysicalDevice
from placement_cli.model.check import RuleFailure
from placement_cli.model.cluster import ClusterReport, ClusterTask, WorkerSteps
from placement_cli.model.demo import DemoOutcome, DemoRun, DemoStep
from placement_cli.model.diff import DiffSide
from placement_cli.model.filtered import Filters
from placement_cli.model.inspection import Inspection, TaskAnswer, TaskDevice
from placement_cli.render.json import as_json

RECORDED = Path(__file__).parent / "fixtures" / "recorded" / "h200-tf2.21-check2" / "cluster.json"
LOGS = Path(__file__).parent / "fixtures" / "logs" / "tf2.21"
CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"


def _through_json(value: Any) -> Any:
    return json.loads(json.dumps(value.to_dict(), default=as_json))


def _examples() -> list[Any]:
    inventory = Inventory((PhysicalDevice("/physical_device:CPU:0", "CPU"),
                           PhysicalDevice("/physical_device:GPU:0", "GPU", "NVIDIA H200", "9.0")),
                          (LogicalDevice("/device:CPU:0", "CPU", CPU0),),
                          (DeviceMapping(DeviceName("/job:localhost/replica:0/task:0/device:GPU:0"), "name: H200"),),
                          True)
    answer = TaskAnswer("ps", 0, "grpc://localhost:2222", True,
                        (TaskDevice(CPU0, parse_device(CPU0), 268435456),))
    return [_catalogue(), inventory, RuleFailure("--max-on CPU=0", "3 placements on CPU", ("a", "b")),
            LinkTotal(DeviceName(CPU0), DeviceName("/job:localhost/replica:0/task:0/device:CPU:1"), 2, 96),
            contents(), DiffSide("old.log", False, 12), DiffSide("new.json", True, 3, counts_only=True),
            Filters("GPU", "MatMul", "^tower", 5), Filters(),
            Inspection("spec.json", 2.5, (answer, TaskAnswer("worker", 1, None, False, error="refused")), False)]


@pytest.mark.parametrize("value", _examples(), ids=lambda v: type(v).__name__)
def test_what_a_model_type_writes_it_reads_back(value: Any) -> None:
    data = _through_json(value)
    again = type(value).from_dict(data)
    assert _through_json(again) == data


def test_a_report_read_back_is_english_whatever_the_language_it_was_shown_in() -> None:
    """JSON holds a Message as its English: read back, it is that English (no template to translate)."""
    catalogue = _catalogue()
    with speaking("zh"):
        data = _through_json(catalogue)
    assert FailureCatalogue.from_dict(data).cases[1].skip_reason == catalogue.cases[1].skip_reason


def test_a_real_cluster_run_s_tasks_and_workers_read_back() -> None:
    recorded = json.loads(RECORDED.read_text())
    assert _through_json(ClusterReport.from_dict(recorded)) == recorded  # the whole run, as it was written
    for task in recorded["tasks"]:
        assert ClusterTask.from_dict(task).to_dict() == task
    for worker in recorded["workers"]:
        assert WorkerSteps.from_dict(worker, recorded["api"]).to_dict() == worker
    unknown = {"task": 2, "steps": None, "losses": None, "global_steps": None, "steps_reported": 3}
    assert WorkerSteps.from_dict(unknown).to_dict() == unknown


def test_json_that_is_not_as_placement_writes_it_is_refused() -> None:
    with pytest.raises((TypeError, ValueError, KeyError)):
        Inspection.from_dict({"source": 1, "timeout_s": 1, "tasks": [], "complete": True})
    with pytest.raises((TypeError, ValueError, KeyError)):
        LinkTotal.from_dict({"from": CPU0, "to": CPU0, "copies": -1})



def test_a_check_s_result_and_a_diff_read_back() -> None:
    """The two outcomes made from whole reports: a check of the H200 tower log (a rule failed, by device)
    and the diff of two runs (moved, added and removed rows, by device)."""
    report = parse_paths([str(LOGS / "h200_tower.log")])
    result = judge(report, rules_from(max_on={"CPU": 0}, expect={"^MatMul$": "GPU:0"}))
    assert result.failures and CheckResult.from_dict(_through_json(result)).to_dict() == _through_json(result)
    old, new = read_pair(str(LOGS / "guide_matmul_plain.log"), str(LOGS / "h200_show.log"))
    diff = compare(old, new)
    assert diff.moved or diff.added or diff.removed
    assert _through_json(PlacementDiff.from_dict(_through_json(diff))) == _through_json(diff)


def test_a_demo_run_reads_back_with_each_step_s_result_by_its_kind() -> None:
    inventory = Inventory((PhysicalDevice("/physical_device:CPU:0", "CPU"),), (LogicalDevice("/device:CPU:0", "CPU", CPU0),))
    cluster = ClusterReport.from_dict(json.loads(RECORDED.read_text()))
    steps = tuple(DemoStep(i, key, key.title(), "why", "code", {"device": None}, outcome)
                  for i, (key, outcome) in enumerate((
                      ("devices", DemoOutcome(inventory, Message(N_("{count} devices"), count=1), ran=("inventory",))),
                      ("logging", DemoOutcome(tower_report())),
                      ("cluster", DemoOutcome(cluster, ok=False, problem="the cluster did not finish its steps")),
                      ("broken", DemoOutcome(None, ok=False, problem="ValueError: x"))), 1))
    run = DemoRun(0, "no GPU here", steps)
    again = DemoRun.from_dict(_through_json(run))
    assert _through_json(again) == _through_json(run)
    assert [type(s.outcome.result).__name__ for s in again.steps] == ["Inventory", "Report", "ClusterReport", "NoneType"]


def test_every_model_type_that_writes_json_reads_it() -> None:
    """One home for the schema: no model type writes JSON (``to_dict``) without reading it (``from_dict``)."""
    import importlib
    import inspect
    import pkgutil

    import placement_cli.model

    missing = []
    for info in pkgutil.iter_modules(placement_cli.model.__path__, "placement_cli.model."):
        for name, cls in inspect.getmembers(importlib.import_module(info.name), inspect.isclass):
            if cls.__module__ == info.name and hasattr(cls, "to_dict") and not hasattr(cls, "from_dict"):
                missing.append(f"{info.name}.{name}")
    assert missing == []
