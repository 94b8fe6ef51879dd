"""TensorFlow's XLA devices, a second device type where no GPU exists: the run commands take them in
their device options and turn them on before TensorFlow starts (after the user's own TF_XLA_FLAGS, and
for that start-up only); `errors` runs its no-kernel case on XLA_CPU where there is no GPU; a TensorFlow
that makes no XLA devices is said so, and the case is not run (a real start-up with the switch off).
The demo's kernel step: tests/test_demo.py."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from conftest import has_gpu, is_matmul, run_batch, run_cli
from placement_cli import devices
from placement_cli.runtime import startup

pytestmark = pytest.mark.tf

XLA = "/job:localhost/replica:0/task:0/device:XLA_CPU:0"
CPU = "/job:localhost/replica:0/task:0/device:CPU:"
RESULT = [[22.0, 28.0], [49.0, 64.0]]
USERS_FLAGS = "--tf_xla_auto_jit=0"  # a real XLA flag of the user's own, kept beside placement's switch


def _batch(*commands: list[str], **kwargs: Any) -> list[Any]:
    """One batch; where a GPU exists `errors` (whose start-up has no XLA devices there) in a batch of its own."""
    if not has_gpu():
        return run_batch(*commands, **kwargs)
    errors = iter(run_batch(*[c for c in commands if c[0] == "errors"], **kwargs))
    others = iter(run_batch(*[c for c in commands if c[0] != "errors"], **kwargs))
    return [next(errors if c[0] == "errors" else others) for c in commands]


@pytest.fixture(scope="module")
def with_xla() -> list[Any]:
    """One TensorFlow start-up with XLA devices, the user's TF_XLA_FLAGS kept: errors (which turns them on
    for its start-up where no GPU exists), then runs that name XLA_CPU in each device option and spelling."""
    return _batch(["errors", "--json"],
                     ["show", "--device", "/device:XLA_CPU:0", "--cpus", "2", "--json"],
                     ["show", "--mode", "eager", "--device", "xla_cpu:0", "--cpus", "2", "--json"],
                     ["show", "--device", "/device:XLA_CPU:9", "--cpus", "2", "--json"],
                     ["tower", "--devices", "/cpu:1,XLA_CPU:0", "--reduce-on", "/xla_cpu:0", "--cpus", "2", "--json"],
                     ["errors", "--lang", "zh"],
                     env={"TF_XLA_FLAGS": USERS_FLAGS})


@pytest.fixture(scope="module")
def catalogue(with_xla: list[Any]) -> dict[str, Any]:
    return {c["name"]: c for c in _json(with_xla[0])["cases"]}


def _json(proc: Any, code: int = 0) -> dict[str, Any]:
    assert proc.returncode == code, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_errors_catalogue_runs_every_case_for_real(catalogue: dict[str, Any]) -> None:
    assert {"missing-gpu", "cpu-out-of-range", "no-gpu-kernel", "colocation-conflict",
            "malformed-gpu-index", "malformed-device-type"} <= set(catalogue)
    assert all(case["ran"] for case in catalogue.values())
    missing = catalogue["missing-gpu"]
    assert missing["soft"]["result"] == RESULT
    assert catalogue["colocation-conflict"]["error"]["kind"] == "colocation"
    malformed = catalogue["malformed-gpu-index"]
    assert malformed["error_class"] == "ValueError" and malformed["error"]["node"] is None  # no op was made
    available = catalogue["cpu-out-of-range"]["error"]["available_devices"]
    assert f"{CPU}0" in available and f"{CPU}1" in available and f"{CPU}7" not in available
    # the XLA devices on for the no-kernel case move none of the other cases' ops: a pin to a device
    # that does not exist falls back to TensorFlow's first choice, GPU:0 where there is one (measured on
    # an H200: /gpu:2's and /cpu:7's ops), else CPU:0; the colocated group stays with its variable on CPU:0
    fallback = "/job:localhost/replica:0/task:0/device:GPU:0" if has_gpu() else f"{CPU}0"
    for name, where in (("cpu-out-of-range", fallback), ("missing-gpu", fallback), ("colocation-conflict", f"{CPU}0")):
        assert {p["canonical"] for p in catalogue[name]["soft"]["placements"]} == {where}, name


def test_errors_no_kernel_case_runs_on_a_gpu_or_on_xla_cpu(catalogue: dict[str, Any]) -> None:
    case = catalogue["no-gpu-kernel"]
    assert case["ran"] and case["error_class"] == "InvalidArgumentError" and case["error"]["kind"] == "no_kernel"
    fallen = [p for p in case["soft"]["placements"] if p["status"] == "soft fallback"]
    if has_gpu():  # beside a GPU no XLA devices: none in any case's device list (an XLA_GPU takes GPU memory)
        assert case["requested"] == "/gpu:0" and case["soft"]["result"] == "placement"
        listed = {d for c in catalogue.values() for d in ((c["error"] or {}).get("available_devices") or ())}
        assert listed and not any("XLA_" in d for d in listed), listed
        return
    assert case["requested"] == "/device:XLA_CPU:0" and "XLA_CPU:0, standing in for a GPU" in case["description"]
    assert case["error"]["node"] == "as_string" and XLA in case["error"]["available_devices"]
    assert "no supported kernel for XLA_CPU devices" in case["error"]["message"]
    assert case["soft"]["result"] == ["0", "1", "2"]
    assert [(p["node"], p["canonical"], p["reason"]) for p in fallen] == [
        ("as_string", f"{CPU}0", "no XLA_CPU kernel registered for AsString")]
    assert {p["canonical"] for p in case["soft"]["placements"] if p["node"].startswith("numbers")} == {XLA}


def test_errors_tables_name_the_stand_in_in_chinese(with_xla: list[Any]) -> None:
    proc = with_xla[5]
    assert proc.returncode == 0, proc.stderr[-3000:]
    if not has_gpu():
        assert "no-gpu-kernel: InvalidArgumentError" in proc.stdout and "XLA_CPU:0" in proc.stdout
        assert "没有" in proc.stdout and "AsString" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr


def test_show_runs_the_guides_matmul_on_xla_cpu_in_graph_and_eager_mode(with_xla: list[Any]) -> None:
    graph = _json(with_xla[1])
    assert graph["result"] == RESULT and graph["title"] == "Guide matmul (graph mode, all on /device:XLA_CPU:0)"
    assert [(p["node"], p["canonical"], p["status"]) for p in graph["placements"]] == [
        ("MatMul", XLA, "as requested"), ("a", XLA, "as requested"), ("b", XLA, "as requested")]
    assert {"device": XLA, "description": "device: XLA_CPU device"} in graph["device_mapping"]
    eager = _json(with_xla[2])  # /xla_cpu:0, which TensorFlow's parser refuses, handed to it as /device:XLA_CPU:0
    assert eager["result"] == RESULT and "/device:XLA_CPU:0" in eager["title"]
    matmuls = [p for p in eager["placements"] if p["kind"] == "eager" and is_matmul(p["op"])]
    assert matmuls and all((p["canonical"], p["status"]) == (XLA, "as requested") for p in matmuls)


def test_an_xla_device_that_does_not_exist_fails_as_a_missing_gpu_does(with_xla: list[Any]) -> None:
    proc = with_xla[3]
    data = _json(proc, code=1)
    assert data["result"] is None and data["errors"][0]["kind"] == "device_not_found"
    assert XLA in data["errors"][0]["available_devices"]
    assert "no XLA device here" not in proc.stderr  # XLA_CPU:0 exists: only :9 does not


def test_tower_takes_xla_devices_in_devices_and_reduce_on(with_xla: list[Any]) -> None:
    data = _json(with_xla[4])
    assert data["result"] == [[44.0, 56.0], [98.0, 128.0]]
    add = [p for p in data["placements"] if p["op"] == "AddN"]
    assert add and all(p["canonical"] == XLA and p["status"] == "as requested" for p in add)


@pytest.fixture(scope="module")
def without_xla() -> list[Any]:
    """A TensorFlow that makes no XLA devices, as a later version that dropped them would: placement's
    switch is turned off where it is added (a real start-up; every answer below is TensorFlow's)."""
    return _batch(["errors", "--json"], ["show", "--device", "/xla_cpu:0", "--cpus", "2"],
                     ["show", "--device", "/xla_cpu:0", "--cpus", "2", "--soft", "--json"],
                     xla_flag="--tf_xla_enable_xla_devices=false")


def test_without_xla_devices_the_no_kernel_case_says_why_it_is_not_run(without_xla: list[Any]) -> None:
    cases = {c["name"]: c for c in _json(without_xla[0])["cases"]}
    case = cases["no-gpu-kernel"]
    if has_gpu():
        assert case["ran"] and case["requested"] == "/gpu:0"
        return
    assert not case["ran"] and case["error"] is None and case["soft"] is None
    assert "makes no XLA devices" in case["skip_reason"] and "--tf_xla_enable_xla_devices" in case["skip_reason"]
    assert all(c["ran"] for name, c in cases.items() if name != "no-gpu-kernel")


def test_without_xla_devices_a_run_on_one_fails_and_says_why(without_xla: list[Any]) -> None:
    proc = without_xla[1]
    assert proc.returncode == 1  # as for a GPU that does not exist
    assert "device_not_found" in proc.stdout and "XLA_CPU:0" in proc.stdout
    assert "no XLA device here: this TensorFlow makes none" in proc.stderr
    soft = _json(without_xla[2])
    assert soft["result"] == RESULT and {p["status"] for p in soft["placements"]} == {"soft fallback"}
    assert "no XLA device here" in without_xla[2].stderr


# ------------------------------------------------------------ TF_XLA_FLAGS (no TensorFlow needed)

@pytest.mark.parametrize(("physical", "xla"), [(("CPU",), True), (("CPU", "GPU"), False), (("CPU", "GPU", "GPU"), False)])
def test_errors_turns_xla_devices_on_only_where_no_gpu_exists(physical: tuple[str, ...], xla: bool) -> None:
    """Beside a GPU every case's device list would name XLA_CPU:0 and XLA_GPU:0 (which takes GPU memory)."""
    from placement_cli.lessons import failure_cases

    assert failure_cases.options(physical) == startup.RunOptions(cpus=2, xla=xla)


@pytest.mark.parametrize(("flags", "on"), [(startup.XLA_SWITCH, True), (f"{startup.XLA_SWITCH}=true", True),
                                           (f"{startup.XLA_SWITCH}=false", False), ("--tf_xla_auto_jit=2", False),
                                           (f"{startup.XLA_SWITCH}=0 --x=1 {startup.XLA_SWITCH}=1", True)])
def test_the_switch_turned_on_after_the_gpus_were_counted_reads_as_tensorflow_would(flags: str, on: bool) -> None:
    """demo and errors count the GPUs first (TensorFlow reads TF_XLA_FLAGS then), and turn the XLA devices
    on afterwards only where the switch placement adds would have turned them on."""
    assert startup._turns_on(flags) is on


def test_the_switch_comes_after_the_users_own_flags(tmp_path: Path) -> None:
    assert startup.xla_flags(None) == startup.XLA_SWITCH == startup.xla_flags("  ")
    assert startup.xla_flags(" --tf_xla_auto_jit=2 ") == f"--tf_xla_auto_jit=2 {startup.XLA_SWITCH}"
    flags = tmp_path / "flags"
    flags.write_text("--tf_xla_auto_jit=2\n")
    assert startup.xla_flags(str(flags)) == f"--tf_xla_auto_jit=2 {startup.XLA_SWITCH}"  # a file of flags, read


@pytest.mark.parametrize("value", ["garbage", "no/such/file", " /tmp/flags", "tf_xla_enable_xla_devices"])
def test_a_file_of_flags_tensorflow_cannot_open_is_left_for_it_to_say_so(value: str) -> None:
    assert startup.xla_flags(value) == value


@pytest.mark.parametrize("value", ["/dev/null", "/"])
def test_an_empty_file_or_a_folder_is_no_flags_as_to_tensorflow(value: str) -> None:
    assert startup.xla_flags(value) == startup.XLA_SWITCH


class _Config:
    def __init__(self, seen: list[Any]) -> None:
        self.seen = seen

    def list_physical_devices(self) -> list[Any]:
        self.seen.append(os.environ.get("TF_XLA_FLAGS"))
        return []


@pytest.mark.parametrize("users", [None, "--tf_xla_auto_jit=2"])
def test_the_switch_is_in_the_environment_only_while_tensorflow_starts(monkeypatch, users: str | None) -> None:
    """Processes started later (a cluster's tasks, a traced script) never get it."""
    if users is None:
        monkeypatch.delenv("TF_XLA_FLAGS", raising=False)
    else:
        monkeypatch.setenv("TF_XLA_FLAGS", users)
    seen: list[Any] = []

    class FakeTF:
        config = _Config(seen)

    def import_tensorflow() -> Any:
        seen.append(os.environ.get("TF_XLA_FLAGS"))
        return FakeTF

    startup._switched_on(os.environ, import_tensorflow)
    assert seen == [startup.xla_flags(users)] * 2 and startup.XLA_SWITCH in seen[0]
    assert os.environ.get("TF_XLA_FLAGS") == users


@pytest.mark.parametrize(("value", "says"), [("--no_such_flag_here", "--no_such_flag_here"), ("garbage", '"garbage"')])
def test_a_tf_xla_flags_tensorflow_stops_on_shows_its_last_words(value: str, says: str) -> None:
    """TensorFlow ends the process itself (LOG(QFATAL), exit 1) for a flag it does not know or a file
    of flags it cannot open, while placement captures its output: the FATAL line still reaches the
    user, and the run is not exit 0."""
    proc = run_cli("show", "--json", env={"TF_XLA_FLAGS": value})
    assert proc.returncode != 0 and proc.stdout == ""
    assert "placement: TensorFlow ended the process: F" in proc.stderr and says in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(("given", "read"), [
    ("/device:XLA_CPU:0", "/device:XLA_CPU:0"), ("/xla_cpu:0", "/device:XLA_CPU:0"), ("XLA_CPU:0", "/device:XLA_CPU:0"),
    ("/device:xla_cpu:0", "/device:XLA_CPU:0"), ("/device:Xla_Cpu:1", "/device:XLA_CPU:1"),
    ("/job:localhost/device:xla_cpu:0", "/job:localhost/device:XLA_CPU:0"), ("/device:CPU:0", "/device:CPU:0"),
    ("/job:w/task:0/device:GPU:1", "/job:w/task:0/device:GPU:1")])
def test_every_spelling_of_an_xla_device_reaches_tensorflow_as_it_reads_it(given: str, read: str) -> None:
    """TensorFlow's parser knows XLA types in capitals after /device: only (a lowercase one it takes,
    then finds no such device): each spelling the options take is given to it in that form."""
    assert devices.xla_spelling(given) == read
