"""The results of `errors` and `devices` as the model holds them: their JSON, and their tables in
English and Chinese, built without TensorFlow (the commands themselves run in test_run_commands.py)."""

from __future__ import annotations

import dataclasses
import io
import json

import pytest
from rich.console import Console

from placement_cli import i18n
from placement_cli.i18n import N_, Message
from placement_cli.lessons.failure_cases import CASES, NEEDS_SECOND_TYPE
from placement_cli.model import (DeviceMapping, FailureCase, FailureCatalogue, Inventory, LogicalDevice, PhysicalDevice,
                                 PlacementFailure, SoftRun)
from placement_cli.render.failure_cases import render_catalogue
from placement_cli.render.inventory import render_inventory
from reports import CPU0, placed


def _text(renderable: object) -> str:
    console = Console(file=io.StringIO(), width=200, color_system=None)
    console.print(renderable)
    return console.file.getvalue()


@pytest.fixture
def chinese() -> object:
    i18n.use("zh")
    yield
    i18n.use("en")


def _catalogue() -> FailureCatalogue:
    pinned = Message(N_("MatMul pinned to /cpu:7 when the session has {cpus} CPU devices"), cpus=2)
    failure = PlacementFailure("device_not_found", "[red]MatMul", "/device:CPU:7",
                               "Cannot assign a device for operation MatMul\nsecond line", (CPU0,))
    soft = SoftRun((placed("MatMul", "MatMul", CPU0, 1), placed(None, "_Arg", CPU0, 2)), [[22.0, 28.0]])
    return FailureCatalogue((
        FailureCase("cpu-out-of-range", pinned, "/cpu:7", ran=True, error_class="InvalidArgumentError",
                    error=failure, soft=soft),
        FailureCase("no-gpu-kernel", CASES[2].description, "/gpu:0", skip_reason=NEEDS_SECOND_TYPE),
        FailureCase("colocation-conflict", CASES[3].description, "/cpu:1", skip_reason="cannot build [bold]this"),
        FailureCase("malformed-gpu-index", CASES[4].description, "/gpu:x", ran=True, error_class="ValueError",
                    error=PlacementFailure("invalid_device_spec", None, "/gpu:x", "bad"),
                    soft=SoftRun(error_class="ValueError", message="bad")),
    ), ("set_device (Operation._set_device): missing",))


def test_the_errors_json_is_the_documented_schema_in_english() -> None:
    data = json.loads(json.dumps(_catalogue().to_dict()))
    assert list(data) == ["cases", "incomplete"]
    ran, skipped, unbuildable, refused = data["cases"]
    assert list(ran) == ["name", "description", "requested", "ran", "skip_reason", "error_class", "error", "soft"]
    assert ran["description"] == "MatMul pinned to /cpu:7 when the session has 2 CPU devices"
    assert ran["error"]["available_devices"] == [CPU0] and ran["error"]["node"] == "[red]MatMul"
    assert list(ran["soft"]) == ["placements", "result"] and ran["soft"]["result"] == [[22.0, 28.0]]
    assert [p["op"] for p in ran["soft"]["placements"]] == ["MatMul", "_Arg"]
    assert {"requested", "status", "reason"} <= set(ran["soft"]["placements"][0])  # placements as a run has them
    assert skipped["skip_reason"] == NEEDS_SECOND_TYPE.english and skipped["ran"] is False and skipped["soft"] is None
    assert unbuildable["skip_reason"] == "cannot build [bold]this"
    assert refused["soft"] == {"placements": [], "result": None, "error_class": "ValueError", "message": "bad"}
    assert data["incomplete"] == ["set_device (Operation._set_device): missing"]


def test_the_errors_tables_translate_the_cases_words_and_show_log_text_literally(chinese: object) -> None:
    shown = _text(render_catalogue(_catalogue()))
    assert "会话只有 2 个 CPU 设备时" in shown  # the description's template translated, its field kept
    assert NEEDS_SECOND_TYPE.shown() in shown and NEEDS_SECOND_TYPE.shown() != NEEDS_SECOND_TYPE.english
    assert "cannot build [bold]this" in shown and "[red]MatMul" in shown
    assert "second line" not in shown  # TensorFlow's first line only
    assert "_Arg" not in shown  # plumbing is not where the op ran


def test_the_errors_json_stays_english_whatever_the_language(chinese: object) -> None:
    assert _catalogue().to_dict()["cases"][1]["skip_reason"] == NEEDS_SECOND_TYPE.english
    assert "会话" not in json.dumps(_catalogue().to_dict(), ensure_ascii=False)


def _inventory(gpu_name: str | None = "NVIDIA [b]H100") -> Inventory:
    physical = (PhysicalDevice("/physical_device:CPU:0", "CPU"),
                PhysicalDevice("/physical_device:GPU:0", "GPU", gpu_name, "9.0"))
    logical = (LogicalDevice("/device:CPU:0", "CPU", CPU0),
               LogicalDevice("/device:GPU:0", "GPU", "/job:localhost/replica:0/task:0/device:GPU:0"))
    mapping = (DeviceMapping("/job:localhost/replica:0/task:0/device:GPU:0", "device: 0, name: NVIDIA H100"),)
    return Inventory(physical, logical, mapping, True)


def test_the_devices_json_gives_gpu_details_to_gpus_only() -> None:
    data = _inventory().to_dict()
    assert list(data) == ["physical", "logical", "device_mapping", "device_mapping_logged"]
    cpu, gpu = data["physical"]
    assert cpu == {"name": "/physical_device:CPU:0", "device_type": "CPU"}
    assert gpu == {"name": "/physical_device:GPU:0", "device_type": "GPU", "gpu_name": "NVIDIA [b]H100",
                   "compute_capability": "9.0"}
    assert data["logical"][0] == {"name": "/device:CPU:0", "device_type": "CPU", "canonical": CPU0}
    assert data["device_mapping"][0]["description"] == "device: 0, name: NVIDIA H100"
    assert _inventory(None).to_dict()["physical"][1]["gpu_name"] is None  # a GPU whose name is unknown says so


def test_the_devices_tables_show_the_gpu_and_hint_only_without_one() -> None:
    shown = _text(render_inventory(_inventory()))
    assert "NVIDIA [b]H100" in shown and "9.0" in shown and "device: 0, name: NVIDIA H100" in shown
    assert "--cpus N" not in shown
    cpu_only = Inventory((PhysicalDevice("/physical_device:CPU:0", "CPU"),), (), (), mapping_logged=True)
    shown = _text(render_inventory(cpu_only))
    assert "no known devices" in shown and "--cpus N" in shown
    assert "--cpus N" not in _text(render_inventory(cpu_only, hints=False))


@pytest.mark.parametrize("result", [_catalogue(), _catalogue().cases[0], _inventory(), _inventory().physical[1]])
def test_results_are_frozen(result: object) -> None:
    field = dataclasses.fields(result)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(result, field, None)
